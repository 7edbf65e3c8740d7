package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// proxyProc is a running `pgsketch-proxy serve`.
type proxyProc struct {
	Addr string // host:port clients connect to
	cmd  *exec.Cmd

	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

// startProxy runs `pgsketch-proxy serve --listen 127.0.0.1:0 --upstream
// upstreamURL args...` and waits until it listens. It is stopped (SIGTERM) when
// the test ends.
func startProxy(t *testing.T, upstreamURL string, args ...string) *proxyProc {
	t.Helper()
	p := &proxyProc{done: make(chan error, 1)}
	all := append([]string{"serve", "--listen", "127.0.0.1:0", "--upstream", upstreamURL}, args...)
	p.cmd = exec.Command(binary(t), all...)
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
		t.Fatalf("pgsketch-proxy serve exited before listening (%v):\n%s", err, p.Log())
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("pgsketch-proxy serve did not listen within 30 s:\n%s", p.Log())
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("stop proxy: %v\n%s", err, p.Log())
		}
	})
	return p
}

// Log returns what the proxy wrote to stderr so far.
func (p *proxyProc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// httpAddr is the address the proxy serves its status page and metrics on
// (--http-listen), from its log.
func (p *proxyProc) httpAddr(t *testing.T) string {
	t.Helper()
	var addr string
	waitFor(t, 10*time.Second, "the http listening log line", func() bool {
		recs := p.records("http listening")
		if len(recs) > 0 {
			addr, _ = recs[0]["addr"].(string)
		}
		return addr != ""
	})
	return addr
}

// records are the proxy's JSON log lines whose message is msg, so far.
func (p *proxyProc) records(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(p.Log(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// httpGet fetches path from the proxy's HTTP server at addr, returning the
// body and its content type.
func httpGet(t *testing.T, addr, path string) (body, contentType string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.Header.Get("Content-Type")
}

// scrapeMetrics reads the Prometheus metrics served at addr, each value by
// its name and labels.
func scrapeMetrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	body, ct := httpGet(t, addr, "/metrics")
	if !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("content type %q", ct)
	}
	m := map[string]float64{}
	for _, l := range strings.Split(body, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q", l)
		}
		m[l[:i]] = v
	}
	return m
}

// Stop sends SIGTERM and waits up to timeout for a clean exit. Safe to call twice.
func (p *proxyProc) Stop(timeout time.Duration) error {
	if p.cmd.ProcessState != nil {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		return <-p.done
	}
}

// URL returns dsn (a postgres:// URL) with host and port replaced by the proxy's.
func (p *proxyProc) URL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
		panic("proxyProc.URL needs a postgres:// URL, got " + dsn)
	}
	u.Host = p.Addr
	return u.String()
}

// TestMetrics: serve --http-listen serves Prometheus metrics that count the
// connections, bytes and messages of a session, the statements answered
// from rollups and fallen back on, and a failed upstream connection.
func TestMetrics(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	p := startProxy(t, server.adminURL, "--http-listen", "127.0.0.1:0")
	httpAddr := p.httpAddr(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.URL(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	metrics := func() map[string]float64 { return scrapeMetrics(t, httpAddr) }
	m := metrics()
	if m["pgsketch_connections_open"] != 1 || m["pgsketch_connections_total"] != 1 ||
		m[`pgsketch_bytes_total{direction="from_client"}`] == 0 || m[`pgsketch_bytes_total{direction="to_client"}`] == 0 ||
		m[`pgsketch_messages_total{direction="from_client"}`] == 0 || m[`pgsketch_messages_total{direction="from_upstream"}`] == 0 ||
		m["pgsketch_upstream_connect_seconds_count"] != 1 {
		t.Fatalf("after one session and a query: %v", m)
	}
	// The handler's counters too: none answered from a rollup, no fallback.
	if v, ok := m[`pgsketch_queries_total{outcome="rollup"}`]; !ok || v != 0 {
		t.Fatalf("the handler's query counts: %v", m)
	}
	if v, ok := m[`pgsketch_rollup_fallbacks_total{reason="privilege"}`]; !ok || v != 0 {
		t.Fatalf("the fallback counts: %v", m)
	}
	conn.Close(ctx)
	waitFor(t, 10*time.Second, "the session to end", func() bool { return metrics()["pgsketch_connections_open"] == 0 })

	// A proxy whose upstream refuses connections counts the failure.
	bad := startProxy(t, "postgres://127.0.0.1:1/?sslmode=disable", "--http-listen", "127.0.0.1:0", "--connect-timeout", "2s")
	badHTTP := bad.httpAddr(t)
	if c, err := pgx.Connect(ctx, bad.URL(db.DSN)); err == nil {
		c.Close(ctx)
		t.Fatal("connected through a proxy with no upstream")
	}
	httpAddr = badHTTP
	if m := metrics(); m[`pgsketch_errors_total{kind="upstream_connect"}`] < 1 {
		t.Fatalf("failed upstream connection not counted: %v", m)
	}
}
