package e2e

import (
	"context"
	binenc "encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// rollupQuery is one line of testdata/aggregates/queries.txt.
type rollupQuery struct {
	rollup bool
	sql    string
	line   int
}

func readRollupQueries(t *testing.T) []rollupQuery {
	t.Helper()
	return readQueryFile(t, "testdata/aggregates/queries.txt")
}

// answer is a query's result in the simple protocol (text values), with
// the notices that came with it.
type answer struct {
	fields  []pgconn.FieldDescription
	rows    [][]string
	nulls   [][]bool
	raw     [][][]byte
	tag     string
	notices []string
}

// noticeConn is a pgx connection in the simple protocol that records
// notices.
type noticeConn struct {
	*pgx.Conn
	mu      sync.Mutex
	notices []string
}

func connectSimple(t *testing.T, url string) *noticeConn {
	t.Helper()
	return connectMode(t, url, pgx.QueryExecModeSimpleProtocol)
}

// connectMode is connectSimple with another query exec mode.
func connectMode(t *testing.T, url string, mode pgx.QueryExecMode) *noticeConn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	nc := &noticeConn{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		nc.mu.Lock()
		nc.notices = append(nc.notices, n.Message)
		nc.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if nc.Conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close(context.Background()) })
	return nc
}

// query runs sql with args (pgx query options first, if any). Values in
// binary format are compared as pgx decodes them.
func (nc *noticeConn) query(ctx context.Context, sql string, args ...any) (*answer, error) {
	nc.mu.Lock()
	nc.notices = nil
	nc.mu.Unlock()
	rows, err := nc.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	a := &answer{}
	for rows.Next() {
		var r []string
		var nl []bool
		var raw [][]byte
		var decoded []any
		for i, v := range rows.RawValues() {
			if rows.FieldDescriptions()[i].Format == pgx.BinaryFormatCode && v != nil {
				if decoded == nil {
					if decoded, err = rows.Values(); err != nil {
						rows.Close()
						return nil, err
					}
				}
				r = append(r, fmt.Sprint(decoded[i]))
			} else {
				r = append(r, string(v))
			}
			nl = append(nl, v == nil)
			raw = append(raw, append([]byte(nil), v...))
		}
		a.rows, a.nulls, a.raw = append(a.rows, r), append(a.nulls, nl), append(a.raw, raw)
	}
	a.fields = append([]pgconn.FieldDescription(nil), rows.FieldDescriptions()...)
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	a.tag = rows.CommandTag().String()
	nc.mu.Lock()
	a.notices = nc.notices
	nc.mu.Unlock()
	return a, nil
}

// stdErrs is how many standard errors est is from exact, at log2m 14.
func stdErrs(est, exact float64) float64 {
	if exact == 0 {
		return math.Abs(est)
	}
	return math.Abs(est-exact) / (exact * 1.04 / 128)
}

var acdRE = regexp.MustCompile(`(?i)approx_count_distinct\(`)

// rollupAnswerError says how got, an answer through the proxy, is not one
// from a rollup whose NOTICE holds notice, or is not within 5 standard
// errors of want, PostgreSQL's answer; "" when it is.
func rollupAnswerError(got, want *answer, notice string) string {
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], notice) {
		return fmt.Sprintf("notices %q, want one saying %q", got.notices, notice)
	}
	errs, err := compareRollupAnswer(got, want)
	if err != nil {
		return fmt.Sprintf("%v\n got %q\nwant %q", err, got.rows, want.rows)
	}
	if w := worstOf(errs); w > 5 {
		return fmt.Sprintf("an estimate is %.2f standard errors off\n got %q\nwant %q", w, got.rows, want.rows)
	}
	return ""
}

