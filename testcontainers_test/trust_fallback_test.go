package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
)

// fallbackEnv is a database with table ev (a daily rollup ev_daily over
// it) and ev_plain (the same rows, no rollup), and a proxy in front of it
// serving its status page.
type fallbackEnv struct {
	db       *testDB
	conn     *pgx.Conn // the database's owner, directly
	p        *proxyProc
	httpAddr string
	// rollupTable is ev_daily's table, as pgsketch.rollup_defs names it.
	rollupTable string
}

func newFallbackEnv(t *testing.T) *fallbackEnv {
	t.Helper()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE ev (created_at timestamptz NOT NULL, country text, device text, user_id bigint);
		INSERT INTO ev SELECT timestamptz '2026-01-01' + (i % 20) * interval '1 day' + (i % 86399) * interval '1 second',
			(ARRAY['DE','FR','US'])[1 + i % 3], (ARRAY['ios','web'])[1 + (i / 3) % 2], (i * 7919) % 6000
		  FROM generate_series(1, 30000) i;
		CREATE TABLE ev_plain AS SELECT * FROM ev;
		ANALYZE ev; ANALYZE ev_plain`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', grain => 'day',
		dimensions => '{country,device}', distinct_columns => '{user_id}')`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	e := &fallbackEnv{db: db, conn: conn}
	if err := conn.QueryRow(context.Background(), `SELECT format('%I.%I', rollup_schema, rollup_table)
		FROM pgsketch.rollup_defs WHERE name = 'ev_daily'`).Scan(&e.rollupTable); err != nil {
		t.Fatal(err)
	}
	// No cache: a rollup table changed behind the catalog's back is read
	// again.
	e.p = startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "0", "--http-listen", "127.0.0.1:0")
	e.httpAddr = e.p.httpAddr(t)
	return e
}

var fallbackCountRE = regexp.MustCompile(`id="fallbacks-([a-z_]+)">(\d+)<`)

