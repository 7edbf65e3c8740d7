package rewrite

import (
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// selectSQL prints a SELECT: targets always with explicit aliases (the names
// PostgreSQL would give them), the given FROM text, and the other clauses
// printed with hook.
func selectSQL(s *syntax.Select, from, where string, groupBy bool, hook func(syntax.Expr) (string, bool)) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	if s.Distinct {
		b.WriteString("DISTINCT ")
	}
	for i, t := range s.Targets {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(syntax.SQL(t.Expr, hook))
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		b.WriteString(" AS " + catalog.QuoteIdent(name))
	}
	if from != "" {
		b.WriteString(" FROM " + from)
	}
	if where != "" {
		b.WriteString(" WHERE " + where)
	}
	if groupBy && len(s.GroupBy) > 0 {
		b.WriteString(" GROUP BY ")
		for i, g := range s.GroupBy {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(syntax.SQL(g, hook))
		}
	}
	if groupBy && s.Having != nil {
		b.WriteString(" HAVING " + syntax.SQL(s.Having, hook))
	}
	if len(s.OrderBy) > 0 {
		b.WriteString(" ORDER BY ")
		for i, o := range s.OrderBy {
			if i > 0 {
				b.WriteString(", ")
			}
			if c, ok := o.Expr.(*syntax.ColRef); ok && len(c.Parts) == 1 && outputName(s, c.Parts[0]) {
				// An output column name: it still names one.
				b.WriteString(catalog.QuoteIdent(c.Parts[0]))
			} else if c, ok := o.Expr.(*syntax.Const); ok && c.Type == "int" {
				b.WriteString(c.Val)
			} else {
				b.WriteString(syntax.SQL(o.Expr, hook))
			}
			b.WriteString(o.Suffix())
		}
	}
	if s.Limit != nil {
		b.WriteString(" LIMIT " + syntax.SQL(s.Limit, hook))
	}
	if s.Offset != nil {
		b.WriteString(" OFFSET " + syntax.SQL(s.Offset, hook))
	}
	return b.String()
}

