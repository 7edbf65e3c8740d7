package rewrite

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
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
	p.ShapeCache = shapeCacheability(m.s)
	p.Columns = m.shapeColumns()
	for _, k := range m.keys {
		p.Keys = append(p.Keys, plan.Key{Name: k.name, Expr: m.canon(k.e), Rollup: m.side(k.e, true), Base: m.side(k.e, false)})
	}
	arm := make([]syntax.Expr, 0, len(m.keys)+len(m.pushed))
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
	// shards replaces columns of base (by index) where each shard of a
	// source Citus distributes computes them otherwise (plan.BaseRead):
	// arrays of the values, not of the distinct values, which Citus
	// combines only by gathering the rows themselves.
	shards map[int]string
}

// shardCols is base as each shard of a distributed source computes it.
func (c fetchCols) shardCols() []string {
	out := slices.Clone(c.base)
	for i, col := range c.shards {
		out[i] = col
	}
	return out
}

// fetchColumns makes, for the plan's keys and each aggregate, the columns
// the fetch statement reads from the rollup and from the base rows, and
// adds the aggregates to p.
func (m *matcher) fetchColumns(p *plan.Rollup) (fetchCols, string) {
	c := fetchCols{rollup: []string{"'rollup' AS " + PartColumn}, base: []string{"'base'"}, shards: map[int]string{}}
	for _, k := range p.Keys {
		c.rollup = append(c.rollup, k.Rollup)
		c.base = append(c.base, k.Base)
	}
	for _, a := range m.aggs {
		ag := plan.Agg{Name: a.name, Expr: a.canon, RollupColumn: -1, BaseColumn: -1, ExactColumn: -1}
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
			c.rollup = append(c.rollup, "sum(r."+syntax.QuoteIdent(a.measure.Column)+")::bigint")
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
			if ms.Aggregate == catalog.TopK {
				if why := freqColumns(&c, &ag, ms, m.side(a.arg, false)); why != "" {
					return c, a.canon + ": " + why
				}
				break
			}
			ag.Op, ag.Type, ag.Measure = MergeHLL, "bigint", ms.Column
			if ms.Aggregate == catalog.Theta {
				ag.Op = MergeTheta
				if ag.ValueForm = thetaForm(ms.Type); ag.ValueForm == "" {
					return c, a.canon + ": no Theta sketch is answered for values of type " + strconv.Quote(ms.Type)
				}
			}
			ag.Log2m, ag.Regwidth, ag.Hash = ms.Log2m, ms.Regwidth, ms.Hash
			ag.RollupColumn = col()
			// A NULL of one half takes the type of the other's column in
			// the UNION ALL: the rollup arm comes first, a base arm next.
			c.rollup = append(c.rollup, "array_agg(r."+syntax.QuoteIdent(ms.Column)+")")
			c.base = append(c.base, "NULL")
			ag.BaseColumn = col()
			c.rollup = append(c.rollup, "NULL")
			c.shards[len(c.base)] = "array_agg(" + m.side(a.arg, false) + ")"
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
			c.rollup = append(c.rollup, a.kind.String()+"(r."+syntax.QuoteIdent(ms.Column)+")::"+ag.Type)
			c.base = append(c.base, a.kind.String()+"("+m.side(a.arg, false)+")::"+ag.Type)
		}
		p.Aggs = append(p.Aggs, ag)
	}
	return c, ""
}

// freqColumns adds the fetch columns of a MergeFreq aggregate of measure
// ms over base expression base: the rollup rows' summaries, the base rows'
// values, and their NULL count.
func freqColumns(c *fetchCols, ag *plan.Agg, ms catalog.Measure, base string) string {
	if ag.ValueForm = thetaForm(ms.Type); ag.ValueForm == "" {
		return "no top-k is answered for values of type " + strconv.Quote(ms.Type)
	}
	ag.Op, ag.Type, ag.Measure, ag.Log2m, ag.Hash = MergeFreq, "bytea", ms.Column, ms.Log2m, ms.Hash
	ag.RollupColumn = len(c.rollup)
	c.rollup = append(c.rollup, "array_agg(r."+syntax.QuoteIdent(ms.Column)+")", "NULL", "NULL")
	ag.BaseColumn = ag.RollupColumn + 1
	c.base = append(c.base, "NULL", "array_agg("+base+")", "count(*) - count("+base+")")
	return ""
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
	if m.s.Where != nil {
		p.ExactSQL += " WHERE " + m.side(m.s.Where, false)
	}
	if len(gb) > 0 {
		p.ExactSQL += " GROUP BY " + strings.Join(gb, ", ")
	}
}

// levels returns the rollup's levels the rollup half may read, coarsest
// first: those on whose rows the query's keys and filters are what they
// are on the rollup's rows (each constant within a level bucket: grouping
// by day rules out a month level; by month, or by nothing, allows it), and,
// when constants give the range, that it is long enough to hold a whole
// bucket of. When the range has a lower bound, the fetch chooses among
// them as it runs, from the range it computes (levelChoice): 35 days of
// constants may hold no whole month but four weeks. Without one, only
// the coarsest. Nil if none.
func (m *matcher) levels() []catalog.Level {
	hours, known := m.rangeHours()
	var out []catalog.Level
	for _, l := range m.r.Levels { // coarsest first
		if m.r.TimeType == catalog.Timestamptz && zoneFault(m.r.TimeZone, l.Grain) != "" {
			continue
		}
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
		if !ok {
			continue
		}
		out = append(out, l)
		if len(m.lower) == 0 {
			// Without a lower bound every level bucket before the last
			// whole one is read: the coarsest holds them best.
			break
		}
	}
	return out
}

// minGrainHours are the shortest lengths of a level's buckets (a day or a
// week with a clock change an hour short, February): a range of constants
// shorter than that holds no whole level bucket, whatever its zone.
var minGrainHours = map[catalog.Grain]float64{catalog.Day: 23, catalog.Week: 7*24 - 1, catalog.Month: 28*24 - 1}

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

// thetaForm is how the executor hashes the base rows' values of a Theta
// measure over a column of type t (as the refresher does: an integer's
// little-endian bytes of its width, a string's bytes), or "" for a type
// it does not (a domain, whose name does not say its base type).
func thetaForm(t string) string {
	return typeFacts(t).thetaForm
}
