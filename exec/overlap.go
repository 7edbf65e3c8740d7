package exec

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// DefaultMaxOverlapError is the largest relative error (of the 2-standard-
// deviation interval's wider side, against the estimate) an overlap is
// answered with when the session does not say (pgsketch.max_overlap_error).
const DefaultMaxOverlapError = 0.10

// Refused is returned for a plan the executor will not answer, although
// it could run it: the answer would not be good enough. The caller runs
// the query exactly instead and tells the client Reason. It wraps ErrData,
// so that callers treat it as a plan that cannot be answered.
type Refused struct{ Reason string }

func (e *Refused) Error() string { return "pgsketch: " + e.Reason }
func (e *Refused) Unwrap() error { return ErrData }

// Overlap is what an Overlap plan's answer was made of.
type Overlap struct {
	// Estimate, Lower and Upper are the set operation's estimate and its
	// bounds at 2 standard deviations (about a 95 % interval).
	Estimate, Lower, Upper float64
	// Arms are the two sets' estimates.
	Arms [2]float64
}

// RelErr is the interval's wider side relative to the estimate: +Inf for
// an estimate of 0 whose upper bound is not.
func (o Overlap) RelErr() float64 {
	w := max(o.Upper-o.Estimate, o.Estimate-o.Lower)
	switch {
	case w <= 0:
		return 0
	case o.Estimate <= 0:
		return math.Inf(1)
	}
	return w / o.Estimate
}

// runOverlap answers an Overlap plan: each arm's fetch merged into one
// Theta sketch, their intersection or difference, refused (Refused) when
// its relative error is over the session's limit, else shaped by
// PostgreSQL as one bigint column.
func (x *run) overlap(ctx context.Context, p *plan.Overlap) (*Answer, error) {
	if len(p.Arms) != 2 {
		return nil, fmt.Errorf("exec: overlap plan with %d arms", len(p.Arms))
	}
	ans := &Answer{Merge: plan.MergeProxy, CachedRollup: true, Groups: 1}
	var sk [2]*sketch.CompactTheta
	var ov Overlap
	for i, arm := range p.Arms {
		s, err := x.armSketch(ctx, arm, ans)
		if err != nil {
			return nil, err
		}
		sk[i], ov.Arms[i] = s, s.Estimate()
	}
	var res *sketch.CompactTheta
	var err error
	switch p.SetOp {
	case "INTERSECT":
		res, err = sketch.ThetaIntersect(sk[0], sk[1])
	case "EXCEPT":
		res, err = sketch.ThetaANotB(sk[0], sk[1])
	default:
		return nil, fmt.Errorf("exec: overlap plan with set operation %q", p.SetOp)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrData, err)
	}
	ov.Estimate, ov.Lower, ov.Upper = res.Estimate(), res.LowerBound(2), res.UpperBound(2)
	limit := p.Session.MaxOverlapError
	if limit <= 0 {
		limit = DefaultMaxOverlapError
	}
	if e := ov.RelErr(); e > limit {
		return nil, &Refused{Reason: fmt.Sprintf("the %s of rollup %s's Theta sketches estimates %.0f (95%% interval %.0f to %.0f), "+
			"a relative error of %s, over pgsketch.max_overlap_error %s", p.SetOp, p.Rollup, ov.Estimate, ov.Lower, ov.Upper,
			percent(e), percent(limit))}
	}
	st := upstream.Statement{SQL: "SELECT CAST($1 AS bigint) AS " + catalog.QuoteIdent(p.OutputName),
		ParamOIDs: []uint32{pgtype.Int8OID}, Params: [][]byte{strconv.AppendInt(nil, int64(math.Round(ov.Estimate)), 10)},
		ParamFormats: []int16{0}, ResultFormats: x.formats}
	r, err := x.q.Query(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("exec: shape: %w", err)
	}
	ans.Result = *r
	ans.Summary = fmt.Sprintf("pgsketch: count(*) of the %s estimated from the Theta sketches of rollup %s: %.0f, 95%% interval %.0f to %.0f (relative error %s; arms %.0f and %.0f)",
		p.SetOp, p.Rollup, ov.Estimate, ov.Lower, ov.Upper, percent(ov.RelErr()), ov.Arms[0], ov.Arms[1])
	ans.Explained = fmt.Sprintf("estimate: %.0f, 95%% interval %.0f to %.0f (relative error %.2g%%): answered from the sketches",
		ov.Estimate, ov.Lower, ov.Upper, 100*ov.RelErr())
	return ans, nil
}

// armSketch runs one arm's fetch and merges its rows into one Theta
// sketch, noting in ans what it read.
func (x *run) armSketch(ctx context.Context, arm *plan.Rollup, ans *Answer) (*sketch.CompactTheta, error) {
	if len(arm.Keys) != 0 || len(arm.Aggs) != 1 || arm.Aggs[0].Op != plan.MergeTheta {
		return nil, errors.New("exec: an overlap arm is not a Theta merge without keys")
	}
	mg, err := x.mergeArm(ctx, arm, ans)
	if err != nil {
		return nil, err
	}
	return mg.order[0].thetas[0].result(arm.Aggs[0])
}

// mergeArm runs one arm's fetch and merges its rows per group (the
// sketches are left unestimated), noting in ans what it read.
func (x *run) mergeArm(ctx context.Context, arm *plan.Rollup, ans *Answer) (*merger, error) {
	f, err := x.fetch(ctx, arm)
	if err != nil {
		return nil, err
	}
	part, err := f.rollupPart(arm)
	if err != nil {
		return nil, err
	}
	mg := newMerger(arm, f.res, nil)
	if err := mg.rollupRows(part); err != nil {
		return nil, err
	}
	if err := mg.baseRows(f.res); err != nil {
		return nil, err
	}
	ans.BaseRows = ans.BaseRows || mg.m.baseRows
	ans.InsertedRows = ans.InsertedRows || mg.m.insertedRows
	ans.ChangedBuckets += f.changed
	ans.CachedRollup = ans.CachedRollup && f.fromCache
	return mg, nil
}

// percent prints a fraction as a percentage with two significant digits.
func percent(f float64) string {
	if math.IsInf(f, 1) {
		return "unbounded"
	}
	return strconv.FormatFloat(100*f, 'g', 2, 64) + "%"
}
