package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	cmd := exec.Command(binary(t), "demo", "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer // written by exec's copier while the test reads it
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	urlRE := regexp.MustCompile(`psql '([^']+)'`)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var dsn string
	deadline := time.After(2 * time.Minute)
	for dsn == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo exited before printing a psql command; stderr:\n%s", stderr.String())
			}
			if m := urlRE.FindStringSubmatch(l); m != nil {
				dsn = m[1]
			}
		case <-deadline:
			t.Fatalf("demo printed no psql command in 2 minutes; stderr:\n%s", stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
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

	dir := clusterDir(t, stderr.String())
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("cluster directory %s: %v", dir, err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo exit after SIGINT: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("demo still running a minute after SIGINT")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory %s still there after SIGINT (stat: %v)", dir, err)
	}
	if c, err := pgx.Connect(ctx, dsn); err == nil {
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
