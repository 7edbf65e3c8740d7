package exec

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// tokenSession answers fetches like PostgreSQL would the cached form: the
// rollup rows only when the token differs from the bound one, and the
// token row.
type tokenSession struct {
	// The executor runs only Query: the rest are nil.
	upstream.Session
	token      string
	rollupRows [][][]byte
	fetches    int
	rollupRead int
	shape      upstream.Statement
}

func (f *tokenSession) Query(_ context.Context, st upstream.Statement) (*upstream.Result, error) {
	if !strings.HasPrefix(st.SQL, "SELECT 'rollup'") {
		f.shape = st
		return &upstream.Result{Fields: []pgproto3.FieldDescription{{Name: []byte("x")}}, Tag: "SELECT 0"}, nil
	}
	f.fetches++
	res := &upstream.Result{Fields: []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.TextOID), field(pgtype.ByteaArrayOID), field(pgtype.Int8ArrayOID), field(pgtype.Int8OID)}}
	if bound := st.Params[len(st.Params)-1]; bound == nil || string(bound) != f.token {
		res.Rows = append(res.Rows, f.rollupRows...)
		f.rollupRead++
	}
	res.Rows = append(res.Rows, [][]byte{[]byte(plan.InfoPrefix + "0"), nil, nil, nil, nil})
	res.Rows = append(res.Rows, [][]byte{[]byte(tokenPrefix + f.token), nil, nil, nil, nil})
	return res, nil
}

func cachePlan() *plan.Rollup {
	p := &plan.Rollup{
		Head: plan.Head{Rollup: "daily"}, Table: catalog.Table{Schema: "public", Name: "daily"},
		Groups: plan.Groups{Keys: []plan.Key{{Name: "pgsketch_k1"}},
			Aggs: []plan.Agg{
				{Name: "pgsketch_a1", Op: plan.MergeHLL, Measure: "distinct_user_id", RollupColumn: 2, BaseColumn: 3, ExactColumn: -1, Log2m: 14, Regwidth: 5},
				{Name: "pgsketch_a2", Op: plan.AddCounts, Type: "bigint", RollupColumn: 4, BaseColumn: 4, ExactColumn: -1},
			}},
		Time: plan.TimeSplit{Lower: []plan.Bound{{SQL: "'2026-02-01'"}}, BucketsFrom: "F", BucketsTo: "T", Logged: "L"},
		Fetch: plan.Fetch{
			Cols:    []string{"'rollup' AS pgsketch_part", `r."country"`, `array_agg(r."distinct_user_id")`, `CAST(NULL AS bigint[])`, `CAST(sum(r."rows") AS bigint)`},
			From:    `"public"."daily" AS r`,
			Filters: []string{`r."country" = $1`},
			Range:   []string{`r."bucket" >= F`, `r."bucket" < T`},
			GroupBy: []string{"2"},
			Rest: []plan.Select{{Cols: []string{"'base'", `t."country"`, "CAST(NULL AS bytea[])", `array_agg(DISTINCT t."user_id")`, "count(*)"},
				From: `"public"."events" AS t`, Where: []string{`t."created_at" < F`}, GroupBy: []string{"2"}}},
		},
		FetchParams: []int{1},
	}
	p.Params, p.ShapeSQL = 1, "SELECT * FROM pgsketch_groups"
	p.FetchSQL = p.Fetch.SQL(false, "")
	return p
}

func TestCachedFetchSQL(t *testing.T) {
	p := cachePlan()
	sql, ok := cachedFetch(NewCache(1<<20), p, false, upstream.Statement{SQL: p.FetchSQL}, 5, 2)
	if !ok {
		t.Fatal("not cacheable")
	}
	// The token names the buckets the log lists (each once, in order: the
	// plan's Logged), not how many entries it has.
	for _, want := range []string{
		`r."bucket" < T AND (concat((SELECT d.version || '/' || d.xmin FROM pgsketch.rollup_defs AS d WHERE d.name = 'daily'), '|', extract(epoch FROM F), '|', extract(epoch FROM T), '|', L)) IS DISTINCT FROM CAST($2 AS text) GROUP BY 2 UNION ALL SELECT 'base'`,
		`UNION ALL SELECT 'pgsketch_token:' || concat(`,
	} {
		if !strings.Contains(sql, want) {
			t.Errorf("cached fetch lacks %s:\n%s", want, sql)
		}
	}
	if !strings.HasSuffix(sql, ", NULL, NULL, NULL, NULL") {
		t.Errorf("token row: %s", sql)
	}
	p.Cache.Why = "it calls now"
	if _, ok := cachedFetch(NewCache(1<<20), p, false, upstream.Statement{SQL: p.FetchSQL}, 5, 2); ok {
		t.Error("a rollup half the rewriter judged uncacheable is cached")
	}
}

