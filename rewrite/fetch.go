package rewrite

import (
	"fmt"
	"regexp"
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
//
// It reads three common table expressions:
//
//	bounds(lo, hi[, lhi])  the rollup's buckets [lo, hi), lhi the end of
//	                       a level's whole buckets in it
//	logged(bucket[, level]) the range's buckets the change log lists
//	spans(first, last)     what the base table answers: the rows whose
//	                       bucket starts in [first, last]
//
// then the rollup arm (the buckets of [lo, hi) the log does not list),
// the base arm (each span read by an index range on the time column), and
// the info row.

// boundsRef reads column col of plan.BoundsRelation: an uncorrelated
// subquery, which PostgreSQL evaluates once (an InitPlan) and uses for
// index ranges and partition pruning.
func boundsRef(col string) string {
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

// castTo is x cast to type t: x::t when x is a parameter, a literal or
// NULL, CAST(x AS t) otherwise.
func castTo(x, t string) string {
	if plainOperandRE.MatchString(x) {
		return x + "::" + t
	}
	return "CAST(" + x + " AS " + t + ")"
}

// plainOperandRE matches a parameter, a string literal without escapes or
// NULL, cast with :: or not.
var plainOperandRE = regexp.MustCompile(`^(\$[0-9]+|'[^']*'|NULL)(::[a-z]+)*$`)

// typedBound is bound b as PostgreSQL types it when comparing it with the
// column, cast to typ, the type bucket arithmetic runs on: a parameter is
// inferred, and an untyped literal (or NULL) coerced, to the column's type
// colType; anything else keeps its own type and the comparison converts
// it the way a cast does.
func (m *matcher) typedBound(b bound, typ, colType string) string {
	x := m.boundSQL(b)
	switch c := b.expr.(type) {
	case *syntax.Param:
		x = castTo(x, colType)
	case *syntax.Const:
		if c.Type == "str" || c.Type == "null" {
			x = castTo(x, colType)
		}
	}
	if colType == typ && x != b.SQL {
		return x
	}
	return castTo(x, typ)
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
	bm := m.bucketMath(r.Grain)
	ts := plan.TimeSplit{Column: r.TimeColumn, Lower: planBounds(m.lower), Upper: planBounds(m.upper)}
	// firstFinite is where the buckets after -infinity's start for a
	// strict bound: a finite time early enough that rows before its
	// bucket are rare (the base table's lower edge reads them), and late
	// enough above the lowest timestamp that its bucket in any zone can
	// be computed.
	firstFinite := castTo("'4713-01-01 00:00:00+00 BC'", typ)
	var from, fromArgs []string
	for _, b := range m.lower {
		x := cast(b)
		fromArgs = append(fromArgs, x)
		if m.skewed(b) {
			x = "(" + x + " + " + skewMargin + ")"
		}
		if b.Inclusive {
			from = append(from, bm.ceil(x))
		} else {
			// next of -infinity is -infinity, which would read the rollup's
			// -infinity bucket, whose rows > '-infinity' excludes.
			from = append(from, "CASE WHEN "+x+" = '-infinity' THEN "+bm.next(firstFinite)+" ELSE "+bm.next(x)+" END")
		}
	}
	// The watermark is read by the statement itself, from the catalog row
	// the client's snapshot sees, so that the rollup half and the base half
	// split at the same point even when a refresh commits meanwhile (the
	// refresh writes the rollup rows and the watermark in one
	// transaction). A rollup dropped and created again (its version
	// restarts) reads as -infinity: every row then comes from the base
	// table, exact rather than wrong.
	wmCol := "watermark"
	if r.TimeType != catalog.Timestamptz {
		wmCol = "watermark AT TIME ZONE 'UTC'"
	}
	ts.Watermark = "COALESCE((SELECT " + wmCol + " FROM pgsketch.rollup_defs WHERE name = " +
		catalog.QuoteLiteral(r.Name) + " AND version >= " + strconv.FormatInt(r.Version, 10) + "), '-infinity')"
	to := []string{ts.Watermark} // never NULL
	var toArgs []string
	for _, b := range m.upper {
		x := cast(b)
		toArgs = append(toArgs, x)
		if m.skewed(b) {
			x = "(" + x + " - " + skewMargin + ")"
		}
		to = append(to, bm.floor(x))
	}
	m.lo, m.hi = strictMinMax("GREATEST", from, fromArgs), strictMinMax("LEAST", to, toArgs)
	ts.BucketsTo = boundsRef("hi")
	if len(m.lower) > 0 {
		ts.BucketsFrom = boundsRef("lo")
	}
	ts.LowerEdge, ts.UpperEdge = m.edges(cast)
	ts.DirtyFrom, ts.DirtyTo = "NULL", m.logInstant(ts.BucketsTo)
	if ts.BucketsFrom != "" {
		ts.DirtyFrom = m.logInstant(ts.BucketsFrom)
	}
	ts.Logged = "(SELECT string_agg(extract(epoch FROM bucket)::text, ',' ORDER BY bucket) FROM " + plan.LogRelation + ")"
	p.Time = ts
	return ""
}

// skewMargin is how far inside a skewed bound (see skewed) the rollup's
// buckets start or end: more than the longest stretch of wall-clock times
// a clock change skips (a whole day, where a zone crossed the date line).
const skewMargin = "interval '2 days'"

// skewed reports whether PostgreSQL compares bound b with the values of a
// date or timestamp column other than by their wall-clock order: a bound
// of type timestamptz (now(), a timestamptz literal) is compared with the
// column's values turned into instants in the session's zone, and where
// its clocks skip, a wall-clock time in the gap turns into an instant past
// the gap's end, after times that follow it on the wall clock. The rollup's
// buckets then start (end) skewMargin inside the bound, and the base rows
// between are read with the query's own condition. In a session whose zone
// keeps one offset from UTC, or for a bound of the column's kind, the
// orders agree.
func (m *matcher) skewed(b bound) bool {
	return m.r.TimeType != catalog.Timestamptz && !fixedZone(m.sess.TimeZone) && !wallClock(b.expr)
}

// wallClock reports whether e is surely of type date or timestamp (or
// becomes one compared with such a column: a parameter, an untyped
// literal), by its form.
func wallClock(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Param:
		return true
	case *syntax.Const:
		return e.Type == "str" || e.Type == "null"
	case *syntax.Cast:
		n, ok := e.Type.Builtin()
		return ok && (n == "date" || n == "timestamp")
	case *syntax.VarFunc:
		return e.Name == "current_date" || e.Name == "localtimestamp"
	case *syntax.OpExpr:
		// date or timestamp plus or minus an interval or a number of days
		return (e.Op == "+" || e.Op == "-") && e.Left != nil && wallClock(e.Left) && !timeTyped(e.Right)
	}
	return false
}

// timeTyped reports whether e may be of a date or time type: anything but
// a literal number or a cast to interval or a number.
func timeTyped(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Const:
		return e.Type != "int" && e.Type != "float"
	case *syntax.Cast:
		switch n, _ := e.Type.Builtin(); n {
		case "interval", "int4", "int8", "int2", "integer", "bigint", "numeric":
			return false
		}
	}
	return true
}

