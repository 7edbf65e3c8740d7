package e2e

import (
	"context"
	binenc "encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/refresh"
)

// Red team B (2026-12-05): Theta overlaps (INTERSECT/EXCEPT, IN/EXISTS
// filters, retention grids), top-k, star joins, passed-on counts, FROM
// ONLY over an inheritance child, the extended protocol (parameters
// declared timestamp and bound in binary in a New York session, Describe
// before Bind, mixed result formats, row limits, pipelines) and
// transactions (savepoints, aborted blocks, SERIALIZABLE READ ONLY, a
// read-only session, cursors, REPEATABLE READ across another session's
// refresh) around answered statements. Each attack runs through the proxy
// and straight against PostgreSQL; an answer from sketches may differ only
// by its stated error. TestRedteamBPipelineFallback is the one finding
// (it fails at 8be7ce4: a pipeline's rollup refusal was the client's
// error); TestRedteamBHeld keeps the attacks that held.

// bAttack is one statement, its settings and parameters.
type bAttack struct {
	name string
	// exact, when set, is what PostgreSQL runs instead: the same question
	// in a form it answers fast.
	exact string
	set   []string
	sql   string
	args  []any
}

// bKind says how the proxy answered, from its notices.
func bKind(notices []string) string {
	all := strings.Join(notices, "\n")
	switch {
	case strings.Contains(all, "from the Theta sketches") && !strings.Contains(all, "answered exactly by PostgreSQL"):
		return "theta"
	case strings.Contains(all, "top-k of") && strings.Contains(all, "answered exactly:"):
		return "topk"
	case strings.Contains(all, "top-k of") && strings.Contains(all, "approximated"):
		return "topk-approx"
	case strings.Contains(all, "approximated from rollup"):
		return "hll"
	}
	return "exact"
}

// bTolerance is how far an estimated value may be from the exact one.
func bTolerance(kind string, exact float64) float64 {
	switch kind {
	case "theta":
		return 0.2*math.Abs(exact) + 5
	case "hll":
		return 5*1.04/128*math.Abs(exact) + 1
	}
	return 0
}

// bCompare compares an answer with PostgreSQL's: columns, row count, and
// each cell equal, or within the tolerance of how it was answered. Rows
// are compared in order when ordered, else sorted.
func bCompare(got, want *answer, kind string, ordered bool) error {
	if len(got.fields) != len(want.fields) {
		return fmt.Errorf("%d columns, want %d", len(got.fields), len(want.fields))
	}
	for i := range got.fields {
		g, w := got.fields[i], want.fields[i]
		if g.Name != w.Name || g.DataTypeOID != w.DataTypeOID {
			return fmt.Errorf("column %d is %s/%d, want %s/%d", i+1, g.Name, g.DataTypeOID, w.Name, w.DataTypeOID)
		}
	}
	if len(got.rows) != len(want.rows) || got.tag != want.tag {
		return fmt.Errorf("%d rows (%s), want %d (%s)", len(got.rows), got.tag, len(want.rows), want.tag)
	}
	gr, wr := got.rows, want.rows
	if !ordered {
		sorted := func(rows [][]string) [][]string {
			out := append([][]string(nil), rows...)
			sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
			return out
		}
		gr, wr = sorted(gr), sorted(wr)
	}
	for r := range wr {
		for i := range wr[r] {
			if gr[r][i] == wr[r][i] {
				continue
			}
			g, gerr := strconv.ParseFloat(gr[r][i], 64)
			w, werr := strconv.ParseFloat(wr[r][i], 64)
			if gerr != nil || werr != nil || math.Abs(g-w) > bTolerance(kind, w) {
				return fmt.Errorf("row %d column %d (%s): %q, PostgreSQL's %q", r+1, i+1, got.fields[i].Name, gr[r][i], wr[r][i])
			}
		}
	}
	return nil
}

// bRun runs a on proxied and direct and compares; it returns how the proxy
// answered ("" when it failed as PostgreSQL did) and a failure, if any.
func bRun(ctx context.Context, proxied, direct *noticeConn, a bAttack) (string, error) {
	for _, s := range a.set {
		if _, err := proxied.Exec(ctx, s); err != nil {
			return "", fmt.Errorf("proxy: %s: %v", s, err)
		}
		if _, err := direct.Exec(ctx, s); err != nil {
			return "", fmt.Errorf("direct: %s: %v", s, err)
		}
	}
	defer func() {
		for _, s := range a.set {
			if f := strings.Fields(s); len(f) >= 2 && strings.EqualFold(f[0], "SET") {
				proxied.Exec(ctx, "RESET "+f[1])
				direct.Exec(ctx, "RESET "+f[1])
			}
		}
	}()
	exactSQL := acdRE.ReplaceAllString(a.sql, "count(DISTINCT ")
	if a.exact != "" {
		exactSQL = a.exact
	}
	want, werr := direct.query(ctx, exactSQL, a.args...)
	got, gerr := proxied.query(ctx, a.sql, a.args...)
	if werr != nil || gerr != nil {
		if werr == nil || gerr == nil {
			return "", fmt.Errorf("direct error %v, proxy error %v", werr, gerr)
		}
		return "", nil
	}
	kind := bKind(got.notices)
	if kind == "exact" && len(got.notices) > 0 {
		kind += ": " + strings.Join(got.notices, " | ")
	}
	if kind == "topk-approx" {
		return kind, nil
	}
	ordered := strings.Contains(strings.ToUpper(a.sql), "ORDER BY")
	if err := bCompare(got, want, strings.SplitN(kind, ":", 2)[0], ordered); err != nil {
		return kind, fmt.Errorf("%v (answered: %s; notices %q)\n got %q\nwant %q", err, kind, got.notices, got.rows, want.rows)
	}
	return kind, nil
}

// bRunAll runs attacks in both protocols and reports each.
func bRunAll(t *testing.T, db *testDB, p *proxyProc, attacks []bAttack) {
	t.Helper()
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied, direct := connectMode(t, p.URL(db.DSN), mode), connectMode(t, db.DSN, mode)
		mustExec(t, proxied.Conn, "SET statement_timeout = '60s'")
		mustExec(t, direct.Conn, "SET statement_timeout = '60s'")
		for _, a := range attacks {
			kind, err := bRun(ctx, proxied, direct, a)
			if err != nil {
				t.Errorf("%v: %s: %v\n%s", mode, a.name, err, a.sql)
				continue
			}
			t.Logf("%v: %s: held (%s)", mode, a.name, kind)
		}
	}
}

// bFixture: 200 000 events over 60 days from 2026-01-01, an index on the
// time; rollups ov (distinct and Theta of user_id by country and device),
// tk (top-k of user_id by device) and ovc (Theta of the nullable country,
// by device); the dimension table countries; a schema shadow holding
// another, smaller events table.
func bFixture(t *testing.T) (*testDB, *pgx.Conn, *proxyProc) {
	t.Helper()
	db, conn := eventsDB(t, 200_000, 60)
	mustExec(t, conn, `CREATE INDEX ON events (created_at)`)
	mustExec(t, conn, `CREATE INDEX ON events (user_id, created_at)`)
	mustExec(t, conn, `UPDATE events SET country = NULL WHERE id % 97 = 0`)
	// An inheritance child with rows of its own: the rollups hold them,
	// FROM ONLY events does not.
	mustExec(t, conn, `CREATE TABLE events_child () INHERITS (events)`)
	mustExec(t, conn, `INSERT INTO events_child SELECT id + 50000000, created_at, user_id + 1000000, country, device, amount FROM events WHERE id % 10 = 0`)
	createRollup(t, conn, "ov", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}', theta_columns => '{user_id}'`)
	refreshRollup(t, conn, "ov", refresh.Options{})
	createRollup(t, conn, "tk", `grain => 'day', dimensions => '{device}', topk_columns => '{user_id}'`)
	refreshRollup(t, conn, "tk", refresh.Options{})
	createRollup(t, conn, "ovc", `grain => 'day', dimensions => '{device}', theta_columns => '{country}'`)
	refreshRollup(t, conn, "ovc", refresh.Options{})
	mustExec(t, conn, `ANALYZE events`)
	mustExec(t, conn, `CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL, region text)`)
	mustExec(t, conn, `INSERT INTO countries VALUES
		('US', 'United States', 'Americas'), ('CA', 'Canada', 'Americas'), ('MX', 'Mexico', 'Americas'),
		('BR', 'Brazil', 'Americas'), ('AR', 'Argentina', NULL), ('DE', 'Germany', 'Europe'),
		('GB', 'United Kingdom', 'Europe'), ('FR', 'France', 'Europe'), ('ES', 'Spain', 'Europe'),
		('IT', 'Italy', 'Europe'), ('NL', 'Netherlands', 'Europe'), ('PL', 'Poland', 'Europe'),
		('SE', 'Sweden', 'Europe'), ('IN', 'India', 'Asia'), ('JP', 'Japan', 'Asia'), ('KR', 'South Korea', 'Asia'),
		('AU', 'Australia', 'Oceania'), ('NG', 'Nigeria', 'Africa'), ('ZA', 'South Africa', 'Africa'),
		('NZ', 'New Zealand', 'Oceania')`)
	mustExec(t, conn, `CREATE SCHEMA shadow`)
	mustExec(t, conn, `CREATE TABLE shadow.events (LIKE public.events)`)
	mustExec(t, conn, `INSERT INTO shadow.events SELECT * FROM public.events WHERE id % 50 = 0`)
	mustExec(t, conn, `CREATE TABLE vips (user_id bigint NOT NULL)`)
	mustExec(t, conn, `INSERT INTO vips SELECT DISTINCT user_id FROM events WHERE id % 7 = 0`)
	p := startProxy(t, server.adminURL, "--approx", "on")
	return db, conn, p
}