// outputName reports whether name is the name of a select-list item.
func outputName(s *syntax.Select, name string) bool {
	for _, t := range s.Targets {
		n := t.Name
		if n == "" {
			n = syntax.ColumnName(t.Expr)
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
	for _, o := range s.OrderBy {
		if o.Dir == "USING" {
			return "", "ORDER BY ... USING is not supported"
		}
	}
	var why string
	hook := func(e syntax.Expr) (string, bool) {
		switch e.(type) {
		case *syntax.Const, *syntax.Param:
			return "", false
		}
		col, agg := m.groupColumn(e)
		switch {
		case col >= 0:
			return GroupsRelation + "." + catalog.QuoteIdent(m.groupColumnName(col)), true
		case agg:
			if why == "" {
				why = m.canon(e) + ": aggregate not planned"
			}
			return "NULL", true
		}
		if c, ok := e.(*syntax.ColRef); ok {
			if why == "" {
				why = "column " + m.canon(c) + " must appear in GROUP BY or be used in an aggregate"
			}
			return "NULL", true
		}
		return "", false
	}
	where := ""
	if s.Having != nil {
		where = syntax.SQL(s.Having, hook)
	}
	out := selectSQL(s, GroupsRelation, where, false, hook)
	if why != "" {
		return "", why
	}
	return out, ""
}

// shapeColumns is the shape as plain group columns (plan.Groups.Columns)
// when the query asks for nothing more than them: its select list is its
// keys and aggregates as written, with nothing after GROUP BY; else nil.
func (m *matcher) shapeColumns() []plan.Column {
	s := m.s
	if s.Distinct || s.Having != nil || len(s.OrderBy) > 0 || s.Limit != nil || s.Offset != nil {
		return nil
	}
	cols := make([]plan.Column, 0, len(s.Targets))
	for _, t := range s.Targets {
		of, _ := m.groupColumn(t.Expr)
		if of < 0 {
			return nil
		}
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		cols = append(cols, plan.Column{Of: of, Name: name})
	}
	return cols
}

// groupColumn is the merged groups' column e is, as shapeSQL prints it:
// a key's index, or len(m.keys) plus an aggregate's; -1 for anything else.
// agg reports whether e is an aggregate call (planned or not).
func (m *matcher) groupColumn(e syntax.Expr) (col int, agg bool) {
	c := m.canon(e)
	if f, ok := e.(*syntax.FuncCall); ok && classifyAgg(f) != notAgg {
		for j, a := range m.aggs {
			if a.canon == c {
				return len(m.keys) + j, true
			}
		}
		return -1, true
	}
	for i, k := range m.keys {
		if k.canon == c {
			return i, false
		}
	}
	return -1, false
}

// groupColumnName is the name of the merged groups' column col
// (groupColumn) in GroupsRelation.
func (m *matcher) groupColumnName(col int) string {
	if col < len(m.keys) {
		return m.keys[col].name
	}
	return m.aggs[col-len(m.keys)].name
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
	if !syntax.ContainsFold(sql, "approx_count_distinct") {
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
func substitutePlan(s *syntax.Select, reason string) (*plan.Substitute, string) {
	var from []string
	for _, f := range s.From {
		if f.Unsupported != "" {
			return nil, reason + "; and the query cannot be reprinted with an exact count (FROM has " + f.Unsupported + ")"
		}
		t := ""
		if f.Only {
			t = "ONLY "
		}
		if f.Schema != "" {
			t += catalog.QuoteIdent(f.Schema) + "."
		}
		t += catalog.QuoteIdent(f.Name)
		if f.Alias != "" {
			t += " AS " + catalog.QuoteIdent(f.Alias)
		}
		from = append(from, t)
	}
	for _, o := range s.OrderBy {
		if o.Dir == "USING" {
			return nil, reason + "; and the query cannot be reprinted (ORDER BY ... USING)"
		}
	}
	var bad string
	check := func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if u, ok := x.(*syntax.Unsupported); ok && bad == "" {
				bad = u.What
			}
			if f, ok := x.(*syntax.FuncCall); ok && bad == "" && classifyAgg(unfiltered(f)) == approxCountDistinct && (f.Star || len(f.Args) != 1) {
				bad = syntax.SQL(f, nil) // Rewrite says why none is counted exactly
			}
			return true
		})
	}
	for _, t := range s.Targets {
		if t.Star {
			bad = "*"
		}
		check(t.Expr)
	}
	check(s.Where)
	check(s.Having)
	for _, g := range s.GroupBy {
		check(g)
	}
	for _, o := range s.OrderBy {
		check(o.Expr)
	}
	check(s.Limit)
	check(s.Offset)
	if bad != "" {
		return nil, reason + "; and the query cannot be reprinted with an exact count (it uses " + bad + ")"
	}
	var hook func(syntax.Expr) (string, bool)
	hook = func(e syntax.Expr) (string, bool) {
		// APPROX_COUNT_DISTINCT(DISTINCT x) is APPROX_COUNT_DISTINCT(x);
		// a FILTER stays.
		if f, ok := e.(*syntax.FuncCall); ok && classifyAgg(unfiltered(f)) == approxCountDistinct && len(f.Args) == 1 && !f.Star {
			out := "count(DISTINCT " + syntax.SQL(f.Args[0], hook) + ")"
			if f.Filter != nil {
				out += " FILTER (WHERE " + syntax.SQL(f.Filter, hook) + ")"
			}
			return out, true
		}
		return "", false
	}
	where := ""
	if s.Where != nil {
		where = syntax.SQL(s.Where, hook)
	}
	sql := selectSQL(s, strings.Join(from, ", "), where, true, hook)
	return &plan.Substitute{SQL: sql,
		Head: plan.Head{Notice: "pgsketch: APPROX_COUNT_DISTINCT counted exactly: " + reason}}, ""
}
