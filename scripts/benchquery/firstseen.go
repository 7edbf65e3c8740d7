package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// The first-seen benchmark (--first-seen): new users from the daily
// rollup's first-seen bookkeeping of user_id (pgsketch.add_first_seen,
// built here when missing): users by first-seen month, by first-seen day,
// and the new users of one month, through the proxy and exactly in
// PostgreSQL, interleaved, every answer checked equal to the exact one.
// Then, once, the same new users per month by the two sketch differences
// there are without bookkeeping, with their errors: HLL (the users up to
// the month's end less the users before it, from the daily sketches) and
// Theta A-NOT-B (the union of the month's sketches of a daily rollup of
// Theta sketches of user_id, lg k 12, built here when missing, less the
// union of the earlier ones, as sketch.ThetaANotB computes it; the proxy
// itself counts such a difference exactly when its error bound is over
// pgsketch.max_overlap_error, at most 100 %). Last, what the bookkeeping
// costs: its tables' size, its full build and its recompute from the last
// day (pgsketch.first_seen_update, each in a transaction rolled back), and
// a refresh of that day, which includes the recompute.

const thetaRollup = "events_theta"

// firstSeenQueries are the timed queries, by name.
var firstSeenQueries = []struct{ name, sql string }{
	{"by-month", `SELECT m, count(*) AS n FROM (SELECT user_id, date_trunc('month', min(created_at)) AS m FROM events GROUP BY user_id) t GROUP BY m`},
	{"by-day", `SELECT d, count(*) AS n FROM (SELECT user_id, min(created_at)::date AS d FROM events GROUP BY user_id) t GROUP BY d`},
	{"new-in-month", `SELECT count(*) AS n FROM (SELECT user_id FROM events GROUP BY user_id
 HAVING min(created_at) >= '` + from + `' AND min(created_at) < '` + to + `') t`},
}

// runFirstSeen runs the benchmark; the caller made the events table and
// the daily rollup.
func runFirstSeen(ctx context.Context, o options, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := firstSeenSetup(ctx, conn, dsn); err != nil {
		return err
	}
	s, err := benchproxy.Open(ctx, o.proxy, dsn, o.cacheBytes, false)
	if err != nil {
		return err
	}
	defer s.Close()
	direct := &benchproxy.Conn{PgConn: conn.PgConn()}
	var kinds []timedKind
	var rotating []int
	exactAt := map[string]int{}
	for _, q := range firstSeenQueries {
		exact, d, err := benchproxy.Timed(ctx, conn.PgConn(), q.sql)
		if err != nil {
			return fmt.Errorf("%s exact: %w", q.name, err)
		}
		fmt.Printf("%s exact: %d groups in %s\n", q.name, len(exact), d.Round(time.Millisecond))
		kinds = append(kinds, firstSeenKind(ctx, q.name+"/proxy", s.Conn, q.sql, exact),
			firstSeenKind(ctx, q.name+"/exact", direct, q.sql, exact))
		rotating = append(rotating, len(kinds)-2)
		exactAt[q.name] = len(kinds) - 1
	}
	// The exact queries take seconds each: one per round, in turn.
	all := map[string][]time.Duration{}
	for i, q := range firstSeenQueries {
		oo := o
		oo.runs = max(1, o.runs/len(firstSeenQueries))
		oo.exactRuns = max(1, o.exactRuns/len(firstSeenQueries))
		if i == 0 {
			oo.runs += o.runs % len(firstSeenQueries)
		}
		times, err := interleave(ctx, oo, kinds, rotating, exactAt[q.name])
		if err != nil {
			return err
		}
		for k, v := range times {
			all[k] = append(all[k], v...)
		}
	}
	fmt.Printf("\n%-20s %5s %12s %12s %12s\n", "kind", "runs", "min", "p50", "max")
	for _, k := range kinds {
		t := all[k.name]
		fmt.Printf("%-20s %5d %12s %12s %12s\n", k.name, len(t), benchkit.Ms(slices.Min(t)), benchkit.Ms(benchkit.Percentile(t, 50)), benchkit.Ms(slices.Max(t)))
	}
	fmt.Println()
	for _, q := range firstSeenQueries {
		x := benchkit.Percentile(all[q.name+"/exact"], 50).Seconds() / benchkit.Percentile(all[q.name+"/proxy"], 50).Seconds()
		fmt.Printf("%s: exact / proxy p50 %.4gx%s\n", q.name, x, target{goal: 100}.note(x, ""))
	}
	if err := sketchDifferences(ctx, conn); err != nil {
		return err
	}
	return bookkeepingCost(ctx, conn)
}

