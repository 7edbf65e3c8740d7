package rewrite

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
)

// build assembles the Plan once every part of the query matched: the
// shaping statement, the keys and filters, the time split, then the fetch
// statement's columns (one pair per aggregate), the fetch statement and
// the exact statement.
func (m *matcher) build() (*built, string) {
	r := m.r
	p := &plan.Rollup{
		Head:  plan.Head{Rollup: r.Name, Source: r.Source},
		Table: r.Table, Grain: r.Grain, TimeZone: r.TimeZone, Version: r.Version,
		Watermark: r.Watermark, LateWindow: r.LateWindow,
	}
	b := &built{rows: r.Rows, Plan: p}
	// Shaping first: it may still refuse the query.
	shape, why := m.shapeSQL()
	if why != "" {
		return nil, why
	}
	p.ShapeSQL = shape
	for _, k := range m.keys {
		p.Keys = append(p.Keys, Key{Name: k.name, Expr: m.canon(k.e), Rollup: m.side(k.e, true), Base: m.side(k.e, false)})
	}
	arm := make([]expr, 0, len(m.keys)+len(m.pushed))
	for _, k := range m.keys {
		arm = append(arm, k.e)
	}
	for _, f := range m.pushed {
		p.Filters = append(p.Filters, m.canon(f))
		arm = append(arm, f)
	}
	p.Cache = cacheability(arm)
	if why := m.timeSplit(p); why != "" {
		return nil, why
	}
	cols, why := m.fetchColumns(p)
	if why != "" {
		return nil, why
	}
	m.fetchStatement(p, cols)
	p.RowsPerGroup, p.RowsPerGroupNote = m.rowsPerGroup(p)
	m.exactStatement(p, cols.exact)
	if len(cols.approx) > 0 {
		p.Notice = fmt.Sprintf("pgsketch: %s approximated from rollup %s (standard error %.2f%%)",
			strings.Join(cols.approx, ", "), r.Name, p.StdErr*100)
	}
	return b, ""
}

// fetchCols are the select lists of the fetch statement's rollup half and
// base rows, the exact statement's aggregates, and the aggregates the
// answer approximates.
type fetchCols struct {
	rollup, base, exact, approx []string
}

// fetchColumns makes, for the plan's keys and each aggregate, the columns
// the fetch statement reads from the rollup and from the base rows, and
// adds the aggregates to p.
func (m *matcher) fetchColumns(p *plan.Rollup) (fetchCols, string) {
	c := fetchCols{rollup: []string{"'rollup' AS " + PartColumn}, base: []string{"'base'"}}
	for _, k := range p.Keys {
		c.rollup = append(c.rollup, k.Rollup)
		c.base = append(c.base, k.Base)
	}
	for _, a := range m.aggs {
		ag := Agg{Name: a.name, Expr: a.canon, RollupColumn: -1, BaseColumn: -1, ExactColumn: -1}
		if a.arg != nil && a.kind != countRows {
			ag.Base = m.canon(a.arg)
		}
		col := func() int { return len(c.rollup) }
		switch {
		case a.exact:
			ag.Op, ag.Type = Exact, "bigint"
			ag.ExactColumn = len(p.Keys) + len(c.exact)
			c.exact = append(c.exact, m.side(a.f, false))
		case a.kind == countRows || a.kind == countValues:
			ag.Op, ag.Type, ag.Measure = AddCounts, "bigint", a.measure.Column
			ag.RollupColumn, ag.BaseColumn = col(), col()
			c.rollup = append(c.rollup, "CAST(sum(r."+catalog.QuoteIdent(a.measure.Column)+") AS bigint)")
			if a.kind == countRows {
				c.base = append(c.base, "count(*)")
			} else {
				c.base = append(c.base, "count("+m.side(a.arg, false)+")")
			}
		case a.kind == countDistinct || a.kind == approxCountDistinct:
			ms := a.measure
			if !printableType(ms.Type) {
				return c, a.canon + ": the catalog's type " + strconv.Quote(ms.Type) + " of " + catalog.QuoteIdent(ms.Expression) + " is not a plain type name"
			}
			if ms.Kind == catalog.TopK {
				if why := freqColumns(&c, &ag, ms, m.side(a.arg, false)); why != "" {
					return c, a.canon + ": " + why
				}
				break
			}
			ag.Op, ag.Type, ag.Measure = MergeHLL, "bigint", ms.Column
			if ms.Kind == catalog.Theta {
				ag.Op = MergeTheta
				if ag.ValueForm = thetaForm(ms.Type); ag.ValueForm == "" {
					return c, a.canon + ": no Theta sketch is answered for values of type " + strconv.Quote(ms.Type)
				}
			}
			ag.Log2m, ag.Regwidth, ag.Hash = ms.Log2m, ms.Regwidth, ms.Hash
			ag.RollupColumn = col()
			c.rollup = append(c.rollup, "array_agg(r."+catalog.QuoteIdent(ms.Column)+")")
			c.base = append(c.base, "CAST(NULL AS bytea[])")
			ag.BaseColumn = col()
			c.rollup = append(c.rollup, "CAST(NULL AS "+ms.Type+"[])")
			c.base = append(c.base, "array_agg(DISTINCT "+m.side(a.arg, false)+")")
			if se := ms.StdErr(); se > p.StdErr {
				p.StdErr = se
			}
			c.approx = append(c.approx, a.canon)
		default: // sum, min, max
			ms := a.measure
			ag.Measure = ms.Column
			ag.RollupColumn, ag.BaseColumn = col(), col()
			switch a.kind {
			case sumOf:
				ag.Op, ag.Type = AddSums, sumType(ms.Type)
			case minOf:
				ag.Op, ag.Type = TakeMin, ms.Type
			case maxOf:
				ag.Op, ag.Type = TakeMax, ms.Type
			}
			if !printableType(ag.Type) {
				return c, a.canon + ": the catalog's type " + strconv.Quote(ms.Type) + " is not a plain type name"
			}
			c.rollup = append(c.rollup, "CAST("+a.kind.String()+"(r."+catalog.QuoteIdent(ms.Column)+") AS "+ag.Type+")")
			c.base = append(c.base, "CAST("+a.kind.String()+"("+m.side(a.arg, false)+") AS "+ag.Type+")")
		}
		p.Aggs = append(p.Aggs, ag)
	}
	return c, ""
}

