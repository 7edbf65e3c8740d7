package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