// firstSeenKind asks sql on c and checks the answer equal to exact and,
// through the proxy, that its NOTICE is the bookkeeping's.
func firstSeenKind(ctx context.Context, name string, c *benchproxy.Conn, sql string, exact map[string]float64) timedKind {
	proxied := strings.HasSuffix(name, "/proxy")
	return timedKind{name, func() (time.Duration, error) {
		ans, notices, d, err := c.Ask(ctx, sql)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		if len(ans) != len(exact) {
			return 0, fmt.Errorf("%s: %d groups, the exact answer has %d", name, len(ans), len(exact))
		}
		for k, v := range ans {
			if exact[k] != v {
				return 0, fmt.Errorf("%s: group %q: %v, exact %v", name, k, v, exact[k])
			}
		}
		if proxied && (len(notices) != 1 || !strings.Contains(notices[0], "first-seen bookkeeping")) {
			return 0, fmt.Errorf("%s: notices %q, want the first-seen bookkeeping's", name, notices)
		}
		return d, nil
	}}
}

// firstSeenSetup gives the daily rollup first-seen bookkeeping of user_id
// and builds the Theta rollup, unless they are there.
func firstSeenSetup(ctx context.Context, conn *pgx.Conn, dsn string) error {
	var has bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgsketch.rollup_first_seen WHERE rollup = $1 AND built_version IS NOT NULL)`,
		rollupName).Scan(&has); err != nil {
		return err
	}
	if !has {
		fmt.Println("adding first-seen bookkeeping of user_id to " + rollupName + " (a refresh builds it)...")
		if err := benchkit.Exec(ctx, conn, `SELECT pgsketch.drop_first_seen('`+rollupName+`')`,
			`SELECT pgsketch.add_first_seen('`+rollupName+`', 'user_id')`); err != nil {
			return err
		}
		t0 := time.Now()
		res, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, rollupName, refresh.Options{})
		if err != nil {
			return err
		}
		fmt.Printf("built in %s: %s\n", time.Since(t0).Round(time.Millisecond), res)
	}
	if !benchkit.Built(ctx, conn, thetaRollup) {
		fmt.Println("building " + thetaRollup + " (daily Theta sketches of user_id, lg k 12)...")
		t0 := time.Now()
		if err := benchkit.Exec(ctx, conn, `SELECT pgsketch.drop_rollup('`+thetaRollup+`', if_exists => true)`,
			`SELECT pgsketch.create_rollup('`+thetaRollup+`', 'events', 'created_at', grain => 'day', theta_columns => '{user_id}', theta_lgk => 12)`); err != nil {
			return err
		}
		res, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, thetaRollup,
			refresh.Options{Full: true, Streams: 2, Dial: pgsession.Dial(dsn)})
		if err != nil {
			return err
		}
		fmt.Printf("built in %s: %s\n", time.Since(t0).Round(time.Second), res)
	}
	_, err := conn.Exec(ctx, "VACUUM ANALYZE pgsketch.first_"+rollupName+", pgsketch.firstn_"+rollupName)
	return err
}

// sketchDifferences prints, per month, the new users exactly (the
// bookkeeping's answer) and by HLL and Theta differences, with their
// errors.
func sketchDifferences(ctx context.Context, conn *pgx.Conn) error {
	months, err := benchkit.Strings(ctx, conn, `SELECT to_char(m, 'YYYY-MM-DD') FROM generate_series(
		(SELECT date_trunc('month', min(created_at), 'UTC') FROM events), (SELECT max(created_at) FROM events), interval '1 month') m`)
	if err != nil {
		return err
	}
	fmt.Printf("\nnew users per month: exact (the bookkeeping's answer, equal), and by sketch differences\n")
	fmt.Printf("%-10s %10s %12s %9s %12s %9s %12s %10s\n", "month", "exact", "HLL diff", "error", "Theta A\\B", "error", "A\\B 95% hi", "all users")
	for _, m := range months {
		var exact, hll, before, upto float64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT user_id FROM events GROUP BY user_id
			HAVING min(created_at) >= $1::timestamptz AND min(created_at) < $1::timestamptz + interval '1 month') t`, m).Scan(&exact); err != nil {
			return err
		}
		if err := conn.QueryRow(ctx, `SELECT coalesce(hll_cardinality(hll_union_agg(distinct_user_id::hll) FILTER (WHERE bucket < $1::timestamptz)), 0),
			coalesce(hll_cardinality(hll_union_agg(distinct_user_id::hll) FILTER (WHERE bucket < $1::timestamptz + interval '1 month')), 0)
			FROM `+rollupName, m).Scan(&before, &upto); err != nil {
			return err
		}
		hll = upto - before
		theta, hi95, err := thetaNewUsers(ctx, conn, m)
		if err != nil {
			return fmt.Errorf("theta %s: %w", m, err)
		}
		fmt.Printf("%-10s %10.0f %12.0f %8.1f%% %12.0f %8.1f%% %12.0f %10.0f\n", m[:7], exact, hll, relErr(hll, exact), theta, relErr(theta, exact), hi95, upto)
	}
	return nil
}

