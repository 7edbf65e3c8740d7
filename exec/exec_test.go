package exec

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// fakeSession answers the fetch with canned rows and records the rest.
type fakeSession struct {
	// The executor runs only Query: the rest are nil.
	upstream.Session
	fetch *upstream.Result
	stmts []upstream.Statement
	// changed is the info row's count of changed buckets ("0" if empty).
	changed string
}

func (f *fakeSession) Query(_ context.Context, st upstream.Statement) (*upstream.Result, error) {
	f.stmts = append(f.stmts, st)
	if len(f.stmts) == 1 {
		// Every fetch ends with its info row (changed buckets read).
		res := *f.fetch
		info := make([][]byte, len(res.Fields))
		info[0] = []byte(plan.InfoPrefix + cmp.Or(f.changed, "0"))
		res.Rows = append(append([][][]byte(nil), res.Rows...), info)
		return &res, nil
	}
	return &upstream.Result{Fields: []pgproto3.FieldDescription{{Name: []byte("x")}}, Tag: "SELECT 0"}, nil
}

func field(oid uint32) pgproto3.FieldDescription { return pgproto3.FieldDescription{DataTypeOID: oid} }

func sketchOf(t *testing.T, vals ...string) []byte {
	h, err := sketch.NewHLL(14, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		h.Add([]byte(v))
	}
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRunMergesRollupAndBaseRows(t *testing.T) {
	p := &plan.Rollup{
		Head: plan.Head{Rollup: "daily"},
		Groups: plan.Groups{Keys: []plan.Key{{Name: "pgsketch_k1"}},
			Aggs: []plan.Agg{
				{Name: "pgsketch_a1", Op: plan.MergeHLL, Measure: "distinct_user_id", RollupColumn: 2, BaseColumn: 3, ExactColumn: -1, Log2m: 14, Regwidth: 5},
				{Name: "pgsketch_a2", Op: plan.AddCounts, Type: "bigint", RollupColumn: 4, BaseColumn: 4, ExactColumn: -1},
			},
			ShapeSQL: "SELECT * FROM pgsketch_groups"},
		FetchSQL: "fetch",
	}
	arr := appendBinaryArray(nil, pgtype.ByteaOID, [][]byte{sketchOf(t, "1", "2"), sketchOf(t, "2", "3"), nil})
	i8 := func(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }
	q := &fakeSession{fetch: &upstream.Result{
		Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.TextOID), field(pgtype.ByteaArrayOID), field(pgtype.Int8ArrayOID), field(pgtype.Int8OID)},
		Rows: [][][]byte{
			{[]byte("rollup"), []byte("DE"), arr, nil, i8(10)},
			{[]byte("base"), []byte("DE"), nil, []byte("{3,4,NULL}"), i8(2)},
			{[]byte("base"), nil, nil, []byte(`{"5"}`), i8(1)},
		},
	}}
	ans, err := Run(context.Background(), q, p, Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ans.BaseRows || ans.Groups != 2 {
		t.Errorf("BaseRows %v, Groups %d; want true, 2", ans.BaseRows, ans.Groups)
	}
	if len(q.stmts) != 2 {
		t.Fatalf("%d statements, want fetch and shape", len(q.stmts))
	}
	if got := q.stmts[0].ResultFormats; len(got) != 5 || got[3] != 0 || got[2] != 1 {
		t.Errorf("fetch result formats %v: want text for the base values only", got)
	}
	shape := q.stmts[1]
	want := `WITH pgsketch_groups("pgsketch_k1", "pgsketch_a1", "pgsketch_a2") AS (SELECT u.c1, max(u.c2), CAST(COALESCE(sum(u.c3), 0) AS bigint) FROM unnest($1, $2, $3) AS u(c1, c2, c3) GROUP BY 1) SELECT * FROM pgsketch_groups`
	if shape.SQL != want {
		t.Errorf("shape SQL\n got %s\nwant %s", shape.SQL, want)
	}
	if shape.ParamOIDs[0] != pgtype.TextArrayOID || shape.ParamOIDs[1] != pgtype.Int8ArrayOID {
		t.Errorf("shape parameter types %v", shape.ParamOIDs)
	}
	keys, _ := decodeBinaryArray(shape.Params[0])
	ests, _ := decodeBinaryArray(shape.Params[1])
	counts, _ := decodeBinaryArray(shape.Params[2])
	// 3 fetch rows, then one estimate row per group (DE, NULL).
	if len(keys) != 5 || string(keys[3]) != "DE" || keys[4] != nil {
		t.Fatalf("keys %q", keys)
	}
	got := map[string]int64{}
	for i := 3; i < 5; i++ {
		got[string(keys[i])] = int64(binary.BigEndian.Uint64(ests[i]))
	}
	if got["DE"] != 4 || got[""] != 1 {
		t.Errorf("estimates %v, want DE 4 (1,2,3,4) and NULL 1", got)
	}
	if ests[0] != nil || counts[3] != nil || int64(binary.BigEndian.Uint64(counts[0])) != 10 {
		t.Errorf("estimates %q counts %q", ests, counts)
	}
}

