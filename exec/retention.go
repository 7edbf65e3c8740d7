package exec

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// periodSketches is one retention set's merged sketches by period.
type periodSketches struct {
	oid     uint32 // the period's type
	periods [][]byte
	sk      map[string]*sketch.CompactTheta
}

// runRetention answers a Retention plan: each set's sketches per period,
// the pairs of periods PeriodCondSQL keeps, an intersection per pair, the
// cells too uncertain for pgsketch.max_overlap_error counted exactly by
// CellSQL, and ShapeSQL over the cells.
func (x *run) retention(ctx context.Context, p *plan.Retention) (*Answer, error) {
	if len(p.Arms) != 2 {
		return nil, fmt.Errorf("exec: retention plan with %d arms", len(p.Arms))
	}
	ans := &Answer{Merge: plan.MergeProxy, CachedRollup: true}
	var sets [2]*periodSketches
	for i, arm := range p.Arms {
		ps, err := x.periodArm(ctx, arm, ans)
		if err != nil {
			return nil, err
		}
		sets[i] = ps
	}
	pairs, err := x.q.Query(ctx, pairStatement(ctx, x.q, p, sets))
	if err != nil {
		return nil, fmt.Errorf("exec: retention pairs: %w", err)
	}
	limit := p.Session.MaxOverlapError
	if limit <= 0 {
		limit = DefaultMaxOverlapError
	}
	var cells, noisy [3][][]byte
	ret := &Retention{}
	for _, r := range pairs.Rows {
		if len(r) != 2 {
			return nil, fmt.Errorf("%w: retention pair of %d columns", ErrData, len(r))
		}
		a, b := sets[0].sk[string(r[0])], sets[1].sk[string(r[1])]
		if a == nil || b == nil {
			return nil, fmt.Errorf("%w: a pair of periods that no set has", ErrData)
		}
		x, err := sketch.ThetaIntersect(a, b)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrData, err)
		}
		ov := Overlap{Estimate: x.Estimate(), Lower: x.LowerBound(2), Upper: x.UpperBound(2)}
		e := ov.RelErr()
		switch {
		case e > limit:
			noisy[0], noisy[1] = append(noisy[0], r[0]), append(noisy[1], r[1])
			ret.Exact++
		case ov.Upper == 0:
			ret.Empty++ // no user in both: the join has no row for the pair
		default:
			cells[0], cells[1] = append(cells[0], r[0]), append(cells[1], r[1])
			cells[2] = append(cells[2], binary.BigEndian.AppendUint64(nil, uint64(math.Round(ov.Estimate))))
			ret.Estimated++
			ret.MaxRelErr = max(ret.MaxRelErr, e)
		}
	}
	if len(noisy[0]) > 0 {
		if cells, err = exactCells(ctx, x.q, p, sets, noisy, cells); err != nil {
			return nil, err
		}
	}
	st, err := cellsStatement(ctx, x.q, p, sets, cells, x.formats)
	if err != nil {
		return nil, err
	}
	res, err := x.q.Query(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("exec: shape: %w", err)
	}
	ans.Result, ans.Groups = *res, len(cells[0])
	ans.Summary = retentionNotice(p, ret)
	ans.Explained = "answer: " + strings.TrimPrefix(ans.Summary, "pgsketch: ")
	return ans, nil
}

// Retention is what a Retention plan's answer was made of: how many cells
// were estimated, counted exactly, or found empty, and the largest
// relative error of an estimated cell (2 standard deviations).
type Retention struct {
	Estimated, Exact, Empty int
	MaxRelErr               float64
}

// periodArm runs one set's fetch and merges its rows into a sketch per
// period.
func (x *run) periodArm(ctx context.Context, arm *plan.Rollup, ans *Answer) (*periodSketches, error) {
	if len(arm.Keys) != 1 || len(arm.Aggs) != 1 || arm.Aggs[0].Op != plan.MergeTheta {
		return nil, fmt.Errorf("exec: a retention set is not a Theta merge by one key")
	}
	mg, err := x.mergeArm(ctx, arm, ans)
	if err != nil {
		return nil, err
	}
	ps := &periodSketches{oid: mg.m.elemOIDs[0], sk: map[string]*sketch.CompactTheta{}}
	for _, g := range mg.order {
		if g.keys[0] == nil {
			continue // rows whose time is NULL have no period to meet another's
		}
		u, err := g.thetas[0].result(arm.Aggs[0])
		if err != nil {
			return nil, err
		}
		ps.periods = append(ps.periods, g.keys[0])
		ps.sk[string(g.keys[0])] = u
	}
	return ps, nil
}

