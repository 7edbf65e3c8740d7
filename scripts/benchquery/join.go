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
	hllSQL, err := joinSetup(ctx, direct)
	if err != nil {
		return err
	}
	return timeJoined(ctx, o, dsn, direct, joinExactSQL, joinExactSQL, hllSQL, unitedNotice)
}

// unitedNotice is in the NOTICE of an answer whose sketches PostgreSQL
// unites across a join.
const unitedNotice = "united across the join by PostgreSQL"

// timeJoined times exactSQL through the proxy without and with its cache,
// against hllSQL (the same by hand over the rollup) and itself on direct,
// interleaved, each answer checked against the exact one and the proxy's
// NOTICE for notice.
func timeJoined(ctx context.Context, o options, dsn string, direct *pgconn.PgConn, exactSQL, proxySQL, hllSQL, notice string) error {
	cold, err := benchproxy.Open(ctx, o.proxy, dsn, 0, false) // no cache: every answer reads and merges its rollup rows
	if err != nil {
		return err
	}
	defer cold.Close()
	warm, err := benchproxy.Open(ctx, o.proxy, dsn, o.cacheBytes, false)
	if err != nil {
		return err
	}
	defer warm.Close()
	fmt.Println("warm-up: the exact answer, then each kind once, checked against it")
	exact, d, err := benchproxy.Timed(ctx, direct, exactSQL)
	if err != nil {
		return fmt.Errorf("exact: %w", err)
	}
	fmt.Printf("exact: %d groups in %s\n", len(exact), d.Round(time.Millisecond))
	dc := &benchproxy.Conn{PgConn: direct}
	kinds := []timedKind{joinKind(ctx, "proxy-cold", cold.Conn, proxySQL, exact, notice), joinKind(ctx, "proxy-warm", warm.Conn, proxySQL, exact, notice),
		joinKind(ctx, "hll-by-hand", dc, hllSQL, exact, notice), joinKind(ctx, "exact", dc, exactSQL, exact, notice)}
	for _, k := range kinds[:3] {
		if _, err := k.run(); err != nil {
			return err
		}
	}
	times, err := interleave(ctx, o, kinds, []int{0, 1, 2}, 3)
	if err != nil {
		return err
	}
	printJoin(kinds, times)
	return nil
}

// joinSetup makes the dimension table and returns the by-hand query over
// the rollup's table.
func joinSetup(ctx context.Context, direct *pgconn.PgConn) (string, error) {
	if err := direct.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+joinDim+` (code text PRIMARY KEY, region text NOT NULL);
		INSERT INTO `+joinDim+` VALUES ('US', 'Americas'), ('CA', 'Americas'), ('MX', 'Americas'), ('BR', 'Americas'),
		('DE', 'Europe'), ('GB', 'Europe'), ('FR', 'Europe'), ('ES', 'Europe'), ('IT', 'Europe'), ('NL', 'Europe'),
		('PL', 'Europe'), ('IN', 'Asia'), ('JP', 'Asia'), ('AU', 'Oceania'), ('ZA', 'Africa') ON CONFLICT DO NOTHING;
		ANALYZE `+joinDim).Close(); err != nil {
		return "", err
	}
	table, err := rollupTable(ctx, direct)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(joinHLLSQL, table), nil
}

// rollupTable is the rollup's table, quoted.
func rollupTable(ctx context.Context, direct *pgconn.PgConn) (string, error) {
	res := direct.ExecParams(ctx, "SELECT format('%I.%I', rollup_schema, rollup_table) FROM pgsketch.rollup_defs WHERE name = $1",
		[][]byte{[]byte(rollupName)}, nil, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 {
		return "", fmt.Errorf("the rollup %s: %v", rollupName, res.Err)
	}
	return string(res.Rows[0][0]), nil
}

// joinKind asks sql on c and checks the answer against exact and, through
// the proxy, that its one NOTICE holds notice.
func joinKind(ctx context.Context, name string, c *benchproxy.Conn, sql string, exact map[string]float64, notice string) timedKind {
	proxied := strings.HasPrefix(name, "proxy-")
	return timedKind{name, func() (time.Duration, error) {
		ans, notices, d, err := c.Ask(ctx, sql)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		if err := compare(name, ans, exact); err != nil {
			return 0, err
		}
		if proxied && (len(notices) != 1 || !strings.Contains(notices[0], notice)) {
			return 0, fmt.Errorf("%s: notices %q, want the rollup's", name, notices)
		}
		return d, nil
	}}
}

func printJoin(kinds []timedKind, times map[string][]time.Duration) {
	fmt.Printf("\n%-12s %5s %12s %12s %12s\n", "kind", "runs", "min", "p50", "max")
	p50 := map[string]time.Duration{}
	for _, k := range kinds {
		t := times[k.name]
		p50[k.name] = benchkit.Percentile(t, 50)
		fmt.Printf("%-12s %5d %12s %12s %12s\n", k.name, len(t), benchkit.Ms(slices.Min(t)), benchkit.Ms(p50[k.name]), benchkit.Ms(slices.Max(t)))
	}
	fmt.Println()
	for _, r := range []target{{"exact", "proxy-cold", 100}, {"exact", "proxy-warm", 100}, {"hll-by-hand", "proxy-cold", 0}, {"hll-by-hand", "proxy-warm", 0}} {
		x := p50[r.slow].Seconds() / p50[r.fast].Seconds()
		fmt.Printf("%s / %s: p50 %.3gx%s\n", r.slow, r.fast, x, r.note(x, ""))
	}
}
