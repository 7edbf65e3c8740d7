package plan

import (
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
)

// CellsRelation is the relation a Retention plan's ShapeSQL and
// PeriodCondSQL read: columns pgsketch_a (set 1's period), pgsketch_b (set
// 2's) and pgsketch_n (the count, bigint).
const CellsRelation = "pgsketch_cells"

// Op is how the executor merges one output aggregate across the rows of a
// group (rollup rows and base rows alike).
type Op string

const (
	// MergeHLL unions the sketches in the rollup half's column (a bytea[]
	// of postgresql-hll sketches) with the hashes of the values in the base
	// half's column (an array of distinct values, hashed per docs/design.md §2.2),
	// and estimates: a bigint.
	MergeHLL Op = "hll"
	// MergeTheta unions Theta sketches (Apache DataSketches compact
	// serialization) as MergeHLL unions HLL ones, the base half's values
	// hashed as Agg.ValueForm says; the merged sketch is an Overlap plan
	// arm's result.
	MergeTheta Op = "theta"
	// MergeFreq merges frequent-items summaries (sketch.Freq) as MergeTheta
	// merges Theta sketches; the base half's column is an array of the
	// rows' non-NULL values (not distinct), and the column after it the
	// number of rows whose value is NULL. Agg.Log2m is log2 of the
	// summaries' counters, Agg.ValueForm how a value becomes an item
	// (int2, int4, int8: the integer's 8 big-endian bytes as an int64;
	// text: the string's bytes). The merged summaries are a TopK plan
	// arm's result.
	MergeFreq Op = "freq"
	// AddCounts adds the column over all rows: a bigint, 0 for no rows
	// (COUNT(*), COUNT(x)).
	AddCounts Op = "count"
	// AddSums adds the non-NULL values of the column: NULL when all are
	// NULL (SUM).
	AddSums Op = "sum"
	// TakeMin and TakeMax keep the least and greatest non-NULL value.
	TakeMin Op = "min"
	TakeMax Op = "max"
	// Exact takes the value from ExactSQL's row with the same group keys
	// (NULL keys equal), or its only row when there are no keys.
	Exact Op = "exact"
)

