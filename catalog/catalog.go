package catalog

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Grain is the width of a rollup's time buckets.
type Grain string

// The grains a rollup can have, finest first.
const (
	Hour  Grain = "hour"
	Day   Grain = "day"
	Week  Grain = "week"
	Month Grain = "month"
)

// Grains lists the valid grains, finest first.
var Grains = []Grain{Hour, Day, Week, Month}

// ParseGrain returns the Grain named s.
func ParseGrain(s string) (Grain, error) {
	for _, g := range Grains {
		if string(g) == s {
			return g, nil
		}
	}
	return "", fmt.Errorf("unknown grain %q (want hour, day, week or month)", s)
}

// Rank orders grains: a bucket of grain g is contained in exactly one bucket
// of every grain h with h.Rank() > g.Rank(), except that weeks do not nest in
// months. It is -1 for an unknown grain.
func (g Grain) Rank() int {
	for i, x := range Grains {
		if x == g {
			return i
		}
	}
	return -1
}

// TimeType is the PostgreSQL type of a rollup's time column.
type TimeType string

// The time column types a rollup supports.
const (
	Date        TimeType = "date"
	Timestamp   TimeType = "timestamp without time zone"
	Timestamptz TimeType = "timestamp with time zone"
)

// Aggregate is what a measure column stores.
type Aggregate string

// Measure aggregates.
const (
	// HLL is a HyperLogLog sketch (postgresql-hll storage format, bytea) of
	// the distinct non-NULL values of the expression.
	HLL Aggregate = "hll"
	// Theta is a Theta sketch (Apache DataSketches compact serialization,
	// bytea) of the distinct non-NULL values of the expression, whose set
	// operations count overlaps.
	Theta Aggregate = "theta"
	// TopK is a frequent-items summary (sketch.Freq, bytea) of the rows'
	// values of the expression: the counts of the most frequent ones, with
	// bounds, from which a top-k's candidates are drawn.
	TopK Aggregate = "topk"
	// Count is count(expression); with expression "*" the bucket's row count.
	Count Aggregate = "count"
	// Sum, Min and Max are the partial aggregates of the expression.
	Sum Aggregate = "sum"
	Min Aggregate = "min"
	Max Aggregate = "max"
)

// Measure is one stored aggregate column of a rollup table.
type Measure struct {
	// Column is the column of the rollup table that holds the measure.
	Column    string
	Aggregate Aggregate
	// Expression is the base table expression aggregated: a column name,
	// or "*" for the row count.
	Expression string
	// Type is the PostgreSQL type of Expression in the base table
	// (format_type spelling, e.g. "bigint", "numeric(12,2)"); empty for "*".
	Type string
	// Log2m, Regwidth and Hash describe a sketch measure; zero otherwise.
	// Log2m is log2 of the sketch size: registers of an HLL measure,
	// nominal entries (lg_k) of a Theta measure, counters of a TopK one
	// (neither has a Regwidth).
	Log2m    int
	Regwidth int
	Hash     string
}

// StdErr is the relative standard error of a sketch measure's distinct
// count estimates: 1.04/√m for HLL, 1/√(k−1) for a Theta sketch (of a
// union; intersections and differences have more, see the sketch); 0 for
// other kinds.
func (m Measure) StdErr() float64 {
	switch {
	case m.Log2m <= 0:
		return 0
	case m.Aggregate == HLL:
		return 1.04 / math.Sqrt(float64(uint64(1)<<m.Log2m))
	case m.Aggregate == Theta:
		return 1 / math.Sqrt(float64(uint64(1)<<m.Log2m)-1)
	}
	return 0
}

// Table names a relation by schema and name, both unquoted.
type Table struct {
	Schema string
	Name   string
}

// String returns the table as a schema-qualified, quoted SQL identifier.
func (t Table) String() string { return QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) }

// Dimension is a grouping column of a rollup, copied from the base table.
type Dimension struct {
	Column string
	// Type is the column's PostgreSQL type (format_type spelling).
	Type string
	// DistinctValues is PostgreSQL's estimate of the column's distinct
	// values in the rollup table (pg_stats), 0 when it has none.
	DistinctValues float64
}

