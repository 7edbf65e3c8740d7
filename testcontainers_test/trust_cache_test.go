package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// The tests in this file check the proxy's caches against what a session
// sees: its own uncommitted writes, a transaction rolled back, another
// session's writes not yet committed. Each cache must be keyed by what
// its contents were made of, never by something that two different
// states can share (a count of log entries, a version number).

// trustQuery is answered from rollup tv_daily over ten whole days of tv.
const trustQuery = `SELECT count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM tv
	WHERE created_at >= '2026-01-01' AND created_at < '2026-01-11'`

// trustDB is a database with table tv: ten days from 2026-01-01 of 1000,
// 2000 or 3000 rows (day 3 has 3000, day 7 1000), each of its own user, of
// amount 1 (fee 3); and rollup tv_daily by day and country of the distinct
// users, the rows and the sum of amount, refreshed.
func trustDB(t *testing.T) (*testDB, *pgx.Conn) {
	t.Helper()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE tv (created_at timestamptz NOT NULL, country text NOT NULL, user_id bigint NOT NULL,
			amount numeric(12,2) NOT NULL, fee numeric(12,2) NOT NULL);
		CREATE INDEX ON tv (created_at);
		INSERT INTO tv SELECT timestamptz '2026-01-01' + d * interval '1 day' + k * interval '20 seconds',
			(ARRAY['DE','FR','US'])[1 + k % 3], d * 10000 + k, 1, 3
		  FROM generate_series(0, 9) d, generate_series(0, 1000 * (1 + d % 3) - 1) k;
		ANALYZE tv`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('tv_daily', 'tv', 'created_at', grain => 'day',
		dimensions => '{country}', distinct_columns => '{user_id}', sum_columns => '{amount}')`)
	refreshRollup(t, conn, "tv_daily", refresh.Options{})
	return db, conn
}

// trustInsert is a committed or uncommitted write of one new user's row on
// day (2026-01-dd).
func trustInsert(day string, user int) string {
	return `INSERT INTO tv VALUES ('2026-01-` + day + ` 12:00+00', 'DE', ` + strconv.Itoa(user) + `, 1, 3)`
}

// trustCheck runs q through the proxy on c and compares it with the exact
// answer, which exact gives in the same state (c itself, with
// pgsketch.approx off for the statement, inside c's transaction; a direct
// connection otherwise): counts and sums equal, distinct counts within 5
// standard errors. The proxy must answer from rollup tv_daily; it returns
// whether the rollup rows came from the proxy's cache.
func trustCheck(t *testing.T, step string, c *noticeConn, exact func() *answer, q string) bool {
	t.Helper()
	ctx := context.Background()
	got, err := c.query(ctx, q)
	if err != nil {
		t.Fatalf("%s: proxy: %v", step, err)
	}
	want := exact()
	errs, err := compareRollupAnswer(got, want)
	if err != nil {
		t.Fatalf("%s: %v\nproxy %v, exact %v\nnotices %q", step, err, got.rows, want.rows, got.notices)
	}
	for _, e := range errs {
		if e > 5 {
			t.Fatalf("%s: a distinct count %.1f standard errors off\nproxy %v, exact %v\nnotices %q", step, e, got.rows, want.rows, got.notices)
		}
	}
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], "approximated from rollup tv_daily") {
		t.Fatalf("%s: not answered from the rollup: notices %q", step, got.notices)
	}
	t.Logf("%s: %v (exact %v): %s", step, got.rows, want.rows, got.notices[0])
	return strings.Contains(got.notices[0], "; rollup rows from the proxy's cache")
}

