package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// aggregate names the rewriter knows to be aggregates it cannot answer.
var otherAggregates = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`array_agg string_agg bool_and bool_or every stddev stddev_pop stddev_samp
	variance var_pop var_samp json_agg jsonb_agg json_object_agg jsonb_object_agg percentile_cont percentile_disc
	mode bit_and bit_or bit_xor corr covar_pop covar_samp regr_avgx regr_avgy regr_count regr_intercept regr_r2
	regr_slope regr_sxx regr_sxy regr_syy xmlagg any_value range_agg range_intersect_agg hll_union_agg
	hll_add_agg rank dense_rank percent_rank cume_dist grouping`) {
		m[k] = true
	}
	return m
}()

// scalarFuncs are the pg_catalog functions the rewriter evaluates on rollup
// rows and merged groups: immutable or stable, not set-returning, not
// aggregates. Any other function (a user function, which may be volatile
// or an aggregate the rewriter does not know; a volatile built-in such as
// random()) makes the query pass through.
var scalarFuncs = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`date_trunc date_part extract to_timestamp to_char to_date to_number timezone
	date make_date make_time make_timestamp make_timestamptz make_interval justify_days justify_hours
	justify_interval isfinite now transaction_timestamp
	abs ceil ceiling floor round trunc sign sqrt cbrt power pow exp ln log log10 mod div pi degrees radians
	width_bucket scale gcd lcm to_hex
	lower upper initcap length char_length character_length octet_length bit_length concat concat_ws
	substring substr left right lpad rpad ltrim rtrim btrim replace split_part strpos position reverse
	repeat md5 format regexp_replace starts_with translate ascii chr quote_ident quote_literal
	quote_nullable encode decode num_nulls num_nonnulls cardinality array_length array_to_string
	string_to_array int2 int4 int8 float4 float8 numeric text bool`) {
		m[k] = true
	}
	return m
}()

// aggCall is what an aggregate call is to the matcher.
type aggCall int

const (
	notAgg              aggCall = iota // not an aggregate
	countDistinct                      // COUNT(DISTINCT x)
	approxCountDistinct                // APPROX_COUNT_DISTINCT(x)
	countRows                          // COUNT(*) or COUNT(constant)
	countValues                        // COUNT(x)
	sumOf                              // SUM(x)
	minOf                              // MIN(x)
	maxOf                              // MAX(x)
	otherAgg                           // an aggregate the rewriter cannot answer
)

// String is the SQL name of a sum, min or max (what the partials are
// computed with), or what the call is.
func (k aggCall) String() string {
	switch k {
	case countDistinct:
		return "count distinct"
	case approxCountDistinct:
		return "approx_count_distinct"
	case countRows, countValues:
		return "count"
	case sumOf:
		return "sum"
	case minOf:
		return "min"
	case maxOf:
		return "max"
	case otherAgg:
		return "other aggregate"
	}
	return "not an aggregate"
}

// classifyAgg says what aggregate call f is.
func classifyAgg(f *syntax.FuncCall) aggCall {
	if f.Filter != nil {
		return otherAgg // the star-join planner reads unfiltered(f)
	}
	name, ok := f.Builtin()
	if !ok {
		if len(f.Name) == 2 && f.Name[0] == "pgsketch" && f.Name[1] == "approx_count_distinct" {
			return approxCountDistinct
		}
		return notAgg
	}
	switch name {
	case "count":
		switch {
		case f.Star:
			return countRows
		case len(f.Args) != 1:
			return otherAgg
		case f.Distinct:
			return countDistinct
		}
		if c, ok := f.Args[0].(*syntax.Const); ok && c.Type != "null" {
			return countRows
		}
		return countValues
	case "approx_count_distinct":
		return approxCountDistinct
	case "sum", "min", "max", "avg":
		if f.Distinct || f.Star || len(f.Args) != 1 || name == "avg" {
			return otherAgg
		}
		return map[string]aggCall{"sum": sumOf, "min": minOf, "max": maxOf}[name]
	}
	if otherAggregates[name] {
		return otherAgg
	}
	return notAgg
}

