package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// The fetch statement reads, in one statement (one snapshot, one
// watermark), the rollup's whole buckets of the query's range, the base
// rows at the edges of the range and after the last bucket, the base rows
// of the buckets the change log lists, and the info row. Its bounds are
// computed once, in plan.BoundsRelation, and read from there; the
// literals of the query's time bounds are parameters, so that the
// statement's text is the same for every range of one query shape.

// boundsRef reads column col of plan.BoundsRelation, which then holds it.
func (m *matcher) boundsRef(col string) string {
	if m.bounds == nil {
		m.bounds = map[string]bool{}
	}
	m.bounds[col] = true
	return "(SELECT " + col + " FROM " + plan.BoundsRelation + ")"
}

// liftBounds numbers the string literals of the query's time bounds as
// the parameters the fetch binds after the statement's own (m.lift,
// p.Lifted).
func (m *matcher) liftBounds(p *plan.Rollup) {
	m.lift = map[*syntax.Const]int{}
	for _, b := range slices.Concat(m.lower, m.upper) {
		c, ok := b.expr.(*syntax.Const)
		if !ok || c.Type != "str" {
			continue
		}
		if _, done := m.lift[c]; !done {
			p.Lifted = append(p.Lifted, c.Val)
			m.lift[c] = m.sess.params + len(p.Lifted)
		}
	}
}

// boundSQL is bound b as the fetch writes it: a lifted literal as its
// parameter.
func (m *matcher) boundSQL(b bound) string {
	if c, ok := b.expr.(*syntax.Const); ok && m.lift[c] > 0 {
		return "$" + strconv.Itoa(m.lift[c])
	}
	return b.SQL
}

// timeTypes are the type bucket arithmetic runs on (typ) and the time
// column's (colType), or ok false for a column type no rollup supports.
func timeTypes(t catalog.TimeType) (typ, colType string, ok bool) {
	switch t {
	case catalog.Timestamptz:
		return "timestamptz", "timestamptz", true
	case catalog.Timestamp:
		return "timestamp", "timestamp", true
	case catalog.Date:
		// Bucket arithmetic on a date column runs on timestamps (date_trunc
		// has no date form), but bounds keep the types PostgreSQL gives
		// them in the query (see typedBound).
		return "timestamp", "date", true
	}
	return "", "", false
}

// typedBound is bound b as PostgreSQL types it when comparing it with the
// column, cast to typ, the type bucket arithmetic runs on: a parameter is
// inferred, and an untyped literal (or NULL) coerced, to the column's type
// colType; anything else keeps its own type and the comparison converts
// it the way a cast does.
func (m *matcher) typedBound(b bound, typ, colType string) string {
	x := m.boundSQL(b)
	switch c := b.expr.(type) {
	case *syntax.Param:
		x = "CAST(" + x + " AS " + colType + ")"
	case *syntax.Const:
		if c.Type == "str" || c.Type == "null" {
			x = "CAST(" + x + " AS " + colType + ")"
		}
	}
	if colType == typ && x != b.SQL {
		return x
	}
	return "CAST(" + x + " AS " + typ + ")"
}