// freqColumns adds the fetch columns of a MergeFreq aggregate of measure
// ms over base expression base: the rollup rows' summaries, the base rows'
// values, and their NULL count.
func freqColumns(c *fetchCols, ag *Agg, ms catalog.Measure, base string) string {
	if ag.ValueForm = thetaForm(ms.Type); ag.ValueForm == "" {
		return "no top-k is answered for values of type " + strconv.Quote(ms.Type)
	}
	ag.Op, ag.Type, ag.Measure, ag.Log2m, ag.Hash = MergeFreq, "bytea", ms.Column, ms.Log2m, ms.Hash
	ag.RollupColumn = len(c.rollup)
	c.rollup = append(c.rollup, "array_agg(r."+catalog.QuoteIdent(ms.Column)+")", "CAST(NULL AS "+ms.Type+"[])", "CAST(NULL AS bigint)")
	ag.BaseColumn = ag.RollupColumn + 1
	c.base = append(c.base, "CAST(NULL AS bytea[])", "array_agg("+base+")", "count(*) - count("+base+")")
	return ""
}

// fetchStatement makes p's fetch statement (p.Fetch, p.FetchSQL): the
// rollup's whole buckets, the base rows at the edges of the range and
// after the last bucket, the buckets the change log lists, and the info
// row.
func (m *matcher) fetchStatement(p *plan.Rollup, c fetchCols) {
	r := m.r
	groupBy := ""
	if len(p.Keys) > 0 {
		pos := make([]string, len(p.Keys))
		for i := range pos {
			pos[i] = strconv.Itoa(i + 2)
		}
		groupBy = " GROUP BY " + strings.Join(pos, ", ")
	}
	rwhere := []string{}
	bwhere := []string{}
	for _, f := range m.pushed {
		rwhere = append(rwhere, m.side(f, true))
		bwhere = append(bwhere, m.side(f, false))
	}
	nfilters := len(rwhere)
	var ranges, upperEdge []string
	for _, rg := range m.ranges {
		ranges = append(ranges, m.side(rg, false))
	}
	tcol := "t." + catalog.QuoteIdent(r.TimeColumn)
	bucket := "r." + catalog.QuoteIdent(catalog.BucketColumn)
	before, notBefore := m.splitSQL(tcol)
	switch {
	case len(p.Time.Lower) > 0:
		// The two edges are read by two statements of the UNION ALL, each
		// with the whole time range, so that PostgreSQL reads each by an
		// index range. (As one OR, the planner factors the range out of the
		// arms and filters every row of the range.) The upper edge also
		// starts at the lower's end, so that a range inside one bucket
		// (BucketsFrom > BucketsTo) is read once.
		rwhere = append(rwhere, bucket+" >= "+p.Time.BucketsFrom)
		upperEdge = append(slices.Clone(bwhere), ranges...)
		upperEdge = append(upperEdge, notBefore(p.Time.BucketsTo), notBefore(p.Time.BucketsFrom))
		if p.Time.UpperEdge != "" {
			upperEdge = append(upperEdge, p.Time.UpperEdge)
		}
		bwhere = append(bwhere, ranges...)
		bwhere = append(bwhere, before(p.Time.BucketsFrom))
		if p.Time.LowerEdge != "" {
			bwhere = append(bwhere, p.Time.LowerEdge)
		}
	case len(p.Time.Upper) > 0:
		bwhere = append(bwhere, ranges...)
		bwhere = append(bwhere, notBefore(p.Time.BucketsTo))
		if p.Time.UpperEdge != "" {
			bwhere = append(bwhere, p.Time.UpperEdge)
		}
	default:
		bwhere = append(bwhere, ranges...)
		// No range on the time column: rows whose time is NULL count
		// too, and no rollup holds them. The bound "<= 'infinity'",
		// true of every time, makes the tail a range to PostgreSQL's
		// planner, which cannot know the statement's own watermark and
		// would otherwise guess a third of the table and scan it all;
		// as a range, it reads the tail and the NULLs by the index.
		bwhere = append(bwhere, "(("+notBefore(p.Time.BucketsTo)+" AND "+tcol+" <= 'infinity') OR "+tcol+" IS NULL)")
	}
	// Buckets the change log lists are read from the base table instead
	// (the dirty arm below), in the same statement, so in one snapshot
	// with the rollup rows and the log.
	rwhere = append(rwhere, bucket+" NOT IN (SELECT "+m.fromLog("l.bucket", true)+" "+p.Time.Dirty+")")
	rwhere = append(rwhere, bucket+" < "+p.Time.BucketsTo)
	f := &p.Fetch
	f.Cols, f.Filters, f.Range, f.GroupBy = c.rollup, rwhere[:nfilters], rwhere[nfilters:], groupBy
	f.From = r.Table.String() + " AS r"
	if lv := m.level(); lv != nil {
		p.Level = lv
		f.From = m.levelFrom(p, *lv)
	}
	baseRows := " UNION ALL SELECT " + strings.Join(c.base, ", ") + " FROM " + m.sourceSQL() + " AS t WHERE "
	f.Rest = baseRows + strings.Join(bwhere, " AND ") + groupBy
	if upperEdge != nil {
		f.Rest += baseRows + strings.Join(upperEdge, " AND ") + groupBy
	}
	f.Rest += m.dirtyArm(p, c.base, ranges, groupBy)
	// The info row: the number of changed buckets read from the base table,
	// from pgsketch.capture_check, which fails the statement (and the
	// proxy then runs the query exactly) when the rollup's change capture
	// is not in place or too many of the range's buckets changed. Every
	// fetch returns this row, so the check always runs.
	f.Rest += " UNION ALL SELECT '" + InfoPrefix + "' || pgsketch.capture_check(" + catalog.QuoteLiteral(r.Name) + ", " +
		p.Time.DirtyFrom + ", " + p.Time.DirtyTo + ")" + strings.Repeat(", NULL", len(c.rollup)-1)
	p.FetchSQL = f.SQL(false, "")
}

