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
	first, repeat map[mode][]time.Duration
	// ingest are an inserted mode's queries each after one more row
	// inserted into its first changed day, and ingestCached how many of
	// them read only the rows inserted since the cached read.
	ingest       map[mode][]time.Duration
	ingestCached map[mode]int
	exact        []time.Duration
	cachedRepeat map[mode]int // repeats whose rollup rows came from the cache
	cachedFirst  map[mode]int
	rollupRows   int64
	size         string
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
	// perDay is 1 % of a day's rows, what an inserted day gains; lastID the
	// table's last id before any was inserted.
	perDay, lastID int64
}

func queryCost(ctx context.Context, db *pgx.Conn, dsn string, o options) (*queryResult, error) {
	if err := eventsRollup(ctx, db, dsn, o); err != nil {
		return nil, err
	}
	r := &queryResult{first: map[mode][]time.Duration{}, repeat: map[mode][]time.Duration{},
		ingest: map[mode][]time.Duration{}, ingestCached: map[mode]int{},
		cachedRepeat: map[mode]int{}, cachedFirst: map[mode]int{}}
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
	fmt.Printf("%d rounds; before each mode a refresh, then the INSERTs or UPDATEs (not timed)\n", o.rounds)
	q.perDay = o.rows / int64(o.days) / 100
	if err := db.QueryRow(ctx, `SELECT max(id) FROM events`).Scan(&q.lastID); err != nil {
		return nil, err
	}
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
	if _, _, err := q.ask(c, 0, q.exact); err != nil {
		return fmt.Errorf("warm-up through the proxy: %w", err)
	}
	return nil
}

// ask runs the query through the proxy on c and checks the answer and
// that the NOTICE counts the changed buckets expected; it reports whether
// the rollup rows came from the proxy's cache.
func (q *querier) ask(c *benchproxy.Conn, dirty int, exact map[string]float64) (time.Duration, bool, error) {
	a, err := q.send(c)
	if err != nil {
		return a.d, false, err
	}
	return a.d, a.cached, q.check(a, dirty, exact)
}

// asked is one answer through the proxy.
type asked struct {
	ans     map[string]float64
	notices []string
	d       time.Duration
	cached  bool // the rollup rows came from the proxy's cache
}

// send runs the query through the proxy on c.
func (q *querier) send(c *benchproxy.Conn) (asked, error) {
	ans, notices, d, err := c.Ask(q.ctx, exactSQL)
	a := asked{ans: ans, notices: notices, d: d}
	if err == nil && len(notices) > 0 {
		a.cached = strings.Contains(notices[0], "from the proxy's cache")
	}
	return a, err
}

// check checks answer a against exact, and that its NOTICE counts the
// changed buckets expected.
func (q *querier) check(a asked, dirty int, exact map[string]float64) error {
	if err := benchproxy.Compare(a.ans, exact); err != nil {
		return err
	}
	if !benchproxy.FromRollup(a.notices, rollupName) {
		return fmt.Errorf("not answered from the rollup: notices %q", a.notices)
	}
	n := 0
	if m := changedRE.FindStringSubmatch(a.notices[0]); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n != dirty {
		return fmt.Errorf("%d changed bucket(s) in the NOTICE, want %d: %q", n, dirty, a.notices[0])
	}
	return nil
}

// state refreshes the rollup (draining the log and the inserted rows) and
// changes the first m.days dirty days: an INSERT of 1 % of a day's rows
// each (new ids, users drawn from the day's own and new ones), or an UPDATE
// of a few rows' amount.
func (q *querier) state(m mode) error {
	if _, err := refresh.Refresh(q.ctx, pgsession.Conn{C: q.db.PgConn()}, rollupName,
		refresh.Options{Streams: 2, Dial: pgsession.Dial(q.dsn)}); err != nil {
		return err
	}
	for _, day := range dirtyDays[:m.days] {
		var tag pgconn.CommandTag
		var err error
		if m.insert {
			tag, err = q.db.Exec(q.ctx, `INSERT INTO events (id, created_at, user_id, country, device, amount)
				SELECT (SELECT max(id) FROM events) + g, $1::timestamptz + g * (interval '1 day' / ($2::int + 1)),
				       CASE WHEN g % 10 = 0 THEN 900000000 + g ELSE g * 7919 % 1000000 END,
				       (ARRAY['DE','FR','US','BR','JP'])[1 + g % 5], 'web', 1
				  FROM generate_series(1, $2::int) g`, day+" 00:00:00+00", strconv.FormatInt(max(q.perDay, 1), 10))
		} else {
			tag, err = q.db.Exec(q.ctx, `UPDATE events SET amount = amount
				WHERE created_at >= $1::timestamptz AND created_at < $1::timestamptz + interval '1 day' AND user_id % 1000 = 0`, day+" 00:00:00+00")
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("the write to %s changed no row", day)
		}
	}
	return nil
}

