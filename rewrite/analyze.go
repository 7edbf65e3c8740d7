package rewrite

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Classification of expressions over the base table: which can be evaluated
// on a rollup row (constant within every (bucket, dimensions) group of base
// rows), and which still vary with the time column.

type kind int

const (
	// kConst references no column: literals, parameters, now().
	kConst kind = iota
	// kRow is constant within a rollup row: it references dimensions and
	// the time column only through bucket-constant expressions, so it can
	// be evaluated on the bucket start.
	kRow
	// kTime is a value of the time column, possibly converted or shifted.
	kTime
	// kEpoch is extract(epoch from a kTime).
	kEpoch
	// kEpochDiv is a kEpoch divided by a constant.
	kEpochDiv
	// kBad cannot be evaluated on rollup rows; why says why.
	kBad
)

type class struct {
	k   kind
	v   view
	div float64
	why string
}

// view describes a kTime value: an instant (timestamptz) or a wall-clock
// value (timestamp, date) and which calendar its wall clock is in.
type view struct {
	// wall is set for timestamp/date values.
	wall bool
	// zone is, for a wall value, the zone of its wall clock: "native" for
	// the column's own (timestamp and date columns), "session", or a zone
	// name. For an instant it is "" or, for an instant made from a native
	// wall clock in the session's zone, "native".
	zone string
	// shiftDays is a whole number of days added.
	shiftDays int
	// raw is set for the bare time column.
	raw bool
}

func bad(format string, args ...string) class {
	s := format
	for _, a := range args {
		s = strings.Replace(s, "%s", a, 1)
	}
	return class{k: kBad, why: s}
}

// classify classifies e.
func (m *matcher) classify(e syntax.Expr) class {
	switch e := e.(type) {
	case nil:
		return class{k: kConst}
	case *syntax.Const, *syntax.Param:
		return class{k: kConst}
	case *syntax.Unsupported:
		return bad("uses " + e.What)
	case *syntax.ColRef:
		name, why := m.column(e)
		if why != "" {
			return bad(why)
		}
		if name == m.r.TimeColumn {
			if m.r.TimeType == catalog.Timestamptz {
				return class{k: kTime, v: view{raw: true}}
			}
			return class{k: kTime, v: view{wall: true, zone: "native", raw: true}}
		}
		if _, ok := m.r.Dimension(name); ok {
			return class{k: kRow}
		}
		return bad("column " + catalog.QuoteIdent(name) + " is not a dimension of the rollup")
	case *syntax.VarFunc:
		return m.combine(e.Args)
	case *syntax.FuncCall:
		return m.classifyCall(e)
	case *syntax.Cast:
		return m.classifyCast(e)
	case *syntax.OpExpr:
		return m.classifyOp(e)
	case *syntax.BoolExpr:
		return m.combine(e.Args)
	case *syntax.NullTest:
		return m.combine([]syntax.Expr{e.Arg})
	case *syntax.BoolTest:
		return m.combine([]syntax.Expr{e.Arg})
	case *syntax.In:
		return m.combine(append([]syntax.Expr{e.Arg}, e.List...))
	case *syntax.Between:
		if why := m.collationDependent(e.Arg, e.Lo, e.Hi); why != "" {
			return bad(why)
		}
		return m.combine([]syntax.Expr{e.Arg, e.Lo, e.Hi})
	case *syntax.KeywordExpr:
		if e.Fn == "" && strings.Contains(e.Kw, "ILIKE") {
			if why := m.collationDependent(e.Left, e.Right); why != "" {
				return bad(why)
			}
		}
		return m.combine([]syntax.Expr{e.Left, e.Right})
	case *syntax.Case:
		args := []syntax.Expr{e.Arg, e.Else}
		for _, w := range e.Whens {
			args = append(args, w.Cond, w.Result)
		}
		return m.combine(args)
	case *syntax.Array:
		return m.combine(e.Elems)
	}
	return bad("uses an unsupported expression")
}

// combine classifies an expression from its operands: kBad if any is, not
// constant if any operand still varies with time, else kRow or kConst.
func (m *matcher) combine(args []syntax.Expr) class {
	out := class{k: kConst}
	for _, a := range args {
		if a == nil {
			continue
		}
		c := m.classify(a)
		switch c.k {
		case kBad:
			return c
		case kTime, kEpoch, kEpochDiv:
			return bad(m.notConstant())
		case kRow:
			out.k = kRow
		}
	}
	return out
}

