package rewrite

import (
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
)

// selectSQL prints a SELECT: targets always with explicit aliases (the names
// PostgreSQL would give them), the given FROM text, and the other clauses
// printed with hook.
func selectSQL(s *selectStmt, from, where string, groupBy bool, hook func(expr) (string, bool)) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	if s.distinct {
		b.WriteString("DISTINCT ")
	}
	for i, t := range s.targets {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sqlOf(t.e, hook))
		name := t.name
		if name == "" {
			name = figureColname(t.e)
		}
		b.WriteString(" AS " + catalog.QuoteIdent(name))
	}
	if from != "" {
		b.WriteString(" FROM " + from)
	}
	if where != "" {
		b.WriteString(" WHERE " + where)
	}
	if groupBy && len(s.groupBy) > 0 {
		b.WriteString(" GROUP BY ")
		for i, g := range s.groupBy {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(sqlOf(g, hook))
		}
	}
	if groupBy && s.having != nil {
		b.WriteString(" HAVING " + sqlOf(s.having, hook))
	}
	if len(s.orderBy) > 0 {
		b.WriteString(" ORDER BY ")
		for i, o := range s.orderBy {
			if i > 0 {
				b.WriteString(", ")
			}
			if c, ok := o.e.(*colRef); ok && len(c.parts) == 1 && outputName(s, c.parts[0]) {
				// An output column name: it still names one.
				b.WriteString(catalog.QuoteIdent(c.parts[0]))
			} else if c, ok := o.e.(*constExpr); ok && c.kind == "int" {
				b.WriteString(c.val)
			} else {
				b.WriteString(sqlOf(o.e, hook))
			}
			b.WriteString(o.suffix())
		}
	}
	if s.limit != nil {
		b.WriteString(" LIMIT " + sqlOf(s.limit, hook))
	}
	if s.offset != nil {
		b.WriteString(" OFFSET " + sqlOf(s.offset, hook))
	}
	return b.String()
}

// outputName reports whether name is the name of a select-list item.
func outputName(s *selectStmt, name string) bool {
	for _, t := range s.targets {
		n := t.name
		if n == "" {
			n = figureColname(t.e)
		}
		if n == name {
			return true
		}
	}
	return false
}

// shapeSQL prints the query over the merged groups: group keys and
// aggregates become columns of GroupsRelation.
func (m *matcher) shapeSQL() (string, string) {
	s := m.s
	for _, o := range s.orderBy {
		if o.dir == "USING" {
			return "", "ORDER BY ... USING is not supported"
		}
	}
	var why string
	hook := func(e expr) (string, bool) {
		switch x := e.(type) {
		case *constExpr, *paramRef:
			return "", false
		case *funcCall:
			if classifyAgg(x) != notAgg {
				c := m.canon(x)
				for _, a := range m.aggs {
					if a.canon == c {
						return GroupsRelation + "." + catalog.QuoteIdent(a.name), true
					}
				}
				if why == "" {
					why = c + ": aggregate not planned"
				}
				return "NULL", true
			}
		}
		if len(m.keys) > 0 {
			c := m.canon(e)
			for _, k := range m.keys {
				if k.canon == c {
					return GroupsRelation + "." + catalog.QuoteIdent(k.name), true
				}
			}
		}
		if c, ok := e.(*colRef); ok {
			if why == "" {
				why = "column " + m.canon(c) + " must appear in GROUP BY or be used in an aggregate"
			}
			return "NULL", true
		}
		return "", false
	}
	where := ""
	if s.having != nil {
		where = sqlOf(s.having, hook)
	}
	out := selectSQL(s, GroupsRelation, where, false, hook)
	if why != "" {
		return "", why
	}
	return out, ""
}