// compareRollupAnswer checks an approximate answer against the exact one
// and returns the errors of its approximate values in standard errors.
func compareRollupAnswer(got, want *answer) ([]float64, error) {
	if len(got.fields) != len(want.fields) {
		return nil, fmt.Errorf("%d columns, want %d", len(got.fields), len(want.fields))
	}
	var approx []int
	for i := range got.fields {
		g, w := got.fields[i], want.fields[i]
		if g.Name != w.Name || g.DataTypeOID != w.DataTypeOID || g.TypeModifier != w.TypeModifier || g.DataTypeSize != w.DataTypeSize {
			return nil, fmt.Errorf("column %d is %s (type %d, typmod %d, size %d), want %s (type %d, typmod %d, size %d)",
				i+1, g.Name, g.DataTypeOID, g.TypeModifier, g.DataTypeSize, w.Name, w.DataTypeOID, w.TypeModifier, w.DataTypeSize)
		}
		if strings.HasPrefix(g.Name, "users") {
			approx = append(approx, i)
		}
	}
	if len(got.rows) != len(want.rows) || got.tag != want.tag {
		return nil, fmt.Errorf("%d rows (%s), want %d (%s)", len(got.rows), got.tag, len(want.rows), want.tag)
	}
	key := func(a *answer, r int) string {
		var b strings.Builder
		for i, v := range a.rows[r] {
			if !strings.HasPrefix(a.fields[i].Name, "users") {
				fmt.Fprintf(&b, "%v:%q|", a.nulls[r][i], v)
			}
		}
		return b.String()
	}
	byKey := map[string]int{}
	for r := range want.rows {
		byKey[key(want, r)] = r
	}
	var errs []float64
	for r := range got.rows {
		w, ok := byKey[key(got, r)]
		if !ok {
			return nil, fmt.Errorf("row %d %q: no such row in the exact answer", r+1, got.rows[r])
		}
		for _, i := range approx {
			var est, exact float64
			if _, err := fmt.Sscan(got.rows[r][i], &est); err != nil {
				return nil, fmt.Errorf("row %d column %d: %q: %v", r+1, i+1, got.rows[r][i], err)
			}
			if _, err := fmt.Sscan(want.rows[w][i], &exact); err != nil {
				return nil, fmt.Errorf("exact row %d column %d: %q: %v", w+1, i+1, want.rows[w][i], err)
			}
			errs = append(errs, stdErrs(est, exact))
		}
	}
	return errs, nil
}

