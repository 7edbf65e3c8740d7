package e2e

// Dashboard queries through pgsketch-proxy: the
// corpus testdata/aggregates/more_queries.txt through pgx and psql in the
// simple protocol, and a handful of dashboard queries through node-postgres,
// each compared with PostgreSQL's exact answer on one shared fixture: a
// 2 M-row events table with a daily rollup and a tail after its watermark.
// TestRollupQueries (rollup_query_test.go) runs queries.txt the same way;
// together they make the differential suite.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
)

// readQueryFile reads a corpus in the format of queries.txt.
func readQueryFile(t *testing.T, path string) []rollupQuery {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []rollupQuery
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "rollup:"):
			out = append(out, rollupQuery{true, strings.TrimSpace(strings.TrimPrefix(l, "rollup:")), n})
		case strings.HasPrefix(l, "passthrough:"):
			out = append(out, rollupQuery{false, strings.TrimSpace(strings.TrimPrefix(l, "passthrough:")), n})
		default:
			t.Fatalf("%s:%d: want rollup: or passthrough:", path, n)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// exactSQL is the query PostgreSQL answers exactly for q.
func (q rollupQuery) exactSQL() string {
	if q.rollup {
		return acdRE.ReplaceAllString(q.sql, "count(DISTINCT ")
	}
	return q.sql
}

const rollupNotice = "from rollup daily (standard error 0.81%)"

// dashboardFixture is the events table of TestRollupQueries: 2 M rows over
// 90 days from 2026-01-01, an index on created_at, the daily rollup, and a
// tail of rows after its watermark.
func dashboardFixture(t *testing.T) (*testDB, *proxyProc) {
	t.Helper()
	db, _ := rolledUpEvents(t, 2_000_000, 90, "2026-03-29 12:00", "3 days")
	return db, startProxy(t, server.adminURL, "--approx", "on")
}

// rolledUpEvents is an events table of rows events over days days with an
// index on created_at (as dashboards' tables have: the base half reads the
// edges and tail through it), the daily rollup "daily" built over it, and
// then a tail the rollup has not read: the rows from tailFrom on, copied
// shift later (past the watermark) with other ids and users.
func rolledUpEvents(t *testing.T, rows int64, days int, tailFrom, shift string) (*testDB, *pgx.Conn) {
	t.Helper()
	db, conn := eventsDB(t, rows, days)
	mustExec(t, conn, `CREATE INDEX ON events (created_at)`)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	mustExec(t, conn, fmt.Sprintf(`INSERT INTO events
		SELECT id + 10000000, created_at + interval '%s', user_id + 17, country, device, amount
		FROM events WHERE created_at >= '%s'`, shift, tailFrom))
	mustExec(t, conn, `ANALYZE events`)
	// A dimension table, as star schemas join to (one country, AR, has no
	// region: an inner join drops it).
	mustExec(t, conn, `CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL, region text)`)
	mustExec(t, conn, `INSERT INTO countries VALUES
		('US', 'United States', 'Americas'), ('CA', 'Canada', 'Americas'), ('MX', 'Mexico', 'Americas'),
		('BR', 'Brazil', 'Americas'), ('AR', 'Argentina', NULL), ('DE', 'Germany', 'Europe'),
		('GB', 'United Kingdom', 'Europe'), ('FR', 'France', 'Europe'), ('ES', 'Spain', 'Europe'),
		('IT', 'Italy', 'Europe'), ('NL', 'Netherlands', 'Europe'), ('PL', 'Poland', 'Europe'),
		('SE', 'Sweden', 'Europe'), ('IN', 'India', 'Asia'), ('JP', 'Japan', 'Asia'), ('KR', 'South Korea', 'Asia'),
		('AU', 'Australia', 'Oceania'), ('NG', 'Nigeria', 'Africa'), ('ZA', 'South Africa', 'Africa'),
		('NZ', 'New Zealand', 'Oceania')`)
	// A dimension table without a key: joined on code, a country with two
	// tags counts its rows twice, as PostgreSQL does.
	mustExec(t, conn, `CREATE TABLE country_tags (code text, tag text)`)
	mustExec(t, conn, `INSERT INTO country_tags VALUES ('DE', 'g7'), ('DE', 'eurozone'), ('FR', 'g7'), ('FR', 'eurozone'),
		('IT', 'g7'), ('IT', 'eurozone'), ('US', 'g7'), ('GB', 'g7'), ('JP', 'g7'), ('CA', 'g7'), ('ES', 'eurozone'), ('NL', 'eurozone')`)
	return db, conn
}