const (
	bJan  = `created_at >= '2026-01-01' AND created_at < '2026-02-01'`
	bFeb  = `created_at >= '2026-02-01' AND created_at < '2026-03-01'`
	bFebE = `e.created_at >= '2026-02-01' AND e.created_at < '2026-03-01'`
	bJanE = `e.created_at >= '2026-01-01' AND e.created_at < '2026-02-01'`
	bDayE = `e.created_at >= '2026-02-01' AND e.created_at < '2026-02-02'`
	bJanF = `f.created_at >= '2026-01-01' AND f.created_at < '2026-02-01'`
)

// bHeldQueries: every attack, to sort into findings and held.
func bHeldQueries(t *testing.T, db *testDB, p *proxyProc) {
	shadow := []string{"SET search_path = shadow, public"}
	star := `SELECT c.region, count(DISTINCT e.user_id) AS users, count(*) AS n FROM events e JOIN countries c ON c.code = e.country WHERE ` + bFebE + ` GROUP BY 1`
	attacks := []bAttack{
		// Overlaps, the filtered form.
		{name: "IN subquery with LIMIT", sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM events WHERE ` + bJan + ` ORDER BY user_id LIMIT 2000)`},
		{name: "IN subquery with GROUP BY HAVING", sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM events WHERE ` + bJan + ` GROUP BY user_id HAVING count(*) > 3)`},
		{name: "IN subquery correlated on country", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE e.created_at >= '2026-02-01' AND e.created_at < '2026-02-01 02:00' AND e.user_id IN (SELECT f.user_id FROM events f WHERE ` + bJanF + ` AND f.country = e.country)`},
		{name: "IN subquery of user_id + 0", sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id + 0 FROM events WHERE ` + bJan + `)`},
		{name: "IN subquery UNION", sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM events WHERE ` + bJan + ` UNION SELECT 1)`},
		{name: "IN subquery of another table", sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM vips)`},
		{name: "IN subquery of shadow.events", sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM shadow.events WHERE ` + bJan + `)`},
		{name: "IN subquery unqualified, shadowed", set: shadow, sql: `SELECT count(DISTINCT user_id) FROM public.events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM events WHERE ` + bJan + `)`},
		{name: "outer unqualified shadowed, inner public", set: shadow, sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM public.events WHERE ` + bJan + `)`},
		{name: "NOT EXISTS correlated on country too", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND NOT EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND f.country = e.country AND ` + bJanF + `)`},
		// FROM ONLY: without the inheritance child's rows.
		{name: "ONLY: single", sql: `SELECT count(DISTINCT user_id) FROM ONLY events WHERE ` + bFeb},
		{name: "ONLY: IN subquery", sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM ONLY events WHERE ` + bJan + `)`},
		{name: "ONLY: IN outer", sql: `SELECT count(DISTINCT user_id) FROM ONLY events WHERE ` + bFeb + ` AND user_id NOT IN (SELECT user_id FROM events WHERE ` + bJan + `)`},
		{name: "ONLY: EXISTS inner", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bFebE + ` AND NOT EXISTS (SELECT 1 FROM ONLY events f WHERE f.user_id = e.user_id AND ` + bJanF + `)`},
		{name: "ONLY: INTERSECT one arm", sql: `SELECT count(*) FROM (SELECT user_id FROM events WHERE ` + bJan + ` INTERSECT SELECT user_id FROM ONLY events WHERE ` + bFeb + `) x`},
		{name: "ONLY: EXCEPT first arm", sql: `SELECT count(*) FROM (SELECT user_id FROM ONLY events WHERE ` + bJan + ` EXCEPT SELECT user_id FROM events WHERE ` + bFeb + `) x`},
		{name: "ONLY: grid side", sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM ONLY events) a
			JOIN (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) b ON a.user_id = b.user_id AND b.w > a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "ONLY: grid CTE", sql: `WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM ONLY events)
			SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week = a.week + interval '1 week' GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "ONLY: top-k", sql: `SELECT user_id, count(*) AS n FROM ONLY events WHERE ` + bFeb + ` GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "ONLY: top-k HAVING", sql: `SELECT user_id, count(*) AS n FROM ONLY events GROUP BY user_id HAVING count(*) > 100 ORDER BY 1`},
		{name: "ONLY: star", sql: `SELECT c.region, count(DISTINCT e.user_id) AS users, count(*) AS n FROM ONLY events e JOIN countries c ON c.code = e.country WHERE ` + bFebE + ` GROUP BY 1 ORDER BY 1`},
		{name: "ONLY: nested", sql: `SELECT q.users FROM (SELECT count(DISTINCT user_id) AS users FROM ONLY events WHERE ` + bFeb + `) q`},
		{name: "ONLY: series window", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users FROM generate_series('2026-02-01'::timestamp, '2026-02-10'::timestamp, interval '1 day') AS d LEFT JOIN ONLY events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "ONLY: series cross join", sql: `SELECT g, e.device, count(DISTINCT e.user_id) AS users FROM ONLY events e CROSS JOIN generate_series(0, 1) AS g WHERE ` + bFebE + ` GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "ONLY: UNION arm", sql: `SELECT count(DISTINCT user_id) AS users FROM ONLY events WHERE ` + bFeb + ` UNION ALL SELECT count(DISTINCT user_id) FROM events WHERE ` + bJan + ` ORDER BY 1`},
		{name: "ONLY: semi-join on dims", sql: `SELECT count(DISTINCT user_id) AS users FROM ONLY events WHERE country IN (SELECT code FROM countries WHERE region = 'Europe')`},
		{name: "ONLY: FILTER", sql: `SELECT count(DISTINCT user_id) FILTER (WHERE device = 'ios') AS users FROM ONLY events`},
		{name: "ONLY: ROLLUP", sql: `SELECT country, device, count(DISTINCT user_id) AS users FROM ONLY events GROUP BY ROLLUP (country, device) ORDER BY 1, 2`},
		{name: "ONLY: window", sql: `SELECT country, count(DISTINCT user_id) AS users, rank() OVER (ORDER BY country) FROM ONLY events GROUP BY 1 ORDER BY 1`},
		// More passed-on counts.
		{name: "star, max of the count", sql: `SELECT q.region, max(q.users) AS users FROM (` + star + `) q GROUP BY 1 ORDER BY 1`},
		{name: "star, JOIN USING", sql: `SELECT region, q.users FROM (` + star + `) q JOIN (SELECT DISTINCT region FROM countries) r USING (region) ORDER BY 1`},
		{name: "star, NATURAL JOIN", sql: `SELECT * FROM (` + star + `) q NATURAL JOIN (SELECT DISTINCT region FROM countries) r ORDER BY 1`},
		{name: "star, LATERAL keyword", sql: `SELECT q.region, q.users FROM countries k, LATERAL (` + star + `) q WHERE k.code = 'US' ORDER BY 1`},
		{name: "star, partial alias list", sql: `SELECT q.r, q.users FROM (` + star + `) AS q(r) ORDER BY 1`},
		{name: "star, scalar subquery of the star", sql: `SELECT (SELECT max(q.users) FROM (` + star + `) q) AS users`},
		{name: "star, ORDER BY count as text", sql: `SELECT q.region, q.users FROM (` + star + `) q ORDER BY q.users::text, 1`},
		{name: "star, count IN list", sql: `SELECT q.region, q.users FROM (` + star + `) q WHERE q.users NOT IN (1, 2) ORDER BY 1`},
		{name: "NOT IN of a nullable column", sql: `SELECT count(DISTINCT country) FROM events WHERE ` + bFeb + ` AND country NOT IN (SELECT country FROM events WHERE ` + bJan + ` AND device = 'ios')`},
		{name: "IN of a nullable column", sql: `SELECT count(DISTINCT country) FROM events WHERE ` + bFeb + ` AND country IN (SELECT country FROM events WHERE ` + bJan + `)`},
		{name: "FILTER on the outer count", sql: `SELECT count(DISTINCT user_id) FILTER (WHERE device = 'ios') FROM events WHERE ` + bFeb + ` AND user_id IN (SELECT user_id FROM events WHERE ` + bJan + `)`},
		{name: "IN with parameters typed text", sql: `SELECT count(DISTINCT user_id) FROM events WHERE created_at >= $1::text::timestamptz AND created_at < $2::text::timestamptz AND user_id IN (SELECT user_id FROM events WHERE created_at < $1::text::timestamptz)`, args: []any{"2026-02-01", "2026-03-01"}},
		// Overlaps, set operations.
		{name: "three-arm INTERSECT", sql: `SELECT count(*) FROM (SELECT user_id FROM events WHERE ` + bJan + ` INTERSECT SELECT user_id FROM events WHERE ` + bFeb + ` INTERSECT SELECT user_id FROM events WHERE device = 'ios') x`},
		{name: "EXCEPT then INTERSECT (precedence)", sql: `SELECT count(*) FROM (SELECT user_id FROM events WHERE ` + bJan + ` EXCEPT SELECT user_id FROM events WHERE ` + bFeb + ` INTERSECT SELECT user_id FROM events WHERE device = 'ios') x`},
		{name: "INTERSECT then EXCEPT", sql: `SELECT count(*) FROM (SELECT user_id FROM events WHERE ` + bJan + ` INTERSECT SELECT user_id FROM events WHERE ` + bFeb + ` EXCEPT SELECT user_id FROM events WHERE device = 'ios') x`},
		{name: "INTERSECT of shadow arm", sql: `SELECT count(*) FROM (SELECT user_id FROM events WHERE ` + bJan + ` INTERSECT SELECT user_id FROM shadow.events WHERE ` + bFeb + `) x`},
		{name: "INTERSECT unqualified arm shadowed", set: shadow, sql: `SELECT count(*) FROM (SELECT user_id FROM public.events WHERE ` + bJan + ` INTERSECT SELECT user_id FROM events WHERE ` + bFeb + `) x`},
		{name: "INTERSECT first arm shadowed", set: shadow, sql: `SELECT count(*) FROM (SELECT user_id FROM events WHERE ` + bJan + ` INTERSECT SELECT user_id FROM public.events WHERE ` + bFeb + `) x`},
		{name: "INTERSECT arms on NULL-able dims", sql: `SELECT count(*) FROM (SELECT user_id FROM events WHERE country <> 'US' AND ` + bJan + ` INTERSECT SELECT user_id FROM events WHERE country IS NULL AND ` + bFeb + `) x`},
		{name: "EXCEPT of country (nullable)", sql: `SELECT count(*) FROM (SELECT country FROM events WHERE ` + bJan + ` EXCEPT SELECT country FROM events WHERE ` + bFeb + ` AND device = 'ios') x`},
		{name: "INTERSECT count(user_id)", sql: `SELECT count(user_id) FROM (SELECT user_id FROM events WHERE ` + bJan + ` INTERSECT SELECT user_id FROM events WHERE ` + bFeb + `) x`},
		{name: "INTERSECT params typed timestamp, NY", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT count(*) FROM (SELECT user_id FROM events WHERE created_at >= $1::timestamp AND created_at < $2::timestamp INTERSECT SELECT user_id FROM events WHERE created_at >= $2::timestamp) x`,
			args: []any{time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 7, 0, 0, 0, 0, time.UTC)}},
		// Retention grids.
		{name: "grid in New York weeks", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events)
			SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week = a.week + interval '1 week' GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "grid in days as ::date, New York", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `WITH act AS (SELECT DISTINCT created_at::date AS d, user_id FROM events WHERE ` + bJan + `)
			SELECT a.d AS cohort, b.d, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.d = a.d + 7 GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "grid, a shadowed side", set: shadow, sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM public.events) a
			JOIN (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) b ON a.user_id = b.user_id AND b.w > a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "grid, the other side shadowed", set: shadow, sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) a
			JOIN (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM public.events) b ON a.user_id = b.user_id AND b.w > a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "grid of a nullable country side", sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events WHERE country <> 'US') a
			JOIN (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events WHERE country IS NULL) b ON a.user_id = b.user_id AND b.w >= a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "grid of country (nullable) values", sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, country FROM events) a
			JOIN (SELECT DISTINCT date_trunc('week', created_at) AS w, country FROM events) b ON a.country = b.country AND b.w = a.w + interval '1 week' GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "grid LIMIT", sql: `WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events)
			SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week >= a.week GROUP BY 1, 2 ORDER BY 1, 2 LIMIT 5 OFFSET 2`},
		// Top-k.
		{name: "top-k count(*) FILTER", sql: `SELECT user_id, count(*) FILTER (WHERE device = 'ios') AS n FROM events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "top-k ORDER BY -count(*) by name", sql: `SELECT user_id, -count(*) AS n FROM events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "top-k group by an expression", sql: `SELECT user_id % 1000 AS b, count(*) AS n FROM events GROUP BY 1 ORDER BY n DESC, 1 LIMIT 10`},
		{name: "top-k select a cast", sql: `SELECT user_id::text AS u, count(*) AS n FROM events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "top-k count(1)", sql: `SELECT user_id, count(1) AS n FROM events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "top-k by nullable country too", sql: `SELECT country, user_id, count(*) AS n FROM events WHERE ` + bFeb + ` GROUP BY 1, 2 ORDER BY n DESC, 1, 2 LIMIT 10`},
		{name: "top-k where country IS NULL", sql: `SELECT user_id, count(*) AS n FROM events WHERE country IS NULL GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "top-k HAVING with ORDER BY LIMIT", sql: `SELECT user_id, count(*) AS n FROM events WHERE device = 'ios' GROUP BY user_id HAVING count(*) >= 60 ORDER BY user_id DESC LIMIT 3`},
		{name: "top-k ROLLUP", sql: `SELECT user_id, count(*) AS n FROM events GROUP BY ROLLUP (user_id) ORDER BY n DESC, user_id LIMIT 10`},
		{name: "top-k GROUP BY item twice", sql: `SELECT user_id, count(*) AS n FROM events GROUP BY user_id, user_id ORDER BY 2 DESC, 1 LIMIT 10`},
		{name: "top-k shadowed", set: shadow, sql: `SELECT user_id, count(*) AS n FROM public.events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "top-k params typed timestamp, NY", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT user_id, count(*) AS n FROM events WHERE created_at >= $1::timestamp AND created_at < $2::timestamp GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`,
			args: []any{time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 7, 0, 0, 0, 0, time.UTC)}},
		{name: "top-k ORDER BY count DESC NULLS LAST", sql: `SELECT user_id, count(*) AS n FROM events GROUP BY user_id ORDER BY n DESC NULLS LAST, user_id LIMIT 10`},
		{name: "top-k ORDER BY count USING >", sql: `SELECT user_id, count(*) AS n FROM events GROUP BY user_id ORDER BY n USING >, user_id LIMIT 10`},
		{name: "top-k ORDER BY a second count", sql: `SELECT user_id, count(*) AS n FROM events GROUP BY user_id ORDER BY count(*) DESC, count(*) + user_id LIMIT 10`},
		// Star joins and passed-on counts.
		{name: "star, passed on through LATERAL", sql: `SELECT q.region, q.users, l.x FROM (` + star + `) q CROSS JOIN LATERAL (SELECT q.users AS x) l ORDER BY 1`},
		{name: "star, passed on and a scalar subquery", sql: `SELECT q.region, q.users, (SELECT q.users) AS x FROM (` + star + `) q ORDER BY 1`},
		{name: "star, q.*", sql: `SELECT q.* FROM (` + star + `) q ORDER BY 1`},
		{name: "star, SELECT *", sql: `SELECT * FROM (` + star + `) q ORDER BY 1`},
		{name: "star, (q).users", sql: `SELECT q.region, (q).users FROM (` + star + `) q ORDER BY 1`},
		{name: "star, count joined to itself", sql: `SELECT q.region, q.users FROM (` + star + `) q JOIN (` + star + `) r ON r.region = q.region AND r.users = q.users ORDER BY 1`},
		{name: "star, count in EXISTS", sql: `SELECT q.region, q.users FROM (` + star + `) q WHERE EXISTS (SELECT 1 WHERE q.users > 0) ORDER BY 1`},
		{name: "star, UNION (distinct)", sql: `SELECT q.region, q.users FROM (` + star + `) q UNION SELECT 'zz', 1 ORDER BY 1`},
		{name: "star, VALUES lists dimension", sql: `SELECT c.r, count(DISTINCT e.user_id) AS users FROM events e JOIN (VALUES ('US', 'a'), ('DE', 'b'), ('FR', 'b')) AS c(code, r) ON c.code = e.country GROUP BY 1 ORDER BY 1`},
		{name: "star, CTE dimension", sql: `WITH c AS (SELECT code, region FROM countries WHERE region <> 'Asia') SELECT c.region, count(DISTINCT e.user_id) AS users FROM events e JOIN c ON c.code = e.country GROUP BY 1 ORDER BY 1`},
		{name: "star, lower() join", sql: `SELECT c.region, count(DISTINCT e.user_id) AS users FROM events e JOIN countries c ON lower(c.code) = lower(e.country) GROUP BY 1 ORDER BY 1`},
		{name: "star, self join", sql: `SELECT e2.device, count(DISTINCT e.user_id) AS users FROM events e JOIN events e2 ON e2.id = e.id WHERE ` + bJanE + ` GROUP BY 1 ORDER BY 1`},
		{name: "star, FILTER region IS NULL", sql: `SELECT e.device, count(DISTINCT e.user_id) FILTER (WHERE c.region IS NULL) AS users FROM events e LEFT JOIN countries c ON c.code = e.country GROUP BY 1 ORDER BY 1`},
		{name: "star, shadowed fact", set: shadow, sql: `SELECT c.region, count(DISTINCT e.user_id) AS users, count(*) AS n FROM events e JOIN countries c ON c.code = e.country GROUP BY 1 ORDER BY 1`},
		{name: "star, two subqueries one shadowed", set: shadow, sql: `SELECT a.users AS users_a, b.users AS users_b FROM (SELECT count(DISTINCT user_id) AS users FROM public.events) a, (SELECT count(DISTINCT user_id) AS users FROM events) b`},
		{name: "star, params typed timestamp, NY", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT c.region, count(DISTINCT e.user_id) AS users, count(*) AS n FROM events e JOIN countries c ON c.code = e.country WHERE e.created_at >= $1::timestamp AND e.created_at < $2::timestamp GROUP BY 1 ORDER BY 1`,
			args: []any{time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 7, 0, 0, 0, 0, time.UTC)}},
		{name: "single, params typed timestamp, NY", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE created_at >= $1::timestamp AND created_at < $2::timestamp GROUP BY 1 ORDER BY 1`,
			args: []any{time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 7, 0, 0, 0, 0, time.UTC)}},
		{name: "single, params typed date, NY", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE created_at >= $1::date AND created_at < $2::date GROUP BY 1 ORDER BY 1`,
			args: []any{time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 7, 0, 0, 0, 0, time.UTC)}},
		{name: "single, params timestamptz as time, NY", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE created_at >= $1 AND created_at < $2 GROUP BY 1 ORDER BY 1`,
			args: []any{time.Date(2026, 1, 10, 5, 0, 0, 0, time.UTC), time.Date(2026, 2, 7, 5, 0, 0, 0, time.UTC)}},
		{name: "single, FOR UPDATE", sql: `SELECT count(DISTINCT user_id) FROM events WHERE ` + bJan + ` FOR UPDATE`},
		{name: "single, FOR SHARE in subquery", sql: `SELECT q.users FROM (SELECT count(DISTINCT user_id) AS users FROM events WHERE ` + bJan + `) q, (SELECT 1 FROM countries LIMIT 1 FOR SHARE) l`},
	}
	bRunAll(t, db, p, attacks)
}