type aggInfo struct {
	f       *syntax.FuncCall
	canon   string
	kind    aggCall
	measure catalog.Measure
	arg     syntax.Expr
	name    string
	exact   bool
}

// usable says why rollup r cannot answer any statement of a session with
// settings sess, whatever its shape, or "".
func usable(r *catalog.Rollup, sess env) string {
	switch {
	case !r.Refreshed():
		return "never refreshed (no watermark yet)"
	case r.TimeType == "" || r.Grain.Rank() < 0:
		return "its source columns have changed since it was created"
	case r.SourceRLS:
		return "its base table has row-level security enabled, which the rollup does not apply"
	case r.CaptureBroken == catalog.NoCapture:
		// Any other reason the catalog gives (the source changed, the
		// capture failed on a write, ...) is the fetch's own check's too:
		// it refuses the rollup when the statement runs, and the proxy
		// answers exactly with a NOTICE saying why, whether the catalog
		// snapshot saw the fault or not.
		return "its rows may not reflect its base table: " + r.CaptureBroken
	case r.Distributed && sess.DateStyle != "" && !strings.HasPrefix(sess.DateStyle, "ISO"):
		// Citus writes the constants of a query it sends its workers (the
		// base rows' spans and time bounds) in the session's DateStyle
		// and time zone abbreviations, and the workers read them in
		// theirs: a day and month swapped, an abbreviation read as
		// another zone's. Citus answers such a session's query wrongly
		// too; pgsketch adds no wrong number of its own.
		return "its source is distributed by Citus, which sends its workers times written in the session's DateStyle (" +
			sess.DateStyle + ") and they read them in theirs; pgsketch answers from it under DateStyle ISO only"
	case r.TimeType == catalog.Timestamptz && r.Grain != catalog.Hour && zoneFault(r.TimeZone, r.Grain) != "":
		return zoneFault(r.TimeZone, r.Grain)
	}
	if r.TimeType == catalog.Timestamptz && r.TimeZone == "" {
		return "it has no time zone"
	}
	if r.TimeType == catalog.Timestamptz && zoneAbbreviation(r.TimeZone) {
		// Its buckets were cut in the refreshing session's meaning of it.
		return "it is cut in " + abbreviationWhy(r.TimeZone)
	}
	return ""
}

func matchRollup(s *syntax.Select, sketch catalog.Aggregate, fi syntax.FromItem, r *catalog.Rollup, sess env) (*built, string) {
	m := &matcher{s: s, sketch: sketch, fi: fi, r: r, sess: sess}
	if why := usable(r, sess); why != "" {
		return nil, why
	}
	if why := m.collated(); why != "" {
		return nil, why
	}
	// GROUP BY.
	for _, g := range s.GroupBy {
		e, why := m.resolveGroupItem(g)
		if e == nil {
			return nil, why
		}
		c := m.classify(e)
		switch c.k {
		case kBad:
			return nil, "GROUP BY " + m.canon(e) + ": " + c.why
		case kTime, kEpoch, kEpochDiv:
			return nil, "GROUP BY " + m.canon(e) + ": " + m.notConstant()
		}
		canon := m.canon(e)
		dup := false
		for _, k := range m.keys {
			if k.canon == canon {
				dup = true
			}
		}
		if !dup {
			m.keys = append(m.keys, &keyInfo{e: e, canon: canon, name: "pgsketch_k" + strconv.Itoa(len(m.keys)+1)})
		}
	}
	// WHERE.
	for _, c := range conjuncts(s.Where) {
		if why := m.where(c); why != "" {
			return nil, why
		}
	}
	// Aggregates.
	for _, t := range s.Targets {
		if why := m.collectAggs(t.Expr); why != "" {
			return nil, why
		}
	}
	if why := m.collectAggs(s.Having); why != "" {
		return nil, why
	}
	for _, o := range s.OrderBy {
		if why := m.collectAggs(o.Expr); why != "" {
			return nil, why
		}
	}
	return m.build()
}