// TestFetchStatementsKept checks the cache's written fetch statements: one
// build per plan and merge, none kept for a statement too long to be used
// again, and all dropped past the count and the bytes they may hold.
func TestFetchStatementsKept(t *testing.T) {
	c := NewCache(1 << 20)
	builds := 0
	build := func(n int) func() string {
		return func() string { builds++; return strings.Repeat("x", n) }
	}
	a, b := cachePlan(), cachePlan()
	c.statement(fetchKey{a, false}, build(10))
	c.statement(fetchKey{a, false}, build(10))
	c.statement(fetchKey{a, true}, build(10))
	c.statement(fetchKey{b, false}, build(10))
	if builds != 3 {
		t.Fatalf("%d builds for three plans and merges, want 3", builds)
	}
	c.statement(fetchKey{cachePlan(), false}, build(maxStatementSQL+1))
	if len(c.sqls) != 3 {
		t.Fatalf("%d statements kept after one too long to keep, want 3", len(c.sqls))
	}
	for range maxStatements {
		c.statement(fetchKey{cachePlan(), false}, build(10))
	}
	if n := len(c.sqls); n > maxStatements {
		t.Fatalf("%d statements kept, want at most %d", n, maxStatements)
	}
	if _, ok := c.sqls[fetchKey{a, false}]; ok {
		t.Error("the first statement survived more than maxStatements others")
	}
	c.sqls, c.sqlBytes = map[fetchKey]string{}, 0
	for range maxStatementBytes / (4 * maxStatementSQL) * 2 {
		c.statement(fetchKey{cachePlan(), false}, build(maxStatementSQL))
		if c.sqlBytes > maxStatementBytes {
			t.Fatalf("%d bytes counted, want at most %d", c.sqlBytes, maxStatementBytes)
		}
	}
}

// TestCachedFetchRelativeTimes: a rollup half whose keys or filters read a
// parameter bound to 'now' is not cached; in the bucket range, whose
// values the token holds, they may be.
func TestCachedFetchRelativeTimes(t *testing.T) {
	// cachePlan with its bucket range relative to $2 and today.
	mkPlan := func() *plan.Rollup {
		p := cachePlan()
		p.Params, p.FetchParams, p.Cache.Params = 2, []int{1, 2}, []int{1}
		p.Time.BucketsFrom = "date_trunc('day', CAST($2 AS timestamp with time zone), 'UTC')"
		p.Time.BucketsTo = "LEAST(COALESCE(w, '-infinity'), date_trunc('day', CAST('today' AS timestamp with time zone), 'UTC'))"
		p.Fetch.Range = []string{`r."bucket" >= ` + p.Time.BucketsFrom, `r."bucket" < ` + p.Time.BucketsTo}
		p.Fetch.Rest[0].Where = []string{`t."created_at" < ` + p.Time.BucketsFrom}
		p.FetchSQL = p.Fetch.SQL(false, "")
		return p
	}
	bound := func(v1, v2 string) upstream.Statement {
		p := mkPlan()
		return upstream.Statement{SQL: p.FetchSQL, Params: [][]byte{[]byte(v1), []byte(v2)}}
	}
	if _, ok := cachedFetch(NewCache(1<<20), mkPlan(), false, bound("DE", "today"), 5, 3); !ok {
		t.Errorf("a bucket range relative to today is not cached:\n%s", mkPlan().FetchSQL)
	}
	for _, v := range []string{"today", " Now", "yesterday 12:00", "TOMORROW"} {
		if _, ok := cachedFetch(NewCache(1<<20), mkPlan(), false, bound(v, "2026-02-01"), 5, 3); ok {
			t.Errorf("a rollup half with $1 bound to %q is cached", v)
		}
	}
	for _, v := range []string{"DE", "Snowdonia", "2026-02-01"} {
		if _, ok := cachedFetch(NewCache(1<<20), mkPlan(), false, bound(v, "2026-02-01"), 5, 3); !ok {
			t.Errorf("a rollup half with $1 bound to %q is not cached", v)
		}
	}
}