// bQueries are one statement of each plan kind over February (a changed
// bucket on 2026-02-10 shows in each).
var bQueries = []struct{ name, sql string }{
	{"single", `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE ` + bFeb + ` GROUP BY 1 ORDER BY 1`},
	{"star", `SELECT c.region, count(DISTINCT e.user_id) AS users, count(*) AS n FROM events e JOIN countries c ON c.code = e.country WHERE ` + bFebE + ` GROUP BY 1 ORDER BY 1`},
	{"nested", `SELECT q.users, q.n FROM (SELECT count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE ` + bFeb + `) q`},
	{"overlap", `SELECT count(*) FROM (SELECT user_id FROM events WHERE ` + bJan + ` INTERSECT SELECT user_id FROM events WHERE ` + bFeb + `) x`},
	{"overlap IN", `SELECT count(DISTINCT user_id) FROM events WHERE ` + bFeb + ` AND user_id NOT IN (SELECT user_id FROM events WHERE ` + bJan + `)`},
	{"grid", `WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events)
		SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week = a.week + interval '1 week' GROUP BY 1, 2 ORDER BY 1, 2`},
	{"topk", `SELECT user_id, count(*) AS n FROM events WHERE ` + bFeb + ` GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
}

// bInsert writes n events of new users (ids from base) on 2026-02-10.
func bInsert(base, n int) string {
	return fmt.Sprintf(`INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT %d + g, '2026-02-10 13:00'::timestamptz + g * interval '1 second', 90000000 + g %% 40, 'US', 'ios', 5 FROM generate_series(1, %d) g`, base, n)
}

// bSame runs sql on both and compares; it says how the proxy answered.
func bSame(t *testing.T, what string, proxied, direct *noticeConn, sql string) string {
	t.Helper()
	kind, err := bRun(context.Background(), proxied, direct, bAttack{name: what, sql: sql})
	if err != nil {
		t.Errorf("%s: %v\n%s", what, err, sql)
	} else {
		t.Logf("%s: held (%s)", what, kind)
	}
	return kind
}

// bHeldTxn: transactions around answered statements.
func bHeldTxn(t *testing.T, db *testDB, conn *pgx.Conn, p *proxyProc) {
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied, direct := connectMode(t, p.URL(db.DSN), mode), connectMode(t, db.DSN, mode)
		both := func(sql string) {
			t.Helper()
			mustExec(t, proxied.Conn, sql)
			mustExec(t, direct.Conn, sql)
		}
		// Savepoints: rows of this transaction, then rolled back to.
		for _, q := range bQueries {
			name := fmt.Sprintf("%v: savepoint: %s", mode, q.name)
			both("BEGIN ISOLATION LEVEL REPEATABLE READ")
			bSame(t, name+": before", proxied, direct, q.sql)
			both("SAVEPOINT a")
			mustExec(t, proxied.Conn, bInsert(70000000, 4000))
			mustExec(t, direct.Conn, bInsert(71000000, 4000))
			bSame(t, name+": own rows", proxied, direct, q.sql)
			both("ROLLBACK TO SAVEPOINT a")
			bSame(t, name+": rolled back to", proxied, direct, q.sql)
			both("COMMIT")
		}
		// An aborted block.
		for _, q := range bQueries {
			both("BEGIN")
			proxied.Exec(ctx, "SELECT 1/0")
			direct.Exec(ctx, "SELECT 1/0")
			_, gerr := proxied.query(ctx, q.sql)
			_, werr := direct.query(ctx, q.sql)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Errorf("%v: aborted block: %s: proxy %v, PostgreSQL %v", mode, q.name, gerr, werr)
			}
			both("ROLLBACK")
		}
		// SERIALIZABLE READ ONLY DEFERRABLE, and a read-only session.
		for _, q := range bQueries {
			both("BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE")
			bSame(t, fmt.Sprintf("%v: serializable read only: %s", mode, q.name), proxied, direct, q.sql)
			both("COMMIT")
			both("SET default_transaction_read_only = on")
			bSame(t, fmt.Sprintf("%v: read-only session: %s", mode, q.name), proxied, direct, q.sql)
			both("RESET default_transaction_read_only")
		}
		// A cursor over each.
		for _, q := range bQueries {
			both("BEGIN")
			both("DECLARE c CURSOR FOR " + q.sql)
			bSame(t, fmt.Sprintf("%v: cursor: %s: FETCH 2", mode, q.name), proxied, direct, "FETCH 2 FROM c")
			bSame(t, fmt.Sprintf("%v: cursor: %s: FETCH ALL", mode, q.name), proxied, direct, "FETCH ALL FROM c")
			both("COMMIT")
		}
	}

	// A REPEATABLE READ block across another session's write and refresh.
	proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	mustExec(t, proxied.Conn, "BEGIN ISOLATION LEVEL REPEATABLE READ")
	mustExec(t, direct.Conn, "BEGIN ISOLATION LEVEL REPEATABLE READ")
	for _, q := range bQueries {
		bSame(t, "repeatable read: before: "+q.name, proxied, direct, q.sql)
	}
	mustExec(t, conn, bInsert(72000000, 6000))
	refreshRollup(t, conn, "ov", refresh.Options{})
	refreshRollup(t, conn, "tk", refresh.Options{})
	for _, q := range bQueries {
		bSame(t, "repeatable read: after a refresh elsewhere: "+q.name, proxied, direct, q.sql)
	}
	mustExec(t, proxied.Conn, "COMMIT")
	mustExec(t, direct.Conn, "COMMIT")
	for _, q := range bQueries {
		bSame(t, "after commit: "+q.name, proxied, direct, q.sql)
	}
}

// bHeldPipeline: a pgx batch is one pipeline, one implicit
// transaction: an error at its end rolls back a write at its start, and the
// statements between see the write.
func bHeldPipeline(t *testing.T, db *testDB, conn *pgx.Conn, p *proxyProc) {
	ctx := context.Background()
	for qi, q := range bQueries {
		run := func(url string, base int) ([]string, error) {
			c := connectMode(t, url, pgx.QueryExecModeCacheDescribe)
			b := &pgx.Batch{}
			b.Queue(bInsert(base, 4000))
			b.Queue(q.sql)
			b.Queue("SELECT 1/0")
			br := c.SendBatch(ctx, b)
			var out []string
			if _, err := br.Exec(); err != nil {
				out = append(out, "insert: "+err.Error())
			}
			rows, err := br.Query()
			if err == nil {
				for rows.Next() {
					v, _ := rows.Values()
					out = append(out, fmt.Sprint(v))
				}
				rows.Close()
				err = rows.Err()
			}
			if err != nil {
				out = append(out, "query: "+err.Error())
			}
			if _, err := br.Exec(); err != nil {
				out = append(out, "1/0: "+err.Error())
			}
			br.Close()
			return out, nil
		}
		base := 73000000 + qi*100000
		want, _ := run(db.DSN, base)
		got, _ := run(p.URL(db.DSN), base+50000)
		var n int
		if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM events WHERE id > %d AND id <= %d`, base, base+100000)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("pipeline %s: %d rows of the batch's INSERT stayed after its error (PostgreSQL rolls them back)", q.name, n)
			mustExec(t, conn, fmt.Sprintf(`DELETE FROM events WHERE id > %d AND id <= %d`, base, base+100000))
		}
		t.Logf("pipeline %s:\n got %q\nwant %q", q.name, got, want)
		if len(got) != len(want) {
			t.Errorf("pipeline %s: %d results, want %d\n got %q\nwant %q", q.name, len(got), len(want), got, want)
		}
	}
}