// fallbacks reads the status page's fallback counts by reason.
func (e *fallbackEnv) fallbacks(t *testing.T) map[string]int {
	t.Helper()
	body, _ := httpGet(t, e.httpAddr, "/")
	out := map[string]int{}
	for _, m := range fallbackCountRE.FindAllStringSubmatch(body, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(out) == 0 {
		t.Fatalf("the status page shows no fallback counts:\n%s", body)
	}
	return out
}

// sameExact checks an answer PostgreSQL computed exactly through the
// proxy against the direct one: columns (names and types) and rows.
func sameExact(got, want *answer) error {
	if len(got.fields) != len(want.fields) {
		return fmt.Errorf("%d columns, want %d", len(got.fields), len(want.fields))
	}
	for i := range got.fields {
		g, w := got.fields[i], want.fields[i]
		if g.Name != w.Name || g.DataTypeOID != w.DataTypeOID {
			return fmt.Errorf("column %d is %s (type %d), want %s (type %d)", i+1, g.Name, g.DataTypeOID, w.Name, w.DataTypeOID)
		}
	}
	if fmt.Sprint(got.rows, got.nulls) != fmt.Sprint(want.rows, want.nulls) {
		return fmt.Errorf("rows %q, want %q", got.rows, want.rows)
	}
	return nil
}

// TestApproxForms: APPROX_COUNT_DISTINCT(DISTINCT x) and
// APPROX_COUNT_DISTINCT(x) FILTER (WHERE ...), which PostgreSQL does not
// know, are answered from the rollup over ev (within 5 standard errors of
// PostgreSQL's COUNT(DISTINCT)) and counted exactly over ev_plain, which
// has none (PostgreSQL's COUNT(DISTINCT), equal), in the simple protocol
// and with prepared statements, alone and in a text of several
// statements; with joins and WITH too. A form pgsketch does not support
// fails with SQLSTATE 0A000 saying what it supports, never with
// PostgreSQL's "function approx_count_distinct does not exist".
func TestApproxForms(t *testing.T) {
	t.Parallel()
	e := newFallbackEnv(t)
	ctx := context.Background()
	direct := connectSimple(t, e.db.DSN)
	conns := map[string]*noticeConn{
		"simple":   connectSimple(t, e.p.URL(e.db.DSN)),
		"prepared": connectMode(t, e.p.URL(e.db.DSN), pgx.QueryExecModeCacheStatement),
	}
	type form struct{ sql, exact string }
	forms := []form{
		{`SELECT approx_count_distinct(DISTINCT user_id) AS users FROM %s`, `SELECT count(DISTINCT user_id) AS users FROM %s`},
		{`SELECT device, approx_count_distinct(DISTINCT user_id) AS users FROM %s GROUP BY device ORDER BY device`,
			`SELECT device, count(DISTINCT user_id) AS users FROM %s GROUP BY device ORDER BY device`},
		{`SELECT approx_count_distinct(user_id) FILTER (WHERE country = 'DE') AS users FROM %s`,
			`SELECT count(DISTINCT user_id) FILTER (WHERE country = 'DE') AS users FROM %s`},
		{`SELECT device, approx_count_distinct(DISTINCT user_id) FILTER (WHERE country <> 'US') AS users FROM %s GROUP BY device ORDER BY device`,
			`SELECT device, count(DISTINCT user_id) FILTER (WHERE country <> 'US') AS users FROM %s GROUP BY device ORDER BY device`},
	}
	for mode, nc := range conns {
		for _, f := range forms {
			for _, table := range []string{"ev", "ev_plain"} {
				sql, exactSQL := fmt.Sprintf(f.sql, table), fmt.Sprintf(f.exact, table)
				want, err := direct.query(ctx, exactSQL)
				if err != nil {
					t.Fatalf("direct: %v\n%s", err, exactSQL)
				}
				got, err := nc.query(ctx, sql)
				if err != nil {
					t.Fatalf("%s: %v\n%s\n%s", mode, err, sql, e.p.Log())
				}
				if table == "ev" {
					if len(got.notices) != 1 || !strings.Contains(got.notices[0], "approximated from rollup ev_daily") {
						t.Errorf("%s: %s: not answered from the rollup: notices %q", mode, sql, got.notices)
					}
					errs, err := compareRollupAnswer(got, want)
					if err != nil {
						t.Errorf("%s: %s: %v", mode, sql, err)
					}
					for _, x := range errs {
						if x > 5 {
							t.Errorf("%s: %s: %.1f standard errors off: %q, exact %q", mode, sql, x, got.rows, want.rows)
						}
					}
					continue
				}
				if err := sameExact(got, want); err != nil {
					t.Errorf("%s: %s: %v", mode, sql, err)
				}
				if mode == "simple" && (len(got.notices) != 1 || !strings.Contains(got.notices[0], "APPROX_COUNT_DISTINCT counted exactly")) {
					t.Errorf("%s: %s: notices %q, want one saying it was counted exactly", mode, sql, got.notices)
				}
			}
		}
		// What no planner reprints is counted exactly as written, with
		// the column names PostgreSQL would have given.
		for _, q := range []form{
			{`SELECT approx_count_distinct(DISTINCT user_id) FROM ev_plain`, `SELECT count(DISTINCT user_id) AS approx_count_distinct FROM ev_plain`},
			{`SELECT v.c AS country, approx_count_distinct(e.user_id) FROM ev_plain e JOIN (VALUES ('DE'), ('FR')) v(c) ON v.c = e.country GROUP BY 1 ORDER BY 1`,
				`SELECT v.c AS country, count(DISTINCT e.user_id) AS approx_count_distinct FROM ev_plain e JOIN (VALUES ('DE'), ('FR')) v(c) ON v.c = e.country GROUP BY 1 ORDER BY 1`},
			{`WITH x AS (SELECT country, approx_count_distinct(user_id) FILTER (WHERE device = 'ios') AS users FROM ev_plain GROUP BY 1) SELECT * FROM x ORDER BY 1`,
				`WITH x AS (SELECT country, count(DISTINCT user_id) FILTER (WHERE device = 'ios') AS users FROM ev_plain GROUP BY 1) SELECT * FROM x ORDER BY 1`},
		} {
			want, err := direct.query(ctx, q.exact)
			if err != nil {
				t.Fatalf("direct: %v\n%s", err, q.exact)
			}
			got, err := nc.query(ctx, q.sql)
			if err != nil {
				t.Errorf("%s: %s: %v", mode, q.sql, err)
				continue
			}
			if err := sameExact(got, want); err != nil {
				t.Errorf("%s: %s: %v", mode, q.sql, err)
			}
		}
		// Forms pgsketch does not support: its error, with a hint.
		for _, sql := range []string{`SELECT approx_count_distinct(*) FROM ev`, `SELECT approx_count_distinct(user_id) OVER () FROM ev_plain LIMIT 1`,
			`SELECT approx_count_distinct(user_id, 2) FROM ev_plain`} {
			_, err := nc.query(ctx, sql)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.HasPrefix(pe.Message, "pgsketch: ") ||
				strings.Contains(pe.Message, "does not exist") || !strings.Contains(pe.Hint, "APPROX_COUNT_DISTINCT(DISTINCT x)") {
				t.Errorf("%s: %s: %v, want SQLSTATE 0A000 from pgsketch", mode, sql, err)
			}
		}
		// In a transaction block the refusal aborts it, as an error does.
		mustExec(t, nc.Conn, "BEGIN")
		_, err := nc.query(ctx, `SELECT approx_count_distinct(*) FROM ev_plain`)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "0A000" || nc.PgConn().TxStatus() != 'E' {
			t.Errorf("%s: in a block: %v, status %c", mode, err, nc.PgConn().TxStatus())
		}
		mustExec(t, nc.Conn, "ROLLBACK")
	}

	// A text of several statements.
	simple := conns["simple"]
	exact, err := direct.query(ctx, `SELECT count(DISTINCT user_id) FILTER (WHERE country = 'DE') FROM ev_plain`)
	if err != nil {
		t.Fatal(err)
	}
	got := runMulti(t, simple, `SELECT 1; SELECT approx_count_distinct(DISTINCT user_id) FILTER (WHERE country = 'DE') FROM ev_plain`)
	if got.err != nil || len(got.rows) != 2 || len(got.rows[1]) != 1 || got.rows[1][0][0] != exact.rows[0][0] || got.status != 'I' {
		t.Errorf("a text with a substitute: %+v, want %q", got, exact.rows)
	}
	got = runMulti(t, simple, `SELECT 1; SELECT approx_count_distinct(*) FROM ev; SELECT 2`)
	if got.err == nil || got.err.Code != "0A000" || len(got.tags) != 1 || got.status != 'I' {
		t.Errorf("a text with an unsupported form: %+v", got)
	}
}

// TestRollupFallback: a rollup answer that fails when it runs (the role
// may not read the rollup table; a sketch in it is corrupt; the change
// capture is off) is answered exactly by PostgreSQL, the
// APPROX_COUNT_DISTINCT of the statement counted as COUNT(DISTINCT), after
// a NOTICE saying which rollup was not used, why (the error, its
// SQLSTATE) and that PostgreSQL answered exactly; in the simple protocol
// and with prepared statements, in and out of a transaction block. The
// status page counts each fallback under its reason.
func TestRollupFallback(t *testing.T) {
	t.Parallel()
	e := newFallbackEnv(t)
	ctx := context.Background()
	reader := "pgsk_fallback_reader" + strings.TrimPrefix(e.db.Name, server.prefix)
	mustExec(t, e.conn, fmt.Sprintf(`DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s; GRANT USAGE ON SCHEMA pgsketch TO %[1]s;
		GRANT SELECT ON ev, pgsketch.rollup_defs TO %[1]s; GRANT SELECT ON %[2]s, pgsketch.inserts_ev_daily TO %[1]s`, reader, e.rollupTable))
	dropRoleAtEnd(t, e.db.DSN, reader)
	direct := connectSimple(t, e.db.DSN)
	conns := map[string]*noticeConn{
		"simple":   connectSimple(t, e.p.URL(e.db.DSN)),
		"prepared": connectMode(t, e.p.URL(e.db.DSN), pgx.QueryExecModeCacheStatement),
	}
	for _, nc := range conns {
		mustExec(t, nc.Conn, "SET ROLE "+reader)
	}
	queries := []struct{ sql, exact string }{
		{`SELECT country, count(DISTINCT user_id) AS users FROM ev GROUP BY country ORDER BY country`,
			`SELECT country, count(DISTINCT user_id) AS users FROM ev GROUP BY country ORDER BY country`},
		{`SELECT country, approx_count_distinct(user_id) AS users FROM ev GROUP BY country ORDER BY country`,
			`SELECT country, count(DISTINCT user_id) AS users FROM ev GROUP BY country ORDER BY country`},
		{`SELECT approx_count_distinct(DISTINCT user_id) AS users FROM ev WHERE device = 'ios'`,
			`SELECT count(DISTINCT user_id) AS users FROM ev WHERE device = 'ios'`},
	}
	// check runs every query on every connection (in a transaction block
	// when inBlock) and wants the rollup's answer, or, when notice is set,
	// PostgreSQL's exact one after one NOTICE holding every part of
	// notice; it returns the number of fallbacks.
	check := func(step string, inBlock bool, notice ...string) int {
		t.Helper()
		n := 0
		for mode, nc := range conns {
			if inBlock {
				mustExec(t, nc.Conn, "BEGIN")
			}
			for _, q := range queries {
				want, err := direct.query(ctx, q.exact)
				if err != nil {
					t.Fatal(err)
				}
				got, err := nc.query(ctx, q.sql)
				if err != nil {
					t.Fatalf("%s, %s: %s: %v\n%s", step, mode, q.sql, err, e.p.Log())
				}
				if len(notice) == 0 {
					if _, err := compareRollupAnswer(got, want); err != nil || len(got.notices) != 1 || !strings.Contains(got.notices[0], "approximated from rollup ev_daily") {
						t.Fatalf("%s, %s: %s: %v; notices %q, want the rollup's answer", step, mode, q.sql, err, got.notices)
					}
					continue
				}
				n++
				if err := sameExact(got, want); err != nil {
					t.Errorf("%s, %s: %s: %v, want PostgreSQL's exact answer", step, mode, q.sql, err)
				}
				ok := len(got.notices) == 1
				for _, part := range append(notice, "answered exactly by PostgreSQL") {
					ok = ok && strings.Contains(got.notices[0], part)
				}
				if !ok {
					t.Errorf("%s, %s: %s: notices %q, want one with %q", step, mode, q.sql, got.notices, notice)
				}
			}
			if inBlock {
				if st := nc.PgConn().TxStatus(); st != 'T' {
					t.Errorf("%s, %s: transaction status %c after the fallbacks, want T", step, mode, st)
				}
				mustExec(t, nc.Conn, "COMMIT")
			}
		}
		return n
	}
	check("SELECT on the rollup table", false)

	// SELECT on the rollup table revoked: the fetch fails with 42501.
	mustExec(t, e.conn, fmt.Sprintf(`REVOKE SELECT ON %s FROM %s`, e.rollupTable, reader))
	privilege := check("without SELECT on the rollup table", false, "pgsketch: rollup ev_daily not used: permission denied", "(SQLSTATE 42501)")
	privilege += check("without SELECT on the rollup table, in a transaction block", true, "permission denied", "(SQLSTATE 42501)")
	if got := e.fallbacks(t); got["privilege"] != privilege {
		t.Errorf("status page: %v, want %d under privilege", got, privilege)
	}
	mustExec(t, e.conn, fmt.Sprintf(`GRANT SELECT ON %s TO %s`, e.rollupTable, reader))
	check("SELECT granted again", false)

	// A corrupt sketch: the proxy cannot merge it.
	mustExec(t, e.conn, fmt.Sprintf(`UPDATE %s SET distinct_user_id = '\x0102'::bytea WHERE country = 'DE'`, e.rollupTable))
	for _, nc := range conns {
		mustExec(t, nc.Conn, "SET pgsketch.merge = proxy")
	}
	data := check("a corrupt sketch, merged in the proxy", false, "pgsketch: rollup ev_daily not used")
	if got := e.fallbacks(t); got["data"] != data || got["privilege"] != privilege {
		t.Errorf("status page: %v, want %d under data, %d under privilege", got, data, privilege)
	}
	for _, nc := range conns {
		mustExec(t, nc.Conn, "SET pgsketch.merge = server")
	}
	check("a corrupt sketch, merged in PostgreSQL", false, "pgsketch: rollup ev_daily not used", "(SQLSTATE ")
	for _, nc := range conns {
		mustExec(t, nc.Conn, "RESET pgsketch.merge")
	}
	refreshRollup(t, e.conn, "ev_daily", refresh.Options{Full: true})
	check("rebuilt", false)

	// The change capture off: the fetch's check refuses the rollup with
	// 55000.
	mustExec(t, e.conn, `ALTER TABLE ev DISABLE TRIGGER USER`)
	notReady := check("the change capture off", false, "pgsketch: rollup ev_daily not used", "(SQLSTATE 55000)")
	if got := e.fallbacks(t); got["not_ready"] != notReady {
		t.Errorf("status page: %v, want %d under not_ready", got, notReady)
	}
}