func conjuncts(e syntax.Expr) []syntax.Expr {
	if e == nil {
		return nil
	}
	if b, ok := e.(*syntax.BoolExpr); ok && b.Op == "AND" {
		var out []syntax.Expr
		for _, a := range b.Args {
			out = append(out, conjuncts(a)...)
		}
		return out
	}
	return []syntax.Expr{e}
}

// resolveGroupItem turns a GROUP BY item into the expression it groups by.
func (m *matcher) resolveGroupItem(g syntax.Expr) (syntax.Expr, string) {
	if c, ok := g.(*syntax.Const); ok && c.Type == "int" {
		n, err := strconv.Atoi(c.Val)
		if err != nil || n < 1 || n > len(m.s.Targets) {
			return nil, "GROUP BY position " + c.Val + " is not in the select list"
		}
		return m.s.Targets[n-1].Expr, ""
	}
	if c, ok := g.(*syntax.ColRef); ok && len(c.Parts) == 1 {
		name := c.Parts[0]
		if name != m.r.TimeColumn {
			if _, isDim := m.r.Dimension(name); !isDim {
				for _, t := range m.s.Targets {
					if t.Name == name {
						return nil, "GROUP BY " + catalog.QuoteIdent(name) + " names a select-list alias; without the table's column list the rewriter cannot rule out a column of that name"
					}
				}
			}
		}
	}
	return g, ""
}

// column resolves a column reference against the FROM item: it returns the
// column name, or a reason.
func (m *matcher) column(c *syntax.ColRef) (string, string) {
	parts := c.Parts
	name := parts[len(parts)-1]
	if name == "*" {
		return "", "a whole-row reference"
	}
	q := parts[:len(parts)-1]
	ok := false
	switch len(q) {
	case 0:
		ok = true
	case 1:
		if m.fi.Alias != "" {
			ok = q[0] == m.fi.Alias
		} else {
			ok = q[0] == m.fi.Name
		}
	case 2:
		ok = m.fi.Alias == "" && q[1] == m.fi.Name && (q[0] == m.fi.Schema || (m.fi.Schema == "" && q[0] == m.r.Source.Schema))
	}
	if !ok {
		return "", "column reference " + syntax.SQL(c, nil) + " does not name the queried table"
	}
	return name, ""
}

// canon prints e with column references reduced to the bare column name, so
// that the same expression written with and without qualification compares
// equal.
func (m *matcher) canon(e syntax.Expr) string {
	return syntax.SQL(e, func(x syntax.Expr) (string, bool) {
		if c, ok := x.(*syntax.ColRef); ok {
			if name, why := m.column(c); why == "" {
				return catalog.QuoteIdent(name), true
			}
		}
		return "", false
	})
}

// side prints e for one half of the fetch: over the rollup table (alias r,
// the time column becoming the bucket) or over the base table (alias t).
func (m *matcher) side(e syntax.Expr, rollup bool) string {
	return syntax.SQL(e, func(x syntax.Expr) (string, bool) {
		if c, ok := x.(*syntax.Const); ok && m.lift[c] > 0 {
			return "$" + strconv.Itoa(m.lift[c]), true
		}
		if c, ok := x.(*syntax.ColRef); ok {
			name, _ := m.column(c)
			if rollup {
				if name == m.r.TimeColumn {
					return "r." + syntax.QuoteIdent(catalog.BucketColumn), true
				}
				return "r." + syntax.QuoteIdent(name), true
			}
			return "t." + syntax.QuoteIdent(name), true
		}
		return "", false
	})
}