// Rollup is one row of the catalog with everything needed to plan against
// it, query it and refresh it.
type Rollup struct {
	Name   string
	Source Table
	// SourceOID is the base table's OID when the catalog was read (0 if it
	// no longer exists): a planner resolving an unqualified name along a
	// search_path can compare it with to_regclass's answer.
	SourceOID uint32
	// SourceRLS reports row-level security enabled on the base table: such
	// a rollup must never answer queries (create_rollup refuses these
	// tables, but security can be enabled later).
	SourceRLS bool
	// SourceColumns are the base table's column names, in order.
	SourceColumns []string
	// NotNull are the base table's columns declared NOT NULL (absent from
	// catalogs older than Theta measures: then none is known to be).
	NotNull []string
	// Table is the rollup table: one row per (bucket, dimensions...).
	Table Table
	// TimeColumn is the base table's time column and TimeType its type.
	TimeColumn string
	TimeType   TimeType
	Grain      Grain
	// TimeZone is the zone whose calendar cuts buckets of a timestamptz
	// time column; buckets of date and timestamp columns are cut on the
	// values themselves and TimeZone is UTC.
	TimeZone   string
	Dimensions []Dimension
	// Measures are the stored aggregates. The first is always the row
	// count (Aggregate Count, Expression "*", Column "row_count").
	Measures []Measure
	// Watermark is the end of the newest bucket the last refresh read
	// (never past the start of the bucket holding that refresh's now());
	// buckets starting before it are materialized, but for those the
	// change log (pgsketch.rollup_dirty) lists. Zero before the first
	// refresh. For a date or timestamp time column it is the wall-clock
	// bucket end read as UTC (2026-01-02 00:00 is 2026-01-02 00:00:00Z).
	// Base rows whose time column is NULL are never in the rollup.
	Watermark time.Time
	// LateWindow is how far before the watermark an incremental refresh
	// re-reads base rows (at least one bucket).
	LateWindow time.Duration
	// Version is bumped by every refresh that changes the rollup's rows.
	Version int64
	// Rows is the rollup table's estimated row count (pg_class.reltuples,
	// or the exact count after a refresh), used to prefer smaller rollups.
	Rows int64
	// CaptureBroken says why the rollup's change capture is not in place
	// (its source dropped or swapped, partitions changed, triggers
	// disabled, never refreshed with capture), or is empty when it is: only
	// then do its rows and the change log describe the source.
	CaptureBroken string
	// Collated are the source columns, among the dimensions and the
	// columns of min, max and top-k measures, whose collation is not the
	// database's default (CollationQuery; WithCollated sets them). The
	// rollup table's columns, and the arrays the merged groups are
	// shaped from, have the default collation: ordering and case mapping
	// over them would not be the column's.
	Collated []string
	// Levels are the rollup's built levels, coarsest first: tables of the
	// same columns holding, per bucket of a coarser grain, the merge of the
	// rollup's rows in it (pgsketch.add_rollup_level). The refresher
	// rebuilds them in the rollup's own transactions.
	Levels []Level
	// Inserts is the table of the rows inserted into the source since the
	// refresh that built their buckets (pgsketch.inserts_<rollup>), or nil
	// where the catalog has none: the capture triggers copy a small INSERT
	// statement's rows there instead of logging their buckets, and an
	// answer adds them to the rollup rows of the buckets the change log
	// does not list. It has the columns the rollup reads, under the
	// source's names and types, and bucket, the bucket of each row as the
	// change log names it (an instant; for date and timestamp columns the
	// wall-clock start read as UTC).
	Inserts *Table
	// Distributed says the source is a table Citus distributes by hash,
	// whose changes the capture triggers on its shards log in a table of
	// their own (pgsketch.log_<rollup>), distributed with it; an answer
	// reads its buckets through pgsketch.shard_logged beside the change
	// log's.
	Distributed bool
	// LoggedCheck says the catalog has pgsketch.capture_check_logged,
	// the capture check of a statement that counts the changed buckets it
	// reads itself.
	LoggedCheck bool
	// CaptureInPlace says the catalog has the view
	// pgsketch.capture_in_place, which a statement reads to pass the
	// capture check in plain SQL (calling pgsketch.capture_check_inserts
	// only where the view does not say yes), and that Citus is not
	// installed, where the view never says yes.
	CaptureInPlace bool
	// FirstSeen is the rollup's first-seen bookkeeping, or nil where it
	// keeps none.
	FirstSeen *FirstSeen
}

// FirstSeen is a rollup's first-seen bookkeeping (pgsketch.add_first_seen):
// each value of Key's first bucket, kept exactly by the refresher, and
// how many values each bucket holds first, which pgsketch.first_seen
// returns for a range of whole buckets.
type FirstSeen struct {
	// Key is the source column whose values are counted (a user).
	Key string
	// Built says the tables were built at the rollup's version (else
	// pgsketch.first_seen refuses until the next refresh).
	Built bool
}

// Level is one level of a rollup.
type Level struct {
	Grain Grain
	Table Table
}

// BucketColumn is the name of the rollup table column holding each row's
// bucket start.
const BucketColumn = "bucket"

// RowCountColumn is the name of the rollup table column holding each
// bucket's row count.
const RowCountColumn = "row_count"

// Refreshed reports whether the rollup has been refreshed at least once.
func (r *Rollup) Refreshed() bool { return !r.Watermark.IsZero() }

// Dimension returns the dimension named col, if the rollup has it.
func (r *Rollup) Dimension(col string) (Dimension, bool) {
	for _, d := range r.Dimensions {
		if d.Column == col {
			return d, true
		}
	}
	return Dimension{}, false
}

