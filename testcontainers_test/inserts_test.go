package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// insertsQueries are compared through the proxy and directly: counts and
// sums must be equal, distinct counts within 5 standard errors. The second
// reads a month level, the third groups by day.
var insertsQueries = []string{
	`SELECT country, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev GROUP BY country ORDER BY country`,
	`SELECT device, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev
	 WHERE created_at >= '2026-01-01' AND created_at < '2026-03-01' GROUP BY device ORDER BY device`,
	`SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev
	 WHERE created_at >= '2026-01-10' AND created_at < '2026-01-20' GROUP BY 1 ORDER BY 1`,
}

// insertsSource makes table ev, partitioned by month, with a daily rollup
// and a month level, refreshed, and a proxy over it.
func insertsSource(t *testing.T) (*testDB, *pgx.Conn, *noticeConn, *noticeConn) {
	t.Helper()
	db, conn := catalogDB(t)
	partitionedEv(t, conn, 60000)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('ev_daily', 'month')`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	return db, conn, connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
}

// insertsCheck compares every query of insertsQueries through proxy
// against direct, and requires the rollup to answer with at most
// maxChanged changed buckets (read from the source whole) in its NOTICE.
func insertsCheck(t *testing.T, step string, proxy, direct *noticeConn, maxChanged int) {
	t.Helper()
	ctx := context.Background()
	for _, q := range insertsQueries {
		exact, err := direct.query(ctx, q)
		if err != nil {
			t.Fatalf("%s: direct: %v", step, err)
		}
		got, err := proxy.query(ctx, q)
		if err != nil {
			t.Fatalf("%s: proxy: %v", step, err)
		}
		errs, err := compareRollupAnswer(got, exact)
		if err != nil {
			t.Fatalf("%s: %s: %v\nnotices %q", step, q, err, got.notices)
		}
		for _, e := range errs {
			if e > 5 {
				t.Fatalf("%s: %s: a distinct count %.1f standard errors off\nnotices %q", step, q, e, got.notices)
			}
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "approximated from rollup ev_daily") {
			t.Fatalf("%s: %s: not answered from the rollup: notices %q", step, q, got.notices)
		}
		changed := 0
		if m := changedRE.FindStringSubmatch(got.notices[0]); m != nil {
			fmt.Sscan(m[1], &changed)
		}
		if changed > maxChanged {
			t.Fatalf("%s: %s: %d changed buckets read from the source, want at most %d; notices %q", step, q, changed, maxChanged, got.notices)
		}
	}
}

// insertedRows is the number of rows in rollup ev_daily's table of
// inserted rows.
func insertedRows(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pgsketch.inserts_ev_daily`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInsertedRows: rows inserted by small statements after a refresh are
// answered from the rollup rows and the inserted rows, with no bucket read
// again from the source, exact for counts and sums; in a transaction, with
// savepoints, rolled back, through a partition and by COPY. A bucket that
// also lost or changed rows is read whole; a bulk insert logs its buckets.
// A refresh rebuilds every bucket with inserted rows and empties the table
// (the rollup then equals a fresh build); a pgsketch-proxy that does not
// read inserted rows is refused by capture_check.
func TestInsertedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn, nc, direct := insertsSource(t)
	insertsCheck(t, "clean", nc, direct, 0)

	// One row into an old day, then a 500-row statement over twenty days.
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-12 10:00+00', 'DE', 'ios', 900001, 5)`)
	insertsCheck(t, "one row", nc, direct, 0)
	mustExec(t, conn, `INSERT INTO ev SELECT timestamptz '2026-01-05' + (i % 20) * interval '1 day' + i * interval '1 minute',
		(ARRAY['DE','FR','US'])[1 + i % 3], 'web', 910000 + i, 1.5 FROM generate_series(1, 500) i`)
	insertsCheck(t, "500 rows over 20 days", nc, direct, 0)
	if n := insertedRows(t, conn); n != 501 {
		t.Fatalf("%d inserted rows kept, want 501", n)
	}
	// Rows of the open bucket (today) and later ones are read from the
	// table by every answer: not copied.
	mustExec(t, conn, `INSERT INTO ev VALUES (now(), 'DE', 'web', 900002, 1);
		INSERT INTO ev VALUES ('12024-01-01 00:00+00', 'US', 'web', 900003, 1)`)
	if n := insertedRows(t, conn); n != 501 {
		t.Fatalf("%d inserted rows kept after rows of today and of 12024, want 501", n)
	}
	insertsCheck(t, "rows of today and of 12024", nc, direct, 0)

	// Straight into a partition, and by COPY into the parent.
	mustExec(t, conn, `INSERT INTO ev_2026_02 VALUES ('2026-02-03 01:00+00', 'JP', 'android', 920001, 7)`)
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"ev"}, []string{"created_at", "country", "device", "user_id", "amount"},
		pgx.CopyFromSlice(50, func(i int) ([]any, error) {
			return []any{time.Date(2026, 1, 15, 12, i, 0, 0, time.UTC), "US", "ios", int64(930000 + i), "2.00"}, nil
		})); err != nil {
		t.Fatal(err)
	}
	insertsCheck(t, "a partition and COPY", nc, direct, 0)
	if n := insertedRows(t, conn); n != 552 {
		t.Fatalf("%d inserted rows kept, want 552 (a row copied twice would count twice)", n)
	}
	var listed int64
	if err := conn.QueryRow(ctx, `SELECT inserted_rows FROM pgsketch.rollups WHERE name = 'ev_daily'`).Scan(&listed); err != nil || listed != 552 {
		t.Fatalf("pgsketch.rollups: %d inserted rows (%v), want 552", listed, err)
	}

	// In a transaction: the session sees its own rows, a savepoint rolled
	// back takes its rows back, the rollback all of them.
	tx := connectSimple(t, nc.Config().ConnString())
	for _, s := range []string{`BEGIN`, `INSERT INTO ev VALUES ('2026-01-20 05:00+00', 'FR', 'web', 940001, 3)`, `SAVEPOINT a`,
		`INSERT INTO ev SELECT '2026-01-21 05:00+00', 'FR', 'web', 940100 + i, 3 FROM generate_series(1, 40) i`, `ROLLBACK TO a`} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	txDirect := connectSimple(t, direct.Config().ConnString())
	for _, s := range []string{`BEGIN`, `INSERT INTO ev VALUES ('2026-01-20 05:00+00', 'FR', 'web', 940001, 3)`} {
		if _, err := txDirect.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	insertsCheck(t, "in a transaction, after a savepoint rolled back", tx, txDirect, 0)
	for _, c := range []*noticeConn{tx, txDirect} {
		if _, err := c.Exec(ctx, `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
	}
	insertsCheck(t, "the transaction rolled back", nc, direct, 0)
	if n := insertedRows(t, conn); n != 552 {
		t.Fatalf("%d inserted rows kept after the rollback, want 552", n)
	}

	// Rows inserted, then deleted: their bucket is logged and read whole.
	mustExec(t, conn, `INSERT INTO ev SELECT '2026-01-25 05:00+00', 'BR', 'web', 950000 + i, 4 FROM generate_series(1, 30) i;
		DELETE FROM ev WHERE user_id BETWEEN 950001 AND 950010`)
	insertsCheck(t, "inserted, then some deleted", nc, direct, 1)
	// A bulk insert logs its buckets instead.
	mustExec(t, conn, `INSERT INTO ev SELECT timestamptz '2026-02-10' + (i % 86399) * interval '1 second', 'DE', 'ios', 960000 + i, 1
		FROM generate_series(1, 12000) i`)
	insertsCheck(t, "a bulk insert", nc, direct, 2)

	// A pgsketch-proxy that reads no inserted rows calls capture_check,
	// which refuses a range holding some; capture_check_inserts does not.
	var n int64
	if err := conn.QueryRow(ctx, `SELECT pgsketch.capture_check_inserts('ev_daily', '2026-01-01', '2026-02-01')`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("capture_check_inserts: %d, %v; want 1 changed bucket", n, err)
	}
	_, err := conn.Exec(ctx, `SELECT pgsketch.capture_check('ev_daily', '2026-01-01', '2026-02-01')`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55000" || !strings.Contains(pe.Message, "rows were inserted") {
		t.Fatalf("capture_check over inserted rows: %v, want SQLSTATE 55000", err)
	}
	if err := conn.QueryRow(ctx, `SELECT pgsketch.capture_check('ev_daily', '2026-03-01', '2026-04-01')`).Scan(&n); err != nil {
		t.Fatalf("capture_check over a range without inserted rows: %v", err)
	}

	// One refresh rebuilds every bucket with inserted rows.
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	if n := insertedRows(t, conn); n != 0 {
		t.Fatalf("%d inserted rows left after a refresh", n)
	}
	sameAs(t, conn, "ev", "ev_daily")
	insertsCheck(t, "after a refresh", nc, direct, 0)
}

// TestInsertedRowsRace: writers insert small statements into past days
// while refreshes run back to back; once they stop, with no refresh after,
// every answer is exact for counts and sums: no row was lost, and none
// counted twice (in a rollup row a refresh built and again as an inserted
// row it did not delete). Then one refresh leaves the rollup a fresh
// build's.
func TestInsertedRowsRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn, nc, direct := insertsSource(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes, refreshes atomic.Int64
	errc := make(chan error, 8)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgx.Connect(ctx, db.DSN)
			if err != nil {
				errc <- err
				return
			}
			defer c.Close(ctx)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rows := 1 + i%7
				if _, err := c.Exec(ctx, fmt.Sprintf(`INSERT INTO ev SELECT timestamptz '2026-01-02' + ((%d * 13 + g) %% 50) * interval '1 day'
						+ g * interval '1 second', 'DE', 'web', %d + g, 1 FROM generate_series(1, %d) g`, i, 1000000*(w+1)+i*10, rows)); err != nil {
					errc <- err
					return
				}
				writes.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := pgx.Connect(ctx, db.DSN)
		if err != nil {
			errc <- err
			return
		}
		defer c.Close(ctx)
		for {
			select {
			case <-stop:
				return
			default:
			}
			opt := refresh.Options{}
			if refreshes.Load()%5 == 4 {
				opt.Full = true
			}
			if _, err := refresh.Refresh(ctx, pgsession.Conn{C: c.PgConn()}, "ev_daily", opt); err != nil {
				errc <- err
				return
			}
			refreshes.Add(1)
		}
	}()
	time.Sleep(15 * time.Second)
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	t.Logf("%d insert statements, %d refreshes; %d inserted rows kept", writes.Load(), refreshes.Load(), insertedRows(t, conn))
	if refreshes.Load() < 3 || writes.Load() < 100 {
		t.Fatalf("too little happened to test anything: %d writes, %d refreshes", writes.Load(), refreshes.Load())
	}
	insertsCheck(t, "after the race, no refresh", nc, direct, 64)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	sameAs(t, conn, "ev", "ev_daily")
	insertsCheck(t, "after one refresh", nc, direct, 0)
}

// TestInsertedRowsDrain: what a refresh does with inserted rows, step by
// step in its transaction. A row committed before refresh_begin in a bucket
// the refresh rebuilds is deleted by refresh_finish (the read saw it); one
// committed after refresh_begin in a rebuilt bucket, which the read may or
// may not have seen, stays and its bucket is logged (read whole until the
// next refresh); one in a bucket the refresh does not rebuild stays, its
// bucket not logged.
func TestInsertedRowsDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn, _, _ := insertsSource(t)
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-12 10:00+00', 'DE', 'ios', 900001, 5)`)

	r, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	var lo *time.Time
	if _, err := r.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if err := r.QueryRow(ctx, `SELECT lo FROM pgsketch.refresh_begin('ev_daily')`).Scan(&lo); err != nil {
		t.Fatal(err)
	}
	// The refresh rebuilds from the first logged bucket on.
	if lo == nil || !lo.Equal(time.Date(2026, 1, 12, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("the refresh rebuilds from %v, want 2026-01-12", lo)
	}
	// Committed after the refresh began: into the rebuilt bucket of the
	// first row, and into a bucket before the refresh's range.
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-12 11:00+00', 'FR', 'ios', 900002, 5)`)
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-05 11:00+00', 'FR', 'ios', 900003, 5)`)
	if _, err := r.Exec(ctx, `SELECT * FROM pgsketch.refresh_finish('ev_daily', $1, false)`, lo); err != nil {
		t.Fatal(err)
	}
	rows, err := r.Query(ctx, `SELECT user_id FROM pgsketch.inserts_ev_daily ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(kept) != "[900002 900003]" {
		t.Fatalf("inserted rows kept: %v, want [900002 900003]", kept)
	}
	rows, err = r.Query(ctx, `SELECT DISTINCT bucket::date::text FROM pgsketch.rollup_dirty WHERE rollup = 'ev_daily' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	logged, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(logged) != "[2026-01-12]" {
		t.Fatalf("buckets logged: %v, want [2026-01-12]", logged)
	}
	if _, err := r.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
}

// TestInsertedRowsNeverBlockWrites: after the source's columns change
// under the capture function (a modifier widened, a type changed), small
// inserts still succeed: a row whose columns keep their types is copied
// (the table's types have no modifiers: it fits), one whose types changed
// is not; the rollup is answered exactly until a refresh, which makes the
// table anew.
func TestInsertedRowsNeverBlockWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn, nc, direct := insertsSource(t)
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-12 10:00+00', 'DE', 'ios', 900001, 5)`)
	for i, step := range []struct {
		ddl  string
		kept int
	}{
		{`ALTER TABLE ev ALTER COLUMN amount TYPE numeric(16,4)`, 2},
		{`ALTER TABLE ev ALTER COLUMN user_id TYPE text`, 2},
	} {
		ddl := step.ddl
		mustExec(t, conn, ddl)
		mustExec(t, conn, fmt.Sprintf(`INSERT INTO ev VALUES ('2026-01-13 10:00+00', 'DE', 'ios', '%d', 123456789012.3456)`, 910000+i))
		if n := insertedRows(t, conn); n != step.kept {
			t.Fatalf("after %s: %d inserted rows kept, want %d", ddl, n, step.kept)
		}
		got, err := nc.query(ctx, insertsQueries[0])
		if err != nil {
			t.Fatal(err)
		}
		exact, err := direct.query(ctx, insertsQueries[0])
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.rows) != fmt.Sprint(exact.rows) || len(got.notices) != 1 || !strings.Contains(got.notices[0], "answered exactly") {
			t.Fatalf("after %s: %v (notices %q), want PostgreSQL's %v", ddl, got.rows, got.notices, exact.rows)
		}
	}
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-14 10:00+00', 'DE', 'ios', 'u-920000', 5)`)
	if n := insertedRows(t, conn); n != 1 {
		t.Fatalf("after the refresh: %d inserted rows kept, want 1", n)
	}
	var typ string
	if err := conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = 'pgsketch.inserts_ev_daily'::regclass AND attname = 'user_id'`).Scan(&typ); err != nil || typ != "text" {
		t.Fatalf("the table's user_id: %q, %v; want text", typ, err)
	}
	insertsCheck(t, "after the refresh", nc, direct, 0)
}

// insertsIndexes lists the indexes of rollup ev_daily's table of inserted
// rows, each as its OID and definition.
func insertsIndexes(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), `SELECT string_agg(i.indexrelid::text || ' ' || pg_get_indexdef(i.indexrelid), '; ')
		FROM pg_index i WHERE i.indrelid = 'pgsketch.inserts_ev_daily'::regclass`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestInsertedRowsMigration: upgrading to catalog version 18 with a
// rollup in place gives it its table of inserted rows and keeps it
// answered (no full rebuild: the capture's record follows the new
// function); version 19 indexes the table by bucket and transaction, and a
// refresh leaves that index be; downgrading with inserted rows pending logs
// their buckets, so that version 17 reads them from the source, and drops
// the table.
func TestInsertedRowsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn, m := migratedDB(t)
	migrateDownTo(t, m, 17)
	mustExec(t, conn, `CREATE TABLE ev (created_at timestamptz NOT NULL, country text, device text, user_id bigint, amount numeric(12,2));
		INSERT INTO ev SELECT timestamptz '2026-01-01' + (i % 28) * interval '1 day', 'DE', 'web', i, 1 FROM generate_series(1, 2800) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})

	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	var why *string
	if err := conn.QueryRow(ctx, `SELECT capture_broken FROM pgsketch.rollups WHERE name = 'ev_daily'`).Scan(&why); err != nil || why != nil {
		t.Fatalf("after the upgrade: capture_broken %v (%v), want none", why, err)
	}
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-03 10:00+00', 'FR', 'ios', 5001, 2), ('2026-01-09 10:00+00', 'FR', 'ios', 5002, 2)`)
	if n := insertedRows(t, conn); n != 2 {
		t.Fatalf("after the upgrade: %d inserted rows kept, want 2", n)
	}
	indexes := insertsIndexes(t, conn)
	if !strings.HasSuffix(indexes, "USING btree (pgsketch_bucket, pgsketch_xid)") || strings.Contains(indexes, ";") {
		t.Fatalf("after the upgrade: the inserted rows' indexes are %q, want one on (pgsketch_bucket, pgsketch_xid)", indexes)
	}
	res := refreshRollup(t, conn, "ev_daily", refresh.Options{})
	if res.Mode != "incremental" || res.RowsRead > 400 {
		t.Fatalf("the first refresh after the upgrade: %s, %d rows read; want an incremental one of three days", res.Mode, res.RowsRead)
	}
	sameAs(t, conn, "ev", "ev_daily")
	if again := insertsIndexes(t, conn); again != indexes {
		t.Fatalf("a refresh made the inserted rows' index anew: %q, then %q", indexes, again)
	}
	migrateDownTo(t, m, 18)
	if indexes := insertsIndexes(t, conn); !strings.HasSuffix(indexes, "USING btree (pgsketch_bucket)") || strings.Contains(indexes, ";") {
		t.Fatalf("down to version 18: the inserted rows' indexes are %q, want one on (pgsketch_bucket)", indexes)
	}

	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-12 10:00+00', 'FR', 'ios', 5003, 2)`)
	if err := m.Down(1); err != nil {
		t.Fatal(err)
	}
	var logged []string
	rows, err := conn.Query(ctx, `SELECT DISTINCT bucket::date::text FROM pgsketch.rollup_dirty WHERE rollup = 'ev_daily' ORDER BY 1`)
	if err == nil {
		logged, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || fmt.Sprint(logged) != "[2026-01-12]" {
		t.Fatalf("after the downgrade: buckets logged %v (%v), want [2026-01-12]", logged, err)
	}
	var left *string
	if err := conn.QueryRow(ctx, `SELECT to_regclass('pgsketch.inserts_ev_daily')::text`).Scan(&left); err != nil || left != nil {
		t.Fatalf("after the downgrade: the table of inserted rows %v (%v), want none", left, err)
	}
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-13 10:00+00', 'FR', 'ios', 5004, 2)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	sameAs(t, conn, "ev", "ev_daily")
}