// where classifies one WHERE conjunct.
func (m *matcher) where(e syntax.Expr) string {
	if nt, ok := e.(*syntax.NullTest); ok && nt.Not {
		if c := m.classify(nt.Arg); c.k == kTime && c.v.raw {
			// time IS NOT NULL: true of every row a rollup holds; the base
			// half applies it.
			m.ranges = append(m.ranges, e)
			return ""
		}
	}
	if nt, ok := e.(*syntax.NullTest); ok && !nt.Not && m.usesTime(nt.Arg) {
		// Only rows whose time is NULL can pass (or none), and no rollup
		// holds those.
		return "WHERE " + m.canon(e) + ": tests an expression of " + catalog.QuoteIdent(m.r.TimeColumn) + " for NULL; rollup buckets are never NULL"
	}
	if b, ok := m.timeRange(e); ok {
		m.ranges = append(m.ranges, e)
		m.lower = append(m.lower, b.lower...)
		m.upper = append(m.upper, b.upper...)
		return ""
	}
	c := m.classify(e)
	switch c.k {
	case kConst, kRow:
		m.pushed = append(m.pushed, e)
		return ""
	case kBad:
		return "WHERE " + m.canon(e) + ": " + c.why
	}
	return "WHERE " + m.canon(e) + ": " + m.notConstant()
}

// usesTime reports whether e references the time column.
func (m *matcher) usesTime(e syntax.Expr) bool {
	found := false
	syntax.Walk(e, func(x syntax.Expr) bool {
		if c, ok := x.(*syntax.ColRef); ok {
			if name, why := m.column(c); why == "" && name == m.r.TimeColumn {
				found = true
			}
		}
		return !found
	})
	return found
}

type bounds struct{ lower, upper []bound }

// timeRange recognizes a range on the raw time column: time op constant,
// constant op time, time BETWEEN constant AND constant.
func (m *matcher) timeRange(e syntax.Expr) (bounds, bool) {
	isTime := func(x syntax.Expr) bool {
		c := m.classify(x)
		return c.k == kTime && c.v.raw
	}
	isConst := func(x syntax.Expr) bool { return m.classify(x).k == kConst }
	switch e := e.(type) {
	case *syntax.OpExpr:
		if e.Schema != "" || e.Left == nil {
			return bounds{}, false
		}
		op, col, val := e.Op, e.Left, e.Right
		if !isTime(col) {
			col, val = e.Right, e.Left
			op = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]
		}
		if !isTime(col) || !isConst(val) {
			return bounds{}, false
		}
		v := syntax.SQL(val, nil)
		switch op {
		case ">=":
			return bounds{lower: []bound{{plan.Bound{SQL: v, Inclusive: true}, val}}}, true
		case ">":
			return bounds{lower: []bound{{plan.Bound{SQL: v}, val}}}, true
		case "<":
			return bounds{upper: []bound{{plan.Bound{SQL: v}, val}}}, true
		case "<=":
			return bounds{upper: []bound{{plan.Bound{SQL: v, Inclusive: true}, val}}}, true
		case "=":
			return bounds{lower: []bound{{plan.Bound{SQL: v, Inclusive: true}, val}}, upper: []bound{{plan.Bound{SQL: v, Inclusive: true}, val}}}, true
		}
	case *syntax.Between:
		if e.Not || e.Symmetric || !isTime(e.Arg) || !isConst(e.Lo) || !isConst(e.Hi) {
			return bounds{}, false
		}
		return bounds{
			lower: []bound{{plan.Bound{SQL: syntax.SQL(e.Lo, nil), Inclusive: true}, e.Lo}},
			upper: []bound{{plan.Bound{SQL: syntax.SQL(e.Hi, nil), Inclusive: true}, e.Hi}},
		}, true
	}
	return bounds{}, false
}

// collectAggs finds the aggregates in e and maps each to stored measures.
func (m *matcher) collectAggs(e syntax.Expr) string {
	var why string
	syntax.Walk(e, func(x syntax.Expr) bool {
		if why != "" {
			return false
		}
		f, ok := x.(*syntax.FuncCall)
		if !ok {
			return true
		}
		kind := classifyAgg(f)
		if kind == notAgg {
			return true
		}
		why = m.addAgg(f, kind)
		return false
	})
	return why
}

