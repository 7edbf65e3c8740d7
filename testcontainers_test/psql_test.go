package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// psql runs psql against url with args, never prompting, and returns stdout,
// stderr and the exit code.
func psql(t *testing.T, url string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "psql", append([]string{"-X", "-w", "-d", url}, args...)...)
	// No password file, and PGSSLROOTCERT names no file: a root.crt in
	// ~/.postgresql would turn sslmode=require into verify-ca.
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=20", "PGPASSFILE="+os.DevNull,
		"PGSSLROOTCERT="+filepath.Join(os.TempDir(), "pgsketch-no-such-root.crt"))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run psql (the Debian package postgresql-client-15): %v", err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// sameThroughProxy runs psql with args directly and through the proxy and
// requires identical stdout, stderr and exit code.
func sameThroughProxy(t *testing.T, direct, proxied string, args ...string) (stdout, stderr string) {
	t.Helper()
	do, de, dc := psql(t, direct, args...)
	po, pe, pc := psql(t, proxied, args...)
	if do != po || de != pe || dc != pc {
		t.Fatalf("psql %q differs through the proxy\ndirect  (exit %d):\n%s%s\nproxied (exit %d):\n%s%s", args, dc, do, de, pc, po, pe)
	}
	return do, de
}

func TestPsqlThroughProxy(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	p := startProxy(t, server.adminURL)
	direct, proxied := db.DSN, p.URL(db.DSN)

	conn := db.Conn(t)
	mustExec(t, conn, `CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2), tags text[]);
		CREATE INDEX items_name ON items (name);
		COMMENT ON TABLE items IS 'things for sale';`)

	t.Run("describe", func(t *testing.T) {
		out, _ := sameThroughProxy(t, direct, proxied, "-c", `\d items`, "-c", `\dt+ items`, "-c", `\df pg_sleep`)
		if !strings.Contains(out, `"items_name" btree (name)`) {
			t.Fatalf("\\d output lacks the index:\n%s", out)
		}
	})

	t.Run("multi-statement", func(t *testing.T) {
		out, _ := sameThroughProxy(t, direct, proxied, "-c", "SELECT 1 AS one; SELECT 'two' AS two; SELECT generate_series(1,3) AS n")
		if !strings.Contains(out, "two") || !strings.Contains(out, "(3 rows)") {
			t.Fatalf("multi-statement output:\n%s", out)
		}
	})

	t.Run("syntax error with position", func(t *testing.T) {
		_, stderr := sameThroughProxy(t, direct, proxied, "-v", "VERBOSITY=verbose", "-c", "SELECT id, FROM items WHERE")
		if !strings.Contains(stderr, "42601") || !strings.Contains(stderr, "LINE 1: SELECT id, FROM items WHERE") || !strings.Contains(stderr, "^") {
			t.Fatalf("syntax error lacks code or position:\n%s", stderr)
		}
	})

	t.Run("copy in and out", func(t *testing.T) {
		dir := t.TempDir()
		in := filepath.Join(dir, "in.csv")
		var fixed strings.Builder
		for i := 1; i <= 5000; i++ {
			fmt.Fprintf(&fixed, "%d,\"item %d with \"\"quotes\"\", and a comma\",%d.%02d,\"{a,b,\"\"c d\"\"}\"\n", i, i, i, i%100)
		}
		if err := os.WriteFile(in, []byte(fixed.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := psql(t, proxied, "-c", fmt.Sprintf(`\copy items FROM '%s' WITH (FORMAT csv)`, in))
		if code != 0 {
			t.Fatalf("\\copy in through the proxy: exit %d: %s", code, stderr)
		}
		outDirect, outProxied := filepath.Join(dir, "direct.csv"), filepath.Join(dir, "proxied.csv")
		psql(t, direct, "-c", fmt.Sprintf(`\copy (SELECT * FROM items ORDER BY id) TO '%s' WITH (FORMAT csv)`, outDirect))
		_, stderr, code = psql(t, proxied, "-c", fmt.Sprintf(`\copy (SELECT * FROM items ORDER BY id) TO '%s' WITH (FORMAT csv)`, outProxied))
		if code != 0 {
			t.Fatalf("\\copy out through the proxy: exit %d: %s", code, stderr)
		}
		a, _ := os.ReadFile(outDirect)
		b, _ := os.ReadFile(outProxied)
		if !bytes.Equal(a, b) || !bytes.Equal(a, []byte(fixed.String())) {
			t.Fatalf("copied data differs: direct %d bytes, proxied %d bytes, source %d bytes", len(a), len(b), fixed.Len())
		}
	})

	t.Run("listen notify", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		listener := exec.CommandContext(ctx, "psql", "-X", "-d", proxied)
		stdin, _ := listener.StdinPipe()
		var out bytes.Buffer
		listener.Stdout, listener.Stderr = &out, &out
		if err := listener.Start(); err != nil {
			t.Fatal(err)
		}
		io.WriteString(stdin, "LISTEN pgsketch_test;\n")
		// Wait until the LISTEN is registered before notifying.
		waitFor(t, 20*time.Second, "LISTEN upstream", func() bool {
			o, _, _ := psql(t, direct, "-Atc", "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN pgsketch_test;'")
			return strings.TrimSpace(o) == "1"
		})
		if _, stderr, code := psql(t, proxied, "-c", "NOTIFY pgsketch_test, 'hello through the proxy'"); code != 0 {
			t.Fatalf("NOTIFY: %s", stderr)
		}
		io.WriteString(stdin, "SELECT 'after notify';\n\\q\n")
		stdin.Close()
		if err := listener.Wait(); err != nil {
			t.Fatalf("listening psql: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), `Asynchronous notification "pgsketch_test" with payload "hello through the proxy" received`) {
			t.Fatalf("no notification in the listener's output:\n%s", out.String())
		}
	})

	t.Run("cancel with SIGINT", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "psql", "-X", "-d", proxied, "-c", "SELECT pg_sleep(60) /* pgsketch cancel test */")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the query runs upstream, then press Ctrl-C.
		waitFor(t, 20*time.Second, "pg_sleep running upstream", func() bool {
			o, _, _ := psql(t, direct, "-Atc", "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pgsketch cancel test%' AND pid <> pg_backend_pid()")
			return strings.TrimSpace(o) == "1"
		})
		start := time.Now()
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		if err == nil || time.Since(start) > 10*time.Second {
			t.Fatalf("psql after SIGINT: err %v after %v", err, time.Since(start))
		}
		if !strings.Contains(stderr.String(), "canceling statement due to user request") {
			t.Fatalf("psql stderr after SIGINT:\n%s", stderr.String())
		}
	})
}

// waitFor polls cond every 100 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
