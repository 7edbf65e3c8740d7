package rewrite

import (
	"cmp"
	"slices"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// New users: keys counted by their first bucket, written as analysts
// write it, a subquery of one row per key with its first time, counted:
//
//	SELECT d, count(*) FROM (SELECT user_id, min(created_at)::date AS d FROM events GROUP BY user_id) t
//	GROUP BY d ORDER BY d
//	SELECT count(*) FROM (SELECT user_id FROM events GROUP BY user_id
//	                      HAVING min(created_at) >= '2026-11-01' AND min(created_at) < '2026-12-01') t
//
// A rollup with first-seen bookkeeping of the key (catalog.FirstSeen)
// answers it exactly when every period the subquery selects is a function
// of min(time) that its buckets determine (date_trunc to its grain or
// coarser, a cast to date of a daily one, in its calendar), and its HAVING
// bounds min(time) by >= and < only: the subquery becomes the rows of
// pgsketch.first_seen, one per first bucket with its number of keys
// (pgsketch_users), each period computed on the bucket's start, and each
// count(*) over it their sum. The outer query may only read the periods
// and count(*); PostgreSQL evaluates the rest of it as written. A WHERE
// inside the subquery asks for the keys first seen among the rows it
// keeps, a question the bookkeeping does not answer.

// usersColumn is the column of the replaced subquery holding each
// bucket's number of new keys.
const usersColumn = "pgsketch_users"

// firstSeenShape reports whether s counts the rows of a subquery grouped
// by one column that calls min: only then does planFirstSeen decide.
func firstSeenShape(s *syntax.Select) bool {
	if len(s.From) != 1 || s.From[0].Query == nil {
		return false
	}
	in := s.From[0].Query
	return len(in.GroupBy) == 1 && in.AnyExpr(func(e syntax.Expr) bool {
		f, ok := e.(*syntax.FuncCall)
		return ok && classifyAgg(f) == minOf
	}) && s.AnyExpr(func(e syntax.Expr) bool {
		f, ok := e.(*syntax.FuncCall)
		return ok && classifyAgg(f) == countRows
	})
}

// perKey is the subquery of a first-seen count: its table, key column,
// the periods it selects (by output name) and the bounds its HAVING puts
// on min(time).
type perKey struct {
	from    syntax.FromItem
	key     string
	periods map[string]syntax.Expr
	order   []string
	lo, hi  syntax.Expr
	// bounded are the min calls the bounds compare: each must be
	// min(time column) of the rollup that answers.
	bounded []syntax.Expr
}

// planFirstSeen plans a first-seen count (firstSeenShape holds), or says
// why it is not answered.
func planFirstSeen(s *syntax.Select, snap *catalog.Snapshot, sess env) (*built, string) {
	fi := s.From[0]
	switch {
	case !sess.Approx:
		return nil, "first seen: pgsketch.approx is off"
	case s.Unsupported != "" || s.With != nil:
		return nil, "first seen: the query uses " + cmp.Or(s.Unsupported, "a WITH clause")
	case s.Distinct:
		return nil, "first seen: the query is SELECT DISTINCT"
	case fi.Alias == "":
		return nil, "first seen: the subquery has no alias"
	}
	pk, why := readPerKey(fi)
	if why != "" {
		return nil, "first seen: " + why
	}
	read, why := outerReads(s, fi.Alias, pk)
	if why != "" {
		return nil, "first seen: " + why
	}
	// Periods the outer query does not read are left out.
	pk.order = slices.DeleteFunc(pk.order, func(name string) bool { return !read[name] })
	if why := unanswerable(&syntax.Select{Targets: []syntax.Target{{Expr: &syntax.ColRef{Parts: []string{pk.key}}}}, From: []syntax.FromItem{pk.from}}, sess); why != "" {
		return nil, "first seen: " + why
	}
	table, rollups := resolveTable(pk.from, snap, sess)
	rollups = slices.DeleteFunc(slices.Clone(rollups), func(r *catalog.Rollup) bool {
		return r.FirstSeen == nil || r.FirstSeen.Key != pk.key
	})
	if len(rollups) == 0 {
		return nil, "first seen: no rollup of table " + table + " keeps first-seen bookkeeping of " + catalog.QuoteIdent(pk.key)
	}
	best, why := bestRollup(rollups, func(r *catalog.Rollup) (*built, string) { return pk.match(s, r, sess) })
	if best == nil {
		return nil, "first seen: " + why
	}
	best.Header().Guard = guard(pk.from, best.Header().Source)
	return best, ""
}

// readPerKey reads FROM item fi as the per-key subquery.
func readPerKey(fi syntax.FromItem) (perKey, string) {
	in := fi.Query
	pk := perKey{periods: map[string]syntax.Expr{}}
	switch {
	case in.Unsupported != "" || in.With != nil || in.SetOp != "":
		return pk, "the subquery uses " + cmp.Or(in.Unsupported, "a WITH clause")
	case in.Distinct || in.Limit != nil || in.Offset != nil || len(in.OrderBy) > 0:
		return pk, "the subquery has DISTINCT, ORDER BY, LIMIT or OFFSET"
	case in.Where != nil:
		return pk, "the subquery has a WHERE clause: it asks for keys first seen among the rows it keeps, which no first-seen bookkeeping holds"
	case len(in.From) != 1 || in.From[0].Unsupported != "" || in.From[0].Query != nil:
		return pk, "the subquery reads other than one table"
	}
	pk.from = in.From[0]
	g, ok := in.GroupBy[0].(*syntax.ColRef)
	if !ok {
		return pk, "the subquery groups by other than a column"
	}
	key, why := ownColumn(g, pk.from)
	if why != "" {
		return pk, why
	}
	pk.key = key
	names := fi.AliasCols
	for i, t := range in.Targets {
		if t.Star {
			return pk, "the subquery's select list has *"
		}
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		if i < len(names) {
			name = names[i]
		}
		if c, ok := t.Expr.(*syntax.ColRef); ok {
			if col, _ := ownColumn(c, pk.from); col == key {
				continue // the key: the outer query may not read it
			}
		}
		if _, dup := pk.periods[name]; dup {
			return pk, "the subquery selects two columns named " + catalog.QuoteIdent(name)
		}
		pk.periods[name] = t.Expr
		pk.order = append(pk.order, name)
	}
	for _, c := range conjuncts(in.Having) {
		if why := pk.bound(c); why != "" {
			return pk, why
		}
	}
	return pk, ""
}

// bound reads a conjunct of the subquery's HAVING: min(time) >= a or
// min(time) < b (either way round).
func (pk *perKey) bound(c syntax.Expr) string {
	o, ok := c.(*syntax.OpExpr)
	if !ok || o.Schema != "" || o.Left == nil {
		return "HAVING " + syntax.SQL(c, nil) + " is not a bound of min(time) by >= or <"
	}
	op, val, call := o.Op, o.Right, o.Left
	if isMin(o.Right) && !isMin(o.Left) {
		op, val, call = map[string]string{">": "<", "<=": ">="}[o.Op], o.Left, o.Right
	} else if !isMin(o.Left) || isMin(o.Right) {
		return "HAVING " + syntax.SQL(c, nil) + " is not a bound of min(time) by >= or <"
	}
	pk.bounded = append(pk.bounded, call)
	switch {
	case op == ">=" && pk.lo == nil:
		pk.lo = val
	case op == "<" && pk.hi == nil:
		pk.hi = val
	default:
		return "HAVING " + syntax.SQL(c, nil) + " is not one lower bound by >= and one upper bound by < of min(time)"
	}
	return ""
}

// isMin reports whether e is a call of min with one argument.
func isMin(e syntax.Expr) bool {
	f, ok := e.(*syntax.FuncCall)
	return ok && classifyAgg(f) == minOf
}

// outerReads checks that the outer query reads only the subquery's
// periods and count(*), through the subquery's alias or unqualified, and
// returns the periods it reads.
func outerReads(s *syntax.Select, alias string, pk perKey) (map[string]bool, string) {
	why := ""
	read := map[string]bool{}
	outputs := map[string]bool{}
	for _, t := range s.Targets {
		if t.Name != "" {
			outputs[t.Name] = true
		}
	}
	s.EachExpr(func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if why != "" {
				return false
			}
			switch x := x.(type) {
			case *syntax.ColRef:
				name := x.Parts[len(x.Parts)-1]
				if len(x.Parts) == 1 && outputs[name] {
					break // an output column, named in GROUP BY or ORDER BY
				}
				if _, ok := pk.periods[name]; !ok || len(x.Parts) > 2 || len(x.Parts) == 2 && x.Parts[0] != alias {
					why = "the query reads " + syntax.SQL(x, nil) + ", not one of the subquery's periods"
				}
				read[name] = true
			case *syntax.FuncCall:
				switch classifyAgg(x) {
				case countRows:
					if x.Star {
						return false
					}
					why = "the query counts " + syntax.SQL(x, nil) + " rather than count(*)"
				case notAgg:
				default:
					why = "the query calls " + syntax.SQL(x, nil) + "; only count(*) is counted from first buckets"
				}
			case *syntax.Unsupported:
				why = "the query uses " + x.What
			}
			return why == ""
		})
	})
	return read, why
}

