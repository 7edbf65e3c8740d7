package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// The trust tests try to get a wrong number, a leak or a blocked write out
// of a rollup as a careless DBA, a migration tool or a hostile tenant
// would: every change to the source's definition, its privileges or its
// capture triggers must make the proxy answer exactly (or refuse) until a
// refresh repairs the rollup, and must never make a user's write fail.

// trustQueries are compared through the proxy and directly: counts and
// sums exactly, distinct counts (columns named users) within 5 standard
// errors.
var trustQueries = []string{
	`SELECT country, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev GROUP BY country ORDER BY country`,
	`SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev
	 WHERE created_at >= '2026-01-03' AND created_at < '2026-01-20' GROUP BY 1 ORDER BY 1`,
}

// trustTableSQL makes table ev: 6000 rows over the 28 days of January
// 2026 (12 to 15 rows an hour of the day, 3 countries, 2 devices).
const trustTableSQL = `CREATE TABLE ev (created_at timestamptz NOT NULL, country text, device text, user_id bigint, amount numeric(12,2));
	CREATE INDEX ON ev (created_at);
	INSERT INTO ev SELECT timestamptz '2026-01-01' + (i % 28) * interval '1 day' + (i % 7) * interval '3 hours',
		(ARRAY['DE','FR','US'])[1 + i % 3], (ARRAY['ios','web'])[1 + i % 2], i % 3000, (i % 100) / 10.0
	  FROM generate_series(1, 6000) i;
	ANALYZE ev`

// trustEnv is a database with table ev, a daily rollup ev_daily over it,
// refreshed once, and a proxy in front of it.
type trustEnv struct {
	db   *testDB
	conn *pgx.Conn   // straight to PostgreSQL, as the test's superuser
	nc   *noticeConn // through the proxy, as the same role
	p    *proxyProc
}

func newTrustEnv(t *testing.T) *trustEnv {
	t.Helper()
	return newTrustEnvBehind(t, startProxy(t, server.adminURL, "--approx", "on"))
}

// answers runs every trust query through the proxy and straight on
// PostgreSQL and fails unless they agree and the rollup answered exactly
// when fromRollup says it must.
func (e *trustEnv) answers(t *testing.T, step string, fromRollup bool) {
	t.Helper()
	if _, err := e.check(t, step, &fromRollup); err != nil {
		t.Fatalf("%s: direct: %v", step, err)
	}
}

// agree is answers whoever answers.
func (e *trustEnv) agree(t *testing.T, step string) {
	t.Helper()
	if _, err := e.check(t, step, nil); err != nil {
		t.Fatalf("%s: direct: %v", step, err)
	}
}

// check compares every trust query through the proxy with PostgreSQL's
// answer, and whether the rollup answered with fromRollup unless it is
// nil; it returns how many the rollup answered, or PostgreSQL's error for
// a statement PostgreSQL refuses.
func (e *trustEnv) check(t *testing.T, step string, fromRollup *bool) (int, error) {
	t.Helper()
	ctx := context.Background()
	direct := &noticeConn{Conn: e.conn}
	n := 0
	for _, q := range trustQueries {
		exact, err := direct.query(ctx, q, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return n, err
		}
		got, err := e.nc.query(ctx, q)
		if err != nil {
			t.Fatalf("%s: proxy: %v\n%s", step, err, q)
		}
		errs, err := compareRollupAnswer(got, exact)
		if err != nil {
			t.Fatalf("%s: %s: %v\nnotices %q", step, q, err, got.notices)
		}
		for _, x := range errs {
			if x > 5 {
				t.Fatalf("%s: %s: a distinct count %.1f standard errors off; notices %q", step, q, x, got.notices)
			}
		}
		rollup := len(got.notices) == 1 && strings.Contains(got.notices[0], "approximated from rollup ev_daily")
		if fromRollup != nil && rollup != *fromRollup {
			t.Fatalf("%s: %s: answered from the rollup: %v, want %v; notices %q", step, q, rollup, *fromRollup, got.notices)
		}
		if rollup {
			n++
		}
	}
	return n, nil
}

// broken is what pgsketch.rollups says of ev_daily's change capture. It
// fails the test where the view pgsketch.capture_in_place, which answering
// statements read before they call the check's functions, says the
// capture is in place while the functions say it is not.
func (e *trustEnv) broken(t *testing.T) string {
	t.Helper()
	var why *string
	var inPlace bool
	if err := e.conn.QueryRow(context.Background(), `SELECT r.capture_broken, v.in_place
		  FROM pgsketch.rollups r JOIN pgsketch.capture_in_place v ON v.rollup = r.name
		 WHERE r.name = 'ev_daily'`).Scan(&why, &inPlace); err != nil {
		t.Fatal(err)
	}
	if why == nil {
		return ""
	}
	if inPlace {
		t.Fatalf("pgsketch.capture_in_place says the capture is in place; capture_broken: %s", *why)
	}
	return *why
}

// repaired refreshes ev_daily (as the refresher would, incrementally),
// then checks that it equals a fresh build and answers again.
func (e *trustEnv) repaired(t *testing.T) {
	t.Helper()
	refreshRollup(t, e.conn, "ev_daily", refresh.Options{})
	sameAs(t, e.conn, "ev", "ev_daily")
	e.answers(t, "after a refresh", true)
}

// TestSchemaChangesDetected: column changes no DML trigger sees (a table
// rewritten by ALTER COLUMN ... TYPE ... USING, also to the type the
// column already has; a column dropped and added again, renamed away and
// replaced; the time column turned from timestamptz into timestamp in a
// session zone other than UTC) make the proxy answer exactly until a
// refresh, which rebuilds every bucket.
func TestSchemaChangesDetected(t *testing.T) {
	t.Parallel()
	// after is what a refresh does: "" rebuild the rollup, which answers
	// again; "exact" rebuild it, but the planner no longer matches the
	// statements that read a dimension whose collation now differs from
	// the rollup table's; "refused"
	// refuse, as a new rollup's columns would have other types.
	for _, c := range []struct{ name, ddl, after string }{
		{"distinct column rewritten to its own type", `ALTER TABLE ev ALTER COLUMN user_id TYPE bigint USING user_id + 1`, ""},
		{"distinct column retyped", `ALTER TABLE ev ALTER COLUMN user_id TYPE numeric USING user_id % 7`, "refused"},
		{"dimension rewritten", `ALTER TABLE ev ALTER COLUMN country TYPE text USING lower(country)`, ""},
		{"sum column rewritten", `ALTER TABLE ev ALTER COLUMN amount TYPE numeric(12,2) USING amount * 2`, ""},
		{"column dropped and added", `ALTER TABLE ev DROP COLUMN user_id; ALTER TABLE ev ADD COLUMN user_id bigint;
			UPDATE ev SET user_id = 1`, ""},
		{"column renamed away and replaced", `ALTER TABLE ev RENAME COLUMN country TO country_old;
			ALTER TABLE ev ADD COLUMN country text DEFAULT 'ZZ'`, ""},
		{"time column to timestamp in another zone", `SET TimeZone = 'Asia/Tokyo';
			ALTER TABLE ev ALTER COLUMN created_at TYPE timestamp; RESET TimeZone`, "refused"},
		{"collation changed", `ALTER TABLE ev ALTER COLUMN country TYPE text COLLATE "C"`, "exact"},
		{"NOT NULL dropped", `ALTER TABLE ev ALTER COLUMN created_at DROP NOT NULL; INSERT INTO ev VALUES (NULL, 'DE', 'web', 1, 1)`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newTrustEnv(t)
			e.answers(t, "clean", true)
			mustExec(t, e.conn, c.ddl)
			e.answers(t, c.name, false)
			if e.broken(t) == "" {
				t.Fatal("pgsketch.rollups says the capture is in place")
			}
			// Writes go on and are captured into a rollup no longer used.
			mustExec(t, e.conn, `INSERT INTO ev (created_at, country, device, user_id, amount) VALUES ('2026-01-05 10:00', 'DE', 'web', 5, 5)`)
			e.answers(t, c.name+", then a write", false)
			switch c.after {
			case "":
				e.repaired(t)
			case "exact":
				refreshRollup(t, e.conn, "ev_daily", refresh.Options{})
				sameAs(t, e.conn, "ev", "ev_daily")
				e.agree(t, "after a refresh")
			case "refused":
				_, err := refresh.Refresh(context.Background(), pgsession.Conn{C: e.conn.PgConn()}, "ev_daily", refresh.Options{})
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "42804" {
					t.Fatalf("refresh: %v, want SQLSTATE 42804 (the rollup must be created again)", err)
				}
				t.Log(err)
				e.answers(t, "after a refused refresh", false)
			}
		})
	}
}

