// Command benchquery measures a dashboard's distinct-count query answered
// by pgsketch-proxy from a daily rollup, against PostgreSQL answering it
// exactly and PostgreSQL merging the same rollup's sketches with the hll
// extension.
//
// It starts a throwaway PostgreSQL 15 cluster (internal/localpg; or uses
// --dsn), generates the events table (internal/demodata; 20 M rows over 90
// days by default) with an index on created_at, builds the daily rollup
// events_daily by country and device with an HLL of user_id (log2m 14,
// regwidth 5) with the refresher, and then times "one month, distinct
// users by country" four ways, interleaved round by round:
//
//	proxy-cold: a pgsketch-proxy serve --approx on started for this run
//	            alone, a new client connection, its first query (the time
//	            of the query only, not of the start or the connection);
//	proxy-warm: the same query repeated on one connection through one
//	            long-running proxy;
//	hll-direct: SELECT country, hll_cardinality(hll_union_agg(distinct_user_id::hll))
//	            FROM events_daily WHERE bucket in the month GROUP BY country,
//	            on one direct connection;
//	exact:      the COUNT(DISTINCT) query on one direct connection (fewer
//	            runs: --exact-runs, spread evenly over the rounds).
//
// Every query goes in the simple protocol (one Query message) and is timed
// from sending it to reading its ReadyForQuery. It prints p50 and p99 of
// each kind and the ratios the targets are about. scripts/bench-query.sh
// runs it; docs/benchmarks.md records its output.
//
// --merge-bench runs the benchmark of the proxy's merge strategies instead
// (merge.go), on the same table with an hourly rollup beside the
// daily one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/aggregates/refresh"
	"github.com/pgsketch/pgsketch/internal/demodata"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

const (
	rollupName = "events_daily"
	from, to   = "2026-02-01", "2026-03-01"
)

var (
	exactSQL = `SELECT country, count(DISTINCT user_id) AS users FROM events
 WHERE created_at >= '` + from + `' AND created_at < '` + to + `' GROUP BY country`
	hllSQL = `SELECT country, hll_cardinality(hll_union_agg(distinct_user_id::hll))::bigint AS users FROM ` + rollupName + `
 WHERE bucket >= '` + from + `' AND bucket < '` + to + `' GROUP BY country`
)

type options struct {
	rows       int64
	days       int
	users      int64
	runs       int
	exactRuns  int
	dsn, keep  string
	proxy      string
	profileDir string
	cacheBytes int64
	mergeBench bool
	mergeMore  bool
	levels     string
	matrix     bool
	join       bool
}

