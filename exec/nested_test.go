package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
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

// TestEstimateColumns: the outer statement's united sketches come back in
// binary whatever the client asked, and leave as bigint estimates in the
// client's format (0 for a union of no rows); bytes that are no sketch,
// or an UNDEFINED one, fail the answer rather than count.
func TestEstimateColumns(t *testing.T) {
	if got := sketchFormats(nil, 3, []int{1}); len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 0 {
		t.Errorf("sketchFormats(text) = %v", got)
	}
	if got := sketchFormats([]int16{1}, 2, []int{0}); got[0] != 1 || got[1] != 1 {
		t.Errorf("sketchFormats(binary) = %v", got)
	}
	big := make([]string, 5000)
	for i := range big {
		big[i] = "u" + strconv.Itoa(i)
	}
	h := new(sketch.HLL)
	if err := h.UnmarshalBinary(sketchOf(t, big...)); err != nil {
		t.Fatal(err)
	}
	want := int64(math.Round(h.Estimate()))
	p := &plan.Nested{Estimated: []int{1}, Columns: 2}
	result := func(s []byte) *upstream.Result {
		return &upstream.Result{Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.ByteaOID)},
			Rows: [][][]byte{{[]byte("a"), s}, {[]byte("b"), nil}, {[]byte("c"), sketchOf(t, "x", "y")}}}
	}
	for _, client := range [][]int16{nil, {0, 1}, {1}} {
		res := result(sketchOf(t, big...))
		if err := estimateColumns(res, p, client); err != nil {
			t.Fatal(err)
		}
		f := res.Fields[1]
		if f.DataTypeOID != pgtype.Int8OID || f.DataTypeSize != 8 || f.Format != upstream.FormatOf(client, 1) {
			t.Errorf("client formats %v: field %+v", client, f)
		}
		var got []int64
		for _, r := range res.Rows {
			if f.Format == 1 {
				got = append(got, int64(binary.BigEndian.Uint64(r[1])))
			} else {
				n, err := strconv.ParseInt(string(r[1]), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, n)
			}
		}
		if !slices.Equal(got, []int64{want, 0, 2}) {
			t.Errorf("client formats %v: estimates %v, want [%d 0 2]", client, got, want)
		}
	}
	for _, bad := range [][]byte{[]byte("no sketch"), {0x10, 0x8e, 0x7f}} {
		if err := estimateColumns(result(bad), p, nil); !errors.Is(err, ErrData) {
			t.Errorf("%x: error %v, want ErrData", bad, err)
		}
	}
	if err := estimateColumns(result(nil), &plan.Nested{Estimated: []int{1}, Columns: 3}, nil); err == nil {
		t.Error("a statement of 2 columns where 3 were planned: no error")
	}
}
