package exec

import (
	"context"
	"fmt"
	"slices"

	"github.com/pgsketch/pgsketch/rewrite/plan"
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
		ans.ChangedBuckets += a.ChangedBuckets
		ans.Groups += a.Groups
		ans.Samples = append(ans.Samples, a.Samples...)
		ans.CachedRollup = ans.CachedRollup && a.CachedRollup
		if i == 0 || a.Merge == plan.MergeServer {
			ans.Merge = a.Merge
		}
	}
	st.SQL = p.SQLWith(shapes)
	res, err := x.q.Query(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("exec: nested statement: %w", err)
	}
	ans.Result = *res
	return ans, nil
}