// edges are the conditions, on BoundsRelation's lo and hi, that the query's
// range holds rows before the rollup's first bucket (lower) and in or
// after its last (upper): a span of the base table is read only when they
// hold, and PostgreSQL evaluates them once, so that a bucket-aligned range
// scans no edge (which matters most where the time column has no index).
//
// Where buckets do not keep one offset from UTC, a bucket's span of rows
// need not start at its start (see spanCondition): where the clocks go
// back half an hour, an hour's bucket starts half an hour before the last
// rows of the one before it, and where they go back at midnight, a day's
// first rows precede its start. The range then holds rows before lo's
// bucket when its lower bound's own bucket is earlier (buckets are
// monotone in time), and rows of hi's bucket or later when it reaches a
// day before hi.
func (m *matcher) edges(cast func(bound) string) (lower, upper string) {
	var lowerEdge, upperEdge []string
	for _, b := range m.lower {
		x := cast(b)
		if !m.fixedOffset() {
			x = m.bucketMath(m.r.Grain).floor(x)
		}
		lowerEdge = append(lowerEdge, x+" < lo")
	}
	firstRow := "hi"
	if !m.fixedOffset() {
		firstRow = "hi - interval '1 day'"
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

// logInstant converts a bucket bound of the fetch (in the type bucket
// arithmetic runs on) into the change log's instants: for date and
// timestamp columns the wall-clock start read as UTC.
func (m *matcher) logInstant(x string) string {
	if m.r.TimeType == catalog.Timestamptz {
		return x
	}
	return x + " AT TIME ZONE 'UTC'"
}

// withClause is the fetch's common table expressions: BoundsRelation,
// computed from m.lo and m.hi (and, per level lvs the rollup arm may read,
// the end of its whole buckets, levelCol), LogRelation, the change log's
// buckets in range (and their level buckets), and SpansRelation, the spans
// the base arm reads.
func (m *matcher) withClause(p *plan.Rollup, lvs []catalog.Level) []plan.CTE {
	var cols []string
	if m.lo != "" {
		cols = append(cols, m.lo+" AS lo")
	}
	cols = append(cols, m.hi+" AS hi")
	bounds := "SELECT " + strings.Join(cols, ", ")
	if len(lvs) > 0 {
		outer := []string{"hi"}
		if m.lo != "" {
			outer = []string{"lo", "hi"}
		}
		for i, lv := range lvs {
			// The level's last whole bucket ends at or before hi.
			floor := m.bucketMath(lv.Grain).floor
			outer = append(outer, floor("hi")+" AS "+levelCol("lhi", i))
			if m.lo != "" && !m.fixedOffset() {
				// The level bucket of the rollup's last bucket before lo
				// (see levelFrom).
				outer = append(outer, floor(m.bucketMath(m.r.Grain).floor("lo - interval '1 microsecond'"))+" AS "+levelCol("lfl", i))
			}
		}
		if len(lvs) > 1 {
			outer = append(outer, m.levelChoice(lvs)+" AS "+levelPick)
		}
		bounds = "SELECT " + strings.Join(outer, ", ") + " FROM (" + bounds + ") b"
	}
	// The log's instants, as the rollup's buckets (for date and timestamp
	// columns the wall-clock start read as UTC).
	bucket, item := "l.bucket", "l.bucket"
	if m.r.TimeType != catalog.Timestamptz {
		bucket = "l.bucket AT TIME ZONE 'UTC'"
		item = bucket + " AS bucket"
	}
	logged := "SELECT DISTINCT " + item
	for i, lv := range lvs {
		logged += ", " + m.bucketMath(lv.Grain).floor(bucket) + " AS " + levelCol("level", i)
	}
	from, conds := "pgsketch.rollup_dirty l", []string{"l.rollup = " + catalog.QuoteLiteral(m.r.Name)}
	if m.r.Distributed {
		// The log of the source's shards too.
		p.ShardLog = "pgsketch." + syntax.QuoteIdent("log_"+m.r.Name)
		from = "(SELECT x.bucket FROM pgsketch.rollup_dirty x WHERE x.rollup = " + catalog.QuoteLiteral(m.r.Name) +
			" UNION ALL SELECT s.bucket FROM pgsketch.shard_logged(" + catalog.QuoteLiteral(m.r.Name) + ") AS s(bucket)) l"
		conds = nil
	}
	if m.lo != "" {
		conds = append(conds, "l.bucket >= "+p.Time.DirtyFrom)
	}
	conds = append(conds, "l.bucket < "+p.Time.DirtyTo)
	logged += " FROM " + from + " WHERE " + strings.Join(conds, " AND ")
	return []plan.CTE{
		{Name: plan.BoundsRelation, SQL: bounds},
		{Name: plan.LogRelation, SQL: logged},
		{Name: plan.SpansRelation, Cols: []string{"first", "last"}, SQL: m.spans(p)},
	}
}

// spans is the definition of SpansRelation, what the base arm reads: the
// rows whose bucket starts in [first, last]. They are the range's lower
// edge (when it has a lower bound that is not a bucket's start), its upper
// edge and the tail from hi on (when it has a bound: hi is at most the
// watermark, and the upper edge is read only when the range ends after
// hi), and each bucket the change log lists. A span's last is the last
// instant of a bucket (of lo's predecessor, of a logged bucket; an
// infinite bucket's is itself) or infinity, so that where buckets keep one
// offset from UTC a row's bucket starts in the span exactly when its time
// lies in it.
func (m *matcher) spans(p *plan.Rollup) string {
	var arms []string
	if len(p.Time.Lower) > 0 {
		arms = append(arms, "SELECT '-infinity', lo - interval '1 microsecond' FROM "+plan.BoundsRelation+" WHERE "+p.Time.LowerEdge)
	}
	if len(p.Time.Lower)+len(p.Time.Upper) > 0 {
		// GREATEST skips a NULL lo, but a NULL lower bound makes the
		// query's own condition, which the base arm applies, select no row.
		first := "hi"
		if len(p.Time.Lower) > 0 {
			first = "GREATEST(lo, hi)"
		}
		tail := "SELECT " + first + ", 'infinity' FROM " + plan.BoundsRelation
		if p.Time.UpperEdge != "" {
			tail += " WHERE " + p.Time.UpperEdge
		}
		arms = append(arms, tail)
	}
	if m.r.Distributed && len(p.Time.Lower)+len(p.Time.Upper) == 0 {
		// What tailArm reads, but the rows whose time is NULL: for
		// plan.BaseRead, which reads those itself.
		arms = append(arms, "SELECT hi, 'infinity' FROM "+plan.BoundsRelation)
	}
	arms = append(arms, "SELECT bucket, "+m.bucketMath(m.r.Grain).end("bucket")+" FROM "+plan.LogRelation)
	return strings.Join(arms, " UNION ALL ")
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
	var rwhere, bwhere []string
	for _, f := range m.pushed {
		rwhere = append(rwhere, m.conjunct(f, true))
		bwhere = append(bwhere, m.conjunct(f, false))
	}
	pushed := slices.Clone(bwhere)
	for _, rg := range m.ranges {
		bwhere = append(bwhere, m.conjunct(rg, false))
	}
	f := &p.Fetch
	f.Cols, f.Filters, f.GroupBy = c.rollup, rwhere, groupBy
	f.From = relation(m.r.Table) + " r"
	bucket := "r." + syntax.QuoteIdent(catalog.BucketColumn)
	if len(p.Time.Lower) > 0 {
		f.Range = append(f.Range, bucket+" >= "+p.Time.BucketsFrom)
	}
	// Buckets the change log lists are read from the base table instead
	// (the base arm's spans), in the same statement, so in one snapshot
	// with the rollup rows and the log.
	logged := "bucket"
	if m.r.TimeType == catalog.Date {
		logged = "bucket::date"
	}
	f.Range = append(f.Range, bucket+" < "+p.Time.BucketsTo, bucket+" NOT IN (SELECT "+logged+" FROM "+plan.LogRelation+")")
	lvs := m.levels()
	switch len(lvs) {
	case 0:
	case 1:
		p.Level = &lvs[0]
		f.From = m.levelFrom(p, lvs[0], 0)
	default:
		p.Level, p.RunLevels = &lvs[0], lvs
		arms := make([]string, len(lvs))
		for i, lv := range lvs {
			arms[i] = "SELECT * FROM " + m.levelFrom(p, lv, i) + " WHERE " + boundsRef(levelPick) + " = " + strconv.Itoa(i+1)
		}
		f.From = "(" + strings.Join(arms, " UNION ALL ") + ") r"
	}
	f.With = m.withClause(p, lvs)
	switch {
	case m.r.Distributed:
		m.baseRead(p, c.shardCols(), bwhere, groupBy)
		f.Last = append(f.Last, m.spanRows(len(c.rollup)))
	case len(p.Time.Lower)+len(p.Time.Upper) == 0:
		f.Rest = append(f.Rest, m.tailArm(c.base, bwhere, groupBy))
		fallthrough
	default:
		f.Rest = append(f.Rest, m.spanArm(c.base, bwhere, groupBy))
	}
	check := "pgsketch.capture_check("
	if m.r.Inserts != nil {
		p.Inserts = m.r.Inserts
		f.Inserts = m.insertsArm(p, c.base, pushed, groupBy)
		check = "pgsketch.capture_check_inserts("
	}
	// The info row: the number of changed buckets read from the base table,
	// from pgsketch.capture_check, which fails the statement (and the
	// proxy then runs the query exactly) when the rollup's change capture
	// is not in place or too many of the range's buckets changed. Every
	// fetch returns this row, so the check always runs. For an unqualified
	// table name it first checks that the name is the rollup's source on
	// the session's search_path (plan.NotSource when not).
	lo := "NULL"
	if len(p.Time.Lower) > 0 {
		lo = m.logInstant("lo")
	}
	args := catalog.QuoteLiteral(m.r.Name) + ", " + lo + ", " + m.logInstant("hi")
	if m.r.Distributed && m.r.LoggedCheck {
		// The number of changed buckets is the statement's own: the
		// check reads no log (on Citus, every shard of one).
		check = "pgsketch.capture_check_logged("
		args += ", (SELECT count(*) FROM " + plan.LogRelation + "), " + strconv.FormatBool(m.r.Inserts != nil)
	}
	call := check + args + ")"
	if m.r.Inserts != nil && !m.r.Distributed && m.r.CaptureInPlace {
		call = m.inPlaceCheck(call, lo, m.logInstant("hi"))
	}
	info := "'" + InfoPrefix + "' || " + call
	if m.zoneRules && m.r.TimeType == catalog.Timestamptz {
		// Zone rules are checked from 1970 on: older buckets (New York kept
		// its local mean time, 4:56:02 behind UTC, until 1883) may hold rows
		// of two local days.
		info = checked(info, "NOT EXISTS (SELECT FROM "+m.r.Table.String()+" r WHERE r.bucket < '1970-01-01 00:00:00+00')",
			"rollup "+m.r.Name+" holds buckets before 1970, where pgsketch does not check time zone rules")
	}
	if nn := m.notNullCheck(); nn != "" {
		noun, verb := "column", "is"
		if len(m.notNullNow) > 1 {
			noun, verb = "columns", "are"
		}
		info = checked(info, nn, noun+" "+strings.Join(quoteIdents(m.notNullNow), ", ")+" of "+m.r.Source.String()+
			", counted as rows, "+verb+" no longer declared NOT NULL there or in a table inheriting from it")
	}
	if g := guardCond(m.fi, m.r.Source); g != "" {
		info = "CASE WHEN " + g + " THEN " + info + " ELSE '" + InfoPrefix + plan.NotSource + "' END"
	}
	infoRow := plan.Select{Cols: append([]string{info}, slices.Repeat([]string{"NULL"}, len(c.rollup)-1)...), From: plan.BoundsRelation}
	if m.r.Distributed {
		f.Last = append(f.Last, infoRow)
	} else {
		f.Rest = append(f.Rest, infoRow)
	}
	m.lift = nil
	p.FetchSQL = f.SQL(false, "")
}

// inPlaceCheck is the capture check of a statement that reads inserted
// rows, read from the view pgsketch.capture_in_place first: where it says
// the capture is in place, the number of changed buckets in [lo, hi),
// counted as pgsketch.capture_check_inserts counts them, when it is within
// pgsketch.max_dirty_buckets; otherwise call, the function's call, which
// returns the number or fails with the reason. On the answers where
// nothing is wrong, no PL/pgSQL runs: a new backend compiles none, and an
// idle one runs one plain plan.
func (m *matcher) inPlaceCheck(call, lo, hi string) string {
	name := catalog.QuoteLiteral(m.r.Name)
	conds := []string{"x.rollup OPERATOR(pg_catalog.=) " + name}
	for _, b := range []struct{ v, op string }{{lo, ">="}, {hi, "<"}} {
		if b.v == "NULL" {
			continue
		}
		// As the function's arguments are taken: cast to timestamptz.
		v := "CAST(" + b.v + " AS pg_catalog.timestamptz)"
		conds = append(conds, "("+v+" IS NULL OR x.bucket OPERATOR(pg_catalog."+b.op+") "+v+")")
	}
	// Every name here is qualified: the function ran under a search_path
	// of its own, this runs under the session's, where a temporary type
	// named timestamptz, or a count taking timestamptz, would be found
	// first.
	return "(SELECT CASE WHEN (SELECT v.in_place FROM pgsketch.capture_in_place v WHERE v.rollup OPERATOR(pg_catalog.=) " + name + ")" +
		" AND q.n OPERATOR(pg_catalog.<=) pgsketch.max_dirty_buckets() THEN q.n ELSE " + call + " END" +
		" FROM (SELECT pg_catalog.count(DISTINCT x.bucket) AS n FROM pgsketch.rollup_dirty x WHERE " + strings.Join(conds, " AND ") + ") q)"
}

// checked is the info row's expression info, evaluated only where
// condition ok holds; elsewhere the statement fails as a run-time check
// (SQLSTATE 22007: "pgsketch: " and msg cast to timestamptz, inside a CASE
// that reads ok so that PostgreSQL cannot fold it at plan time), which the
// proxy answers exactly with the message as its NOTICE.
func checked(info, ok, msg string) string {
	return "CASE WHEN " + ok + " THEN " + info + " ELSE CAST(CAST(CASE WHEN (" + ok + ") IS NOT TRUE THEN " +
		catalog.QuoteLiteral("pgsketch: "+msg) + " END AS timestamptz) AS text) END"
}

// notNullCheck is a condition true when every column of m.notNullNow is
// still declared NOT NULL in the source and in every table that inherits
// from it, at any depth (a partition cannot drop the declaration, an
// inheritance child can), or "" when there are none. When it is false the
// info row fails the fetch with a check's error (SQLSTATE 22007, the
// message cast to timestamptz), and PostgreSQL answers the statement.
func (m *matcher) notNullCheck() string {
	if len(m.notNullNow) == 0 {
		return ""
	}
	var names []string
	for _, c := range m.notNullNow {
		names = append(names, catalog.QuoteLiteral(c))
	}
	return fmt.Sprintf("NOT EXISTS (WITH RECURSIVE tree(relid) AS (SELECT %s::pg_catalog.regclass::pg_catalog.oid UNION "+
		"SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN tree ON i.inhparent = tree.relid) "+
		"SELECT FROM tree CROSS JOIN unnest(ARRAY[%s]::pg_catalog.name[]) AS c(name) "+
		"LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = tree.relid AND a.attname = c.name AND a.attnum > 0 AND NOT a.attisdropped "+
		"WHERE a.attnotnull IS NOT TRUE)",
		catalog.QuoteLiteral(m.r.Source.String()), strings.Join(names, ", "))
}

func quoteIdents(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, catalog.QuoteIdent(n))
	}
	return out
}

