package rewrite

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Cube writes rolling windows as a VALUES list of days joined to a
// subquery of the facts that computes the local time of each row and
// limits the rows to the range the windows reach, by bound parameters:
//
//	SELECT s.date_from AS day, count(DISTINCT "users") AS users
//	FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to
//	      FROM (VALUES ('2026-02-01T00:00:00.000', '2026-02-01T23:59:59.999'), ...) AS dates (date_from, date_to)) AS s
//	LEFT JOIN (SELECT (e.created_at::timestamptz AT TIME ZONE 'UTC') AS "day", e.user_id AS "users"
//	           FROM events AS e
//	           WHERE (e.created_at::timestamptz AT TIME ZONE 'UTC') > $1::timestamp - interval '7 days'
//	             AND (e.created_at::timestamptz AT TIME ZONE 'UTC') <= $2::timestamp) AS b
//	  ON b."day" > s.date_to - interval '7 days' AND b."day" <= s.date_to
//	GROUP BY 1
//
// unnestWindowList reads it as the rolling windows of window.go: the
// VALUES list as generate_series of its first column (every other column
// that column plus a constant), the subquery's columns as the expressions
// they stand for over the fact table, and a comparison of the local time
// with a bound as one of the time column with the bound's instant in that
// zone (e.created_at > timezone('UTC', s.date_to - interval '7 days')).
// That last step holds where the zone's wall clock runs forward across
// every bound: checked from the list's values with the zone's rules (no
// clock change within three hours of a bound). The subquery's own
// comparisons of the local time with values that read nothing of the
// rows (its range, by parameters) leave out no row of any window exactly
// when they hold at the windows' outermost bounds: the statement around
// the arm checks that they do, or fails and PostgreSQL answers it.

// unnestWindowList returns s as rolling windows over the fact table, and
// the conditions the outer statement must check for it (SQL), when s is a
// VALUES list of times joined to a subquery of one table; s itself when s
// is not of that shape; why when it is but cannot be read so.
func unnestWindowList(s *syntax.Select, snap *catalog.Snapshot) (*syntax.Select, []string, string) {
	if len(s.From) != 1 || s.From[0].Join == nil {
		return s, nil, ""
	}
	j := s.From[0].Join
	if !j.Plain || j.On == nil || j.Type != "JOIN" && j.Type != "LEFT JOIN" {
		return s, nil, ""
	}
	ser, sub := j.Left, j.Right
	if ser.Query == nil || sub.Query == nil || ser.Alias == "" || sub.Alias == "" || valuesItem(ser.Query) == nil {
		return s, nil, ""
	}
	u := &unnester{s: s, join: j, ser: ser, sub: sub}
	if why := u.readSeries(); why != "" {
		return nil, nil, "a VALUES list joined to a subquery: " + why
	}
	if why := u.readSubquery(snap); why != "" {
		return nil, nil, "a VALUES list joined to a subquery: " + why
	}
	out, checks, why := u.rewrite()
	if why != "" {
		return nil, nil, "a VALUES list joined to a subquery: " + why
	}
	return out, checks, ""
}

type unnester struct {
	s        *syntax.Select
	join     *syntax.Join
	ser, sub syntax.FromItem
	// The series: key is its first column, whose values run from start
	// by step (rows of them); every other column is key plus offs[col].
	key         string
	start, stop time.Time
	step        time.Duration
	offs        map[string]time.Duration
	// The subquery: fact its table, cols its columns' expressions over
	// the table (by the table's reference name), where its conjuncts.
	fact  syntax.FromItem
	cols  map[string]syntax.Expr
	where []syntax.Expr
	// timeCol is the fact table's timestamptz time column of its rollups.
	timeCol string
}

// valuesItem is the VALUES list a subquery selects from alone, or nil.
func valuesItem(q *syntax.Select) *syntax.FromItem {
	if len(q.From) != 1 || q.From[0].Query == nil || q.From[0].Query.Unsupported != "VALUES" || len(q.From[0].Query.Values) == 0 {
		return nil
	}
	return &q.From[0]
}

