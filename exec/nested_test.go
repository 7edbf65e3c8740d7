package exec

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// TestRunNestedSketches: a nested plan's arm whose aggregate is a sketch
// binds, per group, the merged sketch's bytes (the rollup row's united
// with the base rows' values) after the client's parameter, and the outer
// statement holds the arm's shaping statement in its place.
func TestRunNestedSketches(t *testing.T) {
	arm := &plan.Rollup{
		Head: plan.Head{Rollup: "daily", Params: 1},
		Groups: plan.Groups{Keys: []plan.Key{{Name: "pgsketch_k1"}},
			Aggs: []plan.Agg{{Name: "pgsketch_a1", Op: plan.MergeHLL, Sketch: true, Type: "bytea", Measure: "distinct_user_id",
				RollupColumn: 2, BaseColumn: 3, ExactColumn: -1, Log2m: 14, Regwidth: 5}},
			ShapeSQL: `SELECT pgsketch_k1 AS country, pgsketch_a1 AS s FROM pgsketch_groups`},
		FetchSQL: "fetch",
	}
	p := &plan.Nested{Arms: []*plan.Rollup{arm}, Head: plan.Head{Params: 1}, OuterParams: []int{1},
		Outer: []string{"SELECT c.region FROM ", " AS e JOIN countries c ON c.code = e.country WHERE c.region <> $1"}}
	q := &fakeSession{fetch: &upstream.Result{
		Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.TextOID), field(pgtype.ByteaArrayOID), field(pgtype.Int8ArrayOID)},
		Rows: [][][]byte{
			{[]byte("rollup"), []byte("DE"), appendBinaryArray(nil, pgtype.ByteaOID, [][]byte{sketchOf(t, "1", "2")}), nil},
			{[]byte("base"), []byte("DE"), nil, []byte("{3}")},
			{[]byte("rollup"), []byte("FR"), appendBinaryArray(nil, pgtype.ByteaOID, [][]byte{nil}), nil},
		},
	}}
	params := Params{OIDs: []uint32{pgtype.TextOID}, Values: [][]byte{[]byte("Asia")}}
	if _, err := RunCached(context.Background(), q, p, params, nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	if len(q.stmts) != 2 {
		t.Fatalf("%d statements, want the arm's fetch and the outer statement", len(q.stmts))
	}
	st := q.stmts[1]
	if !strings.HasPrefix(st.SQL, "SELECT c.region FROM (WITH pgsketch_groups(") ||
		!strings.Contains(st.SQL, "(array_agg(u.c2) FILTER (WHERE u.c2 IS NOT NULL))[1] FROM unnest($2, $3)") ||
		!strings.HasSuffix(st.SQL, "FROM pgsketch_groups) AS e JOIN countries c ON c.code = e.country WHERE c.region <> $1") {
		t.Errorf("outer statement %s", st.SQL)
	}
	if len(st.Params) != 3 || string(st.Params[0]) != "Asia" || st.ParamOIDs[2] != pgtype.ByteaArrayOID {
		t.Fatalf("parameters %q, types %v", st.Params, st.ParamOIDs)
	}
	keys, _ := decodeBinaryArray(st.Params[1])
	sks, _ := decodeBinaryArray(st.Params[2])
	got := map[string][]byte{}
	for i := range keys {
		if sks[i] != nil {
			got[string(keys[i])] = sks[i] // one row per group carries it
		}
	}
	for country, want := range map[string]float64{"DE": 3, "FR": 0} {
		var h sketch.HLL
		if err := h.UnmarshalBinary(got[country]); err != nil {
			t.Fatalf("%s: %v", country, err)
		}
		// DE: 1 and 2 from the rollup, 3 from the base rows; FR: an empty
		// sketch for its NULL one.
		if e := h.Estimate(); e < want-0.5 || e > want+0.5 {
			t.Errorf("%s's sketch estimates %v, want %v", country, e, want)
		}
	}
}