// conjunct is condition e, over rollup rows or base rows, as one of an
// AND's operands: without the parentheses the printer puts around a
// comparison or test, which binds tighter than AND (an OR or AND keeps
// them).
func (m *matcher) conjunct(e syntax.Expr, rollup bool) string {
	s := m.side(e, rollup)
	switch e := e.(type) {
	case *syntax.OpExpr, *syntax.NullTest, *syntax.BoolTest, *syntax.In, *syntax.Between:
	case *syntax.KeywordExpr:
		if e.Fn == "NULLIF" {
			return s
		}
	case *syntax.BoolExpr:
		if e.Op != "NOT" {
			return s
		}
	default:
		return s
	}
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return s
	}
	return s[1 : len(s)-1]
}

// tailArm reads, for a query without a range on the time column, the base
// rows from the rollup's end on, and those whose time is NULL, which no
// rollup holds. The bound "<= 'infinity'", true of every time, makes the
// tail a range to PostgreSQL's planner, which cannot know the statement's
// own watermark and would otherwise guess a third of the table and scan it
// all; as a range, it reads the tail and the NULLs by the index.
func (m *matcher) tailArm(bcols, where, groupBy []string) plan.Select {
	tcol := "t." + syntax.QuoteIdent(m.r.TimeColumn)
	hi := boundsRef("hi")
	tail := tcol + " >= " + hi
	if !m.fixedOffset() {
		// A row belongs to the bucket its time truncates to, which in a
		// zone with daylight saving can start after the row (a midnight
		// that happens twice starts its day at the second): there the
		// condition is on the truncated time, with a day's margin on the
		// time itself for an index.
		tail = "(" + tcol + " >= " + hi + " - interval '1 day' AND " + m.bucketMath(m.r.Grain).floor(tcol) + " >= " + hi + ")"
	}
	where = append(slices.Clone(where), "(("+tail+" AND "+tcol+" <= 'infinity') OR "+tcol+" IS NULL)")
	return plan.Select{Cols: bcols, From: m.sourceSQL() + " t", Where: where, GroupBy: groupBy}
}

