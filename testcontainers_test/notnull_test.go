package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// TestCountOfNotNullColumn: a count of a column the rollup does not read
// but the table declares NOT NULL (Cube's count of a primary key) is the
// row count, answered from the rollup in both protocols, exact. Once the
// declaration is dropped (and a NULL inserted, which the change log holds
// for its bucket only) every such statement is answered by PostgreSQL,
// with a NOTICE saying why, before any refresh and before the proxy reads
// the catalog anew; so is one in a transaction that dropped it and rolls
// back afterwards.
func TestCountOfNotNullColumn(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 100_000, 30)
	createRollup(t, conn, "daily", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}'`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	queries := []string{
		`SELECT "events".country, count("events".id) AS n, count(DISTINCT "events".user_id) AS users FROM events AS "events"
		  WHERE "events".created_at >= '2026-01-05' AND "events".created_at < '2026-01-20' GROUP BY 1 ORDER BY 1`,
		`SELECT device, count(amount) AS n, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`,
	}
	check := func(c [2]*noticeConn, sql, wantNotice string) {
		t.Helper()
		want, err := c[0].query(ctx, sql)
		if err != nil {
			t.Fatalf("direct: %v\n%s", err, sql)
		}
		got, err := c[1].query(ctx, sql)
		if err != nil {
			t.Fatalf("through the proxy: %v\n%s", err, sql)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], wantNotice) {
			t.Fatalf("notices %q, want one with %q\n%s", got.notices, wantNotice, sql)
		}
		if _, err := compareRollupAnswer(got, want); err != nil {
			t.Fatalf("%v\n%s\n got %q\nwant %q", err, sql, got.rows, want.rows)
		}
		if !strings.Contains(wantNotice, "from rollup") && fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
			t.Fatalf("got %q, want PostgreSQL's %q\n%s", got.rows, want.rows, sql)
		}
	}
	modes := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe}
	pairs := map[pgx.QueryExecMode][2]*noticeConn{}
	for _, mode := range modes {
		pairs[mode] = [2]*noticeConn{connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)}
		for _, sql := range queries {
			check(pairs[mode], sql, "from rollup daily (standard error 0.81%)")
		}
	}

	// Dropped in a transaction that rolls back: exact inside, answered after.
	simple := pairs[pgx.QueryExecModeSimpleProtocol]
	for _, stmt := range []string{"BEGIN", "ALTER TABLE events ALTER COLUMN amount DROP NOT NULL"} {
		if _, err := simple[1].query(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	got, err := simple[1].query(ctx, queries[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], `column "amount" of "public"."events", counted as rows, is no longer declared NOT NULL`) {
		t.Fatalf("in the transaction that dropped NOT NULL: notices %q", got.notices)
	}
	if _, err := simple[1].query(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	check(simple, queries[1], "from rollup daily (standard error 0.81%)")

	mustExec(t, conn, `ALTER TABLE events ALTER COLUMN amount DROP NOT NULL`)
	mustExec(t, conn, `INSERT INTO events SELECT id + 1000000, created_at, user_id, country, device, NULL FROM events WHERE id % 1000 = 0`)
	for _, mode := range modes {
		check(pairs[mode], queries[1], `pgsketch: column "amount" of "public"."events", counted as rows, is no longer declared NOT NULL there or in a table inheriting from it (SQLSTATE 22007); answered exactly by PostgreSQL`)
		// The primary key still is: still answered.
		check(pairs[mode], queries[0], "from rollup daily (standard error 0.81%)")
	}
}

// TestZeroElseMeasures: sums and counts over CASE ... ELSE 0 END (filtered
// measures as knex and kysely reports write them) are answered from the
// rollup with PostgreSQL's values in both protocols: 0 for a group with no
// matching row, NULL for one whose every row matched with a NULL, the
// zeros counted.
func TestZeroElseMeasures(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 50_000, 30)
	mustExec(t, conn, `ALTER TABLE events ADD COLUMN bonus numeric(10,2);
		UPDATE events SET bonus = amount WHERE id % 3 = 0 AND country IS DISTINCT FROM 'JP'; ANALYZE events`)
	createRollup(t, conn, "daily", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}', sum_columns => '{bonus}'`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	queries := []string{
		`SELECT country, device, sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END), count(CASE WHEN device = 'ios' THEN user_id ELSE 0 END) AS n,
		   count(DISTINCT user_id) AS users FROM events GROUP BY 1, 2 ORDER BY 1, 2`,
		`select "country", sum(case when "country" = 'DE' then "bonus" else 0 end) as "de_bonus", count(case "device" when 'web' then 1 else 0 end) as "n",
		   count(distinct "user_id") as "users" from "events" where "created_at" >= '2026-01-03' and "created_at" < '2026-01-20' group by "country" order by "country"`,
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		direct, proxied := connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)
		for _, sql := range queries {
			want, err := direct.query(ctx, sql)
			if err != nil {
				t.Fatalf("direct: %v\n%s", err, sql)
			}
			got, err := proxied.query(ctx, sql)
			if err != nil {
				t.Fatalf("%v: through the proxy: %v\n%s", mode, err, sql)
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup daily (standard error 0.81%)") {
				t.Fatalf("%v: notices %q, want the rollup's\n%s", mode, got.notices, sql)
			}
			errs, err := compareRollupAnswer(got, want)
			if err != nil {
				t.Fatalf("%v: %v\n%s\n got %q %v\nwant %q %v", mode, err, sql, got.rows, got.nulls, want.rows, want.nulls)
			}
			if w := worstOf(errs); w > 5 {
				t.Errorf("%v: an estimate %.2f standard errors off\n%s", mode, w, sql)
			}
		}
	}
	// The groups that make the difference are there: a NULL sum and a 0.
	var nulls, zeros int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE s IS NULL), count(*) FILTER (WHERE s = 0) FROM (
		SELECT sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s FROM events GROUP BY country, device) x`).Scan(&nulls, &zeros); err != nil {
		t.Fatal(err)
	}
	if nulls == 0 || zeros == 0 {
		t.Fatalf("fixture: %d NULL sums and %d zero sums, want some of each", nulls, zeros)
	}
}

// TestCountOfNotNullColumnInherited: a table inheriting from the rolled-up
// one may drop NOT NULL where the parent keeps it, and its NULLs are in the
// parent's rows: a count of such a column, read by the rollup or not, is
// then PostgreSQL's, not the row count. Dropped before the catalog is read,
// the column is not NOT NULL to the planner (pgsketch.catalog() reads the
// inheritance tree); dropped after, the answering statement's check sends
// the statement to PostgreSQL with a NOTICE.
func TestCountOfNotNullColumnInherited(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 10)
	mustExec(t, conn, `CREATE TABLE events_archive () INHERITS (events);
		INSERT INTO events_archive SELECT id + 1000000, created_at, user_id, country, device, amount FROM events WHERE id % 50 = 0`)
	createRollup(t, conn, "daily", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}'`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	queries := []string{
		`SELECT device, count(user_id) AS n, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`,
		`SELECT device, count(amount) AS n, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`,
	}
	modes := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe}
	conns := map[pgx.QueryExecMode][2]*noticeConn{}
	for _, mode := range modes {
		conns[mode] = [2]*noticeConn{connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)}
	}
	// ask runs every query both ways and returns the notices it got.
	ask := func(stage string) (notices []string) {
		t.Helper()
		for _, sql := range queries {
			for _, mode := range modes {
				want, err := conns[mode][0].query(ctx, sql)
				if err != nil {
					t.Fatal(err)
				}
				got, err := conns[mode][1].query(ctx, sql)
				if err != nil {
					t.Fatalf("%s, %v: %v\n%s", stage, mode, err, sql)
				}
				if len(got.notices) == 1 && strings.Contains(got.notices[0], "from rollup daily") {
					if errs, err := compareRollupAnswer(got, want); err != nil || worstOf(errs) > 5 {
						t.Errorf("%s, %v: %v (worst %.2f standard errors)\n got %q\nwant %q\n%s", stage, mode, err, worstOf(errs), got.rows, want.rows, sql)
					}
				} else if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
					t.Errorf("%s, %v: got %q with notices %q, want PostgreSQL's %q\n%s", stage, mode, got.rows, got.notices, want.rows, sql)
				}
				notices = append(notices, got.notices...)
			}
		}
		return notices
	}
	// The declarations hold: answered from the rollup.
	for _, n := range ask("declared") {
		if !strings.Contains(n, "from rollup daily") {
			t.Errorf("declared: notice %q, want the rollup's", n)
		}
	}
	// Dropped in the child after the proxy read the catalog.
	mustExec(t, conn, `ALTER TABLE events_archive ALTER COLUMN user_id DROP NOT NULL, ALTER COLUMN amount DROP NOT NULL;
		INSERT INTO events_archive SELECT id + 2000000, created_at, CASE WHEN id % 2 = 0 THEN user_id END, country, device,
		       CASE WHEN id % 3 = 0 THEN amount END FROM events WHERE id % 40 = 0`)
	notices := ask("dropped")
	if len(notices) != 2*len(queries) {
		t.Errorf("dropped: notices %q, want one per statement", notices)
	}
	for _, n := range notices {
		if !strings.Contains(n, "no longer declared NOT NULL there or in a table inheriting from it") {
			t.Errorf("dropped: notice %q, want one saying why PostgreSQL answered", n)
		}
	}
	// After a refresh the catalog no longer counts them NOT NULL.
	refreshRollup(t, conn, "daily", refresh.Options{})
	var notNull string
	if err := conn.QueryRow(ctx, `SELECT (SELECT r->>'not_null_columns' FROM json_array_elements(pgsketch.catalog()) r WHERE r->>'name' = 'daily')`).Scan(&notNull); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(notNull, "user_id") || strings.Contains(notNull, "amount") || !strings.Contains(notNull, "device") {
		t.Errorf("catalog's NOT NULL columns %s: want device, not user_id or amount", notNull)
	}
	for _, n := range ask("refreshed") {
		t.Errorf("refreshed: notice %q, want PostgreSQL's answer alone (no column is NOT NULL to the planner)", n)
	}
}