// Rollup is a plan that answers its query from one rollup.
//
// The executor:
//  1. runs FetchSQL (one statement, so that now(), parameters, the
//     snapshot and the watermark are the same for the rollup half and the
//     base half) with the client's parameters listed in FetchParams; every
//     row has PartColumn ('rollup' or 'base'),
//     then one column per group key, then the aggregates' columns;
//  2. merges the rows per group (equal keys, NULLs equal) with each Agg's Op;
//     with no Keys there is exactly one group, even for no rows;
//  3. if ExactSQL is set, runs it (keys, then one column per Exact agg) and
//     joins it to the groups on the keys;
//  4. runs ShapeSQL over the groups (see Groups).
type Rollup struct {
	Head
	Groups
	// Table is the rollup's table.
	Table catalog.Table
	Grain catalog.Grain
	// TimeZone is the zone the rollup cuts timestamptz buckets in.
	TimeZone string
	// Version is the rollup's catalog version the plan was made against.
	// FetchSQL reads the watermark from pgsketch.rollup_defs itself, and
	// only while the rollup's version is at least this one (see
	// TimeSplit.Watermark).
	Version int64
	// Watermark and LateWindow are the rollup's, as the catalog snapshot
	// had them: buckets before Watermark are materialized, but rows that
	// arrive late, up to LateWindow before it, reach the rollup only at
	// its next refresh. An executor that must see them can read
	// [Watermark - LateWindow, ∞) from the base table instead.
	Watermark  time.Time
	LateWindow time.Duration
	// FetchParams and ExactParams list the $n each statement references
	// (ascending): bind only those, or PostgreSQL cannot infer the types
	// of the others.
	FetchParams, ExactParams []int
	// Lifted are the literals of the query's time bounds, which the fetch
	// binds as parameters after the client's ($Params+1, ...; text, of
	// the type PostgreSQL infers), so that its text is the same for every
	// range of one query shape.
	Lifted []string
	// Filters are the WHERE conjuncts applied to both halves (dimension
	// predicates and bucket-constant time predicates), as written.
	Filters []string
	// Time splits the query's time range between rollup and base rows.
	Time TimeSplit
	// FetchSQL, ExactSQL (empty if no Exact agg): see above.
	FetchSQL string
	// Fetch is FetchSQL (and ServerFetchSQL) in pieces, for an executor
	// that adds a condition to the rollup arm (the rollup-row cache).
	Fetch Fetch
	// Cache says whether the rollup half's rows may be kept between
	// statements, and which of the client's parameters they depend on.
	Cache Cacheability
	// ServerFetchSQL is FetchSQL with the rollup half's sketches merged by
	// PostgreSQL per group (hll_union_agg of the hll extension; a one-element
	// bytea[] per group in the same column); empty when the database has no
	// hll extension or the plan merges no sketches. It binds the same
	// parameters as FetchSQL.
	ServerFetchSQL string
	// Merge is the strategy chosen for the rollup half's sketches, and
	// MergeReason why (see chooseMerge). MergeServer with an empty
	// ServerFetchSQL (pgsketch.merge = server without the extension) must
	// fail with an error, not run.
	Merge       Merge
	MergeReason string
	// RowsPerGroup estimates the rollup (or level) rows one output group
	// merges, 0 when unknown; RowsPerGroupNote says how it was estimated,
	// or why it could not be (see rowsPerGroup).
	RowsPerGroup     float64
	RowsPerGroupNote string
	// Level, when set, is the rollup's level the rollup half reads its
	// whole level buckets from (the rest of the range from Table).
	Level *catalog.Level
	// RunLevels, when set, are the levels the rollup half chooses from as
	// the fetch runs, coarsest first (Level is the first): a range given
	// by now() or a parameter is known only then. It reads the coarsest
	// whose whole buckets the range holds, else the finest.
	RunLevels []catalog.Level
	// Inserts is the rollup's table of inserted rows, which the fetch reads
	// for the buckets of the rollup arm (catalog.Rollup.Inserts), or nil.
	Inserts *catalog.Table
	// ShardLog is the change log the capture triggers on a distributed
	// source's shards write (catalog.Rollup.Distributed), which the fetch
	// reads beside pgsketch.rollup_dirty, or empty.
	ShardLog string
	// BaseRead, when set, reads the base rows in a statement of its own,
	// after the fetch and in its transaction (see BaseRead).
	BaseRead *BaseRead
	ExactSQL string
}

// BaseRead is how a fetch over a source Citus distributes reads its base
// rows: in a second statement. The fetch itself (FetchSQL) then reads only
// the coordinator's tables (the rollup rows, the change logs through
// pgsketch.shard_logged, the info row) and returns, in place of the base
// rows, one row per span it would have read (SpanPrefix). The executor
// runs SQL after it in the same transaction (Head.OwnSnapshot: one
// snapshot), the spans bound as arrays. Citus runs that statement on each
// shard, joined to the spans, and combines the shards' aggregates (arrays
// of values, not DISTINCT ones, which Citus would gather row by row); as
// one statement with the coordinator's tables, Citus split it into about
// ten subplans (a month by country: about a second, against 20-25 ms).
type BaseRead struct {
	SQL string
	// Params lists the client's $n SQL references; it binds the lifted
	// literals after the client's parameters as the fetch does, then the
	// spans' firsts and lasts as $SpansParam and $SpansParam+1, arrays of
	// SpanType (binary).
	Params     []int
	SpansParam int
	SpanType   string
	// Always: SQL runs even when the fetch returned no span (it reads the
	// rows whose time is NULL).
	Always bool
}

// SpanPrefix starts the part column of a fetch row that names a span of
// base rows for BaseRead: then the span's first and last, each as the hex
// digits of its binary form (timestamp_send or timestamptz_send, 8 bytes).
const SpanPrefix = "pgsketch_span:"

