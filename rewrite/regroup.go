package rewrite

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// What the regrouping (starjoin.go) lets PostgreSQL evaluate as written
// over the arm's rows, beyond plain expressions of keys: window functions
// over the groups, subquery expressions whose references to the fact
// table are to keys, and FILTER conditions comparing the time column with
// a bucket's start (for which the bucket becomes a key).

// hasRegrouped reports whether s holds a window function call or a
// subquery expression that only the regrouping reads.
func hasRegrouped(s *syntax.Select) bool {
	return s.AnyExpr(func(x syntax.Expr) bool {
		u, ok := x.(*syntax.Unsupported)
		return ok && (u.Window != nil || u.Link != nil)
	})
}

// windowFuncs are the built-in window functions; built-in aggregates are
// window functions too.
var windowFuncs = map[string]bool{"row_number": true, "rank": true, "dense_rank": true, "percent_rank": true,
	"cume_dist": true, "ntile": true, "lag": true, "lead": true, "first_value": true, "last_value": true, "nth_value": true}

// readRegrouped checks a construct that PostgreSQL evaluates over the
// arm's rows as written: a window function call over the groups, or a
// subquery expression whose references to the fact table are to arm keys
// (added to keys when key is set). It says why not, or "" when it may be.
func (sj starJoin) readRegrouped(u *syntax.Unsupported, keys map[string]bool, key bool) string {
	switch {
	case u.Window != nil:
		f := unfiltered(u.Window.Func)
		name, builtin := f.Builtin()
		if !builtin || !windowFuncs[name] && (classifyAgg(f) == notAgg || f.IsGrouping()) {
			return "window function " + syntax.NameSQL(f.Name) + "() is not one the rewriter knows"
		}
		return ""
	case u.Link == nil:
		return "the statement uses " + u.What
	}
	l := u.Link
	if l.Other != "" {
		return "the statement uses " + l.Other
	}
	var aggFree [][]string
	for _, c := range l.Calls {
		f := &syntax.FuncCall{Name: c.Name}
		scalar := scalarCall(f)
		if !scalar && classifyAgg(f) == notAgg {
			return "a subquery calls " + syntax.NameSQL(c.Name) + "(), not a function the rewriter knows to be an immutable or stable scalar function or an aggregate"
		}
		if !scalar && !c.Over {
			// Any call but a scalar function's may be an aggregate; one
			// over columns of the outer statement is its aggregate, not
			// the subquery's.
			aggFree = append(aggFree, c.Free...)
		}
	}
	for _, op := range l.Ops {
		if len(op) > 1 && op[0] != "pg_catalog" || !builtinOperators[op[len(op)-1]] {
			return "a subquery uses operator " + strings.Join(op, ".") + ", not one the rewriter knows to be built in"
		}
	}
	fact := refName(sj.fact)
	dims := map[string]bool{}
	for _, d := range sj.dims {
		dims[refName(d)] = true
	}
	for _, n := range append([]string{fact}, slices.Collect(maps.Keys(dims))...) {
		if l.Locals[n] {
			return "a subquery names a table of its own " + catalog.QuoteIdent(n) + ", as the statement does"
		}
	}
	for _, p := range l.Free { // aggFree's are among them
		if len(p) == 1 && p[0] == fact && !slices.Contains(sj.factCols, p[0]) {
			// The table's whole row, which over the arm would be the
			// arm's.
			return "a subquery reads the whole row of " + catalog.QuoteIdent(fact)
		}
	}
	for _, p := range aggFree {
		if len(p) > 1 || len(sj.factCols) == 0 || slices.Contains(sj.factCols, p[0]) || len(sj.dims) > 0 {
			// The aggregate may be the statement's, over the arm's rows.
			return "an aggregate inside a subquery reads " + strings.Join(p, ".") + ", which may be a column of the statement's tables"
		}
	}
	for _, p := range l.Free {
		col := p[len(p)-1]
		switch {
		case len(p) == 1 && len(sj.factCols) == 0:
			return "a subquery reads " + col + ", and the catalog does not list the columns of " + refName(sj.fact)
		case len(p) == 1 && !slices.Contains(sj.factCols, col):
			// Not the fact table's: the subquery's own, or the
			// dimension table's, the same around the arm.
		case len(p) == 1, len(p) == 2 && p[0] == fact && col != "*":
			// May be the fact table's, or is: the arm's key of that name
			// stands for it.
			if key {
				keys[col] = true
			}
		case len(p) == 2 && dims[p[0]]:
		default:
			return "a subquery refers to " + strings.Join(p, ".") + " outside it"
		}
	}
	return ""
}

