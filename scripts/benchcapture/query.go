package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// The query part: the package comment says what it measures.

type queryResult struct {
	first, repeat map[int][]time.Duration
	exact         []time.Duration
	cachedRepeat  map[int]int // repeats whose rollup rows came from the cache
	cachedFirst   map[int]int
	rollupRows    int64
	size          string
}

var changedRE = regexp.MustCompile(`; (\d+) changed bucket\(s\) since the last refresh`)

// eventsRollup makes the events table of --rows rows (unless it has as
// many) and its daily rollup, with its capture triggers in place.
func eventsRollup(ctx context.Context, db *pgx.Conn, dsn string, o options) error {
	spec := benchkit.Events("events", o.rows, o.days, o.users)
	if !benchkit.HasRows(ctx, db, "events", o.rows) {
		if _, err := benchkit.Generate(spec, func() error {
			return benchkit.Exec(ctx, db, "SELECT pgsketch.drop_rollup('"+rollupName+"', if_exists => true); DROP TABLE IF EXISTS events; "+
				spec.CreateSQL()+"; CREATE INDEX events_created_at ON events (created_at)", "VACUUM ANALYZE events")
		}); err != nil {
			return err
		}
	}
	if _, err := db.Exec(ctx, "SELECT pgsketch.drop_rollup('"+rollupName+"', if_exists => true)"); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, o.proxy, "rollup", "create", rollupName, "--dsn", dsn, "--table", "public.events",
		"--time", "created_at", "--grain", "day", "--dims", "country,device", "--distinct", "user_id", "--levels", "none")
	out, err := cmd.CombinedOutput()
	fmt.Print(string(out))
	if err != nil {
		return fmt.Errorf("rollup create: %w", err)
	}
	if _, err := db.Exec(ctx, "VACUUM ANALYZE "+rollupName); err != nil {
		return err
	}
	var ntrig int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'events'::regclass AND tgname LIKE 'pgsketch\\_%' AND tgenabled = 'A'").Scan(&ntrig); err != nil {
		return err
	}
	if ntrig != 4 {
		return fmt.Errorf("events has %d capture triggers, want 4", ntrig)
	}
	return nil
}

// querier holds the query part's connections and the exact answer.
type querier struct {
	ctx    context.Context
	db     *pgx.Conn
	dsn    string
	proxy  *benchproxy.Proxy
	direct *pgconn.PgConn
	exact  map[string]float64
	r      *queryResult
}

func queryCost(ctx context.Context, db *pgx.Conn, dsn string, o options) (*queryResult, error) {
	if err := eventsRollup(ctx, db, dsn, o); err != nil {
		return nil, err
	}
	r := &queryResult{first: map[int][]time.Duration{}, repeat: map[int][]time.Duration{},
		cachedRepeat: map[int]int{}, cachedFirst: map[int]int{}}
	_ = db.QueryRow(ctx, "SELECT pg_size_pretty(pg_total_relation_size('events')), (SELECT count(*) FROM "+rollupName+")").Scan(&r.size, &r.rollupRows)
	fmt.Printf("events: %d rows, %s; %s: %d rows\n", o.rows, r.size, rollupName, r.rollupRows)

	p, err := benchproxy.Start(ctx, o.proxy, dsn, o.cacheBytes, false)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	direct, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer direct.Close(context.Background())
	q := &querier{ctx: ctx, db: db, dsn: dsn, proxy: p, direct: direct, r: r}
	if err := q.warmUp(); err != nil {
		return nil, err
	}
	fmt.Printf("%d rounds; before each mode a refresh, then the UPDATEs (not timed)\n", o.rounds)
	for i := range o.rounds {
		if err := q.round(i); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return r, nil
}

// warmUp computes the exact answer and asks the proxy once.
func (q *querier) warmUp() error {
	fmt.Println("warm-up: the exact query, the proxy once")
	var err error
	if q.exact, _, err = benchproxy.Timed(q.ctx, q.direct, exactSQL); err != nil {
		return fmt.Errorf("exact: %w", err)
	}
	c, err := benchproxy.Connect(q.ctx, q.proxy.URL(q.dsn))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, _, err := q.ask(c, 0); err != nil {
		return fmt.Errorf("warm-up through the proxy: %w", err)
	}
	return nil
}

// ask runs the query through the proxy on c and checks the answer and
// that the NOTICE counts the changed buckets expected; it reports whether
// the rollup rows came from the proxy's cache.
func (q *querier) ask(c *benchproxy.Conn, dirty int) (time.Duration, bool, error) {
	ans, notices, d, err := c.Ask(q.ctx, exactSQL)
	if err != nil {
		return d, false, err
	}
	if err := benchproxy.Compare(ans, q.exact); err != nil {
		return d, false, err
	}
	if !benchproxy.FromRollup(notices, rollupName) {
		return d, false, fmt.Errorf("not answered from the rollup: notices %q", notices)
	}
	n := 0
	if m := changedRE.FindStringSubmatch(notices[0]); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n != dirty {
		return d, false, fmt.Errorf("%d changed bucket(s) in the NOTICE, want %d: %q", n, dirty, notices[0])
	}
	return d, strings.Contains(notices[0], "from the proxy's cache"), nil
}

// state refreshes the rollup (draining the log) and makes the first n
// dirty days dirty.
func (q *querier) state(n int) error {
	if _, err := refresh.Refresh(q.ctx, pgsession.Conn{C: q.db.PgConn()}, rollupName,
		refresh.Options{Streams: 2, Dial: pgsession.Dial(q.dsn)}); err != nil {
		return err
	}
	for _, day := range dirtyDays[:n] {
		tag, err := q.db.Exec(q.ctx, `UPDATE events SET amount = amount
			WHERE created_at >= $1::timestamptz AND created_at < $1::timestamptz + interval '1 day' AND user_id % 1000 = 0`, day+" 00:00:00+00")
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("the UPDATE of %s changed no row", day)
		}
	}
	return nil
}