func TestRunCachedHitMissInvalidate(t *testing.T) {
	p := cachePlan()
	i8 := func(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }
	arr := appendBinaryArray(nil, pgtype.ByteaOID, [][]byte{sketchOf(t, "1", "2"), sketchOf(t, "2", "3")})
	q := &tokenSession{token: "7/100|1|2", rollupRows: [][][]byte{{[]byte("rollup"), []byte("DE"), arr, nil, i8(10)}}}
	c := NewCache(1 << 20)
	params := Params{OIDs: []uint32{pgtype.TextOID}, Values: [][]byte{[]byte("DE")}}
	var cachedRollup []bool
	estimates := func() []byte {
		ans, err := RunCached(context.Background(), q, p, params, nil, c, "db")
		if err != nil {
			t.Fatal(err)
		}
		cachedRollup = append(cachedRollup, ans.CachedRollup)
		return q.shape.Params[1]
	}
	first := estimates()
	if second := estimates(); string(second) != string(first) || q.rollupRead != 1 {
		t.Fatalf("second run: rollup read %d times, estimates equal %v", q.rollupRead, string(second) == string(first))
	}
	if hits, misses, bytes := c.Stats(); hits != 1 || misses != 1 || bytes == 0 {
		t.Errorf("stats %d %d %d", hits, misses, bytes)
	}
	// A new version: read again.
	q.token = "8/101|1|2"
	estimates()
	if q.rollupRead != 2 {
		t.Errorf("after a version change the rollup was read %d times, want 2", q.rollupRead)
	}
	// Other parameters or another scope: another entry.
	params.Values[0] = []byte("FR")
	estimates()
	if q.rollupRead != 3 {
		t.Errorf("other parameters: rollup read %d times, want 3", q.rollupRead)
	}
	if fmt.Sprint(cachedRollup) != "[false true false false]" {
		t.Errorf("Answer.CachedRollup %v", cachedRollup)
	}
}

// TestCacheKeyNamesWhatRowsDependOn: a cached rollup half, and the
// estimates its rows keep (partRow.est, computed with the aggregate's
// sketch parameters), are reached only under a key naming everything
// beside the token they were made of: the scope (database, role,
// settings), the statement, each aggregate's merge (operation, measure,
// log2m, regwidth, hash) and the bound parameters (value, NULL or empty,
// type, format). Two fetches differing in any of these never share an
// entry.
func TestCacheKeyNamesWhatRowsDependOn(t *testing.T) {
	st := func() upstream.Statement {
		return upstream.Statement{SQL: "x", ParamOIDs: []uint32{pgtype.TextOID}, Params: [][]byte{[]byte("DE")}}
	}
	base := cacheKey("db\x00role", cachePlan(), st())
	if again := cacheKey("db\x00role", cachePlan(), st()); again != base {
		t.Fatal("the same fetch made two keys")
	}
	for name, change := range map[string]func(scope *string, p *plan.Rollup, s *upstream.Statement){
		"scope":         func(scope *string, _ *plan.Rollup, _ *upstream.Statement) { *scope = "db\x00other role" },
		"statement":     func(_ *string, p *plan.Rollup, _ *upstream.Statement) { p.FetchSQL += " " },
		"operation":     func(_ *string, p *plan.Rollup, _ *upstream.Statement) { p.Aggs[1].Op = plan.AddSums },
		"measure":       func(_ *string, p *plan.Rollup, _ *upstream.Statement) { p.Aggs[0].Measure = "distinct_session_id" },
		"log2m":         func(_ *string, p *plan.Rollup, _ *upstream.Statement) { p.Aggs[0].Log2m = 12 },
		"regwidth":      func(_ *string, p *plan.Rollup, _ *upstream.Statement) { p.Aggs[0].Regwidth = 4 },
		"hash":          func(_ *string, p *plan.Rollup, _ *upstream.Statement) { p.Aggs[0].Hash = "other" },
		"value":         func(_ *string, _ *plan.Rollup, s *upstream.Statement) { s.Params[0] = []byte("FR") },
		"NULL":          func(_ *string, _ *plan.Rollup, s *upstream.Statement) { s.Params[0] = nil },
		"empty":         func(_ *string, _ *plan.Rollup, s *upstream.Statement) { s.Params[0] = []byte{} },
		"type":          func(_ *string, _ *plan.Rollup, s *upstream.Statement) { s.ParamOIDs[0] = pgtype.VarcharOID },
		"format":        func(_ *string, _ *plan.Rollup, s *upstream.Statement) { s.ParamFormats = []int16{1} },
		"one parameter": func(_ *string, _ *plan.Rollup, s *upstream.Statement) { s.Params = append(s.Params, []byte("x")) },
	} {
		scope, p, s := "db\x00role", cachePlan(), st()
		change(&scope, p, &s)
		if cacheKey(scope, p, s) == base {
			t.Errorf("another %s, the same key", name)
		}
	}
	// NULL and empty differ from each other too.
	null, empty := st(), st()
	null.Params[0], empty.Params[0] = nil, []byte{}
	if cacheKey("s", cachePlan(), null) == cacheKey("s", cachePlan(), empty) {
		t.Error("a NULL parameter and an empty one, the same key")
	}
}

