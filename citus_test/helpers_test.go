//go:build citus

package citus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/internal/localpg"
	"github.com/pgsketch/pgsketch/migrations"
)

// eventsRows is the size of every events table: 200 000 rows over 30 days.
const (
	eventsRows = 200_000
	eventsDays = 30
	shardCount = 32
)

// createEvents creates schema.events and fills it with eventsRows
// deterministic rows (the same for the same schema name's table, whichever
// test makes it): created_at every 13 s or so from 2026-01-01 UTC, user_id
// skewed towards small ids out of 100 000, country from 8 values and NULL,
// device from 3. Distributed, it is hash-distributed by user_id over
// shardCount shards before the rows go in (the key holds user_id, as Citus
// requires).
func createEvents(t *testing.T, conn *pgx.Conn, schema string, distributed bool) string {
	t.Helper()
	table := schema + ".events"
	mustExec(t, conn, `CREATE TABLE `+table+` (
		id         bigint NOT NULL,
		created_at timestamptz NOT NULL,
		user_id    bigint NOT NULL,
		country    text,
		device     text NOT NULL,
		amount     numeric(10,2) NOT NULL,
		PRIMARY KEY (user_id, id))`)
	if distributed {
		mustExec(t, conn, fmt.Sprintf(`SELECT create_distributed_table('%s', 'user_id', shard_count => %d)`, table, shardCount))
	}
	insertEvents(t, conn, table, 1, eventsRows)
	mustExec(t, conn, "ANALYZE "+table)
	return table
}

// insertEvents inserts the generated rows with ids from..to into table.
func insertEvents(t *testing.T, conn *pgx.Conn, table string, from, to int64) {
	t.Helper()
	mustExec(t, conn, fmt.Sprintf(`INSERT INTO %s (id, created_at, user_id, country, device, amount)
		SELECT i,
		       timestamptz '2026-01-01 00:00+00' + ((i - 1) %% %d) * (interval '1 second' * %d / %d),
		       floor(100000 * u1 * u1)::bigint,
		       (ARRAY['US','IN','DE','GB','BR','FR','JP','CA',NULL])[1 + floor(u2 * 9)::int],
		       CASE WHEN u3 < 0.45 THEN 'android' WHEN u3 < 0.85 THEN 'ios' ELSE 'web' END,
		       round((u3 * 200)::numeric, 2)
		  FROM generate_series(%d, %d) AS i,
		       LATERAL (SELECT (hashint8extended(i, 1) & 9007199254740991)::float8 / 9007199254740992 AS u1,
		                       (hashint8extended(i, 2) & 9007199254740991)::float8 / 9007199254740992 AS u2,
		                       (hashint8extended(i, 3) & 9007199254740991)::float8 / 9007199254740992 AS u3) AS u`,
		table, eventsRows, eventsDays*86400, eventsRows, from, to))
}

// rollupArgs are the rollup create flags every test uses besides the name,
// the table and --dsn.
var rollupArgs = []string{"--time", "created_at", "--dims", "country,device", "--distinct", "user_id", "--log-level", "warn"}

type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// cli runs pgsketch-proxy args... and returns what it did.
func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %v: %v", args, err)
	}
	r := cliResult{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
	t.Logf("pgsketch-proxy %s: %s", strings.Join(args, " "), r)
	return r
}

// rollupCreate runs rollup create name --table table with rollupArgs and
// extra flags against dsn.
func rollupCreate(t *testing.T, dsn, name, table string, extra ...string) cliResult {
	t.Helper()
	args := append([]string{"rollup", "create", name, "--table", table, "--dsn", dsn}, rollupArgs...)
	return cli(t, append(args, extra...)...)
}