// Groups are the merged groups a plan shapes into its answer: ShapeSQL
// selects from a relation named GroupsRelation with one column per key
// (Key.Name) and per agg (Agg.Name), in that order, and restores the
// query's select list, HAVING, ORDER BY and LIMIT: e.g. "WITH
// pgsketch_groups(pgsketch_k1, pgsketch_a1) AS (SELECT * FROM
// unnest($N+1::timestamptz[], $N+2::bigint[])) " + ShapeSQL, with N the
// plan's Params, binding the client's parameters as $1..$N. Key types are
// those the fetch returned (or Key.Type); agg types are Agg.Type.
type Groups struct {
	// Keys are the group keys, in GROUP BY order.
	Keys []Key
	// Aggs are the output aggregates, in order of first appearance.
	Aggs     []Agg
	ShapeSQL string
	// ShapeParams lists the client's $n ShapeSQL references.
	ShapeParams []int
	// ShapeCache, when set, says whether ShapeSQL's answer may be kept
	// between queries (with its Params, the client's $n it reads): it
	// reads only the merged groups and the parameters, and calls nothing
	// whose value changes from one statement to the next. Nil: never.
	ShapeCache *Cacheability
	// Columns, when set, is all ShapeSQL does: one row per merged group
	// holding these of its columns, in this order. The query's select
	// list is its keys and aggregates as they are, and it has no HAVING,
	// ORDER BY, LIMIT, OFFSET or DISTINCT. The executor may build those
	// rows itself instead of running ShapeSQL.
	Columns []Column
}

// Column is one output column of a shape that only selects the merged
// groups' columns (Groups.Columns).
type Column struct {
	// Of is the group column it holds: Keys[Of], or Aggs[Of-len(Keys)].
	Of int
	// Name is the column's name in the answer.
	Name string
}

// Cacheability is whether a fetch's rollup half may come from the proxy's
// cache: its rows are decided by the statement's text, the client's
// parameters, the session's settings and the token (the rollup's version,
// its buckets in range and the change log's entries) alone.
type Cacheability struct {
	// Why says why not, "" when it may.
	Why string
	// Params are the client's $n the rollup half's keys and filters read:
	// a value that names a relative time ('now', 'today', ...) keeps the
	// statement from the cache, as PostgreSQL reads it when it runs.
	Params []int
}

// Fetch is the fetch statement, built from structure: WITH With, then the
// rollup arm, SELECT Cols FROM From WHERE Filters AND Range GROUP BY
// GroupBy, then Rest, the base arms and the info row (a UNION ALL each).
type Fetch struct {
	// With are the statement's common table expressions: BoundsRelation,
	// LogRelation and SpansRelation.
	With []CTE
	// Cols is the rollup arm's select list with the rollup rows' sketches
	// merged in the proxy; ServerCols with them merged by PostgreSQL (nil
	// when it cannot).
	Cols, ServerCols []string
	// From is the rollup arm's FROM item: the rollup table, or its rows
	// and a level's, as r.
	From string
	// Filters are the query's own conditions on the rollup rows; Range
	// selects the buckets of the query's range (the bucket bounds and the
	// change log's exclusions). From holds only what Range holds besides
	// the tables.
	Filters, Range []string
	// GroupBy lists the rollup arm's GROUP BY items.
	GroupBy []string
	// Rest follows the rollup arm.
	Rest []Select
	// Inserts, when set, follows Rest: the arm reading the rollup's
	// inserted rows (Rollup.Inserts) of the rollup arm's buckets, its rows
	// marked InsertedPart.
	Inserts *Select
	// Last are the arms printed after all others (the arms an executor
	// adds too): arms whose columns are NULL where the base rows' are not
	// (a fetch without base arms, Rollup.BaseRead), which, before the
	// inserted rows' arm, would make the UNION ALL type those columns
	// text.
	Last []Select
}

// CTE is one common table expression: Name AS (SQL), or Name(Cols) AS
// (SQL) when Cols names its columns.
type CTE struct {
	Name string
	Cols []string
	SQL  string
}

// Select is one SELECT of a UNION ALL; From is empty for none.
type Select struct {
	Cols    []string
	From    string
	Where   []string
	GroupBy []string
}

// SQL prints the SELECT.
func (s Select) SQL() string {
	var b strings.Builder
	s.write(&b)
	return b.String()
}

func (s Select) write(b *strings.Builder) {
	b.WriteString("SELECT ")
	joinTo(b, s.Cols, ", ")
	if s.From != "" {
		b.WriteString(" FROM ")
		b.WriteString(s.From)
	}
	if len(s.Where) > 0 {
		b.WriteString(" WHERE ")
		joinTo(b, s.Where, " AND ")
	}
	if len(s.GroupBy) > 0 {
		b.WriteString(" GROUP BY ")
		joinTo(b, s.GroupBy, ", ")
	}
}

func joinTo(b *strings.Builder, xs []string, sep string) {
	for i, x := range xs {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(x)
	}
}