func main() {
	var o options
	flag.Int64Var(&o.rows, "rows", 20_000_000, "events to generate")
	flag.IntVar(&o.days, "days", 90, "days the events span, from 2026-01-01")
	flag.Int64Var(&o.users, "users", 2_000_000, "possible distinct users")
	flag.IntVar(&o.runs, "runs", 50, "timed runs of each of proxy-cold, proxy-warm and hll-direct")
	flag.IntVar(&o.exactRuns, "exact-runs", 20, "timed runs of the exact query (several seconds each), spread over the rounds")
	flag.StringVar(&o.dsn, "dsn", "", "use this database (with the hll extension) instead of a throwaway cluster; "+
		"the tables events and events_daily and the pgsketch catalog are created in it")
	flag.StringVar(&o.keep, "keep", "", "keep the throwaway cluster in this directory, and reuse its table and rollup on the next run")
	flag.StringVar(&o.proxy, "proxy", "bin/pgsketch-proxy", "the pgsketch-proxy binary")
	flag.StringVar(&o.profileDir, "profile", "", "after the timed runs, write a 20-second CPU profile of the proxy answering warm queries "+
		"(proxy-cpu.pprof) and the time of each statement it runs upstream (upstream.txt) to this directory")
	flag.Int64Var(&o.cacheBytes, "cache-bytes", 256<<20, "the proxy's --cache-bytes (decoded rollup rows kept between queries; 0: none)")
	flag.BoolVar(&o.mergeBench, "merge-bench", false, "instead, time the proxy's merge strategies: pgsketch.merge proxy, server and auto "+
		"through one proxy without a cache, against hll_union_agg in PostgreSQL, for four queries (merge.go); --runs rounds, --exact-runs ignored")
	flag.BoolVar(&o.mergeMore, "merge-more", false, "with --merge-bench, four more queries near the boundary of auto's rule "+
		"(by day and device, by week and country, by hour and by day from the hourly rollup)")
	flag.StringVar(&o.levels, "levels", "", "give "+rollupName+" these levels (comma-separated, e.g. month) before the runs, and time "+
		"hll_union_agg on the month level too (hll-level); without it, levels "+rollupName+" has are dropped")
	flag.BoolVar(&o.join, "join", false, "instead, time distinct users by region for one month, the events joined to a 15-row dimension "+
		"table, exact, by hand over the rollup (hll_union_agg) and through the proxy without and with its cache")
	flag.BoolVar(&o.matrix, "matrix", false, "instead, time five ranges by three groupings against the rollup rollup create makes "+
		"without tuning flags (matrix.go): cold, warm and new-connection through the proxy, exact, hll_union_agg daily and by a "+
		"monthly table built by hand, over a simple-protocol client and pgx; --runs rounds, --exact-runs exact runs per shape")
	flag.Parse()
	o.exactRuns = max(1, min(o.exactRuns, o.runs))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-query:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if _, err := os.Stat(o.proxy); err != nil {
		return fmt.Errorf("the proxy binary: %w (build it with go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy)", err)
	}
	dsn := o.dsn
	if dsn == "" {
		var stop func()
		var err error
		if dsn, stop, err = benchkit.Cluster(ctx, o.keep, benchkit.Settings()); err != nil {
			return err
		}
		defer stop()
	}
	if err := setup(ctx, dsn, o); err != nil {
		return err
	}
	if o.mergeBench {
		return runMerge(ctx, o, dsn)
	}
	if o.matrix {
		return runMatrix(ctx, o, dsn)
	}
	if o.join {
		return runJoin(ctx, o, dsn)
	}

	direct, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer direct.Close(context.Background())
	warmProxy, err := benchproxy.Start(ctx, o.proxy, dsn, o.cacheBytes, o.profileDir != "")
	if err != nil {
		return err
	}
	defer warmProxy.Stop()
	warm, err := benchproxy.Connect(ctx, warmProxy.URL(dsn))
	if err != nil {
		return err
	}
	defer warm.Close(context.Background())
	// proxy-uncached: a running proxy without a cache, on one long-lived
	// connection: every query reads and merges its rollup rows, as the
	// first query after each refresh does in a proxy that has run a while.
	uncachedProxy, err := benchproxy.Start(ctx, o.proxy, dsn, 0, false)
	if err != nil {
		return err
	}
	defer uncachedProxy.Stop()
	uncached, err := benchproxy.Connect(ctx, uncachedProxy.URL(dsn))
	if err != nil {
		return err
	}
	defer uncached.Close(context.Background())

	// The exact answer, to check the others against (and a warm-up of the
	// table's pages).
	fmt.Println("warm-up: exact query, rollup merge in PostgreSQL, proxy")
	exactAns, _, err := benchproxy.Timed(ctx, direct, exactSQL)
	if err != nil {
		return fmt.Errorf("exact: %w", err)
	}
	check := func(kind string, ans map[string]float64, wantNotice bool, notices []string) error {
		if err := compare(kind, ans, exactAns); err != nil {
			return err
		}
		if wantNotice != (len(notices) == 1 && strings.Contains(notices[0], "rollup "+rollupName)) {
			return fmt.Errorf("%s: notices %q", kind, notices)
		}
		return nil
	}
	for _, k := range []struct {
		name string
		c    *benchproxy.Conn
		sql  string
	}{{"hll-direct", &benchproxy.Conn{PgConn: direct}, hllSQL}, {"proxy-warm", warm, exactSQL}, {"proxy-uncached", uncached, exactSQL}} {
		k.c.ResetNotices()
		ans, _, err := benchproxy.Timed(ctx, k.c.PgConn, k.sql)
		if err == nil {
			err = check(k.name, ans, k.c != nil && k.c.PgConn != direct, k.c.Notices())
		}
		if err != nil {
			return err
		}
	}

	cold := func() (time.Duration, error) {
		p, err := benchproxy.Start(ctx, o.proxy, dsn, o.cacheBytes, false)
		if err != nil {
			return 0, err
		}
		defer p.Stop()
		c, err := benchproxy.Connect(ctx, p.URL(dsn))
		if err != nil {
			return 0, err
		}
		defer c.Close(context.Background())
		ans, d, err := benchproxy.Timed(ctx, c.PgConn, exactSQL)
		if err == nil {
			err = check("proxy-cold", ans, true, c.Notices())
		}
		return d, err
	}
	kinds := []struct {
		name string
		f    func() (time.Duration, error)
	}{
		{"proxy-cold", cold},
		{"proxy-warm", func() (time.Duration, error) {
			warm.ResetNotices()
			ans, d, err := benchproxy.Timed(ctx, warm.PgConn, exactSQL)
			if err == nil {
				err = check("proxy-warm", ans, true, warm.Notices())
			}
			return d, err
		}},
		{"hll-direct", func() (time.Duration, error) {
			_, d, err := benchproxy.Timed(ctx, direct, hllSQL)
			return d, err
		}},
		{"proxy-uncached", func() (time.Duration, error) {
			uncached.ResetNotices()
			ans, d, err := benchproxy.Timed(ctx, uncached.PgConn, exactSQL)
			if err == nil {
				err = check("proxy-uncached", ans, true, uncached.Notices())
			}
			return d, err
		}},
		{"exact", func() (time.Duration, error) {
			_, d, err := benchproxy.Timed(ctx, direct, exactSQL)
			return d, err
		}},
	}
	if strings.Contains(o.levels, "month") {
		// A reference, not a target: hll_union_agg over the same
		// pre-merged month sketches the proxy reads.
		levelSQL := strings.Replace(hllSQL, "FROM "+rollupName+"\n", "FROM "+rollupName+"_month\n", 1)
		if ans, _, err := benchproxy.Timed(ctx, direct, levelSQL); err != nil {
			return fmt.Errorf("hll-level: %w", err)
		} else if err := compare("hll-level", ans, exactAns); err != nil {
			return err
		}
		kinds = append(kinds, struct {
			name string
			f    func() (time.Duration, error)
		}{"hll-level", func() (time.Duration, error) {
			_, d, err := benchproxy.Timed(ctx, direct, levelSQL)
			return d, err
		}})
	}
	times := map[string][]time.Duration{}
	every := float64(o.runs) / float64(o.exactRuns)
	nextExact := 0.0
	fmt.Printf("%d rounds; the exact query in %d of them\n", o.runs, o.exactRuns)
	for i := range o.runs {
		var order []int
		rot := []int{0, 1, 2, 3}
		if len(kinds) > 5 {
			rot = append(rot, 5) // hll-level
		}
		for k := range rot {
			order = append(order, rot[(i+k)%len(rot)]) // rotate who goes first
		}
		if float64(i) >= nextExact && len(times["exact"]) < o.exactRuns {
			order = slices.Insert(order, i%4%len(order), 4) // exact
			nextExact += every
		}
		var line strings.Builder
		fmt.Fprintf(&line, "round %2d", i+1)
		for _, k := range order {
			d, err := kinds[k].f()
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, kinds[k].name, err)
			}
			times[kinds[k].name] = append(times[kinds[k].name], d)
			fmt.Fprintf(&line, "  %s %s", kinds[k].name, benchkit.Ms(d))
		}
		fmt.Println(line.String())
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	fmt.Printf("\n%-14s %5s %12s %12s\n", "kind", "runs", "p50", "p99")
	p := map[string][2]time.Duration{}
	for _, k := range kinds {
		t := times[k.name]
		p[k.name] = [2]time.Duration{percentile(t, 50), percentile(t, 99)}
		fmt.Printf("%-14s %5d %12s %12s\n", k.name, len(t), benchkit.Ms(p[k.name][0]), benchkit.Ms(p[k.name][1]))
	}
	ratio := func(a, b string, i int) float64 { return p[a][i].Seconds() / p[b][i].Seconds() }
	fmt.Println()
	for _, r := range []struct {
		slow, fast string
		target     float64
	}{{"exact", "proxy-cold", 200}, {"hll-direct", "proxy-cold", 2}, {"exact", "proxy-uncached", 200}, {"hll-direct", "proxy-uncached", 2},
		{"hll-direct", "proxy-warm", 10}, {"exact", "proxy-warm", 0}} {
		met := ""
		if r.target > 0 {
			met = fmt.Sprintf("  (target >= %gx at p50: %s)", r.target, map[bool]string{true: "met", false: "NOT met"}[ratio(r.slow, r.fast, 0) >= r.target])
		}
		fmt.Printf("%s / %s: p50 %.3gx, p99 %.3gx%s\n", r.slow, r.fast, ratio(r.slow, r.fast, 0), ratio(r.slow, r.fast, 1), met)
	}

	if o.profileDir != "" {
		return profile(ctx, o.profileDir, warmProxy, warm, dsn)
	}
	return nil
}

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

	spec := demodata.Default
	spec.Table, spec.Rows, spec.Days, spec.Users = "events", o.rows, o.days, o.users
	var have int64
	_ = conn.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&have)
	fresh := have != o.rows
	if fresh {
		fmt.Printf("generating %d events over %d days...\n", o.rows, o.days)
		t0 := time.Now()
		if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup('"+rollupName+"', if_exists => true); "+
			"SELECT pgsketch.drop_rollup('"+hourlyName+"', if_exists => true); DROP TABLE IF EXISTS events; "+spec.CreateSQL()); err != nil {
			return err
		}
		fmt.Printf("generated in %s\n", time.Since(t0).Round(time.Second))
	}
	if _, err := conn.Exec(ctx, "CREATE INDEX IF NOT EXISTS events_created_at ON events (created_at)"); err != nil {
		return err
	}
	if o.matrix {
		return nil // runMatrix makes its rollup
	}
	var built bool
	_ = conn.QueryRow(ctx, "SELECT watermark IS NOT NULL FROM pgsketch.rollup_defs WHERE name = $1", rollupName).Scan(&built)
	if fresh || !built {
		fmt.Println("building the rollup...")
		t0 := time.Now()
		if _, err := conn.Exec(ctx, `SELECT pgsketch.drop_rollup('`+rollupName+`', if_exists => true);
			SELECT pgsketch.create_rollup('`+rollupName+`', 'events', 'created_at', grain => 'day',
			       dimensions => '{country,device}', distinct_columns => '{user_id}', log2m => 14, regwidth => 5)`); err != nil {
			return err
		}
		res, err := refresh.Refresh(ctx, refresh.PgConn{C: conn.PgConn()}, rollupName,
			refresh.Options{Full: true, Streams: 2, Dial: refresh.DialPgConn(dsn)})
		if err != nil {
			return err
		}
		fmt.Printf("built in %s: %s\n", time.Since(t0).Round(time.Second), res)
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+rollupName); err != nil {
			return err
		}
	}
	if o.mergeBench {
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

// setupLevels gives the daily rollup exactly the levels listed (comma-
// separated), building new ones with an incremental refresh.
func setupLevels(ctx context.Context, conn *pgx.Conn, dsn, levels string) error {
	want := map[string]bool{}
	for _, g := range strings.Split(levels, ",") {
		if g = strings.TrimSpace(g); g != "" {
			want[g] = true
		}
	}
	rows, err := conn.Query(ctx, "SELECT grain FROM pgsketch.rollup_levels WHERE rollup = $1", rollupName)
	if err != nil {
		return err
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var added []string
	for _, g := range have {
		if !want[g] {
			if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup_level($1, $2)", rollupName, g); err != nil {
				return err
			}
			fmt.Printf("dropped the %s level of %s\n", g, rollupName)
		}
		delete(want, g)
	}
	for g := range want {
		if _, err := conn.Exec(ctx, "SELECT pgsketch.add_rollup_level($1, $2)", rollupName, g); err != nil {
			return err
		}
		added = append(added, g)
	}
	if len(added) > 0 {
		t0 := time.Now()
		res, err := refresh.Refresh(ctx, refresh.PgConn{C: conn.PgConn()}, rollupName, refresh.Options{Streams: 2, Dial: refresh.DialPgConn(dsn)})
		if err != nil {
			return err
		}
		fmt.Printf("levels built in %s: %s\n", time.Since(t0).Round(time.Millisecond), res)
		for _, g := range added {
			if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+rollupName+"_"+g); err != nil {
				return err
			}
		}
	}
	return nil
}