// rollupExists reports whether the catalog defines rollup name.
func rollupExists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pgsketch.rollup_defs WHERE name = $1)`, name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// allNodes is the cluster's workers and its coordinator.
func allNodes() []*localpg.Cluster {
	return append(cluster.workers[:len(cluster.workers):len(cluster.workers)], cluster.coord)
}

// migrateUp migrates the catalog on the coordinator up to the latest
// version.
func migrateUp(t *testing.T) {
	t.Helper()
	if r := cli(t, "migrate", "up", "--dsn", coordURL()); r.code != 0 {
		t.Fatalf("migrate up: %s", r)
	}
}

// migrateDownTo migrates the catalog on the coordinator down to version v.
func migrateDownTo(t *testing.T, v int) {
	t.Helper()
	if r := cli(t, "migrate", "down", "--dsn", coordURL(), "--steps", strconv.Itoa(int(migrations.Latest())-v)); r.code != 0 {
		t.Fatalf("migrate down to version %d: %s", v, r)
	}
}

// captureTriggers lists the capture triggers of rollup name on every node:
// "port relation trigger", on the coordinator's tables and the workers'
// shards.
func captureTriggers(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, n := range allNodes() {
		conn := connect(t, n.URL(database))
		rows, err := conn.Query(context.Background(), `SELECT tgrelid::regclass::text, tgname FROM pg_trigger
			WHERE tgname LIKE 'pgsketch\_' || $1 || '\_%' ORDER BY 1, 2`, name)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var rel, tg string
			if err := rows.Scan(&rel, &tg); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d %s %s", n.Port, rel, tg))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		conn.Close(context.Background())
	}
	return out
}

// captureFunctions lists the trigger function of rollup name on every
// node where it exists: "port function".
func captureFunctions(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, n := range allNodes() {
		conn := connect(t, n.URL(database))
		var fn *string
		if err := conn.QueryRow(context.Background(), `SELECT to_regprocedure(format('pgsketch.%I()', 'capture_' || $1::text))::text`, name).Scan(&fn); err != nil {
			t.Fatal(err)
		}
		if fn != nil {
			out = append(out, fmt.Sprintf("%d %s", n.Port, *fn))
		}
		conn.Close(context.Background())
	}
	return out
}

// relationExists reports whether rel names a relation on the coordinator.
func relationExists(t *testing.T, conn *pgx.Conn, rel string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, rel).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// sqlstate is the SQLSTATE of err, or "".
func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// writeStep is one write of writeAll with the change in the table's row
// count it must make.
type writeStep struct {
	sql   string
	delta int64
}

// writeAll runs INSERTs (one shard, many shards, COPY), UPDATEs and DELETEs
// (one shard, many shards, in a transaction block) on table over url and
// checks that each succeeded and changed the row count as it should. The
// rows it writes have ids above idBase; it leaves the table with the rows
// it had plus 71 rows in the 2026-01-10 bucket.
func writeAll(t *testing.T, url, table string, idBase int64) {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, url)
	count := func() int64 {
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		return n
	}
	before := count()
	id := func(i int64) int64 { return idBase + i }
	steps := []writeStep{
		{fmt.Sprintf(`INSERT INTO %s VALUES (%d, '2026-01-10 12:00+00', 7, 'DE', 'ios', 1)`, table, id(1)), 1},
		{fmt.Sprintf(`INSERT INTO %s SELECT %d + g, '2026-01-10 13:00+00', 900000 + g, 'FR', 'web', 2 FROM generate_series(1, 100) g`, table, id(100)), 100},
		{fmt.Sprintf(`UPDATE %s SET amount = amount + 1 WHERE user_id = 7 AND id = %d`, table, id(1)), 0},
		{fmt.Sprintf(`UPDATE %s SET country = 'ES' WHERE id > %d AND id <= %d`, table, id(100), id(150)), 0},
		{fmt.Sprintf(`DELETE FROM %s WHERE user_id = 7 AND id = %d`, table, id(1)), -1},
		{fmt.Sprintf(`DELETE FROM %s WHERE id > %d AND id <= %d`, table, id(150), id(200)), -50},
	}
	for _, s := range steps {
		n0 := count()
		if _, err := conn.Exec(ctx, s.sql); err != nil {
			t.Errorf("write failed: %s: %v (SQLSTATE %s)", s.sql, err, sqlstate(err))
			continue
		}
		if d := count() - n0; d != s.delta {
			t.Errorf("%s changed the row count by %d, want %d", s.sql, d, s.delta)
		}
	}
	// A transaction block with a write to one shard and one to all.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err1 := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES (%d, '2026-01-10 14:00+00', 8, 'GB', 'android', 3)`, table, id(300)))
	_, err2 := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET amount = amount WHERE id > %d AND id <= %d`, table, id(100), id(120)))
	err3 := tx.Commit(ctx)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Errorf("transaction block of writes: %v", err)
		tx.Rollback(ctx)
	}
	// COPY.
	rows := [][]any{}
	for i := int64(1); i <= 20; i++ {
		rows = append(rows, []any{id(400 + i), time.Date(2026, 1, 10, 15, 0, 0, 0, time.UTC), 800000 + i, "JP", "ios", "4.00"})
	}
	schemaTable := strings.SplitN(table, ".", 2)
	if n, err := conn.CopyFrom(ctx, pgx.Identifier{schemaTable[0], schemaTable[1]},
		[]string{"id", "created_at", "user_id", "country", "device", "amount"}, pgx.CopyFromRows(rows)); err != nil || n != 20 {
		t.Errorf("COPY into %s: %d rows, %v", table, n, err)
	}
	if got, want := count(), before+1+100-1-50+1+20; got != want && !t.Failed() {
		t.Errorf("%s: %d rows after the writes, want %d", table, got, want)
	}
}

// proxyProc is a running `pgsketch-proxy serve`.
type proxyProc struct {
	Addr string
	cmd  *exec.Cmd

	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

// startProxy runs `pgsketch-proxy serve --listen 127.0.0.1:0 --upstream
// <coordinator> args...`, waits until it listens and stops it when the test
// ends.
func startProxy(t *testing.T, args ...string) *proxyProc {
	t.Helper()
	p := &proxyProc{done: make(chan error, 1)}
	up := fmt.Sprintf("postgres://127.0.0.1:%d/?sslmode=disable", cluster.coord.Port)
	p.cmd = exec.Command(cluster.bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--upstream", up}, args...)...)
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addr <- rec.Addr
			}
		}
		io.Copy(io.Discard, errPipe)
		p.done <- p.cmd.Wait()
	}()
	select {
	case p.Addr = <-addr:
	case err := <-p.done:
		t.Fatalf("pgsketch-proxy serve exited before listening (%v):\n%s", err, p.log())
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("pgsketch-proxy serve did not listen within 30 s:\n%s", p.log())
	}
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s", p.log())
		}
	})
	return p
}