// mode times the query after the writes of m, then again.
func (q *querier) mode(m mode) (time.Duration, time.Duration, error) {
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
	if err := q.state(m); err != nil {
		return 0, 0, err
	}
	first, err := q.send(c)
	if err != nil {
		return 0, 0, fmt.Errorf("%s, first: %w", m, err)
	}
	repeat, err := q.send(c)
	if err != nil {
		return 0, 0, fmt.Errorf("%s, repeat: %w", m, err)
	}
	var ingest []asked
	if m.insert {
		if ingest, err = q.ingest(c); err != nil {
			return 0, 0, fmt.Errorf("%s, ingest: %w", m, err)
		}
	}
	logged, exact := m.days, q.exact
	if m.insert {
		logged = 0 // the inserted rows are no changed bucket
		// The answer with the inserted rows, after the timed queries (its
		// scan of the table would leave them cold caches), and the table
		// as it was again (the next refresh rebuilds the days the DELETE
		// logs).
		exact, _, err = benchproxy.Timed(q.ctx, q.direct, exactSQL)
		if _, derr := q.db.Exec(q.ctx, `DELETE FROM events WHERE id > $1::bigint`, strconv.FormatInt(q.lastID, 10)); derr != nil {
			return 0, 0, fmt.Errorf("%s: removing the inserted rows: %w", m, derr)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s, exact: %w", m, err)
		}
	}
	if err := q.check(first, logged, exact); err != nil {
		return 0, 0, fmt.Errorf("%s, first: %w", m, err)
	}
	if err := q.check(repeat, logged, exact); err != nil {
		return 0, 0, fmt.Errorf("%s, repeat: %w", m, err)
	}
	for i, a := range ingest {
		if err := q.check(a, logged, exact); err != nil {
			return 0, 0, fmt.Errorf("%s, ingest %d: %w", m, i+1, err)
		}
		q.r.ingest[m] = append(q.r.ingest[m], a.d)
		if strings.Contains(a.notices[0], cachedInserts) {
			q.r.ingestCached[m]++
		}
	}
	d1, cached1, d2, cached2 := first.d, first.cached, repeat.d, repeat.cached
	if cached1 {
		q.r.cachedFirst[m]++
	}
	if cached2 {
		q.r.cachedRepeat[m]++
	}
	return d1, d2, nil
}

// ingestQueries is how many queries of an inserted mode are timed under
// ingest, each after one more row inserted into the changed day.
const ingestQueries = 3

// cachedInserts is what the NOTICE says when only the rows inserted since
// the proxy's cached read were read.
const cachedInserts = "rollup rows from the proxy's cache, and the inserted rows of earlier reads"