// spanArm is the fetch's arm reading the base rows of SpansRelation, one
// span at a time: by an index range on the time column where there is
// one, and within the query's own range, so that an edge reads only the
// rows of the range. (OFFSET 0 keeps PostgreSQL from flattening the
// lateral read into a join it could plan as one scan of the table.)
func (m *matcher) spanArm(bcols, where, groupBy []string) plan.Select {
	inner := append([]string{m.spanCondition("t." + syntax.QuoteIdent(m.r.TimeColumn))}, where...)
	return plan.Select{Cols: bcols, GroupBy: groupBy,
		From: plan.SpansRelation + " s CROSS JOIN LATERAL (SELECT * FROM " + m.sourceSQL() + " t WHERE " +
			strings.Join(inner, " AND ") + " OFFSET 0) t"}
}

// spanRows is the fetch's arm that returns SpansRelation's spans, for
// plan.BaseRead to read, as rows of ncols columns: plan.SpanPrefix and the
// span's first and last in their binary form, in hex (exact whatever the
// session's DateStyle and TimeZone), then NULLs.
func (m *matcher) spanRows(ncols int) plan.Select {
	send := "pg_catalog.timestamptz_send"
	if m.r.TimeType != catalog.Timestamptz {
		send = "pg_catalog.timestamp_send"
	}
	col := "'" + plan.SpanPrefix + "' || pg_catalog.encode(" + send + "(first), 'hex') || pg_catalog.encode(" + send + "(last), 'hex')"
	return plan.Select{Cols: append([]string{col}, slices.Repeat([]string{"NULL"}, ncols-1)...), From: plan.SpansRelation}
}