func TestRunNoKeysNoRows(t *testing.T) {
	p := &plan.Rollup{Groups: plan.Groups{Aggs: []plan.Agg{{Name: "a", Op: plan.MergeHLL, RollupColumn: 1, BaseColumn: 2, ExactColumn: -1, Log2m: 14, Regwidth: 5}}, ShapeSQL: "SELECT a FROM pgsketch_groups"}}
	q := &fakeSession{fetch: &upstream.Result{Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.ByteaArrayOID), field(pgtype.Int8ArrayOID)}}}
	if _, err := Run(context.Background(), q, p, Params{}, nil); err != nil {
		t.Fatal(err)
	}
	ests, _ := decodeBinaryArray(q.stmts[1].Params[0])
	if len(ests) != 1 || binary.BigEndian.Uint64(ests[0]) != 0 {
		t.Errorf("estimates %q: want one group with 0", ests)
	}
	if strings.Contains(q.stmts[1].SQL, "GROUP BY") {
		t.Errorf("no keys, no GROUP BY: %s", q.stmts[1].SQL)
	}
}

func TestRunRejectsBadSketch(t *testing.T) {
	p := &plan.Rollup{Groups: plan.Groups{Aggs: []plan.Agg{{Name: "a", Op: plan.MergeHLL, RollupColumn: 1, BaseColumn: 2, ExactColumn: -1, Log2m: 14, Regwidth: 5}}}}
	q := &fakeSession{fetch: &upstream.Result{
		Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.ByteaArrayOID), field(pgtype.Int8ArrayOID)},
		Rows:   [][][]byte{{[]byte("rollup"), appendBinaryArray(nil, pgtype.ByteaOID, [][]byte{{0xff, 1}}), nil}},
	}}
	if _, err := Run(context.Background(), q, p, Params{}, nil); err == nil {
		t.Fatal("a sketch that does not decode was merged")
	}
}

func TestTextArray(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`{}`, nil, true},
		{`{1,2,NULL,-3}`, []string{"1", "2", "-3"}, true},
		{`{"a b","c\"d","e\\f","NULL",x}`, []string{"a b", `c"d`, `e\f`, "NULL", "x"}, true},
		{`[0:1]={a,b}`, []string{"a", "b"}, true},
		{`{{1},{2}}`, nil, false},
		{`{"a`, nil, false},
		{`{a,}`, nil, false},
		{`1,2`, nil, false},
	} {
		var got []string
		err := eachTextArrayElement([]byte(c.in), func(b []byte) { got = append(got, string(b)) })
		if (err == nil) != c.ok || c.ok && strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: %q, %v", c.in, got, err)
		}
	}
}