// bRaw runs one Parse/Bind/Describe/Execute/Sync on c and returns the rows
// (text), the notices and the error, if any.
func bRaw(t *testing.T, c *rawConn, msgs ...pgproto3.FrontendMessage) (rows [][]string, notices []string, errText string) {
	t.Helper()
	for _, m := range msgs {
		c.fe.Send(m)
	}
	if err := c.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	c.conn.SetReadDeadline(time.Now().Add(90 * time.Second))
	defer c.conn.SetReadDeadline(time.Time{})
	syncs := 0
	for _, m := range msgs {
		if _, ok := m.(*pgproto3.Sync); ok {
			syncs++
		}
		if _, ok := m.(*pgproto3.Query); ok {
			syncs++
		}
	}
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		switch m := msg.(type) {
		case *pgproto3.NoticeResponse:
			notices = append(notices, m.Message)
		case *pgproto3.DataRow:
			var r []string
			for _, v := range m.Values {
				if v == nil {
					r = append(r, "NULL")
				} else {
					r = append(r, string(v))
				}
			}
			rows = append(rows, r)
		case *pgproto3.ErrorResponse:
			errText += m.Code + " " + m.Message + "; "
		case *pgproto3.ReadyForQuery:
			if syncs--; syncs <= 0 {
				return rows, notices, errText
			}
		}
	}
}