// directExact is the exact answer of q on a connection that is not the
// proxy's.
func directExact(t *testing.T, direct *noticeConn, q string) func() *answer {
	return func() *answer {
		t.Helper()
		a, err := direct.query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
}

// inTxExact is the exact answer of q in c's transaction: PostgreSQL's,
// with pgsketch.approx off for the statement.
func inTxExact(t *testing.T, c *noticeConn, q string) func() *answer {
	return func() *answer {
		t.Helper()
		mustExec(t, c.Conn, "SET LOCAL pgsketch.approx = off")
		a, err := c.query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.notices) != 0 {
			t.Fatalf("with pgsketch.approx off, the proxy answered: %q", a.notices)
		}
		mustExec(t, c.Conn, "SET LOCAL pgsketch.approx = on")
		return a
	}
}

// TestCacheChangeLogRolledBack: a session writes day 3 in a transaction
// and queries through the proxy (the cache then holds the rollup rows but
// day 3's, which the log lists), rolls back; a committed write to day 7
// follows. The log then lists as many entries as when the cache was
// filled, but not the same bucket: the answer must read day 3 from the
// rollup again and day 7 from the base table only.
func TestCacheChangeLogRolledBack(t *testing.T) {
	t.Parallel()
	db, conn := trustDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	c := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	ctx := context.Background()

	trustCheck(t, "clean", c, directExact(t, direct, trustQuery), trustQuery)
	if !trustCheck(t, "clean, again", c, directExact(t, direct, trustQuery), trustQuery) {
		t.Fatal("the repeated query did not take its rollup rows from the cache")
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c.Conn, trustInsert("03", 200001))
	trustCheck(t, "inside the transaction that wrote day 3", c, inTxExact(t, c, trustQuery), trustQuery)
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, trustInsert("07", 200002))
	trustCheck(t, "day 3 rolled back, day 7 written", c, directExact(t, direct, trustQuery), trustQuery)
	trustCheck(t, "day 3 rolled back, day 7 written, again", c, directExact(t, direct, trustQuery), trustQuery)
	// In a savepoint rolled back inside a transaction that goes on.
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c.Conn, "SAVEPOINT s; "+trustInsert("04", 200003))
	trustCheck(t, "inside the savepoint that wrote day 4", c, inTxExact(t, c, trustQuery), trustQuery)
	mustExec(t, c.Conn, "ROLLBACK TO SAVEPOINT s; "+trustInsert("08", 200004))
	trustCheck(t, "day 4 rolled back to the savepoint, day 8 written", c, inTxExact(t, c, trustQuery), trustQuery)
	if _, err := c.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	trustCheck(t, "after the commit", c, directExact(t, direct, trustQuery), trustQuery)
}

// TestCacheChangeLogUncommitted: a session writes day 3 in a transaction
// it keeps open and queries through the proxy, which caches the rollup
// rows but day 3's; a committed write to day 7 follows. Another session
// through the proxy, which does not see the open transaction's log entry,
// sees as many entries as the cache was filled with, but not the same
// bucket: its answer must read day 3 from the rollup and day 7 from the
// base table only.
func TestCacheChangeLogUncommitted(t *testing.T) {
	t.Parallel()
	db, conn := trustDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	writer, reader := connectSimple(t, p.URL(db.DSN)), connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	ctx := context.Background()

	trustCheck(t, "clean", reader, directExact(t, direct, trustQuery), trustQuery)
	if _, err := writer.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, writer.Conn, trustInsert("03", 200001))
	trustCheck(t, "the writer, inside its transaction", writer, inTxExact(t, writer, trustQuery), trustQuery)
	mustExec(t, conn, trustInsert("07", 200002))
	trustCheck(t, "another session, day 3 uncommitted, day 7 committed", reader, directExact(t, direct, trustQuery), trustQuery)
	trustCheck(t, "the writer, inside its transaction, after day 7", writer, inTxExact(t, writer, trustQuery), trustQuery)
	if _, err := writer.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	trustCheck(t, "another session, after the commit", reader, directExact(t, direct, trustQuery), trustQuery)
	if !trustCheck(t, "another session, after the commit, again", reader, directExact(t, direct, trustQuery), trustQuery) {
		t.Fatal("the repeated query did not take its rollup rows from the cache")
	}
}

