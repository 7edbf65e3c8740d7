package rewrite

import (
	"strings"

	"github.com/pgsketch/pgsketch/aggregates/catalog"
)

// Merge is where the sketches of a plan's rollup half are merged.
type Merge string

const (
	// MergeProxy fetches every rollup row's sketches (array_agg per group)
	// and merges them in the proxy: FetchSQL.
	MergeProxy Merge = "proxy"
	// MergeServer has PostgreSQL merge them per group with the hll
	// extension's hll_union_agg, so that one sketch per group crosses the
	// wire: ServerFetchSQL. The proxy still estimates from the merged bytes
	// and adds the base rows' hashes.
	MergeServer Merge = "server"
	// MergeAuto chooses by the rule in Plan.chooseMerge.
	MergeAuto Merge = "auto"
)

// ParseMerge reads a pgsketch.merge setting; "" is MergeAuto.
func ParseMerge(s string) (Merge, bool) {
	switch v := Merge(strings.ToLower(strings.TrimSpace(s))); v {
	case "", MergeAuto:
		return MergeAuto, true
	case MergeProxy, MergeServer:
		return v, true
	}
	return "", false
}

// The rule auto follows (documented in the README, "Where sketches are
// merged"):
//
//  1. no sketch to merge (the query has no distinct count from the rollup):
//     proxy, as there is nothing to merge;
//  2. the database has no hll extension: proxy;
//  3. every output group is one rollup row (the GROUP BY holds every
//     dimension of the rollup, or fixes it with "dim = constant", and
//     truncates the time column to the rollup's grain): proxy, since a
//     merge in PostgreSQL would unpack and repack each sketch for nothing;
//  4. otherwise (some group merges several rollup rows): server, since
//     only one sketch per group then crosses the wire, and PostgreSQL
//     reads the rows anyway.
//
// A cached rollup half is used whichever strategy would run: the cache
// holds the merged groups, keyed by the proxy-merge statement.

// chooseMerge sets Merge, MergeReason and ServerFetchSQL for a session
// whose pgsketch.merge is setting, in a database with extension hll.
func (p *Plan) chooseMerge(hll catalog.Extension, setting Merge) {
	hasSketch := false
	for _, a := range p.Aggs {
		if a.Op == MergeHLL {
			hasSketch = true
		}
	}
	if hll.Installed() && hasSketch {
		// NULL when the group has no sketch, as array_agg over no rows
		// (an aggregate without GROUP BY over no rollup rows).
		p.ServerFetchSQL = p.fetch.sql(func(a Agg) string {
			s, col := quoteIdent(hll.Schema)+".", "r."+quoteIdent(a.Measure)
			return "CASE WHEN count(" + col + ") > 0 THEN ARRAY[" + s + "hll_send(" + s + "hll_union_agg(CAST(" + col + " AS " + s + "hll)))] END"
		})
	}
	switch {
	case setting == MergeProxy:
		p.Merge, p.MergeReason = MergeProxy, "pgsketch.merge = proxy"
	case setting == MergeServer && !hasSketch:
		p.Merge, p.MergeReason = MergeProxy, "no sketches to merge"
	case setting == MergeServer:
		p.Merge, p.MergeReason = MergeServer, "pgsketch.merge = server"
		if !hll.Installed() {
			p.MergeReason += ", but the database has no hll extension"
		}
	case !hasSketch:
		p.Merge, p.MergeReason = MergeProxy, "auto: no sketches to merge"
	case !hll.Installed():
		p.Merge, p.MergeReason = MergeProxy, "auto: the database has no hll extension"
	case p.ManyRowsPerGroup == "":
		p.Merge, p.MergeReason = MergeProxy, "auto: one rollup row per group, the GROUP BY determines the bucket and every dimension"
	default:
		p.Merge, p.MergeReason = MergeServer, "auto: several rollup rows per group: "+p.ManyRowsPerGroup
	}
}

// fetchParts are the pieces FetchSQL is made of, so that the server-merge
// variant can be printed with other expressions for the sketch columns.
type fetchParts struct {
	// cols are the rollup half's select list; hll holds, per entry, the
	// Agg whose sketches it reads (nil for others).
	cols []string
	hll  []*Agg
	// rest is the rollup half after its select list (FROM ... GROUP BY),
	// then the base halves.
	rest string
}

