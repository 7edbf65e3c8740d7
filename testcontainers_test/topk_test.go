package e2e

import (
	"context"
	endian "encoding/binary"
	"errors"
	"fmt"
	"reflect"
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
)

// freqOf reads a stored frequent-items summary.
func freqOf(t *testing.T, b []byte) *sketch.Freq {
	t.Helper()
	var f sketch.Freq
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatalf("stored top-k summary: %v", err)
	}
	return &f
}

// TestTopkRollupBounds: a rollup's top-k summaries, small enough to prune,
// bound every item's exact count in every bucket (NULL an item too) and
// count every row; bad sizes and types are refused.
func TestTopkRollupBounds(t *testing.T) {
	t.Parallel()
	tdb, conn := catalogDB(t)
	ctx := context.Background()
	mustExec(t, conn, `CREATE TABLE hits (t timestamptz NOT NULL, i8 bigint, s text, n numeric);
		INSERT INTO hits SELECT timestamptz '2026-01-01' + i * interval '1 minute',
		       CASE WHEN i % 13 = 0 THEN NULL WHEN i % 3 = 0 THEN i % 7 ELSE (i * 7919) % 400 END,
		       'page' || CASE WHEN i % 2 = 0 THEN i % 5 ELSE i % 211 END, i
		  FROM generate_series(1, 20000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('hits_daily', 'hits', 't', topk_columns => '{i8,s}', topk_size => 16)`)
	refreshRollup(t, conn, "hits_daily", refresh.Options{})

	type key struct {
		day  int64
		item string
	}
	exact := map[string]map[key]int64{"i8": {}, "s": {}}
	for _, col := range []string{"i8", "s"} {
		rows, err := conn.Query(ctx, `SELECT date_trunc('day', t, 'UTC'), `+col+`::text, count(*) FROM hits GROUP BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var day time.Time
			var item *string
			var n int64
			if err := rows.Scan(&day, &item, &n); err != nil {
				t.Fatal(err)
			}
			k := key{day: day.Unix(), item: "\x00NULL"}
			if item != nil {
				k.item = *item
			}
			exact[col][k] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.Query(ctx, `SELECT bucket, row_count, topk_i8, topk_s FROM hits_daily`)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[int64][2]*sketch.Freq{}
	var counts = map[int64]int64{}
	for rows.Next() {
		var day time.Time
		var n int64
		var a, b []byte
		if err := rows.Scan(&day, &n, &a, &b); err != nil {
			t.Fatal(err)
		}
		sums[day.Unix()] = [2]*sketch.Freq{freqOf(t, a), freqOf(t, b)}
		counts[day.Unix()] = n
	}
	if err := rows.Err(); err != nil || len(sums) < 13 {
		t.Fatalf("%d buckets (%v)", len(sums), err)
	}
	pruned := 0
	for j, col := range []string{"i8", "s"} {
		for k, n := range exact[col] {
			f := sums[k.day][j]
			var lo, hi int64
			switch {
			case k.item == "\x00NULL":
				lo, hi = f.NullBounds()
			case col == "i8":
				var v int64
				for _, c := range k.item {
					if c != '-' {
						v = v*10 + int64(c-'0')
					}
				}
				if strings.HasPrefix(k.item, "-") {
					v = -v
				}
				lo, hi = f.Bounds(endian.BigEndian.AppendUint64(nil, uint64(v)))
			default:
				lo, hi = f.Bounds([]byte(k.item))
			}
			if n < lo || n > hi {
				t.Errorf("%s %q on day %d: exact %d outside [%d, %d]", col, k.item, k.day, n, lo, hi)
			}
		}
		for day, fs := range sums {
			if fs[j].N() != counts[day] {
				t.Errorf("%s on day %d: N %d, row count %d", col, day, fs[j].N(), counts[day])
			}
			if fs[j].MaxError() > 0 {
				pruned++
			}
		}
	}
	if pruned == 0 {
		t.Fatal("no summary was pruned: the test does not exercise the bounds")
	}
	// Migrating below the version that added topk measures is refused
	// while a rollup keeps one.
	m, err := migrations.Open(tdb.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Down(int(migrations.Latest()) - 7); err == nil || !strings.Contains(err.Error(), "keep topk measures") {
		t.Fatalf("down with a topk rollup: %v", err)
	}
	// Refused, the migration changed nothing: the version that added
	// them stays, clean.
	if v, dirty, err := m.Version(); err != nil || v != 8 || dirty {
		t.Fatalf("after the refused down: version %d, dirty %v, %v; want 8, clean", v, dirty, err)
	}
	for _, c := range []struct{ args, code, msg string }{
		{`topk_columns => '{n}'`, "42804", "cannot keep a top-k summary of column n of type numeric"},
		{`topk_columns => '{i8}', topk_size => 100`, "22023", "topk_size 100 is not a power of two"},
	} {
		_, err := conn.Exec(ctx, `SELECT pgsketch.create_rollup('bad', 'hits', 't', `+c.args+`)`)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != c.code || !strings.Contains(pe.Message, c.msg) {
			t.Errorf("%s: got %v, want %s %q", c.args, err, c.code, c.msg)
		}
	}
}

// TestTopkRollupEvents: a top-k summary of user_id beside the other
// measures of the events rollup: a week level's summaries bound the week's
// exact counts of the users they track, and an incremental refresh after
// late rows gives the bytes of a full rebuild by several streams.
func TestTopkRollupEvents(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 200_000, 28)
	ctx := context.Background()
	args := `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}', topk_columns => '{user_id}', sum_columns => '{amount}'`
	createRollup(t, conn, "tk", args)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('tk', 'week')`)
	refreshRollup(t, conn, "tk", refresh.Options{Full: true})
	rows, err := conn.Query(ctx, `SELECT w.topk_user_id, x.users, x.counts FROM tk_week w JOIN (
		SELECT b, country, device, array_agg(user_id) AS users, array_agg(n) AS counts
		  FROM (SELECT date_trunc('week', created_at, 'UTC') AS b, country, device, user_id, count(*) AS n FROM events GROUP BY 1, 2, 3, 4) e
		 GROUP BY 1, 2, 3) x ON x.b = w.bucket AND x.country IS NOT DISTINCT FROM w.country AND x.device IS NOT DISTINCT FROM w.device`)
	if err != nil {
		t.Fatal(err)
	}
	cells := 0
	for rows.Next() {
		var b []byte
		var users, counts []int64
		if err := rows.Scan(&b, &users, &counts); err != nil {
			t.Fatal(err)
		}
		f := freqOf(t, b)
		for i, u := range users {
			lo, hi := f.Bounds(endian.BigEndian.AppendUint64(nil, uint64(u)))
			if counts[i] < lo || counts[i] > hi {
				t.Fatalf("user %d: exact %d outside [%d, %d]", u, counts[i], lo, hi)
			}
		}
		cells++
	}
	if err := rows.Err(); err != nil || cells < 100 {
		t.Fatalf("%d week cells (%v)", cells, err)
	}
	mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 10000000 + i, timestamptz '2026-01-03' + i * interval '1 minute', 7, 'DE', 'web', 1 FROM generate_series(1, 300) i`)
	refreshRollup(t, conn, "tk", refresh.Options{})
	sameAsFull(t, conn, "tk", args)
}

