package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

const (
	hllRollup   = "events_daily_hll"
	thetaRollup = "events_daily_theta"
)

// dataInfo describes the database the queries run on.
type dataInfo struct {
	pgVersion    string
	eventsBytes  int64
	sharedBufs   string
	workMem      string
	regenerated  bool
	generateTime time.Duration
}

// setup brings the catalog up to date and makes the events table (unless
// it already holds the rows asked for) and its index on created_at.
func setup(ctx context.Context, conn *pgx.Conn, dsn string, o options) (dataInfo, error) {
	var d dataInfo
	if err := benchkit.Prepare(ctx, dsn); err != nil {
		return d, err
	}
	spec := benchkit.Events("events", o.rows, o.days, o.users)
	if !benchkit.Marked(ctx, conn, spec) {
		var err error
		d.regenerated = true
		if d.generateTime, err = benchkit.Generate(spec, func() error {
			if err := dropRollupsOnEvents(ctx, conn); err != nil {
				return err
			}
			return benchkit.Exec(ctx, conn, "DROP TABLE IF EXISTS events; "+spec.CreateSQL()+benchkit.MarkSQL(spec))
		}); err != nil {
			return d, err
		}
	}
	if _, err := conn.Exec(ctx, "CREATE INDEX IF NOT EXISTS events_created_at ON events (created_at)"); err != nil {
		return d, err
	}
	err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('shared_buffers'),
		current_setting('work_mem'), pg_total_relation_size('events')`).Scan(&d.pgVersion, &d.sharedBufs, &d.workMem, &d.eventsBytes)
	if err != nil {
		return d, err
	}
	fmt.Printf("PostgreSQL %s (shared_buffers %s, work_mem %s); events: %d rows, %s with its indexes\n",
		d.pgVersion, d.sharedBufs, d.workMem, o.rows, mb(d.eventsBytes))
	return d, nil
}

// dropRollupsOnEvents drops every rollup of the events table, so that the
// table can be dropped.
func dropRollupsOnEvents(ctx context.Context, conn *pgx.Conn) error {
	names, err := benchkit.Strings(ctx, conn, `SELECT name FROM pgsketch.rollup_defs
		WHERE source_schema = 'public' AND source_table = 'events' ORDER BY name`)
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup($1)", n); err != nil {
			return err
		}
		fmt.Printf("dropped rollup %s of the old events table\n", n)
	}
	return nil
}

// rollupKind is one of the two rollups whose builds are compared.
type rollupKind struct {
	name, measures, args string
}

func rollupKinds(lgK int) [2]rollupKind {
	base := `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}', log2m => 14, regwidth => 5`
	return [2]rollupKind{
		{hllRollup, "hll(user_id), log2m 14, regwidth 5", base},
		{thetaRollup, fmt.Sprintf("the same + theta(user_id), lg_k %d", lgK), fmt.Sprintf("%s, theta_columns => '{user_id}', theta_lgk => %d", base, lgK)},
	}
}

// buildInfo is what the builds measured; builds is empty with --skip-build.
type buildInfo struct {
	kinds  [2]rollupKind
	builds [2][]time.Duration
	rows   [2]int64
	bytes  [2]int64
	// Average octet_length and pg_column_size (stored, maybe compressed)
	// of the Theta rollup's two sketch columns: hll, then theta.
	avgLen, avgStored [2]float64
	streams           int
	skipped           bool
}

// buildRollups builds the HLL-only and the HLL + Theta rollup
// o.buildRounds times each, alternating which goes first, measures them
// and drops the HLL-only one.
func buildRollups(ctx context.Context, conn *pgx.Conn, dsn string, o options) (*buildInfo, error) {
	bi := &buildInfo{kinds: rollupKinds(o.lgK), streams: o.streams}
	if o.skipBuild && benchkit.Built(ctx, conn, thetaRollup) {
		fmt.Printf("reusing the built rollup %s (--skip-build)\n", thetaRollup)
		bi.skipped = true
		return bi, measureTheta(ctx, conn, bi)
	}
	fmt.Println("warming the events table's pages (one untimed sequential scan)...")
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM events"); err != nil {
		return nil, err
	}
	for round := range o.buildRounds {
		for _, k := range benchkit.Rotation(round, 2) {
			d, err := build(ctx, conn, dsn, bi.kinds[k], o.streams)
			if err != nil {
				return nil, err
			}
			bi.builds[k] = append(bi.builds[k], d)
			if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass), (SELECT count(*) FROM "+bi.kinds[k].name+")",
				bi.kinds[k].name).Scan(&bi.bytes[k], &bi.rows[k]); err != nil {
				return nil, err
			}
			fmt.Printf("build round %d: %s in %s: %d rows, %s\n", round+1, bi.kinds[k].name, benchkit.Ms(d), bi.rows[k], mb(bi.bytes[k]))
		}
	}
	if err := measureTheta(ctx, conn, bi); err != nil {
		return nil, err
	}
	_, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup('"+hllRollup+"')")
	return bi, err
}

// build creates the rollup anew and builds it with a full refresh, timed,
// then vacuums and analyzes it (not timed).
func build(ctx context.Context, conn *pgx.Conn, dsn string, k rollupKind, streams int) (time.Duration, error) {
	if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup('"+k.name+"', if_exists => true)"); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := conn.Exec(ctx, "SELECT pgsketch.create_rollup('"+k.name+"', 'events', 'created_at', "+k.args+")"); err != nil {
		return 0, err
	}
	if _, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, k.name,
		refresh.Options{Full: true, Streams: streams, Dial: pgsession.Dial(dsn)}); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	_, err := conn.Exec(ctx, "VACUUM ANALYZE "+k.name)
	return d, err
}

// measureTheta reads the sizes of the Theta rollup's sketches.
func measureTheta(ctx context.Context, conn *pgx.Conn, bi *buildInfo) error {
	return conn.QueryRow(ctx, `SELECT avg(octet_length(distinct_user_id)), avg(octet_length(theta_user_id)),
		avg(pg_column_size(distinct_user_id)), avg(pg_column_size(theta_user_id)),
		count(*), pg_total_relation_size('`+thetaRollup+`') FROM `+thetaRollup).
		Scan(&bi.avgLen[0], &bi.avgLen[1], &bi.avgStored[0], &bi.avgStored[1], &bi.rows[1], &bi.bytes[1])
}

// mb is a size in MB (2^20 bytes), or GB from 1 GB.
func mb(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.2f GB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
}

// setupLevels gives the Theta rollup exactly the levels listed (comma-
// separated), builds the new ones and prints what they cost.
func setupLevels(ctx context.Context, conn *pgx.Conn, dsn, levels string) error {
	c, err := benchkit.SetLevels(ctx, conn, dsn, thetaRollup, levels)
	if err != nil || len(c.Added) == 0 {
		return err
	}
	fmt.Printf("levels %s added and built in %s (the refresh that built them: %s)\n", strings.Join(c.Added, ","), benchkit.Ms(c.Took), c.Refresh)
	for _, g := range c.Added {
		var n, bytes int64
		if err := conn.QueryRow(ctx, "SELECT count(*), pg_total_relation_size($1::regclass) FROM "+thetaRollup+"_"+g, thetaRollup+"_"+g).Scan(&n, &bytes); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+thetaRollup+"_"+g); err != nil {
			return err
		}
		fmt.Printf("level %s: %d rows, %s\n", g, n, mb(bytes))
	}
	return nil
}
