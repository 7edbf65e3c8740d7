package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
)

// rowDescStatements are statements the proxy answers from a rollup, one
// of each shape it answers, with output columns of every origin: plain
// columns of the source table (renamed, qualified, selected twice, through
// subqueries, CTEs and SELECT *), columns of dimension tables joined to
// it, casts, time buckets and aggregates (which PostgreSQL describes with
// no table), and columns of types with a type modifier.
var rowDescStatements = []string{
	// One table.
	`SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY country ORDER BY country`,
	`SELECT e.country AS land, e.device, count(DISTINCT e.user_id) AS users FROM events e GROUP BY 1, 2 ORDER BY 1, 2`,
	`SELECT "events".country "events__country", count(DISTINCT "events".user_id) "events__users" FROM public.events AS "events" WHERE ("events".created_at >= '2026-01-01T00:00:00.000Z'::timestamptz AND "events".created_at <= '2026-03-31T23:59:59.999Z'::timestamptz) GROUP BY 1 ORDER BY 2 DESC LIMIT 10000`,
	`SELECT country, device, country AS again, count(DISTINCT user_id) AS users FROM events GROUP BY country, device ORDER BY 1, 2`,
	`SELECT country::varchar(2) AS cc, device::text AS d, count(DISTINCT user_id) AS users FROM events GROUP BY country, device ORDER BY 1, 2`,
	`SELECT device, approx_count_distinct(user_id) AS users FROM events GROUP BY device ORDER BY device`,
	`SELECT date_trunc('week', created_at) AS week, device, count(DISTINCT user_id) AS users, sum(amount) AS revenue, min(amount) AS cheapest FROM events WHERE created_at < '2026-02-02' GROUP BY 1, 2 ORDER BY 1, 2`,
	`SELECT device, count(DISTINCT user_id) FILTER (WHERE country = 'US') AS users_us, count(*) AS n FROM events GROUP BY device HAVING count(*) > 10 ORDER BY device`,
	// Regrouped: grouping sets, windows.
	`SELECT country, device, count(DISTINCT user_id) AS users, GROUPING(country, device) AS level FROM events GROUP BY ROLLUP (country, device) ORDER BY 4, 1 NULLS FIRST, 2 NULLS FIRST`,
	`SELECT country, count(DISTINCT user_id) AS users, row_number() OVER (ORDER BY country) AS n FROM events GROUP BY country ORDER BY country`,
	// Star joins: columns of the dimension tables.
	`SELECT c.region, c.name AS country_name, e.device, count(DISTINCT e.user_id) AS users FROM events e JOIN countries c ON c.code = e.country GROUP BY 1, 2, 3 ORDER BY 1 NULLS FIRST, 2, 3`,
	`SELECT "Countries"."region" AS "Countries__region", COUNT(DISTINCT "public"."events"."user_id") AS "users" FROM "public"."events" LEFT JOIN "public"."countries" AS "Countries" ON "public"."events"."country" = "Countries"."code" GROUP BY "Countries"."region" ORDER BY "Countries"."region" ASC`,
	`SELECT c.region, e.device, count(DISTINCT e.user_id) AS users, GROUPING(c.region, e.device) AS level FROM events e JOIN countries c ON c.code = e.country GROUP BY GROUPING SETS ((c.region), (e.device), ()) ORDER BY 4, 1 NULLS FIRST, 2 NULLS FIRST`,
	`SELECT t.tag, e.country, count(DISTINCT e.user_id) AS users FROM events e JOIN country_tags t ON t.code = e.country GROUP BY 1, 2 ORDER BY 1, 2`,
	// Nested: subqueries, CTEs, SELECT *.
	`SELECT c.region, d.country, d.users FROM (SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-03-01' GROUP BY country) AS d JOIN countries AS c ON c.code = d.country ORDER BY c.region NULLS FIRST, d.country`,
	`SELECT * FROM (SELECT country, count(DISTINCT user_id) AS users, count(*) AS events FROM events GROUP BY country) AS t WHERE events > 100 ORDER BY country`,
	`WITH jan AS (SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at < '2026-02-01' GROUP BY country), feb AS (SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY country) SELECT jan.country, jan.users AS users_jan, feb.users AS users_feb FROM jan JOIN feb ON feb.country = jan.country ORDER BY 1`,
	`SELECT country AS country, count(DISTINCT user_id) AS users FROM (SELECT * FROM events WHERE device = 'ios') AS virtual_table WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY country ORDER BY country NULLS FIRST LIMIT 10000`,
	`SELECT "source"."device" AS "device", count(DISTINCT "source"."user_id") AS "users" FROM (SELECT "public"."events"."device" AS "device", "public"."events"."user_id" AS "user_id", "public"."events"."created_at" AS "created_at" FROM "public"."events") AS "source" WHERE "source"."created_at" >= '2026-03-01' GROUP BY "source"."device" ORDER BY "source"."device" ASC`,
	`SELECT country, count(DISTINCT user_id) AS users FROM events WHERE country IN (SELECT code FROM countries WHERE region = 'Asia') GROUP BY country ORDER BY country`,
	// Top-k, overlaps, a retention grid.
	`SELECT user_id, count(*) AS n FROM events WHERE created_at < '2026-02-01' GROUP BY user_id ORDER BY n DESC, user_id LIMIT 5`,
	`SELECT device, user_id AS uid, count(*) FROM events WHERE created_at < '2026-02-01' GROUP BY device, user_id ORDER BY 3 DESC, 1, 2 LIMIT 5`,
	`SELECT count(*) FROM (SELECT user_id FROM events WHERE created_at < '2026-02-01' INTERSECT SELECT user_id FROM events WHERE created_at >= '2026-02-01') x`,
	`SELECT count(DISTINCT user_id) AS retained FROM events WHERE created_at >= '2026-02-01' AND user_id IN (SELECT user_id FROM events WHERE created_at < '2026-02-01')`,
	`WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events) SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week = a.week + interval '1 week' GROUP BY 1, 2 ORDER BY 1, 2`,
	// Columns with type modifiers.
	`SELECT cc, kind, count(DISTINCT uid) AS users FROM visits GROUP BY 1, 2 ORDER BY 1, 2`,
	`SELECT v.kind AS k, v.cc, count(DISTINCT v.uid) AS users FROM visits v WHERE v.ts >= '2026-01-03' GROUP BY 1, 2 ORDER BY 1, 2`,
}