// baseRead makes p.BaseRead, the statement that reads the base rows of a
// fetch over a distributed source: the source joined to the spans the
// fetch returns, bound as two arrays after the fetch's own parameters
// (the client's and the lifted literals), each span read as spanArm reads
// it; and, for a query without a range on the time column, the rows whose
// time is NULL (the tail from hi on is one of the spans: see spans).
func (m *matcher) baseRead(p *plan.Rollup, cols, where, groupBy []string) {
	typ, _, _ := timeTypes(m.r.TimeType)
	n := m.sess.params + len(p.Lifted) + 1
	tcol := "t." + syntax.QuoteIdent(m.r.TimeColumn)
	spans := fmt.Sprintf("ROWS FROM (pg_catalog.unnest($%d::%s[]), pg_catalog.unnest($%d::%s[])) AS s(first, last)", n, typ, n+1, typ)
	arms := []string{plan.Select{Cols: cols, GroupBy: groupBy,
		From: m.sourceSQL() + " t JOIN " + spans + " ON " + strings.Join(append([]string{m.spanCondition(tcol)}, where...), " AND ")}.SQL()}
	unbounded := len(p.Time.Lower)+len(p.Time.Upper) == 0
	if unbounded {
		arms = append(arms, plan.Select{Cols: cols, From: m.sourceSQL() + " t", Where: append(slices.Clone(where), tcol+" IS NULL"), GroupBy: groupBy}.SQL())
	}
	p.BaseRead = &plan.BaseRead{SQL: strings.Join(arms, " UNION ALL "), SpansParam: n, SpanType: typ, Always: unbounded}
}

