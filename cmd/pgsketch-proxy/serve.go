package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/proxy"
	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/status"
	"github.com/pgsketch/pgsketch/wire"
)

func runServe(ctx context.Context, a *app, args []string) error {
	o, err := parseServeFlags(a, args)
	if err != nil {
		return err
	}
	recorder := status.NewRecorder(50, 1000)
	cfg, err := o.wireConfig(a, recorder)
	if err != nil {
		return err
	}
	setProcs(a, o.procs)
	if o.pprofListen != "" {
		if err := startPprof(a, o.pprofListen); err != nil {
			return err
		}
	}
	bg := o.refresher(a)
	defer startRefresher(ctx, bg)()
	ho := httpOptions{addr: o.httpListen, recorder: recorder, refresher: bg}
	if dsn := cmp.Or(o.statusDSN, bg.DSN); dsn != "" {
		ho.rollups = rollupLister(dsn)
	}
	return serveUntilDone(ctx, a, cfg, o.listen, ho, o.shutdownTimeout, nil)
}

// serveOptions are serve's flags, and the settings read from them.
type serveOptions struct {
	listen, upstream, tlsCert, tlsKey  string
	connectTimeout, shutdownTimeout    time.Duration
	maxMessage, maxStartup, procs      int
	pprofListen, httpListen, statusDSN string
	refreshInterval                    time.Duration
	refreshDSN, approx, merge          string
	cacheBytes                         int64

	approxOn     bool
	mergeDefault rewrite.Merge
}

func parseServeFlags(a *app, args []string) (*serveOptions, error) {
	f := a.newFlags("--upstream URL [flags]")
	o := &serveOptions{}
	f.StringVar(&o.listen, "listen", "127.0.0.1:6432", "address to accept PostgreSQL clients on")
	f.StringVar(&o.upstream, "upstream", "", "upstream PostgreSQL, e.g. postgres://db.internal:5432/?sslmode=require; "+
		"for clients only host, port and TLS settings are used, user and database come from each client; a user named here "+
		"(with its password and database) is the background refresher's login unless --refresh-dsn is given (required)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate file: clients may use TLS, which ends at the proxy")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key file for --tls-cert")
	f.DurationVar(&o.connectTimeout, "connect-timeout", 10*time.Second, "how long to try reaching the upstream for a client")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM/SIGINT, how long sessions may finish before they are closed")
	f.IntVar(&o.maxMessage, "max-message-size", 1<<30, "largest message accepted from a client, in bytes")
	f.IntVar(&o.maxStartup, "max-startup-size", 10000, "largest startup packet accepted, in bytes")
	f.IntVar(&o.procs, "procs", 0, "threads running the proxy's Go code at once (GOMAXPROCS); 0: Go's default, the CPUs available "+
		"or the GOMAXPROCS environment variable; half of them, at least 1, wait in the relay's event loops (see docs/benchmarks.md)")
	f.StringVar(&o.pprofListen, "pprof-listen", "", "address for Go's net/http/pprof profiling endpoints (off when empty; keep it on loopback)")
	f.StringVar(&o.httpListen, "http-listen", "", "address for the HTTP server: the status page at / and Prometheus metrics at /metrics (off when empty)")
	f.StringVar(&o.statusDSN, "status-dsn", "", "database whose rollups the status page lists (default: the background refresher's login)")
	f.DurationVar(&o.refreshInterval, "refresh-interval", time.Minute, "refresh the rollups the refresher's login owns in the background "+
		"this often, the first time at start (0: off)")
	f.StringVar(&o.refreshDSN, "refresh-dsn", "", "the background refresher's login (user, password, database), "+
		"e.g. postgres://refresher@db.internal:5432/analytics (default: --upstream when it names a user); it refreshes "+
		"the rollups whose tables that role owns, and says once in the log and on the status page when it cannot")
	f.StringVar(&o.approx, "approx", "off", "pgsketch.approx for sessions that leave it unset (on|off): "+
		"answer COUNT(DISTINCT ...) from rollups too, not only APPROX_COUNT_DISTINCT")
	f.StringVar(&o.merge, "merge", "auto", "pgsketch.merge for sessions that leave it unset (auto|proxy|server): where the sketches "+
		"of a rollup's rows are merged; auto merges in PostgreSQL (hll_union_agg, needs the hll extension) when a group "+
		"merges several rollup rows, in the proxy otherwise")
	f.Int64Var(&o.cacheBytes, "cache-bytes", 256<<20, "memory for decoded rollup rows kept between queries, in bytes (0: no cache); "+
		"an entry is used only while the rollup's catalog version and bucket range are unchanged, as each query checks "+
		"in PostgreSQL, which also checks the role's privileges every time")
	if err := f.parseFlagsOnly(args); err != nil {
		return nil, err
	}
	return o, o.check()
}

// check checks the flags that must agree with each other and reads
// --approx and --merge.
func (o *serveOptions) check() error {
	if o.cacheBytes < 0 {
		return fmt.Errorf("%w: --cache-bytes must be 0 or more", errUsage)
	}
	switch o.approx {
	case "on":
		o.approxOn = true
	case "off":
	default:
		return fmt.Errorf("%w: --approx must be on or off, not %q", errUsage, o.approx)
	}
	var ok bool
	if o.mergeDefault, ok = rewrite.ParseMerge(o.merge); !ok || o.merge == "" {
		return fmt.Errorf("%w: --merge must be auto, proxy or server, not %q", errUsage, o.merge)
	}
	if o.upstream == "" {
		return fmt.Errorf("%w: --upstream (or PGSKETCH_UPSTREAM) is required", errUsage)
	}
	if o.refreshInterval < 0 {
		return fmt.Errorf("%w: --refresh-interval must not be negative", errUsage)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", errUsage)
	}
	return nil
}

