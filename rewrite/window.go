package rewrite

import (
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Rolling windows: a series of times joined to the fact table on a window
// of its time column per time, as analysts and query builders write
// 7-day active users per day:
//
//	SELECT d.d::date AS day, count(DISTINCT e.user_id)
//	FROM generate_series('2026-02-01'::timestamp, '2026-04-30', interval '1 day') AS d
//	LEFT JOIN events e ON e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + interval '1 day'
//	GROUP BY d.d ORDER BY d.d
//
// is a star join whose dimension is the series: the arm returns, per
// bucket of the rollup over the whole span the windows can reach, the
// merged sketches, counts and sums; PostgreSQL joins the series to those
// rows with each window condition read on the bucket's start, and unites
// the sketches per window. That is exact when every window bound is the
// start of a bucket: a bucket then lies wholly inside a window or wholly
// outside it. The bounds are computed by PostgreSQL from the series, so
// the outer statement checks each one where it compares it: a bound that
// is not a bucket start, or outside the span the arm read, fails the
// statement (a cast of a message to timestamptz), and PostgreSQL answers
// the query instead.
//
// A window may also end at its bound (e.created_at <= d.d) or start after
// it (e.created_at > d.d - interval '7 days'), and a bound may be the last
// millisecond before a bucket (Cube ends its days at 23:59:59.999). Over a
// timestamptz column, such a condition reads the bucket start S at the
// bound x or a millisecond after it: "> x" as ">= S", "<= x" as "< S".
// They select the same rows unless a row lies at x itself (S = x) or
// between x and S (S a millisecond later): a timestamptz holds
// microseconds. The outer statement checks, in the fetch's snapshot, that
// no row of the source lies there for any bound of any window (an index
// probe per bound; without a btree index on the time column it does not
// probe and fails), and fails when one does.

// seriesItem reports whether fi is generate_series(start, stop, step) in
// FROM with an alias, whose one column the join reads.
func seriesItem(fi syntax.FromItem) bool {
	if fi.Func == nil || fi.Alias == "" || len(fi.FuncCols) > 1 || len(fi.Func.Args) != 3 {
		return false
	}
	name, ok := fi.Func.Builtin()
	return ok && name == "generate_series" && fi.Func.Filter == nil && !fi.Func.Distinct && !fi.Func.Star
}

// smallIntSeries reports whether fi is generate_series of integer literals
// of at most 64 values.
func smallIntSeries(fi syntax.FromItem) bool {
	var n [3]int64
	for i, a := range fi.Func.Args {
		c, ok := a.(*syntax.Const)
		if !ok || c.Type != "int" {
			return false
		}
		v, err := strconv.ParseInt(c.Val, 10, 32)
		if err != nil {
			return false
		}
		n[i] = v
	}
	return n[2] > 0 && n[1] >= n[0] && (n[1]-n[0])/n[2] < 64
}

// windowBound is a window condition of the join: the fact table's time
// column compared (>=, >, < or <=) with an expression of the series.
type windowBound struct {
	op    string
	bound syntax.Expr
}

// edge reports whether the condition includes or excludes its bound
// itself (> or <=), so that the bucket start it is read on is the bound
// or a millisecond after it, and the rows between them are checked.
func (w windowBound) edge() bool { return w.op == ">" || w.op == "<=" }

// lower reports whether the bound starts the window.
func (w windowBound) lower() bool { return w.op == ">=" || w.op == ">" }

// windowSlack bounds how far before the series' start or after its end a
// window bound may lie beyond the offsets the window conditions add: a
// session zone's offset from the rollup's.
const windowSlack = 2 * 24 * time.Hour

// readWindows reads the window conditions of a join to a series: at
// least one lower (>= or >) and one upper (< or <=) bound on the time
// column (> and <= only over a timestamptz column), each
// an expression of the series' values with constant offsets. It adds the
// span the arm reads to the arm's conditions and the bucket key the
// conditions are read on.
func (sj *starJoin) readWindows(r *catalog.Rollup, sessionZone string) string {
	series := sj.series()
	if series == nil || sj.on == nil && len(sj.dims) == 1 && smallIntSeries(*series) {
		// No series, or a few numbers listed beside the fact table (a
		// CROSS JOIN, as Malloy writes nested views): a dimension table
		// with no condition.
		return ""
	}
	switch {
	case len(sj.dims) != 1 || sj.on == nil:
		return "a series joined to the fact table other than by one JOIN ... ON"
	case sj.kind == "LEFT JOIN" && !sj.dimKept:
		// The facts outside every window would stay, with no series
		// value: the arm reads only the span the windows reach.
		return "the fact table LEFT JOIN a series"
	}
	if r.Grain != catalog.Day && r.Grain != catalog.Hour {
		return "a series joined to a rollup of " + string(r.Grain) + "s (days and hours are read)"
	}
	loc, err := time.LoadLocation(r.TimeZone)
	if err != nil {
		return "a series joined to a rollup in zone " + r.TimeZone + ", which Go does not know"
	}
	start, ok1 := timeLiteral(series.Func.Args[0])
	stop, ok2 := timeLiteral(series.Func.Args[1])
	literal := ok1 && ok2
	switch {
	case !intervalLiteral(series.Func.Args[2]):
		return "a series whose step is not a literal interval"
	case literal && (stop.Sub(start) > 3*366*24*time.Hour || stop.Before(start)):
		return "a series of more than three years, or none"
	case !literal:
		for _, a := range series.Func.Args[:2] {
			if why := rowFree(a); why != "" {
				return "a series whose start or stop " + why
			}
		}
	}
	if why := sj.windowsFit(r, sessionZone); why != "" {
		return why
	}
	var lower, upper bool
	var reach time.Duration
	for o, col := range sj.windowConds(r) {
		off, _, why := seriesOffset(o.Right, *series)
		if why != "" {
			return "a window bound " + syntax.SQL(o.Right, nil) + ": " + why
		}
		reach = max(reach, off)
		w := windowBound{op: o.Op, bound: o.Right}
		if w.edge() && r.TimeType != catalog.Timestamptz {
			return "a window bound " + syntax.SQL(o.Right, nil) + " compared by " + o.Op + " with a " + string(r.TimeType) + " column (>= and < are read)"
		}
		if sj.windows == nil {
			sj.windows = map[*syntax.OpExpr]windowBound{}
		}
		if sj.timeRefs == nil {
			sj.timeRefs = map[*syntax.ColRef]bool{}
		}
		sj.windows[o] = w
		sj.timeRefs[col] = true
		lower, upper = lower || w.lower(), upper || !w.lower()
	}
	if !lower || !upper {
		return "a series joined without a window of the time column (>= or > below, < or <= above) per value"
	}
	step := time.Hour
	if r.Grain == catalog.Day {
		step = 24 * time.Hour
	}
	ts := &syntax.ColRef{Parts: []string{refName(sj.fact), r.TimeColumn}}
	timestamptz := &syntax.TypeName{Names: []string{"pg_catalog", "timestamptz"}}
	var ends [2]syntax.Expr
	if literal {
		lo := floorIn(start.Add(-reach-windowSlack), loc, r.Grain)
		hi := floorIn(stop.Add(reach+windowSlack+step), loc, r.Grain)
		for i, at := range []time.Time{lo, hi} {
			v := at.UTC().Format("2006-01-02 15:04:05+00")
			ends[i] = &syntax.Cast{Arg: &syntax.Const{Type: "str", Val: v}, Type: timestamptz}
			sj.span[i] = catalog.QuoteLiteral(v) + "::timestamptz"
		}
	} else {
		// The same span, computed by PostgreSQL from the series' start
		// and stop (now(), parameters) in the fetch and again in the
		// statement around it, which reads one snapshot: the bucket
		// starts at or before the start less the reach and slack, and
		// after the stop plus them.
		hours := func(d time.Duration) syntax.Expr {
			return intervalCast(fmt.Sprintf("%d hours", (d+time.Hour-1)/time.Hour))
		}
		for i, e := range []syntax.Expr{
			&syntax.OpExpr{Op: "-", Left: &syntax.Cast{Arg: series.Func.Args[0], Type: timestamptz}, Right: hours(reach + windowSlack)},
			&syntax.OpExpr{Op: "+", Left: &syntax.Cast{Arg: series.Func.Args[1], Type: timestamptz}, Right: hours(reach + windowSlack + step)},
		} {
			ends[i] = &syntax.FuncCall{Name: []string{"pg_catalog", "date_trunc"}, Args: []syntax.Expr{
				&syntax.Const{Type: "str", Val: string(r.Grain)}, e, &syntax.Const{Type: "str", Val: r.TimeZone}}}
			sj.span[i] = "(" + syntax.SQL(ends[i], nil) + ")"
		}
	}
	sj.inner = append(sj.inner, &syntax.OpExpr{Op: ">=", Left: ts, Right: ends[0]}, &syntax.OpExpr{Op: "<", Left: ts, Right: ends[1]})
	key := &syntax.FuncCall{Name: []string{"date_trunc"}, Args: []syntax.Expr{&syntax.Const{Type: "str", Val: string(r.Grain)}, ts}}
	if sj.exprKey(key) == "" {
		sj.exprKeys = append(sj.exprKeys, syntax.SQL(key, nil))
		sj.exprs = append(sj.exprs, key)
	}
	sj.timeKey = sj.exprKey(key)
	return ""
}

// rowFree says why e, a series' start or stop, is other than a value the
// same in every statement of one transaction (literals, parameters, the
// transaction's clock, casts, operators and the time functions of
// sameInTransaction), or "". PostgreSQL computes the series from it in
// the statement around the arm and the span its windows reach from it in
// the fetch, and checks every bound against that span computed again: a
// value that changes from one evaluation to the next (random(),
// clock_timestamp(), nextval()) could make the fetch read less than the
// windows reach while the check passes.
func rowFree(e syntax.Expr) string {
	why := ""
	syntax.Walk(e, func(x syntax.Expr) bool {
		switch x := x.(type) {
		case *syntax.Const, *syntax.Param, *syntax.Cast, *syntax.OpExpr:
		case *syntax.VarFunc:
			if !sameInTransaction[x.Name] {
				why = "reads " + x.Name
			}
		case *syntax.FuncCall:
			if name, ok := x.Builtin(); !ok || !sameInTransaction[strings.ToLower(name)] || x.Filter != nil || x.Distinct || x.Star {
				why = "calls " + syntax.NameSQL(x.Name)
			}
		case *syntax.ColRef:
			why = "reads " + syntax.SQL(x, nil)
		case *syntax.Unsupported:
			why = "uses " + x.What
		default:
			why = "is other than literals, parameters and the transaction's clock"
		}
		return why == ""
	})
	return why
}

// sameInTransaction are the functions and SQL value functions of times
// whose value is the same in every statement of a transaction, given the
// same arguments.
var sameInTransaction = map[string]bool{
	"now": true, "transaction_timestamp": true, "current_date": true, "current_timestamp": true, "localtimestamp": true,
	"date_trunc": true, "date_bin": true, "timezone": true, "make_date": true, "make_timestamp": true,
	"make_timestamptz": true, "make_interval": true,
}

// series is the join's series of times, or nil.
func (sj *starJoin) series() *syntax.FromItem {
	var series *syntax.FromItem
	for i := range sj.dims {
		if seriesItem(sj.dims[i]) {
			series = &sj.dims[i]
		}
	}
	return series
}

// windowConds yields the conditions of the join that compare r's time
// column of the fact table with a bound (>=, >, < or <=), and the column.
func (sj *starJoin) windowConds(r *catalog.Rollup) iter.Seq2[*syntax.OpExpr, *syntax.ColRef] {
	return func(yield func(*syntax.OpExpr, *syntax.ColRef) bool) {
		for _, c := range conjuncts(sj.on) {
			o, ok := c.(*syntax.OpExpr)
			if !ok || o.Schema != "" || o.Op != ">=" && o.Op != "<" && o.Op != ">" && o.Op != "<=" {
				continue
			}
			col, ok := o.Left.(*syntax.ColRef)
			if !ok || sj.side(col) != "fact" || col.Parts[len(col.Parts)-1] != r.TimeColumn {
				continue
			}
			if !yield(o, col) {
				return
			}
		}
	}
}

// windowRollup is the first rollup over the fact table whose buckets the
// window bounds of a join to a series can start on (windowsFit); nil when
// there is no series, or no such rollup, and then why says why for each.
func (sj *starJoin) windowRollup(sessionZone string) (r *catalog.Rollup, why string) {
	if sj.series() == nil {
		return nil, ""
	}
	var whys []string
	for _, r := range sj.rollups {
		why := sj.windowsFit(r, sessionZone)
		if why == "" {
			return r, ""
		}
		whys = append(whys, "rollup "+r.Name+": "+why)
	}
	return nil, strings.Join(whys, "; ")
}

// windowsFit says why the window bounds cannot be bucket starts of r, or
// "". A series holds wall clocks (dates or timestamps at midnight, as
// written), which a bound turns into instants in the zone of its AT TIME
// ZONE, or else in the session's: midnight there is a bucket start of a
// daily rollup cut in the same zone, or of an hourly one where both
// zones' hours are UTC hours. The fetch checks every bound it reads
// anyway; this only spares a statement sure to fail there.
func (sj *starJoin) windowsFit(r *catalog.Rollup, sessionZone string) string {
	series := sj.series()
	if series == nil || r.TimeType != catalog.Timestamptz {
		return ""
	}
	for o := range sj.windowConds(r) {
		_, zones, why := seriesOffset(o.Right, *series)
		if why != "" || len(zones) > 1 {
			continue
		}
		z := sessionZone
		if len(zones) == 1 {
			z = zones[0]
		}
		if sameZone(z, r.TimeZone) {
			continue
		}
		bound := "a window bound " + syntax.SQL(o.Right, nil)
		if r.Grain != catalog.Hour {
			return bound + " is a day of time zone " + strconv.Quote(z) + ", not of the rollup's " + strconv.Quote(r.TimeZone)
		}
		for _, zone := range []string{z, r.TimeZone} {
			if why := utcHours(zone); why != "" {
				return bound + " is cut in time zone " + strconv.Quote(z) + ", not in the rollup's " + strconv.Quote(r.TimeZone) + " (" + why + ")"
			}
		}
	}
	return ""
}

// windowSQL prints a window condition over the arm's rows: the bucket's
// start compared with the bound, the bound checked to be a bucket start
// within the span the arm read (else the statement fails; the message is
// cast under a CASE on the bound, so that it is no constant PostgreSQL
// would cast while planning; a NULL bound compares as NULL, as in the
// original condition).
//
// Over a time column without a zone (timestamp or date), the bucket's
// start is compared with the bound as written, so that PostgreSQL
// converts them as it converts the column and the bound in the original
// condition: a wall clock compared with a wall clock stays one (cast to
// timestamptz, two wall clocks of a day whose clocks skip an hour, 02:00
// and 03:00 in New York, would be the same instant, and the bucket of
// 02:00 would fall on the wrong side of a bound of 03:00). The bound is
// then checked to be a bucket start both as a wall clock and as an
// instant, and fails the statement by adding the message cast to an
// interval, which keeps the bound's own type.
//
// An edge condition (> or <=, over a timestamptz column) compares the
// bucket's start with the bucket start at the bound or a millisecond after
// it (edgeStart), by >= or <; edgeCheck checks the rows between.
func (sj starJoin) windowSQL(w windowBound, q string, hook func(syntax.Expr) (string, bool)) string {
	bound := "(" + syntax.SQL(w.bound, hook) + ")"
	x := "CAST(" + bound + " AS timestamptz)"
	lo, hi := sj.span[0], sj.span[1]
	g := catalog.QuoteLiteral(string(sj.rollup.Grain))
	msg := "CASE WHEN " + x + " IS NOT NULL THEN 'pgsketch: a window bound is not a bucket start of the rollup within the span read' END"
	if w.edge() {
		start := sj.edgeStart(x)
		op := map[string]string{">": ">=", "<=": "<"}[w.op]
		fail := "CAST(CASE WHEN " + x + " IS NOT NULL THEN 'pgsketch: a window bound is neither a bucket start of the rollup nor a millisecond before one within the span read' END AS timestamptz)"
		// lo and hi are bucket starts: the start lies within them
		// exactly when the bound lies within [lo - 1ms, hi].
		check := "CASE WHEN " + x + " >= " + lo + " - " + edgeMillisecond + " AND " + x + " <= " + hi +
			" THEN COALESCE(" + start + ", " + fail + ") ELSE " + fail + " END"
		return "(" + q + sj.timeKey + " " + op + " " + check + ")"
	}
	if sj.rollup.TimeType != catalog.Timestamptz {
		wall := "CAST(" + bound + " AS timestamp)"
		check := "CASE WHEN " + wall + " = date_trunc(" + g + ", " + wall + ") AND " + x + " = date_trunc(" + g + ", " + x + ") AND " +
			x + " >= " + lo + " AND " + x + " <= " + hi + " THEN " + bound +
			" ELSE " + bound + " + CAST(" + msg + " AS interval) END"
		return "(" + q + sj.timeKey + " " + w.op + " " + check + ")"
	}
	check := "CASE WHEN " + x + " = date_trunc(" + g + ", " + x + ") AND " +
		x + " >= " + lo + " AND " + x + " <= " + hi + " THEN " + x +
		" ELSE CAST(" + msg + " AS timestamptz) END"
	return "(" + q + sj.timeKey + " " + w.op + " " + check + ")"
}

// edgeMillisecond is how far before a bucket start an edge bound may lie.
const edgeMillisecond = "interval '1 millisecond'"

// edgeStart is the start of a bucket of the arm's key (the session's
// date_trunc of the grain, as the key and windowSQL's other checks read
// it) at instant x, or a millisecond after it, or NULL when neither is one.
func (sj starJoin) edgeStart(x string) string {
	g := catalog.QuoteLiteral(string(sj.rollup.Grain))
	next := "(" + x + " + " + edgeMillisecond + ")"
	return "CASE WHEN " + x + " = date_trunc(" + g + ", " + x + ") THEN " + x +
		" WHEN " + next + " = date_trunc(" + g + ", " + next + ") THEN " + next + " END"
}

// edgeCheck is a condition of the outer statement that holds when no row
// of the source lies between an edge bound of a window and the bucket
// start it is read on (edgeStart): at the bound itself when that is a
// bucket start, else after it and before the next millisecond. It is
// evaluated once, over every value of the series; each bound is an index
// probe of the time column, and without a btree index on it the
// condition fails the statement rather than scan the table per bound. ""
// when no window condition is an edge.
func (sj starJoin) edgeCheck() string {
	var bounds []string
	for _, w := range sj.windows {
		if w.edge() {
			bounds = append(bounds, "(CAST(("+syntax.SQL(w.bound, nil)+") AS timestamptz))")
		}
	}
	if len(bounds) == 0 {
		return ""
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	r := sj.rollup
	src, ts := r.Source.String(), "pgsketch_row."+catalog.QuoteIdent(r.TimeColumn)
	g := catalog.QuoteLiteral(string(r.Grain))
	x := "pgsketch_edge.x"
	indexed := "EXISTS (SELECT FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid " +
		"JOIN pg_catalog.pg_am a ON a.oid = c.relam JOIN pg_catalog.pg_attribute t ON t.attrelid = i.indrelid AND t.attnum = i.indkey[0] " +
		"WHERE i.indrelid = " + catalog.QuoteLiteral(src) + "::pg_catalog.regclass AND i.indisvalid AND i.indpred IS NULL " +
		"AND a.amname = 'btree' AND t.attname = " + catalog.QuoteLiteral(r.TimeColumn) + ")"
	// A LATERAL subquery with a LIMIT per bound, not a join: under EXISTS,
	// PostgreSQL would plan a join for its first row, one scan of the
	// table against every bound.
	rows := "EXISTS (SELECT FROM " + fromSQL(*sj.series()) + " CROSS JOIN LATERAL (VALUES " + strings.Join(bounds, ", ") + ") AS pgsketch_edge(x) " +
		"CROSS JOIN LATERAL (SELECT FROM " + src + " AS pgsketch_row WHERE " + ts + " >= " + x + " AND " + ts + " < " + x + " + " + edgeMillisecond +
		" AND CASE WHEN " + x + " = date_trunc(" + g + ", " + x + ") THEN " + ts + " = " + x + " ELSE " + ts + " > " + x + " END LIMIT 1) AS pgsketch_probe)"
	return "CAST(CAST(CASE WHEN NOT " + indexed + " THEN " +
		catalog.QuoteLiteral("pgsketch: a window is bounded by > or <=, and "+src+" has no btree index on "+catalog.QuoteIdent(r.TimeColumn)+" to check the rows at its bounds") +
		" WHEN " + rows + " THEN " +
		catalog.QuoteLiteral("pgsketch: rows of "+src+" lie at a window's bound compared by > or <=, where the rollup's buckets would count them in the wrong window") +
		" END AS timestamptz) AS text) IS NULL"
}

// seriesOffset reads a window bound: the series' column, plus or minus
// literal intervals, under casts and AT TIME ZONE; off bounds the
// intervals' total, and zones are the zones of its AT TIME ZONE.
func seriesOffset(e syntax.Expr, series syntax.FromItem) (off time.Duration, zones []string, why string) {
	col := series.Alias
	if len(series.FuncCols) == 1 {
		col = series.FuncCols[0]
	}
	seen := false
	var walk func(e syntax.Expr) bool
	walk = func(e syntax.Expr) bool {
		switch x := e.(type) {
		case *syntax.ColRef:
			if len(x.Parts) != 2 || x.Parts[0] != series.Alias || x.Parts[1] != col {
				why = "it reads " + syntax.SQL(x, nil) + ", not the series' column by its table"
				return false
			}
			seen = true
			return true
		case *syntax.Cast:
			if d, ok := intervalOf(x); ok {
				off += d.abs()
				return true
			}
			return walk(x.Arg)
		case *syntax.OpExpr:
			if x.Schema != "" || x.Op != "+" && x.Op != "-" || x.Left == nil {
				why = "an operator other than + and -"
				return false
			}
			return walk(x.Left) && walk(x.Right)
		case *syntax.FuncCall:
			// AT TIME ZONE 'literal'.
			if name, ok := x.Builtin(); ok && name == "timezone" && len(x.Args) == 2 {
				if c, ok := x.Args[0].(*syntax.Const); ok && c.Type == "str" {
					zones = append(zones, c.Val)
					return walk(x.Args[1])
				}
			}
		}
		why = "a construct other than the series' column, casts, AT TIME ZONE and literal intervals"
		return false
	}
	if !walk(e) {
		return 0, nil, why
	}
	if !seen {
		return 0, nil, "it does not read the series"
	}
	return off, zones, ""
}

// offset is a literal interval's length.
type offset time.Duration

func (o offset) abs() time.Duration {
	if o < 0 {
		return time.Duration(-o)
	}
	return time.Duration(o)
}

// intervalOf reads a literal interval of days, weeks, hours or
// milliseconds: interval '6 days', '1 week', '12 hours', INTERVAL '1' DAY,
// '86399999 milliseconds'.
func intervalOf(c *syntax.Cast) (offset, bool) {
	if c.Type == nil || c.Type.Names[len(c.Type.Names)-1] != "interval" || c.Type.Array > 0 {
		return 0, false
	}
	k, ok := c.Arg.(*syntax.Const)
	if !ok || k.Type != "str" {
		return 0, false
	}
	f := strings.Fields(strings.ToLower(k.Val))
	unit := ""
	switch {
	case len(f) == 2:
		unit = strings.TrimSuffix(f[1], "s")
	case len(f) == 1 && len(c.Type.Mods) == 1:
		// INTERVAL '1' DAY: the unit is the type's field mask.
		m, ok := c.Type.Mods[0].(*syntax.Const)
		if !ok {
			return 0, false
		}
		unit = map[string]string{"8": "day", "1024": "hour"}[m.Val]
	default:
		return 0, false
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, false
	}
	var d time.Duration
	switch unit {
	case "day":
		d = time.Duration(n) * 24 * time.Hour
	case "week":
		d = time.Duration(n) * 7 * 24 * time.Hour
	case "hour":
		d = time.Duration(n) * time.Hour
	case "millisecond":
		d = time.Duration(n) * time.Millisecond
	default:
		return 0, false
	}
	if unit != "millisecond" && (n < -3660 || n > 3660) || d < -3660*24*time.Hour || d > 3660*24*time.Hour {
		return 0, false
	}
	return offset(d), true
}

// intervalLiteral reports whether e is a literal interval intervalOf reads.
func intervalLiteral(e syntax.Expr) bool {
	c, ok := e.(*syntax.Cast)
	if !ok {
		return false
	}
	_, ok = intervalOf(c)
	return ok
}

// timeLiteral reads a literal date or time without a zone (a string, or
// one cast to date or timestamp), as UTC: a date cast drops the time of
// day, as PostgreSQL does. A time more precise than a microsecond, which
// PostgreSQL rounds, is not read.
func timeLiteral(e syntax.Expr) (time.Time, bool) {
	date := false
	if c, ok := e.(*syntax.Cast); ok {
		n, _ := c.Type.Builtin()
		if n != "date" && n != "timestamp" || len(c.Type.Mods) > 0 || c.Type.Array > 0 {
			return time.Time{}, false
		}
		date = n == "date"
		e = c.Arg
	}
	k, ok := e.(*syntax.Const)
	if !ok || k.Type != "str" {
		return time.Time{}, false
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02T15:04:05.000"} {
		t, err := time.Parse(layout, strings.TrimSpace(k.Val))
		switch {
		case err != nil:
			continue
		case t.Nanosecond()%1000 != 0:
			return time.Time{}, false
		case date:
			return t.Truncate(24 * time.Hour), true
		}
		return t, true
	}
	return time.Time{}, false
}

// floorIn is the start of the bucket of grain g (a day or an hour) in loc
// that holds t.
func floorIn(t time.Time, loc *time.Location, g catalog.Grain) time.Time {
	t = t.In(loc)
	if g == catalog.Hour {
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
}