// compare checks an answer against the exact one: the same groups, and
// every estimate within 5 standard errors (log2m 14: 1.04/128) of the exact
// count.
func compare(kind string, ans, exact map[string]float64) error {
	if len(ans) != len(exact) {
		return fmt.Errorf("%s: %d groups, the exact answer has %d", kind, len(ans), len(exact))
	}
	for k, v := range ans {
		e, ok := exact[k]
		if !ok {
			return fmt.Errorf("%s: group %q is not in the exact answer", kind, k)
		}
		if se := math.Abs(v-e) / (e * 1.04 / 128); se > 5 {
			return fmt.Errorf("%s: group %q: %v, exact %v (%.1f standard errors)", kind, k, v, e, se)
		}
	}
	return nil
}

// profile writes a CPU profile of the warm proxy while it answers the
// query over and over for 20 s.
func profile(ctx context.Context, dir string, p *benchproxy.Proxy, c *benchproxy.Conn, dsn string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if p.PprofAddr == "" {
		return errors.New("the warm proxy did not report its pprof address")
	}
	fmt.Printf("\nprofiling the proxy for 20 s of warm queries (%s)...\n", dir)
	stop := make(chan struct{})
	var n int
	var loopErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := benchproxy.Timed(ctx, c.PgConn, exactSQL); err != nil {
				loopErr = err
				return
			}
			n++
		}
	}()
	resp, err := http.Get("http://" + p.PprofAddr + "/debug/pprof/profile?seconds=20")
	if err == nil {
		var f *os.File
		if f, err = os.Create(dir + "/proxy-cpu.pprof"); err == nil {
			_, err = io.Copy(f, resp.Body)
			f.Close()
		}
		resp.Body.Close()
	}
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if loopErr != nil {
		return loopErr
	}
	fmt.Printf("%d queries in 20 s; go tool pprof -top %s/proxy-cpu.pprof\n", n, dir)
	return nil
}

func percentile(ds []time.Duration, pct float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	// Nearest rank.
	i := int(math.Ceil(pct/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
