package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
)

// multiResult is the replies to a simple Query of several statements.
type multiResult struct {
	tags    []string
	rows    [][][]string
	err     *pgconn.PgError
	notices []string
	status  byte
}

func runMulti(t *testing.T, c *noticeConn, sql string) multiResult {
	t.Helper()
	c.mu.Lock()
	c.notices = nil
	c.mu.Unlock()
	results, err := c.PgConn().Exec(context.Background(), sql).ReadAll()
	var out multiResult
	if err != nil && !errors.As(err, &out.err) {
		t.Fatalf("%s: %v", sql, err)
	}
	for _, r := range results {
		if r.Err != nil {
			continue
		}
		out.tags = append(out.tags, r.CommandTag.String())
		var rows [][]string
		for _, row := range r.Rows {
			var vals []string
			for _, v := range row {
				vals = append(vals, string(v))
			}
			rows = append(rows, vals)
		}
		out.rows = append(out.rows, rows)
	}
	c.mu.Lock()
	out.notices = c.notices
	c.mu.Unlock()
	out.status = c.PgConn().TxStatus()
	return out
}

// TestMultiStatementQueries: a simple Query holding several statements,
// one of them answered from a rollup, gets the replies PostgreSQL sends
// for the whole text (each statement's result, in order; one
// ReadyForQuery), with PostgreSQL's implicit transaction: an error ends
// the text and rolls back what came before it; inside a transaction block
// it aborts the block. Texts with transaction control statements pass
// through whole.
func TestMultiStatementQueries(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 40_000, 20)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	mustExec(t, conn, "CREATE TABLE mt (x int)")
	p := startProxy(t, server.adminURL, "--approx", "on")
	proxied := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	const users = "SELECT count(DISTINCT user_id) AS users FROM events"
	var exact float64
	if err := conn.QueryRow(context.Background(), users).Scan(&exact); err != nil {
		t.Fatal(err)
	}
	mtRows := func() string {
		var s string
		if err := conn.QueryRow(context.Background(), "SELECT coalesce(string_agg(x::text, ',' ORDER BY x), '') FROM mt").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Three results in order; the middle one from the rollup with its NOTICE.
	sql := "SELECT 1 AS a; " + users + "; SELECT 'x;y' AS b"
	got, want := runMulti(t, proxied, sql), runMulti(t, direct, sql)
	if fmt.Sprint(got.tags) != fmt.Sprint(want.tags) || len(got.rows) != 3 ||
		fmt.Sprint(got.rows[0], got.rows[2]) != fmt.Sprint(want.rows[0], want.rows[2]) || got.status != 'I' {
		t.Fatalf("%s:\n got %+v\nwant %+v", sql, got, want)
	}
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], "approximated from rollup daily") {
		t.Errorf("notices %q, want the rollup's", got.notices)
	}
	est, _ := strconv.ParseFloat(got.rows[1][0][0], 64)
	if e := stdErrs(est, exact); e > 5 {
		t.Errorf("estimate %v, exact %v: %.2f standard errors", est, exact, e)
	}

	// An error ends the text and rolls back the statements before it.
	sql = "INSERT INTO mt VALUES (1); " + users + "; SELECT 1/0; INSERT INTO mt VALUES (2)"
	got = runMulti(t, proxied, sql)
	if got.err == nil || got.err.Code != "22012" || len(got.tags) != 2 || got.status != 'I' || mtRows() != "" {
		t.Errorf("%s: %+v; mt holds %q", sql, got, mtRows())
	}
	want = runMulti(t, direct, sql)
	if fmt.Sprint(got.tags, got.err.Code, got.status) != fmt.Sprint(want.tags, want.err.Code, want.status) {
		t.Errorf("%s: through the proxy %+v, direct %+v", sql, got, want)
	}
	// Without an error it commits.
	got = runMulti(t, proxied, "INSERT INTO mt VALUES (5); "+users)
	if got.err != nil || len(got.tags) != 2 || got.status != 'I' || mtRows() != "5" {
		t.Errorf("insert and count: %+v; mt holds %q", got, mtRows())
	}

	// Inside a transaction block: the statements run in it; an error
	// aborts it.
	mustExec(t, proxied.Conn, "BEGIN")
	got = runMulti(t, proxied, "INSERT INTO mt VALUES (6); "+users)
	if got.err != nil || len(got.tags) != 2 || got.status != 'T' {
		t.Errorf("in a block: %+v", got)
	}
	got = runMulti(t, proxied, users+"; SELECT 1/0")
	if got.err == nil || got.err.Code != "22012" || len(got.tags) != 1 || got.status != 'E' {
		t.Errorf("an error in a block: %+v", got)
	}
	mustExec(t, proxied.Conn, "ROLLBACK")
	if mtRows() != "5" {
		t.Errorf("after ROLLBACK mt holds %q", mtRows())
	}

	// Transaction control among the statements: the text goes upstream
	// whole, and the count is exact.
	sql = "BEGIN; " + users + "; COMMIT"
	got = runMulti(t, proxied, sql)
	if len(got.notices) != 0 || len(got.rows) != 3 || got.rows[1][0][0] != strconv.FormatFloat(exact, 'f', -1, 64) {
		t.Errorf("%s: %+v", sql, got)
	}
}

