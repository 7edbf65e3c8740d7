package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/sketch"
)

// sketchConfig is one (log2m, regwidth) pair compared with the extension.
type sketchConfig struct{ log2m, regwidth int }

var compatConfigs = []sketchConfig{{10, 4}, {10, 5}, {14, 4}, {14, 5}, {17, 4}, {17, 5}}

var compatSizes = []int{0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000}

// compatHashes returns n hash values for a set: random 64-bit values and,
// from 10 values up, some edge cases: 0, 1, the extremes of the signed order,
// and values whose bits above the register index are all zero (register
// value 0).
func compatHashes(set, n int) []uint64 {
	r := rand.New(rand.NewPCG(uint64(set), uint64(n)))
	hs := make([]uint64, 0, n)
	if n >= 10 {
		hs = append(hs, 0, 1, 1<<63, math.MaxUint64, 1<<63-1, 5, 1023)
	}
	for len(hs) < n {
		hs = append(hs, r.Uint64())
	}
	return hs
}

// TestSketchCompatAddAgg checks that for the same hash values our bytes are
// hll_send(hll_add_agg(h::hll_hashval, log2m, regwidth)), and that every
// sketch the extension writes decodes and re-encodes to the same bytes.
func TestSketchCompatAddAgg(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := newTestDB(t).Conn(t)

	start := time.Now()
	sets := make(map[int][]uint64, len(compatSizes))
	var rows [][]any
	for _, n := range compatSizes {
		sets[n] = compatHashes(1, n)
		for _, h := range sets[n] {
			rows = append(rows, []any{int32(n), int64(h)})
		}
	}
	mustExec(t, conn, "CREATE TEMP TABLE compat_hashes (sz int NOT NULL, h bigint NOT NULL)")
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"compat_hashes"}, []string{"sz", "h"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatalf("COPY hashes: %v", err)
	}
	t.Logf("sent %d hashes in %v", len(rows), time.Since(start))
	rows = nil

	// One pass over the hashes computes every configuration.
	var cols []string
	for _, c := range compatConfigs {
		cols = append(cols, fmt.Sprintf("hll_send(hll_add_agg(h::hll_hashval, %d, %d))", c.log2m, c.regwidth))
	}
	ext := make(map[int][][]byte)
	res, err := conn.Query(ctx, "SELECT sz, "+strings.Join(cols, ", ")+" FROM compat_hashes GROUP BY sz")
	if err != nil {
		t.Fatal(err)
	}
	for res.Next() {
		vals, err := res.Values()
		if err != nil {
			t.Fatal(err)
		}
		sz := int(vals[0].(int32))
		for _, v := range vals[1:] {
			ext[sz] = append(ext[sz], v.([]byte))
		}
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("hll_add_agg over all sizes and configurations in %v", time.Since(start))

	// hll_add_agg over no rows is NULL, not an EMPTY sketch; compare the
	// empty sketch with hll_empty(log2m, regwidth) instead.
	var nullAgg *[]byte
	if err := conn.QueryRow(ctx, "SELECT hll_send(hll_add_agg(h::hll_hashval, 14, 5)) FROM compat_hashes WHERE false").Scan(&nullAgg); err != nil {
		t.Fatal(err)
	}
	if nullAgg != nil {
		t.Errorf("hll_add_agg over no rows = %x, expected NULL", *nullAgg)
	}
	for _, c := range compatConfigs {
		var b []byte
		if err := conn.QueryRow(ctx, "SELECT hll_send(hll_empty($1, $2))", c.log2m, c.regwidth).Scan(&b); err != nil {
			t.Fatal(err)
		}
		ext[0] = append(ext[0], b)
	}

	seen := make(map[byte]int)
	for _, n := range compatSizes {
		if len(ext[n]) != len(compatConfigs) {
			t.Fatalf("size %d: %d extension sketches, want %d", n, len(ext[n]), len(compatConfigs))
		}
		for i, c := range compatConfigs {
			h, err := sketch.NewHLL(c.log2m, c.regwidth)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range sets[n] {
				h.AddHash(x)
			}
			ours, err := h.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			theirs := ext[n][i]
			seen[theirs[0]&0x0f]++
			if !bytes.Equal(ours, theirs) {
				t.Errorf("size %d log2m %d regwidth %d: our %s differs from the extension's %s", n, c.log2m, c.regwidth, describe(ours), describe(theirs))
				continue
			}
			checkRoundTrip(t, fmt.Sprintf("add_agg size %d %d/%d", n, c.log2m, c.regwidth), theirs)
		}
	}
	requireAllTypes(t, "hll_add_agg", seen, 1, 2, 3, 4)
	t.Logf("compared %d sketches in %v", len(compatSizes)*len(compatConfigs), time.Since(start))
}