// plainSelect reports whether q selects rows without more than a WHERE:
// no grouping, sorting, limits, DISTINCT or WITH.
func plainSelect(q *syntax.Select) bool {
	return q.Unsupported == "" && q.With == nil && len(q.GroupBy) == 0 && q.Having == nil && len(q.OrderBy) == 0 &&
		q.Limit == nil && q.Offset == nil && !q.Distinct
}

// readSeries reads the series subquery: casts to timestamp of the VALUES
// list's columns, each row's first a step after the last's, every other
// column at a constant offset from the first.
func (u *unnester) readSeries() string {
	q, v := u.ser.Query, valuesItem(u.ser.Query)
	if !plainSelect(q) || q.Where != nil || u.ser.ColAliases || v.Alias == "" || len(q.Targets) == 0 {
		return "the list is not selected plainly, each column by its name"
	}
	vals := map[string][]time.Time{}
	var names []string
	for _, t := range q.Targets {
		c, ok := t.Expr.(*syntax.Cast)
		if !ok || t.Star || t.Name == "" {
			return "a column of the list is not cast to timestamp by a name"
		}
		if n, _ := c.Type.Builtin(); n != "timestamp" || len(c.Type.Mods) > 0 {
			return "a column of the list is not cast to timestamp"
		}
		ref, ok := c.Arg.(*syntax.ColRef)
		if !ok || len(ref.Parts) > 2 || len(ref.Parts) == 2 && ref.Parts[0] != v.Alias {
			return "a column of the list is not one of the VALUES"
		}
		i := indexOf(v.AliasCols, ref.Parts[len(ref.Parts)-1])
		if i < 0 {
			return "a column of the list is not one of the VALUES"
		}
		var col []time.Time
		for _, row := range v.Query.Values {
			if i >= len(row) {
				return "a row of the VALUES is short"
			}
			at, ok := timeLiteral(row[i])
			if !ok {
				return "a value of the list is not a literal time"
			}
			col = append(col, at)
		}
		if _, dup := vals[t.Name]; dup {
			return "two columns of the list are named " + t.Name
		}
		vals[t.Name] = col
		names = append(names, t.Name)
	}
	u.key = names[0]
	keys := vals[u.key]
	if len(keys) == 0 || len(keys) > 3*366*24 {
		return "a list of no times or of more than three years' hours"
	}
	u.start, u.stop, u.step = keys[0], keys[len(keys)-1], 24*time.Hour
	if len(keys) > 1 {
		u.step = keys[1].Sub(keys[0])
	}
	if u.step <= 0 || u.step%time.Hour != 0 {
		return "its first column's values do not rise by whole hours"
	}
	for i := range keys {
		if !keys[i].Equal(u.start.Add(time.Duration(i) * u.step)) {
			return "its first column's values are not a series with one step"
		}
	}
	u.offs = map[string]time.Duration{}
	for _, n := range names[1:] {
		off := vals[n][0].Sub(keys[0])
		for i := range keys {
			if vals[n][i].Sub(keys[i]) != off {
				return "column " + n + " is not the first plus a constant"
			}
		}
		if off%time.Millisecond != 0 || off < -7*24*time.Hour || off > 7*24*time.Hour {
			return "column " + n + " is not the first plus whole milliseconds within a week"
		}
		u.offs[n] = off
	}
	return ""
}