// estimateStats collects how many standard errors each estimate is off.
type estimateStats struct{ errs []float64 }

func (s *estimateStats) add(errs []float64) { s.errs = append(s.errs, errs...) }

// check requires every estimate within 5 standard errors (checked per
// query by the caller) and 99 % within 3, of at least min estimates.
func (s *estimateStats) check(t *testing.T, what string, min int) {
	t.Helper()
	within3 := 0
	for _, e := range s.errs {
		if e <= 3 {
			within3++
		}
	}
	t.Logf("%s: %d of %d estimates within 3 standard errors", what, within3, len(s.errs))
	if len(s.errs) < min || float64(within3) < 0.99*float64(len(s.errs)) {
		t.Errorf("%s: %d of %d estimates within 3 standard errors (want ≥ 99 %% of ≥ %d)", what, within3, len(s.errs), min)
	}
}

func worstOf(errs []float64) float64 {
	w := 0.0
	for _, e := range errs {
		w = max(w, e)
	}
	return w
}

// TestDashboardQueries: the queries of more_queries.txt through the proxy
// with pgx (simple protocol, text results) and psql, and dashboard queries
// through node-postgres. Every rollup answer comes with the NOTICE, has the
// exact answer's columns, types (pgx, node-postgres), row count and group
// keys, and its distinct counts within 5 standard errors of the exact ones
// (99 % within 3); every passthrough answer is PostgreSQL's own.
func TestDashboardQueries(t *testing.T) {
	t.Parallel()
	db, p := dashboardFixture(t)
	url := p.URL(db.DSN)
	ctx := context.Background()
	queries := readQueryFile(t, "testdata/aggregates/more_queries.txt")

	// The exact answers, computed once, directly.
	direct := connectSimple(t, db.DSN)
	exact := make([]*answer, len(queries))
	exactTime := make([]time.Duration, len(queries))
	start := time.Now()
	for i, q := range queries {
		t0 := time.Now()
		a, err := direct.query(ctx, q.exactSQL())
		if err != nil {
			t.Fatalf("more_queries.txt:%d: direct: %v\n%s", q.line, err, q.sql)
		}
		exactTime[i] = time.Since(t0)
		// pgx reuses the field descriptions' memory for the next query.
		a.fields = slices.Clone(a.fields)
		exact[i] = a
	}
	t.Logf("%d exact answers in %v", len(queries), time.Since(start).Round(time.Millisecond))

	t.Run("pgx", func(t *testing.T) {
		proxied := connectSimple(t, url)
		var stats estimateStats
		rollups := 0
		for i, q := range queries {
			name := fmt.Sprintf("more_queries.txt:%d", q.line)
			t0 := time.Now()
			got, err := proxied.query(ctx, q.sql)
			if err != nil {
				t.Errorf("%s: through the proxy: %v\n%s", name, err, q.sql)
				continue
			}
			proxyTime := time.Since(t0)
			want := exact[i]
			if !q.rollup {
				if len(got.notices) != 0 {
					t.Errorf("%s: passthrough with notices %q", name, got.notices)
				}
				if fmt.Sprint(got.fields, got.raw, got.tag) != fmt.Sprint(want.fields, want.raw, want.tag) {
					t.Errorf("%s: passthrough differs from direct:\n got %v %q %s\nwant %v %q %s", name, got.fields, got.rows, got.tag, want.fields, want.rows, want.tag)
				}
				continue
			}
			rollups++
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], rollupNotice) {
				t.Errorf("%s: notices %q, want the rollup's\n%s", name, got.notices, q.sql)
				continue
			}
			errs, err := compareRollupAnswer(got, want)
			if err != nil {
				t.Errorf("%s: %v\n%s\n got %q\nwant %q", name, err, q.sql, got.rows, want.rows)
				continue
			}
			w := worstOf(errs)
			t.Logf("%s: %d rows, %d estimates, worst %.2f standard errors; exact %v, proxy %v", name, len(got.rows), len(errs), w,
				exactTime[i].Round(time.Millisecond), proxyTime.Round(time.Millisecond))
			if w > 5 {
				t.Errorf("%s: an estimate is %.2f standard errors off\n%s\n got %q\nwant %q", name, w, q.sql, got.rows, want.rows)
			}
			stats.add(errs)
		}
		t.Logf("%d queries, %d answered from the rollup", len(queries), rollups)
		stats.check(t, "pgx", 100)
	})

	t.Run("psql", func(t *testing.T) {
		var stats estimateStats
		for i, q := range queries {
			name := fmt.Sprintf("more_queries.txt:%d", q.line)
			if !q.rollup {
				do, de, dc := psql(t, db.DSN, "-c", q.sql)
				po, pe, pc := psql(t, url, "-c", q.sql)
				if do != po || de != pe || dc != pc {
					t.Errorf("%s: psql differs through the proxy\ndirect (exit %d):\n%s%s\nproxied (exit %d):\n%s%s", name, dc, do, de, pc, po, pe)
				}
				continue
			}
			got, stderr, err := psqlAnswer(t, url, q.sql)
			if err != nil {
				t.Errorf("%s: psql: %v\n%s", name, err, q.sql)
				continue
			}
			if strings.Count(stderr, "NOTICE:  pgsketch:") != 1 || !strings.Contains(stderr, rollupNotice) {
				t.Errorf("%s: psql printed %q, want the rollup's NOTICE", name, stderr)
				continue
			}
			want := namesOnly(exact[i])
			got.tag = want.tag // psql -A does not print it
			errs, err := compareRollupAnswer(got, want)
			if err != nil {
				t.Errorf("%s: psql: %v\n%s\n got %q\nwant %q", name, err, q.sql, got.rows, want.rows)
				continue
			}
			if w := worstOf(errs); w > 5 {
				t.Errorf("%s: psql: an estimate is %.2f standard errors off", name, w)
			}
			stats.add(errs)
		}
		stats.check(t, "psql", 100)
	})

	t.Run("node-postgres", func(t *testing.T) {
		testNodeDashboard(t, db.DSN, url)
	})
}