// rollupTable is the rollup table of rollup name, quoted.
func rollupTable(t *testing.T, conn *pgx.Conn, name string) string {
	t.Helper()
	var table string
	if err := conn.QueryRow(context.Background(), `SELECT format('%I.%I', rollup_schema, rollup_table)
		FROM pgsketch.rollup_defs WHERE name = $1`, name).Scan(&table); err != nil {
		t.Fatal(err)
	}
	return table
}

// rollupVersion is rollup name's version as c sees it.
func rollupVersion(t *testing.T, c *pgx.Conn, name string) int64 {
	t.Helper()
	var v int64
	if err := c.QueryRow(context.Background(), `SELECT version FROM pgsketch.rollup_defs WHERE name = $1`, name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCacheRefreshRolledBack: a transaction through the proxy rewrites
// the rollup as a refresh would (day 5's rows gone, the version bumped)
// and queries, which caches its rollup rows; it rolls back. A refresh then
// commits the same version number. The cached rows are the rolled-back
// transaction's: the answer must not take them (the cache's token holds
// the rollup_defs row's xmin, not only the version).
func TestCacheRefreshRolledBack(t *testing.T) {
	t.Parallel()
	db, conn := trustDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	c := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	ctx := context.Background()

	trustCheck(t, "clean", c, directExact(t, direct, trustQuery), trustQuery)
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c.Conn, "DELETE FROM "+rollupTable(t, conn, "tv_daily")+` WHERE bucket = '2026-01-05';
		UPDATE pgsketch.rollup_defs SET version = version + 1 WHERE name = 'tv_daily'`)
	bumped := rollupVersion(t, c.Conn, "tv_daily")
	got, err := c.query(ctx, trustQuery)
	if err != nil {
		t.Fatal(err)
	}
	// Day 5 has 2000 rows: the transaction's rollup lacks them.
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup tv_daily") || got.rows[0][1] != "17000" {
		t.Fatalf("inside the transaction: %v, notices %q; want 17000 rows from rollup tv_daily", got.rows, got.notices)
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	refreshRollup(t, conn, "tv_daily", refresh.Options{})
	if v := rollupVersion(t, conn, "tv_daily"); v != bumped {
		t.Fatalf("the refresh made version %d, the rolled-back transaction %d: the test shows nothing", v, bumped)
	}
	trustCheck(t, "rolled back, then refreshed to the same version", c, directExact(t, direct, trustQuery), trustQuery)
	if !trustCheck(t, "rolled back, then refreshed to the same version, again", c, directExact(t, direct, trustQuery), trustQuery) {
		t.Fatal("the repeated query did not take its rollup rows from the cache")
	}
}

// TestCatalogChangeRolledBack: a transaction through the proxy changes the
// catalog (rollup tv_daily's sum of amount declared a max, the version
// bumped) and queries max(amount), which the proxy answers from the rollup
// with the catalog snapshot it read inside the transaction; it rolls back.
// A refresh then commits the same version number. That snapshot is the
// rolled-back transaction's: max(amount) must now be PostgreSQL's (the
// snapshot cache is keyed by the catalog rows' xmins, not their versions),
// and the plan made from the snapshot must not be reused.
func TestCatalogChangeRolledBack(t *testing.T) {
	t.Parallel()
	db, conn := trustDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	c := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	ctx := context.Background()
	const maxQuery = `SELECT count(DISTINCT user_id) AS users, max(amount) AS top FROM tv
		WHERE created_at >= '2026-01-01' AND created_at < '2026-01-11'`

	trustCheck(t, "clean", c, directExact(t, direct, trustQuery), trustQuery)
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c.Conn, `UPDATE pgsketch.rollup_measures SET kind = 'max' WHERE rollup = 'tv_daily' AND kind = 'sum';
		UPDATE pgsketch.rollup_defs SET version = version + 1 WHERE name = 'tv_daily'`)
	bumped := rollupVersion(t, c.Conn, "tv_daily")
	got, err := c.query(ctx, maxQuery)
	if err != nil {
		t.Fatal(err)
	}
	// The largest sum of a day and country is 1000.00 (day 3's).
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup tv_daily") || got.rows[0][1] != "1000.00" {
		t.Fatalf("inside the transaction: %v, notices %q; want the largest sum (1000.00) from rollup tv_daily", got.rows, got.notices)
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	refreshRollup(t, conn, "tv_daily", refresh.Options{})
	if v := rollupVersion(t, conn, "tv_daily"); v != bumped {
		t.Fatalf("the refresh made version %d, the rolled-back transaction %d: the test shows nothing", v, bumped)
	}
	for _, pass := range []string{"first", "again"} {
		got, err := c.query(ctx, maxQuery)
		if err != nil {
			t.Fatal(err)
		}
		want, err := direct.query(ctx, maxQuery)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameAnswer(got, want); err != nil {
			t.Fatalf("max(amount) after the rollback and a refresh (%s): %v", pass, err)
		}
	}
	trustCheck(t, "sum(amount) after the rollback and a refresh", c, directExact(t, direct, trustQuery), trustQuery)
}