func (p *proxyProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// url is the suite's database on the coordinator through the proxy.
func (p *proxyProc) url() string {
	u, _ := url.Parse(coordURL())
	u.Host = p.Addr
	return u.String()
}

// noticeConn connects to url and collects the NOTICEs it receives.
type noticeConn struct {
	*pgx.Conn
	mu      sync.Mutex
	notices []string
}

func connectNotices(t *testing.T, url string) *noticeConn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	nc := &noticeConn{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		nc.mu.Lock()
		nc.notices = append(nc.notices, n.Message)
		nc.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if nc.Conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { nc.Conn.Close(context.Background()) })
	return nc
}

// takeNotices returns the NOTICEs received since the last call.
func (nc *noticeConn) takeNotices() []string {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	n := nc.notices
	nc.notices = nil
	return n
}

// keyedCounts runs sql, whose rows are a text key and a number, in the
// simple protocol, and returns them by key.
func keyedCounts(t *testing.T, conn *pgx.Conn, sql string) map[string]float64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out := map[string]float64{}
	for rows.Next() {
		var k string
		var v float64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v (SQLSTATE %s)", sql, err, sqlstate(err))
	}
	return out
}

// distinctQueries are the distinct counts every test asks through the
// proxy and directly: each row a text key and a count.
func distinctQueries(table string) []string {
	return []string{
		`SELECT 'all', count(DISTINCT user_id) FROM ` + table,
		`SELECT coalesce(country, 'NULL'), count(DISTINCT user_id) FROM ` + table + ` GROUP BY country`,
		`SELECT coalesce(country, 'NULL'), count(DISTINCT user_id) FROM ` + table +
			` WHERE created_at >= '2026-01-03' AND created_at < '2026-01-20' GROUP BY 1`,
		`SELECT date_trunc('week', created_at, 'UTC')::text, count(DISTINCT user_id) FROM ` + table +
			` WHERE created_at >= '2026-01-05' AND created_at < '2026-01-26' GROUP BY 1`,
		`SELECT device, count(DISTINCT user_id) FROM ` + table + ` WHERE country = 'DE' GROUP BY device`,
	}
}

// answer says how the proxy answered a query.
type answer int

const (
	exactAnswer  answer = iota // identical to PostgreSQL's
	approxAnswer               // from a rollup, within its stated error
)

// checkAnswers sends each query of distinctQueries(table) through the
// proxy (pc) and directly (direct) and checks the proxy's answer: the same
// keys, and for each key the same count (want exactAnswer) or one within 5
// standard errors of the exact count with pgsketch's NOTICE (want
// approxAnswer). A NOTICE that says why a query was answered exactly must
// contain because, when not empty.
func checkAnswers(t *testing.T, pc *noticeConn, direct *pgx.Conn, table string, want answer, because string) {
	t.Helper()
	se := 1.04 / math.Sqrt(1<<14)
	for _, q := range distinctQueries(table) {
		exact := keyedCounts(t, direct, q)
		pc.takeNotices()
		got := keyedCounts(t, pc.Conn, q)
		notices := pc.takeNotices()
		if len(got) != len(exact) {
			t.Errorf("%s: %d rows through the proxy, %d directly", q, len(got), len(exact))
		}
		keys := make([]string, 0, len(exact))
		for k := range exact {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			e := exact[k]
			g, ok := got[k]
			switch {
			case !ok:
				t.Errorf("%s: no row %q through the proxy", q, k)
			case want == exactAnswer && g != e:
				t.Errorf("%s: %q: %v through the proxy, exactly %v (notices %q)", q, k, g, e, notices)
			case want == approxAnswer && math.Abs(g-e) > 5*se*e:
				t.Errorf("%s: %q: %v through the proxy, exactly %v: beyond 5 standard errors", q, k, g, e)
			}
		}
		joined := strings.Join(notices, "\n")
		if want == approxAnswer && !strings.Contains(joined, "pgsketch:") {
			t.Errorf("%s: answered from a rollup without pgsketch's NOTICE (notices %q)", q, notices)
		}
		if want == exactAnswer && because != "" && !strings.Contains(joined, because) {
			t.Errorf("%s: answered exactly; want a NOTICE saying %q, got %q", q, because, notices)
		}
	}
}

// refreshRollup runs rollup refresh name with extra flags, failing the
// test on an error.
func refreshRollup(t *testing.T, name string, extra ...string) {
	t.Helper()
	args := append([]string{"rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn"}, extra...)
	if r := cli(t, args...); r.code != 0 {
		t.Fatalf("rollup refresh: %s", r)
	}
}

// inTransaction runs sqls in one transaction block on conn, one statement
// at a time, and commits.
func inTransaction(t *testing.T, conn *pgx.Conn, sqls ...string) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, sql := range sqls {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