// TestInsertedRowsEveryPlanKind: for a statement of every kind of plan,
// the answer over a rollup whose buckets gained rows by small inserts
// (answered from the rollup, no bucket read again from the source) is the
// answer after a refresh that rebuilt them: a sketch merged with the
// inserted rows' values is the sketch of all the rows. (A first-seen
// count reads no inserted rows: it is answered exactly until the refresh,
// as TestFirstSeen shows; it is left out here.)
func TestInsertedRowsEveryPlanKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := eventsDB(t, 60_000, 60)
	mustExec(t, conn, `CREATE INDEX ON events (created_at);
		CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL, region text);
		INSERT INTO countries SELECT DISTINCT country, 'name of ' || country, CASE WHEN country < 'I' THEN 'A' ELSE 'B' END FROM events WHERE country IS NOT NULL`)
	createRollup(t, conn, "pk", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}',
		theta_columns => '{user_id}', topk_columns => '{user_id}', sum_columns => '{amount}'`)
	refreshRollup(t, conn, "pk", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	nc := connectSimple(t, p.URL(db.DSN))
	mustExec(t, nc.Conn, "SET pgsketch.topk = approx")
	kinds := slices.DeleteFunc(slices.Clone(planKindQueries), func(k struct{ kind, sql string }) bool { return k.kind == "first seen" })
	answers := func(step string) []string {
		t.Helper()
		var out []string
		for _, k := range kinds {
			got, err := nc.query(ctx, k.sql)
			if err != nil || !fromRollup(got.notices) {
				t.Fatalf("%s: %s: not answered from the rollup: %v %v", step, k.kind, err, got)
			}
			for _, n := range got.notices {
				if changedRE.MatchString(n) {
					t.Fatalf("%s: %s: buckets read again from the source: %q", step, k.kind, n)
				}
			}
			out = append(out, fmt.Sprint(got.rows))
		}
		return out
	}
	before := answers("clean")
	// New users and old ones, on January and February days, in statements
	// of one to 40 rows; a heavy user for the top ten.
	for i := range 30 {
		mustExec(t, conn, fmt.Sprintf(`INSERT INTO events (id, created_at, user_id, country, device, amount)
			SELECT (SELECT max(id) FROM events) + g, timestamptz '2026-01-03' + (%d * 2 + g %% 3) * interval '1 day' + g * interval '1 minute',
			       CASE WHEN g %% 2 = 0 THEN 500000 + %d * 100 + g ELSE 7 END, (ARRAY['DE','US','FR'])[1 + g %% 3], 'web', 1.25
			  FROM generate_series(1, %d) g`, i%25, i, 1+i%40))
	}
	with := answers("with inserted rows")
	refreshRollup(t, conn, "pk", refresh.Options{})
	after := answers("refreshed")
	for i, k := range kinds {
		if with[i] != after[i] {
			t.Errorf("%s: with inserted rows %s, after the refresh %s", k.kind, with[i], after[i])
		}
		if with[i] == before[i] {
			t.Errorf("%s: the inserted rows changed nothing (%s): the case tests nothing", k.kind, with[i])
		}
	}
}

// cachedInserts is what an answer's NOTICE says when the inserted rows
// read before came from the proxy's cache, and only the rows inserted
// since were read.
const cachedInserts = "rollup rows from the proxy's cache, and the inserted rows of earlier reads"

// TestInsertedRowsCache: the proxy keeps the inserted rows it read with the
// rollup rows it keeps, and the next answer reads only the rows inserted
// since, those of transactions the kept read's snapshot did not see. Every
// answer stays exact for counts and sums where that could go wrong: a
// transaction running across the kept read commits after it; a session
// answers inside a transaction that inserted rows it then rolls back; a
// repeatable-read transaction asks again after another session's answer
// kept a newer snapshot; the change log lists a bucket anew; reads since
// pile up past the bound and are read whole again; a refresh.
func TestInsertedRowsCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn, nc, direct := insertsSource(t)
	q := insertsQueries[0]
	ask := func(step string, c, exact *noticeConn, delta bool) *answer {
		t.Helper()
		want, err := exact.query(ctx, q)
		if err != nil {
			t.Fatalf("%s: direct: %v", step, err)
		}
		got, err := c.query(ctx, q)
		if err != nil {
			t.Fatalf("%s: proxy: %v", step, err)
		}
		if why := rollupAnswerError(got, want, "approximated from rollup ev_daily"); why != "" {
			t.Fatalf("%s: %s", step, why)
		}
		if strings.Contains(got.notices[0], cachedInserts) != delta {
			t.Fatalf("%s: the inserted rows read since the cached read: %v, want %v; notice %q", step, !delta, delta, got.notices[0])
		}
		return got
	}
	insert := func(c *pgx.Conn, user int) {
		t.Helper()
		if _, err := c.Exec(ctx, fmt.Sprintf(`INSERT INTO ev VALUES ('2026-01-1%d 10:00+00', 'FR', 'web', %d, 2.5)`, user%10, user)); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-12 10:00+00', 'DE', 'ios', 900001, 5)`)
	ask("the first read", nc, direct, false)
	ask("the second", nc, direct, true)
	insert(conn, 900002)
	ask("a row inserted since", nc, direct, true)

	// A transaction that began before the kept read and commits after it:
	// its rows count once it commits, though its ID is older than the
	// kept snapshot's newest.
	w, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if _, err := w.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	insert(w, 900003)
	ask("a transaction running", nc, direct, true)
	insert(conn, 900004)
	ask("another row committed meanwhile", nc, direct, true)
	if _, err := w.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	ask("the transaction committed", nc, direct, true)

	// A session's answer inside a transaction that inserted rows sees them,
	// and keeps nothing of them: after its rollback, no answer has them.
	tx, txDirect := connectSimple(t, nc.Config().ConnString()), connectSimple(t, direct.Config().ConnString())
	for _, c := range []*noticeConn{tx, txDirect} {
		if _, err := c.Exec(ctx, `BEGIN`); err != nil {
			t.Fatal(err)
		}
		insert(c.Conn, 900005)
	}
	ask("in a transaction that inserted a row", tx, txDirect, false)
	for _, c := range []*noticeConn{tx, txDirect} {
		if _, err := c.Exec(ctx, `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
	}
	ask("after its rollback", nc, direct, true)

	// A repeatable-read transaction keeps its snapshot: another session's
	// answer, which kept the rows inserted since, does not change its own.
	rr := connectSimple(t, nc.Config().ConnString())
	if _, err := rr.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ`); err != nil {
		t.Fatal(err)
	}
	before, err := rr.query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	insert(conn, 900006)
	ask("a row inserted after the repeatable-read snapshot", nc, direct, true)
	again, err := rr.query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(again.rows) != fmt.Sprint(before.rows) {
		t.Fatalf("a repeatable-read transaction's answer changed: %q, then %q; notice %q", before.rows, again.rows, again.notices)
	}
	if _, err := rr.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}

	// A bucket the change log lists anew is read whole: the kept rows,
	// which hold its inserted rows, are not used.
	mustExec(t, conn, `UPDATE ev SET amount = amount + 1 WHERE user_id = 900002`)
	ask("a bucket logged", nc, direct, false)
	ask("again", nc, direct, true)

	// Reads of the rows since pile up one row per group and answer; past
	// the bound, the next answer reads them all again.
	whole := 0
	for i := range 300 {
		insert(conn, 910000+i)
		want, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if why := rollupAnswerError(got, want, "approximated from rollup ev_daily"); why != "" {
			t.Fatalf("insert %d: %s", i, why)
		}
		if !strings.Contains(got.notices[0], cachedInserts) {
			whole++
		}
	}
	if whole == 0 || whole > 3 {
		t.Fatalf("of 300 answers, %d read the inserted rows whole, want 1 to 3 (past the bound)", whole)
	}

	// A refresh empties the inserted rows of the buckets it rebuilt: the
	// next answer reads them all (none), the one after that again none.
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	ask("after a refresh", nc, direct, false)
	ask("and again", nc, direct, false)
	insert(conn, 920000)
	ask("a row inserted after the refresh", nc, direct, false)
	ask("and again", nc, direct, true)
}