// timeSplit fills p.Time: the bucket range answered from the rollup and the
// base rows around it, and m.lo and m.hi, its bounds as BoundsRelation
// computes them.
func (m *matcher) timeSplit(p *plan.Rollup) string {
	r := m.r
	typ, colType, ok := timeTypes(r.TimeType)
	if !ok {
		return "time column type " + string(r.TimeType) + " is not supported"
	}
	m.liftBounds(p)
	cast := func(b bound) string { return m.typedBound(b, typ, colType) }
	floor, next := m.bucketSQL(r.Grain)
	// firstFinite is where the buckets after -infinity's start for a
	// strict bound: a finite time early enough that rows before its
	// bucket are rare (the base table's lower edge reads them), and late
	// enough above the lowest timestamp that its bucket in any zone can
	// be computed.
	firstFinite := "CAST('4713-01-01 00:00:00+00 BC' AS " + typ + ")"
	ts := plan.TimeSplit{Column: r.TimeColumn, Lower: planBounds(m.lower), Upper: planBounds(m.upper)}
	var from []string
	for _, b := range m.lower {
		x := cast(b)
		if b.Inclusive {
			from = append(from, next("("+x+" - interval '1 microsecond')"))
		} else {
			// next of -infinity is -infinity, which would read the rollup's
			// -infinity bucket, whose rows > '-infinity' excludes.
			from = append(from, "CASE WHEN "+x+" = '-infinity' THEN "+next(firstFinite)+" ELSE "+next(x)+" END")
		}
	}
	// The watermark is read by the statement itself, from the catalog row
	// the client's snapshot sees, so that the rollup half and the base half
	// split at the same point even when a refresh commits meanwhile (the
	// refresh writes the rollup rows and the watermark in one
	// transaction). A rollup dropped and created again (its version
	// restarts) reads as -infinity: every row then comes from the base
	// table, exact rather than wrong.
	wmCol := "d.watermark"
	if r.TimeType != catalog.Timestamptz {
		wmCol = "(d.watermark AT TIME ZONE 'UTC')"
	}
	ts.Watermark = "COALESCE((SELECT " + wmCol + " FROM pgsketch.rollup_defs AS d WHERE d.name = " +
		catalog.QuoteLiteral(r.Name) + " AND d.version >= " + strconv.FormatInt(r.Version, 10) + "), '-infinity')"
	to := []string{"w.wm"} // never NULL
	for _, b := range m.upper {
		to = append(to, floor(cast(b)))
	}
	m.lo, m.hi = strictMinMax("GREATEST", from, 0), strictMinMax("LEAST", to, 1)
	ts.BucketsTo = m.boundsRef("hi")
	if len(m.lower) > 0 {
		ts.BucketsFrom = m.boundsRef("lo")
	}
	ts.LowerEdge, ts.UpperEdge = m.edges(ts, cast)
	m.logBounds(&ts)
	p.Time = ts
	return ""
}

// edges are the conditions that the query's range holds rows before the
// rollup's first bucket (lower) and in or after its last (upper).
//
// In a zone other than UTC a bucket's span of rows need not start at its
// start (see splitSQL): where the clocks go back half an hour, an hour's
// bucket starts half an hour before the last rows of the one before it,
// and where they go back at midnight, a day's first rows precede its start.
// The range then holds rows before BucketsFrom's bucket when its lower
// bound's own bucket is earlier (buckets are monotone in time), and rows of
// BucketsTo's bucket or later when it reaches a day before BucketsTo.
func (m *matcher) edges(ts plan.TimeSplit, cast func(bound) string) (lower, upper string) {
	var lowerEdge, upperEdge []string
	zoned := m.r.TimeType == catalog.Timestamptz && m.r.TimeZone != "UTC"
	floor, _ := m.bucketSQL(m.r.Grain)
	for _, b := range m.lower {
		x := cast(b)
		if zoned {
			x = floor(x)
		}
		lowerEdge = append(lowerEdge, x+" < "+ts.BucketsFrom)
	}
	firstRow := ts.BucketsTo
	if zoned {
		firstRow = "(" + ts.BucketsTo + " - interval '1 day')"
	}
	for _, b := range m.upper {
		op := " > "
		if b.Inclusive {
			op = " >= "
		}
		upperEdge = append(upperEdge, cast(b)+op+firstRow)
	}
	return strings.Join(lowerEdge, " AND "), strings.Join(upperEdge, " AND ")
}

// logBounds fills ts's bounds in the change log's terms and its list of
// the range's logged buckets.
func (m *matcher) logBounds(ts *plan.TimeSplit) {
	if m.r.TimeType == catalog.Timestamptz {
		ts.DirtyFrom, ts.DirtyTo = ts.BucketsFrom, ts.BucketsTo
	} else {
		ts.DirtyTo = m.boundsRef("log_hi")
		if len(m.lower) > 0 {
			ts.DirtyFrom = m.boundsRef("log_lo")
		}
	}
	if ts.DirtyFrom == "" {
		ts.DirtyFrom = "CAST(NULL AS timestamptz)"
	}
	ts.Logged = "(SELECT string_agg(CAST(extract(epoch FROM l.bucket) AS text), ',' ORDER BY l.bucket) FROM " + plan.LogRelation + " AS l)"
}

