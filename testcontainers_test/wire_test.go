package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/goleak"

	"github.com/pgsketch/pgsketch/wire"
)

// These tests run wire.Server in this process, so they can check for leaked
// goroutines and drive shutdown. They are not parallel: goleak compares the
// goroutines before and after each.

type inproc struct {
	srv   *wire.Server
	addr  string
	errc  chan error
	start []goleak.Option
}

func startInproc(t *testing.T, cfg wire.Config) *inproc {
	t.Helper()
	p := &inproc{start: []goleak.Option{goleak.IgnoreCurrent()}, errc: make(chan error, 1)}
	srv, err := wire.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.srv, p.addr = srv, ln.Addr().String()
	go func() { p.errc <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.srv.Shutdown(ctx)
		if err := <-p.errc; !errors.Is(err, wire.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
		goleak.VerifyNone(t, p.start...)
	})
	return p
}

func (p *inproc) url(dsn string) string { return (&proxyProc{Addr: p.addr}).URL(dsn) }

func TestWireUpstreamUnreachable(t *testing.T) {
	db := newTestDB(t)
	// Refused at once.
	p := startInproc(t, wire.Config{Upstream: "postgres://127.0.0.1:1/?sslmode=disable"})
	_, err := pgx.Connect(context.Background(), p.url(db.DSN))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "08") || !strings.Contains(pgErr.Message, "127.0.0.1:1") {
		t.Fatalf("want an 08 error naming the upstream, got %v", err)
	}

	// Accepts but never answers the SSLRequest: the connect timeout ends it.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	p2 := startInproc(t, wire.Config{
		Upstream:       "postgres://" + silent.Addr().String() + "/?sslmode=require",
		ConnectTimeout: 500 * time.Millisecond,
	})
	start := time.Now()
	_, err = pgx.Connect(context.Background(), p2.url(db.DSN))
	if !errors.As(err, &pgErr) || pgErr.Code != "08001" || !strings.Contains(pgErr.Message, silent.Addr().String()) {
		t.Fatalf("want 08001 naming the upstream, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v with a 500 ms connect timeout", d)
	}
}