// TestCaptureNeverBlocksWrites: renaming, dropping or retyping a column the
// capture trigger reads never makes a user's write fail; the rollup is
// answered exactly from then on, and a refresh (once the rollup's columns
// exist again) rebuilds it with every write made meanwhile.
func TestCaptureNeverBlocksWrites(t *testing.T) {
	t.Parallel()
	writes := `INSERT INTO ev (%[1]s, country, device, user_id, amount) VALUES ('2026-01-06 10:00+00', 'FR', 'web', 90001, 3);
		UPDATE ev SET amount = amount + 1 WHERE %[1]s >= '2026-01-07' AND %[1]s < '2026-01-08';
		DELETE FROM ev WHERE %[1]s >= '2026-01-09' AND %[1]s < '2026-01-10' AND user_id %% 2 = 0;
		COPY ev (%[1]s, country, device, user_id, amount) FROM PROGRAM 'echo 2026-01-11 10:00+00,DE,ios,90002,4' (FORMAT csv)`
	for _, c := range []struct{ name, ddl, col, undo string }{
		{"time column renamed", `ALTER TABLE ev RENAME COLUMN created_at TO ts`, "ts", `ALTER TABLE ev RENAME COLUMN ts TO created_at`},
		{"time column retyped", `ALTER TABLE ev ALTER COLUMN created_at TYPE text`, "created_at",
			`ALTER TABLE ev ALTER COLUMN created_at TYPE timestamptz USING created_at::timestamptz`},
		{"time column dropped", `ALTER TABLE ev RENAME COLUMN created_at TO ts2; ALTER TABLE ev ADD COLUMN created_at timestamptz;
			UPDATE ev SET created_at = ts2; ALTER TABLE ev DROP COLUMN ts2`, "created_at", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newTrustEnv(t)
			mustExec(t, e.conn, c.ddl)
			mustExec(t, e.conn, fmt.Sprintf(writes, c.col))
			// One fault marks the rollup, however many writes fail to
			// capture (the renamed column fails all four).
			var faults int
			if err := e.conn.QueryRow(context.Background(), `SELECT count(*) FROM pgsketch.rollup_faults WHERE rollup = 'ev_daily'`).Scan(&faults); err != nil ||
				faults > 1 || (c.col == "ts" && faults != 1) {
				t.Fatalf("%d faults recorded (%v), want at most one", faults, err)
			}
			// Truncating a partition-less table is a write too.
			if c.undo != "" {
				mustExec(t, e.conn, c.undo)
			}
			e.answers(t, c.name+" and undone", false)
			e.repaired(t)
		})
	}
	t.Run("every read column", func(t *testing.T) {
		t.Parallel()
		for _, col := range []string{"country", "device", "user_id", "amount"} {
			e := newTrustEnv(t)
			for _, ddl := range []string{
				fmt.Sprintf(`ALTER TABLE ev RENAME COLUMN %s TO renamed`, col),
				`ALTER TABLE ev ALTER COLUMN renamed TYPE text`,
				`ALTER TABLE ev DROP COLUMN renamed`,
			} {
				mustExec(t, e.conn, ddl)
				mustExec(t, e.conn, `INSERT INTO ev (created_at) VALUES ('2026-01-06 10:00+00'), ('2026-01-12 10:00+00');
					UPDATE ev SET created_at = created_at + interval '1 hour' WHERE created_at >= '2026-01-07' AND created_at < '2026-01-08';
					DELETE FROM ev WHERE created_at >= '2026-01-09' AND created_at < '2026-01-10'`)
			}
			if why := e.broken(t); why == "" {
				t.Fatalf("%s dropped: pgsketch.rollups says the capture is in place", col)
			}
			// The rollup cannot be refreshed any more: its column is gone.
			_, err := refresh.Refresh(context.Background(), pgsession.Conn{C: e.conn.PgConn()}, "ev_daily", refresh.Options{})
			if err == nil {
				t.Fatalf("%s dropped: a refresh succeeded", col)
			}
		}
	})
}

// TestTriggersReenabledAlways: an owner who disables the capture
// triggers, writes, and enables them again, ALWAYS as pgsketch made them,
// leaves no trace in the triggers' state but in their catalog rows: the
// proxy answers exactly until a refresh.
func TestTriggersReenabledAlways(t *testing.T) {
	t.Parallel()
	e := newTrustEnv(t)
	mustExec(t, e.conn, `ALTER TABLE ev DISABLE TRIGGER ALL; DELETE FROM ev WHERE created_at < '2026-01-05';
		ALTER TABLE ev ENABLE ALWAYS TRIGGER pgsketch_ev_daily_ins; ALTER TABLE ev ENABLE ALWAYS TRIGGER pgsketch_ev_daily_upd;
		ALTER TABLE ev ENABLE ALWAYS TRIGGER pgsketch_ev_daily_del; ALTER TABLE ev ENABLE ALWAYS TRIGGER pgsketch_ev_daily_trunc`)
	e.answers(t, "triggers disabled, written around and enabled ALWAYS again", false)
	// The trigger function replaced by one that logs nothing.
	e2 := newTrustEnv(t)
	mustExec(t, e2.conn, `CREATE OR REPLACE FUNCTION pgsketch.capture_ev_daily() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
		DELETE FROM ev WHERE created_at < '2026-01-05'`)
	e2.answers(t, "capture function replaced", false)
	e.repaired(t)
	e2.repaired(t)
}

