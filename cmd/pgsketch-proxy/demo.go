package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/aggregates/handler"
	"github.com/pgsketch/pgsketch/internal/localpg"
	"github.com/pgsketch/pgsketch/migrations"
	"github.com/pgsketch/pgsketch/wire"
)

var demoCommand = &command{
	name:    "demo",
	summary: "start a throwaway PostgreSQL with hll and the pgsketch catalog behind the proxy; Ctrl-C removes it",
	run:     runDemo,
}

const demoDB = "pgsketch_demo"

func runDemo(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("[flags]")
	keep := f.String("keep", "", "keep the cluster in this directory (reused by the next run) instead of a temporary one")
	port := f.Int("pg-port", 0, "port for the throwaway PostgreSQL (0: a free one)")
	listen := f.String("listen", "127.0.0.1:6432", "address the proxy accepts clients on")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, f.Arg(0))
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
	stopNote := " and remove the cluster"
	if *keep != "" {
		stopNote = " (the cluster is kept in " + *keep + ")"
	}
	cfg := wire.Config{Upstream: cluster.URL(""), Logger: a.log, Handler: handler.New(a.log)}
	return serveUntilDone(ctx, a, cfg, *listen, 5*time.Second, func(addr string) {
		fmt.Fprintf(a.stdout, "PostgreSQL is running with the hll extension and the pgsketch catalog (version %d),\n", migrations.Latest())
		fmt.Fprintf(a.stdout, "and pgsketch-proxy relays to it on %s.\n\n", addr)
		fmt.Fprintf(a.stdout, "Connect through the proxy:\n  psql '%s'\n", proxyURL(cluster.URL(demoDB), addr))
		fmt.Fprintf(a.stdout, "or directly:\n  psql '%s'\n\n", cluster.URL(demoDB))
		fmt.Fprintf(a.stdout, "Rollups can be created (pgsketch.create_rollup) and refreshed (SELECT pgsketch.refresh_rollup(...)\n"+
			"through the proxy); approximate answers from them are not built yet: other queries pass unchanged.\n")
		fmt.Fprintf(a.stdout, "Press Ctrl-C to stop%s.\n", stopNote)
	})
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
