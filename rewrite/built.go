package rewrite

import (
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// The plan types live in package plan, which the executor imports without
// linking the SQL parser; the rewriter refers to them by their short names.
type (
	Plan    = plan.Plan
	Merge   = plan.Merge
	Session = plan.Session
)

const (
	MergeHLL   = plan.MergeHLL
	MergeTheta = plan.MergeTheta
	MergeFreq  = plan.MergeFreq
	AddCounts  = plan.AddCounts
	AddSums    = plan.AddSums
	TakeMin    = plan.TakeMin
	TakeMax    = plan.TakeMax
	Exact      = plan.Exact

	MergeProxy  = plan.MergeProxy
	MergeServer = plan.MergeServer
	MergeAuto   = plan.MergeAuto

	TopKVerified = plan.TopKVerified
	TopKApprox   = plan.TopKApprox
	TopKOff      = plan.TopKOff

	PartColumn     = plan.PartColumn
	GroupsRelation = plan.GroupsRelation
	CellsRelation  = plan.CellsRelation
	InfoPrefix     = plan.InfoPrefix
)

// ParseMerge reads a pgsketch.merge setting; "" is MergeAuto.
func ParseMerge(s string) (Merge, bool) { return plan.ParseMerge(s) }

// built is a plan as the matcher made it, with what choosing among
// rollups still needs.
type built struct {
	plan.Plan
	// rows is the rollup's row count, to prefer the smallest rollup.
	rows int64
}

// rollup is b's plan when it answers from one rollup, else nil.
func (b *built) rollup() *plan.Rollup {
	if b == nil {
		return nil
	}
	r, _ := b.Plan.(*plan.Rollup)
	return r
}

// substitute is b's plan when it counts the statement exactly, else nil.
func (b *built) substitute() *plan.Substitute {
	if b == nil {
		return nil
	}
	s, _ := b.Plan.(*plan.Substitute)
	return s
}

// bound is one bound on the time column, with the expression it was
// read from.
type bound struct {
	plan.Bound
	expr syntax.Expr
}

func planBounds(bs []bound) []plan.Bound {
	out := make([]plan.Bound, len(bs))
	for i, b := range bs {
		out[i] = b.Bound
	}
	return out
}
