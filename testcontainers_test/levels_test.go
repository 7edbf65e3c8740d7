package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
)

// levelMerged is what a level of rollup table daily by grain g must hold:
// the rollup's rows merged per level bucket and dimension values, by
// PostgreSQL (hll_union_agg is our union, byte for byte: TestSketchCompat).
func levelMerged(g string) string {
	return fmt.Sprintf(`SELECT date_trunc('%s', bucket, 'UTC') AS bucket, country, device,
		sum(row_count)::bigint, hll_send(hll_union_agg(distinct_user_id::hll)), sum(sum_amount), min(min_amount),
		max(max_created_at) FROM daily GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, g)
}

func levelContent(g string) string {
	return fmt.Sprintf(`SELECT bucket, country, device, row_count, distinct_user_id, sum_amount, min_amount,
		max_created_at FROM daily_%s ORDER BY 1, 2, 3`, g)
}

// checkLevels checks that every level table holds its rollup's rows merged.
func checkLevels(t *testing.T, conn *pgx.Conn, when string) {
	t.Helper()
	for _, g := range []string{"week", "month"} {
		want := rollupContentSQL(t, conn, levelMerged(g))
		got := rollupContentSQL(t, conn, levelContent(g))
		if got != want {
			t.Errorf("%s: the %s level is not the merge of the rollup's rows:\n got %.600s\nwant %.600s", when, g, got, want)
		}
	}
}

// rollupContentSQL is the text of every row query returns.
func rollupContentSQL(t *testing.T, conn *pgx.Conn, query string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	var b strings.Builder
	n := 0
	for rows.Next() {
		for _, v := range rows.RawValues() {
			b.WriteString(string(v))
			b.WriteByte('|')
		}
		b.WriteByte('\n')
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no rows: %s", query)
	}
	return b.String()
}

// TestRollupLevels: levels (pgsketch.add_rollup_level) hold their
// rollup's rows merged, after the build and after incremental and range
// refreshes; every rewritten query of the differential suites gives the
// same answer, byte for byte, with the levels as without; dropping a level
// or the rollup drops the tables; bad levels are refused.
func TestRollupLevels(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 300_000, 90, "2026-03-29 12:00", "3 days")
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "0")
	url := p.URL(db.DSN)
	ctx := context.Background()

	queries := append(readQueryFile(t, "testdata/aggregates/queries.txt"), readQueryFile(t, "testdata/aggregates/more_queries.txt")...)
	answers := func(c *noticeConn) map[int]*answer {
		out := map[int]*answer{}
		for i, q := range queries {
			if !q.rollup {
				continue
			}
			a, err := c.query(ctx, q.sql)
			if err != nil {
				t.Fatalf("line %d: %v\n%s", q.line, err, q.sql)
			}
			if len(a.notices) != 1 {
				t.Fatalf("line %d: not answered from the rollup: %q\n%s", q.line, a.notices, q.sql)
			}
			out[i] = a
		}
		return out
	}
	c := connectSimple(t, url)
	// The rollup half merged in the proxy, so that levels are all that
	// differs; the server merge is compared with it by TestMergeStrategies.
	mustExec(t, c.Conn, "SET pgsketch.merge = proxy")
	without := answers(c)

	// Levels are built by the next refresh, in its transaction.
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('daily', 'month')`)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('daily', 'week')`)
	res := refreshRollup(t, conn, "daily", refresh.Options{})
	if len(res.Levels) != 2 {
		t.Fatalf("refresh rebuilt levels %v, want week and month", res.Levels)
	}
	checkLevels(t, conn, "built")

	with := answers(c)
	used := 0
	for i, q := range queries {
		a, b := without[i], with[i]
		if a == nil {
			continue
		}
		if fmt.Sprint(a.fields, a.raw, a.tag) != fmt.Sprint(b.fields, b.raw, b.tag) {
			t.Errorf("line %d: the answer differs with levels:\nwithout %q\n   with %q\n%s", q.line, a.rows, b.rows, q.sql)
		}
		ex, err := c.query(ctx, "EXPLAIN "+q.sql)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ex.rows {
			if strings.HasPrefix(r[0], "level: ") {
				used++
			}
		}
	}
	t.Logf("%d rewritten queries answered alike with and without levels; %d of them read a level", len(without), used)
	if used < 20 {
		t.Errorf("only %d queries read a level", used)
	}
	// The same merged in PostgreSQL, and through a proxy with its cache
	// (filled, then used).
	sameAsWithout := func(what string, got map[int]*answer) {
		t.Helper()
		for i, a := range without {
			b := got[i]
			if fmt.Sprint(a.fields, a.raw, a.tag) != fmt.Sprint(b.fields, b.raw, b.tag) {
				t.Errorf("line %d, %s: the answer differs:\nwithout levels %q\n           got %q", queries[i].line, what, a.rows, b.rows)
			}
		}
	}
	mustExec(t, c.Conn, "SET pgsketch.merge = server")
	sameAsWithout("levels merged in PostgreSQL", answers(c))
	cached := connectSimple(t, startProxy(t, server.adminURL, "--approx", "on").URL(db.DSN))
	sameAsWithout("levels, cache filling", answers(cached))
	sameAsWithout("levels, cached", answers(cached))

	// Over all time, the rows after the watermark (and those without a
	// time) are read by the index on the time column. PostgreSQL's planner
	// cannot know the watermark the statement reads: it took a third of
	// the table for its estimate, and at 20 M rows read all of it.
	ex, err := c.query(ctx, "EXPLAIN SELECT country, count(DISTINCT user_id) FROM events GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&total); err != nil {
		t.Fatal(err)
	}
	tail := regexp.MustCompile(`Scan on events t .*rows=(\d+)`)
	found := false
	for _, r := range ex.rows {
		if m := tail.FindStringSubmatch(r[0]); m != nil {
			found = true
			if n, _ := strconv.ParseInt(m[1], 10, 64); strings.Contains(r[0], "Seq Scan") || n > total/10 {
				t.Errorf("all time: the tail is read as %q (%d rows in the table)", strings.TrimSpace(r[0]), total)
			}
		}
	}
	if !found {
		t.Errorf("all time: no read of the base table in the fetch's plan: %q", ex.rows)
	}

	// Appends, late rows inside the window, then a range refresh after an
	// update and a delete: the levels follow.
	mustExec(t, conn, `INSERT INTO events SELECT id + 20000000, created_at + interval '2 days', user_id + 7, country, device, amount
		FROM events WHERE created_at >= '2026-04-02'`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	checkLevels(t, conn, "after appends")
	mustExec(t, conn, `UPDATE events SET user_id = user_id + 1000000 WHERE created_at >= '2026-02-10' AND created_at < '2026-02-11'`)
	mustExec(t, conn, `DELETE FROM events WHERE created_at >= '2026-03-03' AND created_at < '2026-03-04' AND device = 'ios'`)
	refreshRollup(t, conn, "daily", refresh.Options{From: "2026-02-10", To: "2026-03-04"})
	checkLevels(t, conn, "after a range refresh")

	// The CLI's --levels, and refusals.
	for _, tc := range []struct{ sql, code, msg string }{
		{`SELECT pgsketch.add_rollup_level('daily', 'month')`, "42710", `rollup 'daily' already has a month level`},
		{`SELECT pgsketch.add_rollup_level('daily', 'year')`, "22023", `unknown level grain 'year'`},
		{`SELECT pgsketch.add_rollup_level('daily', 'day')`, "22023", `a day level does not hold whole buckets of rollup 'daily'`},
		{`SELECT pgsketch.add_rollup_level('nope', 'month')`, "42704", `rollup 'nope' does not exist`},
		{`SELECT pgsketch.drop_rollup_level('daily', 'day')`, "42704", `rollup 'daily' has no day level`},
	} {
		_, err := conn.Exec(ctx, tc.sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(pe.Message, tc.msg) {
			t.Errorf("%s: %v, want %s %q", tc.sql, err, tc.code, tc.msg)
		}
	}
	r := runCLI(t, nil, "rollup", "create", "weekly", "--dsn", db.DSN, "--table", "public.events", "--time", "created_at",
		"--grain", "week", "--distinct", "user_id", "--levels", "month")
	if r.code == 0 || !strings.Contains(r.stderr, "a month level does not hold whole buckets of rollup 'weekly'") {
		t.Errorf("rollup create --grain week --levels month: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgsketch.rollup_defs WHERE name = 'weekly'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a refused rollup was defined: %d %v", n, err)
	}
	r = runCLI(t, nil, "rollup", "create", "hourly", "--dsn", db.DSN, "--table", "public.events", "--time", "created_at",
		"--grain", "hour", "--distinct", "user_id", "--levels", "day,month")
	if r.code != 0 || !strings.Contains(r.stdout, "day level rows") || !strings.Contains(r.stdout, "month level rows") {
		t.Errorf("rollup create --levels day,month: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Without --levels, a daily rollup gets week and month levels;
	// --levels none gives none; rollup list shows them.
	r = runCLI(t, nil, "rollup", "create", "daily_default", "--dsn", db.DSN, "--table", "public.events", "--time", "created_at",
		"--distinct", "user_id")
	if r.code != 0 || !strings.Contains(r.stdout, "week level rows") || !strings.Contains(r.stdout, "month level rows") {
		t.Errorf("rollup create without --levels: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "rollup", "create", "daily_bare", "--dsn", db.DSN, "--table", "public.events", "--time", "created_at",
		"--distinct", "user_id", "--levels", "none")
	if r.code != 0 || strings.Contains(r.stdout, "level rows") {
		t.Errorf("rollup create --levels none: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "rollup", "list", "--dsn", db.DSN)
	if !regexp.MustCompile(`(?m)^daily_default .* month \d+ kB, week \d+ kB `).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^daily_bare .* none `).MatchString(r.stdout) {
		t.Errorf("rollup list:\n%s%s", r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "rollup", "create", "daily_odd", "--dsn", db.DSN, "--table", "public.events", "--time", "created_at",
		"--distinct", "user_id", "--levels", "none,week")
	if r.code == 0 || !strings.Contains(r.stderr, "auto and none stand alone") {
		t.Errorf("rollup create --levels none,week: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustExec(t, conn, `SELECT pgsketch.drop_rollup('daily_default')`)
	mustExec(t, conn, `SELECT pgsketch.drop_rollup('daily_bare')`)

	// Dropping a level bumps the version (the proxy stops reading it) and
	// drops its table; dropping the rollup drops the rest.
	mustExec(t, conn, `SELECT pgsketch.drop_rollup_level('daily', 'week')`)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname IN ('daily_week', 'daily_month')`).Scan(&n); err != nil || n != 1 {
		t.Errorf("level tables after dropping one: %d %v", n, err)
	}
	a, err := c.query(ctx, "EXPLAIN SELECT date_trunc('week', created_at), count(DISTINCT user_id) FROM events GROUP BY 1")
	if err != nil || strings.Contains(fmt.Sprint(a.rows), "level: week") {
		t.Errorf("a dropped level is still planned: %v %v", a, err)
	}
	mustExec(t, conn, `SELECT pgsketch.drop_rollup('daily')`)
	mustExec(t, conn, `SELECT pgsketch.drop_rollup('hourly')`)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname LIKE 'daily%' OR relname LIKE 'hourly%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("tables left after drop_rollup: %d %v", n, err)
	}
}

// TestRollupLevelsChosenAsRun: a range given by parameters is known only
// as the fetch runs, which then reads the coarsest level of which the
// range holds a whole bucket (else the finest): a month where the range
// holds one, weeks where it holds none. Every answer is byte for byte the
// answer of the same range written as constants (the level chosen from
// them as the query is planned), over whole months, weeks, a few days,
// changed buckets and the rows after the watermark.
func TestRollupLevelsChosenAsRun(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 60_000, 90, "2026-03-29 12:00", "3 days")
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('daily', 'month')`)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('daily', 'week')`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	// Changed buckets after the refresh: a late row in February, an update
	// in March.
	mustExec(t, conn, `INSERT INTO events SELECT id + 30000000, created_at, user_id + 5, country, device, amount
		FROM events WHERE created_at >= '2026-02-17' AND created_at < '2026-02-17 00:10'`)
	mustExec(t, conn, `UPDATE events SET amount = amount + 1 WHERE created_at >= '2026-03-11' AND created_at < '2026-03-11 01:00'`)

	url := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "0").URL(db.DSN)
	// One connection for both forms, so that both answers come in the
	// same formats.
	bound := connectMode(t, url, pgx.QueryExecModeCacheStatement)
	const q = `SELECT country, count(DISTINCT user_id), count(*), sum(amount) FROM events
		WHERE created_at >= %s AND created_at < %s GROUP BY 1 ORDER BY 1`
	for _, tc := range []struct {
		from, to string
		level    string // the level table the fetch reads
		tooShort bool   // for any level, as the planner sees constants
	}{
		{"2026-02-01", "2026-03-01", "daily_month", false},
		{"2026-01-15", "2026-03-20", "daily_month", false},
		{"2026-01-05", "2026-04-10", "daily_month", false},
		{"2026-02-03", "2026-03-10", "daily_week", false},
		{"2026-03-02", "2026-03-30", "daily_week", false},
		{"2026-02-10", "2026-02-13", "daily_week", true},
		{"2026-02-16 06:00", "2026-02-24 18:00", "daily_week", false},
	} {
		checkLevelChosen(t, bound, conn, "daily", q, tc.from, tc.to, tc.level, tc.tooShort)
	}
}

// TestRollupLevelsChosenAsRunZoned: the same for hours cut in Berlin's
// days and weeks, whose length changes with daylight saving time (the
// last Sunday of March): the levels' buckets do not keep one offset from
// UTC, and the fetch reads the level buckets after the one of the rollup's
// last bucket before the range.
func TestRollupLevelsChosenAsRunZoned(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 60_000, 90)
	createRollup(t, conn, "hourly", hourlyRollupArgs+", time_zone => 'Europe/Berlin'")
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('hourly', 'day')`)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('hourly', 'week')`)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	mustExec(t, conn, `INSERT INTO events SELECT id + 40000000, created_at + interval '17 minutes', user_id + 3, country, device, amount
		FROM events WHERE created_at >= '2026-03-29 00:00+00' AND created_at < '2026-03-29 03:00+00'; ANALYZE events`)
	url := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "0").URL(db.DSN)
	bound := connectMode(t, url, pgx.QueryExecModeCacheStatement)
	const q = `SELECT device, count(DISTINCT user_id), count(*), sum(amount) FROM events
		WHERE created_at >= %s AND created_at < %s GROUP BY 1 ORDER BY 1`
	for _, tc := range []struct {
		from, to string // in UTC
		level    string
		tooShort bool
	}{
		{"2026-03-15 23:00", "2026-04-02 10:00", "hourly_week", false}, // Berlin's Mondays 03-16 and 03-23, a week over the change
		{"2026-03-21 05:00", "2026-03-31 20:00", "hourly_week", false},
		{"2026-03-27 23:00", "2026-03-30 07:00", "hourly_day", false}, // 03-28 and the 23-hour 03-29
		{"2026-03-28 22:30", "2026-03-29 22:00", "hourly_day", false}, // the 23-hour day, whole
		{"2026-03-29 00:30", "2026-03-29 21:30", "hourly_day", true},  // no whole day
	} {
		checkLevelChosen(t, bound, conn, "hourly", q, tc.from, tc.to, tc.level, tc.tooShort)
	}
}

// checkLevelChosen asks query q (a format with the range's two bounds)
// through the proxy connection bound over [from, to) (UTC) as constants
// and as parameters, and checks that both are answered alike from rollup,
// and that either way the fetch reads the level table level (as
// constants none when tooShort: too short to hold a bucket of any level).
func checkLevelChosen(t *testing.T, bound *noticeConn, conn *pgx.Conn, rollup, q, from, to, level string, tooShort bool) {
	t.Helper()
	ctx := context.Background()
	name := from + " to " + to
	lo, err1 := time.Parse("2006-01-02 15:04", normMinute(from))
	hi, err2 := time.Parse("2006-01-02 15:04", normMinute(to))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	// In a form the planner reads as a constant time.
	const literal = "'2006-01-02 15:04:05Z07'"
	constants := fmt.Sprintf(q, lo.Format(literal), hi.Format(literal))
	want, err := bound.query(ctx, constants)
	if err != nil {
		t.Fatalf("%s, constants: %v", name, err)
	}
	got, err := bound.query(ctx, fmt.Sprintf(q, "$1", "$2"), lo, hi)
	if err != nil {
		t.Fatalf("%s, parameters: %v", name, err)
	}
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], "approximated from rollup "+rollup) {
		t.Fatalf("%s: not answered from the rollup: %q", name, got.notices)
	}
	if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
		t.Errorf("%s: with parameters\n got %q\nwant %q (constants)", name, got.rows, want.rows)
	}
	if read := levelsRead(t, bound, conn, rollup, fmt.Sprintf(q, "$1", "$2"), []any{lo, hi}, lo, hi); fmt.Sprint(read) != fmt.Sprint([]string{level}) {
		t.Errorf("%s: by parameters, the fetch read the levels %v, want %s", name, read, level)
	}
	// Constants are the fetch's parameters too (lifted): the same choice.
	wantConst := []string{level}
	if tooShort {
		wantConst = nil
	}
	if read := levelsRead(t, bound, conn, rollup, constants, nil, lo, hi); fmt.Sprint(read) != fmt.Sprint(wantConst) {
		t.Errorf("%s: by constants, the fetch read the levels %v, want %v", name, read, wantConst)
	}
}

// normMinute gives a day without a time its midnight.
func normMinute(s string) string {
	if len(s) == len("2006-01-02") {
		return s + " 00:00"
	}
	return s
}

// levelsRead runs the fetch of query (asked with args through the proxy
// connection c; its range [lo, hi) the fetch's two parameters) in
// PostgreSQL under EXPLAIN ANALYZE and returns the level tables of rollup
// it read.
func levelsRead(t *testing.T, c *noticeConn, conn *pgx.Conn, rollup, query string, args []any, lo, hi time.Time) []string {
	t.Helper()
	ctx := context.Background()
	ex, err := c.query(ctx, "EXPLAIN VERBOSE "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	fetch := ""
	for _, r := range ex.rows {
		if s := strings.TrimSpace(r[0]); strings.HasPrefix(s, "fetch: ") {
			fetch = strings.TrimPrefix(s, "fetch: ")
		}
	}
	if fetch == "" {
		t.Fatalf("no fetch in the EXPLAIN: %q", ex.rows)
	}
	if _, err := conn.Exec(ctx, "PREPARE levels_read(timestamptz, timestamptz) AS "+fetch); err != nil {
		t.Fatalf("%v\n%s", err, fetch)
	}
	defer conn.Exec(ctx, "DEALLOCATE levels_read")
	lits := []string{"'" + lo.Format(time.RFC3339) + "'", "'" + hi.Format(time.RFC3339) + "'"}
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE levels_read("+strings.Join(lits, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	// A scan of a level the fetch did not pick is never executed.
	scan := regexp.MustCompile(`Scan (?:using \S+ )?on (` + rollup + `_(?:day|week|month))\b.*\(actual rows=`)
	seen := map[string]bool{}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
		if m := scan.FindStringSubmatch(line); m != nil {
			seen[m[1]] = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range []string{"month", "week", "day"} {
		if seen[rollup+"_"+g] {
			out = append(out, rollup+"_"+g)
		}
	}
	if len(out) == 0 {
		t.Logf("plan:\n%s", strings.Join(plan, "\n"))
	}
	return out
}