func bTimestampBinary(ts time.Time) []byte {
	return binenc.BigEndian.AppendUint64(nil, uint64(ts.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()))
}

// bHeldRaw: parameters declared timestamp (no cast in the
// text), bound in binary, in a New York session; Describe before Bind;
// portals with row limits.
func bHeldRaw(t *testing.T, db *testDB, p *proxyProc) {
	ctx := context.Background()
	open := func(u string) *rawConn {
		target, err := targetFromDSN(u)
		if err != nil {
			t.Fatal(err)
		}
		target.Params = map[string]string{"TimeZone": "America/New_York"}
		c, err := dialRaw(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	direct, proxied := open(db.DSN), open(p.URL(db.DSN))
	rng := `created_at >= $1 AND created_at < $2`
	queries := []struct{ name, sql string }{
		{"single", `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE ` + rng + ` GROUP BY 1 ORDER BY 1`},
		{"single, no group", `SELECT count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE ` + rng},
		{"star", `SELECT c.region, count(DISTINCT e.user_id) AS users, count(*) AS n FROM events e JOIN countries c ON c.code = e.country WHERE e.created_at >= $1 AND e.created_at < $2 GROUP BY 1 ORDER BY 1`},
		{"nested", `SELECT q.users, q.n FROM (SELECT count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE ` + rng + `) q`},
		{"overlap", `SELECT count(*) FROM (SELECT user_id FROM events WHERE ` + rng + ` INTERSECT SELECT user_id FROM events WHERE created_at >= $2) x`},
		{"overlap IN", `SELECT count(DISTINCT user_id) FROM events WHERE ` + rng + ` AND user_id NOT IN (SELECT user_id FROM events WHERE created_at < $1)`},
		{"topk", `SELECT user_id, count(*) AS n FROM events WHERE ` + rng + ` GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{"topk HAVING", `SELECT user_id, count(*) AS n FROM events WHERE ` + rng + ` GROUP BY user_id HAVING count(*) >= 40 ORDER BY 1`},
	}
	lo, hi := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 7, 0, 0, 0, 0, time.UTC)
	for _, oid := range []uint32{1114, 1184, 0} {
		for _, format := range []int16{1, 0} {
			for _, q := range queries {
				var params [][]byte
				if format == 1 {
					if oid == 0 {
						continue
					}
					params = [][]byte{bTimestampBinary(lo), bTimestampBinary(hi)}
				} else {
					params = [][]byte{[]byte("2026-01-10 00:00"), []byte("2026-02-07 00:00")}
				}
				oids := []uint32{oid, oid}
				msgs := []pgproto3.FrontendMessage{
					&pgproto3.Parse{Query: q.sql, ParameterOIDs: oids},
					&pgproto3.Describe{ObjectType: 'S'},
					&pgproto3.Bind{ParameterFormatCodes: []int16{format}, Parameters: params},
					&pgproto3.Describe{ObjectType: 'P'},
					&pgproto3.Execute{MaxRows: 3},
					&pgproto3.Execute{},
					&pgproto3.Sync{},
				}
				name := fmt.Sprintf("oid %d format %d: %s", oid, format, q.name)
				want, _, werr := bRaw(t, direct, msgs...)
				got, notices, gerr := bRaw(t, proxied, msgs...)
				kind := bKind(notices)
				if werr != gerr {
					t.Errorf("%s: error %q, PostgreSQL's %q", name, gerr, werr)
					continue
				}
				g, w := &answer{rows: got}, &answer{rows: want}
				if err := bCompare(g, w, kind, true); err != nil {
					t.Errorf("%s: %v (answered %s, %q)\n got %q\nwant %q", name, err, kind, notices, got, want)
					continue
				}
				t.Logf("%s: held (%s) %d rows", name, kind, len(got))
			}
		}
	}
}

// bBatch runs stmts as one pgx batch (one pipeline, one Sync) and returns
// each statement's rows or error.
func bBatch(t *testing.T, url string, stmts ...string) []string {
	t.Helper()
	ctx := context.Background()
	c := connectMode(t, url, pgx.QueryExecModeCacheDescribe)
	b := &pgx.Batch{}
	for _, s := range stmts {
		b.Queue(s)
	}
	br := c.SendBatch(ctx, b)
	var out []string
	for range stmts {
		rows, err := br.Query()
		if err == nil {
			var vals []string
			for rows.Next() {
				v, _ := rows.Values()
				vals = append(vals, fmt.Sprint(v))
			}
			rows.Close()
			err = rows.Err()
			if err == nil {
				out = append(out, fmt.Sprintf("%d rows", len(vals)))
				continue
			}
		}
		out = append(out, "error: "+err.Error())
	}
	br.Close()
	return out
}

// bHeldExists: EXISTS subqueries whose OFFSET or HAVING
// changes which users they keep.
func bHeldExists(t *testing.T, db *testDB, p *proxyProc) {
	twice := `SELECT user_id FROM events f WHERE ` + bJanF + ` GROUP BY user_id HAVING count(*) >= 2`
	four := `SELECT user_id FROM events f WHERE ` + bJanF + ` GROUP BY user_id HAVING count(*) > 3`
	bRunAll(t, db, p, []bAttack{
		{name: "EXISTS with OFFSET 1", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + ` OFFSET 1)`,
			exact: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND e.user_id IN (` + twice + `)`},
		{name: "NOT EXISTS with OFFSET 1", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND NOT EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + ` OFFSET 1)`,
			exact: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND e.user_id NOT IN (` + twice + `)`},
		{name: "EXISTS GROUP BY HAVING", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + ` GROUP BY f.user_id HAVING count(*) > 3)`,
			exact: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND e.user_id IN (` + four + `)`},
		{name: "EXISTS HAVING without GROUP BY", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + ` HAVING count(*) > 3)`,
			exact: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND e.user_id IN (` + four + `)`},
		{name: "EXISTS with LIMIT 0", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + ` LIMIT 0)`,
			exact: `SELECT 0::bigint AS count`},
		{name: "EXISTS with OFFSET 0", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + ` OFFSET 0)`},
		{name: "EXISTS with LIMIT 1", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + ` LIMIT 1)`},
		{name: "EXISTS ORDER BY", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND EXISTS (SELECT 1 FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + ` ORDER BY f.created_at)`},
		{name: "EXISTS DISTINCT", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND EXISTS (SELECT DISTINCT f.device FROM events f WHERE f.user_id = e.user_id AND ` + bJanF + `)`},
		{name: "IN with OFFSET", sql: `SELECT count(DISTINCT e.user_id) FROM events e WHERE ` + bDayE + ` AND e.user_id IN (SELECT f.user_id FROM events f WHERE ` + bJanF + ` OFFSET 50000)`},
	})
}