// TestSketchCompatUnion checks that hll_union_agg over our sketches gives
// the bytes of our Union, for groups that mix EMPTY, EXPLICIT, SPARSE and
// FULL sketches and groups whose union stays EXPLICIT or is promoted.
func TestSketchCompatUnion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := newTestDB(t).Conn(t)
	start := time.Now()

	// The pieces of a group are slices of one pool of hashes, so pieces of
	// a group overlap.
	pool := compatHashes(2, 300_000)
	type piece struct{ from, to int }
	groups := map[string][]piece{
		"all sizes":         {{0, 0}, {0, 1}, {5, 15}, {10, 110}, {100, 1_100}, {1_000, 11_000}, {10_000, 110_000}, {0, 300_000}},
		"explicit fits":     {{0, 20}, {10, 40}, {30, 60}},
		"explicit overflow": {{0, 60}, {50, 110}, {100, 160}, {150, 210}, {200, 260}},
		"explicit and big":  {{0, 30}, {20, 50_000}, {40, 70}},
		"sparse to full":    {{0, 3_000}, {3_000, 6_000}, {6_000, 9_000}, {9_000, 40_000}},
		"empty only":        {{0, 0}, {7, 7}},
		"full then small":   {{0, 200_000}, {200_000, 200_005}, {1, 2}},
	}

	mustExec(t, conn, "CREATE TEMP TABLE compat_sketches (grp text, log2m int, regwidth int, ord int, s bytea)")
	var rows [][]any
	want := make(map[string][]byte)
	for _, c := range compatConfigs {
		for name, pieces := range groups {
			acc, err := sketch.NewHLL(c.log2m, c.regwidth)
			if err != nil {
				t.Fatal(err)
			}
			for ord, p := range pieces {
				h, _ := sketch.NewHLL(c.log2m, c.regwidth)
				for _, x := range pool[p.from:p.to] {
					h.AddHash(x)
				}
				b, err := h.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, []any{name, int32(c.log2m), int32(c.regwidth), int32(ord), b})
				if err := acc.Union(h); err != nil {
					t.Fatal(err)
				}
			}
			b, err := acc.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			want[fmt.Sprintf("%s %d/%d", name, c.log2m, c.regwidth)] = b
		}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"compat_sketches"}, []string{"grp", "log2m", "regwidth", "ord", "s"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatalf("COPY sketches: %v", err)
	}

	res, err := conn.Query(ctx, `SELECT grp, log2m, regwidth, hll_send(hll_union_agg(s::hll ORDER BY ord))
		FROM compat_sketches GROUP BY grp, log2m, regwidth`)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	seen := make(map[byte]int)
	for res.Next() {
		var name string
		var log2m, regwidth int32
		var theirs []byte
		if err := res.Scan(&name, &log2m, &regwidth, &theirs); err != nil {
			t.Fatal(err)
		}
		got++
		seen[theirs[0]&0x0f]++
		key := fmt.Sprintf("%s %d/%d", name, log2m, regwidth)
		ours := want[key]
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%s: our union %s differs from hll_union_agg %s", key, describe(ours), describe(theirs))
			continue
		}
		checkRoundTrip(t, "union_agg "+key, theirs)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if got != len(want) {
		t.Fatalf("hll_union_agg returned %d groups, want %d", got, len(want))
	}
	requireAllTypes(t, "hll_union_agg", seen, 1, 2, 3, 4)

	// The extension accepts our bytes as hll values and counts EXPLICIT
	// sketches as we do.
	var mismatches int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM compat_sketches
		WHERE hll_type(s::hll) = 2 AND hll_cardinality(s::hll) <> (length(s) - 3) / 8`).Scan(&mismatches); err != nil {
		t.Fatal(err)
	}
	if mismatches != 0 {
		t.Errorf("%d EXPLICIT sketches with an extension cardinality other than their value count", mismatches)
	}
	t.Logf("compared %d unions in %v", got, time.Since(start))
}

// TestSketchCompatBoundaries compares the bytes on both sides of each
// promotion: the last EXPLICIT sketch and the first register sketch, and the
// last SPARSE and first FULL sketch, for every configuration.
func TestSketchCompatBoundaries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := newTestDB(t).Conn(t)
	start := time.Now()

	pool := compatHashes(3, 60_000)
	type point struct {
		cfg  sketchConfig
		n    int
		want string // expected type on our side, checked before comparing
	}
	var points []point
	for _, c := range compatConfigs {
		m := 1 << c.log2m
		// Automatic explicit cutoff: 8-byte values fitting in the FULL size.
		limit := (m*c.regwidth + 7) / 8 / 8
		points = append(points, point{c, limit, "EXPLICIT"}, point{c, limit + 1, "SPARSE"})
		// Find the first prefix whose filled registers make SPARSE no
		// smaller than FULL, tracking the register rule independently.
		filled := make(map[uint64]bool)
		for n, x := range pool {
			if x>>c.log2m != 0 {
				filled[x&uint64(m-1)] = true
			}
			if len(filled)*(c.log2m+c.regwidth) >= m*c.regwidth {
				points = append(points, point{c, n, "SPARSE"}, point{c, n + 1, "FULL"})
				break
			}
		}
	}
	if len(points) != 4*len(compatConfigs) {
		t.Fatalf("pool too small to reach every FULL boundary")
	}

	rows := make([][]any, len(pool))
	for i, x := range pool {
		rows[i] = []any{int32(i), int64(x)}
	}
	mustExec(t, conn, "CREATE TEMP TABLE compat_pool (ord int NOT NULL, h bigint NOT NULL)")
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"compat_pool"}, []string{"ord", "h"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatalf("COPY pool: %v", err)
	}
	var values []string
	for i, p := range points {
		values = append(values, fmt.Sprintf("(%d, %d, %d, %d)", i, p.cfg.log2m, p.cfg.regwidth, p.n))
	}
	res, err := conn.Query(ctx, `SELECT p.i, a.s FROM (VALUES `+strings.Join(values, ", ")+`) p(i, l, w, n)
		CROSS JOIN LATERAL (SELECT hll_send(hll_add_agg(h::hll_hashval, p.l, p.w)) s FROM compat_pool WHERE ord < p.n) a`)
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for res.Next() {
		var i int32
		var theirs []byte
		if err := res.Scan(&i, &theirs); err != nil {
			t.Fatal(err)
		}
		p := points[i]
		h, _ := sketch.NewHLL(p.cfg.log2m, p.cfg.regwidth)
		for _, x := range pool[:p.n] {
			h.AddHash(x)
		}
		ours, err := h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if got := describe(ours); !strings.HasPrefix(got, p.want) {
			t.Errorf("%d/%d n=%d: ours is %s, expected %s", p.cfg.log2m, p.cfg.regwidth, p.n, got, p.want)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%d/%d n=%d: our %s differs from the extension's %s", p.cfg.log2m, p.cfg.regwidth, p.n, describe(ours), describe(theirs))
			continue
		}
		checkRoundTrip(t, fmt.Sprintf("boundary %d/%d n=%d", p.cfg.log2m, p.cfg.regwidth, p.n), theirs)
		compared++
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if compared != len(points) {
		t.Errorf("compared %d of %d boundary sketches", compared, len(points))
	}
	t.Logf("compared %d boundary sketches in %v", compared, time.Since(start))
}

// requireAllTypes fails the test unless the extension wrote every listed
// type, so that the comparison covers each representation.
func requireAllTypes(t *testing.T, what string, seen map[byte]int, types ...byte) {
	t.Helper()
	for _, typ := range types {
		if seen[typ] == 0 {
			t.Errorf("%s wrote no sketch of type %d (seen %v): the comparison does not cover it", what, typ, seen)
		}
	}
	t.Logf("%s types compared (type: count): %v", what, seen)
}

// checkRoundTrip decodes bytes the extension wrote and checks they encode
// back to the same bytes.
func checkRoundTrip(t *testing.T, what string, b []byte) {
	t.Helper()
	var h sketch.HLL
	if err := h.UnmarshalBinary(b); err != nil {
		t.Errorf("%s: the extension's %s does not decode: %v", what, describe(b), err)
		return
	}
	again, err := h.MarshalBinary()
	if err != nil {
		t.Errorf("%s: re-marshal: %v", what, err)
		return
	}
	if !bytes.Equal(again, b) {
		t.Errorf("%s: the extension's %s re-encodes as %s", what, describe(b), describe(again))
	}
}

// describe summarises sketch bytes for a failure message.
func describe(b []byte) string {
	if len(b) < 3 {
		return fmt.Sprintf("%d bytes %x", len(b), b)
	}
	types := []string{"UNDEFINED", "EMPTY", "EXPLICIT", "SPARSE", "FULL"}
	typ := fmt.Sprintf("type %d", b[0]&0x0f)
	if int(b[0]&0x0f) < len(types) {
		typ = types[b[0]&0x0f]
	}
	head := b
	if len(head) > 16 {
		head = head[:16]
	}
	return fmt.Sprintf("%s of %d bytes (%x...)", typ, len(b), head)
}

// TestHLLEstimateInSQL checks that pgsketch.hll_estimate, the estimator
// PostgreSQL runs where it unites sketches itself, gives Estimate's value
// for every sketch the extension writes: EMPTY, EXPLICIT, SPARSE and FULL,
// every regwidth, register words narrower than a byte, sparse encoding and
// the EXPLICIT stage off, saturated registers, and that an UNDEFINED or
// unknown sketch gives NaN rather than a count.
func TestHLLEstimateInSQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, conn := catalogDB(t)

	var rows [][]any
	sizes := []int{1, 3, 10, 100, 1_000, 5_000, 30_000, 200_000}
	for _, n := range sizes {
		for _, h := range compatHashes(3, n) {
			rows = append(rows, []any{int32(n), int64(h)})
		}
	}
	mustExec(t, conn, "CREATE TEMP TABLE est_hashes (sz int NOT NULL, h bigint NOT NULL)")
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"est_hashes"}, []string{"sz", "h"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatalf("COPY hashes: %v", err)
	}
	// log2m, regwidth, expthresh (-1 automatic, 0 no EXPLICIT stage),
	// sparse on.
	configs := [][4]int{
		{4, 1, -1, 1}, {4, 2, -1, 1}, {4, 3, 0, 1}, {5, 2, 0, 1}, {4, 5, -1, 0},
		{10, 4, -1, 1}, {10, 5, 0, 1}, {11, 5, -1, 0}, {14, 5, -1, 1}, {14, 5, 0, 0},
		{14, 4, 0, 1}, {16, 5, -1, 1}, {17, 5, 0, 1}, {12, 3, -1, 1}, {8, 1, 0, 0},
	}
	var cols []string
	for _, c := range configs {
		cols = append(cols, fmt.Sprintf("hll_send(hll_add_agg(h::hll_hashval, %d, %d, %d, %d))", c[0], c[1], c[2], c[3]))
	}
	res, err := conn.Query(ctx, "SELECT s, pgsketch.hll_estimate(s) FROM (SELECT unnest(ARRAY["+strings.Join(cols, ", ")+
		"]) AS s FROM est_hashes GROUP BY sz) x UNION ALL SELECT s, pgsketch.hll_estimate(s) FROM (SELECT hll_send(hll_empty(14, 5)) UNION ALL SELECT '\\x0001'::bytea) AS e(s)")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[byte]int)
	compared := 0
	for res.Next() {
		var b []byte
		var got float64
		if err := res.Scan(&b, &got); err != nil {
			t.Fatal(err)
		}
		h := new(sketch.HLL)
		if err := h.UnmarshalBinary(b); err != nil {
			if !math.IsNaN(got) {
				t.Errorf("%x: not a sketch, but hll_estimate = %v, expected NaN", b, got)
			}
			continue
		}
		seen[b[0]&0x0f]++
		want := h.Estimate()
		if diff := math.Abs(got - want); diff > 1e-9*math.Max(1, want) || math.IsNaN(got) != math.IsNaN(want) {
			t.Errorf("%s: hll_estimate = %v, Estimate = %v", describe(b), got, want)
		}
		compared++
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	requireAllTypes(t, "hll_estimate", seen, 1, 2, 3, 4)

	// Every register saturated: past the sketch's range, +Inf in both.
	sat, err := sketch.NewHLL(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range compatHashes(4, 2000) {
		sat.AddHash(x)
	}
	b, err := sat.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	if err := conn.QueryRow(ctx, "SELECT pgsketch.hll_estimate($1)", b).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := sat.Estimate(); got != want {
		t.Errorf("saturated %s: hll_estimate = %v, Estimate = %v", describe(b), got, want)
	}
	// UNDEFINED: NaN, which no cast to bigint accepts.
	if err := conn.QueryRow(ctx, "SELECT pgsketch.hll_estimate('\\x108e7f'::bytea)").Scan(&got); err != nil || !math.IsNaN(got) {
		t.Errorf("UNDEFINED: hll_estimate = %v (%v), expected NaN", got, err)
	}
	if _, err := conn.Exec(ctx, "SELECT CAST(pgsketch.hll_estimate('\\x108e7f'::bytea) AS bigint)"); err == nil {
		t.Error("an UNDEFINED sketch's estimate cast to bigint, expected an error")
	}
	t.Logf("compared %d sketches", compared)
}

// TestHLLValidInSQL: pgsketch.hll_valid accepts exactly the bytes package
// sketch's decoder accepts, over sketches of every type the extension
// writes and thousands of their corruptions (truncated, extended, bytes
// changed, header fields set out of range), and pgsketch.hll_estimate is
// NaN for every rejected one.
func TestHLLValidInSQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, conn := catalogDB(t)

	// Valid sketches: EMPTY, EXPLICIT, SPARSE (words narrower and wider
	// than a byte) and FULL, from the extension.
	var valid [][]byte
	rows, err := conn.Query(ctx, `SELECT hll_send(hll_add_agg(hll_hash_bigint(g), p, w, e, sp))
		FROM (VALUES (4, 1, -1, 1), (4, 2, 0, 1), (5, 3, -1, 1), (10, 4, -1, 1), (11, 5, 0, 1), (14, 5, -1, 1), (8, 1, 0, 0)) AS c(p, w, e, sp),
		     (VALUES (1), (3), (40), (400), (5000)) AS n(k), generate_series(1, n.k) AS g
		GROUP BY p, w, e, sp, k UNION ALL SELECT hll_send(hll_empty(14, 5))`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		valid = append(valid, b)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(15, 15))
	cases := append([][]byte{}, valid...)
	for _, v := range valid {
		cases = append(cases, v[:len(v)-1], append(bytes.Clone(v), 0), append(bytes.Clone(v), 0x80), v[:3])
		for range 40 {
			c := bytes.Clone(v)
			switch r.IntN(4) {
			case 0: // a byte changed
				c[r.IntN(len(c))] ^= byte(1 + r.IntN(255))
			case 1: // a header field
				c[r.IntN(3)] = byte(r.IntN(256))
			case 2: // a data byte zeroed or saturated
				if len(c) > 3 {
					c[3+r.IntN(len(c)-3)] = []byte{0, 0xff}[r.IntN(2)]
				}
			case 3: // a repeated span of data
				if len(c) > 5 {
					i := 3 + r.IntN(len(c)-4)
					c = append(c[:i:i], v[i-1:]...)
				}
			}
			cases = append(cases, c)
		}
	}
	res, err := conn.Query(ctx, `SELECT s, pgsketch.hll_valid(s), pgsketch.hll_estimate(s) FROM unnest($1::bytea[]) AS s`, cases)
	if err != nil {
		t.Fatal(err)
	}
	var accepted, rejected int
	for res.Next() {
		var b []byte
		var ok bool
		var est float64
		if err := res.Scan(&b, &ok, &est); err != nil {
			t.Fatal(err)
		}
		goOK := new(sketch.HLL).UnmarshalBinary(b) == nil
		if ok != goOK {
			t.Errorf("%s: hll_valid %v, the decoder %v", describe(b), ok, goOK)
		}
		if !goOK && !math.IsNaN(est) {
			t.Errorf("%s: no sketch, but hll_estimate = %v", describe(b), est)
		}
		if goOK {
			accepted++
		} else {
			rejected++
		}
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d byte strings: %d sketches, %d not", accepted+rejected, accepted, rejected)
	if accepted < len(valid) || rejected < 500 {
		t.Errorf("%d accepted, %d rejected: want every valid sketch and at least 500 corruptions", accepted, rejected)
	}
}