// TestInfiniteTimes: rows at -infinity and +infinity and rows without a
// time, written after a refresh, are counted before and after every kind
// of refresh (incremental, ranged, full).
func TestInfiniteTimes(t *testing.T) {
	t.Parallel()
	for _, opt := range []refresh.Options{{}, {From: "2026-01-01", To: "2026-01-10"}, {Full: true}} {
		t.Run(fmt.Sprintf("%+v", opt), func(t *testing.T) {
			t.Parallel()
			e := newTrustEnv(t)
			mustExec(t, e.conn, `ALTER TABLE ev ALTER COLUMN created_at DROP NOT NULL`)
			refreshRollup(t, e.conn, "ev_daily", refresh.Options{Full: true})
			mustExec(t, e.conn, `INSERT INTO ev VALUES ('-infinity', 'DE', 'web', 70001, 1), ('infinity', 'FR', 'ios', 70002, 2),
				(NULL, 'US', 'web', 70003, 4)`)
			q := `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev GROUP BY country ORDER BY country`
			check := func(step string) {
				t.Helper()
				var exact, got string
				if err := e.conn.QueryRow(context.Background(), `SELECT string_agg(format('%s/%s/%s', country, n, total), ' ' ORDER BY country)
					FROM (`+strings.Replace(q, "ORDER BY country", "", 1)+`) x`).Scan(&exact); err != nil {
					t.Fatal(err)
				}
				a, err := e.nc.query(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				var parts []string
				for _, r := range a.rows {
					parts = append(parts, r[0]+"/"+r[2]+"/"+r[3])
				}
				if got = strings.Join(parts, " "); got != exact {
					t.Fatalf("%s: proxy %s, exact %s; notices %q", step, got, exact, a.notices)
				}
			}
			check("before the refresh")
			refreshRollup(t, e.conn, "ev_daily", opt)
			check("after the refresh")
			refreshRollup(t, e.conn, "ev_daily", refresh.Options{})
			check("after another refresh")
			mustExec(t, e.conn, `DELETE FROM ev WHERE created_at = '-infinity'`)
			check("-infinity deleted")
			refreshRollup(t, e.conn, "ev_daily", refresh.Options{})
			check("-infinity deleted, refreshed")
		})
	}
}

// TestPrivilegesFollowSource: from the moment a role loses SELECT on the
// source, or the source gets row-level security, it reads nothing from
// the rollup: reading the rollup table fails with SQLSTATE 42501, and
// through the proxy the answer is PostgreSQL's (its permission error, or
// the rows its policies let the role see).
func TestPrivilegesFollowSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTrustEnv(t)
	reader := "pgsk_trust_reader" + strings.TrimPrefix(e.db.Name, server.prefix)
	mustExec(t, e.conn, fmt.Sprintf(`DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s; GRANT USAGE ON SCHEMA pgsketch TO %[1]s;
		GRANT SELECT ON ev, pgsketch.rollup_defs TO %[1]s`, reader))
	dropRoleAtEnd(t, e.db.DSN, reader)
	refreshRollup(t, e.conn, "ev_daily", refresh.Options{}) // grants copied
	rd := connectSimple(t, e.p.URL(e.db.DSN))
	mustExec(t, rd.Conn, "SET ROLE "+reader)
	// directOf reads table as the reader; direct reads the rollup table
	// and then its table of inserted rows (the source's own values), each
	// allowed or refused as the other.
	directOf := func(table string) error {
		_, err := e.conn.Exec(ctx, fmt.Sprintf(`SET ROLE %s; SELECT count(*) FROM %s; RESET ROLE`, reader, table))
		mustExec(t, e.conn, `RESET ROLE`)
		return err
	}
	direct := func() error {
		errRollup, errInserts := directOf("ev_daily"), directOf("pgsketch.inserts_ev_daily")
		if (errRollup == nil) != (errInserts == nil) {
			t.Fatalf("the rollup table read: %v; its inserted rows read: %v", errRollup, errInserts)
		}
		return errRollup
	}
	wantDenied := func(step string, err error) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Fatalf("%s: reading the rollup table: %v, want SQLSTATE 42501", step, err)
		}
	}
	mustExec(t, e.conn, `INSERT INTO ev VALUES ('2026-01-05 10:00+00', 'DE', 'web', 99001, 1)`) // a row in the inserted rows
	q := `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev GROUP BY country ORDER BY country`
	if err := direct(); err != nil {
		t.Fatalf("a reader of the source cannot read the rollup table: %v", err)
	}
	if a, err := rd.query(ctx, q); err != nil || len(a.notices) != 1 || !strings.Contains(a.notices[0], "approximated from rollup") {
		t.Fatalf("reader through the proxy: %v %v", a, err)
	}

	// Row-level security on the source: the reader sees its tenant only.
	mustExec(t, e.conn, fmt.Sprintf(`ALTER TABLE ev ENABLE ROW LEVEL SECURITY;
		CREATE POLICY tenant ON ev FOR SELECT TO %s USING (country = 'DE')`, reader))
	wantDenied("row-level security enabled", direct())
	a, err := rd.query(ctx, q)
	if err != nil {
		t.Fatalf("reader through the proxy under row-level security: %v", err)
	}
	if len(a.rows) != 1 || a.rows[0][0] != "DE" {
		t.Fatalf("reader through the proxy under row-level security: rows %q, notices %q; want PostgreSQL's (DE only)", a.rows, a.notices)
	}
	mustExec(t, e.conn, `DROP POLICY tenant ON ev; ALTER TABLE ev DISABLE ROW LEVEL SECURITY`)
	if err := direct(); err != nil {
		t.Fatalf("row-level security disabled again: %v", err)
	}

	// SELECT revoked: denied at once, no refresh needed.
	mustExec(t, e.conn, fmt.Sprintf(`REVOKE SELECT ON ev FROM %s`, reader))
	wantDenied("SELECT revoked", direct())
	if _, err := rd.query(ctx, q); err == nil {
		t.Fatal("reader without SELECT on the source got an answer through the proxy")
	} else {
		wantDenied("SELECT revoked, through the proxy", err)
	}
	// Column privileges on every column the rollup reads are as good as
	// SELECT on the table.
	mustExec(t, e.conn, fmt.Sprintf(`GRANT SELECT (created_at, country, device, user_id, amount) ON ev TO %s`, reader))
	if err := direct(); err != nil {
		t.Fatalf("column privileges on every column the rollup reads: %v", err)
	}
	mustExec(t, e.conn, fmt.Sprintf(`REVOKE SELECT (amount) ON ev FROM %s`, reader))
	wantDenied("one column's privilege revoked", direct())
}