// bBatchAnswer runs stmts as one pgx batch and returns the last
// statement's answer and the notices of the batch.
func bBatchAnswer(t *testing.T, c *noticeConn, stmts ...string) (*answer, error) {
	t.Helper()
	ctx := context.Background()
	c.mu.Lock()
	c.notices = nil
	c.mu.Unlock()
	b := &pgx.Batch{}
	for _, s := range stmts {
		b.Queue(s)
	}
	br := c.SendBatch(ctx, b)
	defer br.Close()
	for range stmts[:len(stmts)-1] {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	a := &answer{}
	for rows.Next() {
		vals, _ := rows.Values()
		var r []string
		for _, v := range vals {
			r = append(r, fmt.Sprint(v))
		}
		a.rows = append(a.rows, r)
	}
	a.fields = rows.FieldDescriptions()
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	a.tag = rows.CommandTag().String()
	c.mu.Lock()
	a.notices = c.notices
	c.mu.Unlock()
	return a, nil
}

// bHeldPipelineSettings: a setting changed earlier in the same
// pipeline holds for the statements after it.
func bHeldPipelineSettings(t *testing.T, db *testDB, p *proxyProc) {
	byDay := `SELECT date_trunc('day', created_at) AS d, count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE ` + bFeb + ` GROUP BY 1 ORDER BY 1`
	byDate := `SELECT created_at::date AS d, count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE ` + bFeb + ` GROUP BY 1 ORDER BY 1`
	cases := []struct {
		name  string
		stmts []string
	}{
		{"SET TimeZone then by day", []string{"SET TimeZone = 'America/New_York'", byDay}},
		{"SET TimeZone then by date", []string{"SET TimeZone = 'Asia/Tokyo'", byDate}},
		{"set_config TimeZone then by date", []string{"SELECT set_config('TimeZone', 'Asia/Tokyo', false)", byDate}},
		{"SET approx off", []string{"SET pgsketch.approx = off", byDay}},
		{"SET search_path shadow", []string{"SET search_path = shadow, public", byDay}},
		{"CREATE TEMP TABLE events", []string{"CREATE TEMP TABLE events AS SELECT * FROM public.events WHERE id % 3 = 0", byDay}},
		{"SET max_overlap_error", []string{"SET pgsketch.max_overlap_error = '0.001%'", bQueries[3].sql}},
		{"SET topk off", []string{"SET pgsketch.topk = off", bQueries[6].sql}},
		{"SET ROLE", []string{"SET ROLE pg_read_all_data", byDay}},
	}
	for _, c := range cases {
		proxied := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheDescribe)
		direct := connectMode(t, db.DSN, pgx.QueryExecModeCacheDescribe)
		// The session has read its view once (speculation's last view).
		if _, err := proxied.query(context.Background(), byDay); err != nil {
			t.Fatal(err)
		}
		want, werr := bBatchAnswer(t, direct, c.stmts...)
		got, gerr := bBatchAnswer(t, proxied, c.stmts...)
		if werr != nil || gerr != nil {
			if (werr == nil) != (gerr == nil) {
				t.Errorf("%s: proxy error %v, PostgreSQL %v", c.name, gerr, werr)
			}
			continue
		}
		kind := bKind(got.notices)
		if strings.Contains(c.name, "approx off") || strings.Contains(c.name, "topk off") || strings.Contains(c.name, "0.001") {
			if kind != "exact" {
				t.Errorf("%s: answered %s after the setting said not to: %q", c.name, kind, got.notices)
			}
		}
		if err := bCompare(got, want, kind, true); err != nil {
			t.Errorf("%s: %v (answered %s; %q)\n got %q\nwant %q", c.name, err, kind, got.notices, got.rows, want.rows)
			continue
		}
		t.Logf("%s: held (%s)", c.name, kind)
	}
}