// TestRollupQueries: dashboard queries through pgsketch-proxy with the
// simple protocol (pgx and psql) are answered from a daily rollup over a
// 2 M-row events table, with a NOTICE, within 5 standard errors of the
// exact answer (99 % within 3); the others give PostgreSQL's own bytes.
// Then transactions, pgsketch.approx, privileges and row-level security.
func TestRollupQueries(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 2_000_000, 90, "2026-03-29 12:00", "3 days")
	p := startProxy(t, server.adminURL, "--approx", "on")
	url := p.URL(db.DSN)
	ctx := context.Background()

	direct := connectSimple(t, db.DSN)
	proxied := connectSimple(t, url)
	var all []float64
	exactText := map[int]*answer{} // by line: the exact answers in text
	for _, q := range readRollupQueries(t) {
		name := fmt.Sprintf("queries.txt:%d", q.line)
		exactSQL := q.sql
		if q.rollup {
			exactSQL = acdRE.ReplaceAllString(q.sql, "count(DISTINCT ")
		}
		start := time.Now()
		want, err := direct.query(ctx, exactSQL)
		if err != nil {
			t.Errorf("%s: direct: %v", name, err)
			continue
		}
		exactTime := time.Since(start)
		exactText[q.line] = want
		start = time.Now()
		got, err := proxied.query(ctx, q.sql)
		if err != nil {
			t.Errorf("%s: through the proxy: %v\n%s", name, err, q.sql)
			continue
		}
		proxyTime := time.Since(start)
		if !q.rollup {
			if len(got.notices) != 0 {
				t.Errorf("%s: passthrough with notices %q", name, got.notices)
			}
			if fmt.Sprint(got.fields, got.raw, got.tag) != fmt.Sprint(want.fields, want.raw, want.tag) {
				t.Errorf("%s: passthrough differs from direct:\n got %v %q %s\nwant %v %q %s", name, got.fields, got.rows, got.tag, want.fields, want.rows, want.tag)
			}
			continue
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup daily (standard error 0.81%)") {
			t.Errorf("%s: notices %q, want the rollup's\n%s", name, got.notices, q.sql)
			continue
		}
		errs, err := compareRollupAnswer(got, want)
		if err != nil {
			t.Errorf("%s: %v\n%s\n got %q\nwant %q", name, err, q.sql, got.rows, want.rows)
			continue
		}
		worst := 0.0
		for _, e := range errs {
			worst = max(worst, e)
		}
		t.Logf("%s: %d rows, %d estimates, worst %.2f standard errors; exact %v, proxy %v", name, len(got.rows), len(errs), worst, exactTime.Round(time.Millisecond), proxyTime.Round(time.Millisecond))
		if worst > 5 {
			t.Errorf("%s: an estimate is %.2f standard errors off\n got %q\nwant %q", name, worst, got.rows, want.rows)
		}
		all = append(all, errs...)
	}
	within3 := 0
	for _, e := range all {
		if e <= 3 {
			within3++
		}
	}
	if len(all) < 100 || float64(within3) < 0.99*float64(len(all)) {
		t.Errorf("%d of %d estimates within 3 standard errors (want ≥ 99 %% of ≥ 100)", within3, len(all))
	}

	t.Run("extended", func(t *testing.T) {
		testExtendedQueries(t, ctx, db.DSN, url, exactText)
	})
	t.Run("extended protocol", func(t *testing.T) {
		testExtendedProtocol(t, ctx, db.DSN, url)
	})

	t.Run("psql", func(t *testing.T) {
		out, errOut, code := psql(t, url, "-A", "-t", "-c", "SELECT count(DISTINCT user_id) AS users FROM events WHERE country = 'FR'")
		if code != 0 || !strings.Contains(errOut, "NOTICE:  pgsketch: count(DISTINCT \"user_id\") approximated from rollup daily") {
			t.Fatalf("psql: exit %d\nstdout %q\nstderr %q", code, out, errOut)
		}
		var est, exact float64
		fmt.Sscan(out, &est)
		if err := conn.QueryRow(ctx, "SELECT count(DISTINCT user_id) FROM events WHERE country = 'FR'").Scan(&exact); err != nil {
			t.Fatal(err)
		}
		if e := stdErrs(est, exact); e > 5 {
			t.Errorf("psql: %v, exact %v: %.2f standard errors", est, exact, e)
		}
		// psql's aligned output: the same header as PostgreSQL's.
		out, _, _ = psql(t, url, "-c", "SELECT device, count(DISTINCT user_id) AS users FROM events GROUP BY device ORDER BY device")
		if !regexp.MustCompile(`^\s*device\s+\|\s+users\s*\n`).MatchString(out) || !strings.Contains(out, "(3 rows)") {
			t.Errorf("psql table:\n%s", out)
		}
	})

	t.Run("transactions", func(t *testing.T) {
		c := connectSimple(t, url)
		q := "SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1"
		mustExec(t, c.Conn, "BEGIN")
		a, err := c.query(ctx, q)
		if err != nil || len(a.notices) != 1 || len(a.rows) != 20 {
			t.Fatalf("in a transaction block: %v %v", a, err)
		}
		if st := c.PgConn().TxStatus(); st != 'T' {
			t.Fatalf("transaction status %c after a rollup answer, want T", st)
		}
		// The transaction's own writes are seen (the base half reads them).
		mustExec(t, c.Conn, `INSERT INTO events VALUES (99999999, '2026-04-10', 424242424242, 'ZZ', 'web', 1)`)
		a, err = c.query(ctx, "SELECT count(DISTINCT user_id) AS users FROM events WHERE country = 'ZZ'")
		if err != nil || len(a.rows) != 1 || a.rows[0][0] != "1" || len(a.notices) != 1 {
			t.Fatalf("own insert: %v %v", a, err)
		}
		_, err = c.query(ctx, "SELECT 1/0")
		if err == nil {
			t.Fatal("1/0 succeeded")
		}
		_, err = c.query(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "25P02" {
			t.Fatalf("in an aborted transaction: %v", err)
		}
		mustExec(t, c.Conn, "ROLLBACK")
		if st := c.PgConn().TxStatus(); st != 'I' {
			t.Fatalf("transaction status %c after ROLLBACK", st)
		}
		a, err = c.query(ctx, "SELECT count(DISTINCT user_id) AS users FROM events WHERE country = 'ZZ'")
		if err != nil || a.rows[0][0] != "0" {
			t.Fatalf("after ROLLBACK: %v %v", a, err)
		}
	})

	t.Run("approx setting", func(t *testing.T) {
		c := connectSimple(t, url)
		show := func() string {
			a, err := c.query(ctx, "SHOW pgsketch.approx")
			if err != nil {
				t.Fatal(err)
			}
			return a.rows[0][0]
		}
		notices := func(sql string) int {
			a, err := c.query(ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			return len(a.notices)
		}
		q := "SELECT count(DISTINCT user_id) AS users FROM events WHERE created_at < '2026-01-03'"
		if show() != "on" || notices(q) != 1 {
			t.Fatal("--approx on: not on")
		}
		mustExec(t, c.Conn, "SET pgsketch.approx = off")
		if show() != "off" || notices(q) != 0 {
			t.Fatal("SET pgsketch.approx = off: still on")
		}
		if notices("SELECT approx_count_distinct(user_id) AS users FROM events WHERE created_at < '2026-01-03'") != 1 {
			t.Fatal("APPROX_COUNT_DISTINCT not answered from the rollup with pgsketch.approx off")
		}
		mustExec(t, c.Conn, "BEGIN; SET LOCAL pgsketch.approx = on")
		if show() != "on" {
			t.Fatal("SET LOCAL: not on")
		}
		mustExec(t, c.Conn, "ROLLBACK")
		if show() != "off" {
			t.Fatal("after ROLLBACK: not off")
		}
		mustExec(t, c.Conn, "RESET pgsketch.approx")
		if show() != "on" || notices(q) != 1 {
			t.Fatal("RESET: not back to the --approx default")
		}
	})

	t.Run("explain", func(t *testing.T) {
		// pgsketch's plan, then PostgreSQL's plan of the statement it runs.
		check := func(what string, a *answer, err error) {
			t.Helper()
			text := fmt.Sprint(a.rows)
			if err != nil || !strings.Contains(text, "rollup: daily") || !strings.Contains(text, "PostgreSQL plan of the fetch statement") ||
				!strings.Contains(text, "Append") || !strings.Contains(text, "Index") {
				t.Fatalf("%s: %v %v", what, a, err)
			}
		}
		a, err := proxied.query(ctx, "EXPLAIN SELECT count(DISTINCT user_id) FROM events WHERE created_at >= '2026-02-01 12:00'")
		check("EXPLAIN", a, err)
		// Inside a transaction block, which stays as it was.
		mustExec(t, proxied.Conn, "BEGIN")
		a, err = proxied.query(ctx, "EXPLAIN SELECT count(DISTINCT user_id) FROM events WHERE created_at >= '2026-02-01 12:00'")
		check("EXPLAIN in a transaction block", a, err)
		if st := proxied.PgConn().TxStatus(); st != 'T' {
			t.Errorf("transaction status %c after EXPLAIN, want T", st)
		}
		mustExec(t, proxied.Conn, "ROLLBACK")
		// The extended protocol, with a parameter.
		c := connectMode(t, url, pgx.QueryExecModeCacheStatement)
		a, err = c.query(ctx, "EXPLAIN SELECT count(DISTINCT user_id) FROM events WHERE created_at >= $1", "2026-02-01 12:00")
		check("EXPLAIN with a parameter", a, err)
	})

	t.Run("no rollup answers", func(t *testing.T) {
		// APPROX_COUNT_DISTINCT that no rollup answers is counted exactly
		// (with a NOTICE saying why), never "function does not exist".
		q := "SELECT device, approx_count_distinct(amount) AS n FROM events WHERE created_at < '2026-01-03' GROUP BY device ORDER BY device"
		a, err := proxied.query(ctx, q)
		if err != nil || len(a.notices) != 1 || !strings.Contains(a.notices[0], "counted exactly") {
			t.Fatalf("substitute: %v %v", a, err)
		}
		want, err := direct.query(ctx, acdRE.ReplaceAllString(q, "count(DISTINCT "))
		if err != nil || fmt.Sprint(a.fields, a.rows) != fmt.Sprint(want.fields, want.rows) {
			t.Fatalf("substitute: got %v %q, want %v %q (%v)", a.fields, a.rows, want.fields, want.rows, err)
		}
		// The same through the extended protocol (pgx's default mode).
		c := connectMode(t, url, pgx.QueryExecModeCacheStatement)
		q = "SELECT device, approx_count_distinct(amount) AS n FROM events WHERE created_at < $1 GROUP BY device ORDER BY device"
		a, err = c.query(ctx, q, "2026-01-03")
		if err != nil || len(a.notices) != 1 || !strings.Contains(a.notices[0], "counted exactly") {
			t.Fatalf("substitute, extended: %v %v", a, err)
		}
		want, err = connectMode(t, db.DSN, pgx.QueryExecModeCacheStatement).query(ctx, acdRE.ReplaceAllString(q, "count(DISTINCT "), "2026-01-03")
		if err != nil || fmt.Sprint(a.fields, a.raw) != fmt.Sprint(want.fields, want.raw) {
			t.Fatalf("substitute, extended: got %v %q, want %v %q (%v)", a.fields, a.rows, want.fields, want.rows, err)
		}
	})

	t.Run("security", func(t *testing.T) {
		suffix := strings.TrimPrefix(db.Name, server.prefix)
		outsider := "pgsk_q_outsider" + suffix
		mustExec(t, conn, fmt.Sprintf(`DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s; GRANT USAGE ON SCHEMA pgsketch TO %[1]s`, outsider))
		t.Cleanup(func() {
			c, err := pgx.Connect(context.Background(), db.DSN)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			if _, err := c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s; DROP ROLE %[1]s`, outsider)); err != nil {
				t.Errorf("drop role %s: %v", outsider, err)
			}
		})
		c := connectSimple(t, url)
		mustExec(t, c.Conn, "SET ROLE "+outsider)
		_, err := c.query(ctx, "SELECT count(DISTINCT user_id) AS users FROM events")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, "events") {
			t.Fatalf("a role without SELECT on events: %v", err)
		}
		// Even with SELECT on the rollup table (and not on events).
		mustExec(t, conn, fmt.Sprintf(`GRANT SELECT ON daily, pgsketch.rollup_defs TO %s`, outsider))
		for _, sql := range []string{"SELECT count(DISTINCT user_id) AS users FROM events", "BEGIN", "SELECT count(DISTINCT user_id) AS users FROM events"} {
			_, err = c.query(ctx, sql)
			if sql != "BEGIN" && (!errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, `table events`)) {
				t.Fatalf("%s: a role with SELECT on the rollup but not on events: %v", sql, err)
			}
		}
		if st := c.PgConn().TxStatus(); st != 'E' {
			t.Fatalf("transaction status %c after a permission error, want E", st)
		}
		mustExec(t, c.Conn, "ROLLBACK; RESET ROLE")

		// Row-level security enabled after the rollup was made: never rewritten.
		mustExec(t, conn, `ALTER TABLE events ENABLE ROW LEVEL SECURITY`)
		a, err := proxied.query(ctx, "SELECT count(DISTINCT user_id) AS users FROM events WHERE created_at < '2026-01-02'")
		if err != nil || len(a.notices) != 0 {
			t.Fatalf("RLS table: %v, notices %q", err, a.notices)
		}
	})
}

// parameterize turns the string literals a dashboard binds as parameters
// (compared with =, <>, <, >, <=, >=, BETWEEN, IN lists) into $1, $2, ...
// and returns them as string arguments; typed literals (timestamptz '...')
// and function arguments stay.
func parameterize(sql string) (string, []any) {
	lits := regexp.MustCompile(`'(?:[^']|'')*'`).FindAllStringIndex(sql, -1)
	var b strings.Builder
	var args []any
	last, prevReplacedEnd := 0, -1
	for _, m := range lits {
		before := strings.TrimRight(sql[:m[0]], " ")
		up := strings.ToUpper(before)
		replace := false
		for _, suf := range []string{"=", "<>", "<", ">", "BETWEEN", "IN ("} {
			if strings.HasSuffix(up, suf) {
				replace = true
			}
		}
		if strings.HasSuffix(up, " AND") && prevReplacedEnd >= 0 && strings.Contains(strings.ToUpper(sql[:prevReplacedEnd]), "BETWEEN") &&
			strings.TrimSpace(strings.ToUpper(sql[prevReplacedEnd:m[0]])) == "AND" {
			replace = true
		}
		if strings.HasSuffix(before, ",") && prevReplacedEnd >= 0 && strings.TrimSpace(sql[prevReplacedEnd:m[0]]) == "," {
			replace = true
		}
		if !replace {
			continue
		}
		b.WriteString(sql[last:m[0]])
		args = append(args, strings.ReplaceAll(sql[m[0]+1:m[1]-1], "''", "'"))
		fmt.Fprintf(&b, "$%d", len(args))
		last, prevReplacedEnd = m[1], m[1]
	}
	b.WriteString(sql[last:])
	return b.String(), args
}

// testExtendedQueries runs queries.txt through the proxy with the extended
// protocol: pgx's default mode (prepared statements, described first) with
// the literals bound as parameters and results in binary and in text, with
// the literals in the SQL and pgx's default result formats, and pgx's exec
// mode (unnamed statements). Rollup answers are within 5 standard errors
// of the exact ones (99 % within 3) with the NOTICE; passthrough answers
// are PostgreSQL's bytes.
func testExtendedQueries(t *testing.T, ctx context.Context, dsn, url string, exactText map[int]*answer) {
	modes := []struct {
		name    string
		mode    pgx.QueryExecMode
		formats pgx.QueryResultFormats
		params  bool
	}{
		{"cache/params/binary", pgx.QueryExecModeCacheStatement, pgx.QueryResultFormats{pgx.BinaryFormatCode}, true},
		{"cache/params/text", pgx.QueryExecModeCacheStatement, pgx.QueryResultFormats{pgx.TextFormatCode}, true},
		{"cache/literals", pgx.QueryExecModeCacheStatement, nil, false},
		{"exec/params/text", pgx.QueryExecModeExec, pgx.QueryResultFormats{pgx.TextFormatCode}, true},
	}
	exactBinary := map[int]*answer{}
	var all []float64
	queries := readRollupQueries(t)
	for _, m := range modes {
		direct := connectMode(t, dsn, m.mode)
		proxied := connectMode(t, url, m.mode)
		for _, q := range queries {
			name := fmt.Sprintf("%s: queries.txt:%d", m.name, q.line)
			sql, args := q.sql, []any(nil)
			if m.params {
				sql, args = parameterize(sql)
			}
			if m.formats != nil {
				args = append([]any{m.formats}, args...)
			}
			var want *answer
			var err error
			switch {
			case !q.rollup:
				want, err = direct.query(ctx, sql, args...)
			case m.formats == nil || m.formats[0] == pgx.BinaryFormatCode:
				if want = exactBinary[q.line]; want == nil {
					want, err = direct.query(ctx, acdRE.ReplaceAllString(sql, "count(DISTINCT "), args...)
					exactBinary[q.line] = want
				}
			default:
				want = exactText[q.line]
			}
			if err != nil || want == nil {
				t.Errorf("%s: direct: %v\n%s", name, err, sql)
				continue
			}
			got, err := proxied.query(ctx, sql, args...)
			if err != nil {
				t.Errorf("%s: through the proxy: %v\n%s %q", name, err, sql, args)
				continue
			}
			if !q.rollup {
				if len(got.notices) != 0 {
					t.Errorf("%s: passthrough with notices %q", name, got.notices)
				}
				if fmt.Sprint(got.fields, got.raw, got.tag) != fmt.Sprint(want.fields, want.raw, want.tag) {
					t.Errorf("%s: passthrough differs from direct:\n got %v %q %s\nwant %v %q %s", name, got.fields, got.rows, got.tag, want.fields, want.rows, want.tag)
				}
				continue
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup daily (standard error 0.81%)") {
				t.Errorf("%s: notices %q, want the rollup's\n%s %q", name, got.notices, sql, args)
				continue
			}
			errs, err := compareRollupAnswer(got, want)
			if err != nil {
				t.Errorf("%s: %v\n%s\n got %q\nwant %q", name, err, sql, got.rows, want.rows)
				continue
			}
			for _, e := range errs {
				if e > 5 {
					t.Errorf("%s: an estimate is %.2f standard errors off\n got %q\nwant %q", name, e, got.rows, want.rows)
					break
				}
			}
			all = append(all, errs...)
		}
	}
	within3 := 0
	for _, e := range all {
		if e <= 3 {
			within3++
		}
	}
	t.Logf("%d of %d estimates within 3 standard errors", within3, len(all))
	if len(all) < 100 || float64(within3) < 0.99*float64(len(all)) {
		t.Errorf("%d of %d estimates within 3 standard errors (want ≥ 99 %% of ≥ 100)", within3, len(all))
	}
}

// rawSummary sends msgs on c and summarizes the replies up to the
// ReadyForQuery after the last Sync, or, without Sync, up to the reply
// that answers the last message; notices are counted apart.
func rawSummary(t *testing.T, c *rawConn, msgs ...pgproto3.FrontendMessage) (out []string, notices int) {
	t.Helper()
	syncs, lastDone := 0, ""
	for _, m := range msgs {
		c.fe.Send(m)
		switch m := m.(type) {
		case *pgproto3.Sync, *pgproto3.Query:
			syncs++
		case *pgproto3.Execute:
			lastDone = "E"
		case *pgproto3.Describe:
			lastDone = "D" + string(m.ObjectType)
		}
	}
	if syncs == 0 {
		c.fe.Send(&pgproto3.Flush{})
	}
	if err := c.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	c.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	defer c.conn.SetReadDeadline(time.Time{})
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		var s string
		done := false
		switch m := msg.(type) {
		case *pgproto3.NoticeResponse:
			notices++
			continue
		case *pgproto3.ParameterStatus:
			continue
		case *pgproto3.ParameterDescription:
			s = fmt.Sprintf("ParameterDescription%v", m.ParameterOIDs)
		case *pgproto3.RowDescription:
			var fs []string
			for _, f := range m.Fields {
				fs = append(fs, fmt.Sprintf("%s:%d:%d:%d:%d:%d:%d", f.Name, f.TableOID, f.TableAttributeNumber, f.DataTypeOID, f.DataTypeSize, f.TypeModifier, f.Format))
			}
			s = "RowDescription" + fmt.Sprint(fs)
			done = lastDone == "DP" || lastDone == "DS"
		case *pgproto3.NoData:
			s, done = "NoData", lastDone == "DP" || lastDone == "DS"
		case *pgproto3.CommandComplete:
			s, done = "CommandComplete("+string(m.CommandTag)+")", lastDone == "E"
		case *pgproto3.PortalSuspended:
			s, done = "PortalSuspended", lastDone == "E"
		case *pgproto3.ErrorResponse:
			s, done = "Error("+m.Code+" "+m.Message+")", true
		case *pgproto3.ReadyForQuery:
			s = "ReadyForQuery(" + string(m.TxStatus) + ")"
			syncs--
			done = syncs <= 0
		default:
			s = strings.TrimPrefix(fmt.Sprintf("%T", msg), "*pgproto3.")
		}
		out = append(out, s)
		if syncs == 0 && done || syncs < 0 {
			return out, notices
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok && syncs <= 0 {
			return out, notices
		}
	}
}

// testExtendedProtocol drives the extended protocol by hand, the same
// messages direct and through the proxy: the replies (DataRow values
// aside) must be PostgreSQL's, with a NOTICE for each answer from the
// rollup. Named and unnamed statements, Describe of statements and
// portals, row limits and PortalSuspended, parameters in binary, result
// formats, pipelines mixing statements the proxy answers with others,
// errors discarding up to Sync, transaction blocks, Close, Flush.
func testExtendedProtocol(t *testing.T, ctx context.Context, dsn, url string) {
	open := func(u string) *rawConn {
		target, err := targetFromDSN(u)
		if err != nil {
			t.Fatal(err)
		}
		c, err := dialRaw(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	direct, proxied := open(dsn), open(url)
	q1 := "SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at < $1 GROUP BY 1 ORDER BY 1"
	q2 := "SELECT approx_count_distinct(user_id) AS users FROM events WHERE created_at >= $1 AND country = $2"
	ts := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	binTS := binenc.BigEndian.AppendUint64(nil, uint64(ts.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()))
	param := func(s string) [][]byte { return [][]byte{[]byte(s)} }
	steps := []struct {
		name    string
		notices int
		msgs    []pgproto3.FrontendMessage
	}{
		{"prepare and describe", 0, []pgproto3.FrontendMessage{
			&pgproto3.Parse{Name: "s1", Query: q1}, &pgproto3.Describe{ObjectType: 'S', Name: "s1"}, &pgproto3.Sync{}}},
		{"row limits", 1, []pgproto3.FrontendMessage{
			&pgproto3.Bind{DestinationPortal: "p1", PreparedStatement: "s1", Parameters: param("2026-02-01"), ResultFormatCodes: []int16{1}},
			&pgproto3.Describe{ObjectType: 'P', Name: "p1"},
			&pgproto3.Execute{Portal: "p1", MaxRows: 5}, &pgproto3.Execute{Portal: "p1", MaxRows: 5},
			&pgproto3.Execute{Portal: "p1", MaxRows: 0}, &pgproto3.Execute{Portal: "p1"}, &pgproto3.Sync{}}},
		{"exact row limit", 1, []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "s1", Parameters: param("2026-02-01")},
			&pgproto3.Execute{MaxRows: 10}, &pgproto3.Execute{MaxRows: 10}, &pgproto3.Execute{MaxRows: 10}, &pgproto3.Sync{}}},
		{"pipeline with an error", 2, []pgproto3.FrontendMessage{
			&pgproto3.Parse{Name: "u", Query: "SELECT 42 AS answer"}, &pgproto3.Bind{PreparedStatement: "u"}, &pgproto3.Execute{},
			&pgproto3.Bind{DestinationPortal: "p2", PreparedStatement: "s1", Parameters: param("2026-03-01")},
			&pgproto3.Describe{ObjectType: 'P', Name: "p2"}, &pgproto3.Execute{Portal: "p2"},
			&pgproto3.Parse{Name: "s2", Query: q2}, &pgproto3.Describe{ObjectType: 'S', Name: "s2"},
			&pgproto3.Bind{PreparedStatement: "s2", ParameterFormatCodes: []int16{1, 0}, Parameters: [][]byte{binTS, []byte("DE")}, ResultFormatCodes: []int16{1}},
			&pgproto3.Execute{},
			&pgproto3.Parse{Query: "SELECT 1/0"}, &pgproto3.Bind{}, &pgproto3.Execute{},
			&pgproto3.Bind{DestinationPortal: "p3", PreparedStatement: "s1", Parameters: param("2026-03-01")}, &pgproto3.Execute{Portal: "p3"},
			&pgproto3.Sync{}}},
		{"after the error", 1, []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "u"}, &pgproto3.Execute{},
			&pgproto3.Bind{PreparedStatement: "s2", Parameters: [][]byte{[]byte("2026-03-01"), []byte("FR")}}, &pgproto3.Execute{},
			&pgproto3.Sync{}}},
		{"bad parameters", 0, []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{}}},
		{"begin", 0, []pgproto3.FrontendMessage{&pgproto3.Query{String: "BEGIN"}}},
		{"in a transaction block", 1, []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "s1", Parameters: param("2026-01-10")}, &pgproto3.Execute{}, &pgproto3.Sync{}}},
		{"portal across Syncs", 1, []pgproto3.FrontendMessage{
			&pgproto3.Bind{DestinationPortal: "c1", PreparedStatement: "s1", Parameters: param("2026-01-10")},
			&pgproto3.Execute{Portal: "c1", MaxRows: 3}, &pgproto3.Sync{},
			&pgproto3.Execute{Portal: "c1", MaxRows: 3}, &pgproto3.Close{ObjectType: 'P', Name: "c1"}, &pgproto3.Sync{}}},
		{"error in the block", 0, []pgproto3.FrontendMessage{&pgproto3.Query{String: "SELECT 1/0"}}},
		{"aborted block", 0, []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "s1", Parameters: param("2026-01-10")}, &pgproto3.Execute{}, &pgproto3.Sync{}}},
		{"rollback", 0, []pgproto3.FrontendMessage{&pgproto3.Query{String: "ROLLBACK"}}},
		{"flush", 1, []pgproto3.FrontendMessage{
			&pgproto3.Parse{Name: "s3", Query: q1}, &pgproto3.Bind{PreparedStatement: "s3", Parameters: param("2026-01-20")},
			&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}}},
		{"sync after flush", 0, []pgproto3.FrontendMessage{&pgproto3.Sync{}}},
		{"error then flush", 0, []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "s3", Parameters: [][]byte{[]byte("not a time")}}, &pgproto3.Execute{}}},
		{"skipped until sync", 0, []pgproto3.FrontendMessage{
			&pgproto3.Bind{PreparedStatement: "s3", Parameters: param("2026-01-20")}, &pgproto3.Execute{}, &pgproto3.Sync{}}},
		{"close", 0, []pgproto3.FrontendMessage{
			&pgproto3.Close{ObjectType: 'S', Name: "s1"}, &pgproto3.Sync{}, &pgproto3.Describe{ObjectType: 'S', Name: "s1"}, &pgproto3.Sync{}}},
		{"parse again", 0, []pgproto3.FrontendMessage{
			&pgproto3.Parse{Name: "s1", Query: q1}, &pgproto3.Parse{Name: "s1", Query: q1}, &pgproto3.Sync{}}},
		{"approx_count_distinct with no rollup", 1, []pgproto3.FrontendMessage{
			&pgproto3.Parse{Query: "SELECT approx_count_distinct(amount) FROM events WHERE created_at < $1"},
			&pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Bind{Parameters: param("2026-01-02")}, &pgproto3.Execute{}, &pgproto3.Sync{}}},
	}
	for _, st := range steps {
		directMsgs := st.msgs
		if st.name == "approx_count_distinct with no rollup" {
			directMsgs = []pgproto3.FrontendMessage{
				&pgproto3.Parse{Query: "SELECT count(DISTINCT amount) AS approx_count_distinct FROM events WHERE created_at < $1"},
				&pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Bind{Parameters: param("2026-01-02")}, &pgproto3.Execute{}, &pgproto3.Sync{}}
		}
		var exactMsgs []pgproto3.FrontendMessage
		for _, m := range directMsgs {
			if p, ok := m.(*pgproto3.Parse); ok && acdRE.MatchString(p.Query) {
				m = &pgproto3.Parse{Name: p.Name, Query: acdRE.ReplaceAllString(p.Query, "count(DISTINCT "), ParameterOIDs: p.ParameterOIDs}
			}
			exactMsgs = append(exactMsgs, m)
		}
		want, _ := rawSummary(t, direct, exactMsgs...)
		got, notices := rawSummary(t, proxied, st.msgs...)
		if st.name == "error then flush" && len(got) > 0 && got[0] == "BindComplete" {
			// A known difference: the proxy keeps a Bind of its statements
			// without looking at the values; PostgreSQL's error about a
			// value comes at Execute.
			got = got[1:]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: through the proxy\n%q\nwant\n%q", st.name, got, want)
		}
		if notices != st.notices {
			t.Errorf("%s: %d notices, want %d", st.name, notices, st.notices)
		}
	}

	// A pgx batch in the default mode mixes statements the proxy answers
	// with others, in one pipeline.
	batchOf := func(u string, exact bool) ([]string, []string) {
		c := connectMode(t, u, pgx.QueryExecModeCacheStatement)
		mustExec(t, c.Conn, "CREATE TEMP TABLE pgsk_batch (n int)")
		b := &pgx.Batch{}
		b.Queue("SELECT 1")
		b.Queue("SELECT device, count(DISTINCT user_id) AS users FROM events WHERE created_at < $1 GROUP BY 1 ORDER BY 1", "2026-02-01")
		b.Queue("INSERT INTO pgsk_batch VALUES (1), (2)")
		q := "SELECT approx_count_distinct(user_id) AS users FROM events WHERE country = $1"
		if exact {
			q = acdRE.ReplaceAllString(q, "count(DISTINCT ")
		}
		b.Queue(q, "DE")
		b.Queue("SELECT sum(n) FROM pgsk_batch")
		br := c.SendBatch(ctx, b)
		var out []string
		for i := 0; i < b.Len(); i++ {
			rows, err := br.Query()
			if err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
			n := 0
			for rows.Next() {
				n++
				if i == 4 {
					v, _ := rows.Values()
					out = append(out, fmt.Sprint(v))
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
			out = append(out, fmt.Sprintf("%s:%d", rows.CommandTag(), n))
		}
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
		if c.PgConn().TxStatus() != 'I' {
			t.Fatalf("transaction status %c after a batch", c.PgConn().TxStatus())
		}
		return out, c.notices
	}
	want, _ := batchOf(dsn, true)
	got, notices := batchOf(url, false)
	if fmt.Sprint(got) != fmt.Sprint(want) || len(notices) != 2 {
		t.Errorf("batch through the proxy: %q, notices %q; want %q and 2 notices", got, notices, want)
	}
}
