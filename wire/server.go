package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Config configures a Server. Zero durations and sizes take the defaults.
type Config struct {
	// Upstream is the libpq connection string (URL or key=value) of the
	// PostgreSQL server; only its host, port and TLS settings are used.
	Upstream string
	// TLS, when set, lets clients upgrade with SSLRequest; TLS then ends at
	// the proxy. Nil answers SSLRequest with 'N'.
	TLS *tls.Config
	// Handler answers the requests it wants; nil means Passthrough.
	Handler Handler
	// ConnectTimeout bounds dialling the upstream (default 10 s).
	ConnectTimeout time.Duration
	// StartupTimeout bounds the startup phase, authentication included (default 60 s,
	// PostgreSQL's authentication_timeout).
	StartupTimeout time.Duration
	// MaxStartupSize caps a startup packet (default 10000 bytes, PostgreSQL's limit).
	MaxStartupSize int
	// MaxMessageSize caps any message, in either direction of the startup
	// phase and from the client afterwards (default 1 GiB, PostgreSQL's limit).
	MaxMessageSize int
	// InspectSize is the largest Query or Parse whose SQL is shown to the
	// Handler, and the most bytes of an extended-protocol group held back
	// while it is incomplete (default 1 MiB). Larger ones go upstream unseen.
	InspectSize int
	// HandoverWait bounds how long a request the Handler wants waits for the
	// upstream to answer everything before it (default 30 s); after that it
	// goes upstream unseen, as with Passthrough.
	HandoverWait time.Duration
	// Logger receives session events; nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Handler == nil {
		c.Handler = Passthrough{}
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.StartupTimeout <= 0 {
		c.StartupTimeout = 60 * time.Second
	}
	if c.MaxStartupSize <= 0 {
		c.MaxStartupSize = 10000
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = 1 << 30
	}
	if c.InspectSize <= 0 {
		c.InspectSize = 1 << 20
	}
	if c.HandoverWait <= 0 {
		c.HandoverWait = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server relays PostgreSQL clients to an upstream server.
type Server struct {
	cfg          Config
	targets      []upstreamTarget
	upstreamName string
	cancels      cancelRegistry
	metrics      Metrics
	loops        loopSet

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sessions  map[*session]struct{}
	closing   bool
	wg        sync.WaitGroup
}

// NewServer checks cfg and returns a Server.
func NewServer(cfg Config) (*Server, error) {
	cfg.setDefaults()
	targets, name, err := upstreamTargets(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	return &Server{
		cfg: cfg, targets: targets, upstreamName: name,
		listeners: map[net.Listener]struct{}{}, sessions: map[*session]struct{}{},
	}, nil
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("wire: server closed")

// Serve accepts clients on ln until Shutdown; each runs in its own goroutine.
func (s *Server) Serve(ln net.Listener) error {
	if !s.register(func() { s.listeners[ln] = struct{}{} }) {
		ln.Close()
		return ErrServerClosed
	}
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.cfg.Logger.Warn("accept", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("wire: accept: %w", err)
		}
		backoff = 0
		conn = countedConn{rawIO(conn), &s.metrics.bytesFromClients, &s.metrics.bytesToClients}
		s.metrics.connsTotal.Add(1)
		sess := newSession(s, conn)
		added := s.register(func() {
			s.sessions[sess] = struct{}{}
			s.wg.Add(1) // before Shutdown can wait
		})
		if !added {
			conn.Close()
			return ErrServerClosed
		}
		s.metrics.connsOpen.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.metrics.connsOpen.Add(-1)
			sess.run()
			s.mu.Lock()
			delete(s.sessions, sess)
			s.mu.Unlock()
		}()
	}
}

// register runs add, which adds a listener or a session to those Shutdown
// closes, under s.mu and reports true, unless Shutdown has begun: then it
// reports false, and the caller closes what it would have added.
func (s *Server) register(add func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	add()
	return true
}

// Shutdown stops accepting clients and waits for the sessions to end. When
// ctx is done first, the remaining sessions are told (FATAL 57P01) and closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	n := len(s.sessions)
	s.mu.Unlock()
	s.loops.close()
	if n > 0 {
		s.cfg.Logger.Info("waiting for sessions to end", "sessions", n)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	// Abort outside s.mu (ending sessions take it) and in parallel (an abort
	// may wait up to a second on a client that does not read).
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		go sess.abort(sqlstateAdminShutdown, "terminating connection: pgsketch-proxy is shutting down")
	}
	<-done
	return ctx.Err()
}

// Metrics returns the server's counters.
func (s *Server) Metrics() *Metrics { return &s.metrics }

// UpstreamAddr is the address of the upstream server, without credentials.
func (s *Server) UpstreamAddr() string { return s.upstreamName }

// Sessions returns the number of client sessions open now.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}