// TestRedteamBPipelineFallback: a rollup answer that fails when it runs is
// answered exactly by PostgreSQL, with a NOTICE (docs/queries.md), inside
// a pipeline too. Once a client's statement has gone upstream since the
// last Sync (a pgx or JDBC batch, a node-postgres pipeline with a
// statement before the count), the proxy's fetch could only end with
// Flush, and its refusal (capture_check's SQLSTATE 55000 after more than
// 64 changed buckets, or an ALTER of a column the rollup reads) was sent
// to the client as the statement's error: the batch failed, and its
// implicit transaction with it (the INSERT before the count rolled back),
// until the next refresh. PostgreSQL answers the same batch.
func TestRedteamBPipelineFallback(t *testing.T) {
	t.Parallel()
	db, conn, p := bFixture(t)
	mustExec(t, conn, `CREATE TABLE audit (n int)`)
	queries := []string{
		`SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`,
		`SELECT approx_count_distinct(user_id) AS users FROM events`,
	}
	check := func(step string) {
		t.Helper()
		for _, q := range queries {
			for _, first := range []string{"SELECT 1", "INSERT INTO audit VALUES (1)"} {
				want := bBatch(t, db.DSN, first, acdRE.ReplaceAllString(q, "count(DISTINCT "))
				var before, after int
				if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM audit`).Scan(&before); err != nil {
					t.Fatal(err)
				}
				got := bBatch(t, p.URL(db.DSN), first, q)
				if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM audit`).Scan(&after); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: batch [%s; %s]:\nproxy      %q\nPostgreSQL %q", step, first, q, got, want)
				}
				if strings.HasPrefix(first, "INSERT") && after == before {
					t.Errorf("%s: batch [%s; %s]: the batch's INSERT was rolled back through the proxy (PostgreSQL commits it)", step, first, q)
				}
			}
			// The same statement alone is answered exactly, with a NOTICE.
			proxied := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheDescribe)
			if a, err := proxied.query(context.Background(), q); err != nil {
				t.Errorf("%s: alone: %v", step, err)
			} else {
				t.Logf("%s: alone: %d rows, %q", step, len(a.rows), a.notices)
			}
		}
	}
	// Writes to 70 days (a backfill, a purge of old rows; more rows than a
	// statement's inserted rows are kept for): more than 64 changed buckets
	// in the range.
	mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 95000000 + g, '2025-06-01'::timestamptz + (g % 70) * interval '1 day', 95000000 + g, 'US', 'ios', 1 FROM generate_series(1, 14000) g`)
	check("70 changed buckets")
	refreshRollup(t, conn, "ov", refresh.Options{})
	// A careless DBA sets a column default.
	mustExec(t, conn, `ALTER TABLE events ALTER COLUMN device SET DEFAULT 'web'`)
	check("ALTER COLUMN device SET DEFAULT")
}

// bHeldGrid: retention grids of other shapes.
func bHeldGrid(t *testing.T, db *testDB, p *proxyProc) {
	act := `WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events) `
	bRunAll(t, db, p, []bAttack{
		{name: "LEFT JOIN", sql: act + `SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a LEFT JOIN act b ON a.user_id = b.user_id AND b.week = a.week + interval '1 week' GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "count(DISTINCT a.week)", sql: act + `SELECT a.week AS cohort, b.week, count(DISTINCT a.week) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week >= a.week GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "count(DISTINCT b.user_id)", sql: act + `SELECT a.week AS cohort, b.week, count(DISTINCT b.user_id) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week >= a.week GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "count(b.week)", sql: act + `SELECT a.week AS cohort, b.week, count(b.week) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week >= a.week GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "WHERE on the period", sql: act + `SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week >= a.week WHERE a.week >= '2026-01-19' GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "weeks against months", sql: `SELECT a.w, b.m, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) a
			JOIN (SELECT DISTINCT date_trunc('month', created_at) AS m, user_id FROM events) b ON a.user_id = b.user_id AND b.m >= a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "same period", sql: act + `SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week = a.week GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "a.user_id <> b.user_id", sql: act + `SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND a.user_id <> b.user_id + 1 AND b.week > a.week GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "join on user_id + 0", sql: act + `SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id + 0 AND b.week > a.week GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "OR in the join", sql: act + `SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND (b.week > a.week OR b.week IS NULL) GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "not DISTINCT one side", sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) a
			JOIN (SELECT date_trunc('week', created_at) AS w, user_id FROM events) b ON a.user_id = b.user_id AND b.w > a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "DISTINCT ON one side", sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) a
			JOIN (SELECT DISTINCT ON (user_id) date_trunc('week', created_at) AS w, user_id FROM events ORDER BY user_id, created_at) b ON a.user_id = b.user_id AND b.w > a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "side with LIMIT", sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) a
			JOIN (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events LIMIT 5000) b ON a.user_id = b.user_id AND b.w > a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "side grouped by a dim too", sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id, device FROM events) a
			JOIN (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) b ON a.user_id = b.user_id AND b.w > a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "period of a nullable column", sql: `SELECT a.w, b.w, count(*) FROM (SELECT DISTINCT country AS w, user_id FROM events) a
			JOIN (SELECT DISTINCT country AS w, user_id FROM events) b ON a.user_id = b.user_id AND b.w > a.w GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "HAVING", sql: act + `SELECT a.week AS cohort, b.week, count(*) AS retained FROM act a JOIN act b ON a.user_id = b.user_id AND b.week > a.week GROUP BY 1, 2 HAVING count(*) > 3000 ORDER BY 1, 2`},
		{name: "cohort by country, not a period", sql: `SELECT a.c, b.w, count(*) FROM (SELECT DISTINCT country AS c, user_id FROM events WHERE country IS NOT NULL) a
			JOIN (SELECT DISTINCT date_trunc('week', created_at) AS w, user_id FROM events) b ON a.user_id = b.user_id GROUP BY 1, 2 ORDER BY 1, 2`},
		{name: "top-k ORDER BY an output named like the item", sql: `SELECT user_id AS u, count(*) AS user_id FROM events GROUP BY 1 ORDER BY user_id DESC, 1 LIMIT 10`},
		{name: "top-k ORDER BY count by default name", sql: `SELECT user_id, count(*) FROM events GROUP BY user_id ORDER BY count DESC, user_id LIMIT 10`},
		{name: "top-k item named count", sql: `SELECT user_id AS count, count(*) AS n FROM events GROUP BY 1 ORDER BY count DESC LIMIT 10`},
	})
}

// bHeldTopK: top-k over edges, changed buckets and other
// clauses.
func bHeldTopK(t *testing.T, db *testDB, conn *pgx.Conn, p *proxyProc) {
	// A heavy new user in a bucket the summaries hold, and one deleted.
	mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 96000000 + g, '2026-01-20 10:00'::timestamptz + g * interval '1 second', 96000000, 'US', 'ios', 1 FROM generate_series(1, 300) g`)
	mustExec(t, conn, `DELETE FROM events WHERE user_id = (SELECT user_id FROM events WHERE created_at < '2026-02-01' GROUP BY 1 ORDER BY count(*) DESC LIMIT 1) AND created_at < '2026-01-25'`)
	edge := `created_at >= '2026-01-05 13:30' AND created_at < '2026-01-27 02:00'`
	bRunAll(t, db, p, []bAttack{
		{name: "edges", sql: `SELECT user_id, count(*) AS n FROM events WHERE ` + edge + ` GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "edges, FETCH FIRST", sql: `SELECT user_id, count(*) AS n FROM events WHERE ` + edge + ` GROUP BY user_id ORDER BY n DESC, user_id FETCH FIRST 10 ROWS ONLY`},
		{name: "edges, OFFSET 0", sql: `SELECT user_id, count(*) AS n FROM events WHERE ` + edge + ` GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10 OFFSET 0`},
		{name: "edges, DESC tiebreak", sql: `SELECT user_id, count(*) AS n FROM events WHERE ` + edge + ` GROUP BY user_id ORDER BY n DESC, user_id DESC LIMIT 10`},
		{name: "edges, device IN", sql: `SELECT device, user_id, count(*) AS n FROM events WHERE ` + edge + ` AND device IN ('ios', 'web') GROUP BY 1, 2 ORDER BY n DESC, 1, 2 LIMIT 10`},
		{name: "by day and user", sql: `SELECT date_trunc('day', created_at) AS d, user_id, count(*) AS n FROM events WHERE ` + bJan + ` GROUP BY 1, 2 ORDER BY n DESC, 1, 2 LIMIT 10`},
		{name: "threshold", sql: `SELECT user_id, count(*) AS n FROM events WHERE ` + edge + ` GROUP BY user_id HAVING count(*) > 150 ORDER BY 1`},
		{name: "threshold >=", sql: `SELECT user_id, count(*) FROM events GROUP BY user_id HAVING count(*) >= 250 ORDER BY 1`},
		{name: "threshold 1", sql: `SELECT user_id, count(*) FROM events WHERE created_at >= '2026-02-27' GROUP BY user_id HAVING count(*) >= 1 ORDER BY 2 DESC, 1 LIMIT 5`},
		{name: "LIMIT 1", sql: `SELECT user_id, count(*) AS n FROM events GROUP BY user_id ORDER BY n DESC LIMIT 1`},
		{name: "count only in ORDER BY", sql: `SELECT user_id FROM events GROUP BY user_id ORDER BY count(*) DESC, user_id LIMIT 10`},
		{name: "count twice", sql: `SELECT user_id, count(*) AS n, count(*) AS m FROM events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{name: "count with the item", sql: `SELECT user_id, count(*) + user_id AS n FROM events GROUP BY user_id ORDER BY count(*) DESC, user_id LIMIT 10`},
		{name: "no rows", sql: `SELECT user_id, count(*) AS n FROM events WHERE created_at >= '2027-01-01' GROUP BY user_id ORDER BY n DESC LIMIT 10`},
		{name: "in a transaction's own rows", set: []string{"SET pgsketch.topk = verified"}, sql: `SELECT user_id, count(*) AS n FROM events WHERE ` + bJan + ` GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
	})
	// Inside a REPEATABLE READ block whose own writes make a new top user.
	ctx := context.Background()
	proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	for i, c := range []*noticeConn{proxied, direct} {
		mustExec(t, c.Conn, "BEGIN ISOLATION LEVEL REPEATABLE READ")
		mustExec(t, c.Conn, fmt.Sprintf(`INSERT INTO events (id, created_at, user_id, country, device, amount)
			SELECT %d + g, '2026-01-12 10:00'::timestamptz + g * interval '1 second', 97000000, 'US', 'ios', 1 FROM generate_series(1, 400) g`, 97000000+i*1000))
	}
	bSame(t, "top-k in a block with its own writes", proxied, direct, `SELECT user_id, count(*) AS n FROM events WHERE `+bJan+` GROUP BY user_id ORDER BY n DESC, user_id LIMIT 5`)
	bSame(t, "top-k threshold in a block with its own writes", proxied, direct, `SELECT user_id, count(*) AS n FROM events WHERE `+bJan+` GROUP BY user_id HAVING count(*) >= 350 ORDER BY 1`)
	mustExec(t, proxied.Conn, "ROLLBACK")
	mustExec(t, direct.Conn, "ROLLBACK")
	_ = ctx
}