// TestInsertedRowsDrainWhileLocked: a refresh that waits for the rollup's
// lock (another refresh holds it) after it listed the buckets of the
// inserted rows, while a row is inserted into a bucket between two it
// lists. The refresh rebuilds the listed buckets only; the row, which its
// listing did not see, must not be deleted by refresh_finish as one its
// read saw (its bucket is not rebuilt: no rollup row would hold it). It
// stays, its bucket logged.
func TestInsertedRowsDrainWhileLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn, nc, direct := insertsSource(t)
	// Logged buckets before the refresh's own range (from the watermark's
	// late window on): rebuilt each on its own.
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-05 10:00+00', 'DE', 'ios', 900001, 5);
		INSERT INTO ev VALUES ('2026-01-20 10:00+00', 'DE', 'ios', 900002, 5)`)
	holder, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(pgsketch.lock_class(), hashtext('ev_daily'))`); err != nil {
		t.Fatal(err)
	}
	r, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	var rpid int
	if err := r.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&rpid); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	type begun struct {
		lo  *time.Time
		err error
	}
	done := make(chan begun, 1)
	go func() {
		var b begun
		b.err = r.QueryRow(ctx, `SELECT lo FROM pgsketch.refresh_begin('ev_daily')`).Scan(&b.lo)
		done <- b
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var waiting bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory')`, rpid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("refresh_begin never waited for the rollup's lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Between the two listed buckets, committed while the refresh waits.
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-10 10:00+00', 'FR', 'ios', 900003, 7)`)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(pgsketch.lock_class(), hashtext('ev_daily'))`); err != nil {
		t.Fatal(err)
	}
	b := <-done
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.lo == nil || !b.lo.Equal(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("the refresh rebuilds from %v, want 2026-01-05 (its oldest logged bucket)", b.lo)
	}
	if _, err := r.Exec(ctx, `SELECT * FROM pgsketch.refresh_finish('ev_daily', $1, false)`, b.lo); err != nil {
		t.Fatal(err)
	}
	// In the refresh's transaction (it wrote no rollup rows, and is rolled
	// back): the row of 2026-01-10, which no rebuilt bucket read, is kept
	// and its bucket logged.
	var kept int
	var logged bool
	if err := r.QueryRow(ctx, `SELECT (SELECT count(*) FROM pgsketch.inserts_ev_daily WHERE user_id = 900003),
		EXISTS (SELECT FROM pgsketch.rollup_dirty WHERE rollup = 'ev_daily' AND bucket = '2026-01-10')`).Scan(&kept, &logged); err != nil {
		t.Fatal(err)
	}
	if kept != 1 || !logged {
		t.Fatalf("the row inserted while the refresh waited: %d kept (want 1, not deleted as if the refresh had read it), its bucket logged %v (want true)", kept, logged)
	}
	if _, err := r.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	insertsCheck(t, "the refresh rolled back", nc, direct, 2)
}