func constString(e syntax.Expr) (string, bool) {
	if c, ok := e.(*syntax.Const); ok && c.Type == "str" {
		return c.Val, true
	}
	if c, ok := e.(*syntax.Cast); ok {
		return constString(c.Arg)
	}
	return "", false
}

// zoneString reads a time zone argument: a literal, or a parameter whose
// bound value the session holds (Session.Zones), for which the plan is
// made.
func (m *matcher) zoneString(e syntax.Expr) (string, bool) {
	if p, ok := e.(*syntax.Param); ok {
		return m.sess.Zone(p.N)
	}
	return constString(e)
}

func constNumber(e syntax.Expr) (float64, bool) {
	if c, ok := e.(*syntax.Const); ok && (c.Type == "int" || c.Type == "float") {
		f, err := strconv.ParseFloat(c.Val, 64)
		return f, err == nil
	}
	return 0, false
}

// classifyCall classifies a function call. Only immutable or stable
// scalar built-ins are allowed; those of a time value that a bucket
// determines (date_trunc, extract, AT TIME ZONE, ...) are classified by
// the rules below, any other call as its arguments together.
func (m *matcher) classifyCall(f *syntax.FuncCall) class {
	name, builtin := f.Builtin()
	if classifyAgg(f) != notAgg {
		return bad("an aggregate is not allowed here")
	}
	if !builtin {
		return bad("function " + syntax.NameSQL(f.Name) + "() is not known to be an immutable or stable scalar function")
	}
	if !scalarFuncs[name] {
		return bad("function " + name + "() is not known to be an immutable or stable scalar function")
	}
	switch name {
	case "date_trunc":
		if c, ok := m.classifyDateTrunc(f); ok {
			return c
		}
	case "extract", "date_part":
		if c, ok := m.classifyExtract(name, f); ok {
			return c
		}
	case "floor":
		if len(f.Args) != 1 {
			break
		}
		c := m.classify(f.Args[0])
		if c.k == kEpochDiv {
			return m.epochConstant(c)
		}
	case "timezone":
		// x AT TIME ZONE z
		if c, ok := m.classifyAtTimeZone(f); ok {
			return c
		}
	case "to_timestamp":
		if len(f.Args) == 1 {
			c := m.classify(f.Args[0])
			if c.k == kEpoch {
				return m.fromEpoch(c.v)
			}
		}
	}
	return m.combine(f.Args)
}

// classifyDateTrunc classifies date_trunc(unit, x [, zone]) of a time value
// x, which must name its unit and zone by literals. It reports false for
// any other date_trunc call.
func (m *matcher) classifyDateTrunc(f *syntax.FuncCall) (class, bool) {
	x, unit, ok, found := m.timeOperand(f, 3)
	if !found {
		return class{}, false
	}
	if !ok {
		return bad("date_trunc with a unit that is not a literal"), true
	}
	zone := ""
	if len(f.Args) == 3 {
		z, ok := m.zoneString(f.Args[2])
		if !ok {
			return bad("date_trunc with a time zone that is not a literal"), true
		}
		if why := abbreviationWhy(z); why != "" {
			return bad(why), true
		}
		zone = z
	}
	return m.bucketConstant(x, strings.ToLower(unit), zone, "date_trunc('"+strings.ToLower(unit)+"', ...)"), true
}

// classifyExtract classifies extract(field FROM x) or date_part(field, x)
// (name says which) of a time value x, which must name its field by a
// literal: an epoch, or a field constant within a bucket. It reports false
// for any other such call.
func (m *matcher) classifyExtract(name string, f *syntax.FuncCall) (class, bool) {
	x, field, ok, found := m.timeOperand(f, 2)
	if !found {
		return class{}, false
	}
	if !ok {
		return bad(name + " with a field that is not a literal"), true
	}
	field = strings.ToLower(field)
	if field == "epoch" {
		return class{k: kEpoch, v: x}, true
	}
	unit, ok := extractUnit[field]
	if !ok {
		return bad("extract(" + field + " ...) varies within one " + string(m.r.Grain) + " bucket"), true
	}
	return m.bucketConstant(x, unit, "", "extract("+field+" ...)"), true
}