// SQL prints the fetch statement, with the server's merge of the
// sketches when server is set, cond (unless empty) as the rollup arm's
// last condition, and more arms after Rest.
func (f Fetch) SQL(server bool, cond string, more ...Select) string {
	where := make([]string, 0, len(f.Filters)+len(f.Range)+1)
	where = append(append(where, f.Filters...), f.Range...)
	rollup := Select{Cols: f.Cols, From: f.From, Where: where, GroupBy: f.GroupBy}
	if server {
		rollup.Cols = f.ServerCols
	}
	if cond != "" {
		rollup.Where = append(rollup.Where, cond)
	}
	var b strings.Builder
	b.Grow(4096)
	for i, c := range f.With {
		if i == 0 {
			b.WriteString("WITH ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(c.Name)
		if len(c.Cols) > 0 {
			b.WriteString("(")
			joinTo(&b, c.Cols, ", ")
			b.WriteString(")")
		}
		b.WriteString(" AS (")
		b.WriteString(c.SQL)
		b.WriteString(")")
	}
	if len(f.With) > 0 {
		b.WriteString(" ")
	}
	rollup.write(&b)
	arms := [][]Select{f.Rest, more, f.Last}
	if f.Inserts != nil {
		arms = [][]Select{f.Rest, {*f.Inserts}, more, f.Last}
	}
	for _, arms := range arms {
		for _, s := range arms {
			b.WriteString(" UNION ALL ")
			s.write(&b)
		}
	}
	return b.String()
}

// BoundsRelation is the fetch's one-row relation of the range's bounds,
// computed once per statement: lo and hi, the buckets [lo, hi) read from
// the rollup (lo only when the range has a lower bound, hi never after the
// watermark), and lhi, the end of the whole level buckets read from a
// level. The arms read them as uncorrelated subqueries, which PostgreSQL
// evaluates once and uses for index ranges and partition pruning.
const BoundsRelation = "bounds"

// LogRelation is the fetch's relation of the distinct buckets in [lo, hi)
// the change log lists: column bucket (the rollup's bucket; for date and
// timestamp columns a timestamp, the log's instant read in UTC), and
// level, its level bucket, when the fetch reads a level.
const LogRelation = "logged"

// SpansRelation is the fetch's relation of the spans of base rows it
// reads: the rows whose bucket starts in [first, last] (the range's edges,
// the tail from hi, and each bucket LogRelation lists).
const SpansRelation = "spans"

// PartColumn is the name of FetchSQL's first column, 'rollup' or 'base'.
const PartColumn = "pgsketch_part"

// GroupsRelation is the relation ShapeSQL reads the merged groups from.
const GroupsRelation = "pgsketch_groups"

// Key is one group key.
type Key struct {
	// Name is the key's column in GroupsRelation.
	Name string
	// Expr is the key as written in the query; Rollup and Base are how
	// FetchSQL computes it over rollup rows (r) and base rows (t).
	Expr, Rollup, Base string
	// Type, when set, is the SQL type GroupsRelation gives the key (a
	// TopK plan's item, bound as text when counts come from summaries).
	Type string
}

// Agg is one output aggregate.
type Agg struct {
	// Name is the aggregate's column in GroupsRelation.
	Name string
	// Expr is the aggregate as written in the query.
	Expr string
	Op   Op
	// Measure is the rollup column merged (empty for Exact).
	Measure string
	// Base is the base table expression read for edge and tail rows.
	Base string
	// RollupColumn and BaseColumn index FetchSQL's columns read by Op over
	// rollup rows and base rows (the same column for all but MergeHLL);
	// ExactColumn indexes ExactSQL's columns. -1 when unused.
	RollupColumn, BaseColumn, ExactColumn int
	// Type is the SQL type of the merged value.
	Type string
	// Log2m, Regwidth and Hash describe the sketches merged by MergeHLL;
	// Log2m (the lg_k) and Hash those merged by MergeTheta.
	Log2m, Regwidth int
	Hash            string
	// Sketch, on a MergeHLL agg, makes the group's value the merged
	// sketch's bytes (postgresql-hll's storage format, bytea; NULL for no
	// sketch) instead of its estimate: a Nested plan's outer statement
	// unites them further (hll_union_agg).
	Sketch bool
	// ValueForm says how MergeTheta hashes a base row's value, given as
	// its text: int2, int4 or int8 (the integer's 2, 4 or 8 little-endian
	// bytes) or text (the string's bytes).
	ValueForm string
}

// Bound is one bound on the time column from the query's WHERE clause.
type Bound struct {
	SQL       string
	Inclusive bool
}

// TimeSplit is how the query's time range is split: buckets starting in
// [BucketsFrom, BucketsTo) are read from the rollup; base rows in the
// query's range before BucketsFrom or at or after BucketsTo are read from
// the base table. Both are SQL expressions FetchSQL evaluates once, in
// BoundsRelation, and reads from there.
type TimeSplit struct {
	Column       string
	Lower, Upper []Bound
	BucketsFrom  string
	BucketsTo    string
	// LowerEdge and UpperEdge are conditions on BoundsRelation's lo and
	// hi, true when the query's range can hold rows before BucketsFrom
	// (after BucketsTo): the span of an edge is read only when its
	// condition holds, which PostgreSQL evaluates once, so that a
	// bucket-aligned range scans no edge (which matters most where the
	// time column has no index). Empty: no check.
	LowerEdge, UpperEdge string
	// Watermark is the SQL expression FetchSQL reads the rollup's
	// watermark with (from pgsketch.rollup_defs, in the statement's
	// snapshot).
	Watermark string
	// Logged is an SQL expression of the buckets in [BucketsFrom,
	// BucketsTo) the change log lists (LogRelation), which are read from
	// the base table, not the rollup: their starts in order, as epoch
	// seconds, comma-separated (NULL for none). DirtyFrom and DirtyTo
	// bound them in the log's terms (instants; DirtyFrom NULL when the
	// range has no lower bound).
	Logged, DirtyFrom, DirtyTo string
}

// InsertedPart is the part column of the fetch's rows read from the
// rollup's inserted rows (Fetch.Inserts).
const InsertedPart = "inserted"

// InfoPrefix starts the part column of the fetch's info row, followed by
// the number of changed buckets of the range read from the base table.
const InfoPrefix = "pgsketch_info:"

// NotSource follows InfoPrefix in place of the count when the statement's
// unqualified table name is not the rollup's source on the session's
// search_path (Head.Guard's condition): the answer is PostgreSQL's.
const NotSource = "not the source"

// TopK modes, the values of Session.TopK.
const (
	// TopKVerified answers only what the summaries' bounds prove exact:
	// candidates counted exactly by CountSQL (the default, "").
	TopKVerified = "verified"
	// TopKApprox answers with the summaries' counts and bounds.
	TopKApprox = "approx"
	// TopKOff passes top-k queries through.
	TopKOff = "off"
)

// TopKSpec is how a TopK plan's answer is made.
//
// The merged summaries (one per group of the other keys) track items with
// bounds on their counts, and bound every untracked item's by their
// MaxError. In verified mode the executor counts candidate items exactly
// with CountSQL and shapes those counts; the answer is PostgreSQL's when
// every (group, item) pair left uncounted is bounded below the proof's
// cut: the Limit-th largest exact count (strictly below it when TotalOrder,
// as an uncounted pair tied with it could then take its place), or
// Threshold. In approx mode it shapes the summaries' lower bounds.
type TopKSpec struct {
	// Item is the item column as the query writes it, ItemKey its index in
	// Plan.Keys, ItemType its type's name, ItemForm how it is an item
	// (Agg.ValueForm).
	Item     string
	ItemKey  int
	ItemType string
	ItemForm string
	// Limit is LIMIT plus OFFSET (0 for a threshold query); Threshold the
	// least count HAVING keeps (0 for none).
	Limit, Threshold int64
	// TotalOrder is set when ORDER BY goes on after the count (to break
	// ties): then which of the rows tied at the cut are answered matters.
	TotalOrder bool
	// CountSQL counts candidates exactly: the query's FROM and WHERE with
	// the item in $Params+1 (an array of ArrayType), and the NULL item too
	// when $Params+2 (a boolean) is true, grouped by Plan.Keys (in that
	// order), returning their values and count(*). CountParams lists the
	// client's parameters it references.
	CountSQL    string
	CountParams []int
	// ArrayType is the type the candidates are bound as: bigint[] for
	// integer items, text[] for strings.
	ArrayType string
}