// match plans the count against rollup r.
func (pk perKey) match(s *syntax.Select, r *catalog.Rollup, sess env) (*built, string) {
	switch why := usable(r, sess); {
	case why != "":
		return nil, why
	case r.Distributed:
		return nil, "its source is distributed by Citus, where first-seen bookkeeping is not kept"
	case !r.FirstSeen.Built:
		return nil, "its first-seen bookkeeping is built by its next refresh"
	}
	m := &matcher{s: s, fi: pk.from, r: r, sess: sess}
	start := firstBucketStart(r)
	// The time column's values stand for min(time) while classifying.
	var at syntax.Expr = &syntax.ColRef{Parts: []string{r.TimeColumn}}
	var cols []string
	for _, name := range pk.order {
		e := pk.periods[name]
		onTime := syntax.Map(e, func(x syntax.Expr) (syntax.Expr, bool) {
			if isMin(x) {
				return at, true
			}
			return nil, false
		})
		if why := pk.minOfTime(e, r, "a period"); why != "" {
			return nil, why
		}
		if c := m.classify(onTime); c.k != kRow && c.k != kConst && !dayOfDates(c, r) {
			if c.why == "" {
				c.why = m.notConstant()
			}
			return nil, "period " + catalog.QuoteIdent(name) + ": " + c.why
		}
		cols = append(cols, syntax.SQL(e, func(x syntax.Expr) (string, bool) {
			if isMin(x) {
				return start, true
			}
			return "", false
		})+" AS "+syntax.QuoteIdent(name))
	}
	for _, b := range pk.bounded {
		if why := pk.minOfTime(b, r, "a HAVING bound"); why != "" {
			return nil, why
		}
	}
	// Unbounded is NULL to pgsketch.first_seen; a bound that is NULL
	// (a parameter bound to NULL, say) makes HAVING false for every key:
	// no row.
	lo, hi := "NULL", "NULL"
	var given []string
	for i, b := range []syntax.Expr{pk.lo, pk.hi} {
		if b == nil {
			continue
		}
		if c := m.classify(b); c.k != kConst {
			return nil, "a bound of min(" + r.TimeColumn + ") is not a constant"
		}
		v := "(" + syntax.SQL(b, nil) + ")::timestamptz"
		if r.TimeType != catalog.Timestamptz {
			v = "((" + syntax.SQL(b, nil) + ")::timestamp AT TIME ZONE 'UTC')"
		}
		given = append(given, v+" IS NOT NULL")
		if i == 0 {
			lo = v
		} else {
			hi = v
		}
	}
	cols = append(cols, "f.users AS "+usersColumn)
	sub := "(SELECT " + strings.Join(cols, ", ") + " FROM pgsketch.first_seen(" + catalog.QuoteLiteral(r.Name) + ", " + lo + ", " + hi + ") AS f"
	if len(given) > 0 {
		sub += " WHERE " + strings.Join(given, " AND ")
	}
	sub += ") AS " + syntax.QuoteIdent(s.From[0].Alias)
	sql := outerSQL(s, sub)
	p := &plan.FirstSeen{Head: plan.Head{Rollup: r.Name, Source: r.Source,
		Notice: "pgsketch: answered from the first-seen bookkeeping of rollup " + r.Name + ": keys of " + catalog.QuoteIdent(r.FirstSeen.Key) +
			" counted exactly by their first bucket"},
		SQL: sql, Refs: paramsIn(sql)}
	return &built{Plan: p, rows: r.Rows}, ""
}