// withClause is the fetch's common table expressions: BoundsRelation,
// computed from m.lo and m.hi (and the level's bounds when the rollup arm
// reads level lv), and LogRelation, the change log's buckets in range.
func (m *matcher) withClause(p *plan.Rollup, lv *catalog.Level) []plan.CTE {
	inner := "SELECT "
	if m.lo != "" {
		inner += m.lo + " AS lo, "
	}
	inner += m.hi + " AS hi FROM (SELECT " + p.Time.Watermark + " AS wm) AS w"
	var cols []string
	if m.lo != "" {
		cols = append(cols, "b.lo")
	}
	cols = append(cols, "b.hi")
	plainCols := cols // inner has them
	// The columns the statement reads besides lo and hi.
	if lv != nil {
		floor, next := m.bucketSQL(lv.Grain)
		if m.bounds["llo"] {
			cols = append(cols, next("(b.lo - interval '1 microsecond')")+" AS llo") // the first starts at or after lo
		}
		if m.bounds["lhi"] {
			cols = append(cols, floor("b.hi")+" AS lhi") // the last ends at or before hi
		}
	}
	if m.bounds["log_lo"] {
		cols = append(cols, m.toLog("b.lo")+" AS log_lo")
	}
	if m.bounds["log_hi"] {
		cols = append(cols, m.toLog("b.hi")+" AS log_hi")
	}
	bounds := inner
	if len(cols) > len(plainCols) {
		bounds = "SELECT " + strings.Join(cols, ", ") + " FROM (" + inner + ") AS b"
	}
	logged := "SELECT DISTINCT l.bucket FROM pgsketch.rollup_dirty AS l WHERE l.rollup = " + catalog.QuoteLiteral(m.r.Name)
	if m.lo != "" {
		logged += " AND l.bucket >= " + p.Time.DirtyFrom
	}
	logged += " AND l.bucket < " + p.Time.DirtyTo
	return []plan.CTE{{Name: plan.BoundsRelation, SQL: bounds}, {Name: plan.LogRelation, SQL: logged}}
}

// loggedBuckets selects the change log's buckets of the range, as
// expression of l.bucket sel.
func loggedBuckets(sel string) string {
	return "SELECT " + sel + " FROM " + plan.LogRelation + " AS l"
}

// fetchStatement makes p's fetch statement (p.Fetch, p.FetchSQL): the
// rollup's whole buckets, the base rows at the edges of the range and
// after the last bucket, the buckets the change log lists, and the info
// row.
func (m *matcher) fetchStatement(p *plan.Rollup, c fetchCols) {
	var groupBy []string
	for i := range p.Keys {
		groupBy = append(groupBy, strconv.Itoa(i+2))
	}
	var rwhere, bwhere, ranges []string
	for _, f := range m.pushed {
		rwhere = append(rwhere, m.side(f, true))
		bwhere = append(bwhere, m.side(f, false))
	}
	for _, rg := range m.ranges {
		ranges = append(ranges, m.side(rg, false))
	}
	f := &p.Fetch
	f.Cols, f.Filters, f.GroupBy = c.rollup, rwhere, groupBy
	f.From = m.r.Table.String() + " AS r"
	bucket := "r." + catalog.QuoteIdent(catalog.BucketColumn)
	if len(p.Time.Lower) > 0 {
		f.Range = append(f.Range, bucket+" >= "+p.Time.BucketsFrom)
	}
	// Buckets the change log lists are read from the base table instead
	// (the dirty arm below), in the same statement, so in one snapshot
	// with the rollup rows and the log.
	f.Range = append(f.Range, bucket+" NOT IN ("+loggedBuckets(m.fromLog("l.bucket", true))+")", bucket+" < "+p.Time.BucketsTo)
	lv := m.level()
	if lv != nil {
		p.Level = lv
		f.From = m.levelFrom(p, *lv)
	}
	f.With = m.withClause(p, lv)
	source := m.sourceSQL() + " AS t"
	for _, where := range m.edgeConditions(p, bwhere, ranges) {
		f.Rest = append(f.Rest, plan.Select{Cols: c.base, From: source, Where: where, GroupBy: groupBy})
	}
	f.Rest = append(f.Rest, m.dirtyArm(c.base, ranges, groupBy))
	// The info row: the number of changed buckets read from the base table,
	// from pgsketch.capture_check, which fails the statement (and the
	// proxy then runs the query exactly) when the rollup's change capture
	// is not in place or too many of the range's buckets changed. Every
	// fetch returns this row, so the check always runs. For an unqualified
	// table name it first checks that the name is the rollup's source on
	// the session's search_path (plan.NotSource when not).
	info := "'" + InfoPrefix + "' || pgsketch.capture_check(" + catalog.QuoteLiteral(m.r.Name) + ", " + p.Time.DirtyFrom + ", " + p.Time.DirtyTo + ")"
	if g := guardCond(m.fi, m.r.Source); g != "" {
		info = "CASE WHEN " + g + " THEN " + info + " ELSE '" + InfoPrefix + plan.NotSource + "' END"
	}
	f.Rest = append(f.Rest, plan.Select{Cols: append([]string{info}, slices.Repeat([]string{"NULL"}, len(c.rollup)-1)...)})
	m.lift = nil
	p.FetchSQL = f.SQL(false, "")
}