// pairStatement asks PostgreSQL which pairs of the sets' periods meet the
// plan's condition on periods, in binary.
func pairStatement(ctx context.Context, q upstream.Session, p *plan.Retention, sets [2]*periodSketches) upstream.Statement {
	c := plan.CellsRelation
	st := upstream.Statement{SQL: "SELECT " + c + ".pgsketch_a, " + c + ".pgsketch_b FROM (SELECT a.x, b.y FROM unnest($1) AS a(x), unnest($2) AS b(y)) AS " +
		c + "(pgsketch_a, pgsketch_b) WHERE " + p.PeriodCondSQL, ResultFormats: []int16{1}}
	for _, s := range sets {
		arr, _ := arrayOID(ctx, q, s.oid)
		st.ParamOIDs = append(st.ParamOIDs, arr)
		st.Params = append(st.Params, appendBinaryArray(nil, s.oid, s.periods))
		st.ParamFormats = append(st.ParamFormats, 1)
	}
	return st
}

// exactCells counts the noisy cells with CellSQL and adds those with users
// to cells.
func exactCells(ctx context.Context, q upstream.Session, p *plan.Retention, sets [2]*periodSketches, noisy, cells [3][][]byte) ([3][][]byte, error) {
	st := upstream.Statement{SQL: p.CellSQL, ResultFormats: []int16{1}}
	for i, s := range sets {
		arr, err := arrayOID(ctx, q, s.oid)
		if err != nil {
			return cells, err
		}
		st.ParamOIDs = append(st.ParamOIDs, arr)
		st.Params = append(st.Params, appendBinaryArray(nil, s.oid, noisy[i]))
		st.ParamFormats = append(st.ParamFormats, 1)
	}
	res, err := q.Query(ctx, st)
	if err != nil {
		return cells, fmt.Errorf("exec: retention cells counted exactly: %w", err)
	}
	for _, r := range res.Rows {
		if len(r) != 3 || len(r[2]) != 8 {
			return cells, fmt.Errorf("%w: exact cell row", ErrData)
		}
		if binary.BigEndian.Uint64(r[2]) == 0 {
			continue
		}
		for i := range cells {
			cells[i] = append(cells[i], r[i])
		}
	}
	return cells, nil
}

// cellsStatement is ShapeSQL over the cells.
func cellsStatement(ctx context.Context, q upstream.Session, p *plan.Retention, sets [2]*periodSketches, cells [3][][]byte, resultFormats []int16) (upstream.Statement, error) {
	st := upstream.Statement{SQL: "WITH " + plan.CellsRelation + "(pgsketch_a, pgsketch_b, pgsketch_n) AS (SELECT * FROM unnest($1, $2, $3)) " + p.ShapeSQL,
		ResultFormats: resultFormats}
	oids := []uint32{sets[0].oid, sets[1].oid, pgtype.Int8OID}
	for i, oid := range oids {
		arr, err := arrayOID(ctx, q, oid)
		if err != nil {
			return st, err
		}
		st.ParamOIDs = append(st.ParamOIDs, arr)
		st.Params = append(st.Params, appendBinaryArray(nil, oid, cells[i]))
		st.ParamFormats = append(st.ParamFormats, 1)
	}
	return st, nil
}

// retentionNotice is the NOTICE of a Retention plan's answer.
func retentionNotice(p *plan.Retention, r *Retention) string {
	n := "pgsketch: retention grid from the Theta sketches of rollup " + p.Rollup + ": " +
		strconv.Itoa(r.Estimated) + " cell(s) estimated"
	if r.Estimated > 0 {
		n += " (largest relative error " + percent(r.MaxRelErr) + " at 95%)"
	}
	n += ", " + strconv.Itoa(r.Exact) + " counted exactly by PostgreSQL (relative error over pgsketch.max_overlap_error)"
	if r.Empty > 0 {
		n += ", " + strconv.Itoa(r.Empty) + " pair(s) of periods with no common value"
	}
	return n
}