// exactStatement makes p's exact statement: the aggregates no sketch
// answers (exactCols), over the base table, grouped by the plan's keys.
func (m *matcher) exactStatement(p *plan.Rollup, exactCols []string) {
	if len(exactCols) == 0 {
		return
	}
	cols := []string{}
	gb := []string{}
	for i, k := range p.Keys {
		cols = append(cols, k.Base)
		gb = append(gb, strconv.Itoa(i+1))
	}
	cols = append(cols, exactCols...)
	p.ExactSQL = "SELECT " + strings.Join(cols, ", ") + " FROM " + m.sourceSQL() + " AS t"
	if m.s.where != nil {
		p.ExactSQL += " WHERE " + m.side(m.s.where, false)
	}
	if len(gb) > 0 {
		p.ExactSQL += " GROUP BY " + strings.Join(gb, ", ")
	}
}

// level returns the coarsest of the rollup's levels on whose rows the
// query's keys and filters are what they are on the rollup's rows: each is
// constant within a level bucket (grouping by day rules out a month level;
// by month, or by nothing, allows it). Nil if none.
func (m *matcher) level() *catalog.Level {
	hours, known := m.rangeHours()
	for i, l := range m.r.Levels { // coarsest first
		if known && hours < minGrainHours[l.Grain] {
			// The range holds no whole bucket of this level: a finer
			// level may hold some (a week inside a month).
			continue
		}
		r := *m.r
		r.Grain = l.Grain
		lm := *m
		lm.r = &r
		ok := true
		for _, k := range m.keys {
			if c := lm.classify(k.e); c.k != kConst && c.k != kRow {
				ok = false
			}
		}
		for _, f := range m.pushed {
			if c := lm.classify(f); c.k != kConst && c.k != kRow {
				ok = false
			}
		}
		if ok {
			return &m.r.Levels[i]
		}
	}
	return nil
}