func TestCacheEvicts(t *testing.T) {
	c := NewCache(1000)
	part := &rollupPart{size: 300}
	c.putEntry((&cacheEntry{key: "a", token: "t", part: part}).sized())
	c.putEntry((&cacheEntry{key: "b", token: "t", part: part}).sized())
	c.get("a")
	c.putEntry((&cacheEntry{key: "c", token: "t", part: part}).sized())
	if c.get("b") != nil || c.get("a") == nil || c.get("c") == nil {
		t.Error("not least recently used first")
	}
	c.putEntry((&cacheEntry{key: "d", token: "t", part: &rollupPart{size: 2000}}).sized())
	if c.get("d") != nil {
		t.Error("an entry over the bound was kept")
	}
	if NewCache(0) != nil {
		t.Error("NewCache(0) caches")
	}
}

// TestMergeLeavesCachedRowsAlone: a cached rollup half is read by many
// merges. A group holding one cached row's sketch takes the row's own
// estimate (kept after the first merge); a group to which more is added
// gets a sketch of its own. Each estimate is the one a fresh union gives,
// every time, and the cached rows' sketches never change.
func TestMergeLeavesCachedRowsAlone(t *testing.T) {
	p := cachePlan()
	vals := func(lo, hi int) []string {
		var out []string
		for i := lo; i < hi; i++ {
			out = append(out, fmt.Sprint(i))
		}
		return out
	}
	i8 := func(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }
	arr := func(sk ...[]byte) []byte { return appendBinaryArray(nil, pgtype.ByteaOID, sk) }
	a, b1, b2 := sketchOf(t, vals(0, 5000)...), sketchOf(t, vals(3000, 9000)...), sketchOf(t, vals(8000, 20000)...)
	part, err := buildPart(p, [][][]byte{
		{[]byte("rollup"), []byte("A"), arr(a), nil, i8(1)},
		{[]byte("rollup"), []byte("B"), arr(b1), nil, i8(1)},
		{[]byte("rollup"), []byte("B"), arr(b2), nil, i8(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	before := map[int][]byte{}
	for i, r := range part.rows {
		if before[i], err = r.hll[0].MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	}
	want := func(base []string, sks ...[]byte) int64 {
		h, _ := sketch.NewHLL(14, 5)
		for _, s := range sks {
			var x sketch.HLL
			if err := x.UnmarshalBinary(s); err != nil {
				t.Fatal(err)
			}
			if err := h.Union(&x); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range base {
			h.Add([]byte(v))
		}
		return int64(math.Round(h.Estimate()))
	}
	fields := []pgproto3.FieldDescription{field(pgtype.TextOID), field(pgtype.TextOID), field(pgtype.ByteaArrayOID), field(pgtype.Int8ArrayOID), field(pgtype.Int8OID)}
	for round, tc := range []struct {
		base       [][][]byte
		wantA, wnB int64
	}{
		{nil, want(nil, a), want(nil, b1, b2)},
		{nil, want(nil, a), want(nil, b1, b2)},
		{[][][]byte{{[]byte("base"), []byte("A"), nil, []byte("{x1,x2,x3}"), i8(3)}}, want([]string{"x1", "x2", "x3"}, a), want(nil, b1, b2)},
		{nil, want(nil, a), want(nil, b1, b2)},
	} {
		m, err := merge(p, part, &upstream.Result{Fields: fields, Rows: tc.base}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		n := len(m.cols[0])
		for i := n - m.groups; i < n; i++ {
			got[string(m.cols[0][i])] = int64(binary.BigEndian.Uint64(m.cols[1][i]))
		}
		if got["A"] != tc.wantA || got["B"] != tc.wnB {
			t.Errorf("merge %d: estimates %v, want A %d, B %d", round+1, got, tc.wantA, tc.wnB)
		}
		for i, r := range part.rows {
			after, _ := r.hll[0].MarshalBinary()
			if string(after) != string(before[i]) {
				t.Fatalf("merge %d changed cached row %d's sketch", round+1, i)
			}
		}
	}
}
