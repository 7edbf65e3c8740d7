package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/migrations"
)

var proxyBin struct {
	once sync.Once
	path string
	err  error
}

// binary builds cmd/pgsketch-proxy once per test binary and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	proxyBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "pgsketch-bin-")
		if err != nil {
			proxyBin.err = err
			return
		}
		proxyBin.path = filepath.Join(dir, "pgsketch-proxy")
		out, err := exec.Command("go", "build", "-o", proxyBin.path, "../cmd/pgsketch-proxy").CombinedOutput()
		if err != nil {
			proxyBin.err = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if proxyBin.err != nil {
		t.Fatal(proxyBin.err)
	}
	return proxyBin.path
}

type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %v: %v", args, err)
	}
	return cliResult{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

func TestCLIMigrate(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	latest := migrations.Latest()
	v := func(n uint) string { return fmt.Sprintf("catalog version %d of %d (clean)", n, latest) }
	for _, step := range []struct {
		args   []string
		env    []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{args: []string{"migrate", "version", "--dsn", db.DSN}, stdout: v(0)},
		{args: []string{"migrate", "up", "--dsn", db.DSN, "--log-level", "warn"}, stdout: v(latest)},
		{args: []string{"migrate", "up"}, env: []string{"PGSKETCH_DSN=" + db.DSN}, stdout: v(latest)},
		{args: []string{"migrate", "down", "--dsn", db.DSN}, stdout: v(latest - 1)},
		{args: []string{"migrate", "down", "--all", "--dsn", db.DSN}, stdout: v(0)},
		{args: []string{"migrate", "up", "--dsn", db.DSN}, stdout: v(latest)},
		{args: []string{"migrate", "up"}, code: 2, stderr: "--dsn (or PGSKETCH_DSN) is required"},
		{args: []string{"migrate", "sideways", "--dsn", db.DSN}, code: 2, stderr: `unknown action "sideways"`},
		{args: []string{"migrate", "up", "--dsn", db.DSN}, env: []string{"PGSKETCH_LOG_LEVEL=loud"}, code: 2, stderr: "--log-level \"loud\""},
		{args: []string{"migrate", "up", "--dsn", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2"}, code: 1, stderr: "migrations: connect"},
		{args: []string{"nonsense"}, code: 2, stderr: `unknown command "nonsense"`},
		{args: []string{"migrate", "--help"}, code: 0, stderr: "PGSKETCH_DSN"},
	} {
		r := runCLI(t, step.env, step.args...)
		if r.code != step.code || !strings.Contains(r.stdout, step.stdout) || !strings.Contains(r.stderr, step.stderr) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit %d, stdout ~ %q, stderr ~ %q",
				step.args, r.code, r.stdout, r.stderr, step.code, step.stdout, step.stderr)
		}
	}
	var n int
	if err := db.Conn(t).QueryRow(context.Background(), "SELECT count(*) FROM pgsketch.rollup_defs").Scan(&n); err != nil {
		t.Fatalf("catalog not usable after CLI migrations: %v", err)
	}
}

// TestDemoStopsOnSIGINT runs what `make run` runs, connects with the printed
// command's URL, then sends SIGINT and checks the cluster is gone.
func TestDemoStopsOnSIGINT(t *testing.T) {
	t.Parallel()
	d := startDemo(t, "20000")
	checkDemoQueries(t, d.printed, d.proxyURL, d.directURL)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.directURL)
	if err != nil {
		t.Fatalf("connect to the printed URL: %v", err)
	}
	var hll, catalog bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'hll'),
		to_regclass('pgsketch.rollup_defs') IS NOT NULL`).Scan(&hll, &catalog)
	conn.Close(ctx)
	if err != nil || !hll || !catalog {
		t.Fatalf("demo database: hll %v, catalog %v, err %v", hll, catalog, err)
	}

	dir := clusterDir(t, d.stderr.String())
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("cluster directory %s: %v", dir, err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		d.exited <- err // for startDemo's cleanup
		if err != nil {
			t.Fatalf("demo exit after SIGINT: %v; stderr:\n%s", err, d.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("demo still running a minute after SIGINT")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory %s still there after SIGINT (stat: %v)", dir, err)
	}
	if c, err := pgx.Connect(ctx, d.directURL); err == nil {
		c.Close(ctx)
		t.Fatal("PostgreSQL still answers after the demo stopped")
	}
}

// clusterDir finds the cluster directory in the demo's JSON log.
func clusterDir(t *testing.T, log string) string {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Msg string `json:"msg"`
			Dir string `json:"dir"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "creating PostgreSQL cluster" {
			return rec.Dir
		}
	}
	t.Fatalf("no cluster directory in the demo log:\n%s", log)
	return ""
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// checkDemoQueries runs the three queries demo printed through the proxy
// with psql, as a newcomer would, and checks them against exact answers
// computed directly: the exact query equal, every approximate count within
// 5 standard errors (1.04/√16384) with the NOTICE, and the side-by-side
// error column consistent with its neighbours.
func checkDemoQueries(t *testing.T, printed, proxyURL, directURL string) {
	t.Helper()
	qre := regexp.MustCompile(`(?s)-- ([^\n]+)\n(SELECT .*?;)`)
	qs := qre.FindAllStringSubmatch(printed, -1)
	if len(qs) != 3 {
		t.Fatalf("want 3 printed queries, got %d in:\n%s", len(qs), printed)
	}
	rows := func(url, sql string) ([][]string, string) {
		out, errOut, code := psql(t, url, "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1", "-c", sql)
		if code != 0 {
			t.Fatalf("psql %s: exit %d\n%s", sql, code, errOut)
		}
		var rs [][]string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l != "" {
				rs = append(rs, strings.Split(l, "|"))
			}
		}
		return rs, errOut
	}
	exactRows, _ := rows(directURL, `SELECT coalesce(country, 'NULL'), count(DISTINCT user_id) FROM events
		WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY country`)
	exact := map[string]float64{}
	for _, r := range exactRows {
		exact[r[0]], _ = strconv.ParseFloat(r[1], 64)
	}
	within := func(country, approx string) {
		t.Helper()
		a, err := strconv.ParseFloat(approx, 64)
		e := exact[country]
		if err != nil || e == 0 || math.Abs(a-e) > 5*1.04/128*e {
			t.Errorf("%s: approximate %s, exact %v: beyond 5 standard errors", country, approx, e)
		}
	}
	// 1: exact, identical to the same query sent directly.
	got1, _ := rows(proxyURL, qs[0][2])
	want1, _ := rows(directURL, qs[0][2])
	if fmt.Sprint(got1) != fmt.Sprint(want1) || len(got1) != 5 {
		t.Errorf("exact query through the proxy %v, direct %v", got1, want1)
	}
	// 2: approximate.
	got2, notice2 := rows(proxyURL, qs[1][2])
	if len(got2) != 5 || !strings.Contains(notice2, "NOTICE:  pgsketch:") || !strings.Contains(notice2, "standard error 0.81%") {
		t.Errorf("approximate query: rows %v, stderr %q", got2, notice2)
	}
	for _, r := range got2 {
		within(r[0], r[1])
	}
	// 3: side by side.
	got3, notice3 := rows(proxyURL, qs[2][2])
	if len(got3) != 5 || !strings.Contains(notice3, "NOTICE:  pgsketch:") {
		t.Errorf("side-by-side query: rows %v, stderr %q", got3, notice3)
	}
	for _, r := range got3 {
		if len(r) != 4 {
			t.Fatalf("side-by-side row %q", r)
		}
		if e, _ := strconv.ParseFloat(r[1], 64); e != exact[r[0]] {
			t.Errorf("%s: exact column %s, exact %v", r[0], r[1], exact[r[0]])
		}
		within(r[0], r[2])
		e, _ := strconv.ParseFloat(r[1], 64)
		a, _ := strconv.ParseFloat(r[2], 64)
		if p, err := strconv.ParseFloat(r[3], 64); err != nil || math.Abs(p-100*(a-e)/e) > 0.01 {
			t.Errorf("%s: error_pct %s, want %.2f", r[0], r[3], 100*(a-e)/e)
		}
	}
	t.Logf("demo side by side: %v", got3)
}