// minGrainHours are the shortest lengths of a level's buckets (a day or a
// week with a clock change an hour short, February): a range of constants
// shorter than that holds no whole level bucket, whatever its zone.
var minGrainHours = map[catalog.Grain]float64{catalog.Day: 23, catalog.Week: 7*24 - 1, catalog.Month: 28*24 - 1}

// levelFrom is the rollup half's FROM item when it reads level l: the
// level buckets lying wholly in the range's buckets [BucketsFrom,
// BucketsTo), then the rollup's own rows outside them, as one relation r
// with the rollup table's columns (a level table has them by
// construction).
func (m *matcher) levelFrom(p *plan.Rollup, l catalog.Level) string {
	floor, next := m.bucketSQL(l.Grain)
	bucket := "r." + catalog.QuoteIdent(catalog.BucketColumn)
	upto := floor(p.Time.BucketsTo) // the last level bucket ends at or before it
	in, out := bucket+" < "+upto, bucket+" >= "+upto
	if len(p.Time.Lower) > 0 {
		from := next("(" + p.Time.BucketsFrom + " - interval '1 microsecond')") // the first starts at or after it
		in = bucket + " >= " + from + " AND " + in
		out = "(" + bucket + " < " + from + " OR " + out + ")"
	}
	// A level bucket holding a changed bucket is read as rollup rows (the
	// changed one from the base table).
	dirty := "SELECT " + floor(m.fromLog("l.bucket", false)) + " " + p.Time.Dirty
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
func (m *matcher) dirtyArm(p *plan.Rollup, bcols, ranges []string, groupBy string) string {
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
	if len(where) == 0 {
		where = []string{"true"}
	}
	return " UNION ALL SELECT " + strings.Join(bcols, ", ") + " FROM (SELECT DISTINCT " + m.fromLog("l.bucket", false) + " AS lo " +
		p.Time.Dirty + ") AS pgsketch_d CROSS JOIN LATERAL (SELECT * FROM " + m.sourceSQL() + " AS t WHERE " +
		span + " OFFSET 0) AS t WHERE " + strings.Join(where, " AND ") + groupBy
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
	return "(CAST(" + x + " AS timestamp without time zone) AT TIME ZONE 'UTC')"
}

func (m *matcher) sourceSQL() string {
	s := m.r.Source.String()
	if m.fi.only {
		return "ONLY " + s
	}
	return s
}

// printableType accepts the format_type spellings the catalog holds (letters,
// digits, spaces, parentheses, commas, underscores, dots and double quotes)
// so that a type name cannot change the statement it is printed into.
func printableType(t string) bool {
	if t == "" {
		return false
	}
	depth := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == ' ', c == '_', c == '.', c == ',':
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth < 0 {
				return false
			}
		case c == '"':
			// A quoted identifier without embedded quotes.
			j := strings.IndexByte(t[i+1:], '"')
			if j < 0 {
				return false
			}
			i += j + 1
		default:
			return false
		}
	}
	return depth == 0
}