var (
	topkExactRE  = regexp.MustCompile(`^pgsketch: top-k of "user_id" answered exactly: (\d+) candidate\(s\) .* counted in (\d+) round\(s\)`)
	topkApproxRE = regexp.MustCompile(`^pgsketch: top-k of "user_id" approximated`)
	topkBoundsRE = regexp.MustCompile(` (-?\d+|NULL)\*? (\d+)\.\.(\d+)`)
)

// TestTopKThroughProxy: top-k and threshold queries over a rollup's
// summaries answer exactly what PostgreSQL answers (under a total ORDER
// BY, rows and order), on the verified path, through the simple and the
// extended protocol, also after writes the rollup has not seen; approx
// mode returns as many rows with every true count inside its stated
// bounds; where the summaries cannot prove the answer, the query runs
// exactly and says why.
func TestTopKThroughProxy(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 200_000, 40)
	ctx := context.Background()
	createRollup(t, conn, "tk", `grain => 'day', dimensions => '{device}', topk_columns => '{user_id}'`)
	refreshRollup(t, conn, "tk", refresh.Options{})
	p := startProxy(t, server.adminURL)
	direct := connectSimple(t, db.DSN)
	simple := connectSimple(t, p.URL(db.DSN))
	extended := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)

	verified := func(nc *noticeConn, sql string) {
		t.Helper()
		want, err := direct.query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		got, err := nc.query(ctx, sql)
		if err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
		if len(got.notices) != 1 || !topkExactRE.MatchString(got.notices[0]) {
			t.Fatalf("not answered on the verified path: %q\n%s\n%s", got.notices, sql, p.Log())
		}
		if !reflect.DeepEqual(got.rows, want.rows) || len(got.fields) != len(want.fields) {
			t.Fatalf("answer differs from PostgreSQL's\n%s\ngot  %v\nwant %v", sql, got.rows, want.rows)
		}
		for i := range got.fields {
			if got.fields[i].Name != want.fields[i].Name || got.fields[i].DataTypeOID != want.fields[i].DataTypeOID {
				t.Fatalf("columns %v, PostgreSQL's %v", got.fields, want.fields)
			}
		}
		if len(want.rows) == 0 {
			t.Fatalf("no rows: the case tests nothing\n%s", sql)
		}
		t.Logf("%d rows; %s", len(got.rows), got.notices[0])
	}
	queries := []string{
		`SELECT user_id, count(*) AS n FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01' GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`,
		`SELECT user_id, count(*) FROM events WHERE created_at >= '2026-01-08 06:00' AND created_at < '2026-01-15' GROUP BY user_id ORDER BY 2 DESC, 1 LIMIT 10`,
		`SELECT count(*) AS events, user_id FROM events GROUP BY user_id ORDER BY count(*) DESC, user_id LIMIT 5 OFFSET 3`,
		`SELECT user_id, count(*) FROM events WHERE device = 'ios' GROUP BY user_id HAVING count(*) >= 100 ORDER BY 2 DESC, 1`,
		`SELECT device, user_id, count(*) FROM events WHERE created_at < '2026-01-20' GROUP BY device, user_id ORDER BY 3 DESC, 1, 2 LIMIT 10`,
	}
	for _, q := range queries {
		verified(simple, q)
		verified(extended, q)
	}

	// EXPLAIN shows the plan and what running it found.
	// EXPLAIN gives the statements' size, EXPLAIN (VERBOSE) their SQL.
	for explain, count := range map[string]string{"EXPLAIN ": "count: ", "EXPLAIN (VERBOSE) ": "count: SELECT"} {
		ex, err := simple.query(ctx, explain+queries[0])
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, r := range ex.rows {
			text.WriteString(r[0] + "\n")
		}
		for _, want := range []string{"top-k: the 10 largest counts of \"user_id\"", "mode: verified", count, "answer: top-k of \"user_id\" answered exactly"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("%s lacks %q:\n%s", explain, want, text.String())
			}
		}
		if sized := strings.Contains(text.String(), " bytes of SQL (EXPLAIN (VERBOSE) prints it)"); sized == (explain != "EXPLAIN ") {
			t.Errorf("%s: statements given by size %v:\n%s", explain, sized, text.String())
		}
	}

	// Writes after the refresh: a new heaviest user, in a bucket the
	// summaries have, and deletes of January's top user.
	mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 10000000 + i, timestamptz '2026-01-05 10:00' + i * interval '1 second', 999999999, 'US', 'ios', 1 FROM generate_series(1, 500) i`)
	var top int64
	if err := conn.QueryRow(ctx, `SELECT user_id FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01' AND user_id <> 999999999
		GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`).Scan(&top); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, fmt.Sprintf(`DELETE FROM events WHERE user_id = %d AND created_at < '2026-01-15'`, top))
	for _, q := range queries {
		verified(simple, q)
	}

	// Approximate: as many rows, each true count inside its bounds.
	mustExec(t, simple.Conn, `SET pgsketch.topk = approx`)
	q := `SELECT user_id, count(*) FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01' GROUP BY user_id ORDER BY 2 DESC LIMIT 10`
	got, err := simple.query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.rows) != 10 || len(got.notices) != 1 || !topkApproxRE.MatchString(got.notices[0]) {
		t.Fatalf("approx answer %v, notices %q", got.rows, got.notices)
	}
	for _, m := range topkBoundsRE.FindAllStringSubmatch(got.notices[0], -1) {
		var exact int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01' AND user_id = `+m[1]).Scan(&exact); err != nil {
			t.Fatal(err)
		}
		lo, _ := strconv.ParseInt(m[2], 10, 64)
		hi, _ := strconv.ParseInt(m[3], 10, 64)
		if exact < lo || exact > hi {
			t.Errorf("user %s: exact count %d outside the stated bounds %d..%d", m[1], exact, lo, hi)
		}
	}
	mustExec(t, simple.Conn, `RESET pgsketch.topk`)

	// Inside a READ COMMITTED or READ UNCOMMITTED block (which runs as
	// READ COMMITTED) the two reads would see two snapshots: counted
	// exactly, with the reason. Inside a REPEATABLE READ block they see
	// one: answered.
	want, _ := direct.query(ctx, queries[0])
	for _, level := range []string{"READ COMMITTED", "READ UNCOMMITTED", "REPEATABLE READ"} {
		mustExec(t, simple.Conn, "BEGIN ISOLATION LEVEL "+level)
		got, err = simple.query(ctx, queries[0])
		if err != nil {
			t.Fatal(err)
		}
		exact := level == "REPEATABLE READ"
		if !reflect.DeepEqual(got.rows, want.rows) || len(got.notices) != 1 ||
			strings.Contains(got.notices[0], "answered exactly:") != exact || strings.Contains(got.notices[0], "isolation level") == exact {
			t.Errorf("in a %s block: rows %v (want %v), notices %q", level, got.rows, want.rows, got.notices)
		}
		mustExec(t, simple.Conn, "ROLLBACK")
	}

	// Summaries too small to prove anything: counted exactly, said so.
	createRollup(t, conn, "tk_small", `grain => 'day', topk_columns => '{user_id}', topk_size => 16`)
	refreshRollup(t, conn, "tk_small", refresh.Options{})
	mustExec(t, conn, `SELECT pgsketch.drop_rollup('tk')`)
	got, err = simple.query(ctx, queries[2])
	if err != nil {
		t.Fatal(err)
	}
	want, _ = direct.query(ctx, queries[2])
	if !reflect.DeepEqual(got.rows, want.rows) || len(got.notices) != 1 || !strings.Contains(got.notices[0], "do not prove the answer exact") {
		t.Errorf("unprovable: rows %v (want %v), notices %q", got.rows, want.rows, got.notices)
	}
}