// readSubquery reads the subquery of the facts: columns of one table,
// filtered by a WHERE at most, whose rollups cut a timestamptz column.
func (u *unnester) readSubquery(snap *catalog.Snapshot) string {
	q := u.sub.Query
	if !plainSelect(q) || u.sub.ColAliases || len(q.From) != 1 {
		return "the subquery does more than select columns of one table"
	}
	f := q.From[0]
	if f.Name == "" || f.Unsupported != "" || refName(f) == u.ser.Alias {
		return "the subquery reads other than one table"
	}
	u.fact = f
	tn := refName(f)
	bad := ""
	qualify := func(e syntax.Expr) syntax.Expr {
		return syntax.Map(e, func(x syntax.Expr) (syntax.Expr, bool) {
			switch x := x.(type) {
			case *syntax.ColRef:
				switch {
				case len(x.Parts) == 1:
					return &syntax.ColRef{Parts: []string{tn, x.Parts[0]}}, true
				case len(x.Parts) != 2 || x.Parts[0] != tn:
					bad = "the subquery reads " + syntax.SQL(x, nil) + ", not its table's column"
				}
			case *syntax.Unsupported:
				bad = "the subquery uses " + x.What
			case *syntax.FuncCall:
				if isAggregate(x) {
					bad = "the subquery aggregates"
				}
			}
			return nil, false
		})
	}
	u.cols = map[string]syntax.Expr{}
	for _, t := range q.Targets {
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		if t.Star || name == "" || name == "?column?" {
			return "a column of the subquery has no name"
		}
		if _, dup := u.cols[name]; dup {
			return "two columns of the subquery are named " + name
		}
		u.cols[name] = qualify(t.Expr)
	}
	u.where = conjuncts(qualify(q.Where))
	if bad != "" {
		return bad
	}
	// The time column its rollups cut, which must be a timestamptz: the
	// local time of a timestamp or date column is not its instant.
	for _, r := range snap.Rollups() {
		if r.Source.Name != f.Name || f.Schema != "" && r.Source.Schema != f.Schema {
			continue
		}
		if r.TimeType != catalog.Timestamptz {
			return "rollup " + r.Name + " of table " + f.Name + " cuts a " + string(r.TimeType) + " column, not a timestamptz"
		}
		if u.timeCol != "" && u.timeCol != r.TimeColumn {
			return "the rollups of table " + f.Name + " cut different time columns"
		}
		u.timeCol = r.TimeColumn
	}
	if u.timeCol == "" {
		return "table " + f.Name + " has no rollup"
	}
	return ""
}