// classifyAtTimeZone classifies timezone(z, x), x AT TIME ZONE z, of a time
// value x that is an instant, with z a literal: the wall clock in zone z.
// It reports false for any other timezone call.
func (m *matcher) classifyAtTimeZone(f *syntax.FuncCall) (class, bool) {
	x, z, ok, found := m.timeOperand(f, 2)
	if found && !ok {
		z, ok = m.zoneString(f.Args[0])
	}
	switch why := abbreviationWhy(z); {
	case !found:
		return class{}, false
	case !ok:
		return bad("AT TIME ZONE with a zone that is not a literal"), true
	case x.wall || x.zone != "":
		return bad("AT TIME ZONE applied to a timestamp without time zone"), true
	case why != "":
		return bad(why), true
	}
	return class{k: kTime, v: view{wall: true, zone: z, shiftDays: x.shiftDays}}, true
}

// timeOperand reads a call f(lit, x [, ...]) with 2 to maxArgs arguments
// whose x is a time value: found is false for any other call; else x is
// its view, and lit the literal string of the first argument, ok false
// when that is not a literal.
func (m *matcher) timeOperand(f *syntax.FuncCall, maxArgs int) (x view, lit string, ok, found bool) {
	if len(f.Args) < 2 || len(f.Args) > maxArgs {
		return view{}, "", false, false
	}
	c := m.classify(f.Args[1])
	if c.k != kTime {
		return view{}, "", false, false
	}
	lit, ok = constString(f.Args[0])
	return c.v, lit, ok, true
}

// fromEpoch classifies to_timestamp(extract(epoch from v)). For an instant
// that is v again. For a wall clock it is the instant whose UTC reading is
// that wall clock: the same calendar only when the wall clock is read in
// UTC (a wall clock in zone z), or, for the column's own wall clock, when
// the session's zone, in which later steps cut or convert it, is UTC.
func (m *matcher) fromEpoch(v view) class {
	if !v.wall {
		return class{k: kTime, v: view{zone: v.zone, shiftDays: v.shiftDays}}
	}
	z := v.zone
	switch z {
	case "native":
		if !sameZone(m.sess.TimeZone, "UTC") {
			return bad("to_timestamp of the epoch of " + catalog.QuoteIdent(m.r.TimeColumn) + " reads its wall clock as UTC, but the session TimeZone is " + strconv.Quote(m.sess.TimeZone))
		}
		return class{k: kTime, v: view{zone: "native", shiftDays: v.shiftDays}}
	case "session":
		z = m.sess.TimeZone
	}
	if !sameZone(z, "UTC") {
		return bad("to_timestamp of the epoch of a wall clock read in time zone " + strconv.Quote(z) + " shifts it by that zone's offset")
	}
	return class{k: kTime, v: view{shiftDays: v.shiftDays}}
}

// extractUnit maps an extract field to the unit it is constant within.
// julian is absent: since PostgreSQL 14 it has a fractional part for the
// time of day, so it is constant within no bucket.
var extractUnit = map[string]string{
	"hour": "hour", "day": "day", "dow": "day", "isodow": "day", "doy": "day",
	"week": "week", "isoyear": "isoyear", "month": "month", "quarter": "quarter", "year": "year",
	"decade": "decade", "century": "century", "millennium": "millennium",
}

// unitRank orders date_trunc units; units finer than an hour are absent.
var unitRank = map[string]int{
	"hour": 1, "day": 2, "week": 3, "month": 4, "quarter": 5, "year": 6, "decade": 7, "century": 8, "millennium": 9,
}

// unitNests reports whether every bucket of grain g lies within one period of
// unit u.
func unitNests(u string, g catalog.Grain) bool {
	switch g {
	case catalog.Hour:
		return unitRank[u] >= 1 || u == "isoyear"
	case catalog.Day:
		return unitRank[u] >= 2 || u == "isoyear"
	case catalog.Week:
		return u == "week" || u == "isoyear"
	case catalog.Month:
		return unitRank[u] >= 4
	}
	return false
}

// sameZone compares time zone names, treating the spellings of UTC alike.
func sameZone(a, b string) bool {
	norm := func(z string) string {
		z = strings.ToLower(strings.TrimSpace(z))
		switch z {
		case "utc", "etc/utc", "gmt", "etc/gmt", "z", "zulu", "uct", "etc/uct", "universal", "etc/universal",
			"greenwich", "etc/greenwich", "gmt0", "etc/gmt0", "gmt+0", "gmt-0", "+00", "+00:00":
			return "utc"
		}
		return z
	}
	return norm(a) == norm(b)
}