// mode times the query after a write making n days dirty, then again.
func (q *querier) mode(n int) (time.Duration, time.Duration, error) {
	// A new connection, warmed by one query before the write: the timed
	// queries do not pay for a new server process's caches.
	c, err := benchproxy.Connect(q.ctx, q.proxy.URL(q.dsn))
	if err != nil {
		return 0, 0, err
	}
	defer c.Close(context.Background())
	if _, _, err := benchproxy.Timed(q.ctx, c.PgConn, exactSQL); err != nil {
		return 0, 0, err
	}
	if err := q.state(n); err != nil {
		return 0, 0, err
	}
	d1, cached1, err := q.ask(c, n)
	if err != nil {
		return 0, 0, fmt.Errorf("%d dirty, first: %w", n, err)
	}
	d2, cached2, err := q.ask(c, n)
	if err != nil {
		return 0, 0, fmt.Errorf("%d dirty, repeat: %w", n, err)
	}
	if cached1 {
		q.r.cachedFirst[n]++
	}
	if cached2 {
		q.r.cachedRepeat[n]++
	}
	return d1, d2, nil
}

// round runs round i: each mode and the exact query, in an order that
// rotates from round to round.
func (q *querier) round(i int) error {
	kinds := []int{0, 1, 5, -1} // the modes; -1: exact
	var line strings.Builder
	fmt.Fprintf(&line, "round %d", i+1)
	for _, j := range benchkit.Rotation(i, len(kinds)) {
		k := kinds[j]
		if k < 0 {
			_, d, err := benchproxy.Timed(q.ctx, q.direct, exactSQL)
			if err != nil {
				return fmt.Errorf("round %d, exact: %w", i+1, err)
			}
			q.r.exact = append(q.r.exact, d)
			fmt.Fprintf(&line, "  exact %s", benchkit.Ms(d))
			continue
		}
		d1, d2, err := q.mode(k)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		q.r.first[k] = append(q.r.first[k], d1)
		q.r.repeat[k] = append(q.r.repeat[k], d2)
		fmt.Fprintf(&line, "  dirty=%d %s / %s", k, benchkit.Ms(d1), benchkit.Ms(d2))
	}
	fmt.Println(line.String())
	return nil
}

func (r *queryResult) print(o options) {
	cache := "its default --cache-bytes (256 MiB)"
	if o.cacheBytes >= 0 {
		cache = fmt.Sprintf("--cache-bytes %d", o.cacheBytes)
	}
	fmt.Printf("query cost: one month, distinct users by country; %d events (%s), %s with %d rows; proxy with %s;\n"+
		"median of %d rounds, caches warm; after write = first query after the refresh and UPDATEs, repeat = the same again\n",
		o.rows, r.size, rollupName, r.rollupRows, cache, o.rounds)
	fmt.Printf("%-14s %12s %8s %10s %12s %8s %10s  %s\n", "changed days", "after write", "÷ clean", "exact ÷", "repeat", "÷ clean", "exact ÷",
		"rollup rows from the cache (after write, repeat)")
	c1, c2 := benchkit.Median(r.first[0]), benchkit.Median(r.repeat[0])
	ex := benchkit.Median(r.exact)
	for _, k := range modes {
		a, b := benchkit.Median(r.first[k]), benchkit.Median(r.repeat[k])
		fmt.Printf("%-14d %12s %8.2f %9.0fx %12s %8.2f %9.0fx  %d/%d, %d/%d\n", k, benchkit.Ms(a), a.Seconds()/c1.Seconds(), ex.Seconds()/a.Seconds(),
			benchkit.Ms(b), b.Seconds()/c2.Seconds(), ex.Seconds()/b.Seconds(),
			r.cachedFirst[k], len(r.first[k]), r.cachedRepeat[k], len(r.repeat[k]))
	}
	fmt.Printf("%-14s %12s\n", "exact (direct)", benchkit.Ms(ex))
	ratio := benchkit.Median(r.first[1]).Seconds() / c1.Seconds()
	fmt.Printf("goal: 1 changed day <= 2x the clean answer: after write %.2fx: %s", ratio, benchkit.Met(ratio <= 2))
	ratio2 := benchkit.Median(r.repeat[1]).Seconds() / c2.Seconds()
	fmt.Printf("; repeat %.2fx: %s\n", ratio2, benchkit.Met(ratio2 <= 2))
}