// rewrite builds the statement over the series and the fact table.
func (u *unnester) rewrite() (*syntax.Select, []string, string) {
	bad := ""
	tn := refName(u.fact)
	serCols := map[string]bool{u.key: true}
	for n := range u.offs {
		serCols[n] = true
	}
	// sub replaces references to the subquery's and the list's columns;
	// outside the join condition of a LEFT JOIN, a column of the
	// subquery must be one of its table's: an expression would not be
	// NULL where no row joins.
	sub := func(inOn bool) func(syntax.Expr) (syntax.Expr, bool) {
		return func(x syntax.Expr) (syntax.Expr, bool) {
			switch x := x.(type) {
			case *syntax.Unsupported:
				bad = "the statement uses " + x.What
			case *syntax.ColRef:
				var side, col string
				switch {
				case len(x.Parts) == 2 && x.Parts[0] == u.sub.Alias:
					side, col = "sub", x.Parts[1]
				case len(x.Parts) == 2 && x.Parts[0] == u.ser.Alias:
					side, col = "ser", x.Parts[1]
				case len(x.Parts) == 1 && u.cols[x.Parts[0]] != nil && !serCols[x.Parts[0]]:
					side, col = "sub", x.Parts[0]
				case len(x.Parts) == 1 && serCols[x.Parts[0]] && u.cols[x.Parts[0]] == nil:
					side, col = "ser", x.Parts[0]
				default:
					bad = "the statement reads " + syntax.SQL(x, nil) + ", neither the list's nor the subquery's column"
					return nil, false
				}
				if side == "sub" {
					e := u.cols[col]
					if e == nil {
						bad = "the subquery has no column " + col
						return nil, false
					}
					if _, plain := e.(*syntax.ColRef); !plain && !inOn && u.join.Type == "LEFT JOIN" {
						bad = "the subquery's column " + col + " is an expression read outside the join condition"
					}
					return syntax.Map(e, func(syntax.Expr) (syntax.Expr, bool) { return nil, false }), true
				}
				key := &syntax.ColRef{Parts: []string{u.ser.Alias, u.key}}
				if col == u.key {
					return key, true
				}
				off, ok := u.offs[col]
				if !ok {
					bad = "the list has no column " + col
					return nil, false
				}
				return &syntax.OpExpr{Op: "+", Left: key, Right: intervalCast(fmt.Sprintf("%d milliseconds", off/time.Millisecond))}, true
			}
			return nil, false
		}
	}
	out := *u.s
	out.Targets = make([]syntax.Target, len(u.s.Targets))
	for i, t := range u.s.Targets {
		if t.Star {
			return nil, nil, "the statement selects *"
		}
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		out.Targets[i] = syntax.Target{Name: name, Expr: syntax.Map(t.Expr, sub(false))}
	}
	out.Where = syntax.Map(u.s.Where, sub(false))
	out.Having = syntax.Map(u.s.Having, sub(false))
	out.GroupBy = make([]syntax.Expr, len(u.s.GroupBy))
	for i, g := range u.s.GroupBy {
		out.GroupBy[i] = syntax.Map(g, sub(false))
	}
	out.OrderBy = make([]syntax.SortItem, len(u.s.OrderBy))
	for i, o := range u.s.OrderBy {
		e := o.Expr
		// A bare name in ORDER BY is an output column's first; the
		// output names stay.
		if c, ok := e.(*syntax.ColRef); !ok || len(c.Parts) != 1 || !slices.ContainsFunc(out.Targets, func(t syntax.Target) bool { return t.Name == c.Parts[0] }) {
			e = syntax.Map(e, sub(false))
		}
		out.OrderBy[i] = syntax.SortItem{Expr: e, Dir: o.Dir, Nulls: o.Nulls}
	}
	on := conjuncts(syntax.Map(u.join.On, sub(true)))
	if bad != "" {
		return nil, nil, bad
	}
	var local string // the local time's expression, as written
	var lower, upper []edgeBound
	var conds, ranges []syntax.Expr
	for _, c := range append(on, u.where...) {
		o, z, x, ok := u.localComparison(c)
		if !ok {
			conds = append(conds, c)
			continue
		}
		if local == "" {
			local = syntax.SQL(o.Left, nil)
		}
		if syntax.SQL(o.Left, nil) != local {
			return nil, nil, "two local times are compared"
		}
		if !readsAlias(o.Right, u.ser.Alias) {
			if why := rowFree(o.Right); why != "" {
				return nil, nil, "the local time is compared with " + syntax.SQL(o.Right, nil) + ", neither a window bound nor a value: it " + why
			}
			ranges = append(ranges, c)
			continue
		}
		if readsAlias(o.Right, tn) {
			return nil, nil, "a window bound reads the facts"
		}
		if why := abbreviationWhy(z); why != "" {
			return nil, nil, why
		}
		at, why := u.boundValues(o.Right)
		if why != "" {
			return nil, nil, "a window bound " + syntax.SQL(o.Right, nil) + ": " + why
		}
		if why := clockForward(z, at); why != "" {
			return nil, nil, why
		}
		b := edgeBound{op: o.Op, at: at}
		if o.Op == ">" || o.Op == ">=" {
			lower = append(lower, b)
		} else {
			upper = append(upper, b)
		}
		conds = append(conds, &syntax.OpExpr{Op: o.Op, Left: x,
			Right: &syntax.FuncCall{Name: []string{"pg_catalog", "timezone"}, Args: []syntax.Expr{&syntax.Const{Type: "str", Val: z}, o.Right}}})
	}
	if len(lower) == 0 || len(upper) == 0 {
		return nil, nil, "no window of the local time (> or >= below, < or <= above) per value"
	}
	var checks []string
	for _, c := range ranges {
		o := c.(*syntax.OpExpr)
		chk, why := impliedRange(o, lower, upper)
		if why != "" {
			return nil, nil, why
		}
		checks = append(checks, chk)
	}
	series := syntax.FromItem{Alias: u.ser.Alias, Unsupported: "a function in FROM", FuncCols: []string{u.key},
		Func: &syntax.FuncCall{Name: []string{"pg_catalog", "generate_series"}, Args: []syntax.Expr{
			timestampCast(u.start), timestampCast(u.stop), intervalCast(fmt.Sprintf("%d hours", u.step/time.Hour))}}}
	var onExpr syntax.Expr = &syntax.BoolExpr{Op: "AND", Args: conds}
	if len(conds) == 1 {
		onExpr = conds[0]
	}
	out.From = []syntax.FromItem{{Unsupported: "a JOIN", Join: &syntax.Join{Type: u.join.Type, Left: series, Right: u.fact, On: onExpr, Plain: true}}}
	if len(checks) == 0 {
		return &out, nil, ""
	}
	return &out, []string{"CAST(CAST(CASE WHEN (" + strings.Join(checks, " AND ") + ") IS NOT TRUE THEN " +
		catalog.QuoteLiteral("pgsketch: the subquery of the facts keeps a narrower range of times than its windows reach") +
		" END AS timestamptz) AS text) IS NULL"}, ""
}