// timeSplit fills p.Time: the bucket range answered from the rollup and the
// base rows around it.
func (m *matcher) timeSplit(p *plan.Rollup) string {
	r := m.r
	var typ, colType string
	switch r.TimeType {
	case catalog.Timestamptz:
		typ, colType = "timestamp with time zone", "timestamp with time zone"
	case catalog.Timestamp:
		typ, colType = "timestamp without time zone", "timestamp without time zone"
	case catalog.Date:
		// Bucket arithmetic on a date column runs on timestamps (date_trunc
		// has no date form), but bounds keep the types PostgreSQL gives
		// them in the query (see typed).
		typ, colType = "timestamp without time zone", "date"
	default:
		return "time column type " + string(r.TimeType) + " is not supported"
	}
	// typed is a bound as PostgreSQL types it when comparing it with the
	// column: a parameter is inferred, and an untyped literal (or NULL)
	// coerced, to the column's type; anything else keeps its own type and
	// the comparison converts it the way a cast does.
	typed := func(b bound) string {
		switch b.expr.(type) {
		case *paramRef:
			return "CAST(" + b.SQL + " AS " + colType + ")"
		case *constExpr:
			if c := b.expr.(*constExpr); c.kind == "str" || c.kind == "null" {
				return "CAST(" + b.SQL + " AS " + colType + ")"
			}
		}
		return b.SQL
	}
	cast := func(b bound) string {
		x := typed(b)
		if colType == typ && x != b.SQL {
			return x
		}
		return "CAST(" + x + " AS " + typ + ")"
	}
	floor, next := m.bucketSQL(r.Grain)
	// firstFinite is where the buckets after -infinity's start for a
	// strict bound: a finite time early enough that rows before its
	// bucket are rare (the base table's lower edge reads them), and late
	// enough above the lowest timestamp that its bucket in any zone can
	// be computed.
	firstFinite := "CAST('4713-01-01 00:00:00+00 BC' AS " + typ + ")"
	ts := TimeSplit{Column: r.TimeColumn, Lower: planBounds(m.lower), Upper: planBounds(m.upper)}
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
	to := []string{ts.Watermark}
	for _, b := range m.upper {
		to = append(to, floor(cast(b)))
	}
	ts.BucketsFrom = strictMinMax("GREATEST", from)
	ts.BucketsTo = strictMinMax("LEAST", to)
	var lowerEdge, upperEdge []string
	for _, b := range m.lower {
		lowerEdge = append(lowerEdge, cast(b)+" < "+ts.BucketsFrom)
	}
	// In a zone other than UTC a bucket's first rows can precede its start
	// (see splitSQL): the range holds rows of BucketsTo's bucket when it
	// reaches a day before it.
	firstRow := ts.BucketsTo
	if r.TimeType == catalog.Timestamptz && r.TimeZone != "UTC" {
		firstRow = "(" + ts.BucketsTo + " - interval '1 day')"
	}
	for _, b := range m.upper {
		op := " > "
		if b.Inclusive {
			op = " >= "
		}
		upperEdge = append(upperEdge, cast(b)+op+firstRow)
	}
	ts.LowerEdge = strings.Join(lowerEdge, " AND ")
	ts.UpperEdge = strings.Join(upperEdge, " AND ")
	ts.DirtyFrom, ts.DirtyTo = "CAST(NULL AS timestamp with time zone)", m.toLog(ts.BucketsTo)
	ts.Dirty = "FROM pgsketch.rollup_dirty AS l WHERE l.rollup = " + catalog.QuoteLiteral(r.Name)
	if len(m.lower) > 0 {
		ts.DirtyFrom = m.toLog(ts.BucketsFrom)
		ts.Dirty += " AND l.bucket >= " + ts.DirtyFrom
	}
	ts.Dirty += " AND l.bucket < " + ts.DirtyTo
	p.Time = ts
	return ""
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
// parameter, a NULL literal) makes the query's own comparison select no row.
func strictMinMax(fn string, xs []string) string {
	if len(xs) == 1 {
		return xs[0]
	}
	var nulls []string
	for _, x := range xs {
		if !strings.HasPrefix(x, "COALESCE(") {
			nulls = append(nulls, x+" IS NULL")
		}
	}
	mm := fn + "(" + strings.Join(xs, ", ") + ")"
	if len(nulls) == 0 {
		return mm
	}
	return "CASE WHEN " + strings.Join(nulls, " OR ") + " THEN NULL ELSE " + mm + " END"
}

// thetaForm is how the executor hashes the base rows' values of a Theta
// measure over a column of type t (as the refresher does: an integer's
// little-endian bytes of its width, a string's bytes), or "" for a type
// it does not (a domain, whose name does not say its base type).
func thetaForm(t string) string {
	switch {
	case t == "smallint":
		return "int2"
	case t == "integer":
		return "int4"
	case t == "bigint":
		return "int8"
	case t == "text" || t == "character varying" || strings.HasPrefix(t, "character varying("):
		return "text"
	}
	return ""
}