// calendarOK checks that the wall clock a unit is cut in is the rollup's.
// zone3 is the explicit zone of a 3-argument date_trunc.
func (m *matcher) calendarOK(v view, zone3 string) (bool, string) {
	r := m.r
	col := catalog.QuoteIdent(r.TimeColumn)
	if v.wall && zone3 != "" {
		// date_trunc(unit, timestamp, zone) first turns the wall clock into
		// an instant in the session's zone, then cuts it in zone: two
		// conversions the rollup's buckets do not follow.
		return false, "date_trunc with a time zone is applied to a timestamp without time zone (converted through the session TimeZone first)"
	}
	if r.TimeType == catalog.Timestamptz {
		var z string
		switch {
		case v.wall && v.zone == "session":
			z = m.sess.TimeZone
		case v.wall:
			z = v.zone
		case zone3 != "":
			z = zone3
		default:
			z = m.sess.TimeZone
		}
		if !sameZone(z, r.TimeZone) {
			if ok, why := m.hoursAcross(z); !ok {
				if !v.wall && zone3 == "" {
					return false, "session TimeZone " + strconv.Quote(m.sess.TimeZone) + " differs from the rollup's time zone " + strconv.Quote(r.TimeZone) + ", which cuts " + col + " into buckets" + why
				}
				return false, "buckets are cut in time zone " + strconv.Quote(z) + ", not in the rollup's " + strconv.Quote(r.TimeZone) + why
			}
		}
		if v.shiftDays != 0 && !sameZone(m.sess.TimeZone, r.TimeZone) {
			if ok, why := m.hoursAcross(m.sess.TimeZone); !ok {
				return false, "a shift by days is applied in session TimeZone " + strconv.Quote(m.sess.TimeZone) + ", not the rollup's " + strconv.Quote(r.TimeZone) + why
			}
		}
		if !fixedZone(z) || !fixedZone(r.TimeZone) || v.shiftDays != 0 && !fixedZone(m.sess.TimeZone) {
			m.zoneRules = true
		}
		return true, ""
	}
	// timestamp and date columns: buckets are cut on the values themselves.
	switch {
	case v.wall && v.zone == "native" && zone3 == "":
		return true, ""
	case !v.wall && v.zone == "native" && zone3 == "":
		return true, ""
	}
	return false, col + " is converted between time zones before it is cut"
}

// hoursAcross reports whether units cut in zone z keep the rollup's
// buckets, cut in another zone, whole: they do when the buckets are hours
// and both zones' hours are UTC hours, so that an hour bucket lies within
// one hour, day, week or month of z (New York's days over a UTC hourly
// rollup; not India's, whose hours start at half past). why, when not,
// is "" or a parenthesized reason to append.
func (m *matcher) hoursAcross(z string) (ok bool, why string) {
	if m.r.Grain != catalog.Hour {
		return false, ""
	}
	for _, zone := range []string{z, m.r.TimeZone} {
		if why := utcHours(zone); why != "" {
			return false, " (" + why + ")"
		}
	}
	return true, ""
}

// bucketConstant decides whether truncating (or extracting) unit u from view
// v is constant within each rollup bucket.
func (m *matcher) bucketConstant(v view, u, zone3, what string) class {
	if _, ok := unitRank[u]; !ok && u != "isoyear" {
		return bad(what + " is finer than or unknown to the rollup's grain " + string(m.r.Grain))
	}
	if !unitNests(u, m.r.Grain) {
		return bad(what + " does not contain whole " + string(m.r.Grain) + " buckets")
	}
	if ok, why := m.calendarOK(v, zone3); !ok {
		return bad(why)
	}
	if m.r.TimeType == catalog.Timestamptz {
		if why := zoneFault(m.r.TimeZone, m.r.Grain); why != "" {
			return bad(why)
		}
	}
	if v.shiftDays != 0 {
		switch m.r.Grain {
		case catalog.Hour, catalog.Day:
		case catalog.Week:
			if v.shiftDays%7 != 0 {
				return bad("a shift of " + strconv.Itoa(v.shiftDays) + " days moves week starts off the rollup's Monday weeks")
			}
		default:
			return bad("a shift by days moves " + u + " starts off the rollup's month buckets")
		}
	}
	return class{k: kRow}
}