// alterForms are the statements of PostgreSQL 15's ALTER TABLE (and its
// neighbours a DBA or a migration tool runs) that touch the columns a
// rollup reads, the table's ownership, row-level security, rules or
// triggers, as TestAlterTableForms runs them on a rolled-up table.
var alterForms = []struct{ name, ddl string }{
	{"ADD COLUMN", `ALTER TABLE ev ADD COLUMN note text`},
	{"ADD COLUMN with a volatile default (rewrite)", `ALTER TABLE ev ADD COLUMN r float8 DEFAULT random()`},
	{"DROP COLUMN not read", `ALTER TABLE ev ADD COLUMN note text; ALTER TABLE ev DROP COLUMN note`},
	{"DROP COLUMN read", `ALTER TABLE ev DROP COLUMN amount`},
	{"ALTER COLUMN TYPE of a read column, same type", `ALTER TABLE ev ALTER COLUMN amount TYPE numeric(12,2) USING amount + 1`},
	{"ALTER COLUMN TYPE of a read column, wider", `ALTER TABLE ev ALTER COLUMN amount TYPE numeric(14,3)`},
	{"ALTER COLUMN TYPE of the time column with USING", `ALTER TABLE ev ALTER COLUMN created_at TYPE timestamptz USING created_at + interval '1 day'`},
	{"ALTER COLUMN TYPE varchar of a dimension", `ALTER TABLE ev ALTER COLUMN country TYPE varchar(8)`},
	{"ALTER COLUMN SET DEFAULT / DROP DEFAULT", `ALTER TABLE ev ALTER COLUMN country SET DEFAULT 'XX'; ALTER TABLE ev ALTER COLUMN device DROP DEFAULT`},
	{"ALTER COLUMN SET NOT NULL", `ALTER TABLE ev ALTER COLUMN user_id SET NOT NULL`},
	{"ALTER COLUMN DROP NOT NULL of the time column", `ALTER TABLE ev ALTER COLUMN created_at DROP NOT NULL`},
	{"ALTER COLUMN ADD GENERATED AS IDENTITY", `ALTER TABLE ev ADD COLUMN id bigint NOT NULL DEFAULT 0; ALTER TABLE ev ALTER COLUMN id DROP DEFAULT;
		ALTER TABLE ev ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY`},
	{"generated column: DROP EXPRESSION", `ALTER TABLE ev ADD COLUMN g bigint GENERATED ALWAYS AS (user_id * 2) STORED; ALTER TABLE ev ALTER COLUMN g DROP EXPRESSION`},
	{"ALTER COLUMN SET STATISTICS / SET (n_distinct)", `ALTER TABLE ev ALTER COLUMN user_id SET STATISTICS 500; ALTER TABLE ev ALTER COLUMN user_id SET (n_distinct = -0.5)`},
	{"ALTER COLUMN SET STORAGE / SET COMPRESSION", `ALTER TABLE ev ALTER COLUMN country SET STORAGE external; ALTER TABLE ev ALTER COLUMN country SET COMPRESSION pglz`},
	{"ADD / VALIDATE / DROP CONSTRAINT", `ALTER TABLE ev ADD CONSTRAINT pos CHECK (amount >= 0) NOT VALID; ALTER TABLE ev VALIDATE CONSTRAINT pos;
		ALTER TABLE ev RENAME CONSTRAINT pos TO pos2; ALTER TABLE ev DROP CONSTRAINT pos2`},
	{"DISABLE TRIGGER ALL", `ALTER TABLE ev DISABLE TRIGGER ALL`},
	{"DISABLE TRIGGER USER, ENABLE TRIGGER USER", `ALTER TABLE ev DISABLE TRIGGER USER; ALTER TABLE ev ENABLE TRIGGER USER`},
	{"ENABLE REPLICA TRIGGER", `ALTER TABLE ev ENABLE REPLICA TRIGGER pgsketch_ev_daily_del`},
	{"DISABLE and ENABLE ALWAYS TRIGGER", `ALTER TABLE ev DISABLE TRIGGER pgsketch_ev_daily_del; DELETE FROM ev WHERE user_id = 7;
		ALTER TABLE ev ENABLE ALWAYS TRIGGER pgsketch_ev_daily_del`},
	{"DROP TRIGGER", `DROP TRIGGER pgsketch_ev_daily_ins ON ev`},
	{"a rule that rewrites DELETE into nothing", `CREATE RULE keep AS ON DELETE TO ev DO INSTEAD NOTHING`},
	{"DISABLE RULE / ENABLE RULE", `CREATE RULE also AS ON UPDATE TO ev DO ALSO NOTIFY ev; ALTER TABLE ev DISABLE RULE also; ALTER TABLE ev ENABLE RULE also`},
	{"ENABLE ROW LEVEL SECURITY", `ALTER TABLE ev ENABLE ROW LEVEL SECURITY`},
	{"FORCE ROW LEVEL SECURITY", `ALTER TABLE ev FORCE ROW LEVEL SECURITY; ALTER TABLE ev NO FORCE ROW LEVEL SECURITY`},
	{"CREATE POLICY without RLS enabled", `CREATE POLICY p ON ev USING (country = 'DE')`},
	{"CLUSTER ON, SET WITHOUT CLUSTER", `CREATE INDEX ev_user ON ev (user_id); ALTER TABLE ev CLUSTER ON ev_user; ALTER TABLE ev SET WITHOUT CLUSTER`},
	{"CLUSTER (rewrite)", `CREATE INDEX ev_user ON ev (user_id); CLUSTER ev USING ev_user`},
	{"VACUUM FULL (rewrite)", `VACUUM FULL ev`},
	{"SET ACCESS METHOD heap (rewrite)", `ALTER TABLE ev SET ACCESS METHOD heap`},
	{"SET TABLESPACE", `ALTER TABLE ev SET TABLESPACE pg_default`},
	{"SET UNLOGGED / SET LOGGED (rewrites)", `ALTER TABLE ev SET UNLOGGED; ALTER TABLE ev SET LOGGED`},
	{"SET / RESET storage parameters", `ALTER TABLE ev SET (fillfactor = 70, autovacuum_enabled = false); ALTER TABLE ev RESET (fillfactor)`},
	{"another table INHERITs from the source", `CREATE TABLE ev_child (LIKE ev); INSERT INTO ev_child SELECT * FROM ev LIMIT 100; ALTER TABLE ev_child INHERIT ev`},
	{"the source INHERITs from another table", `CREATE TABLE ev_parent (LIKE ev); ALTER TABLE ev INHERIT ev_parent`},
	{"OF type / NOT OF", `CREATE TYPE ev_t AS (created_at timestamptz, country text, device text, user_id bigint, amount numeric(12,2));
		ALTER TABLE ev OF ev_t; ALTER TABLE ev NOT OF`},
	{"OWNER TO", `ALTER TABLE ev OWNER TO pg_database_owner`},
	{"REPLICA IDENTITY FULL", `ALTER TABLE ev REPLICA IDENTITY FULL`},
	{"RENAME TO, RENAME back", `ALTER TABLE ev RENAME TO ev2; ALTER TABLE ev2 RENAME TO ev`},
	{"RENAME COLUMN and back", `ALTER TABLE ev RENAME COLUMN user_id TO uid; ALTER TABLE ev RENAME COLUMN uid TO user_id`},
	{"SET SCHEMA", `CREATE SCHEMA other; ALTER TABLE ev SET SCHEMA other; CREATE TABLE ev AS SELECT * FROM other.ev`},
	{"TRUNCATE and reload", `CREATE TABLE ev_copy AS SELECT * FROM ev; TRUNCATE ev; INSERT INTO ev SELECT * FROM ev_copy WHERE user_id % 2 = 0`},
	{"REINDEX", `REINDEX TABLE ev`},
	{"GRANT on columns", `GRANT SELECT (country) ON ev TO PUBLIC`},
	{"capture function replaced", `CREATE OR REPLACE FUNCTION pgsketch.capture_ev_daily() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$`},
}

// TestAlterTableForms runs each of alterForms on a rolled-up table, then a
// write, and compares every answer with PostgreSQL's; a refresh then
// repairs the rollup or refuses with an error, and the answers still
// agree. What answered at each step is logged: docs/red-team.md's ledger.
func TestAlterTableForms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startProxy(t, server.adminURL, "--approx", "on")
	for _, f := range alterForms {
		if f.ddl == "" {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newTrustEnvBehind(t, p)
			e.answers(t, "clean", true)
			mustExec(t, e.conn, f.ddl)
			// A write of rows spread over the month, naming no column.
			mustExec(t, e.conn, `DELETE FROM ev WHERE ctid = ANY (ARRAY(SELECT ctid FROM ev ORDER BY ctid LIMIT 300))`)
			if _, err := e.conn.Exec(ctx, `SELECT 1 FROM ev LIMIT 1`); err != nil {
				t.Fatal(err)
			}
			before := e.agreeing(t, f.name)
			_, rerr := refresh.Refresh(ctx, pgsession.Conn{C: e.conn.PgConn()}, "ev_daily", refresh.Options{})
			after := e.agreeing(t, f.name+", then a refresh")
			refreshed := "refreshed"
			if rerr != nil {
				var pe *pgconn.PgError
				if !errors.As(rerr, &pe) {
					t.Fatalf("refresh: %v", rerr)
				}
				refreshed = "refresh refused (" + pe.Code + ")"
			}
			t.Logf("ledger | %s | %s | %s | %s", f.name, before, refreshed, after)
		})
	}
}

// newTrustEnvBehind is newTrustEnv behind proxy p, shared with others.
func newTrustEnvBehind(t *testing.T, p *proxyProc) *trustEnv {
	t.Helper()
	db, conn := catalogDB(t)
	mustExec(t, conn, trustTableSQL)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	e := &trustEnv{db: db, conn: conn, nc: connectSimple(t, p.URL(db.DSN)), p: p}
	e.wantInPlace(t, true)
	return e
}

// wantInPlace fails the test unless pgsketch.capture_in_place says want
// of ev_daily for the test's role.
func (e *trustEnv) wantInPlace(t *testing.T, want bool) {
	t.Helper()
	var got bool
	if err := e.conn.QueryRow(context.Background(), `SELECT in_place FROM pgsketch.capture_in_place WHERE rollup = 'ev_daily'`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("pgsketch.capture_in_place says in_place = %v, want %v (capture_broken: %q)", got, want, e.broken(t))
	}
}

// agreeing is agree, saying who answered: "rollup, right" (all from the
// rollup, right), "exact" (all by PostgreSQL), "mixed, right", or that
// PostgreSQL refuses the statements.
func (e *trustEnv) agreeing(t *testing.T, step string) string {
	t.Helper()
	switch n, err := e.check(t, step, nil); {
	case err != nil:
		return "PostgreSQL refuses the statement (" + err.Error() + ")"
	case n == len(trustQueries):
		return "rollup, right"
	case n == 0:
		return "exact"
	}
	return "mixed, right"
}

