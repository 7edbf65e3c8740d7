package plan

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
)

// lines collects a plan's printout, one line per call; the statements'
// SQL in full when verbose, else their size.
type lines struct {
	b       strings.Builder
	verbose bool
}

func (l *lines) w(format string, args ...any) { fmt.Fprintf(&l.b, format+"\n", args...) }

// sql prints a statement of the plan under label.
func (l *lines) sql(label, sql string) {
	if l.verbose {
		l.w("%s: %s", label, sql)
		return
	}
	l.w("%s: %d bytes of SQL (EXPLAIN (VERBOSE) prints it)", label, len(sql))
}

// arm prints an arm's plan indented under a title.
func (l *lines) arm(title string, a Plan) {
	l.w("%s", title)
	for _, line := range strings.Split(a.Explain(l.verbose), "\n") {
		l.w("  %s", line)
	}
}

// tail prints what ends every plan's printout but a rollup's: its guard.
func (l *lines) tail(h *Head) string {
	if h.Guard != "" {
		l.w("guard: %s", h.Guard)
	}
	return strings.TrimSuffix(l.b.String(), "\n")
}

func (l *lines) explain(h *Head) {
	switch {
	case h.Explain && h.Verbose:
		l.w("explain: yes, verbose")
	case h.Explain:
		l.w("explain: yes")
	}
}

// String prints a Substitute plan, its statements in full.
func (p *Substitute) String() string { return p.Explain(true) }

// Explain prints a Substitute plan for EXPLAIN.
func (p *Substitute) Explain(verbose bool) string {
	l := lines{verbose: verbose}
	l.w("substitute: %s", p.Notice)
	l.sql("sql", p.SQL)
	return strings.TrimSuffix(l.b.String(), "\n")
}

// String prints a FirstSeen plan, its statement in full.
func (p *FirstSeen) String() string { return p.Explain(true) }

// Explain prints a FirstSeen plan for EXPLAIN.
func (p *FirstSeen) Explain(verbose bool) string {
	l := lines{verbose: verbose}
	l.w("first seen: keys counted by their first bucket, exactly, from the first-seen bookkeeping of rollup %s", p.Rollup)
	l.explain(&p.Head)
	l.sql("sql", p.SQL)
	return l.tail(&p.Head)
}

// String prints a Retention plan, its statements in full.
func (p *Retention) String() string { return p.Explain(true) }

// Explain prints a Retention plan for EXPLAIN.
func (p *Retention) Explain(verbose bool) string {
	l := lines{verbose: verbose}
	l.w("retention grid: cells (set 1's period, set 2's period) = the distinct values in both, counted from Theta sketches")
	l.explain(&p.Head)
	l.w("pairs: %s", p.PeriodCondSQL)
	for i, a := range p.Arms {
		l.arm(fmt.Sprintf("set %d:", i+1), a)
	}
	l.sql("cells counted exactly", p.CellSQL)
	l.sql("shape", p.ShapeSQL)
	return l.tail(&p.Head)
}

// String prints a Nested plan, its statements in full.
func (p *Nested) String() string { return p.Explain(true) }

// Explain prints a Nested plan for EXPLAIN.
func (p *Nested) Explain(verbose bool) string {
	l := lines{verbose: verbose}
	l.w("nested: %d aggregate subquer%s answered from rollups, the statement around %s run by PostgreSQL in the same snapshot", len(p.Arms), plural(len(p.Arms), "y", "ies"), plural(len(p.Arms), "it", "them"))
	l.explain(&p.Head)
	for i, a := range p.Arms {
		l.arm(fmt.Sprintf("subquery %d:", i+1), a)
	}
	l.sql("outer", p.SQLWith(nestedMarks(len(p.Arms))))
	if len(p.Estimated) > 0 {
		l.w("estimated by the proxy: output column%s %s of %d", plural(len(p.Estimated), "", "s"), columnList(p.Estimated), p.Columns)
	}
	return l.tail(&p.Head)
}

// String prints an Overlap plan, its statements in full.
func (p *Overlap) String() string { return p.Explain(true) }

// Explain prints an Overlap plan for EXPLAIN.
func (p *Overlap) Explain(verbose bool) string {
	l := lines{verbose: verbose}
	l.w("overlap: %s = the distinct values of set 1 %s set 2, counted from Theta sketches", catalog.QuoteIdent(p.OutputName), p.SetOp)
	l.explain(&p.Head)
	if p.Params > 0 {
		l.w("parameters: $1 to $%d, bound in each set's statements", p.Params)
	}
	for i, a := range p.Arms {
		l.arm(fmt.Sprintf("set %d:", i+1), a)
	}
	return l.tail(&p.Head)
}