// localComparison reads c as the local time of the fact table's time
// column in a literal zone (timezone(zone, t) or timezone(zone, t::timestamptz),
// as AT TIME ZONE writes it) compared with a bound: the comparison, the
// zone and the time column.
func (u *unnester) localComparison(c syntax.Expr) (o *syntax.OpExpr, zone string, col *syntax.ColRef, ok bool) {
	o, ok = c.(*syntax.OpExpr)
	if !ok || o.Schema != "" || o.Op != ">" && o.Op != ">=" && o.Op != "<" && o.Op != "<=" {
		return nil, "", nil, false
	}
	f, ok := o.Left.(*syntax.FuncCall)
	if !ok || len(f.Args) != 2 || f.Filter != nil || f.Distinct {
		return nil, "", nil, false
	}
	if name, ok := f.Builtin(); !ok || name != "timezone" {
		return nil, "", nil, false
	}
	z, ok := f.Args[0].(*syntax.Const)
	if !ok || z.Type != "str" {
		return nil, "", nil, false
	}
	arg := f.Args[1]
	if cast, ok := arg.(*syntax.Cast); ok {
		if n, _ := cast.Type.Builtin(); n != "timestamptz" || len(cast.Type.Mods) > 0 {
			return nil, "", nil, false
		}
		arg = cast.Arg
	}
	col, ok = arg.(*syntax.ColRef)
	if !ok || len(col.Parts) != 2 || col.Parts[0] != refName(u.fact) || col.Parts[1] != u.timeCol {
		return nil, "", nil, false
	}
	return o, z.Val, col, true
}

// edgeBound is a window bound of the list: its comparison and its value
// (a wall clock, as UTC) for each row of the list.
type edgeBound struct {
	op string
	at []time.Time
}

// boundValues evaluates a window bound for every row of the list: the
// series' first column, plus or minus literal intervals.
func (u *unnester) boundValues(e syntax.Expr) ([]time.Time, string) {
	var out []time.Time
	for t := u.start; !t.After(u.stop); t = t.Add(u.step) {
		v, ok := u.eval(e, t)
		if !ok {
			return nil, "it is not the list's column plus or minus literal intervals"
		}
		out = append(out, v)
	}
	return out, ""
}

func (u *unnester) eval(e syntax.Expr, key time.Time) (time.Time, bool) {
	switch x := e.(type) {
	case *syntax.ColRef:
		return key, len(x.Parts) == 2 && x.Parts[0] == u.ser.Alias && x.Parts[1] == u.key
	case *syntax.OpExpr:
		c, ok := x.Right.(*syntax.Cast)
		if x.Schema != "" || x.Left == nil || !ok || x.Op != "+" && x.Op != "-" {
			return time.Time{}, false
		}
		d, ok := intervalOf(c)
		if !ok {
			return time.Time{}, false
		}
		l, ok := u.eval(x.Left, key)
		if x.Op == "-" {
			d = -d
		}
		return l.Add(time.Duration(d)), ok
	}
	return time.Time{}, false
}

