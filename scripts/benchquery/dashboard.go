package main

// The default benchmark: "one month, distinct users by country" through
// the proxy cold, warm and without a cache, against hll_union_agg over the
// rollup and the exact query in PostgreSQL (the package comment says how).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"
)

// dashboard holds the benchmark's connections and the exact answer.
type dashboard struct {
	ctx    context.Context
	o      options
	dsn    string
	direct *pgconn.PgConn
	warm   *benchproxy.Session // a long-running proxy with its cache
	// uncached is a running proxy without a cache, on one long-lived
	// connection: every query reads and merges its rollup rows, as the
	// first query after each refresh does in a proxy that has run a while.
	uncached *benchproxy.Session
	exact    map[string]float64
}

func runDashboard(ctx context.Context, o options, dsn string) error {
	b, err := openDashboard(ctx, o, dsn)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.warmUp(); err != nil {
		return err
	}
	kinds, err := b.kinds()
	if err != nil {
		return err
	}
	rotating := []int{0, 1, 2, 3}
	if len(kinds) > 5 {
		rotating = append(rotating, 5) // hll-level
	}
	times, err := interleave(ctx, o, kinds, rotating, 4)
	if err != nil {
		return err
	}
	printDashboard(kinds, times)
	if o.profileDir != "" {
		return profile(ctx, o.profileDir, b.warm)
	}
	return nil
}

func openDashboard(ctx context.Context, o options, dsn string) (*dashboard, error) {
	b := &dashboard{ctx: ctx, o: o, dsn: dsn}
	var err error
	if b.direct, err = pgconn.Connect(ctx, dsn); err != nil {
		return nil, err
	}
	if b.warm, err = benchproxy.Open(ctx, o.proxy, dsn, o.cacheBytes, o.profileDir != ""); err != nil {
		b.close()
		return nil, err
	}
	if b.uncached, err = benchproxy.Open(ctx, o.proxy, dsn, 0, false); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *dashboard) close() {
	for _, s := range []*benchproxy.Session{b.uncached, b.warm} {
		if s != nil {
			s.Close()
		}
	}
	b.direct.Close(context.Background())
}

// warmUp computes the exact answer, to check the others against (and to
// warm the table's pages), and checks each long-lived connection's answer.
func (b *dashboard) warmUp() error {
	fmt.Println("warm-up: exact query, rollup merge in PostgreSQL, proxy")
	var err error
	if b.exact, _, err = benchproxy.Timed(b.ctx, b.direct, exactSQL); err != nil {
		return fmt.Errorf("exact: %w", err)
	}
	ans, _, err := benchproxy.Timed(b.ctx, b.direct, hllSQL)
	if err == nil {
		err = b.check("hll-direct", ans, false, nil)
	}
	if err != nil {
		return err
	}
	if _, err := b.ask("proxy-warm", b.warm.Conn)(); err != nil {
		return err
	}
	_, err = b.ask("proxy-uncached", b.uncached.Conn)()
	return err
}

// check checks an answer against the exact one, and whether its NOTICEs
// say it came from the rollup, as they must through the proxy.
func (b *dashboard) check(kind string, ans map[string]float64, fromRollup bool, notices []string) error {
	if err := compare(kind, ans, b.exact); err != nil {
		return err
	}
	if fromRollup != benchproxy.FromRollup(notices, rollupName) {
		return fmt.Errorf("%s: notices %q", kind, notices)
	}
	return nil
}

// ask is the kind that asks the query through the proxy on c.
func (b *dashboard) ask(kind string, c *benchproxy.Conn) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		ans, notices, d, err := c.Ask(b.ctx, exactSQL)
		if err == nil {
			err = b.check(kind, ans, true, notices)
		}
		return d, err
	}
}

// cold asks the query on a new connection through a proxy started for it.
func (b *dashboard) cold() (time.Duration, error) {
	s, err := benchproxy.Open(b.ctx, b.o.proxy, b.dsn, b.o.cacheBytes, false)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	ans, notices, d, err := s.Conn.Ask(b.ctx, exactSQL)
	if err == nil {
		err = b.check("proxy-cold", ans, true, notices)
	}
	return d, err
}

// kinds are the ways the query is timed, in the order interleave knows
// them by: proxy-cold, proxy-warm, hll-direct, proxy-uncached, exact and,
// with a month level, hll-level.
func (b *dashboard) kinds() ([]timedKind, error) {
	direct := func(sql string) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			_, d, err := benchproxy.Timed(b.ctx, b.direct, sql)
			return d, err
		}
	}
	kinds := []timedKind{
		{"proxy-cold", b.cold},
		{"proxy-warm", b.ask("proxy-warm", b.warm.Conn)},
		{"hll-direct", direct(hllSQL)},
		{"proxy-uncached", b.ask("proxy-uncached", b.uncached.Conn)},
		{"exact", direct(exactSQL)},
	}
	if strings.Contains(b.o.levels, "month") {
		// A reference, not a target: hll_union_agg over the same
		// pre-merged month sketches the proxy reads.
		levelSQL := strings.Replace(hllSQL, "FROM "+rollupName+"\n", "FROM "+rollupName+"_month\n", 1)
		if ans, _, err := benchproxy.Timed(b.ctx, b.direct, levelSQL); err != nil {
			return nil, fmt.Errorf("hll-level: %w", err)
		} else if err := compare("hll-level", ans, b.exact); err != nil {
			return nil, err
		}
		kinds = append(kinds, timedKind{"hll-level", direct(levelSQL)})
	}
	return kinds, nil
}

// printDashboard prints p50 and p99 of each kind and the ratios the
// targets are about.
func printDashboard(kinds []timedKind, times map[string][]time.Duration) {
	fmt.Printf("\n%-14s %5s %12s %12s\n", "kind", "runs", "p50", "p99")
	p := map[string][2]time.Duration{}
	for _, k := range kinds {
		t := times[k.name]
		p[k.name] = [2]time.Duration{benchkit.Percentile(t, 50), benchkit.Percentile(t, 99)}
		fmt.Printf("%-14s %5d %12s %12s\n", k.name, len(t), benchkit.Ms(p[k.name][0]), benchkit.Ms(p[k.name][1]))
	}
	ratio := func(a, b string, i int) float64 { return p[a][i].Seconds() / p[b][i].Seconds() }
	fmt.Println()
	for _, r := range []target{{"exact", "proxy-cold", 200}, {"hll-direct", "proxy-cold", 2}, {"exact", "proxy-uncached", 200},
		{"hll-direct", "proxy-uncached", 2}, {"hll-direct", "proxy-warm", 10}, {"exact", "proxy-warm", 0}} {
		fmt.Printf("%s / %s: p50 %.3gx, p99 %.3gx%s\n", r.slow, r.fast, ratio(r.slow, r.fast, 0), ratio(r.slow, r.fast, 1),
			r.note(ratio(r.slow, r.fast, 0), " at p50"))
	}
}

// profile writes a CPU profile of the warm proxy while it answers the
// query over and over for 20 s.
func profile(ctx context.Context, dir string, warm *benchproxy.Session) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if warm.Proxy.PprofAddr == "" {
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
			if _, _, err := benchproxy.Timed(ctx, warm.Conn.PgConn, exactSQL); err != nil {
				loopErr = err
				return
			}
			n++
		}
	}()
	err := saveProfile(warm.Proxy.PprofAddr, dir+"/proxy-cpu.pprof")
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

// saveProfile writes a 20-second CPU profile from the profiler at addr to
// path.
func saveProfile(addr, path string) error {
	resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=20")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	f.Close()
	return err
}