// wireConfig is the relay's configuration, its Handler recording to
// recorder.
func (o *serveOptions) wireConfig(a *app, recorder *status.Recorder) (wire.Config, error) {
	cfg := wire.Config{
		Handler:        &proxy.Handler{Log: a.log, Approx: o.approxOn, Merge: o.mergeDefault, Recorder: recorder, Cache: exec.NewCache(o.cacheBytes)},
		Upstream:       o.upstream,
		ConnectTimeout: o.connectTimeout,
		MaxMessageSize: o.maxMessage,
		MaxStartupSize: o.maxStartup,
		Logger:         a.log,
	}
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return cfg, fmt.Errorf("load TLS certificate: %w", err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return cfg, nil
}

// httpOptions configure the HTTP server of --http-listen.
type httpOptions struct {
	addr      string
	recorder  *status.Recorder
	rollups   status.RollupSource
	refresher *refresh.Background
}

// serveUntilDone listens on addr and relays clients until ctx is done, then
// shuts down, giving sessions up to shutdownTimeout. ready, if set, is called
// with the address once listening.
func serveUntilDone(ctx context.Context, a *app, cfg wire.Config, addr string, ho httpOptions, shutdownTimeout time.Duration, ready func(addr, httpAddr string)) error {
	srv, err := wire.NewServer(cfg)
	if err != nil {
		return err
	}
	httpAddr := ""
	if ho.addr != "" {
		bound, stop, err := startHTTP(a, ho, srv)
		if err != nil {
			return err
		}
		defer stop()
		httpAddr = bound
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	a.log.Info("listening", "addr", ln.Addr().String(), "upstream", srv.UpstreamAddr(), "tls", cfg.TLS != nil)
	if ready != nil {
		ready(ln.Addr().String(), httpAddr)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.log.Info("shutting down", "sessions", srv.Sessions(), "timeout", shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if err := <-errc; !errors.Is(err, wire.ErrServerClosed) {
		return err
	}
	a.log.Info("stopped")
	return nil
}

// startHTTP serves the status page at / and, at /metrics, the metrics of
// srv and of the statements the handler answered, passed through and fell
// back on, on ho.addr, and returns the function that stops it.
func startHTTP(a *app, ho httpOptions, srv *wire.Server) (string, func(), error) {
	ln, err := net.Listen("tcp", ho.addr)
	if err != nil {
		return "", nil, fmt.Errorf("http listen: %w", err)
	}
	mux := http.NewServeMux()
	page := &status.Page{Recorder: ho.recorder, Rollups: ho.rollups, Upstream: srv.UpstreamAddr()}
	if ho.refresher != nil {
		page.Refresher = func() status.Refresher { return refresherStatus(ho.refresher) }
	}
	mux.Handle("GET /{$}", page)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if err := srv.Metrics().WritePrometheus(w); err != nil {
			a.log.Debug("write metrics", "err", err)
		}
		if err := ho.recorder.WritePrometheus(w); err != nil {
			a.log.Debug("write metrics", "err", err)
		}
		if ho.refresher != nil {
			if err := refresherStatus(ho.refresher).WritePrometheus(w); err != nil {
				a.log.Debug("write metrics", "err", err)
			}
		}
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.log.Info("http listening", "addr", ln.Addr().String())
	go hs.Serve(ln)
	return ln.Addr().String(), func() { hs.Close() }, nil
}

// rollupLister lists the rollups of the database at dsn for the status
// page, over one connection opened per request.
func rollupLister(dsn string) status.RollupSource {
	return func(ctx context.Context) ([]status.Rollup, error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		rows, err := conn.Query(ctx, `SELECT name, source, grain, time_zone, dimensions, coalesce(measures, '{}'),
			watermark, last_refresh, coalesce(rows, 0), coalesce(bytes, 0), version,
			coalesce(justify_interval(date_trunc('second', lag))::text, ''),
			CASE WHEN capture_broken IS NULL THEN format('captured, %s changed bucket(s)', dirty_buckets)
			          || coalesce(', ' || nullif(to_jsonb(r) ->> 'inserted_rows', '0') || ' row(s) inserted since', '')
			     ELSE 'not captured: ' || capture_broken || ' (answered exactly until a refresh)' END
			FROM pgsketch.rollups AS r ORDER BY name`)
		if err != nil {
			return nil, explain(err)
		}
		return pgx.CollectRows(rows, func(r pgx.CollectableRow) (status.Rollup, error) {
			var x status.Rollup
			err := r.Scan(&x.Name, &x.Source, &x.Grain, &x.TimeZone, &x.Dimensions, &x.Measures,
				&x.Watermark, &x.LastRefresh, &x.Rows, &x.Bytes, &x.Version, &x.Lag, &x.Capture)
			return x, err
		})
	}
}

// startPprof serves net/http/pprof on addr, for profiling the relay.
func startPprof(a *app, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pprof listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	a.log.Info("pprof listening", "addr", ln.Addr().String())
	go http.Serve(ln, mux)
	return nil
}

// setProcs sets GOMAXPROCS to n when positive and otherwise leaves the Go
// runtime's choice. The relay's event loops block in epoll_wait, each
// holding a thread, and are half of them (wire/loop_linux.go): the rest
// run the goroutines without waiting for the runtime to take a processor
// back from a loop.
func setProcs(a *app, n int) {
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
	a.log.Debug("GOMAXPROCS", "procs", runtime.GOMAXPROCS(0))
}