// bHeldFormats: mixed result formats and row limits on each
// plan kind, the extended protocol by hand.
func bHeldFormats(t *testing.T, db *testDB, p *proxyProc) {
	ctx := context.Background()
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
	direct, proxied := open(db.DSN), open(p.URL(db.DSN))
	for _, q := range bQueries {
		for _, formats := range [][]int16{{1}, {0, 1}, {1, 0}, {1, 0, 1}} {
			msgs := []pgproto3.FrontendMessage{
				&pgproto3.Parse{Query: q.sql},
				&pgproto3.Describe{ObjectType: 'S'},
				&pgproto3.Bind{ResultFormatCodes: formats},
				&pgproto3.Describe{ObjectType: 'P'},
				&pgproto3.Execute{MaxRows: 1},
				&pgproto3.Execute{MaxRows: 2},
				&pgproto3.Execute{},
				&pgproto3.Sync{},
			}
			name := fmt.Sprintf("%s formats %v", q.name, formats)
			want, _, werr := bRaw(t, direct, msgs...)
			got, notices, gerr := bRaw(t, proxied, msgs...)
			kind := bKind(notices)
			if werr != "" {
				t.Logf("%s: PostgreSQL refuses it: %s", name, werr)
			}
			if werr != gerr || len(got) != len(want) {
				t.Errorf("%s: %d rows, error %q; PostgreSQL %d rows, %q", name, len(got), gerr, len(want), werr)
				continue
			}
			for r := range want {
				for i := range want[r] {
					if kind == "topk" || kind == "exact" {
						if got[r][i] != want[r][i] {
							t.Errorf("%s: row %d column %d: %x, PostgreSQL's %x", name, r, i, got[r][i], want[r][i])
						}
					} else if len(got[r][i]) != len(want[r][i]) && (len(formats) == 1 && formats[0] == 1 || len(formats) > i && formats[i] == 1) {
						t.Errorf("%s: row %d column %d: %d bytes, PostgreSQL's %d", name, r, i, len(got[r][i]), len(want[r][i]))
					}
				}
			}
			t.Logf("%s: held (%s)", name, kind)
		}
	}
}

// TestRedteamBHeld: the attacks that held, on one fixture, in an order
// that keeps the writes of the later groups from the earlier ones.
func TestRedteamBHeld(t *testing.T) {
	t.Parallel()
	db, conn, p := bFixture(t)
	t.Run("queries", func(t *testing.T) { bHeldQueries(t, db, p) })
	t.Run("exists", func(t *testing.T) { bHeldExists(t, db, p) })
	t.Run("grid", func(t *testing.T) { bHeldGrid(t, db, p) })
	t.Run("raw", func(t *testing.T) { bHeldRaw(t, db, p) })
	t.Run("formats", func(t *testing.T) { bHeldFormats(t, db, p) })
	t.Run("discard", func(t *testing.T) { bHeldDiscard(t, db, p) })
	t.Run("pipeline settings", func(t *testing.T) { bHeldPipelineSettings(t, db, p) })
	t.Run("pipeline", func(t *testing.T) { bHeldPipeline(t, db, conn, p) })
	t.Run("multi-statement fallback", func(t *testing.T) { bHeldMultiFallback(t, db, conn, p) })
	t.Run("txn", func(t *testing.T) { bHeldTxn(t, db, conn, p) })
	t.Run("topk", func(t *testing.T) { bHeldTopK(t, db, conn, p) })
}

// bHeldMultiFallback: the finding's run-time refusal, in a simple Query of
// two statements and in a batch whose count comes first: answered exactly
// by PostgreSQL, as the ledger says. The capture break is repaired by a
// refresh afterwards.
func bHeldMultiFallback(t *testing.T, db *testDB, conn *pgx.Conn, p *proxyProc) {
	ctx := context.Background()
	mustExec(t, conn, `ALTER TABLE events ALTER COLUMN device SET DEFAULT 'web'`)
	q := `SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`
	run := func(url string) string {
		c := connectSimple(t, url)
		res, err := c.PgConn().Exec(ctx, "SELECT 1; "+q).ReadAll()
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, r := range res {
			out = append(out, fmt.Sprintf("%d rows %v", len(r.Rows), r.Err))
		}
		return fmt.Sprint(out)
	}
	if got, want := run(p.URL(db.DSN)), run(db.DSN); got != want {
		t.Errorf("multi-statement Query: proxy %s, PostgreSQL %s", got, want)
	}
	if got, want := bBatch(t, p.URL(db.DSN), q, "SELECT 1"), bBatch(t, db.DSN, q, "SELECT 1"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("batch with the count first: proxy %q, PostgreSQL %q", got, want)
	}
	mustExec(t, conn, `ALTER TABLE events ALTER COLUMN device DROP DEFAULT`)
	for _, r := range []string{"ov", "tk", "ovc"} {
		refreshRollup(t, conn, r, refresh.Options{})
	}
}

// bHeldDiscard: DISCARD ALL, DEALLOCATE ALL (as poolers send them) drop
// the proxy's statements prepared upstream; the next answers are right.
func bHeldDiscard(t *testing.T, db *testDB, p *proxyProc) {
	ctx := context.Background()
	proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	for _, reset := range []string{"DISCARD ALL", "DEALLOCATE ALL", "DISCARD PLANS", "SELECT pg_catalog.set_config('search_path', 'public', false)"} {
		for _, q := range bQueries {
			bSame(t, reset+": before: "+q.name, proxied, direct, q.sql)
		}
		if _, err := proxied.Exec(ctx, reset); err != nil {
			t.Fatal(err)
		}
		direct.Exec(ctx, reset)
		for _, q := range bQueries {
			bSame(t, reset+": after: "+q.name, proxied, direct, q.sql)
			bSame(t, reset+": again: "+q.name, proxied, direct, q.sql)
		}
	}
	// In a block: the proxy's statements were prepared outside it.
	for _, q := range bQueries {
		bSame(t, "warm: "+q.name, proxied, direct, q.sql)
	}
	mustExec(t, proxied.Conn, "BEGIN")
	mustExec(t, direct.Conn, "BEGIN")
	mustExec(t, proxied.Conn, "DEALLOCATE ALL")
	for _, q := range bQueries {
		bSame(t, "block after DEALLOCATE ALL: "+q.name, proxied, direct, q.sql)
	}
	mustExec(t, proxied.Conn, "COMMIT")
	mustExec(t, direct.Conn, "COMMIT")
	for _, q := range bQueries {
		bSame(t, "after the block: "+q.name, proxied, direct, q.sql)
	}
}

// TestPipelineRollupAnswers: a batch of statements a rollup answers is
// answered from it statement by statement (each fetch is synced on its
// own); after a statement PostgreSQL runs in the same batch, the rest are
// answered by PostgreSQL, whose failure the batch can contain.
func TestPipelineRollupAnswers(t *testing.T) {
	t.Parallel()
	db, _, p := bFixture(t)
	q := `SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`
	c := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheDescribe)
	var notices []string
	for _, first := range []string{q, "SELECT 1"} {
		c.mu.Lock()
		c.notices = nil
		c.mu.Unlock()
		b := &pgx.Batch{}
		b.Queue(first)
		b.Queue(q)
		if err := c.SendBatch(context.Background(), b).Close(); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		notices = append([]string(nil), c.notices...)
		c.mu.Unlock()
		rollup := 0
		for _, n := range notices {
			if strings.Contains(n, "approximated from rollup") {
				rollup++
			}
		}
		want := 2
		if first != q {
			want = 0
		}
		if rollup != want {
			t.Fatalf("batch [%s; %s]: %d answers from the rollup, want %d; notices %q", first, q, rollup, want, notices)
		}
	}
}