// TestTrustUpgrade: a rollup built and refreshed under catalog version 10
// is answered exactly after the upgrade (no definition of its source was
// recorded, and drift that happened before the upgrade must not be
// accepted), its capture function gets its error-trapping form at once (a
// renamed time column no longer blocks writes), its table its policy; its
// next refresh rebuilds it whole and it answers again.
func TestTrustUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn, m := migratedDB(t)
	migrateDownTo(t, m, 10)
	mustExec(t, conn, trustTableSQL)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	// Drift before the upgrade: a same-type rewrite no version 10 check sees.
	mustExec(t, conn, `ALTER TABLE ev ALTER COLUMN amount TYPE numeric(12,2) USING amount * 3`)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, server.adminURL, "--approx", "on")
	e := &trustEnv{db: db, conn: conn, nc: connectSimple(t, p.URL(db.DSN)), p: p}
	e.answers(t, "after the upgrade", false)
	if why := e.broken(t); !strings.Contains(why, "upgraded") {
		t.Fatalf("capture_broken %q, want it to say pgsketch was upgraded since the last refresh", why)
	}
	var rls bool
	if err := conn.QueryRow(ctx, `SELECT relrowsecurity FROM pg_class WHERE oid = 'ev_daily'::regclass`).Scan(&rls); err != nil || !rls {
		t.Fatalf("the rollup table has no row-level security after the upgrade (%v)", err)
	}
	mustExec(t, conn, `ALTER TABLE ev RENAME COLUMN created_at TO ts; INSERT INTO ev (ts, country, device, user_id, amount)
		VALUES ('2026-01-03 10:00+00', 'DE', 'web', 1, 1); ALTER TABLE ev RENAME COLUMN ts TO created_at`)
	res := refreshRollup(t, conn, "ev_daily", refresh.Options{})
	if res.RowsRead < 6000 {
		t.Fatalf("the first refresh after the upgrade read %d rows, want every row (a rebuild)", res.RowsRead)
	}
	sameAs(t, conn, "ev", "ev_daily")
	e.answers(t, "after the first refresh", true)

	// Down to version 10 and up again: writes go on throughout, and each
	// version's first refresh rebuilds the rollup.
	migrateDownTo(t, m, 10)
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-04 10:00+00', 'FR', 'ios', 2, 2)`)
	e.answers(t, "after migrating down", false)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	sameAs(t, conn, "ev", "ev_daily")
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-05 10:00+00', 'FR', 'ios', 3, 3)`)
	e.answers(t, "after migrating up again", false)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	sameAs(t, conn, "ev", "ev_daily")
	e.answers(t, "after its refresh", true)
}

// TestTrustUpgradeBrokenCapture: a rollup whose time column was renamed
// under catalog version 10, whose capture then failed every write to the
// table, no longer does after the upgrade: the writes go on, the rollup is
// answered exactly, and a refresh says why it cannot rebuild it.
func TestTrustUpgradeBrokenCapture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn, m := migratedDB(t)
	migrateDownTo(t, m, 10)
	mustExec(t, conn, trustTableSQL)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	mustExec(t, conn, `ALTER TABLE ev RENAME COLUMN created_at TO ts`)
	if _, err := conn.Exec(ctx, `INSERT INTO ev (ts, country, device, user_id, amount) VALUES ('2026-01-03 10:00+00', 'DE', 'web', 1, 1)`); err == nil {
		t.Fatal("under version 10 the write succeeded: the case tests nothing")
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, `INSERT INTO ev (ts, country, device, user_id, amount) VALUES ('2026-01-03 10:00+00', 'DE', 'web', 1, 1);
		UPDATE ev SET amount = amount + 1 WHERE ts < '2026-01-02'; DELETE FROM ev WHERE user_id = 2`)
	var why string
	if err := conn.QueryRow(ctx, `SELECT coalesce(capture_broken, '') FROM pgsketch.rollups WHERE name = 'ev_daily'`).Scan(&why); err != nil || why == "" {
		t.Fatalf("capture_broken %q (%v), want a reason", why, err)
	}
	if _, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, "ev_daily", refresh.Options{}); err == nil {
		t.Fatal("a refresh of a rollup whose time column is gone succeeded")
	}
}

