package exec

import (
	"context"
	"fmt"

	"github.com/pgsketch/pgsketch/rewrite/plan"
)

// firstSeen answers a FirstSeen plan: its guard, when it has one (the
// statement's unqualified table is the rollup's source on this
// search_path), then its one statement, whose rows are the answer.
func (x *run) firstSeen(ctx context.Context, p *plan.FirstSeen) (*Answer, error) {
	if p.Guard != "" {
		res, err := x.q.Query(ctx, statement(p.Guard, 0, nil, x.params, nil))
		if err != nil {
			return nil, fmt.Errorf("exec: first-seen guard: %w", err)
		}
		if len(res.Rows) != 1 || len(res.Rows[0]) != 1 || string(res.Rows[0][0]) != "t" {
			return nil, ErrNotSource
		}
	}
	res, err := x.q.Query(ctx, statement(p.SQL, p.Params, p.Refs, x.params, x.formats))
	if err != nil {
		return nil, fmt.Errorf("exec: first-seen statement: %w", err)
	}
	return &Answer{Result: *res, Complete: p.Notice}, nil
}