// rowDescFixture is the events table of rolledUpEvents (its daily rollup,
// the dimension tables countries and country_tags), rollups with Theta
// sketches and top-k summaries of user_id beside it, and a table visits
// whose dimensions are varchar(2) and char(3), with its rollup.
func rowDescFixture(t *testing.T) (*testDB, *proxyProc, *pgx.Conn) {
	t.Helper()
	db, conn := rolledUpEvents(t, 60_000, 90, "2026-03-29 12:00", "3 days")
	createRollup(t, conn, "sets", `grain => 'day', dimensions => '{country,device}', theta_columns => '{user_id}'`)
	refreshRollup(t, conn, "sets", refresh.Options{})
	createRollup(t, conn, "tk", `grain => 'day', dimensions => '{device}', topk_columns => '{user_id}'`)
	refreshRollup(t, conn, "tk", refresh.Options{})
	mustExec(t, conn, `CREATE TABLE visits (ts timestamptz NOT NULL, cc varchar(2), kind char(3) NOT NULL, uid bigint NOT NULL)`)
	mustExec(t, conn, `INSERT INTO visits SELECT timestamptz '2026-01-01' + i * interval '1 minute',
		(ARRAY['US', 'DE', 'FR', NULL])[1 + i % 4], (ARRAY['web', 'ios'])[1 + i % 2], i % 997 FROM generate_series(0, 20000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('vdaily', 'visits', 'ts', grain => 'day', dimensions => '{cc,kind}', distinct_columns => '{uid}')`)
	refreshRollup(t, conn, "vdaily", refresh.Options{})
	return db, startProxy(t, server.adminURL, "--approx", "on"), conn
}

// simpleResults runs sql (one statement or several) in the simple
// protocol and returns each result's columns, and the notices.
func simpleResults(ctx context.Context, nc *noticeConn, sql string) ([][]pgconn.FieldDescription, []string, error) {
	nc.mu.Lock()
	nc.notices = nil
	nc.mu.Unlock()
	results, err := nc.PgConn().Exec(ctx, sql).ReadAll()
	nc.mu.Lock()
	notices := nc.notices
	nc.mu.Unlock()
	if err != nil {
		return nil, notices, err
	}
	var fields [][]pgconn.FieldDescription
	for _, r := range results {
		if r.FieldDescriptions != nil {
			fields = append(fields, r.FieldDescriptions)
		}
	}
	return fields, notices, nil
}

// fieldsText prints columns as a RowDescription holds them.
func fieldsText(fs [][]pgconn.FieldDescription) string {
	var b strings.Builder
	for _, r := range fs {
		for _, f := range r {
			fmt.Fprintf(&b, "\n  %q table %d column %d type %d size %d typmod %d format %d",
				f.Name, f.TableOID, f.TableAttributeNumber, f.DataTypeOID, f.DataTypeSize, f.TypeModifier, f.Format)
		}
		b.WriteString("\n  --")
	}
	return b.String()
}

