package rewrite

import (
	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// planner is one way of answering a SELECT from rollups. Planners do not
// call each other: each reads its shape of statement and answers the parts
// it reads from one table through planTable.
type planner struct {
	// shape reports whether the statement is this planner's; nil for a
	// fallback, tried while no planner before it has answered the
	// statement whole.
	shape func(*syntax.Select) bool
	plan  func(p *syntax.Parsed, snap *catalog.Snapshot, sess env) (*built, string)
	// none is a fallback's reason for a statement without its shape at
	// all, left out of the reasons given; prefix introduces its others.
	none, prefix string
}

// planners are the ways of answering a statement, in the order the
// rewriter tries them: of the first five, the first whose shape the
// statement has (the single-table planner's is any); then, while none has
// answered the statement whole (no plan, or a Substitute counting its
// APPROX_COUNT_DISTINCT exactly), the star join and the nested
// subqueries.
var planners = []planner{
	{shape: overlapShape, plan: onSelect(planOverlap)},
	{shape: retentionShape, plan: onSelect(planRetention)},
	{shape: firstSeenShape, plan: onSelect(planFirstSeen)},
	{shape: topkShape, plan: onSelect(planTopK)},
	{shape: anySelect, plan: onSelect(planSingle)},
	{plan: onSelect(planWholeStarJoin), none: notAJoin, prefix: "as a join: "},
	{plan: planNested, none: noSubquery},
}

// subqueryPlanners answer an aggregate subquery of a larger statement
// (planNested's arms), or a first-seen count.
var subqueryPlanners = []planner{
	{shape: firstSeenShape, plan: onSelect(planFirstSeen)},
	{shape: anySelect, plan: onSelect(planSingle)},
	{plan: onSelect(planStarJoin), none: notAJoin, prefix: "as a join: "},
}

// tryPlanners plans p with the first of list whose shape it has, then its
// fallbacks, and returns the plan or the reasons there is none. A
// substitute plan comes back without a reason.
func tryPlanners(list []planner, p *syntax.Parsed, snap *catalog.Snapshot, sess env) (*built, string) {
	var b *built
	var reason string
	chosen := false
	for _, pl := range list {
		if pl.shape != nil {
			if !chosen && pl.shape(p.Select) {
				chosen = true
				b, reason = pl.plan(p, snap, sess)
			}
			continue
		}
		if b != nil && b.substitute() == nil {
			break
		}
		if nb, why := pl.plan(p, snap, sess); nb != nil {
			b = nb
		} else if why != pl.none {
			reason += "; " + pl.prefix + why
		}
	}
	if b.substitute() != nil {
		reason = ""
	}
	return b, reason
}

// planSingle answers a SELECT of one table (after pulling up a FROM
// subquery that only filters it).
func planSingle(s *syntax.Select, snap *catalog.Snapshot, sess env) (*built, string) {
	b, why := planTable(s, catalog.HLL, snap, sess)
	if b == nil && pullUp(s) {
		b, why = planTable(s, catalog.HLL, snap, sess)
	}
	return b, why
}

func anySelect(*syntax.Select) bool { return true }

// onSelect makes a planner of the statement's SELECT a planner of the
// parsed statement.
func onSelect(f func(*syntax.Select, *catalog.Snapshot, env) (*built, string)) func(*syntax.Parsed, *catalog.Snapshot, env) (*built, string) {
	return func(p *syntax.Parsed, snap *catalog.Snapshot, sess env) (*built, string) {
		return f(p.Select, snap, sess)
	}
}
