package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// setup makes the catalog, the events table (unless it already has the
// rows asked for), its index and the rollup (unless it is already built
// over that table).
func setup(ctx context.Context, dsn string, o options) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := benchkit.Prepare(ctx, dsn); err != nil {
		return err
	}
	spec := benchkit.Events("events", o.rows, o.days, o.users)
	spec.DistributeBy = o.distribute
	fresh := !benchkit.HasRows(ctx, conn, "events", o.rows)
	if fresh {
		if _, err := benchkit.Generate(spec, func() error {
			return benchkit.Exec(ctx, conn, "SELECT pgsketch.drop_rollup('"+rollupName+"', if_exists => true); "+
				"SELECT pgsketch.drop_rollup('"+hourlyName+"', if_exists => true); DROP TABLE IF EXISTS events; "+spec.CreateSQL())
		}); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "CREATE INDEX IF NOT EXISTS events_created_at ON events (created_at)"); err != nil {
		return err
	}
	if o.matrix {
		return nil // runMatrix makes its rollup
	}
	if fresh || !benchkit.Built(ctx, conn, rollupName) {
		if err := buildDaily(ctx, conn, dsn); err != nil {
			return err
		}
	}
	if o.mergeBench || o.localZone {
		if err := setupHourly(ctx, conn, dsn, o.proxy, fresh); err != nil {
			return err
		}
	}
	if err := setupLevels(ctx, conn, dsn, o.levels); err != nil {
		return err
	}
	var size, rsize string
	var rrows int64
	_ = conn.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('events')),
		pg_size_pretty(pg_total_relation_size('`+rollupName+`')), (SELECT count(*) FROM `+rollupName+`)`).Scan(&size, &rsize, &rrows)
	var version string
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&version)
	fmt.Printf("PostgreSQL %s; events: %d rows, %s; %s: %d rows, %s\n\n", version, o.rows, size, rollupName, rrows, rsize)
	return nil
}

// buildDaily (re)creates the daily rollup and builds it with a full
// refresh.
func buildDaily(ctx context.Context, conn *pgx.Conn, dsn string) error {
	fmt.Println("building the rollup...")
	t0 := time.Now()
	if _, err := conn.Exec(ctx, `SELECT pgsketch.drop_rollup('`+rollupName+`', if_exists => true);
		SELECT pgsketch.create_rollup('`+rollupName+`', 'events', 'created_at', grain => 'day',
		       dimensions => '{country,device}', distinct_columns => '{user_id}', log2m => 14, regwidth => 5)`); err != nil {
		return err
	}
	res, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, rollupName,
		refresh.Options{Full: true, Streams: 2, Dial: pgsession.Dial(dsn)})
	if err != nil {
		return err
	}
	fmt.Printf("built in %s: %s\n", time.Since(t0).Round(time.Second), res)
	_, err = conn.Exec(ctx, "VACUUM ANALYZE "+rollupName)
	return err
}

// setupLevels gives the daily rollup exactly the levels listed (comma-
// separated), building new ones with an incremental refresh.
func setupLevels(ctx context.Context, conn *pgx.Conn, dsn, levels string) error {
	c, err := benchkit.SetLevels(ctx, conn, dsn, rollupName, levels)
	for _, g := range c.Dropped {
		fmt.Printf("dropped the %s level of %s\n", g, rollupName)
	}
	if err != nil || len(c.Added) == 0 {
		return err
	}
	fmt.Printf("levels built in %s: %s\n", c.Took.Round(time.Millisecond), c.Refresh)
	for _, g := range c.Added {
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+rollupName+"_"+g); err != nil {
			return err
		}
	}
	return nil
}

// setupHourly creates and builds the hourly rollup of events with the
// proxy's CLI, unless it is already built over the current table.
func setupHourly(ctx context.Context, conn *pgx.Conn, dsn, bin string, fresh bool) error {
	if benchkit.Built(ctx, conn, hourlyName) && !fresh {
		return nil
	}
	fmt.Println("building the hourly rollup (pgsketch-proxy rollup create, then rollup refresh)...")
	t0 := time.Now()
	if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup('"+hourlyName+"', if_exists => true)"); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"rollup", "create", hourlyName, "--dsn", dsn, "--table", "public.events", "--time", "created_at",
			"--grain", "hour", "--tz", "UTC", "--distinct", "user_id", "--log2m", "14", "--regwidth", "5", "--levels", "none", "--log-level", "warn"},
		{"rollup", "refresh", hourlyName, "--dsn", dsn, "--log-level", "warn"},
	} {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("pgsketch-proxy %s %s: %w", args[0], args[1], err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+hourlyName); err != nil {
		return err
	}
	fmt.Printf("built in %s\n", time.Since(t0).Round(time.Second))
	return nil
}