// String prints a Rollup plan, its statements in full.
func (p *Rollup) String() string { return p.Explain(true) }

// Explain prints a Rollup plan for EXPLAIN.
func (p *Rollup) Explain(verbose bool) string {
	l := lines{verbose: verbose}
	w := l.w
	w("rollup: %s (table %s, grain %s, time zone %s, version %d)", p.Rollup, p.Table, p.Grain, p.TimeZone, p.Version)
	w("source: %s", p.Source)
	l.explain(&p.Head)
	for _, k := range p.Keys {
		w("key %s: %s", k.Name, k.Expr)
	}
	for _, a := range p.Aggs {
		w("agg %s: %s", a.Name, a.describe())
	}
	for _, f := range p.Filters {
		w("filter: %s", f)
	}
	w("time: %s", p.timeLine())
	logs := "pgsketch.rollup_dirty"
	if p.ShardLog != "" {
		logs += " and in " + p.ShardLog + " (written on the source's shards; read through pgsketch.shard_logged)"
	}
	w("changes: the range's buckets listed in %s read from the base table; pgsketch.capture_check runs the query exactly instead when the change capture is not in place or too many changed", logs)
	if p.Inserts != nil {
		w("inserts: rows inserted since their buckets were built, read from %s for the range's whole buckets the change log does not list; pgsketch.capture_check_inserts counts the changed ones", p.Inserts)
	}
	switch {
	case len(p.RunLevels) > 1:
		var names, tables []string
		for _, l := range p.RunLevels {
			names = append(names, string(l.Grain))
			tables = append(tables, l.Table.String())
		}
		w("level: %s (tables %s), chosen as the statement runs: the coarsest of which the range holds a whole bucket (else the %s); the range's whole buckets of it read from it, the rest from the rollup table",
			strings.Join(names, " or "), strings.Join(tables, ", "), names[len(names)-1])
	case p.Level != nil:
		w("level: %s (table %s): the range's whole %ss read from it, the rest from the rollup table", p.Level.Grain, p.Level.Table, p.Level.Grain)
	}
	switch {
	case p.Merge == MergeServer && p.ServerFetchSQL == "":
		w("merge: server (%s): fails, PostgreSQL cannot merge the sketches", p.MergeReason)
		l.sql("fetch", p.FetchSQL)
	case p.Merge == MergeServer:
		w("merge: server (%s)", p.MergeReason)
		l.sql("fetch", p.ServerFetchSQL)
	default:
		w("merge: proxy (%s)", p.MergeReason)
		l.sql("fetch", p.FetchSQL)
	}
	if b := p.BaseRead; b != nil {
		w("base rows: read after the fetch, in its transaction, from the spans it returns ($%d, $%d: %s[])", b.SpansParam, b.SpansParam+1, b.SpanType)
		l.sql("base", b.SQL)
	}
	if p.ExactSQL != "" {
		l.sql("exact", p.ExactSQL)
	}
	l.sql("shape", p.ShapeSQL)
	if len(p.Columns) > 0 {
		w("shape in the proxy: %s", p.columnsText())
	}
	if p.Guard != "" {
		w("guard: %s", p.Guard)
	}
	if p.Notice != "" {
		w("notice: %s", p.Notice)
	}
	return strings.TrimSuffix(l.b.String(), "\n")
}

// describe says how an aggregate is merged, for a plan's printout.
func (a Agg) describe() string {
	switch a.Op {
	case MergeHLL:
		return fmt.Sprintf("%s = hll merge of %s (log2m %d, regwidth %d, hash %s) + base %s", a.Expr, a.Measure, a.Log2m, a.Regwidth, a.Hash, a.Base)
	case MergeFreq:
		return fmt.Sprintf("%s = summary merge of %s (%d counters) + base %s (%s)", a.Expr, a.Measure, 1<<a.Log2m, a.Base, a.ValueForm)
	case MergeTheta:
		return fmt.Sprintf("%s = theta union of %s (lg_k %d, hash %s) + base %s (%s)", a.Expr, a.Measure, a.Log2m, a.Hash, a.Base, a.ValueForm)
	case Exact:
		return a.Expr + " = exact"
	}
	base := cmp.Or(a.Base, "rows")
	return fmt.Sprintf("%s = %s of %s + base %s (%s)", a.Expr, a.Op, a.Measure, base, a.Type)
}

