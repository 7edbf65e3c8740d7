// Package benchproxy runs pgsketch-proxy for the benchmark programs under
// scripts/ and talks to it: a serve process on a free loopback port, and
// client connections that record the NOTICEs of their answers and time
// single queries; a Session is a proxy and a connection through it.
package benchproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Proxy is a running pgsketch-proxy serve.
type Proxy struct {
	// Addr is where it listens; PprofAddr where its profiler does ("" if
	// not asked for).
	Addr, PprofAddr string
	cmd             *exec.Cmd
	done            chan struct{}
}

// Start runs bin serve --approx on in front of upstream, with
// --cache-bytes cacheBytes (its default when negative) and a profiler when
// pprof is set, and waits until it listens.
func Start(ctx context.Context, bin, upstream string, cacheBytes int64, pprof bool) (*Proxy, error) {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--upstream", upstream, "--approx", "on", "--log-level", "info"}
	if cacheBytes >= 0 {
		args = append(args, "--cache-bytes", strconv.FormatInt(cacheBytes, 10))
	}
	if pprof {
		args = append(args, "--pprof-listen", "127.0.0.1:0")
	}
	p := &Proxy{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	var log strings.Builder
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				switch {
				case rec.Msg == "pprof listening":
					p.PprofAddr = rec.Addr
				case rec.Msg == "listening" && p.Addr == "":
					p.Addr = rec.Addr
					close(ready)
				}
			}
			if p.Addr == "" {
				log.WriteString(sc.Text() + "\n")
			}
		}
		_, _ = io.Copy(io.Discard, errPipe)
		_ = p.cmd.Wait()
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("pgsketch-proxy serve exited before listening:\n%s", log.String())
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return nil, errors.New("pgsketch-proxy serve did not listen within 30 s")
}

// Pid is the process's ID, for its CPU time and memory.
func (p *Proxy) Pid() int { return p.cmd.Process.Pid }

// Stop ends the process: SIGTERM, then a kill after 10 s.
func (p *Proxy) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// URL is dsn (a postgres:// URL or libpq's key=value form) as a URL with
// the proxy's host and port, its user, password and database kept, TLS
// off (the proxies here listen without it). A dsn that does not parse
// gives "", on which a connection fails with an error.
func (p *Proxy) URL(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && strings.HasPrefix(u.Scheme, "postgres") {
		u.Host = p.Addr
		return u.String()
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return ""
	}
	u := url.URL{Scheme: "postgres", Host: p.Addr, Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
	u.User = url.User(cfg.User)
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	return u.String()
}

// Conn is a client connection that records the NOTICEs it receives.
type Conn struct {
	*pgconn.PgConn
	mu      sync.Mutex
	notices []string
}

// Connect opens a Conn to dsn.
func Connect(ctx context.Context, dsn string) (*Conn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	c := &Conn{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		c.mu.Lock()
		c.notices = append(c.notices, n.Message)
		c.mu.Unlock()
	}
	c.PgConn, err = pgconn.ConnectConfig(ctx, cfg)
	return c, err
}

// Notices returns the NOTICEs received since the last ResetNotices.
func (c *Conn) Notices() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notices
}

// ResetNotices forgets the NOTICEs received so far.
func (c *Conn) ResetNotices() {
	c.mu.Lock()
	c.notices = nil
	c.mu.Unlock()
}

// Timed runs sql as one simple Query and returns its rows as group →
// count, and how long it took from sending the query to its ReadyForQuery:
// the last column is the count, the others (none for a query without
// GROUP BY) the group, joined by "|", NULL as "NULL".
func Timed(ctx context.Context, c *pgconn.PgConn, sql string) (map[string]float64, time.Duration, error) {
	t0 := time.Now()
	res, err := c.Exec(ctx, sql).ReadAll()
	d := time.Since(t0)
	if err != nil {
		return nil, d, err
	}
	if len(res) != 1 || res[0].Err != nil {
		return nil, d, fmt.Errorf("%d results (%v)", len(res), res)
	}
	ans := map[string]float64{}
	for _, r := range res[0].Rows {
		if len(r) == 0 {
			return nil, d, errors.New("a row without columns")
		}
		key := make([]string, len(r)-1)
		for i, f := range r[:len(r)-1] {
			key[i] = "NULL"
			if f != nil {
				key[i] = string(f)
			}
		}
		k := strings.Join(key, "|")
		v, err := strconv.ParseFloat(string(r[len(r)-1]), 64)
		if err != nil {
			return nil, d, fmt.Errorf("group %s: %q: %w", k, r[len(r)-1], err)
		}
		if _, dup := ans[k]; dup {
			return nil, d, fmt.Errorf("group %s twice", k)
		}
		ans[k] = v
	}
	return ans, d, nil
}