// ingest times the query on c after each of ingestQueries one-row INSERTs
// into the first changed day (not timed; ids after lastID, which the
// mode's DELETE removes), as under continuous ingest.
func (q *querier) ingest(c *benchproxy.Conn) ([]asked, error) {
	var out []asked
	for range ingestQueries {
		if _, err := q.db.Exec(q.ctx, `INSERT INTO events (id, created_at, user_id, country, device, amount)
			SELECT (SELECT max(id) FROM events) + 1, $1::timestamptz + interval '12 hours', 950000000 + (SELECT max(id) FROM events), 'DE', 'web', 1`,
			dirtyDays[0]+" 00:00:00+00"); err != nil {
			return nil, err
		}
		a, err := q.send(c)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// round runs round i: each mode and the exact query, in an order that
// rotates from round to round.
func (q *querier) round(i int) error {
	var line strings.Builder
	fmt.Fprintf(&line, "round %d", i+1)
	for _, j := range benchkit.Rotation(i, len(modes)+1) {
		if j == len(modes) {
			_, d, err := benchproxy.Timed(q.ctx, q.direct, exactSQL)
			if err != nil {
				return fmt.Errorf("round %d, exact: %w", i+1, err)
			}
			q.r.exact = append(q.r.exact, d)
			fmt.Fprintf(&line, "  exact %s", benchkit.Ms(d))
			continue
		}
		m := modes[j]
		d1, d2, err := q.mode(m)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		q.r.first[m] = append(q.r.first[m], d1)
		q.r.repeat[m] = append(q.r.repeat[m], d2)
		fmt.Fprintf(&line, "  %s %s / %s", m, benchkit.Ms(d1), benchkit.Ms(d2))
		if in := q.r.ingest[m]; m.insert && len(in) >= ingestQueries {
			fmt.Fprintf(&line, " / ingest %s", benchkit.Ms(benchkit.Median(in[len(in)-ingestQueries:])))
		}
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
		"median of %d rounds, caches warm; after write = first query after the refresh and the writes, repeat = the same again\n",
		o.rows, r.size, rollupName, r.rollupRows, cache, o.rounds)
	fmt.Printf("%-14s %12s %8s %10s %12s %8s %10s  %s\n", "changed days", "after write", "÷ clean", "exact ÷", "repeat", "÷ clean", "exact ÷",
		"rollup rows from the cache (after write, repeat)")
	clean := modes[0]
	c1, c2 := benchkit.Median(r.first[clean]), benchkit.Median(r.repeat[clean])
	ex := benchkit.Median(r.exact)
	for _, k := range modes {
		a, b := benchkit.Median(r.first[k]), benchkit.Median(r.repeat[k])
		fmt.Printf("%-14s %12s %8.2f %9.0fx %12s %8.2f %9.0fx  %d/%d, %d/%d\n", k, benchkit.Ms(a), a.Seconds()/c1.Seconds(), ex.Seconds()/a.Seconds(),
			benchkit.Ms(b), b.Seconds()/c2.Seconds(), ex.Seconds()/b.Seconds(),
			r.cachedFirst[k], len(r.first[k]), r.cachedRepeat[k], len(r.repeat[k]))
	}
	fmt.Printf("%-14s %12s\n", "exact (direct)", benchkit.Ms(ex))
	for _, m := range modes[1:3] {
		ratio := benchkit.Median(r.first[m]).Seconds() / c1.Seconds()
		ratio2 := benchkit.Median(r.repeat[m]).Seconds() / c2.Seconds()
		fmt.Printf("goal: %s <= 1.5x the clean answer: after write %.2fx: %s; repeat %.2fx: %s\n", m,
			ratio, benchkit.Met(ratio <= 1.5), ratio2, benchkit.Met(ratio2 <= 1.5))
	}
	fmt.Printf("under ingest: %d queries a round per inserted mode, each after one more row inserted into its first changed day\n", ingestQueries)
	fmt.Printf("%-14s %12s %14s %15s  %s\n", "changed days", "ingest", "÷ clean cold", "÷ clean repeat", "inserted rows from the cache")
	for _, m := range modes[1:3] {
		d := benchkit.Median(r.ingest[m])
		fmt.Printf("%-14s %12s %14.2f %15.2f  %d/%d\n", m, benchkit.Ms(d), d.Seconds()/c1.Seconds(), d.Seconds()/c2.Seconds(),
			r.ingestCached[m], len(r.ingest[m]))
	}
	for _, m := range modes[1:3] {
		ratio := benchkit.Median(r.ingest[m]).Seconds() / c1.Seconds()
		fmt.Printf("goal: %s under ingest <= 1.5x the clean cold answer: %.2fx: %s\n", m, ratio, benchkit.Met(ratio <= 1.5))
	}
	ratio := benchkit.Median(r.first[modes[3]]).Seconds() / c1.Seconds()
	fmt.Printf("goal: 1 updated day <= 2x the clean answer: after write %.2fx: %s", ratio, benchkit.Met(ratio <= 2))
	ratio2 := benchkit.Median(r.repeat[modes[3]]).Seconds() / c2.Seconds()
	fmt.Printf("; repeat %.2fx: %s\n", ratio2, benchkit.Met(ratio2 <= 2))
}