// timeLine prints the time range's bounds and the watermark.
func (p *Rollup) timeLine() string {
	var bounds []string
	for _, l := range p.Time.Lower {
		op := ">"
		if l.Inclusive {
			op = ">="
		}
		bounds = append(bounds, op+" "+l.SQL)
	}
	for _, u := range p.Time.Upper {
		op := "<"
		if u.Inclusive {
			op = "<="
		}
		bounds = append(bounds, op+" "+u.SQL)
	}
	if len(bounds) == 0 {
		bounds = []string{"unbounded"}
	}
	wm := p.Watermark.UTC().Format("2006-01-02 15:04:05.999999")
	if p.LateWindow > 0 {
		wm += fmt.Sprintf(", late window %s", p.LateWindow)
	}
	return fmt.Sprintf("%s %s; watermark %s (as of the catalog snapshot; the statement reads its own)", catalog.QuoteIdent(p.Time.Column), strings.Join(bounds, ", "), wm)
}

// String prints a TopK plan, its statements in full.
func (p *TopK) String() string { return p.Explain(true) }

// Explain prints a TopK plan for EXPLAIN.
func (p *TopK) Explain(verbose bool) string {
	l := lines{verbose: verbose}
	w := l.w
	t := p.Spec
	switch {
	case t.Threshold > 0:
		w("top-k: the values of %s counted at least %d times, from frequent-items summaries", t.Item, t.Threshold)
	default:
		order := "ties at the cut may be answered by any of the tied rows"
		if t.TotalOrder {
			order = "ORDER BY goes on after the count: an uncounted value tied at the cut must be ruled out"
		}
		w("top-k: the %d largest counts of %s (LIMIT plus OFFSET), from frequent-items summaries; %s", t.Limit, t.Item, order)
	}
	l.explain(&p.Head)
	w("mode: %s", cmp.Or(p.Session.TopK, TopKVerified))
	for i, k := range p.Keys {
		role := "key"
		if i == t.ItemKey {
			role = "item"
		}
		w("%s %s: %s", role, k.Name, k.Expr)
	}
	for _, a := range p.Aggs {
		w("agg %s: %s", a.Name, a.Expr)
	}
	l.arm("summaries:", p.Arm)
	l.sql("count", t.CountSQL)
	l.sql("shape", p.ShapeSQL)
	return l.tail(&p.Head)
}

// Statements lists a Rollup plan's statements.
func (p *Rollup) Statements() []string {
	return nonEmpty(p.FetchSQL, p.ServerFetchSQL, p.ExactSQL, p.ShapeSQL, p.Guard)
}

// Statements lists a Substitute plan's statement.
func (p *Substitute) Statements() []string { return nonEmpty(p.SQL, p.Guard) }

// Statements lists a FirstSeen plan's statements.
func (p *FirstSeen) Statements() []string { return nonEmpty(p.SQL, p.Guard) }

// Statements lists an Overlap plan's statements.
func (p *Overlap) Statements() []string { return append(armsSQL(p.Arms), nonEmpty(p.Guard)...) }

// Statements lists a Retention plan's statements.
func (p *Retention) Statements() []string {
	return append(armsSQL(p.Arms), nonEmpty(p.ShapeSQL, p.Guard, p.CellSQL)...)
}

// Statements lists a TopK plan's statements.
func (p *TopK) Statements() []string {
	return append(p.Arm.Statements(), nonEmpty(p.ShapeSQL, p.Guard, p.Spec.CountSQL)...)
}

// Statements lists a Nested plan's statements: the outer statement with each arm
// a stand-in of one NULL column (so that it parses).
func (p *Nested) Statements() []string {
	stand := make([]string, len(p.Arms))
	for i := range stand {
		stand[i] = "SELECT NULL"
	}
	return append(armsSQL(p.Arms), nonEmpty(p.SQLWith(stand), p.Guard)...)
}

func armsSQL(arms []*Rollup) []string {
	var out []string
	for _, a := range arms {
		out = append(out, a.Statements()...)
	}
	return out
}

func nonEmpty(sqls ...string) []string {
	var out []string
	for _, s := range sqls {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// nestedMarks stands for a Nested plan's arms in its printout.
func nestedMarks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("subquery %d", i+1)
	}
	return out
}

// columnList prints output column indexes (from 0) as the numbers ORDER BY
// would give them: "1, 3".
func columnList(cols []int) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(c + 1))
	}
	return b.String()
}

// columnsText lists the group columns a shape built in the proxy selects
// (Groups.Columns), for a plan's printout.
func (g *Groups) columnsText() string {
	names := make([]string, len(g.Columns))
	for i, c := range g.Columns {
		from := ""
		switch {
		case c.Of < len(g.Keys):
			from = g.Keys[c.Of].Name
		case c.Of-len(g.Keys) < len(g.Aggs):
			from = g.Aggs[c.Of-len(g.Keys)].Name
		}
		names[i] = from + " AS " + catalog.QuoteIdent(c.Name)
	}
	return "one row per group: " + strings.Join(names, ", ") + ", unless an output format or an aggregate needs the shape statement"
}