// edgeConditions are the WHERE clauses of the base arms at the edges of
// the range: filters, the query's range and the split from the rollup's
// buckets.
func (m *matcher) edgeConditions(p *plan.Rollup, filters, ranges []string) [][]string {
	tcol := "t." + catalog.QuoteIdent(m.r.TimeColumn)
	before, notBefore := m.splitSQL(tcol)
	where := append(slices.Clone(filters), ranges...)
	switch {
	case len(p.Time.Lower) > 0:
		// The two edges are read by two statements of the UNION ALL, each
		// with the whole time range, so that PostgreSQL reads each by an
		// index range. (As one OR, the planner factors the range out of the
		// arms and filters every row of the range.) The upper edge also
		// starts at the lower's end, so that a range inside one bucket
		// (BucketsFrom > BucketsTo) is read once.
		lower := append(slices.Clone(where), before(p.Time.BucketsFrom))
		upper := append(where, notBefore(p.Time.BucketsTo), notBefore(p.Time.BucketsFrom))
		return [][]string{withEdge(lower, p.Time.LowerEdge), withEdge(upper, p.Time.UpperEdge)}
	case len(p.Time.Upper) > 0:
		return [][]string{withEdge(append(where, notBefore(p.Time.BucketsTo)), p.Time.UpperEdge)}
	}
	// No range on the time column: rows whose time is NULL count too, and
	// no rollup holds them. The bound "<= 'infinity'", true of every time,
	// makes the tail a range to PostgreSQL's planner, which cannot know
	// the statement's own watermark and would otherwise guess a third of
	// the table and scan it all; as a range, it reads the tail and the
	// NULLs by the index.
	return [][]string{append(where, "(("+notBefore(p.Time.BucketsTo)+" AND "+tcol+" <= 'infinity') OR "+tcol+" IS NULL)")}
}

func withEdge(where []string, edge string) []string {
	if edge != "" {
		return append(where, edge)
	}
	return where
}

// levelFrom is the rollup half's FROM item when it reads level l: the
// level buckets lying wholly in the range's buckets [BucketsFrom,
// BucketsTo), then the rollup's own rows outside them, as one relation r
// with the rollup table's columns (a level table has them by
// construction).
func (m *matcher) levelFrom(p *plan.Rollup, l catalog.Level) string {
	floor, _ := m.bucketSQL(l.Grain)
	bucket := "r." + catalog.QuoteIdent(catalog.BucketColumn)
	in, out := bucket+" < "+m.boundsRef("lhi"), bucket+" >= "+m.boundsRef("lhi")
	if len(p.Time.Lower) > 0 {
		in = bucket + " >= " + m.boundsRef("llo") + " AND " + in
		out = "(" + bucket + " < " + m.boundsRef("llo") + " OR " + out + ")"
	}
	// A level bucket holding a changed bucket is read as rollup rows (the
	// changed one from the base table).
	dirty := loggedBuckets(floor(m.fromLog("l.bucket", false)))
	in += " AND " + bucket + " NOT IN (" + dirty + ")"
	out = "(" + out + " OR " + floor(bucket) + " IN (" + dirty + "))"
	return "(SELECT * FROM " + l.Table.String() + " AS r WHERE " + in +
		" UNION ALL SELECT * FROM " + m.r.Table.String() + " AS r WHERE " + out + ") AS r"
}

// splitSQL returns SQL printers of the conditions that the base row of time
// column tcol lies in a bucket before bucket start x (before) or in x's
// bucket or a later one (notBefore). A row belongs to the bucket its time
// truncates to, which in a zone other than UTC can start after the row (a
// midnight that happens twice starts its day at the second): there the
// condition is on the truncated time, with a day's margin on the time
// itself for an index.
func (m *matcher) splitSQL(tcol string) (before, notBefore func(x string) string) {
	if m.r.TimeType != catalog.Timestamptz || m.r.TimeZone == "UTC" {
		return func(x string) string { return tcol + " < " + x },
			func(x string) string { return tcol + " >= " + x }
	}
	floor, _ := m.bucketSQL(m.r.Grain)
	return func(x string) string {
			return "(" + tcol + " < " + x + " + interval '1 day' AND " + floor(tcol) + " < " + x + ")"
		}, func(x string) string {
			return "(" + tcol + " >= " + x + " - interval '1 day' AND " + floor(tcol) + " >= " + x + ")"
		}
}