// bucketFilters finds, in the FILTER conditions of s's aggregates, the
// comparisons time >= C and time < C of the fact table's time column with
// a literal C that starts a bucket of r's grain (at midnight, or an hour,
// a Monday, a first of the month, in the session's time zone, or in UTC
// when that is the session's): over a
// row's bucket start b, time >= C is b >= C and time < C is b < C. For
// those, the bucket date_trunc(grain, time) becomes a key of the arm, and
// PostgreSQL compares it instead (the arm's planner refuses the key
// unless the session's time zone cuts the rollup's buckets).
func (sj *starJoin) bucketFilters(s *syntax.Select, r *catalog.Rollup, zone string) {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return // a zone Go does not know: no literal is known to start a bucket
	}
	utc := sameZone(zone, "UTC")
	s.EachExpr(func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			f, ok := x.(*syntax.FuncCall)
			if !ok || !isAggregate(f) || f.Filter == nil {
				return true
			}
			syntax.Walk(f.Filter, func(y syntax.Expr) bool {
				o, ok := y.(*syntax.OpExpr)
				if !ok || o.Schema != "" || o.Op != ">=" && o.Op != "<" {
					return true
				}
				if c, ok := o.Left.(*syntax.ColRef); ok && sj.side(c) == "fact" && c.Parts[len(c.Parts)-1] == r.TimeColumn && bucketStart(o.Right, r.Grain, loc, utc) {
					if sj.timeRefs == nil {
						sj.timeRefs = map[*syntax.ColRef]bool{}
					}
					sj.timeRefs[c] = true
				}
				return true
			})
			return false
		})
	})
	if len(sj.timeRefs) == 0 {
		return
	}
	col := &syntax.ColRef{Parts: []string{r.TimeColumn}}
	if len(sj.dims) > 0 {
		// Named by its table, as every column of a join must be: an
		// unqualified one elsewhere may be another table's.
		col.Parts = []string{refName(sj.fact), r.TimeColumn}
	}
	key := &syntax.FuncCall{Name: []string{"date_trunc"}, Args: []syntax.Expr{&syntax.Const{Type: "str", Val: string(r.Grain)}, col}}
	if sj.exprKey(key) == "" {
		sj.exprKeys = append(sj.exprKeys, syntax.SQL(key, nil))
		sj.exprs = append(sj.exprs, key)
	}
	sj.timeKey = sj.exprKey(key)
}

// bucketStart reports whether e is a literal time (a string, or one cast
// to date, timestamp or timestamptz) that starts a bucket of grain g: one
// without a zone, or with UTC's when utc (the session's zone, loc, is UTC).
// A time near which loc's offset changes is refused: where midnight
// happens twice, a bucket can start after some of its rows.
func bucketStart(e syntax.Expr, g catalog.Grain, loc *time.Location, utc bool) bool {
	if c, ok := e.(*syntax.Cast); ok {
		switch c.Type.Names[len(c.Type.Names)-1] {
		case "date", "timestamp", "timestamptz":
		default:
			return false
		}
		if len(c.Type.Mods) > 0 || c.Type.Array > 0 {
			return false
		}
		e = c.Arg
	}
	c, ok := e.(*syntax.Const)
	if !ok || c.Type != "str" {
		return false
	}
	v := strings.TrimSpace(c.Val)
	if utc {
		for _, z := range []string{"Z", "z", "+00:00", "+0000", "+00"} {
			if cut, ok := strings.CutSuffix(v, z); ok {
				v = strings.TrimSpace(cut)
				break
			}
		}
	}
	var t time.Time
	var err error
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04:05"} {
		if t, err = time.Parse(layout, v); err == nil {
			break
		}
	}
	if err != nil || t.Minute() != 0 || t.Second() != 0 || t.Nanosecond() != 0 {
		return false
	}
	if at := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc); !steadyOffset(at) {
		return false
	}
	switch g {
	case catalog.Hour:
		return true
	case catalog.Day:
		return t.Hour() == 0
	case catalog.Week:
		return t.Hour() == 0 && t.Weekday() == time.Monday
	case catalog.Month:
		return t.Hour() == 0 && t.Day() == 1
	}
	return false
}

// steadyOffset reports whether t's zone has one UTC offset from three hours
// before t to three hours after.
func steadyOffset(t time.Time) bool {
	_, before := t.Add(-3 * time.Hour).Zone()
	_, after := t.Add(3 * time.Hour).Zone()
	_, at := t.Zone()
	return before == at && at == after
}