// TestCacheRoleChange: with the default search_path ("$user", public), a
// role whose own schema holds a table tv reads that table, not public.tv,
// through the proxy after SET ROLE on a session whose earlier answers
// filled the caches (plan, catalog snapshot, rollup rows) for public.tv;
// public.tv, named as such, is answered for the role from the rollup; and
// RESET ROLE gets the rollup's answer for tv again.
func TestCacheRoleChange(t *testing.T) {
	t.Parallel()
	db, conn := trustDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	c := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	ctx := context.Background()
	role := "pgsk_trust" + strings.TrimPrefix(db.Name, server.prefix)
	mustExec(t, conn, `DROP ROLE IF EXISTS `+role+`; CREATE ROLE `+role+`;
		GRANT USAGE ON SCHEMA pgsketch TO `+role+`; GRANT SELECT ON pgsketch.rollup_defs TO `+role+`;
		GRANT EXECUTE ON FUNCTION pgsketch.catalog() TO `+role+`;
		GRANT SELECT ON tv, `+rollupTable(t, conn, "tv_daily")+`, pgsketch.inserts_tv_daily TO `+role+`;
		GRANT USAGE ON SCHEMA `+strings.Split(rollupTable(t, conn, "tv_daily"), ".")[0]+` TO `+role+`;
		CREATE SCHEMA `+role+` AUTHORIZATION `+role+`;
		CREATE TABLE `+role+`.tv (LIKE public.tv); ALTER TABLE `+role+`.tv OWNER TO `+role+`;
		INSERT INTO `+role+`.tv SELECT * FROM public.tv WHERE user_id % 7 = 0`)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), db.DSN)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), `DROP OWNED BY `+role+`; DROP ROLE `+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	qualified := strings.Replace(trustQuery, "FROM tv", "FROM public.tv", 1)

	trustCheck(t, "tv", c, directExact(t, direct, trustQuery), trustQuery)
	trustCheck(t, "tv, again", c, directExact(t, direct, trustQuery), trustQuery)
	trustCheck(t, "public.tv", c, directExact(t, direct, qualified), qualified)
	mustExec(t, c.Conn, "SET ROLE "+role)
	got, err := c.query(ctx, trustQuery)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, direct.Conn, "SET ROLE "+role)
	want, err := direct.query(ctx, trustQuery)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, direct.Conn, "RESET ROLE")
	if err := sameAnswer(got, want); err != nil {
		t.Fatalf("tv as %s: %v", role, err)
	}
	trustCheck(t, "public.tv as "+role, c, directExact(t, direct, qualified), qualified)
	mustExec(t, c.Conn, "RESET ROLE")
	if !trustCheck(t, "tv after RESET ROLE", c, directExact(t, direct, trustQuery), trustQuery) {
		t.Fatal("the repeated query did not take its rollup rows from the cache")
	}
}