// TestCaptureLogsOncePerTransaction: one-bucket statements of a
// transaction log their bucket once; a savepoint rolled back takes its log
// row and the memory of it back together, so a later write to that bucket
// is logged again, and the answers stay right. (Updates: a small insert's
// rows are copied, not logged.)
func TestCaptureLogsOncePerTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTrustEnv(t)
	mustExec(t, e.conn, `INSERT INTO ev SELECT '2026-01-05 10:00+00', 'DE', 'web', 80000 + i, 1 FROM generate_series(1, 3) i;
		INSERT INTO ev SELECT '2026-01-06 10:00+00', 'FR', 'web', 80000 + i, 1 FROM generate_series(4, 5) i`)
	refreshRollup(t, e.conn, "ev_daily", refresh.Options{})
	mustExec(t, e.conn, `BEGIN;
		UPDATE ev SET amount = amount + 1 WHERE user_id = 80001;
		UPDATE ev SET amount = amount + 1 WHERE user_id = 80002;
		UPDATE ev SET amount = amount + 1 WHERE user_id = 80003;
		SAVEPOINT s;
		UPDATE ev SET amount = amount + 1 WHERE user_id = 80004;
		ROLLBACK TO s;
		UPDATE ev SET amount = amount + 1 WHERE user_id = 80005;
		SAVEPOINT s2;
		UPDATE ev SET amount = amount + 1 WHERE user_id = 80005;
		ROLLBACK TO s2;
		COMMIT`)
	var day5, day6 int
	if err := e.conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE bucket = '2026-01-05 00:00+00'), count(*) FILTER (WHERE bucket = '2026-01-06 00:00+00')
		FROM pgsketch.rollup_dirty WHERE rollup = 'ev_daily'`).Scan(&day5, &day6); err != nil {
		t.Fatal(err)
	}
	if day5 != 1 || day6 != 1 {
		t.Fatalf("log rows: %d for January 5th, %d for the 6th; want one each", day5, day6)
	}
	e.answers(t, "after the transaction", true)
	e.repaired(t)
}

// TestCaptureMemoCannotBeForged: the setting in which a transaction
// remembers the bucket it logged is a pgsketch.* setting, which any
// session can set. Set by hand to a day before a DELETE and an UPDATE in
// that day, it made the capture function skip their log rows: answers
// from the rollup missed them until a full refresh. The setting now skips
// a log row only where the log holds one of this transaction's.
func TestCaptureMemoCannotBeForged(t *testing.T) {
	t.Parallel()
	e := newTrustEnv(t)
	mustExec(t, e.conn, `INSERT INTO ev SELECT '2026-01-05 10:00+00', 'DE', 'web', 82000 + i, 1 FROM generate_series(1, 20) i`)
	refreshRollup(t, e.conn, "ev_daily", refresh.Options{})
	e.answers(t, "after the refresh", true)
	mustExec(t, e.conn, `SELECT set_config(pgsketch.capture_logged_setting('ev_daily'), extract(epoch FROM timestamptz '2026-01-05 00:00+00')::text, false)`)
	mustExec(t, e.conn, `DELETE FROM ev WHERE user_id BETWEEN 82001 AND 82005`)
	mustExec(t, e.conn, `UPDATE ev SET amount = amount + 7 WHERE user_id BETWEEN 82006 AND 82010`)
	mustExec(t, e.conn, `BEGIN;
		SET LOCAL pgsketch.logged_ev_daily = '1767571200.000000';
		DELETE FROM ev WHERE user_id = 82011;
		COMMIT`)
	e.answers(t, "after writes under a setting set by hand", true)
	e.repaired(t)
}

// planKindQueries are one statement of every kind of plan the proxy
// answers from a rollup, over events, its rollup pk and table countries.
var planKindQueries = []struct{ kind, sql string }{
	{"single table", `SELECT country, count(DISTINCT user_id) AS users, sum(amount) AS total FROM events
		WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01' GROUP BY country ORDER BY country`},
	{"nested", `SELECT c.region, d.country, d.users FROM (SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country) AS d
		JOIN countries AS c ON c.code = d.country ORDER BY c.region NULLS FIRST, d.country`},
	{"star join", `SELECT c.region, count(DISTINCT e.user_id) AS users FROM events e JOIN countries c ON c.code = e.country
		GROUP BY c.region ORDER BY c.region`},
	{"overlap", `SELECT count(*) FROM (SELECT user_id FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01'
		INTERSECT SELECT user_id FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01') AS retained`},
	{"retention", `WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events)
		SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id
		AND b.week = a.week + interval '1 week' GROUP BY 1, 2 ORDER BY 1, 2`},
	{"top-k", `SELECT user_id, count(*) AS n FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01'
		GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
	{"first seen", `SELECT d, count(*) AS n FROM (SELECT user_id, min(created_at)::date AS d FROM events GROUP BY user_id) t
		GROUP BY d ORDER BY d`},
}

// fromRollup reports whether notices say a rollup answered.
func fromRollup(notices []string) bool {
	for _, n := range notices {
		if strings.HasPrefix(n, "pgsketch: ") && strings.Contains(n, "rollup ") &&
			!strings.Contains(n, "answered exactly by PostgreSQL") && !strings.Contains(n, "counted exactly:") {
			return true
		}
	}
	return false
}

// TestTrustEveryPlanKind: for a statement of every plan kind, answered
// from the rollup and its rows cached by the proxy (asked twice), losing
// SELECT on the source, a new row-level security policy on it and a
// column rewrite each make the next answer PostgreSQL's: the same rows, or
// the same error, as the role gets straight from PostgreSQL.
func TestTrustEveryPlanKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := eventsDB(t, 60_000, 60)
	reader := "pgsk_kinds_reader" + strings.TrimPrefix(db.Name, server.prefix)
	mustExec(t, conn, fmt.Sprintf(`CREATE INDEX ON events (created_at);
		CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL, region text);
		INSERT INTO countries SELECT DISTINCT country, 'name of ' || country, CASE WHEN country < 'I' THEN 'A' ELSE 'B' END FROM events WHERE country IS NOT NULL;
		DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s; GRANT SELECT ON events, countries TO %[1]s`, reader))
	dropRoleAtEnd(t, db.DSN, reader)
	createRollup(t, conn, "pk", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}',
		theta_columns => '{user_id}', topk_columns => '{user_id}', sum_columns => '{amount}'`)
	mustExec(t, conn, `SELECT pgsketch.add_first_seen('pk', 'user_id')`)
	refreshRollup(t, conn, "pk", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	nc := connectSimple(t, p.URL(db.DSN))
	mustExec(t, nc.Conn, "SET ROLE "+reader+"; SET pgsketch.topk = approx")
	direct := connectSimple(t, db.DSN)
	mustExec(t, direct.Conn, "SET ROLE "+reader)

	// warm asks every statement twice and requires a rollup's answer.
	warm := func(step string) {
		t.Helper()
		for _, k := range planKindQueries {
			for range 2 {
				got, err := nc.query(ctx, k.sql)
				if err != nil || !fromRollup(got.notices) {
					t.Fatalf("%s: %s: not answered from the rollup: %v %v\n%s", step, k.kind, err, got, p.Log())
				}
			}
		}
	}
	// postgres requires PostgreSQL's answer (or error) to every statement.
	postgres := func(step string) {
		t.Helper()
		for _, k := range planKindQueries {
			want, werr := direct.query(ctx, k.sql)
			got, gerr := nc.query(ctx, k.sql)
			var wpe, gpe *pgconn.PgError
			switch {
			case werr != nil || gerr != nil:
				if !errors.As(werr, &wpe) || !errors.As(gerr, &gpe) || wpe.Code != gpe.Code {
					t.Fatalf("%s: %s: proxy %v, PostgreSQL %v", step, k.kind, gerr, werr)
				}
			case fromRollup(got.notices):
				t.Fatalf("%s: %s: answered from the rollup: %q", step, k.kind, got.notices)
			case fmt.Sprint(got.rows) != fmt.Sprint(want.rows):
				t.Fatalf("%s: %s: rows %v, PostgreSQL's %v", step, k.kind, got.rows, want.rows)
			}
		}
	}

	warm("clean")
	mustExec(t, conn, "REVOKE SELECT ON events FROM "+reader)
	postgres("SELECT revoked")
	mustExec(t, conn, "GRANT SELECT ON events TO "+reader)
	warm("SELECT granted again")

	mustExec(t, conn, fmt.Sprintf(`ALTER TABLE events ENABLE ROW LEVEL SECURITY;
		CREATE POLICY two_countries ON events FOR SELECT TO %s USING (country IN ('DE', 'US'))`, reader))
	postgres("a row-level security policy")
	mustExec(t, conn, `DROP POLICY two_countries ON events; ALTER TABLE events DISABLE ROW LEVEL SECURITY`)
	warm("row-level security disabled again")

	mustExec(t, conn, `ALTER TABLE events ALTER COLUMN user_id TYPE bigint USING user_id + 1`)
	postgres("a column rewrite")
	refreshRollup(t, conn, "pk", refresh.Options{})
	warm("refreshed")
}