// ExactEquivalent returns sql with its APPROX_COUNT_DISTINCT(x) counted
// exactly, as COUNT(DISTINCT x): a statement with the same columns and
// parameters that PostgreSQL can prepare and describe (it has no such
// function). ok is false when sql has none, or the rewriter could not
// substitute it (the statement then goes upstream as written).
func ExactEquivalent(sql string) (exact string, ok bool) {
	exact, _ = ExactOrUnsupported(sql)
	return exact, exact != ""
}

// ExactOrUnsupported is ExactEquivalent's exact statement, or, when sql
// calls APPROX_COUNT_DISTINCT in a form that has none, why
// (Result.Unsupported); both are empty when sql calls none.
func ExactOrUnsupported(sql string) (exact, unsupported string) {
	if !containsFold(sql, "approx_count_distinct") {
		return "", ""
	}
	res := Rewrite(sql, noRollups, Session{})
	sub, ok := res.Plan.(*plan.Substitute)
	if !ok {
		return "", res.Unsupported
	}
	return sub.SQL, ""
}

// noRollups is a catalog without rollups: with it, the rewriter can only
// substitute.
var noRollups = catalog.NewSnapshot(nil)

// substitutePlan is the answer when no rollup serves a query that uses
// APPROX_COUNT_DISTINCT: the query itself, with APPROX_COUNT_DISTINCT(x)
// counted exactly as COUNT(DISTINCT x), so that the client never sees
// "function does not exist".
func substitutePlan(s *selectStmt, reason string) (*plan.Substitute, string) {
	var from []string
	for _, f := range s.from {
		if f.unsupported != "" {
			return nil, reason + "; and the query cannot be reprinted with an exact count (FROM has " + f.unsupported + ")"
		}
		t := ""
		if f.only {
			t = "ONLY "
		}
		if f.schema != "" {
			t += catalog.QuoteIdent(f.schema) + "."
		}
		t += catalog.QuoteIdent(f.name)
		if f.alias != "" {
			t += " AS " + catalog.QuoteIdent(f.alias)
		}
		from = append(from, t)
	}
	for _, o := range s.orderBy {
		if o.dir == "USING" {
			return nil, reason + "; and the query cannot be reprinted (ORDER BY ... USING)"
		}
	}
	var bad string
	check := func(e expr) {
		walk(e, func(x expr) bool {
			if u, ok := x.(*unsupported); ok && bad == "" {
				bad = u.what
			}
			if f, ok := x.(*funcCall); ok && bad == "" && classifyAgg(unfiltered(f)) == approxCountDistinct && (f.star || len(f.args) != 1) {
				bad = sqlOf(f, nil) // Rewrite says why none is counted exactly
			}
			return true
		})
	}
	for _, t := range s.targets {
		if t.star {
			bad = "*"
		}
		check(t.e)
	}
	check(s.where)
	check(s.having)
	for _, g := range s.groupBy {
		check(g)
	}
	for _, o := range s.orderBy {
		check(o.e)
	}
	check(s.limit)
	check(s.offset)
	if bad != "" {
		return nil, reason + "; and the query cannot be reprinted with an exact count (it uses " + bad + ")"
	}
	var hook func(expr) (string, bool)
	hook = func(e expr) (string, bool) {
		// APPROX_COUNT_DISTINCT(DISTINCT x) is APPROX_COUNT_DISTINCT(x);
		// a FILTER stays.
		if f, ok := e.(*funcCall); ok && classifyAgg(unfiltered(f)) == approxCountDistinct && len(f.args) == 1 && !f.star {
			out := "count(DISTINCT " + sqlOf(f.args[0], hook) + ")"
			if f.filter != nil {
				out += " FILTER (WHERE " + sqlOf(f.filter, hook) + ")"
			}
			return out, true
		}
		return "", false
	}
	where := ""
	if s.where != nil {
		where = sqlOf(s.where, hook)
	}
	sql := selectSQL(s, strings.Join(from, ", "), where, true, hook)
	return &plan.Substitute{SQL: sql,
		Head: plan.Head{Notice: "pgsketch: APPROX_COUNT_DISTINCT counted exactly: " + reason}}, ""
}