// psqlAnswer runs sql with psql (unaligned, fields separated by US, NULL
// printed as a marker, no footer) and reads its output as an answer with
// column names only.
func psqlAnswer(t *testing.T, url, sql string) (*answer, string, error) {
	t.Helper()
	const sep, null = "\x1f", "\x1e"
	out, stderr, code := psql(t, url, "-A", "-F", sep, "-P", "footer=off", "-P", "null="+null, "-v", "ON_ERROR_STOP=1", "-c", sql)
	if code != 0 {
		return nil, stderr, fmt.Errorf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	a := &answer{}
	for _, n := range strings.Split(lines[0], sep) {
		a.fields = append(a.fields, pgconn.FieldDescription{Name: n})
	}
	for _, l := range lines[1:] {
		vals := strings.Split(l, sep)
		if len(vals) != len(a.fields) {
			return nil, stderr, fmt.Errorf("row %q has %d fields, the header %d", l, len(vals), len(a.fields))
		}
		nl := make([]bool, len(vals))
		for i, v := range vals {
			if v == null {
				vals[i], nl[i] = "", true
			}
		}
		a.rows, a.nulls = append(a.rows, vals), append(a.nulls, nl)
	}
	return a, stderr, nil
}

// namesOnly is a copy of a with the fields' names only, as psql shows them.
func namesOnly(a *answer) *answer {
	b := *a
	b.fields = nil
	for _, f := range a.fields {
		b.fields = append(b.fields, pgconn.FieldDescription{Name: f.Name})
	}
	return &b
}

// nodeDashboardQueries are run by node-postgres, which sends a query without
// parameters as one simple Query message.
var nodeDashboardQueries = []rollupQuery{
	{rollup: true, sql: `SELECT count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-03-01' AND created_at < '2026-04-01'`},
	{rollup: true, sql: `SELECT country, count(DISTINCT user_id) AS users, count(*) AS events FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY country ORDER BY country`},
	{rollup: true, sql: `SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-03-20 06:00' GROUP BY 1 ORDER BY 1`},
	{rollup: true, sql: `SELECT date_trunc('week', created_at)::date AS week, device, count(DISTINCT user_id) AS users FROM events GROUP BY 1, 2 ORDER BY 1, 2`},
	{rollup: true, sql: `SELECT device, approx_count_distinct(user_id) AS users, sum(amount) AS revenue, max(created_at) AS latest FROM events GROUP BY device ORDER BY device`},
	{rollup: true, sql: `SELECT country, count(DISTINCT user_id) AS users FROM events WHERE device = 'ios' GROUP BY country HAVING count(*) > 1000 ORDER BY users DESC LIMIT 3`},
	{rollup: true, sql: `SELECT floor(extract(epoch from created_at)/86400)*86400 AS "time", count(DISTINCT user_id) AS "users" FROM events WHERE created_at BETWEEN '2026-02-01T00:00:00Z' AND '2026-02-07T12:00:00Z' GROUP BY 1 ORDER BY 1`},
	{rollup: false, sql: `SELECT count(DISTINCT user_id) AS users FROM events WHERE amount > 199 AND created_at < '2026-01-05'`},
	{rollup: false, sql: `SELECT country, count(*) AS n, min(created_at) AS first FROM events WHERE created_at < '2026-01-02' GROUP BY 1 ORDER BY 1`},
}

// nodeResult is one query's result as dashboard.js prints it.
type nodeQueryResult struct {
	Fields []struct {
		Name       string `json:"name"`
		DataTypeID uint32 `json:"dataTypeID"`
	} `json:"fields"`
	Rows     [][]json.RawMessage `json:"rows"`
	Command  string              `json:"command"`
	RowCount int                 `json:"rowCount"`
	Notices  []string            `json:"notices"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// answer converts a node-postgres result for compareRollupAnswer: JSON
// strings unquoted, other values as JSON text, null as NULL.
func (r *nodeQueryResult) answer() (*answer, error) {
	a := &answer{tag: fmt.Sprintf("%s %d", r.Command, r.RowCount), notices: r.Notices}
	for _, f := range r.Fields {
		a.fields = append(a.fields, pgconn.FieldDescription{Name: f.Name, DataTypeOID: f.DataTypeID})
	}
	for _, row := range r.Rows {
		vals, nl := make([]string, len(row)), make([]bool, len(row))
		for i, v := range row {
			switch {
			case string(v) == "null":
				nl[i] = true
			case len(v) > 0 && v[0] == '"':
				if err := json.Unmarshal(v, &vals[i]); err != nil {
					return nil, err
				}
			default:
				vals[i] = string(v)
			}
		}
		a.rows, a.nulls = append(a.rows, vals), append(a.nulls, nl)
	}
	return a, nil
}

// runNodeDashboard runs queries with node-postgres (dashboard.js in dir)
// against connURL.
func runNodeDashboard(t *testing.T, dir, connURL string, queries []string) []nodeQueryResult {
	t.Helper()
	in, err := json.Marshal(queries)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "dashboard.js"), connURL)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node dashboard.js: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var res []nodeQueryResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node dashboard.js printed %q: %v", out, err)
	}
	if len(res) != len(queries) {
		t.Fatalf("node dashboard.js: %d results for %d queries", len(res), len(queries))
	}
	return res
}

// testNodeDashboard runs nodeDashboardQueries through the proxy and their
// exact forms directly, both with node-postgres, and compares.
func testNodeDashboard(t *testing.T, directURL, proxyURL string) {
	dir := installNode(t)
	b, err := os.ReadFile(filepath.Join("testdata", "node", "dashboard.js"))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "dashboard.js"), b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	var sqls, exactSQLs []string
	for _, q := range nodeDashboardQueries {
		sqls, exactSQLs = append(sqls, q.sql), append(exactSQLs, q.exactSQL())
	}
	want := runNodeDashboard(t, dir, directURL, exactSQLs)
	got := runNodeDashboard(t, dir, proxyURL, sqls)
	var stats estimateStats
	for i, q := range nodeDashboardQueries {
		name := fmt.Sprintf("node query %d", i+1)
		g, w := got[i], want[i]
		if g.Error != nil || w.Error != nil {
			t.Errorf("%s: error through the proxy %+v, directly %+v\n%s", name, g.Error, w.Error, q.sql)
			continue
		}
		if !q.rollup {
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			if string(gj) != string(wj) {
				t.Errorf("%s: passthrough differs:\n got %s\nwant %s", name, gj, wj)
			}
			continue
		}
		if len(g.Notices) != 1 || !strings.Contains(g.Notices[0], rollupNotice) {
			t.Errorf("%s: node-postgres 'notice' events %q, want the rollup's\n%s", name, g.Notices, q.sql)
			continue
		}
		ga, err := g.answer()
		if err != nil {
			t.Fatal(err)
		}
		wa, err := w.answer()
		if err != nil {
			t.Fatal(err)
		}
		errs, err := compareRollupAnswer(ga, wa)
		if err != nil {
			t.Errorf("%s: %v\n%s\n got %q\nwant %q", name, err, q.sql, ga.rows, wa.rows)
			continue
		}
		if wst := worstOf(errs); wst > 5 {
			t.Errorf("%s: an estimate is %.2f standard errors off\n got %q\nwant %q", name, wst, ga.rows, wa.rows)
		}
		t.Logf("%s: %d rows, %d estimates, worst %.2f standard errors", name, len(ga.rows), len(errs), worstOf(errs))
		stats.add(errs)
	}
	stats.check(t, "node-postgres", 50)
}