// sql prints the fetch with each sketch column read by merged(agg).
func (f fetchParts) sql(merged func(Agg) string) string {
	cols := make([]string, len(f.cols))
	for i, c := range f.cols {
		if a := f.hll[i]; a != nil && merged != nil {
			c = merged(*a)
		}
		cols[i] = c
	}
	return "SELECT " + strings.Join(cols, ", ") + f.rest
}

// manyRowsPerGroup says how a group of the query can merge more than one
// rollup row, or returns "" when the GROUP BY determines the rollup row:
// every dimension is a key or fixed by "dim = constant", and a key
// truncates the time column to the rollup's grain.
func (m *matcher) manyRowsPerGroup() string {
	var free []string
	for _, d := range m.r.Dimensions {
		if !m.keyedOrFixed(d.Column) {
			free = append(free, quoteIdent(d.Column))
		}
	}
	timeKeyed := false
	for _, k := range m.keys {
		if m.truncatesToGrain(k.e) {
			timeKeyed = true
		}
	}
	var why []string
	if !timeKeyed {
		why = append(why, "no GROUP BY key truncates "+quoteIdent(m.r.TimeColumn)+" to the rollup's "+string(m.r.Grain))
	}
	if len(free) == 1 {
		why = append(why, "dimension "+free[0]+" is not grouped")
	} else if len(free) > 1 {
		why = append(why, "dimensions "+strings.Join(free, ", ")+" are not grouped")
	}
	return strings.Join(why, "; ")
}

// keyedOrFixed reports whether dimension col is a GROUP BY key as it is,
// or fixed to one value by a WHERE conjunct "col = constant".
func (m *matcher) keyedOrFixed(col string) bool {
	isCol := func(e expr) bool {
		c, ok := e.(*colRef)
		if !ok {
			return false
		}
		name, why := m.column(c)
		return why == "" && name == col
	}
	isConst := func(e expr) bool {
		switch e.(type) {
		case *constExpr, *paramRef:
			return true
		}
		return false
	}
	for _, k := range m.keys {
		if isCol(k.e) {
			return true
		}
	}
	for _, f := range m.pushed {
		switch f := f.(type) {
		case *opExpr:
			if f.op == "=" && f.schema == "" && (isCol(f.l) && isConst(f.r) || isConst(f.l) && isCol(f.r)) {
				return true
			}
		case *inExpr:
			if !f.not && len(f.list) == 1 && isCol(f.arg) && isConst(f.list[0]) {
				return true
			}
		}
	}
	return false
}

// truncatesToGrain reports whether key e is date_trunc('<grain>', time)
// (with the rollup's zone, if any), time::date on a daily rollup, or one
// of those under casts: one value per bucket, a different one for each.
func (m *matcher) truncatesToGrain(e expr) bool {
	toDate := false
	for {
		c, ok := e.(*castExpr)
		if !ok {
			break
		}
		if len(c.typ.names) > 0 && c.typ.names[len(c.typ.names)-1] == "date" && c.typ.array == 0 {
			toDate = true
		}
		e = c.arg
	}
	isTime := func(e expr) bool {
		for {
			c, ok := e.(*castExpr)
			if !ok {
				break
			}
			e = c.arg
		}
		c, ok := e.(*colRef)
		if !ok {
			return false
		}
		name, why := m.column(c)
		return why == "" && name == m.r.TimeColumn
	}
	if isTime(e) {
		return toDate && m.r.Grain == catalog.Day
	}
	f, ok := e.(*funcCall)
	if !ok || len(f.name) == 0 || f.name[len(f.name)-1] != "date_trunc" || len(f.args) < 2 || len(f.args) > 3 {
		return false
	}
	unit, ok := f.args[0].(*constExpr)
	if !ok || unit.kind != "str" || !strings.EqualFold(unit.val, string(m.r.Grain)) || !isTime(f.args[1]) {
		return false
	}
	if len(f.args) == 3 {
		zone, ok := f.args[2].(*constExpr)
		return ok && zone.kind == "str" && zone.val == m.r.TimeZone
	}
	return true
}
