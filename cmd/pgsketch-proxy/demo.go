package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/internal/demodata"
	"github.com/pgsketch/pgsketch/internal/localpg"
	"github.com/pgsketch/pgsketch/migrations"
	"github.com/pgsketch/pgsketch/proxy"
	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/status"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
	"github.com/pgsketch/pgsketch/wire"
)

const demoDB = "pgsketch_demo"

func runDemo(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("[flags]")
	keep := f.String("keep", "", "keep the cluster in this directory (reused by the next run) instead of a temporary one")
	port := f.Int("pg-port", 0, "port for the throwaway PostgreSQL (0: a free one)")
	listen := f.String("listen", "127.0.0.1:6432", "address the proxy accepts clients on")
	rows := f.Int64("rows", demodata.Default.Rows, "events to generate (over 90 days from 2026-01-01)")
	httpListen := f.String("http-listen", "127.0.0.1:6480", "address of the status page (/) and metrics (/metrics); empty: off")
	refreshEvery := f.Duration("refresh-interval", time.Minute, "refresh the rollup in the background this often, draining the change log (off when 0)")
	if err := f.parseFlagsOnly(args); err != nil {
		return err
	}
	if *rows < 1 {
		return fmt.Errorf("%w: --rows must be at least 1", errUsage)
	}
	if *refreshEvery < 0 {
		return fmt.Errorf("%w: --refresh-interval must not be negative", errUsage)
	}
	cluster, err := localpg.Start(ctx, localpg.Options{Dir: *keep, Keep: *keep != "", Port: *port, Logger: a.log})
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.Remove(); err != nil {
			a.log.Error("remove cluster", "err", err)
		}
	}()
	if err := prepareDemoDB(ctx, cluster); err != nil {
		return err
	}
	m, err := migrations.Open(cluster.URL(demoDB), a.log)
	if err != nil {
		return err
	}
	err = m.Up()
	m.Close()
	if err != nil {
		return err
	}
	if err := loadDemoData(ctx, a, cluster.URL(demoDB), *rows); err != nil {
		return err
	}
	stopNote := " and remove the cluster"
	if *keep != "" {
		stopNote = " (the cluster is kept in " + *keep + ")"
	}
	bg := &refresh.Background{DSN: cluster.URL(demoDB), Interval: *refreshEvery, Log: a.log.With("component", "refresher")}
	if *refreshEvery == 0 {
		bg.Off = "turned off (--refresh-interval 0)"
	}
	// Stopped before the cluster is removed (defers run in reverse).
	defer startRefresher(ctx, bg)()
	recorder := status.NewRecorder(50, 1000)
	h := proxy.New(a.log)
	h.Recorder = recorder
	cfg := wire.Config{Upstream: cluster.URL(""), Logger: a.log, Handler: h}
	ho := httpOptions{addr: *httpListen, recorder: recorder, rollups: rollupLister(cluster.URL(demoDB)), refresher: bg}
	return serveUntilDone(ctx, a, cfg, *listen, ho, 5*time.Second, func(addr, httpAddr string) {
		fmt.Fprintf(a.stdout, "PostgreSQL is running with the hll extension and the pgsketch catalog (version %d),\n", migrations.Latest())
		fmt.Fprintf(a.stdout, "and pgsketch-proxy relays to it on %s.\n\n", addr)
		fmt.Fprintf(a.stdout, "Connect through the proxy:\n  psql '%s'\n", proxyURL(cluster.URL(demoDB), addr))
		fmt.Fprintf(a.stdout, "or directly:\n  psql '%s'\n\n", cluster.URL(demoDB))
		fmt.Fprintf(a.stdout, "Table events holds %d generated events (2026-01-01 for 90 days); rollup events_daily\n"+
			"holds a sketch of user_id per day, country and device. Try, through the proxy:\n\n", *rows)
		for _, q := range DemoQueries {
			fmt.Fprintf(a.stdout, "-- %s\n%s\n\n", q.What, q.SQL)
		}
		if *refreshEvery > 0 {
			fmt.Fprintf(a.stdout, "Rows written to events (either URL) reach the rollup at its next background refresh, every %s.\n", *refreshEvery)
		}
		if httpAddr != "" {
			fmt.Fprintf(a.stdout, "Status page (rollups, recent queries, observed error): http://%s/\n", httpAddr)
		}
		fmt.Fprintf(a.stdout, "Press Ctrl-C to stop%s.\n", stopNote)
	})
}