// minOfTime checks that every min in e (a period, or the min a HAVING
// bound compares, as what says) is min(time column of r).
func (pk perKey) minOfTime(e syntax.Expr, r *catalog.Rollup, what string) string {
	why := ""
	syntax.Walk(e, func(x syntax.Expr) bool {
		switch x := x.(type) {
		case *syntax.FuncCall:
			if !isMin(x) {
				if classifyAgg(x) != notAgg {
					why = what + " calls " + syntax.SQL(x, nil)
				}
				return why == ""
			}
			if c, ok := x.Args[0].(*syntax.ColRef); !ok {
				why = what + " takes " + syntax.SQL(x, nil) + ", not min(" + r.TimeColumn + ")"
			} else if col, w := ownColumn(c, pk.from); w != "" || col != r.TimeColumn {
				why = what + " takes " + syntax.SQL(x, nil) + ", not min(" + r.TimeColumn + ")"
			}
			return false
		case *syntax.ColRef:
			why = what + " reads " + syntax.SQL(x, nil) + " outside min(" + r.TimeColumn + ")"
		case *syntax.Param:
			why = what + " takes a parameter"
		}
		return why == ""
	})
	return why
}

// dayOfDates reports whether c is a bare date column of a daily rollup:
// min(day) is its bucket's start.
func dayOfDates(c class, r *catalog.Rollup) bool {
	return c.k == kTime && c.v.raw && r.TimeType == catalog.Date && r.Grain == catalog.Day
}