// Reads reports whether the rollup reads base table column col: its time
// column, a dimension, or a measure's column (pgsketch.read_columns, whose
// declarations the change capture's fingerprint holds).
func (r *Rollup) Reads(col string) bool {
	if col == r.TimeColumn {
		return true
	}
	if _, ok := r.Dimension(col); ok {
		return true
	}
	for _, m := range r.Measures {
		if m.Expression == col {
			return true
		}
	}
	return false
}

// Measure returns the measure of kind k over expression expr.
func (r *Rollup) Measure(k Aggregate, expr string) (Measure, bool) {
	for _, m := range r.Measures {
		if m.Aggregate == k && m.Expression == expr {
			return m, true
		}
	}
	return Measure{}, false
}

// NoCapture is Rollup.CaptureBroken for a catalog older than change
// capture, which has no pgsketch.capture_check for a fetch to call.
const NoCapture = "the catalog has no change capture (run pgsketch-proxy migrate up)"

// Snapshot is the whole catalog at one instant. It is immutable once built.
type Snapshot struct {
	rollups  []*Rollup
	bySource map[Table][]*Rollup
	hll      Extension
}

// Extension is the postgresql-hll extension as a database has it; the
// zero value means it is not installed.
type Extension struct {
	// Schema holds the extension's type and functions.
	Schema string
	// Version is its extversion, e.g. "2.17".
	Version string
}

// Installed reports whether the database has the extension.
func (e Extension) Installed() bool { return e.Schema != "" }

// ExtensionQuery returns one row (schema, version) when the database has
// the hll extension, none otherwise.
const ExtensionQuery = `SELECT n.nspname, e.extversion FROM pg_catalog.pg_extension AS e
 JOIN pg_catalog.pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'hll'`

// WithHLL returns a copy of s that records the database's hll extension.
func (s *Snapshot) WithHLL(e Extension) *Snapshot {
	if s == nil {
		s = NewSnapshot(nil)
	}
	c := *s
	c.hll = e
	return &c
}

// HLL returns the database's hll extension (the zero Extension if it has
// none).
func (s *Snapshot) HLL() Extension {
	if s == nil {
		return Extension{}
	}
	return s.hll
}

// CollationQuery returns one row (rollup name, column) per source column
// of a rollup that is a dimension or the column of a min, max or top-k
// measure (whose values a top-k answer orders and compares)
// and whose collation is neither none (0) nor the database's default
// (DEFAULT_COLLATION_OID, 100 in every database). It reads what
// pgsketch.catalog() reads, so a role that may run one may run the other.
const CollationQuery = `SELECT d.name, a.attname::text
 FROM pgsketch.rollup_defs AS d
 JOIN pg_catalog.pg_namespace AS n ON n.nspname = d.source_schema
 JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = d.source_table
 JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid
 WHERE a.attnum > 0 AND NOT a.attisdropped AND a.attcollation <> 0 AND a.attcollation <> 100
   AND (a.attname::text = ANY (d.dimensions)
        OR a.attname::text IN (SELECT m.expression FROM pgsketch.rollup_measures AS m
                                WHERE m.rollup = d.name AND m.kind IN ('min', 'max', 'topk')))
 ORDER BY 1, 2`

// WithCollated returns a copy of s whose rollups have the Collated
// columns that cols (rollup name → columns, CollationQuery's rows) lists.
func (s *Snapshot) WithCollated(cols map[string][]string) *Snapshot {
	if s == nil || len(cols) == 0 {
		return s
	}
	out := make([]*Rollup, len(s.rollups))
	for i, r := range s.rollups {
		if c, ok := cols[r.Name]; ok {
			cp := *r
			cp.Collated = c
			r = &cp
		}
		out[i] = r
	}
	n := NewSnapshot(out)
	n.hll = s.hll
	return n
}

// NewSnapshot builds a snapshot from rollups, which it keeps; callers must
// not modify them afterwards.
func NewSnapshot(rollups []*Rollup) *Snapshot {
	s := &Snapshot{rollups: rollups, bySource: make(map[Table][]*Rollup)}
	sort.Slice(s.rollups, func(i, j int) bool { return s.rollups[i].Name < s.rollups[j].Name })
	for _, r := range s.rollups {
		s.bySource[r.Source] = append(s.bySource[r.Source], r)
	}
	return s
}

// Rollups returns every rollup, sorted by name.
func (s *Snapshot) Rollups() []*Rollup {
	if s == nil {
		return nil
	}
	return s.rollups
}

// Rollup returns the rollup called name.
func (s *Snapshot) Rollup(name string) (*Rollup, bool) {
	for _, r := range s.Rollups() {
		if r.Name == name {
			return r, true
		}
	}
	return nil, false
}

// ForSource returns the rollups over the base table t, sorted by name.
func (s *Snapshot) ForSource(t Table) []*Rollup {
	if s == nil {
		return nil
	}
	return s.bySource[t]
}

// HasSource reports whether any rollup reads table t; a rewriter uses it to
// resolve an unqualified table name against a search_path.
func (s *Snapshot) HasSource(t Table) bool { return len(s.ForSource(t)) > 0 }