// epochConstant decides whether floor(extract(epoch from v)/N) is constant
// within each rollup bucket (Grafana's $__timeGroup).
func (m *matcher) epochConstant(c class) class {
	var length float64
	switch m.r.Grain {
	case catalog.Hour:
		length = 3600
	case catalog.Day:
		length = 86400
	default:
		return bad("epoch buckets do not align with " + string(m.r.Grain) + " buckets")
	}
	n := c.div
	if n <= 0 || n != math.Trunc(n) || math.Mod(n, length) != 0 {
		return bad("epoch buckets of " + strconv.FormatFloat(n, 'f', -1, 64) + " seconds are not whole " + string(m.r.Grain) + " buckets")
	}
	v := c.v
	if v.shiftDays != 0 {
		return bad("epoch buckets of a shifted time")
	}
	switch {
	case m.r.TimeType != catalog.Timestamptz:
		switch {
		case v.wall && v.zone == "native":
		case !v.wall && v.zone == "native":
			// The column's wall clock read in the session's zone: its
			// epoch counts UTC seconds, whose days are the wall clock's
			// only when that zone is UTC.
			if !sameZone(m.sess.TimeZone, "UTC") {
				return bad("epoch of " + catalog.QuoteIdent(m.r.TimeColumn) + " converted to timestamptz in session TimeZone " + strconv.Quote(m.sess.TimeZone) + ", not UTC")
			}
		default:
			return bad("epoch of a converted time")
		}
	case v.wall:
		z := v.zone
		if z == "session" {
			z = m.sess.TimeZone
		}
		if !sameZone(z, m.r.TimeZone) {
			return bad("epoch buckets are cut in time zone " + strconv.Quote(z) + ", not in the rollup's " + strconv.Quote(m.r.TimeZone))
		}
		if why := zoneFault(m.r.TimeZone, m.r.Grain); why != "" {
			return bad(why)
		}
	default:
		if !sameZone(m.r.TimeZone, "UTC") {
			return bad("epoch buckets are cut in UTC, not in the rollup's time zone " + strconv.Quote(m.r.TimeZone))
		}
	}
	return class{k: kRow}
}

func (m *matcher) classifyCast(e *syntax.Cast) class {
	c := m.classify(e.Arg)
	if c.k != kTime {
		if c.k == kEpoch || c.k == kEpochDiv {
			return bad(m.notConstant())
		}
		return c
	}
	t := e.Type
	tn := t.Names[len(t.Names)-1]
	if t.Array > 0 || (len(t.Names) == 2 && t.Names[0] != "pg_catalog") {
		return bad("cast of " + catalog.QuoteIdent(m.r.TimeColumn) + " to an unusual type")
	}
	v := c.v
	v.raw = false
	if len(t.Mods) > 0 {
		return bad("cast of " + catalog.QuoteIdent(m.r.TimeColumn) + " to " + syntax.NameSQL(t.Names) + " with a precision rounds it, which can move it across a bucket boundary")
	}
	switch tn {
	case "date":
		return m.bucketConstant(v, "day", "", "a cast to date")
	case "timestamp":
		if !v.wall {
			if v.zone == "native" {
				v.wall, v.zone = true, "native"
			} else {
				v.wall, v.zone = true, "session"
			}
		}
		return class{k: kTime, v: v}
	case "timestamptz":
		if v.wall {
			if v.zone == "native" {
				v.wall, v.zone = false, "native"
			} else if v.zone == "session" {
				v.wall, v.zone = false, ""
			} else {
				return bad("cast of a converted time to timestamptz")
			}
		}
		return class{k: kTime, v: v}
	}
	return bad("cast of " + catalog.QuoteIdent(m.r.TimeColumn) + " to " + tn + " varies within one " + string(m.r.Grain) + " bucket")
}

func (m *matcher) classifyOp(e *syntax.OpExpr) class {
	if e.Left == nil {
		return m.combine([]syntax.Expr{e.Right})
	}
	switch e.Op {
	case "<", "<=", ">", ">=", "~*", "!~*":
		if why := m.collationDependent(e.Left, e.Right); why != "" {
			return bad(why)
		}
	}
	lc := m.classify(e.Left)
	if lc.k == kBad {
		return lc
	}
	rc := m.classify(e.Right)
	if rc.k == kBad {
		return rc
	}
	if e.Schema == "" {
		switch {
		case lc.k == kTime && rc.k == kConst && (e.Op == "+" || e.Op == "-"):
			return m.shifted(lc.v, e.Right, e.Op == "-")
		case rc.k == kTime && lc.k == kConst && e.Op == "+":
			return m.shifted(rc.v, e.Left, false)
		case lc.k == kEpoch && rc.k == kConst && e.Op == "/":
			n, ok := constNumber(e.Right)
			if !ok {
				return bad("epoch divided by something other than a number")
			}
			return class{k: kEpochDiv, v: lc.v, div: n}
		}
	}
	for _, c := range []class{lc, rc} {
		if c.k == kTime || c.k == kEpoch || c.k == kEpochDiv {
			return bad(m.notConstant())
		}
	}
	if lc.k == kRow || rc.k == kRow {
		return class{k: kRow}
	}
	return class{k: kConst}
}