// firstBucketStart is pgsketch.first_seen's bucket (f.bucket) as a value of
// r's time column type: its first instant, or its wall-clock start.
func firstBucketStart(r *catalog.Rollup) string {
	switch r.TimeType {
	case catalog.Timestamptz:
		return "f.bucket"
	case catalog.Timestamp:
		return "(f.bucket AT TIME ZONE 'UTC')"
	}
	return "(f.bucket AT TIME ZONE 'UTC')::date"
}

// outerSQL prints s over sub (the replaced subquery, aliased) with every
// count(*) the sum of the first buckets' keys, and every output column
// named as PostgreSQL named it.
func outerSQL(s *syntax.Select, sub string) string {
	hook := func(x syntax.Expr) (string, bool) {
		if f, ok := x.(*syntax.FuncCall); ok && classifyAgg(f) == countRows && f.Star {
			return "coalesce(sum(" + usersColumn + "), 0)::bigint", true
		}
		return "", false
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, t := range s.Targets {
		if i > 0 {
			b.WriteString(", ")
		}
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		b.WriteString(syntax.SQL(t.Expr, hook) + " AS " + syntax.QuoteIdent(name))
	}
	b.WriteString(" FROM " + sub)
	if s.Where != nil {
		b.WriteString(" WHERE " + syntax.SQL(s.Where, hook))
	}
	for i, g := range s.GroupBy {
		b.WriteString(map[bool]string{true: " GROUP BY ", false: ", "}[i == 0] + syntax.SQL(g, hook))
	}
	if s.Having != nil {
		b.WriteString(" HAVING " + syntax.SQL(s.Having, hook))
	}
	for i, o := range s.OrderBy {
		b.WriteString(map[bool]string{true: " ORDER BY ", false: ", "}[i == 0] + syntax.SQL(o.Expr, hook) + o.Suffix())
	}
	if s.Limit != nil {
		b.WriteString(" LIMIT " + syntax.SQL(s.Limit, hook))
	}
	if s.Offset != nil {
		b.WriteString(" OFFSET " + syntax.SQL(s.Offset, hook))
	}
	return b.String()
}
