package exec

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// runNested runs a Nested plan: each arm up to its merged groups, then one
// statement, the plan's outer statement with every arm's shaping
// statement in its place, binding the client's parameters and then each
// arm's groups.
func (x *run) nested(ctx context.Context, p *plan.Nested) (*Answer, error) {
	if len(p.Arms) == 0 || len(p.Outer) != len(p.Arms)+1 {
		return nil, fmt.Errorf("exec: nested plan with %d arms and %d outer pieces", len(p.Arms), len(p.Outer))
	}
	refs := slices.Clone(p.OuterParams)
	for _, arm := range p.Arms {
		refs = append(refs, arm.ShapeParams...)
	}
	slices.Sort(refs)
	st := statement("", p.Params, slices.Compact(refs), x.params, x.formats)
	if len(st.ParamFormats) == 0 {
		st.ParamFormats = make([]int16, p.Params)
	}
	ans := &Answer{CachedRollup: true}
	shapes := make([]string, len(p.Arms))
	for i, arm := range p.Arms {
		m, a, err := x.groups(ctx, arm)
		if err != nil {
			return nil, err
		}
		if shapes[i], err = m.groupsSQL(ctx, x.q, &arm.Groups, &st); err != nil {
			return nil, err
		}
		ans.BaseRows = ans.BaseRows || a.BaseRows
		ans.InsertedRows = ans.InsertedRows || a.InsertedRows
		ans.ChangedBuckets += a.ChangedBuckets
		ans.Groups += a.Groups
		ans.Samples = append(ans.Samples, a.Samples...)
		ans.CachedRollup = ans.CachedRollup && a.CachedRollup
		if i == 0 || a.Merge == plan.MergeServer {
			ans.Merge = a.Merge
		}
	}
	st.SQL = p.SQLWith(shapes)
	if len(p.Estimated) > 0 {
		st.ResultFormats = sketchFormats(x.formats, p.Columns, p.Estimated)
	}
	res, err := x.q.Query(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("exec: nested statement: %w", err)
	}
	if err := estimateColumns(res, p, x.formats); err != nil {
		return nil, err
	}
	ans.Result = *res
	return ans, nil
}

// sketchFormats returns the result formats of a statement of n columns
// whose sketch columns come back in binary (hll_send's bytes as they are),
// the others as the client asked.
func sketchFormats(client []int16, n int, sketches []int) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = upstream.FormatOf(client, i)
	}
	for _, c := range sketches {
		if c < n {
			out[c] = 1
		}
	}
	return out
}

// estimateColumns replaces each of p's Estimated columns of res, a united
// HLL sketch, by its estimate, a bigint in the format the client asked for
// (0 for NULL: a union of no rows), as the merge of a rollup's own groups
// does.
func estimateColumns(res *upstream.Result, p *plan.Nested, client []int16) error {
	for _, c := range p.Estimated {
		if c >= len(res.Fields) || len(res.Fields) != p.Columns {
			return fmt.Errorf("exec: nested statement: %d columns, sketches planned in column %d of %d", len(res.Fields), c+1, p.Columns)
		}
		format := upstream.FormatOf(client, c)
		for _, row := range res.Rows {
			est := int64(0)
			if row[c] != nil {
				h := new(sketch.HLL)
				if err := h.UnmarshalBinary(row[c]); err != nil {
					return fmt.Errorf("%w: column %q of the nested statement: %w", ErrData, res.Fields[c].Name, err)
				}
				e := h.Estimate()
				if math.IsNaN(e) || math.IsInf(e, 0) {
					return fmt.Errorf("%w: column %q of the nested statement: the united sketch's estimate is %v", ErrData, res.Fields[c].Name, e)
				}
				est = int64(math.Round(e))
			}
			if format == 1 {
				row[c] = binary.BigEndian.AppendUint64(nil, uint64(est))
			} else {
				row[c] = strconv.AppendInt(nil, est, 10)
			}
		}
		f := &res.Fields[c]
		f.TableOID, f.TableAttributeNumber = 0, 0
		f.DataTypeOID, f.DataTypeSize, f.TypeModifier, f.Format = pgtype.Int8OID, 8, -1, format
	}
	return nil
}