// thetaNewUsers estimates the new users of the month starting at m as the
// Theta rollup's union of the month's sketches A-NOT-B the union of the
// earlier ones, with the upper bound of its 95 % interval.
func thetaNewUsers(ctx context.Context, conn *pgx.Conn, m string) (est, hi float64, err error) {
	union := func(cond string) (*sketch.CompactTheta, error) {
		rows, err := conn.Query(ctx, `SELECT theta_user_id FROM `+thetaRollup+` WHERE `+cond, m)
		if err != nil {
			return nil, err
		}
		sketches, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*sketch.CompactTheta, error) {
			var b []byte
			if err := r.Scan(&b); err != nil {
				return nil, err
			}
			c := new(sketch.CompactTheta)
			return c, c.UnmarshalBinary(b)
		})
		if err != nil {
			return nil, err
		}
		return sketch.ThetaUnion(12, sketches...)
	}
	a, err := union(`bucket >= $1::timestamptz AND bucket < $1::timestamptz + interval '1 month'`)
	if err != nil {
		return 0, 0, err
	}
	b, err := union(`bucket < $1::timestamptz`)
	if err != nil {
		return 0, 0, err
	}
	d, err := sketch.ThetaANotB(a, b)
	if err != nil {
		return 0, 0, err
	}
	return d.Estimate(), d.UpperBound(2), nil
}

func relErr(est, exact float64) float64 {
	if exact == 0 {
		return math.Inf(1)
	}
	return 100 * (est - exact) / exact
}

// bookkeepingCost prints the bookkeeping's size and the time of its full
// build, of its recompute from the last day and of a refresh of that day.
func bookkeepingCost(ctx context.Context, conn *pgx.Conn) error {
	var keys int64
	var first, counts, rollup, last, next string
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pgsketch.first_`+rollupName+`),
		pg_size_pretty(pg_total_relation_size('pgsketch.first_`+rollupName+`')), pg_size_pretty(pg_total_relation_size('pgsketch.firstn_`+rollupName+`')),
		pg_size_pretty(pg_total_relation_size('`+rollupName+`')), (SELECT max(bucket)::text FROM `+rollupName+`),
		(SELECT (max(bucket) + interval '1 day')::text FROM `+rollupName+`)`).Scan(&keys, &first, &counts, &rollup, &last, &next); err != nil {
		return err
	}
	fmt.Printf("\nbookkeeping: %d keys; pgsketch.first_%s %s, pgsketch.firstn_%s %s (the rollup table: %s)\n", keys, rollupName, first, rollupName, counts, rollup)
	timeIn := func(sql string, args ...any) (time.Duration, error) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback(context.Background())
		t0 := time.Now()
		_, err = tx.Exec(ctx, sql, args...)
		return time.Since(t0), err
	}
	var full, day, ref []time.Duration
	for range 3 {
		d, err := timeIn(`SELECT pgsketch.first_seen_update($1, NULL)`, rollupName)
		if err != nil {
			return err
		}
		full = append(full, d)
		if d, err = timeIn(`SELECT pgsketch.first_seen_update($1, $2::timestamptz)`, rollupName, last); err != nil {
			return err
		}
		day = append(day, d)
		t0 := time.Now()
		if _, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, rollupName, refresh.Options{From: last, To: next}); err != nil {
			return err
		}
		ref = append(ref, time.Since(t0))
	}
	fmt.Printf("full build (first_seen_update from nothing): %s median of 3\n", benchkit.Ms(benchkit.Median(full)))
	fmt.Printf("recompute from the last day %s: %s median of 3\n", last, benchkit.Ms(benchkit.Median(day)))
	fmt.Printf("refresh of that day (rollup refresh --from --to, the recompute included): %s median of 3\n", benchkit.Ms(benchkit.Median(ref)))
	return nil
}