// clockForward says why the wall clock of zone may not run forward
// across a bound, or "": a clock change whose wall-clock span (the hour
// skipped, or the hour that happens twice) holds a bound, or comes within
// a millisecond of one. Elsewhere a local time is above a bound exactly
// when its instant is above the bound's instant in the zone.
func clockForward(zone string, at []time.Time) string {
	if fixedZone(zone) || len(at) == 0 {
		return ""
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return "time zone " + zone + " is unknown to pgsketch's time zone rules"
	}
	first, last := at[0], at[0]
	for _, t := range at {
		if t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	// The wall clocks of the changes from a day before the first bound
	// to a day after the last (bounds are wall clocks read as UTC).
	type span struct{ lo, hi time.Time }
	var spans []span
	t := first.Add(-48 * time.Hour).Truncate(time.Hour)
	_, off := t.In(loc).Zone()
	for end := last.Add(48 * time.Hour); t.Before(end); t = t.Add(time.Hour) {
		next := t.Add(time.Hour)
		_, noff := next.In(loc).Zone()
		if noff == off {
			continue
		}
		hi := changeSecond(loc, t, next, off)
		before, after := time.Unix(hi+int64(off), 0).UTC(), time.Unix(hi+int64(noff), 0).UTC()
		if after.Before(before) {
			before, after = after, before
		}
		spans = append(spans, span{before, after})
		off = noff
	}
	for _, b := range at {
		for _, sp := range spans {
			if !b.Before(sp.lo.Add(-time.Millisecond)) && !b.After(sp.hi.Add(time.Millisecond)) {
				return "time zone " + zone + " changes its clocks at a window bound, " + b.Format("2006-01-02 15:04:05.999")
			}
		}
	}
	return ""
}

// impliedRange is a condition that holds when the subquery's comparison
// o of the local time with a value keeps every row of every window: its
// bound at or beyond the windows' outermost one.
func impliedRange(o *syntax.OpExpr, lower, upper []edgeBound) (string, string) {
	if !timestampTyped(o.Right) {
		return "", "the subquery compares the local time with " + syntax.SQL(o.Right, nil) + ", not a cast to timestamp"
	}
	p := "(" + syntax.SQL(o.Right, nil) + ")"
	lit := func(t time.Time) string {
		return catalog.QuoteLiteral(t.Format("2006-01-02 15:04:05.999999")) + "::timestamp"
	}
	// A window row lies beyond every lower bound's least value and short
	// of every upper bound's greatest: the comparison keeps them all when
	// its value is at or beyond one of those (strictly beyond where the
	// window includes the value and the comparison does not).
	bounds, strict, cmp := upper, "<", ">="
	outermost := func(a, b time.Time) bool { return a.After(b) }
	if o.Op == ">" || o.Op == ">=" {
		bounds, strict, cmp = lower, ">", "<="
		outermost = func(a, b time.Time) bool { return a.Before(b) }
	}
	var conds []string
	for _, b := range bounds {
		m := b.at[0]
		for _, t := range b.at {
			if outermost(t, m) {
				m = t
			}
		}
		c := cmp
		if o.Op == strict && b.op != strict {
			c = strings.TrimSuffix(cmp, "=")
		}
		conds = append(conds, p+" "+c+" "+lit(m))
	}
	return "(" + strings.Join(conds, " OR ") + ")", ""
}

// timestampTyped reports whether e is a timestamp by its form: a cast to
// timestamp, plus or minus literal intervals.
func timestampTyped(e syntax.Expr) bool {
	switch x := e.(type) {
	case *syntax.Cast:
		n, _ := x.Type.Builtin()
		return n == "timestamp" && len(x.Type.Mods) == 0
	case *syntax.OpExpr:
		c, ok := x.Right.(*syntax.Cast)
		if x.Schema != "" || x.Left == nil || !ok || x.Op != "+" && x.Op != "-" {
			return false
		}
		_, ok = intervalOf(c)
		return ok && timestampTyped(x.Left)
	}
	return false
}

// readsAlias reports whether e reads a column qualified by alias.
func readsAlias(e syntax.Expr, alias string) bool {
	found := false
	syntax.Walk(e, func(x syntax.Expr) bool {
		if c, ok := x.(*syntax.ColRef); ok && len(c.Parts) == 2 && c.Parts[0] == alias {
			found = true
		}
		return !found
	})
	return found
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

func intervalCast(s string) syntax.Expr {
	return &syntax.Cast{Arg: &syntax.Const{Type: "str", Val: s}, Type: &syntax.TypeName{Names: []string{"pg_catalog", "interval"}}}
}

func timestampCast(t time.Time) syntax.Expr {
	return &syntax.Cast{Arg: &syntax.Const{Type: "str", Val: t.Format("2006-01-02 15:04:05.999999")}, Type: &syntax.TypeName{Names: []string{"pg_catalog", "timestamp"}}}
}