// noCollation are dimension types that have no collation.
var noCollation = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range []string{"smallint", "integer", "bigint", "numeric", "real", "double precision", "boolean",
		"date", "timestamp without time zone", "timestamp with time zone", "uuid", "inet", "cidr", "interval",
		"time without time zone", "bytea", "oid"} {
		m[t] = true
	}
	return m
}()

// collationDependent explains why a comparison whose result depends on a
// collation (ordering, case-insensitive matching) cannot be evaluated on
// rollup rows when one operand is a dimension of a collatable type: the
// rollup table's column has the database's default collation, not
// necessarily the base column's.
func (m *matcher) collationDependent(es ...syntax.Expr) string {
	for _, e := range es {
		c, ok := e.(*syntax.ColRef)
		if !ok {
			continue
		}
		name, why := m.column(c)
		if why != "" {
			continue
		}
		d, ok := m.r.Dimension(name)
		if !ok {
			continue
		}
		t := d.Type
		if i := strings.IndexByte(t, '('); i > 0 {
			t = strings.TrimSpace(t[:i])
		}
		if !noCollation[t] {
			return "ordering or case-insensitive comparison of " + catalog.QuoteIdent(name) + " (type " + d.Type + ") depends on its collation, which the rollup table's column may not share"
		}
	}
	return ""
}

// collated explains why a query naming a column of the rollup's Collated
// (a dimension or a min or max measure whose collation is not the
// database's default) cannot be answered from it: the rollup table's
// column, the rollup's levels and the arrays the shaping statement reads
// the merged groups from all have the default collation, so ORDER BY,
// min and max, comparisons and case mapping over them would follow the
// default's rules, not the column's. Equality alone would not differ
// (dimensions have deterministic collations), but refusing every mention
// keeps the rule simple and certain.
func (m *matcher) collated() string {
	if len(m.r.Collated) == 0 {
		return ""
	}
	why := ""
	check := func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if c, ok := x.(*syntax.ColRef); ok && why == "" {
				if name, unresolved := m.column(c); unresolved == "" && slices.Contains(m.r.Collated, name) {
					why = "column " + catalog.QuoteIdent(name) + " has a collation other than the database's default, which the rollup's columns have"
				}
			}
			return why == ""
		})
	}
	for _, t := range m.s.Targets {
		check(t.Expr)
	}
	check(m.s.Where)
	for _, g := range m.s.GroupBy {
		check(g)
	}
	check(m.s.Having)
	for _, o := range m.s.OrderBy {
		check(o.Expr)
	}
	return why
}

// shifted is time view v plus (or minus) the constant d, which must be a
// whole number of days.
func (m *matcher) shifted(v view, d syntax.Expr, minus bool) class {
	days, ok := shiftDays(d, m.r.TimeType == catalog.Date && v.wall && v.zone == "native")
	if !ok {
		return bad("shift of " + catalog.QuoteIdent(m.r.TimeColumn) + " by something other than whole days")
	}
	if minus {
		days = -days
	}
	v.raw = false
	v.shiftDays += days
	return class{k: kTime, v: v}
}

// shiftDays reads a constant interval of whole days ('1 day', '-1 day',
// '1 week', '7 days'), or an integer number of days when intOK (date +
// integer).
func shiftDays(e syntax.Expr, intOK bool) (int, bool) {
	if intOK {
		if c, ok := e.(*syntax.Const); ok && c.Type == "int" {
			n, err := strconv.Atoi(c.Val)
			return n, err == nil
		}
	}
	c, ok := e.(*syntax.Cast)
	if !ok || c.Type.Names[len(c.Type.Names)-1] != "interval" {
		return 0, false
	}
	s, ok := constString(c.Arg)
	if !ok {
		return 0, false
	}
	f := strings.Fields(strings.ToLower(s))
	if len(f)%2 != 0 || len(f) == 0 {
		return 0, false
	}
	days := 0
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.Atoi(f[i])
		if err != nil {
			return 0, false
		}
		switch strings.TrimSuffix(f[i+1], "s") {
		case "day":
			days += n
		case "week":
			days += 7 * n
		default:
			return 0, false
		}
	}
	return days, true
}
