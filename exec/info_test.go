package exec

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/upstream"
)

// TestRunChangedBuckets: the fetch's info row counts the changed buckets
// read from the base table, which the answer and its NOTICE report; a fetch
// without it is not the plan's and is refused.
func TestRunChangedBuckets(t *testing.T) {
	p := &plan.Rollup{Head: plan.Head{Rollup: "daily"}, Groups: plan.Groups{Aggs: []plan.Agg{{Name: "a", Op: plan.MergeHLL, RollupColumn: 1, BaseColumn: 2, ExactColumn: -1, Log2m: 14, Regwidth: 5}},
		ShapeSQL: "SELECT a FROM pgsketch_groups"}}
	fields := []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.ByteaArrayOID), field(pgtype.Int8ArrayOID)}
	q := &fakeSession{fetch: &upstream.Result{Fields: fields}, changed: "3"}
	ans, err := Run(context.Background(), q, p, Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ans.ChangedBuckets != 3 || !strings.Contains(ans.Notice(&p.Head), "; 3 changed bucket(s) since the last refresh read from the base table") {
		t.Errorf("changed buckets %d, notice %q", ans.ChangedBuckets, ans.Notice(&p.Head))
	}
	// No info row: the statement that ran is not the plan's fetch.
	bare := func(_ context.Context, st upstream.Statement) (*upstream.Result, error) {
		return &upstream.Result{Fields: fields}, nil
	}
	if _, err := Run(context.Background(), sessionFunc{query: bare}, p, Params{}, nil); !errors.Is(err, ErrData) {
		t.Errorf("a fetch without its info row: %v, want ErrData", err)
	}
}

// sessionFunc is a session whose Query is the function query.
type sessionFunc struct {
	// The executor runs only Query: the rest are nil.
	upstream.Session
	query func(context.Context, upstream.Statement) (*upstream.Result, error)
}

func (f sessionFunc) Query(ctx context.Context, st upstream.Statement) (*upstream.Result, error) {
	return f.query(ctx, st)
}