// TestDistributedSourceRefused: a source Citus holds in its metadata other
// than distributed by hash (here a stand-in for Citus's catalog,
// pg_catalog.pg_dist_partition, listing it as a reference table) gets no
// rollup and no trigger, and a rollup made before is answered exactly and
// not refreshed. (Sources distributed by hash are captured: the Citus
// suite, citus_test.)
func TestDistributedSourceRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTrustEnv(t)
	mustExec(t, e.conn, `SET allow_system_table_mods = on;
		CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass NOT NULL, partmethod "char" NOT NULL DEFAULT 'n', repmodel "char" NOT NULL DEFAULT 's',
			partkey text, colocationid integer NOT NULL DEFAULT 0);
		RESET allow_system_table_mods;
		INSERT INTO pg_catalog.pg_dist_partition VALUES ('ev')`)
	e.answers(t, "distributed", false)
	if why := e.broken(t); !strings.Contains(why, "Citus") {
		t.Fatalf("capture_broken %q, want it to name Citus", why)
	}
	_, err := refresh.Refresh(ctx, pgsession.Conn{C: e.conn.PgConn()}, "ev_daily", refresh.Options{})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" {
		t.Fatalf("refresh of a rollup on a distributed table: %v, want SQLSTATE 0A000", err)
	}
	var triggers int
	mustExec(t, e.conn, `SELECT pgsketch.drop_rollup('ev_daily')`)
	_, err = e.conn.Exec(ctx, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	if !errors.As(err, &pe) || pe.Code != "0A000" {
		t.Fatalf("create_rollup on a distributed table: %v, want SQLSTATE 0A000", err)
	}
	if err := e.conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'ev'::regclass`).Scan(&triggers); err != nil || triggers != 0 {
		t.Fatalf("%d triggers left on the distributed table (%v)", triggers, err)
	}
	mustExec(t, e.conn, `INSERT INTO ev VALUES ('2026-01-02 10:00+00', 'DE', 'web', 1, 1)`)
}

// TestDistributedRollupTableRefused: a rollup whose table (or a level
// table) Citus distributes (a stand-in for Citus's catalog here) is
// answered exactly and refused by a refresh, saying to keep it local:
// pgsketch keeps rollup tables local on the coordinator (docs/citus.md).
func TestDistributedRollupTableRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTrustEnv(t)
	mustExec(t, e.conn, `SELECT pgsketch.add_rollup_level('ev_daily', 'week')`)
	refreshRollup(t, e.conn, "ev_daily", refresh.Options{})
	e.answers(t, "local", true)
	mustExec(t, e.conn, `SET allow_system_table_mods = on;
		CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass NOT NULL, partmethod "char" NOT NULL DEFAULT 'n', repmodel "char" NOT NULL DEFAULT 's',
			partkey text, colocationid integer NOT NULL DEFAULT 0);
		RESET allow_system_table_mods`)
	for _, tbl := range []string{"ev_daily", "ev_daily_week"} {
		mustExec(t, e.conn, `TRUNCATE pg_catalog.pg_dist_partition; INSERT INTO pg_catalog.pg_dist_partition VALUES ('`+tbl+`')`)
		e.answers(t, tbl+" distributed", false)
		if why := e.broken(t); !strings.Contains(why, tbl+" is distributed by Citus") {
			t.Fatalf("%s distributed: capture_broken %q, want it to name the table and Citus", tbl, why)
		}
		_, err := refresh.Refresh(ctx, pgsession.Conn{C: e.conn.PgConn()}, "ev_daily", refresh.Options{})
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Message, "keeps rollup tables local") {
			t.Fatalf("refresh with %s distributed: %v, want SQLSTATE 0A000", tbl, err)
		}
	}
	mustExec(t, e.conn, `TRUNCATE pg_catalog.pg_dist_partition`)
	e.repaired(t)
}

// TestCaptureWithoutCatalog: Citus copies a distributed table's triggers
// onto its shards and pgsketch's functions onto the workers, where
// pgsketch's catalog does not exist. Here the same on one server: a
// database without the catalog gets a rollup's capture function and
// triggers as Citus would copy them; every kind of write to the table
// succeeds (each failed with "relation pgsketch.rollup_dirty does not
// exist" before catalog version 12), and nothing is logged.
func TestCaptureWithoutCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTrustEnv(t)
	var fn string
	if err := e.conn.QueryRow(ctx, `SELECT pg_get_functiondef('pgsketch.capture_ev_daily()'::regprocedure)`).Scan(&fn); err != nil {
		t.Fatal(err)
	}
	rows, err := e.conn.Query(ctx, `SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'ev'::regclass AND tgname LIKE 'pgsketch\_%' ORDER BY tgname`)
	if err != nil {
		t.Fatal(err)
	}
	triggers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(triggers) != 4 {
		t.Fatalf("capture triggers: %q (%v), want 4", triggers, err)
	}
	worker := newTestDB(t).Conn(t)
	mustExec(t, worker, trustTableSQL)
	mustExec(t, worker, `CREATE SCHEMA pgsketch`)
	mustExec(t, worker, fn)
	for _, tg := range triggers {
		mustExec(t, worker, tg)
	}
	for _, w := range []string{
		`INSERT INTO ev VALUES ('2026-01-02 10:00+00', 'DE', 'web', 1, 1)`,
		`INSERT INTO ev SELECT created_at + interval '1 hour', country, device, user_id + 5000, amount FROM ev`,
		`UPDATE ev SET amount = amount + 1 WHERE created_at < '2026-01-05'`,
		`DELETE FROM ev WHERE created_at >= '2026-01-20'`,
		`COPY ev FROM PROGRAM 'echo 2026-01-11 10:00+00,DE,ios,90002,4' (FORMAT csv)`,
		`TRUNCATE ev`,
	} {
		if _, err := worker.Exec(ctx, w); err != nil {
			t.Errorf("%s on a table with pgsketch's triggers but no catalog: %v", w, err)
		}
	}
	var n int
	if err := worker.QueryRow(ctx, `SELECT count(*) FROM ev`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after TRUNCATE (%v)", n, err)
	}
	var tables int
	if err := worker.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = 'pgsketch'::regnamespace`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("%d relations in schema pgsketch (%v), want none", tables, err)
	}
}

// TestCaptureOnShardsUpgrade: migrating from catalog version 11 to 12
// rewrites every rollup's capture function (in the form that returns at
// once without the catalog) and costs no rollup its answers nor its next
// refresh a rebuild: a captured relation recorded as it is has its record
// follow the new function, one that changed before the upgrade stays
// changed (exact answers until a rebuild). Down to version 11 the same
// with version 11's function, but for a rollup whose source Citus
// distributes (a stand-in for Citus's catalog here), whose function keeps
// the new form; dropping that rollup removes its triggers and function.
func TestCaptureOnShardsUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn, m := migratedDB(t)
	migrateDownTo(t, m, 11)
	mustExec(t, conn, trustTableSQL)
	mustExec(t, conn, `CREATE TABLE drifted AS SELECT * FROM ev; CREATE TABLE spread AS SELECT * FROM ev`)
	for _, r := range []string{"ev", "drifted", "spread"} {
		mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.create_rollup('%s_daily', '%s', 'created_at', %s)`, r, r, captureArgs))
		refreshRollup(t, conn, r+"_daily", refresh.Options{})
	}
	mustExec(t, conn, `ALTER TABLE drifted ALTER COLUMN amount TYPE numeric(12,2) USING amount * 3`)
	guarded := func(r string) bool {
		t.Helper()
		var src string
		if err := conn.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE oid = $1::regprocedure`, "pgsketch.capture_"+r+"()").Scan(&src); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(src, "to_regclass('pgsketch.rollup_defs') IS NULL")
	}
	broken := func(r string) string {
		t.Helper()
		var why *string
		if err := conn.QueryRow(ctx, `SELECT capture_broken FROM pgsketch.rollups WHERE name = $1`, r).Scan(&why); err != nil {
			t.Fatal(err)
		}
		if why == nil {
			return ""
		}
		return *why
	}
	if guarded("ev_daily") {
		t.Fatal("the capture function of version 11 already returns without the catalog: the case tests nothing")
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, server.adminURL, "--approx", "on")
	e := &trustEnv{db: db, conn: conn, nc: connectSimple(t, p.URL(db.DSN)), p: p}
	for _, r := range []string{"ev_daily", "drifted_daily", "spread_daily"} {
		if !guarded(r) {
			t.Fatalf("%s: the capture function after the upgrade does not return without the catalog", r)
		}
	}
	if why := broken("ev_daily"); why != "" {
		t.Fatalf("ev_daily after the upgrade: capture_broken %q, want none", why)
	}
	if why := broken("drifted_daily"); !strings.Contains(why, "altered") {
		t.Fatalf("drifted_daily after the upgrade: capture_broken %q, want the change made before it", why)
	}
	e.answers(t, "after the upgrade", true)
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-04 10:00+00', 'FR', 'ios', 9001, 2)`)
	e.answers(t, "after a write", true)
	if res := refreshRollup(t, conn, "ev_daily", refresh.Options{}); res.RowsRead >= 6000 {
		t.Fatalf("the first refresh after the upgrade read %d rows, want an incremental refresh", res.RowsRead)
	}
	sameAs(t, conn, "ev", "ev_daily")

	// Down to version 11, with spread distributed.
	mustExec(t, conn, `SET allow_system_table_mods = on;
		CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass NOT NULL, partmethod "char" NOT NULL DEFAULT 'n', repmodel "char" NOT NULL DEFAULT 's',
			partkey text, colocationid integer NOT NULL DEFAULT 0);
		RESET allow_system_table_mods;
		INSERT INTO pg_catalog.pg_dist_partition VALUES ('spread')`)
	migrateDownTo(t, m, 11)
	if guarded("ev_daily") || !guarded("spread_daily") {
		t.Fatalf("after down to version 11: ev_daily's function returns without the catalog %v (want false), spread_daily's %v (want true)",
			guarded("ev_daily"), guarded("spread_daily"))
	}
	if why := broken("ev_daily"); why != "" {
		t.Fatalf("ev_daily after down to version 11: capture_broken %q, want none", why)
	}
	e.answers(t, "after down to version 11", true)
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-05 10:00+00', 'FR', 'ios', 9002, 2)`)
	e.answers(t, "after a write at version 11", true)
	if res := refreshRollup(t, conn, "ev_daily", refresh.Options{}); res.RowsRead >= 6000 {
		t.Fatalf("the first refresh after down to version 11 read %d rows, want an incremental refresh", res.RowsRead)
	}
	sameAs(t, conn, "ev", "ev_daily")
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, `SELECT pgsketch.drop_rollup('spread_daily')`)
	var left int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'spread'::regclass)
		+ (SELECT count(*) FROM pg_proc WHERE proname = 'capture_spread_daily')`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d triggers and functions of spread_daily left after drop_rollup (%v)", left, err)
	}
}

// TestCaptureDDLWaitsBriefly: a refresh that must install capture triggers
// while a long transaction writes the source waits at most
// pgsketch.ddl_lock_timeout for its lock, then fails (the next refresh
// tries again), so the application's writers never queue behind it for
// longer.
func TestCaptureDDLWaitsBriefly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTrustEnv(t)
	mustExec(t, e.conn, `DROP TRIGGER pgsketch_ev_daily_ins ON ev`)
	long := e.db.Conn(t)
	mustExec(t, long, `BEGIN; INSERT INTO ev VALUES ('2026-01-02 10:00+00', 'DE', 'web', 1, 1)`)
	mustExec(t, e.conn, `SET pgsketch.ddl_lock_timeout = '300ms'`)
	t0 := time.Now()
	_, err := refresh.Refresh(ctx, pgsession.Conn{C: e.conn.PgConn()}, "ev_daily", refresh.Options{})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Fatalf("refresh behind a long transaction: %v, want SQLSTATE 55P03 (lock timeout)", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("the refresh waited %s", d)
	}
	mustExec(t, long, `COMMIT`)
	e.answers(t, "a trigger missing", false)
	e.repaired(t)
}

// TestCaptureTakesNoSubtransactionIDs: the capture function's error trap is
// a subtransaction that only reads (the log row and the copy of a small
// insert's rows are written outside it), so 201 captured statements in one
// transaction assign no transaction ID but the transaction's own: the
// subtransaction cache never overflows, however many statements a
// transaction holds. Transaction IDs are counted on the server's counter
// around the transaction, so the test does not run beside the parallel
// ones.
func TestCaptureTakesNoSubtransactionIDs(t *testing.T) {
	ctx := context.Background()
	e := newTrustEnv(t)
	other := e.db.Conn(t)
	next := func() int64 {
		t.Helper()
		var x int64
		if err := other.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := next()
	mustExec(t, e.conn, `BEGIN`)
	for i := range 200 {
		mustExec(t, e.conn, fmt.Sprintf(`INSERT INTO ev VALUES ('2026-01-%02d 10:00+00', 'DE', 'web', %d, 1)`, 1+i%28, i))
	}
	mustExec(t, e.conn, `UPDATE ev SET amount = amount + 1 WHERE created_at < '2026-01-03'`)
	mustExec(t, e.conn, `COMMIT`)
	// One for the transaction, one for next's own; a few for anything else
	// on the server (autovacuum, the proxy's catalog reads assign none).
	if used := next() - before; used > 6 {
		t.Fatalf("%d transaction IDs assigned around 201 captured statements in one transaction, want 2", used)
	}
	// Every statement captured: the inserts' rows copied, the update's
	// buckets logged.
	var copied, logged int
	if err := e.conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pgsketch.inserts_ev_daily),
		(SELECT count(*) FROM pgsketch.rollup_dirty WHERE rollup = 'ev_daily')`).Scan(&copied, &logged); err != nil || copied != 200 || logged == 0 {
		t.Fatalf("%d inserted rows copied, %d log rows (%v); want 200 and the update's", copied, logged, err)
	}
}