// TestInsertedRowsBlankPadded: a char(n) column the rollup reads (a
// dimension, a min) is a bpchar column of the table of inserted rows, not
// a "character" one, which PostgreSQL reads as char(1): with it, every
// INSERT of a value longer than one character failed while the rollup
// existed. A database whose table was made so before version 27 gets the
// column widened by the upgrade, with the rows it held kept (and padded as
// the source's values are), and back: after a downgrade the table and its
// rows stay too. (A domain in public among the columns: the comment that
// keeps the table must name it as inserts_define does, whatever the
// upgrade's search_path.)
func TestInsertedRowsBlankPadded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn, m := migratedDB(t)
	const args = `dimensions => '{code,sku}', distinct_columns => '{user_id}', min_columns => '{code}'`
	mustExec(t, conn, `CREATE DOMAIN public.sku AS text`)
	build := func(table string) {
		mustExec(t, conn, fmt.Sprintf(`CREATE TABLE %[1]s (created_at timestamptz NOT NULL, code char(4), user_id bigint, sku sku);
			INSERT INTO %[1]s SELECT timestamptz '2026-01-01' + (i %% 20) * interval '1 day', (ARRAY['ab', 'abcd', NULL])[1 + i %% 3], i, 's' || i %% 2
			  FROM generate_series(1, 600) i;
			SELECT pgsketch.create_rollup('%[1]s_daily', '%[1]s', 'created_at', %s)`, table, args))
		refreshRollup(t, conn, table+"_daily", refresh.Options{})
	}
	inserted := func(table string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM pgsketch.inserts_%s_daily`, table)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	same := func(table string) {
		t.Helper()
		res := refreshRollup(t, conn, table+"_daily", refresh.Options{})
		if res.Mode != "incremental" {
			t.Fatalf("%s: a %s refresh, want an incremental one", table, res.Mode)
		}
		mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.drop_rollup('%[1]s_ref', if_exists => true);
			SELECT pgsketch.create_rollup('%[1]s_ref', '%[1]s', 'created_at', %s)`, table, args))
		refreshRollup(t, conn, table+"_ref", refresh.Options{Full: true})
		content := func(rollup string) string {
			var s string
			if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT string_agg(r::text, E'\n' ORDER BY bucket, code, sku) FROM %s r`, rollup)).Scan(&s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		if got, want := content(table+"_daily"), content(table+"_ref"); got != want {
			t.Fatalf("rollup %s_daily differs from a full rebuild:\n%s", table, firstDiff(got, want))
		}
	}

	build("pad")
	mustExec(t, conn, `INSERT INTO pad VALUES ('2026-01-03 10:00+00', 'wxyz', 9001, 'a'), ('2026-01-04 10:00+00', 'ab', 9002, 'b')`)
	if n := inserted("pad"); n != 2 {
		t.Fatalf("%d inserted rows kept, want 2", n)
	}
	same("pad")

	// A table of inserted rows made by version 26.
	migrateDownTo(t, m, 26)
	build("old")
	mustExec(t, conn, `INSERT INTO old VALUES ('2026-01-05 10:00+00', 'x', 9003, 'a')`)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, `SET search_path = public, pg_catalog; INSERT INTO old VALUES ('2026-01-06 10:00+00', 'wxyz', 9004, 'b')`)
	if n := inserted("old"); n != 2 {
		t.Fatalf("after the upgrade: %d inserted rows kept, want 2 (the one from before it too)", n)
	}
	var unpadded int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgsketch.inserts_old_daily i JOIN old o USING (user_id)
		WHERE octet_length(i.code) <> octet_length(o.code)`).Scan(&unpadded); err != nil || unpadded != 0 {
		t.Fatalf("after the upgrade: %d inserted values of code not as the source holds them (%v)", unpadded, err)
	}
	same("old")

	// Down again: the table keeps its rows and its widened column.
	mustExec(t, conn, `INSERT INTO old VALUES ('2026-01-07 10:00+00', 'vwxy', 9005, 'c')`)
	if err := m.Down(1); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, `INSERT INTO old VALUES ('2026-01-08 10:00+00', 'uvwx', 9006, 'd')`)
	if n := inserted("old"); n != 2 {
		t.Fatalf("after the downgrade: %d inserted rows kept, want 2", n)
	}
	same("old")
}