// insertsArm is the fetch's arm reading the rows inserted since their
// buckets were built (catalog.Rollup.Inserts) in the rollup arm's buckets:
// those of its range the change log does not list, whose rollup rows hold
// every row but these. (A listed bucket is read from the base table whole,
// its inserted rows with it.) The table has the source's columns the
// rollup reads, under their names, so the base arm's columns and the
// query's filters read it as they read the source. The query's time
// ranges are not applied: every row of the rollup arm's buckets lies in
// them, as the rollup arm's own use of whole buckets requires. So the arm
// reads what the rollup arm reads, and is kept by the proxy's cache on
// the same terms (plan.Cacheability).
func (m *matcher) insertsArm(p *plan.Rollup, bcols, where, groupBy []string) *plan.Select {
	bucket, logged := "t.pgsketch_bucket", "bucket"
	switch m.r.TimeType {
	case catalog.Timestamp:
		bucket = "(t.pgsketch_bucket AT TIME ZONE 'UTC')"
	case catalog.Date:
		bucket, logged = "(t.pgsketch_bucket AT TIME ZONE 'UTC')::date", "bucket::date"
	}
	var conds []string
	if len(p.Time.Lower) > 0 {
		conds = append(conds, bucket+" >= "+p.Time.BucketsFrom)
	}
	conds = append(conds, bucket+" < "+p.Time.BucketsTo, bucket+" NOT IN (SELECT "+logged+" FROM "+plan.LogRelation+")")
	cols := append([]string{"'" + plan.InsertedPart + "'"}, bcols[1:]...)
	return &plan.Select{Cols: cols, From: relation(*m.r.Inserts) + " t", Where: append(conds, where...), GroupBy: groupBy}
}