// TestRowDescriptionLikePostgres: a statement answered from a rollup in
// the simple protocol gets PostgreSQL's RowDescription, field by field
// (name, table OID, column number, type, size, type modifier, format), for
// every shape the proxy answers; the first time in a session and again,
// outside and inside a transaction block, alone and in a text of several
// statements; and after the dimension table's column changes type, and
// after the table is replaced by another of the same name. The extended
// protocol's answers, described upstream, are checked alike.
func TestRowDescriptionLikePostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, p, conn := rowDescFixture(t)
	direct := connectSimple(t, db.DSN)
	proxied := connectSimple(t, p.URL(db.DSN))

	// alike runs sql directly and through the proxy, whose columns must be
	// PostgreSQL's, and reports whether a rollup answered it.
	alike := func(t *testing.T, nc *noticeConn, sql string) bool {
		t.Helper()
		want, _, err := simpleResults(ctx, direct, acdRE.ReplaceAllString(sql, "count(DISTINCT "))
		if err != nil {
			t.Fatalf("directly: %v\n%s", err, sql)
		}
		got, notices, err := simpleResults(ctx, nc, sql)
		if err != nil {
			t.Fatalf("through the proxy: %v\n%s", err, sql)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("RowDescription differs from PostgreSQL's (notices %q)\n%s\ngot:%s\nwant:%s", notices, sql, fieldsText(got), fieldsText(want))
		}
		return fromRollup(notices)
	}
	// same is alike for a statement a rollup must answer.
	same := func(t *testing.T, nc *noticeConn, sql string) {
		t.Helper()
		if !alike(t, nc, sql) {
			t.Fatalf("not answered from a rollup\n%s\n%s", sql, p.Log())
		}
	}

	t.Run("statements", func(t *testing.T) {
		for _, sql := range rowDescStatements {
			same(t, proxied, sql) // described for the first time in the session
			same(t, proxied, sql) // again: the answer and the description kept
		}
		// A new session (the statements' shaped answers cached).
		fresh := connectSimple(t, p.URL(db.DSN))
		for _, sql := range rowDescStatements {
			same(t, fresh, sql)
		}
	})

	t.Run("transaction block", func(t *testing.T) {
		nc := connectSimple(t, p.URL(db.DSN))
		// In a READ COMMITTED block, the plans whose statements must see
		// one snapshot run exactly; in REPEATABLE READ, every one answers.
		for _, iso := range []string{"READ COMMITTED", "REPEATABLE READ"} {
			if _, err := nc.Exec(ctx, "BEGIN ISOLATION LEVEL "+iso); err != nil {
				t.Fatal(err)
			}
			answered := 0
			for _, sql := range rowDescStatements {
				if iso == "REPEATABLE READ" {
					same(t, nc, sql)
				} else if alike(t, nc, sql) {
					answered++
				}
			}
			if iso == "READ COMMITTED" && answered < 10 {
				t.Errorf("%d statements answered from rollups in a READ COMMITTED block, want at least 10", answered)
			}
			if _, err := nc.Exec(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("text of several statements", func(t *testing.T) {
		same(t, proxied, `SELECT 1 AS one; `+rowDescStatements[0]+`; `+rowDescStatements[10]+`; SELECT code FROM countries ORDER BY 1 LIMIT 1`)
	})

	t.Run("extended protocol", func(t *testing.T) {
		dx := connectMode(t, db.DSN, pgx.QueryExecModeCacheStatement)
		px := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)
		for _, sql := range rowDescStatements {
			want, err := dx.query(ctx, acdRE.ReplaceAllString(sql, "count(DISTINCT "))
			if err != nil {
				t.Fatalf("directly: %v\n%s", err, sql)
			}
			got, err := px.query(ctx, sql)
			if err != nil {
				t.Fatalf("through the proxy: %v\n%s", err, sql)
			}
			if !fromRollup(got.notices) {
				t.Fatalf("not answered from a rollup: %q\n%s", got.notices, sql)
			}
			if fmt.Sprint(got.fields) != fmt.Sprint(want.fields) {
				t.Errorf("RowDescription differs from PostgreSQL's\n%s\ngot  %+v\nwant %+v", sql, got.fields, want.fields)
			}
		}
	})

	// The dimension table changes under a session that described the join
	// before: its column's type (the statement kept prepared to describe
	// it can no longer be, and is prepared anew), then the table itself
	// (another OID: PostgreSQL revalidates the statement).
	t.Run("dimension table changed", func(t *testing.T) {
		join := rowDescStatements[10]
		nc := connectSimple(t, p.URL(db.DSN))
		kept := func() string {
			t.Helper()
			var names []string
			rows, err := nc.Query(ctx, `SELECT name FROM pg_prepared_statements WHERE name LIKE 'pgsketch\_q\_d%' AND statement = $1`, join)
			if err == nil {
				names, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err != nil || len(names) != 1 {
				t.Fatalf("statements kept to describe the join: %q, %v; want one\n%s", names, err, p.Log())
			}
			return names[0]
		}
		// A join runs in a transaction of its own. The third answer of
		// the session is planned in the view the second read: its
		// description rides with the view's confirmation, before the
		// transaction, and stays prepared (speculate.go, describe.go).
		for range 3 {
			same(t, nc, join)
		}
		first := kept()
		mustExec(t, conn, `ALTER TABLE countries ALTER COLUMN name TYPE varchar(40)`)
		same(t, nc, join)
		second := kept()
		if second == first {
			t.Errorf("the join is described by %s after its column changed type, as before", second)
		}
		mustExec(t, conn, `CREATE TABLE countries_new (LIKE countries INCLUDING ALL); INSERT INTO countries_new SELECT * FROM countries;
			DROP TABLE countries; ALTER TABLE countries_new RENAME TO countries`)
		same(t, nc, join)
		if third := kept(); third != second {
			t.Errorf("the join is described by %s after its table was replaced, %s before: want it revalidated", third, second)
		}
		same(t, proxied, join)
	})
}