// addAgg records aggregate call f, of the given kind, with the rollup
// measure that answers it, unless an equal call is recorded already. It
// returns why no measure answers it, "" if one does.
func (m *matcher) addAgg(f *syntax.FuncCall, kind aggCall) string {
	canon := m.canon(f)
	for _, a := range m.aggs {
		if a.canon == canon {
			return ""
		}
	}
	a := &aggInfo{f: f, canon: canon, kind: kind, name: "pgsketch_a" + strconv.Itoa(len(m.aggs)+1)}
	if len(f.Args) == 1 {
		a.arg = f.Args[0]
		if holdsAgg(a.arg) {
			return canon + ": aggregate inside an aggregate"
		}
	}
	if why := m.measureAgg(a); why != "" {
		return why
	}
	m.aggs = append(m.aggs, a)
	return ""
}

// holdsAgg reports whether e holds an aggregate call.
func holdsAgg(e syntax.Expr) bool {
	var nested bool
	syntax.Walk(e, func(x syntax.Expr) bool {
		if g, ok := x.(*syntax.FuncCall); ok && classifyAgg(g) != notAgg {
			nested = true
		}
		return !nested
	})
	return nested
}

// measureAgg sets the rollup measure that answers a, or marks a as
// computed exactly beside the rollup (a COUNT(DISTINCT) when approximate
// answers are off). It returns why neither can be, "" if one is.
func (m *matcher) measureAgg(a *aggInfo) string {
	switch a.kind {
	case otherAgg:
		return a.canon + ": no stored partial answers this aggregate"
	case countRows:
		rc, ok := m.r.Measure(catalog.Count, "*")
		if !ok {
			return a.canon + ": rollup has no row count"
		}
		a.measure = rc
	case countDistinct, approxCountDistinct:
		return m.measureDistinct(a)
	case countValues:
		if m.neverNull(a.arg) {
			// A count of values that cannot be NULL is the row count.
			rc, ok := m.r.Measure(catalog.Count, "*")
			if !ok {
				return a.canon + ": rollup has no row count"
			}
			a.kind, a.measure = countRows, rc
			return ""
		}
		return m.measurePartial(a)
	case sumOf, minOf, maxOf:
		return m.measurePartial(a)
	}
	return ""
}

// neverNull reports whether e is NULL for no row of the table: a column
// the base table declares NOT NULL, a literal other than NULL, a cast of
// such a value to text, or a concatenation of such texts (as BI tools
// write a count of a composite key: count(ts::text || '-' || user_id::text)).
// Casts to other types and other operators are not: they can fail where
// count(*) would not. The fetch checks when it runs that the column is
// still declared NOT NULL in the table and in every table that inherits
// from it (m.notNullNow; an inheritance child may drop the declaration,
// and a column the rollup does not read is in no capture fingerprint):
// with the declarations in place in the statement's snapshot, no row of
// the table, and so none of a bucket unchanged since the refresh, has a
// NULL there.
func (m *matcher) neverNull(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.ColRef:
		name, why := m.column(e)
		if why != "" || !slices.Contains(m.r.NotNull, name) {
			return false
		}
		if !slices.Contains(m.notNullNow, name) {
			m.notNullNow = append(m.notNullNow, name)
		}
		return true
	case *syntax.Const:
		return e.Type != "null"
	case *syntax.Cast:
		return isTextType(e.Type) && m.neverNull(e.Arg)
	case *syntax.OpExpr:
		return e.Op == "||" && e.Schema == "" && e.Left != nil && textValue(e.Left) && textValue(e.Right) &&
			m.neverNull(e.Left) && m.neverNull(e.Right)
	}
	return false
}

// textValue reports whether e is of type text by its form: a cast to
// text, a string literal, or a concatenation of such.
func textValue(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Cast:
		return isTextType(e.Type)
	case *syntax.Const:
		return e.Type == "str"
	case *syntax.OpExpr:
		return e.Op == "||" && textValue(e.Left) && textValue(e.Right)
	}
	return false
}

// isTextType reports whether t names text or varchar (without a length),
// as x::text and CAST(x AS varchar) write them.
func isTextType(t *syntax.TypeName) bool {
	n, ok := t.Builtin()
	return ok && len(t.Mods) == 0 && (n == "text" || n == "varchar")
}