// TestTopKItemsThroughProxy: the NULL item is a group like any other (here
// the most frequent one), text items are bound and shaped as text, and
// both modes answer them: verified as PostgreSQL does, approx with the
// NULL and string items named in its bounds.
func TestTopKItemsThroughProxy(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	ctx := context.Background()
	mustExec(t, conn, `CREATE TABLE hits (t timestamptz NOT NULL, i8 bigint, s varchar(20));
		INSERT INTO hits SELECT timestamptz '2026-01-01' + i * interval '1 minute',
		       CASE WHEN i % 13 = 0 THEN NULL WHEN i % 3 = 0 THEN i % 7 ELSE (i * 7919) % 400 END,
		       CASE WHEN i % 17 = 0 THEN NULL ELSE 'page' || CASE WHEN i % 2 = 0 THEN i % 5 ELSE i % 211 END END
		  FROM generate_series(1, 20000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('hits_daily', 'hits', 't', topk_columns => '{i8,s}')`)
	refreshRollup(t, conn, "hits_daily", refresh.Options{})
	p := startProxy(t, server.adminURL)
	direct := connectSimple(t, db.DSN)
	for _, nc := range []*noticeConn{connectSimple(t, p.URL(db.DSN)), connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)} {
		for _, q := range []string{
			`SELECT i8, count(*) FROM hits GROUP BY i8 ORDER BY 2 DESC, 1 NULLS FIRST LIMIT 5`,
			`SELECT s AS page, count(*) FROM hits WHERE t >= '2026-01-03 12:00' GROUP BY s ORDER BY count(*) DESC, s LIMIT 4`,
			`SELECT s, count(*) FROM hits GROUP BY s HAVING count(*) > 1000 ORDER BY s NULLS FIRST`,
		} {
			want, err := direct.query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got, err := nc.query(ctx, q)
			if err != nil {
				t.Fatalf("%v\n%s", err, q)
			}
			if !reflect.DeepEqual(got.rows, want.rows) || !reflect.DeepEqual(got.nulls, want.nulls) || len(got.notices) != 1 ||
				!strings.Contains(got.notices[0], "answered exactly") {
				t.Fatalf("%s\ngot  %v %v\nwant %v %v\nnotices %q", q, got.rows, got.nulls, want.rows, want.nulls, got.notices)
			}
			if got.fields[0].DataTypeOID != want.fields[0].DataTypeOID {
				t.Errorf("item column of type %d, PostgreSQL's %d", got.fields[0].DataTypeOID, want.fields[0].DataTypeOID)
			}
			if !got.nulls[0][0] && strings.HasPrefix(q, "SELECT i8") {
				t.Errorf("the NULL item is not first: %v", got.rows)
			}
		}
	}
	// A column whose collation is not the database's: PostgreSQL would
	// order ties by it, the shaped groups by the default one. Passed
	// through.
	mustExec(t, conn, `CREATE TABLE pages (t timestamptz NOT NULL, p text COLLATE "C");
		INSERT INTO pages SELECT timestamptz '2026-01-01' + i * interval '1 minute', CASE WHEN i % 2 = 0 THEN 'a' ELSE 'B' END
		  FROM generate_series(1, 1000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('pages_daily', 'pages', 't', topk_columns => '{p}')`)
	refreshRollup(t, conn, "pages_daily", refresh.Options{})
	through := connectSimple(t, p.URL(db.DSN))
	got, err := through.query(ctx, `SELECT p, count(*) FROM pages GROUP BY p ORDER BY 2 DESC, 1 LIMIT 1`)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := direct.query(ctx, `SELECT p, count(*) FROM pages GROUP BY p ORDER BY 2 DESC, 1 LIMIT 1`); !reflect.DeepEqual(got.rows, want.rows) || len(got.notices) != 0 {
		t.Errorf("a column with its own collation: got %v (want %v), notices %q", got.rows, want.rows, got.notices)
	}

	approx := connectSimple(t, p.URL(db.DSN))
	mustExec(t, approx.Conn, `SET pgsketch.topk = approx`)
	got, err = approx.query(ctx, `SELECT s, count(*) FROM hits GROUP BY s ORDER BY 2 DESC LIMIT 3`)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := direct.query(ctx, `SELECT s, count(*) FROM hits GROUP BY s ORDER BY 2 DESC LIMIT 3`)
	if !reflect.DeepEqual(got.rows, want.rows) || len(got.notices) != 1 || !strings.Contains(got.notices[0], "'page1' 1928..1928") {
		t.Errorf("approx: got %v, want %v (the summaries are exact here); notices %q", got.rows, want.rows, got.notices)
	}
	got, err = approx.query(ctx, `SELECT i8, count(*) FROM hits GROUP BY i8 ORDER BY 2 DESC LIMIT 1`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.rows) != 1 || !got.nulls[0][0] || len(got.notices) != 1 || !strings.Contains(got.notices[0], ": NULL 1538..1538") {
		t.Errorf("approx, the NULL item: got %v %v; notices %q", got.rows, got.nulls, got.notices)
	}
}