// TestAnswerCallsNoCheckFunction: where the rollup's capture is in place,
// an answer passes its capture check by reading the view
// pgsketch.capture_in_place, and PostgreSQL runs no PL/pgSQL check
// function for it (a new backend has none to compile). The function's
// calls are counted by track_functions, flushed when the proxy's session
// ends; the one call made by hand in that session shows the count works.
func TestAnswerCallsNoCheckFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTrustEnv(t)
	mustExec(t, e.conn, `ALTER DATABASE `+pgx.Identifier{e.db.Name}.Sanitize()+` SET track_functions = 'pl'`)
	calls := func() int64 {
		t.Helper()
		var n int64
		if err := e.conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
			 WHERE schemaname = 'pgsketch' AND funcname = 'capture_check_inserts'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const app = "pgsketch-in-place"
	sessions := func() int {
		t.Helper()
		var n int
		if err := e.conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := calls()
	u := e.p.URL(e.db.DSN)
	if strings.Contains(u, "?") {
		u += "&application_name=" + app
	} else {
		u += "?application_name=" + app
	}
	nc := connectSimple(t, u)
	if sessions() != 1 {
		t.Fatalf("%d sessions named %s, want the proxy's one", sessions(), app)
	}
	for i := range 3 {
		for _, q := range trustQueries {
			got, err := nc.query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], "approximated from rollup ev_daily") {
				t.Fatalf("answer %d: notices %q, want the rollup's", i, got.notices)
			}
		}
	}
	mustExec(t, nc.Conn, `SELECT pgsketch.capture_check_inserts('ev_daily', NULL, NULL)`)
	nc.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for sessions() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the proxy's session did not end")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := calls() - before; got != 1 {
		t.Fatalf("pgsketch.capture_check_inserts called %d times in the proxy's session, want 1 (the call by hand; none for the %d answers)",
			got, 3*len(trustQueries))
	}
}

// TestInPlaceCheckNamesQualified: the fetch counts the range's changed
// buckets itself, under the session's search_path, where a temporary type
// is found before pg_catalog's. Every name it writes is qualified, so a
// type named timestamptz with casts that move the range's end does not
// hide the buckets: a range with more changed buckets than an answer may
// read from the base table is still answered exactly.
func TestInPlaceCheckNamesQualified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	mustExec(t, conn, trustTableSQL)
	// A row in each of 100 hours.
	mustExec(t, conn, `INSERT INTO ev SELECT timestamptz '2026-01-02' + i * interval '1 hour', 'DE', 'web', i, 1 FROM generate_series(1, 100) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_hourly', 'ev', 'created_at', grain => 'hour', dimensions => '{country}',
		distinct_columns => '{user_id}')`)
	refreshRollup(t, conn, "ev_hourly", refresh.Options{})
	mustExec(t, conn, `UPDATE ev SET amount = amount + 1`) // every bucket changed
	p := startProxy(t, server.adminURL, "--approx", "on")
	nc := connectSimple(t, p.URL(db.DSN))
	exact := func(step string) {
		t.Helper()
		nc.notices = nil
		got, err := nc.query(ctx, `SELECT count(DISTINCT user_id) AS users FROM ev`)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "rollup ev_hourly not used") ||
			!strings.Contains(got.notices[0], "(more than 64)") {
			t.Fatalf("%s: notices %q, want ev_hourly not used for too many changed buckets", step, got.notices)
		}
	}
	exact("a plain session")
	mustExec(t, nc.Conn, `CREATE TYPE pg_temp.timestamptz AS (v pg_catalog.timestamptz);
		CREATE FUNCTION pg_temp.to_t(pg_catalog.timestamptz) RETURNS pg_temp.timestamptz
			LANGUAGE sql AS 'SELECT ROW($1)::pg_temp.timestamptz';
		CREATE FUNCTION pg_temp.from_t(pg_temp.timestamptz) RETURNS pg_catalog.timestamptz
			LANGUAGE sql AS $$SELECT '-infinity'::pg_catalog.timestamptz$$;
		CREATE CAST (pg_catalog.timestamptz AS pg_temp.timestamptz) WITH FUNCTION pg_temp.to_t(pg_catalog.timestamptz);
		CREATE CAST (pg_temp.timestamptz AS pg_catalog.timestamptz) WITH FUNCTION pg_temp.from_t(pg_temp.timestamptz) AS IMPLICIT`)
	exact("a session with a temporary type named timestamptz")
}