// dirtyArm is the fetch's arm reading the base rows of the changed buckets
// in the range, one bucket at a time (by an index range on the time
// column where there is one; OFFSET 0 keeps PostgreSQL from flattening the
// lateral read into one scan of the whole range). A row belongs to the
// bucket its time truncates to; in a zone other than UTC that can lie
// outside the bucket's span of instants (a midnight that happens twice),
// hence a day's margin around it.
func (m *matcher) dirtyArm(bcols, ranges, groupBy []string) plan.Select {
	floor, next := m.bucketSQL(m.r.Grain)
	tcol := "t." + catalog.QuoteIdent(m.r.TimeColumn)
	lo := "pgsketch_d.lo"
	from, to := lo, next(lo)+" - interval '1 microsecond'"
	if m.r.TimeType == catalog.Timestamptz && m.r.TimeZone != "UTC" {
		from, to = lo+" - interval '1 day'", next(lo)+" + interval '1 day'"
	}
	span := tcol + " >= " + from + " AND " + tcol + " <= CASE WHEN isfinite(" + lo + ") THEN " + to + " ELSE " + lo + " END AND " +
		floor(tcol) + " = " + lo
	var where []string
	for _, f := range m.pushed {
		where = append(where, m.side(f, false))
	}
	where = append(where, ranges...)
	return plan.Select{Cols: bcols, Where: where, GroupBy: groupBy,
		From: "(" + loggedBuckets(m.fromLog("l.bucket", false)+" AS lo") + ") AS pgsketch_d CROSS JOIN LATERAL (SELECT * FROM " +
			m.sourceSQL() + " AS t WHERE " + span + " OFFSET 0) AS t"}
}

// fromLog converts a bucket start of the change log (an instant; for date
// and timestamp columns the wall-clock start read as UTC) into the rollup's
// bucket type (asBucket) or the type bucket arithmetic runs on.
func (m *matcher) fromLog(x string, asBucket bool) string {
	switch m.r.TimeType {
	case catalog.Timestamptz:
		return x
	case catalog.Date:
		if asBucket {
			return "CAST((" + x + " AT TIME ZONE 'UTC') AS date)"
		}
	}
	return "(" + x + " AT TIME ZONE 'UTC')"
}

// toLog converts a bucket bound of the fetch (in the type bucket
// arithmetic runs on) into the change log's instants.
func (m *matcher) toLog(x string) string {
	if m.r.TimeType == catalog.Timestamptz {
		return x
	}
	return "(CAST(" + x + " AS timestamp) AT TIME ZONE 'UTC')"
}

func (m *matcher) sourceSQL() string {
	s := m.r.Source.String()
	if m.fi.Only {
		return "ONLY " + s
	}
	return s
}

// bucketSQL returns SQL printers of the start of the bucket of grain g
// holding x (floor), and of the first bucket start after x's bucket (next),
// cut in the rollup's zone for a timestamptz column.
func (m *matcher) bucketSQL(grain catalog.Grain) (floor, next func(x string) string) {
	r := m.r
	g := string(grain)
	tz := catalog.QuoteLiteral(r.TimeZone)
	floor = func(x string) string {
		if r.TimeType == catalog.Timestamptz {
			return "date_trunc('" + g + "', " + x + ", " + tz + ")"
		}
		return "date_trunc('" + g + "', " + x + ")"
	}
	next = func(x string) string {
		if r.TimeType == catalog.Timestamptz {
			// Hours are absolute: this lands inside the next bucket
			// whatever its length (DST days, months).
			h := map[catalog.Grain]string{catalog.Hour: "1 hour", catalog.Day: "26 hours", catalog.Week: "180 hours", catalog.Month: "768 hours"}[grain]
			return "date_trunc('" + g + "', " + floor(x) + " + interval '" + h + "', " + tz + ")"
		}
		return "(" + floor(x) + " + interval '1 " + g + "')"
	}
	return floor, next
}

// strictMinMax is GREATEST or LEAST of xs, but NULL when any of them is:
// PostgreSQL's GREATEST and LEAST skip NULLs, while a NULL bound (a NULL
// parameter, a NULL literal) makes the query's own comparison select no
// row. The first notNull of xs are never NULL.
func strictMinMax(fn string, xs []string, notNull int) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	var nulls []string
	for _, x := range xs[notNull:] {
		nulls = append(nulls, x+" IS NULL")
	}
	mm := fn + "(" + strings.Join(xs, ", ") + ")"
	if len(nulls) == 0 {
		return mm
	}
	return "CASE WHEN " + strings.Join(nulls, " OR ") + " THEN NULL ELSE " + mm + " END"
}