// spanCondition is the condition that the row whose time is tcol lies in
// span s: its bucket starts in [s.first, s.last]. Where buckets keep one
// offset from UTC, that is its time being in the span. In a zone with
// daylight saving a row's bucket can start after the row (a midnight that
// happens twice starts its day at the second): there the condition is on
// the truncated time, with a day's margin on the time itself for an index.
func (m *matcher) spanCondition(tcol string) string {
	if m.fixedOffset() {
		return tcol + " BETWEEN s.first AND s.last"
	}
	return tcol + " BETWEEN s.first - interval '1 day' AND s.last + interval '1 day' AND " +
		m.bucketMath(m.r.Grain).floor(tcol) + " BETWEEN s.first AND s.last"
}

// levelFrom is the rollup half's FROM item when it reads level l: the
// level's buckets that end at or before the range's last bucket and hold
// no changed bucket, then the rollup's own rows of the others, as one
// relation r with the rollup table's columns (a level table has them by
// construction). The rollup arm's own conditions (the range, the changed
// buckets) apply to both: a level bucket starts at or after lo exactly
// when it starts at or after the first level bucket of the range.
//
// A rollup bucket belongs to the level bucket its start truncates to.
// Where buckets do not keep one offset from UTC that can start after the
// rollup bucket (in the Azores the hour of the first of two midnights
// belongs to the day that starts at the second), so the level buckets
// read are those after lfl, the level bucket of the rollup's last bucket
// before lo (none of theirs precedes lo: truncation is monotone), and the
// rollup's own rows are those whose level bucket is not read.
//
// l is the i-th of the levels the fetch may read (withClause's columns).
func (m *matcher) levelFrom(p *plan.Rollup, l catalog.Level, i int) string {
	floor := m.bucketMath(l.Grain).floor
	bucket := "r." + syntax.QuoteIdent(catalog.BucketColumn)
	lhi := boundsRef(levelCol("lhi", i))
	dirty := "(SELECT " + levelCol("level", i) + " FROM " + plan.LogRelation + ")"
	in := bucket + " < " + lhi + " AND " + bucket + " NOT IN " + dirty
	out := []string{bucket + " >= " + lhi, floor(bucket) + " IN " + dirty}
	if !m.fixedOffset() {
		out[0] = floor(bucket) + " >= " + lhi
	}
	switch {
	case len(p.Time.Lower) > 0 && !m.fixedOffset():
		lfl := boundsRef(levelCol("lfl", i))
		in += " AND " + bucket + " > " + lfl
		out = append([]string{floor(bucket) + " <= " + lfl}, out...)
	case len(p.Time.Lower) > 0:
		out = append([]string{floor(bucket) + " < " + boundsRef("lo")}, out...)
	}
	return "(SELECT * FROM " + relation(l.Table) + " r WHERE " + in +
		" UNION ALL SELECT * FROM " + relation(m.r.Table) + " r WHERE (" + strings.Join(out, " OR ") + ")) r"
}

// levelPick is BoundsRelation's column that says which of several levels
// the rollup arm reads (1 for the first).
const levelPick = "pick"

// levelCol is BoundsRelation's or LogRelation's column name for the i-th
// level the fetch may read: name itself for the first, then name2, ...
func levelCol(name string, i int) string {
	if i == 0 {
		return name
	}
	return name + strconv.Itoa(i+1)
}

// levelChoice is the expression, over BoundsRelation's columns, that picks
// which of the levels lvs (coarsest first) the rollup arm reads, when the
// range is known only as the statement runs: the first whose last whole
// bucket before hi starts at or after lo (so that the range holds a whole
// bucket of it), else the last. Any choice gives the same answer
// (levelFrom reads each of the range's rollup buckets once, from a level
// or from the rollup table); the choice only decides how many rows that
// takes. A NULL bound picks the last.
func (m *matcher) levelChoice(lvs []catalog.Level) string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, lv := range lvs[:len(lvs)-1] {
		floor := m.bucketMath(lv.Grain).floor
		fmt.Fprintf(&b, " WHEN %s >= lo THEN %d", floor(floor("hi")+" - interval '1 microsecond'"), i+1)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(lvs))
	return b.String()
}

func (m *matcher) sourceSQL() string {
	s := relation(m.r.Source)
	if m.fi.Only {
		return "ONLY " + s
	}
	return s
}