// DemoQueries are the queries demo prints: one month of distinct users by
// country, exactly, approximately from the rollup, and side by side.
var DemoQueries = []struct{ What, SQL string }{
	{"exact: PostgreSQL counts every distinct user",
		"SELECT country, count(DISTINCT user_id) AS users FROM events\n" +
			"WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01'\n" +
			"GROUP BY country ORDER BY users DESC LIMIT 5;"},
	{"approximate: merged from the rollup's sketches (a NOTICE states the error)",
		"SELECT country, approx_count_distinct(user_id) AS users FROM events\n" +
			"WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01'\n" +
			"GROUP BY country ORDER BY users DESC LIMIT 5;"},
	{"side by side, with the relative error in percent",
		"SELECT country, count(DISTINCT user_id) AS exact, approx_count_distinct(user_id) AS approx,\n" +
			"       round(100.0 * (approx_count_distinct(user_id) - count(DISTINCT user_id)) / count(DISTINCT user_id), 2) AS error_pct\n" +
			"FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01'\n" +
			"GROUP BY country ORDER BY exact DESC LIMIT 5;"},
}

// loadDemoData makes table events hold rows generated events and rollup
// events_daily cover them; with a kept cluster that already has them, it
// only refreshes the rollup.
func loadDemoData(ctx context.Context, a *app, dsn string, rows int64) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	have := int64(-1)
	var table bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('public.events') IS NOT NULL`).Scan(&table); err != nil {
		return err
	}
	if table {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM public.events`).Scan(&have); err != nil {
			return err
		}
	}
	if have != rows {
		fmt.Fprintf(a.stderr, "generating %d events...\n", rows)
		start := time.Now()
		spec := demodata.Default
		spec.Rows = rows
		spec.Users = max(1, rows*2/5)
		if _, err := conn.Exec(ctx, `SELECT pgsketch.drop_rollup('events_daily', if_exists => true);
			DROP TABLE IF EXISTS public.events; `+spec.CreateSQL()+`
			CREATE INDEX events_created_at ON public.events (created_at)`); err != nil {
			return fmt.Errorf("generate events: %w", err)
		}
		fmt.Fprintf(a.stderr, "generated %d events in %s\n", rows, time.Since(start).Round(100*time.Millisecond))
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pgsketch.rollup_defs WHERE name = 'events_daily')`).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		// The rollup rollup create makes without tuning flags: daily, with
		// its default levels.
		if _, err := conn.Exec(ctx, `SELECT pgsketch.create_rollup('events_daily', 'public.events', 'created_at',
			grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}', sum_columns => '{amount}');
			SELECT pgsketch.add_rollup_level('events_daily', 'week');
			SELECT pgsketch.add_rollup_level('events_daily', 'month')`); err != nil {
			return fmt.Errorf("create rollup: %w", err)
		}
	}
	res, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, "events_daily", refresh.Options{
		Progress: progressReporter(a), Streams: refresh.DefaultStreams, Dial: pgsession.Dial(dsn)})
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stderr, res)
	return nil
}

// proxyURL is dsn with its host and port replaced by addr.
func proxyURL(dsn, addr string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Host = addr
	return u.String()
}

func prepareDemoDB(ctx context.Context, c *localpg.Cluster) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to the demo cluster: %w", err)
	}
	defer conn.Close(cctx)
	var exists bool
	if err := conn.QueryRow(cctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", demoDB).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := conn.Exec(cctx, "CREATE DATABASE "+demoDB); err != nil {
			return fmt.Errorf("create database %s: %w", demoDB, err)
		}
	}
	db, err := pgx.Connect(cctx, c.URL(demoDB))
	if err != nil {
		return err
	}
	defer db.Close(cctx)
	if _, err := db.Exec(cctx, "CREATE EXTENSION IF NOT EXISTS hll"); err != nil {
		return fmt.Errorf("CREATE EXTENSION hll (%s): %w", localpg.InstallHint, err)
	}
	return nil
}