// TestGuardInFetch: the fetch itself checks that the statement's
// unqualified table is the rollup's source on the session's search_path.
// With a table of that name in an earlier schema, the statement is
// PostgreSQL's, silently, in the simple and the extended protocol, outside
// and inside a transaction block (which goes on); moving the schema out of
// the path again gets the rollup's answer.
func TestGuardInFetch(t *testing.T) {
	t.Parallel()
	db, conn := trustDB(t)
	mustExec(t, conn, `CREATE SCHEMA shadow; CREATE TABLE shadow.tv (LIKE public.tv);
		INSERT INTO shadow.tv SELECT * FROM public.tv WHERE user_id % 5 = 0`)
	p := startProxy(t, server.adminURL, "--approx", "on")
	direct := connectSimple(t, db.DSN)
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		c := connectMode(t, p.URL(db.DSN), mode)
		trustCheck(t, fmt.Sprintf("%v: public", mode), c, directExact(t, direct, trustQuery), trustQuery)
		mustExec(t, direct.Conn, "SET search_path = shadow, public")
		want := directExact(t, direct, trustQuery)()
		for _, block := range []bool{false, true} {
			mustExec(t, c.Conn, "SET search_path = shadow, public")
			if block {
				mustExec(t, c.Conn, "BEGIN")
			}
			got, err := c.query(ctx, trustQuery)
			if err != nil {
				t.Fatalf("%v, block %v: %v", mode, block, err)
			}
			if err := sameAnswer(got, want); err != nil {
				t.Fatalf("%v, block %v: shadow.tv: %v", mode, block, err)
			}
			if len(got.notices) != 0 {
				t.Errorf("%v, block %v: notices %q, want none", mode, block, got.notices)
			}
			if block {
				var one int
				if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
					t.Fatalf("%v: the transaction after the statement: %v", mode, err)
				}
				mustExec(t, c.Conn, "COMMIT")
			}
		}
		mustExec(t, direct.Conn, "RESET search_path")
		mustExec(t, c.Conn, "RESET search_path")
		trustCheck(t, fmt.Sprintf("%v: public again", mode), c, directExact(t, direct, trustQuery), trustQuery)
	}
}

