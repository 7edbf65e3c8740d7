package e2e

import (
	"context"
	endian "encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/migrations"
	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// thetaOf reads a stored Theta sketch.
func thetaOf(t *testing.T, b []byte) *sketch.CompactTheta {
	t.Helper()
	var c sketch.CompactTheta
	if err := c.UnmarshalBinary(b); err != nil {
		t.Fatalf("stored theta sketch: %v", err)
	}
	return &c
}

// canonical is the form a rollup stores: the union of one sketch.
func canonical(t *testing.T, lgK int, s *sketch.Theta) []byte {
	t.Helper()
	u, err := sketch.ThetaUnion(lgK, s.Compact())
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestThetaRollupHashing: each supported type's values are hashed as
// datasketches-postgresql's theta_sketch_build hashes them (an integer's
// little-endian bytes of its own width, a string's bytes), so every stored
// sketch has the bytes of one built in Go from the same values; NULLs are
// skipped; unsupported types are refused with SQLSTATE 42804.
func TestThetaRollupHashing(t *testing.T) {
	t.Parallel()
	tdb, conn := catalogDB(t)
	ctx := context.Background()
	mustExec(t, conn, `CREATE DOMAIN email AS text;
		CREATE TABLE typed (t timestamptz NOT NULL, i2 smallint, i4 integer, i8 bigint, s text, v varchar(20), e email, n numeric);
		INSERT INTO typed SELECT timestamptz '2026-01-01' + i * interval '3 minutes',
		       (i % 300 - 150)::smallint, CASE WHEN i % 7 = 0 THEN NULL ELSE i * 1000 - 5000000 END,
		       (i::bigint * 2654435761) % 100000000000, 'user ' || (i % 5000), CASE WHEN i % 11 <> 0 THEN 'v' || i % 97 END,
		       CASE WHEN i % 3 = 0 THEN '' ELSE i || '@example.org' END, i
		  FROM generate_series(1, 12000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('typed_daily', 'typed', 't', theta_columns => '{i2,i4,i8,s,v,e}', theta_lgk => 10)`)
	refreshRollup(t, conn, "typed_daily", refresh.Options{})

	// The same sketches built here from the values.
	rows, err := conn.Query(ctx, `SELECT date_trunc('day', t, 'UTC'), i2, i4, i8, s, v, e FROM typed ORDER BY random()`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64][]*sketch.Theta{}
	for rows.Next() {
		var day struct{ t time.Time }
		var i2, i4, i8 *int64
		var s, v, e *string
		if err := rows.Scan(&day.t, &i2, &i4, &i8, &s, &v, &e); err != nil {
			t.Fatal(err)
		}
		sk := want[day.t.Unix()]
		if sk == nil {
			for range 6 {
				th, err := sketch.NewTheta(10)
				if err != nil {
					t.Fatal(err)
				}
				sk = append(sk, th)
			}
			want[day.t.Unix()] = sk
		}
		for j, n := range []*int64{i2, i4, i8} {
			if n != nil {
				b := endian.LittleEndian.AppendUint64(nil, uint64(*n))
				sk[j].AddBytes(b[:[]int{2, 4, 8}[j]])
			}
		}
		for j, str := range []*string{s, v, e} {
			if str != nil {
				sk[3+j].AddHash(sketch.ThetaHash([]byte(*str))) // '' too, as theta_sketch_build
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = conn.Query(ctx, `SELECT bucket, theta_i2, theta_i4, theta_i8, theta_s, theta_v, theta_e FROM typed_daily ORDER BY bucket`)
	if err != nil {
		t.Fatal(err)
	}
	buckets := 0
	for rows.Next() {
		var day struct{ t time.Time }
		got := make([][]byte, 6)
		if err := rows.Scan(&day.t, &got[0], &got[1], &got[2], &got[3], &got[4], &got[5]); err != nil {
			t.Fatal(err)
		}
		buckets++
		for j, b := range got {
			if w := canonical(t, 10, want[day.t.Unix()][j]); string(b) != string(w) {
				t.Errorf("bucket %s column %d: stored sketch (%d bytes) differs from Go's (%d bytes)", day.t, j, len(b), len(w))
			}
		}
	}
	if err := rows.Err(); err != nil || buckets != len(want) || buckets < 20 {
		t.Fatalf("%d buckets, want %d (%v)", buckets, len(want), err)
	}

	// Migrating below the version that added theta measures is refused
	// while a rollup keeps one: its sketches would become unreadable.
	m, err := migrations.Open(tdb.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Down(int(migrations.Latest()) - 6); err == nil || !strings.Contains(err.Error(), "keep theta measures") {
		t.Fatalf("down with a theta rollup: %v", err)
	}
	// Refused, the migration changed nothing: the version that added
	// them stays, clean.
	if v, dirty, err := m.Version(); err != nil || v != 7 || dirty {
		t.Fatalf("after the refused down: version %d, dirty %v, %v; want 7, clean", v, dirty, err)
	}

	for _, c := range []struct{ args, msg string }{
		{`theta_columns => '{n}'`, "cannot build a Theta sketch of column n of type numeric"},
		{`theta_columns => '{i8}', theta_lgk => 17`, "theta_lgk 17 is out of range"},
	} {
		_, err := conn.Exec(ctx, `SELECT pgsketch.create_rollup('bad', 'typed', 't', `+c.args+`)`)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || !strings.Contains(pe.Message, c.msg) {
			t.Errorf("%s: got %v, want %q", c.args, err, c.msg)
		}
	}
}

// TestThetaRollupEvents: theta columns beside hll ones on the events table:
// each row's estimate lies within its 3-SD bounds of the exact distinct
// count; a week level holds the union of its days; an incremental refresh
// after late inserts gives the bytes of a full rebuild, read by several
// streams.
func TestThetaRollupEvents(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 200_000, 28)
	ctx := context.Background()
	args := `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}', theta_columns => '{user_id}', sum_columns => '{amount}'`
	createRollup(t, conn, "ev", args)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('ev', 'week')`)
	refreshRollup(t, conn, "ev", refresh.Options{Full: true})

	type cell struct {
		exact int64
		sk    []byte
	}
	rows, err := conn.Query(ctx, `SELECT r.theta_user_id, x.n FROM ev r JOIN (
		SELECT date_trunc('day', created_at, 'UTC') AS b, country, device, count(DISTINCT user_id) AS n FROM events GROUP BY 1, 2, 3) x
		ON x.b = r.bucket AND x.country IS NOT DISTINCT FROM r.country AND x.device IS NOT DISTINCT FROM r.device`)
	if err != nil {
		t.Fatal(err)
	}
	cells, outside := 0, 0
	for rows.Next() {
		var c cell
		if err := rows.Scan(&c.sk, &c.exact); err != nil {
			t.Fatal(err)
		}
		s := thetaOf(t, c.sk)
		cells++
		if e := float64(c.exact); e < s.LowerBound(3) || e > s.UpperBound(3) {
			outside++
			t.Logf("exact %d outside [%.0f, %.0f] (estimate %.0f)", c.exact, s.LowerBound(3), s.UpperBound(3), s.Estimate())
		}
	}
	if err := rows.Err(); err != nil || cells < 300 || outside > 2 {
		t.Fatalf("%d cells, %d outside 3 SD (%v)", cells, outside, err)
	}

	// The week level: the union of each week's daily sketches.
	rows, err = conn.Query(ctx, `SELECT w.theta_user_id, array_agg(d.theta_user_id) FROM ev_week w
		JOIN ev d ON date_trunc('week', d.bucket, 'UTC') = w.bucket AND d.country IS NOT DISTINCT FROM w.country
		          AND d.device IS NOT DISTINCT FROM w.device
		GROUP BY w.bucket, w.country, w.device, w.theta_user_id`)
	if err != nil {
		t.Fatal(err)
	}
	weeks := 0
	for rows.Next() {
		var lv []byte
		var days [][]byte
		if err := rows.Scan(&lv, &days); err != nil {
			t.Fatal(err)
		}
		var parts []*sketch.CompactTheta
		for _, d := range days {
			parts = append(parts, thetaOf(t, d))
		}
		u, err := sketch.ThetaUnion(12, parts...)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := u.MarshalBinary()
		if string(b) != string(lv) {
			t.Errorf("a week's sketch is not the union of its days (%d days)", len(days))
		}
		weeks++
	}
	if err := rows.Err(); err != nil || weeks < 8 {
		t.Fatalf("%d weeks (%v)", weeks, err)
	}

	// rollup verify checks the Theta column too, against exact counts.
	checks, err := refresh.Verify(ctx, pgsession.Conn{C: conn.PgConn()}, "ev", 8)
	if err != nil {
		t.Fatal(err)
	}
	thetaChecks := 0
	for _, c := range checks {
		if c.Measure == "theta_user_id" {
			thetaChecks++
		}
	}
	if sum := refresh.Summarize(checks); thetaChecks < 8 || sum.Beyond5 > 0 {
		t.Fatalf("verify: %d theta checks of %d, %+v", thetaChecks, len(checks), sum)
	}

	// Late rows, then an incremental refresh: the bytes of a full rebuild.
	mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 10000000 + i, timestamptz '2026-01-03' + i * interval '1 minute', 900000000 + i, 'DE', 'web', 1
		  FROM generate_series(1, 500) i`)
	refreshRollup(t, conn, "ev", refresh.Options{})
	sameAsFull(t, conn, "ev", args)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgsketch.rollups WHERE name = 'ev'
		AND 'theta_user_id: theta(user_id) lg_k=12' = ANY (measures)`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("pgsketch.rollups lists the theta measure: %d (%v)", n, err)
	}
}

// overlapNoticeRE reads the estimate and interval an overlap's NOTICE states.
var overlapNoticeRE = regexp.MustCompile(`estimated from the Theta sketches of rollup (\w+): (\d+), 95% interval (\d+) to (\d+)`)

// TestOverlapThroughProxy: counts of INTERSECT and EXCEPT over one table
// answered from Theta sketches through the proxy, in both protocols, each
// exact answer near the interval the NOTICE states (within about 3 SD);
// EXPLAIN showing the estimate; a changed bucket read
// from the base table; an overlap too small to estimate counted exactly
// with a NOTICE saying why, in and out of a transaction block; a bad
// pgsketch.max_overlap_error refused with 22023.
func TestOverlapThroughProxy(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 300_000, 60)
	ctx := context.Background()
	mustExec(t, conn, `CREATE INDEX ON events (created_at)`)
	createRollup(t, conn, "ov", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}', theta_columns => '{user_id}'`)
	refreshRollup(t, conn, "ov", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	direct := connectSimple(t, db.DSN)
	simple := connectSimple(t, p.URL(db.DSN))
	extended := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)

	answered := []string{
		// Retention: January's users still active in February.
		`SELECT count(*) FROM (SELECT user_id FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01'
		 INTERSECT SELECT user_id FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01') AS retained`,
		// Churn, with ranges that cut buckets (edge rows hashed in the proxy).
		`SELECT count(*) AS churned FROM (SELECT e.user_id FROM events e WHERE e.created_at >= '2026-01-10 12:00' AND e.created_at < '2026-02-03 06:00'
		 EXCEPT SELECT user_id FROM events WHERE created_at >= '2026-02-03 06:00') x`,
		// On one dimension value, both ways round.
		`SELECT count(*) FROM (SELECT user_id FROM events WHERE country = 'US' AND created_at < '2026-01-20'
		 INTERSECT SELECT user_id FROM events WHERE country = 'US' AND created_at >= '2026-01-20') x`,
		// The same questions as distinct counts filtered by subqueries.
		`SELECT count(DISTINCT user_id) AS retained FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01'
		 AND user_id IN (SELECT user_id FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01')`,
		`SELECT count(DISTINCT e.user_id) FROM events e WHERE e.created_at >= '2026-02-01'
		 AND NOT EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND f.created_at < '2026-02-01')`,
		// New in February: not seen before.
		`SELECT count(*) FROM (SELECT user_id FROM events WHERE created_at >= '2026-02-01' EXCEPT SELECT user_id FROM events WHERE created_at < '2026-02-01') x`,
	}
	check := func(nc *noticeConn, sql string, args ...any) {
		t.Helper()
		want, err := direct.query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := nc.query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
		if len(got.notices) != 1 {
			t.Fatalf("notices %q\n%s\n%s", got.notices, sql, p.Log())
		}
		m := overlapNoticeRE.FindStringSubmatch(got.notices[0])
		if m == nil {
			t.Fatalf("not answered from sketches: %q\n%s", got.notices, sql)
		}
		exact, _ := strconv.ParseFloat(want.rows[0][0], 64)
		lo, _ := strconv.ParseFloat(m[3], 64)
		hi, _ := strconv.ParseFloat(m[4], 64)
		if got.rows[0][0] != m[2] || got.fields[0].Name != want.fields[0].Name || got.fields[0].DataTypeOID != want.fields[0].DataTypeOID {
			t.Errorf("answer %v %q, notice %q, direct %v", got.fields, got.rows, got.notices[0], want.fields)
		}
		t.Logf("exact %v, estimate %s in [%s, %s]: %s", exact, m[2], m[3], m[4], got.notices[0])
		// The 95 % interval misses one time in twenty (make accuracy-theta
		// measures how often); half its width again on each side is about
		// 3 standard deviations.
		if slack := (hi - lo) / 2; exact < lo-slack || exact > hi+slack {
			t.Errorf("exact %v far outside the stated interval [%v, %v]\n%s", exact, lo, hi, sql)
		}
	}
	for _, sql := range answered {
		check(simple, sql)
		check(extended, sql)
	}
	check(extended, `SELECT count(*) FROM (SELECT user_id FROM events WHERE created_at >= $1 AND created_at < $2
		INTERSECT SELECT user_id FROM events WHERE created_at >= $2) x`, "2026-01-05", "2026-02-07")
	// A parameter only inside the subquery is the statement's too.
	check(extended, `SELECT count(DISTINCT user_id) FROM events WHERE created_at >= '2026-02-01'
		AND user_id IN (SELECT user_id FROM events WHERE created_at < $1)`, "2026-02-01")

	// EXPLAIN shows both sets' plans and the estimate the answer would have.
	ex, err := simple.query(ctx, "EXPLAIN "+answered[0])
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, r := range ex.rows {
		text = append(text, r[0])
	}
	if all := strings.Join(text, "\n"); !strings.Contains(all, "set 2:") || !regexp.MustCompile(`estimate: \d+, 95% interval \d+ to \d+ .*answered from the sketches`).MatchString(all) {
		t.Errorf("EXPLAIN:\n%s", all)
	}

	// Rows inserted since the refresh are added to the rollup rows: their
	// new users count.
	mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 20000000 + i, timestamptz '2026-01-15 10:00', 500000000 + i, 'DE', 'web', 1 FROM generate_series(1, 3000) i;
		INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 30000000 + i, timestamptz '2026-02-15 10:00', 500000000 + i, 'DE', 'web', 1 FROM generate_series(1, 3000) i`)
	check(simple, answered[0])
	var inserted int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgsketch.inserts_ov`).Scan(&inserted); err != nil || inserted != 6000 {
		t.Errorf("%d inserted rows kept (%v), want 6000", inserted, err)
	}

	// A tiny overlap of two large sets: noise, so counted exactly.
	tiny := `SELECT count(*) FROM (SELECT user_id FROM events WHERE country = 'NG' AND created_at < '2026-01-03'
		INTERSECT SELECT user_id FROM events WHERE country = 'US' AND created_at >= '2026-02-20') x`
	for _, block := range []bool{false, true} {
		if block {
			mustExec(t, simple.Conn, "BEGIN")
		}
		want, err := direct.query(ctx, tiny)
		if err != nil {
			t.Fatal(err)
		}
		got, err := simple.query(ctx, tiny)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "over pgsketch.max_overlap_error 10%; answered exactly by PostgreSQL") ||
			got.rows[0][0] != want.rows[0][0] {
			t.Errorf("tiny overlap (block %v): %q %q, exact %q", block, got.notices, got.rows, want.rows)
		}
		if block {
			mustExec(t, simple.Conn, "SELECT 1; COMMIT")
		}
	}
	if ex, err := simple.query(ctx, "EXPLAIN "+tiny); err != nil || !strings.Contains(fmt.Sprint(ex.rows), "counted exactly by PostgreSQL") {
		t.Errorf("EXPLAIN of the tiny overlap: %v %v", ex, err)
	}
	// Allowed a larger error, the same query is answered from sketches.
	mustExec(t, simple.Conn, "SET pgsketch.max_overlap_error = '100%'")
	if got, err := simple.query(ctx, tiny); err != nil || !overlapNoticeRE.MatchString(got.notices[0]) {
		t.Errorf("with max_overlap_error 100%%: %v %v", got, err)
	}
	mustExec(t, simple.Conn, "SET pgsketch.max_overlap_error = 'lots'")
	var pe *pgconn.PgError
	if _, err := simple.query(ctx, tiny); !errors.As(err, &pe) || pe.Code != "22023" {
		t.Errorf("bad max_overlap_error: %v", err)
	}
}

// TestRetentionThroughProxy: retention grids written as self-joins of
// DISTINCT (week, user) sets, answered from per-week Theta sketches: the
// same cells as PostgreSQL's answer, each estimate close to the exact
// count, the uncertain cells counted exactly (and equal), the NOTICE
// saying how many.
func TestRetentionThroughProxy(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 300_000, 60)
	ctx := context.Background()
	mustExec(t, conn, `CREATE INDEX ON events (created_at)`)
	createRollup(t, conn, "ret", `grain => 'day', dimensions => '{country,device}', theta_columns => '{user_id}'`)
	refreshRollup(t, conn, "ret", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		direct, nc := connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)
		for _, sql := range []string{
			`WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events)
			 SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id
			 AND b.week = a.week + interval '1 week' GROUP BY 1, 2 ORDER BY 1, 2`,
			`SELECT a.w, b.w, count(DISTINCT a.user_id) FROM
			   (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events WHERE country = 'US') a,
			   (SELECT DISTINCT user_id, date_trunc('week', created_at) AS w FROM events) b
			 WHERE a.user_id = b.user_id AND b.w >= a.w GROUP BY a.w, b.w ORDER BY 1, 2`,
		} {
			want, err := direct.query(ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			got, err := nc.query(ctx, sql)
			if err != nil {
				t.Fatalf("%v\n%s", err, sql)
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], "retention grid from the Theta sketches of rollup ret") {
				t.Fatalf("notices %q\n%s\n%s", got.notices, sql, p.Log())
			}
			t.Log(got.notices[0])
			if len(got.rows) != len(want.rows) || len(want.rows) < 8 {
				t.Fatalf("%d cells, PostgreSQL has %d", len(got.rows), len(want.rows))
			}
			for i := range want.fields {
				if got.fields[i].Name != want.fields[i].Name || got.fields[i].DataTypeOID != want.fields[i].DataTypeOID {
					t.Errorf("column %d: %s/%d, PostgreSQL's %s/%d", i, got.fields[i].Name, got.fields[i].DataTypeOID, want.fields[i].Name, want.fields[i].DataTypeOID)
				}
			}
			within := 0
			for i, w := range want.rows {
				g := got.rows[i]
				if g[0] != w[0] || g[1] != w[1] {
					t.Fatalf("cell %d is (%s, %s), PostgreSQL's (%s, %s)", i, g[0], g[1], w[0], w[1])
				}
				e, _ := strconv.ParseFloat(g[2], 64)
				x, _ := strconv.ParseFloat(w[2], 64)
				if d := math.Abs(e-x) / x; d <= 0.10 {
					within++
				} else if d > 0.15 {
					t.Errorf("cell (%s, %s): %v, exact %v", w[0], w[1], e, x)
				}
			}
			if within < len(want.rows)*9/10 {
				t.Errorf("%d of %d cells within 10%%", within, len(want.rows))
			}
			if ex, err := nc.query(ctx, "EXPLAIN "+sql); err != nil || !strings.Contains(fmt.Sprint(ex.rows), "answer: retention grid from the Theta sketches") {
				t.Errorf("EXPLAIN of the grid: %v %v", ex, err)
			}
			// Allowed almost no error, every cell is counted exactly.
			mustExec(t, nc.Conn, "SET pgsketch.max_overlap_error = '0.0001%'")
			got, err = nc.query(ctx, sql)
			mustExec(t, nc.Conn, "RESET pgsketch.max_overlap_error")
			if err != nil || !strings.Contains(got.notices[0], " 0 cell(s) estimated, ") ||
				fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
				t.Errorf("all cells exact: %v %q\n got %v\nwant %v", err, got.notices, got.rows, want.rows)
			}
		}
	}
}