func FuzzArrays(f *testing.F) {
	f.Add([]byte(`{"a",b,NULL}`))
	f.Add(appendBinaryArray(nil, 25, [][]byte{[]byte("x"), nil}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = eachTextArrayElement(b, func([]byte) {})
		if elems, err := decodeBinaryArray(b); err == nil {
			back, err := decodeBinaryArray(appendBinaryArray(nil, 25, elems))
			if err != nil || len(back) != len(elems) {
				t.Fatalf("round trip: %d elements, then %d, %v", len(elems), len(back), err)
			}
		}
	})
}

// TestRunBindsLiftedBounds: the literals of a plan's time bounds are bound
// after the client's parameters, as text of an inferred type, in the fetch
// only; a statement quoting a relative time is marked to be parsed anew.
func TestRunBindsLiftedBounds(t *testing.T) {
	p := &plan.Rollup{Head: plan.Head{Params: 1, Reparse: true},
		Groups: plan.Groups{Aggs: []plan.Agg{{Name: "a", Op: plan.MergeHLL, RollupColumn: 1, BaseColumn: 2, ExactColumn: -1, Log2m: 14, Regwidth: 5}},
			ShapeSQL: "SELECT a FROM pgsketch_groups", ShapeParams: []int{1}},
		FetchSQL: "fetch", FetchParams: []int{1}, Lifted: []string{"2026-02-01", "today"}}
	q := &fakeSession{fetch: &upstream.Result{Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.ByteaArrayOID), field(pgtype.Int8ArrayOID)}}}
	params := Params{OIDs: []uint32{pgtype.TextOID}, Values: [][]byte{[]byte("DE")}, Formats: []int16{1}}
	if _, err := Run(context.Background(), q, p, params, nil); err != nil {
		t.Fatal(err)
	}
	fetch := q.stmts[0]
	if len(fetch.Params) != 3 || string(fetch.Params[0]) != "DE" || string(fetch.Params[1]) != "2026-02-01" || string(fetch.Params[2]) != "today" {
		t.Errorf("fetch parameters %q", fetch.Params)
	}
	if fmt.Sprint(fetch.ParamOIDs) != fmt.Sprint([]uint32{pgtype.TextOID, 0, 0}) || fmt.Sprint(fetch.ParamFormats) != "[1 0 0]" {
		t.Errorf("fetch parameter types %v, formats %v", fetch.ParamOIDs, fetch.ParamFormats)
	}
	shape := q.stmts[len(q.stmts)-1]
	if string(shape.Params[0]) != "DE" || len(shape.Params) != 1+1 { // $1, then the groups' one array
		t.Errorf("shape parameters %q", shape.Params)
	}
	for _, st := range q.stmts {
		if !st.Reparse {
			t.Errorf("%s: not marked to be parsed anew", st.SQL)
		}
	}
}

// TestRunNotSource: a fetch whose info row says the statement's table is
// not the rollup's source on the session's search_path ends the run with
// ErrNotSource, before anything else is run or merged.
func TestRunNotSource(t *testing.T) {
	p := &plan.Rollup{
		Head: plan.Head{Rollup: "daily", Guard: "SELECT to_regclass('\"events\"') = to_regclass('\"public\".\"events\"')"},
		Groups: plan.Groups{Keys: []plan.Key{{Name: "pgsketch_k1"}},
			Aggs:     []plan.Agg{{Name: "pgsketch_a1", Op: plan.AddCounts, Type: "bigint", RollupColumn: 2, BaseColumn: 2, ExactColumn: -1}},
			ShapeSQL: "SELECT * FROM pgsketch_groups"},
		FetchSQL: "fetch",
	}
	q := &fakeSession{changed: plan.NotSource, fetch: &upstream.Result{
		Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.TextOID), field(pgtype.Int8OID)},
		Rows:   [][][]byte{{[]byte("rollup"), []byte("DE"), binary.BigEndian.AppendUint64(nil, 3)}},
	}}
	if _, err := Run(context.Background(), q, p, Params{}, nil); !errors.Is(err, ErrNotSource) {
		t.Fatalf("Run: %v, want ErrNotSource", err)
	}
	if len(q.stmts) != 1 {
		t.Errorf("%d statements run, want the fetch alone", len(q.stmts))
	}
}