// TestDemoDependencies: make run installs only what the demo needs (no
// browser, no Node.js); make test installs those besides.
// TestDemoRefreshesInBackground: rows written after the demo started
// reach the rollup at its background refresh, which drains the change log,
// so that answers read no base rows again; the demo says how often.
func TestDemoRefreshesInBackground(t *testing.T) {
	t.Parallel()
	d := startDemo(t, "20000", "--refresh-interval", "2s")
	if !strings.Contains(d.printed, "reach the rollup at its next background refresh, every 2s") {
		t.Errorf("the demo does not say it refreshes:\n%s", d.printed)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.directURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var before int64
	if err := conn.QueryRow(ctx, `SELECT version FROM pgsketch.rollup_defs WHERE name = 'events_daily'`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	// A late row, in a bucket the rollup holds.
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		VALUES (-1, '2026-01-15 12:00+00', 424242, 'DE', 'ios', 1)`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var version, logged int64
		// The late row is an inserted row until a refresh folds it in.
		err := conn.QueryRow(ctx, `SELECT (SELECT version FROM pgsketch.rollup_defs WHERE name = 'events_daily'),
			(SELECT count(*) FROM pgsketch.rollup_dirty WHERE rollup = 'events_daily') + (SELECT count(*) FROM pgsketch.inserts_events_daily)`).Scan(&version, &logged)
		if err != nil {
			t.Fatal(err)
		}
		if version > before && logged == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the write: version %d (was %d), %d change log entries and inserted rows", version, before, logged)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The bucket's row count in the rollup is the table's again, the late
	// row included.
	var table string
	if err := conn.QueryRow(ctx, `SELECT format('%I.%I', rollup_schema, rollup_table) FROM pgsketch.rollup_defs
		WHERE name = 'events_daily'`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	var inRollup, exact int64
	err = conn.QueryRow(ctx, `SELECT (SELECT sum(row_count) FROM `+table+` WHERE bucket = '2026-01-15' AND country = 'DE' AND device = 'ios'),
		(SELECT count(*) FROM events WHERE created_at >= '2026-01-15' AND created_at < '2026-01-16' AND country = 'DE' AND device = 'ios')`).Scan(&inRollup, &exact)
	if err != nil || inRollup != exact {
		t.Errorf("the refreshed bucket holds %d rows, the table %d (%v)", inRollup, exact, err)
	}
}

func TestDemoDependencies(t *testing.T) {
	t.Parallel()
	needs := func(set string) []string {
		out, err := exec.Command("bash", "../scripts/install-deps.sh", "--needs", set).Output()
		if err != nil {
			t.Fatalf("install-deps.sh --needs %s: %v", set, err)
		}
		return strings.Fields(string(out))
	}
	run, test := needs("run"), needs("test")
	for _, p := range run {
		if strings.Contains(p, "chromium") || strings.Contains(p, "node") || p == "npm" {
			t.Errorf("make run installs %s", p)
		}
	}
	for _, p := range []string{"postgresql-15", "postgresql-15-hll", "gcc"} {
		if !slices.Contains(run, p) {
			t.Errorf("make run does not install %s: %v", p, run)
		}
	}
	for _, p := range append(run, "nodejs", "npm", "chromium", "chromium-driver") {
		if !slices.Contains(test, p) {
			t.Errorf("make test does not install %s: %v", p, test)
		}
	}
}