// TestProxyPreparedStatements: outside transaction blocks the proxy
// prepares its own statements once per session (names starting with
// pgsketch_q_); a client that drops them (DEALLOCATE ALL, DISCARD ALL)
// still gets its answers from the rollup, and inside a transaction block
// nothing is prepared.
func TestProxyPreparedStatements(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 10)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "0")
	ctx := context.Background()
	const q = "SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1"
	prepared := func(c *noticeConn) int {
		t.Helper()
		a, err := c.query(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'pgsketch\\_q\\_%'")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(a.rows[0][0])
		return n
	}
	answered := func(c *noticeConn, what string) {
		t.Helper()
		a, err := c.query(ctx, q)
		if err != nil || len(a.notices) != 1 || len(a.rows) == 0 {
			t.Fatalf("%s: %v %v\n%s", what, a, err, p.Log())
		}
	}
	for _, mode := range []string{"simple", "extended"} {
		c := connectSimple(t, p.URL(db.DSN))
		if mode == "extended" {
			c = connectMode(t, p.URL(db.DSN), pgx.QueryExecModeExec)
		}
		// The first answer reads the session's view on its own, the
		// second with its fetch (one statement more); from then on
		// nothing is prepared anew.
		answered(c, mode+", first")
		first := prepared(c)
		answered(c, mode+", second")
		n := prepared(c)
		answered(c, mode+", third")
		if first == 0 || prepared(c) != n {
			t.Errorf("%s: %d statements prepared after the first query, %d after the second, %d after the third", mode, first, n, prepared(c))
		}
		for _, drop := range []string{"DEALLOCATE ALL", "DISCARD ALL"} {
			mustExec(t, c.Conn, drop)
			answered(c, mode+", after "+drop)
		}
		mustExec(t, c.Conn, "DEALLOCATE ALL")
		mustExec(t, c.Conn, "BEGIN")
		answered(c, mode+", in a transaction block")
		if st := c.PgConn().TxStatus(); st != 'T' {
			t.Errorf("%s: transaction status %c", mode, st)
		}
		mustExec(t, c.Conn, "COMMIT")
	}
}

// TestMultiStatementSettings: a statement of a multi-statement text is
// planned with the settings in effect when it runs, which the statements
// before it in the same text may have changed (SET, RESET, set_config, ...),
// not with those from before the text.
func TestMultiStatementSettings(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 40_000, 20)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	proxied := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	const users = "SELECT count(DISTINCT user_id) AS users FROM events"

	for _, tc := range []struct {
		sql string
		// at is the result whose rows must equal PostgreSQL's.
		at int
		// keysOnly compares the first column of each row only (the keys
		// of an approximated answer); otherwise whole rows.
		keysOnly bool
		// approximated is the number of NOTICEs from a rollup expected.
		approximated int
	}{
		// The count must be PostgreSQL's exact one.
		{sql: "SET pgsketch.approx = off; " + users, at: 1},
		{sql: "SELECT set_config('pgsketch.approx', 'off', false); " + users, at: 1},
		{sql: "SET pgsketch.approx = off; SELECT approx_count_distinct(user_id) FROM events; " + users, at: 2, approximated: 1},
		{sql: users + "; SET pgsketch.approx = off; " + users, at: 2, approximated: 1},
		// Days in Tokyo are not the rollup's UTC days.
		{sql: "SET TIME ZONE 'Asia/Tokyo'; SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users " +
			"FROM events GROUP BY 1 ORDER BY 1", at: 1, keysOnly: true},
		{sql: "SET TIME ZONE 'Asia/Tokyo'; SELECT approx_count_distinct(user_id) FROM events; " +
			"SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1",
			at: 2, keysOnly: true, approximated: 1},
		{sql: "SELECT set_config('TimeZone', 'Asia/Tokyo', true); SELECT approx_count_distinct(user_id) FROM events; " +
			"SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1",
			at: 2, keysOnly: true, approximated: 1},
	} {
		mustExec(t, proxied.Conn, "RESET ALL")
		mustExec(t, direct.Conn, "RESET ALL")
		// PostgreSQL has no approx_count_distinct: its keys are compared
		// with those of the exact count.
		exactSQL := strings.ReplaceAll(tc.sql, "approx_count_distinct(user_id)", "count(DISTINCT user_id)")
		got, want := runMulti(t, proxied, tc.sql), runMulti(t, direct, exactSQL)
		if got.err != nil || want.err != nil || len(got.rows) != len(want.rows) || len(got.rows) <= tc.at {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.sql, got, want)
			continue
		}
		g, w := got.rows[tc.at], want.rows[tc.at]
		if tc.keysOnly {
			key := func(rows [][]string) (ks []string) {
				for _, r := range rows {
					ks = append(ks, r[0])
				}
				return ks
			}
			g, w = [][]string{key(g)}, [][]string{key(w)}
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: result %d through the proxy\n %v\ndirect\n %v", tc.sql, tc.at, g, w)
		}
		n := 0
		for _, msg := range got.notices {
			if strings.Contains(msg, "from rollup daily") {
				n++
			}
		}
		if n != tc.approximated {
			t.Errorf("%s: NOTICEs %q, want %d from the rollup", tc.sql, got.notices, tc.approximated)
		}
	}
}