// relation is table t's name as the fetch prints it: quoted only where it
// must be.
func relation(t catalog.Table) string {
	return syntax.QuoteIdent(t.Schema) + "." + syntax.QuoteIdent(t.Name)
}

// fixedOffset reports whether the rollup's buckets keep one offset from
// UTC: a date or timestamp column, or a timestamptz column cut in UTC or
// another zone without daylight saving (Etc/GMT+5 ...). There a bucket
// holds exactly the times from its start to the next's.
func (m *matcher) fixedOffset() bool {
	return m.r.TimeType != catalog.Timestamptz || fixedZone(m.r.TimeZone)
}

// fixedZone reports whether zone (a name from pg_timezone_names) keeps one
// offset from UTC for all time: UTC by the names pgsketch.is_utc accepts,
// and the Etc/GMT zones.
func fixedZone(zone string) bool {
	switch zone {
	case "UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu":
		return true
	}
	return etcGMT.MatchString(zone)
}

var etcGMT = regexp.MustCompile(`^Etc/GMT([+-](0|[1-9]|1[0-4]))?$`)

// bucketMath prints the bucket arithmetic of one grain: in the rollup's
// zone for a timestamptz column (date_trunc's zone argument, and
// intervals of hours, which the session's TimeZone does not stretch), on
// timestamps, where no zone applies, for date and timestamp columns.
type bucketMath struct {
	grain catalog.Grain
	// zone is the zone's literal for a timestamptz column, "" otherwise.
	zone string
	// length is the buckets' length when they all have the same (hours,
	// days and weeks that keep one offset from UTC), "" otherwise.
	length string
}

func (m *matcher) bucketMath(g catalog.Grain) bucketMath {
	bm := bucketMath{grain: g}
	if m.r.TimeType == catalog.Timestamptz {
		bm.zone = catalog.QuoteLiteral(m.r.TimeZone)
	}
	if m.fixedOffset() {
		bm.length = map[catalog.Grain]string{catalog.Hour: "1", catalog.Day: "24", catalog.Week: "168"}[g]
	}
	return bm
}

// floor is the start of the bucket holding x.
func (b bucketMath) floor(x string) string {
	if b.zone == "" {
		return "date_trunc('" + string(b.grain) + "', " + x + ")"
	}
	return "date_trunc('" + string(b.grain) + "', " + x + ", " + b.zone + ")"
}

// lengthLess is the buckets' length less a microsecond, as an interval
// literal: '23:59:59.999999' for days.
func (b bucketMath) lengthLess() string {
	h, _ := strconv.Atoi(b.length)
	return "interval '" + pad2(h-1) + ":59:59.999999'"
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// zonedHours are intervals that land inside the next bucket from the
// start of any bucket, whatever its length (days and weeks with a clock
// change, months): hours are absolute.
var zonedHours = map[catalog.Grain]string{catalog.Hour: "1 hour", catalog.Day: "26 hours", catalog.Week: "180 hours", catalog.Month: "768 hours"}

// next is the first bucket start after the bucket holding x.
func (b bucketMath) next(x string) string {
	switch {
	case b.length != "":
		return b.floor(x + " + interval '" + b.length + " hours'")
	case b.zone == "":
		return b.floor(x) + " + interval '1 " + string(b.grain) + "'"
	}
	return b.floor(b.floor(x) + " + interval '" + zonedHours[b.grain] + "'")
}

// ceil is the first bucket start at or after x.
func (b bucketMath) ceil(x string) string {
	switch {
	case b.length != "":
		return b.floor(x + " + " + b.lengthLess())
	case b.zone == "":
		return b.floor(x+" - interval '1 microsecond'") + " + interval '1 " + string(b.grain) + "'"
	}
	return b.next(x + " - interval '1 microsecond'")
}

// end is the last instant of the bucket starting at s (s itself when s is
// infinite).
func (b bucketMath) end(s string) string {
	switch {
	case b.length != "":
		return s + " + " + b.lengthLess()
	case b.zone == "":
		return s + " + interval '1 " + string(b.grain) + "' - interval '1 microsecond'"
	}
	return b.floor(s+" + interval '"+zonedHours[b.grain]+"'") + " - interval '1 microsecond'"
}

// strictMinMax is GREATEST or LEAST of xs, but NULL when any of args is:
// PostgreSQL's GREATEST and LEAST skip NULLs, while a NULL bound (a NULL
// parameter, a NULL literal) makes the query's own comparison select no
// row. Each of xs is NULL exactly when the arg it is computed from is, or
// never (the watermark).
func strictMinMax(fn string, xs, args []string) string {
	switch {
	case len(xs) == 0:
		return ""
	case len(xs) == 1 && len(args) <= 1:
		return xs[0]
	}
	mm := fn + "(" + strings.Join(xs, ", ") + ")"
	if len(args) == 0 {
		return mm
	}
	var notNull []string
	for _, a := range args {
		notNull = append(notNull, a+" IS NOT NULL")
	}
	return "CASE WHEN " + strings.Join(notNull, " AND ") + " THEN " + mm + " END"
}