// measureDistinct sets the sketch measure that answers distinct count a,
// or, for a COUNT(DISTINCT) when approximate answers are off, marks it
// exact. It returns why neither can be, "" if one is.
func (m *matcher) measureDistinct(a *aggInfo) string {
	if a.kind == countDistinct && !m.sess.Approx {
		// Side by side: computed exactly by PostgreSQL.
		if _, why := m.aggColumn(a); why != "" {
			return why
		}
		a.exact = true
		m.exact = true
		return ""
	}
	col, why := m.aggColumn(a)
	if why != "" {
		return why
	}
	kind := m.sketch
	ms, ok := m.r.Measure(kind, col)
	if !ok {
		return a.canon + ": rollup has no " + map[catalog.Aggregate]string{catalog.HLL: "HLL", catalog.Theta: "Theta", catalog.TopK: "top-k"}[kind] +
			" sketch of " + catalog.QuoteIdent(col)
	}
	a.measure = ms
	return ""
}

// measurePartial sets the stored count, sum, min or max that answers a.
// It returns why none does, "" if one does.
func (m *matcher) measurePartial(a *aggInfo) string {
	col, why := m.aggColumn(a)
	if why != "" {
		return why
	}
	k := map[aggCall]catalog.Aggregate{countValues: catalog.Count, sumOf: catalog.Sum, minOf: catalog.Min, maxOf: catalog.Max}[a.kind]
	ms, ok := m.r.Measure(k, col)
	if !ok {
		return a.canon + ": rollup stores no " + string(k) + " of " + catalog.QuoteIdent(col)
	}
	if a.kind == sumOf && (ms.Type == "real" || ms.Type == "double precision") {
		// Floating-point addition is not associative: the per-bucket
		// sums would add up to another total than PostgreSQL's sum of
		// the rows, and sums are answered exactly or not at all.
		return a.canon + ": a sum over type " + ms.Type + " added up from per-bucket sums can differ from PostgreSQL's (floating-point rounding)"
	}
	if a.kind == sumOf && sumType(ms.Type) == "" {
		return a.canon + ": sum over type " + ms.Type + " is not supported"
	}
	a.measure = ms
	return ""
}

// aggColumn returns the rollup column that a's argument, a plain column,
// is, or why it is none.
func (m *matcher) aggColumn(a *aggInfo) (string, string) {
	c, ok := a.arg.(*syntax.ColRef)
	if !ok {
		return "", a.canon + ": the rewriter answers aggregates of plain columns only"
	}
	name, why := m.column(c)
	if why != "" {
		return "", a.canon + ": " + why
	}
	return name, ""
}

// sumType is the type PostgreSQL's sum() returns for an argument type.
func sumType(t string) string {
	return typeFacts(t).sum
}

// typeFacts looks up a column type (as format_type prints it) in
// columnTypes.
func typeFacts(t string) columnType {
	if base, _, ok := strings.Cut(t, "("); ok {
		return columnTypes[base+"("]
	}
	return columnTypes[t]
}

// A columnType is what the rewriter knows of a column type: the type sum()
// returns for it and the form a Theta measure hashes it in (thetaForm),
// "" where there is none.
type columnType struct{ sum, thetaForm string }

// columnTypes holds the column types sum() or a Theta measure takes; a
// name ending in "(" stands for the type with any modifier.
var columnTypes = map[string]columnType{
	"smallint":           {sum: "bigint", thetaForm: "int2"},
	"integer":            {sum: "bigint", thetaForm: "int4"},
	"bigint":             {sum: "numeric", thetaForm: "int8"},
	"numeric":            {sum: "numeric"},
	"numeric(":           {sum: "numeric"},
	"real":               {sum: "real"},
	"double precision":   {sum: "double precision"},
	"interval":           {sum: "interval"},
	"text":               {thetaForm: "text"},
	"character varying":  {thetaForm: "text"},
	"character varying(": {thetaForm: "text"},
}

// notConstant explains why a time-valued expression cannot be a group key
// or filter.
func (m *matcher) notConstant() string {
	return "uses " + catalog.QuoteIdent(m.r.TimeColumn) + " in a way that varies within one " + string(m.r.Grain) + " bucket"
}