// upstreamPID returns the upstream backend's PID of a proxied connection.
func upstreamPID(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var pid int
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

func backendAlive(t *testing.T, direct *pgx.Conn, pid int) bool {
	var n int
	if err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestWireClientGoneClosesUpstream(t *testing.T) {
	db := newTestDB(t)
	direct := db.Conn(t)
	p := startInproc(t, wire.Config{Upstream: server.adminURL})
	c, err := pgx.Connect(context.Background(), p.url(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	pid := upstreamPID(t, c)
	if !backendAlive(t, direct, pid) {
		t.Fatal("upstream backend not found")
	}
	c.PgConn().Conn().Close() // vanish without Terminate
	waitFor(t, 10*time.Second, "the upstream backend to exit", func() bool { return !backendAlive(t, direct, pid) })
	waitFor(t, 5*time.Second, "the session to end", func() bool { return p.srv.Sessions() == 0 })
}

func TestWireUpstreamGone(t *testing.T) {
	db := newTestDB(t)
	direct := db.Conn(t)
	ctx := context.Background()

	// The upstream says why (pg_terminate_backend): the client gets its FATAL.
	p := startInproc(t, wire.Config{Upstream: server.adminURL})
	c, err := pgx.Connect(ctx, p.url(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	mustExec(t, direct, "SELECT pg_terminate_backend("+strconv.Itoa(upstreamPID(t, c))+")")
	var pgErr *pgconn.PgError
	_, err = c.Exec(ctx, "SELECT 1")
	if !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Fatalf("after pg_terminate_backend: %v", err)
	}

	// The upstream vanishes (a TCP forwarder drops it): the proxy says so.
	fwd := startForwarder(t, server.adminURL)
	p2 := startInproc(t, wire.Config{Upstream: "postgres://" + fwd.addr + "/?sslmode=disable"})
	c2, err := pgx.Connect(ctx, p2.url(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	fwd.drop()
	_, err = c2.Exec(ctx, "SELECT 1")
	if !errors.As(err, &pgErr) || pgErr.Code != "08006" || pgErr.Severity != "FATAL" {
		t.Fatalf("after the upstream vanished: %v", err)
	}
	waitFor(t, 5*time.Second, "the session to end", func() bool { return p2.srv.Sessions() == 0 })
}

func TestWireShutdown(t *testing.T) {
	db := newTestDB(t)
	ctx := context.Background()
	p := startInproc(t, wire.Config{Upstream: server.adminURL})

	// A session that ends within the timeout is waited for.
	busy, err := pgx.Connect(ctx, p.url(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	idle, err := pgx.Connect(ctx, p.url(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close(ctx)
	go func() {
		busy.Exec(ctx, "SELECT pg_sleep(0.3)")
		busy.Close(ctx)
	}()
	time.Sleep(50 * time.Millisecond)
	sctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = p.srv.Shutdown(sctx)
	// The idle session outlives the timeout and is told why it is closed.
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < time.Second {
		t.Fatalf("Shutdown: %v after %v", err, time.Since(start))
	}
	var pgErr *pgconn.PgError
	_, err = idle.Exec(ctx, "SELECT 1")
	if !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Fatalf("idle session after shutdown: %v", err)
	}
	if _, err := pgx.Connect(ctx, p.url(db.DSN)); err == nil {
		t.Fatal("connected after shutdown")
	}
}

// rewriteHandler wants SQL holding /*swap*/ and runs it upstream with
// 'original' replaced by 'intercepted', relaying the replies: a small
// Handler that shows the seam keeps order and owns the upstream.
type rewriteHandler struct {
	mu     sync.Mutex
	served int
}

func (h *rewriteHandler) Intercept(sql []byte) bool { return bytes.Contains(sql, []byte("/*swap*/")) }

func (h *rewriteHandler) Serve(_ context.Context, req *wire.Request, s *wire.Session) error {
	h.mu.Lock()
	h.served++
	h.mu.Unlock()
	// A group can hold unwanted statements too (a pgx batch is one group):
	// only the wanted ones change.
	swap := func(q string) string {
		if !h.Intercept([]byte(q)) {
			return q
		}
		return strings.ReplaceAll(q, "'original'", "'intercepted'")
	}
	for _, m := range req.Messages {
		switch m := m.(type) {
		case *pgproto3.Query:
			m.String = swap(m.String)
		case *pgproto3.Parse:
			m.Query = swap(m.Query)
		}
		s.Frontend.Send(m)
	}
	if err := s.Frontend.Flush(); err != nil {
		return err
	}
	for {
		msg, err := s.Frontend.Receive()
		if err != nil {
			return err
		}
		if err := s.Send(msg); err != nil {
			return err
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return s.Flush()
		}
	}
}

func TestWireHandlerSeam(t *testing.T) {
	db := newTestDB(t)
	ctx := context.Background()
	h := &rewriteHandler{}
	p := startInproc(t, wire.Config{Upstream: server.adminURL, Handler: h})
	c, err := pgx.Connect(ctx, p.url(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	// Simple protocol, a multi-statement string.
	var v string
	if err := c.QueryRow(ctx, "SELECT 'original' /*swap*/", pgx.QueryExecModeSimpleProtocol).Scan(&v); err != nil || v != "intercepted" {
		t.Fatalf("simple: %q %v", v, err)
	}
	// A pipeline mixing wanted and unwanted requests keeps its order.
	b := &pgx.Batch{}
	for i := range 30 {
		if i%3 == 1 {
			b.Queue("SELECT 'original' || $1::text /*swap*/", strconv.Itoa(i))
		} else {
			b.Queue("SELECT 'original' || $1::text", strconv.Itoa(i))
		}
	}
	br := c.SendBatch(ctx, b)
	for i := range 30 {
		want := "original" + strconv.Itoa(i)
		if i%3 == 1 {
			want = "intercepted" + strconv.Itoa(i)
		}
		if err := br.QueryRow().Scan(&v); err != nil || v != want {
			t.Fatalf("batch item %d: %q %v, want %q", i, v, err, want)
		}
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	// A prepared statement: its later Binds go to the handler too.
	if _, err := c.Prepare(ctx, "swapped", "SELECT 'original' || $1::text /*swap*/"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := c.QueryRow(ctx, "swapped", strconv.Itoa(i)).Scan(&v); err != nil || v != "intercepted"+strconv.Itoa(i) {
			t.Fatalf("prepared %d: %q %v", i, v, err)
		}
	}
	// Unwanted queries still pass, with the handler out of the way.
	if err := c.QueryRow(ctx, "SELECT 'original'").Scan(&v); err != nil || v != "original" {
		t.Fatalf("passthrough: %q %v", v, err)
	}
	h.mu.Lock()
	served := h.served
	h.mu.Unlock()
	if served < 7 {
		t.Fatalf("handler served %d requests", served)
	}
}

// forwarder is a TCP relay in front of PostgreSQL that can drop its
// connections, to play an upstream that vanishes without a word.
type forwarder struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func startForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	cfg, err := pgconn.ParseConfig(target)
	if err != nil {
		t.Fatal(err)
	}
	to := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, u)
			f.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); f.drop() })
	return f
}

func (f *forwarder) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}