// TestViewChangedBetweenStatements: a statement is planned in the view its
// session's last statement read (settings, role, catalog) and that view is
// confirmed in the round trip of the statement's first upstream read. Each
// change of the view between two statements is seen by the second, in the
// simple and the extended protocol: pgsketch.approx turned off and on, the
// session's TimeZone, the role, and the rollup dropped by another session.
func TestViewChangedBetweenStatements(t *testing.T) {
	t.Parallel()
	db, conn := trustDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	direct := connectSimple(t, db.DSN)
	ctx := context.Background()
	role := "pgsk_view" + strings.TrimPrefix(db.Name, server.prefix)
	mustExec(t, conn, `DROP ROLE IF EXISTS `+role+`; CREATE ROLE `+role+`;
		GRANT USAGE ON SCHEMA pgsketch TO `+role+`; GRANT SELECT ON pgsketch.rollup_defs TO `+role+`;
		GRANT EXECUTE ON FUNCTION pgsketch.catalog() TO `+role+`; GRANT SELECT ON tv TO `+role)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), db.DSN)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), `DROP OWNED BY `+role+`; DROP ROLE `+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	exactOnly := func(step string, c *noticeConn, q string, set ...string) {
		t.Helper()
		got, err := c.query(ctx, q)
		if err != nil {
			t.Fatalf("%s: proxy: %v", step, err)
		}
		for _, s := range set {
			mustExec(t, direct.Conn, s)
		}
		want, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, direct.Conn, "RESET ALL")
		if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
			t.Fatalf("%s: %v, exact %v", step, got.rows, want.rows)
		}
		for _, n := range got.notices {
			if strings.Contains(n, "approximated from rollup") {
				t.Fatalf("%s: answered from the rollup: %q", step, got.notices)
			}
		}
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		c := connectMode(t, p.URL(db.DSN), mode)
		step := func(s string) string { return fmt.Sprintf("%v: %s", mode, s) }
		trustCheck(t, step("first"), c, directExact(t, direct, trustQuery), trustQuery)
		trustCheck(t, step("again"), c, directExact(t, direct, trustQuery), trustQuery)
		mustExec(t, c.Conn, "SET pgsketch.approx = off")
		exactOnly(step("approx off"), c, trustQuery)
		mustExec(t, c.Conn, "SET pgsketch.approx = on")
		trustCheck(t, step("approx on again"), c, directExact(t, direct, trustQuery), trustQuery)
		mustExec(t, c.Conn, "SET TimeZone = 'Asia/Kolkata'")
		// Midnight in Kolkata is 18:30 UTC: the days are not the rollup's.
		got, err := c.query(ctx, trustQuery)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, direct.Conn, "SET TimeZone = 'Asia/Kolkata'")
		want, err := direct.query(ctx, trustQuery)
		mustExec(t, direct.Conn, "RESET TimeZone")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compareRollupAnswer(got, want); err != nil {
			t.Fatalf("%s: %v: %v, exact %v (%q)", step("TimeZone Asia/Kolkata"), err, got.rows, want.rows, got.notices)
		}
		mustExec(t, c.Conn, "RESET TimeZone")
		trustCheck(t, step("TimeZone reset"), c, directExact(t, direct, trustQuery), trustQuery)
		mustExec(t, c.Conn, "SET ROLE "+role)
		// The role may read tv but not the rollup table: PostgreSQL's
		// answer, after a NOTICE saying the rollup was not used.
		exactOnly(step("as "+role), c, trustQuery)
		mustExec(t, c.Conn, "RESET ROLE")
		trustCheck(t, step("role reset"), c, directExact(t, direct, trustQuery), trustQuery)
	}
	c := connectSimple(t, p.URL(db.DSN))
	trustCheck(t, "before the drop", c, directExact(t, direct, trustQuery), trustQuery)
	mustExec(t, conn, `SELECT pgsketch.drop_rollup('tv_daily')`)
	exactOnly("rollup dropped by another session", c, trustQuery)
}

// TestCacheTemporarySchema: PostgreSQL looks type names up in a session's
// schema of temporary objects before pg_catalog, and the fetch names types
// (timestamptz, text, date) unqualified, so in a session with temporary
// objects it may mean other types than in the rest: a temporary text with
// an implicit cast could make the fetch take a changed token for the
// cached one, and what it read would then be kept under the new token for
// every session of the role. Such a session shares no cached rows, either
// way; the others go on sharing theirs.
func TestCacheTemporarySchema(t *testing.T) {
	t.Parallel()
	db, _ := trustDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	direct := connectSimple(t, db.DSN)
	exact := directExact(t, direct, trustQuery)
	a, b, c := connectSimple(t, p.URL(db.DSN)), connectSimple(t, p.URL(db.DSN)), connectSimple(t, p.URL(db.DSN))
	if trustCheck(t, "a first session", a, exact, trustQuery) {
		t.Fatal("the first answer took its rollup rows from the cache")
	}
	mustExec(t, b.Conn, `CREATE TEMPORARY TABLE scratch (x int)`)
	if trustCheck(t, "a session with a temporary table", b, exact, trustQuery) {
		t.Fatal("a session with temporary objects took the rollup rows another session read from the cache")
	}
	if !trustCheck(t, "the same session again", b, exact, trustQuery) {
		t.Fatal("a session with temporary objects did not keep its own rollup rows")
	}
	if !trustCheck(t, "a third session", c, exact, trustQuery) {
		t.Fatal("a session without temporary objects did not take the first session's rollup rows from the cache")
	}
}