// repeatSession answers every fetch with the same rows and counts the
// shaping statements it runs.
type repeatSession struct {
	upstream.Session
	fetch  *upstream.Result
	shapes int
}

func (s *repeatSession) Query(_ context.Context, st upstream.Statement) (*upstream.Result, error) {
	if strings.Contains(st.SQL, "pgsketch_groups") {
		s.shapes++
		return &upstream.Result{Fields: []pgproto3.FieldDescription{{Name: []byte("n")}}, Rows: [][][]byte{{[]byte(strconv.Itoa(s.shapes))}}, Tag: "SELECT 1"}, nil
	}
	res := *s.fetch
	info := make([][]byte, len(res.Fields))
	info[0] = []byte(plan.InfoPrefix + "0")
	res.Rows = append(append([][][]byte(nil), res.Rows...), info)
	return &res, nil
}

// TestShapeKept: with a cache, the answer of a shaping statement the plan
// may keep comes from it when the same statement binds the same groups and
// parameters; the fetch still runs every time. A plan that may not keep it,
// a parameter naming a relative time, other groups or another scope run
// the shaping statement again.
func TestShapeKept(t *testing.T) {
	i8 := func(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }
	newPlan := func(keep *plan.Cacheability) *plan.Rollup {
		return &plan.Rollup{
			Head: plan.Head{Rollup: "daily", Params: 1},
			Groups: plan.Groups{Keys: []plan.Key{{Name: "pgsketch_k1"}},
				Aggs:     []plan.Agg{{Name: "pgsketch_a1", Op: plan.AddCounts, Type: "bigint", RollupColumn: 2, BaseColumn: 2, ExactColumn: -1}},
				ShapeSQL: "SELECT * FROM pgsketch_groups LIMIT $1", ShapeParams: []int{1}, ShapeCache: keep},
			FetchSQL: "fetch",
		}
	}
	fetch := func(n int64) *upstream.Result {
		return &upstream.Result{Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.TextOID), field(pgtype.Int8OID)},
			Rows: [][][]byte{{[]byte("rollup"), []byte("DE"), i8(n)}}}
	}
	params := func(v string) Params { return Params{OIDs: []uint32{pgtype.TextOID}, Values: [][]byte{[]byte(v)}} }
	cache := NewCache(1 << 20)
	s := &repeatSession{fetch: fetch(3)}
	run := func(p *plan.Rollup, ps Params, scope string) string {
		t.Helper()
		ans, err := RunCached(context.Background(), s, p, ps, nil, cache, scope)
		if err != nil {
			t.Fatal(err)
		}
		return string(ans.Rows[0][0])
	}
	kept := newPlan(&plan.Cacheability{Params: []int{1}})
	if a, b := run(kept, params("5"), "s"), run(kept, params("5"), "s"); a != "1" || b != "1" || s.shapes != 1 {
		t.Fatalf("kept: answers %s, %s after %d shaping statements; want the first kept", a, b, s.shapes)
	}
	for _, c := range []struct {
		name  string
		p     *plan.Rollup
		ps    Params
		scope string
		rows  int64
	}{
		{"a plan that may not keep it", newPlan(nil), params("5"), "s", 3},
		{"a plan judged uncacheable", newPlan(&plan.Cacheability{Why: "it calls now"}), params("5"), "s", 3},
		{"a parameter naming a relative time", newPlan(&plan.Cacheability{Params: []int{1}}), params("now"), "s", 3},
		{"another parameter", kept, params("6"), "s", 3},
		{"other groups", kept, params("5"), "s", 4},
		{"another scope", kept, params("5"), "t", 3},
	} {
		before := s.shapes
		s.fetch = fetch(c.rows)
		run(c.p, c.ps, c.scope)
		if s.shapes != before+1 {
			t.Errorf("%s: the shaping statement did not run", c.name)
		}
	}
}
