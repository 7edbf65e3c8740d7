package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/scripts/benchproxy"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

// The star-join benchmark (--join): distinct users by region for one
// month, the events joined to a 15-row dimension table on its key, exact in
// PostgreSQL, by hand over the rollup (hll_union_agg of the daily sketches
// joined to the same table), and through the proxy without and with its
// cache of rollup rows.

const joinDim = "countries15"

var (
	joinExactSQL = `SELECT c.region, count(DISTINCT e.user_id) AS users FROM events e JOIN ` + joinDim + ` c ON c.code = e.country
 WHERE e.created_at >= '` + from + `' AND e.created_at < '` + to + `' GROUP BY c.region`
	// joinHLLSQL's %s is the rollup table.
	joinHLLSQL = `SELECT c.region, hll_cardinality(hll_union_agg(r.distinct_user_id::hll))::bigint AS users FROM %s r
 JOIN ` + joinDim + ` c ON c.code = r.country WHERE r.bucket >= '` + from + `' AND r.bucket < '` + to + `' GROUP BY c.region`
)

// runJoin times the star join; the caller made the events table and the
// rollup.
func runJoin(ctx context.Context, o options, dsn string) error {
	direct, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer direct.Close(context.Background())
	if err := direct.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+joinDim+` (code text PRIMARY KEY, region text NOT NULL);
		INSERT INTO `+joinDim+` VALUES ('US', 'Americas'), ('CA', 'Americas'), ('MX', 'Americas'), ('BR', 'Americas'),
		('DE', 'Europe'), ('GB', 'Europe'), ('FR', 'Europe'), ('ES', 'Europe'), ('IT', 'Europe'), ('NL', 'Europe'),
		('PL', 'Europe'), ('IN', 'Asia'), ('JP', 'Asia'), ('AU', 'Oceania'), ('ZA', 'Africa') ON CONFLICT DO NOTHING;
		ANALYZE `+joinDim).Close(); err != nil {
		return err
	}
	var table string
	res := direct.ExecParams(ctx, "SELECT format('%I.%I', rollup_schema, rollup_table) FROM pgsketch.rollup_defs WHERE name = $1",
		[][]byte{[]byte(rollupName)}, nil, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 {
		return fmt.Errorf("the rollup %s: %v", rollupName, res.Err)
	}
	table = string(res.Rows[0][0])
	hllSQL := fmt.Sprintf(joinHLLSQL, table)
	var conns []*benchproxy.Conn
	var stops []func()
	open := func(cacheBytes int64) (*benchproxy.Conn, error) {
		p, err := benchproxy.Start(ctx, o.proxy, dsn, cacheBytes, false)
		if err != nil {
			return nil, err
		}
		c, err := benchproxy.Connect(ctx, p.URL(dsn))
		if err != nil {
			p.Stop()
			return nil, err
		}
		conns = append(conns, c)
		stops = append(stops, p.Stop)
		return c, nil
	}
	defer func() {
		for _, c := range conns {
			c.Close(context.Background())
		}
		for _, s := range stops {
			s()
		}
	}()
	cold, err := open(0) // no cache: every answer reads and merges its rollup rows
	if err != nil {
		return err
	}
	warm, err := open(o.cacheBytes)
	if err != nil {
		return err
	}
	fmt.Println("warm-up: the exact answer, then each kind once, checked against it")
	exact, _, err := benchproxy.Timed(ctx, direct, joinExactSQL)
	if err != nil {
		return fmt.Errorf("exact: %w", err)
	}
	type kind struct {
		name string
		c    *benchproxy.Conn
		sql  string
	}
	kinds := []kind{{"proxy-cold", cold, joinExactSQL}, {"proxy-warm", warm, joinExactSQL},
		{"hll-by-hand", &benchproxy.Conn{PgConn: direct}, hllSQL}, {"exact", &benchproxy.Conn{PgConn: direct}, joinExactSQL}}
	runOne := func(k kind) (time.Duration, error) {
		if k.c.PgConn != direct {
			k.c.ResetNotices()
		}
		ans, d, err := benchproxy.Timed(ctx, k.c.PgConn, k.sql)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k.name, err)
		}
		if err := compare(k.name, ans, exact); err != nil {
			return 0, err
		}
		if k.c.PgConn != direct {
			if n := k.c.Notices(); len(n) != 1 || !strings.Contains(n[0], "united across the join by PostgreSQL") {
				return 0, fmt.Errorf("%s: notices %q, want the rollup's", k.name, n)
			}
		}
		return d, nil
	}
	for _, k := range kinds[:3] {
		if _, err := runOne(k); err != nil {
			return err
		}
	}
	times := map[string][]time.Duration{}
	every := float64(o.runs) / float64(o.exactRuns)
	nextExact := 0.0
	fmt.Printf("%d rounds; the exact query in %d of them\n", o.runs, o.exactRuns)
	for i := range o.runs {
		order := []int{i % 3, (i + 1) % 3, (i + 2) % 3}
		if float64(i) >= nextExact && len(times["exact"]) < o.exactRuns {
			order = slices.Insert(order, i%4%len(order), 3)
			nextExact += every
		}
		var line strings.Builder
		fmt.Fprintf(&line, "round %2d", i+1)
		for _, k := range order {
			d, err := runOne(kinds[k])
			if err != nil {
				return fmt.Errorf("round %d: %w", i+1, err)
			}
			times[kinds[k].name] = append(times[kinds[k].name], d)
			fmt.Fprintf(&line, "  %s %s", kinds[k].name, benchkit.Ms(d))
		}
		fmt.Println(line.String())
	}
	fmt.Printf("\n%-12s %5s %12s %12s %12s\n", "kind", "runs", "min", "p50", "max")
	p50 := map[string]time.Duration{}
	for _, k := range kinds {
		t := times[k.name]
		p50[k.name] = percentile(t, 50)
		fmt.Printf("%-12s %5d %12s %12s %12s\n", k.name, len(t), benchkit.Ms(slices.Min(t)), benchkit.Ms(p50[k.name]), benchkit.Ms(slices.Max(t)))
	}
	fmt.Println()
	for _, r := range []struct {
		slow, fast string
		target     float64
	}{{"exact", "proxy-cold", 100}, {"exact", "proxy-warm", 100}, {"hll-by-hand", "proxy-cold", 0}, {"hll-by-hand", "proxy-warm", 0}} {
		x := p50[r.slow].Seconds() / p50[r.fast].Seconds()
		met := ""
		if r.target > 0 {
			met = fmt.Sprintf("  (target >= %gx: %s)", r.target, map[bool]string{true: "met", false: "NOT met"}[x >= r.target])
		}
		fmt.Printf("%s / %s: p50 %.3gx%s\n", r.slow, r.fast, x, met)
	}
	return nil
}
