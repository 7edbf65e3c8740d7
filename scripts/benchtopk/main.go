// Command benchtopk measures top-k queries answered from a rollup's
// frequent-items summaries against PostgreSQL answering them exactly; see
// scripts/bench-topk.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

const rollup = "events_topk"

type options struct {
	rows, users int64
	days, runs  int
	exactRuns   int
	keep, proxy string
}

// query is one measured question.
type query struct {
	name, sql string
}

// modes, in the order each round runs them.
var modes = []string{"exact", "verified", "approx"}

var (
	exactRE  = regexp.MustCompile(`answered exactly: (\d+) candidate\(s\) .* counted in (\d+) round`)
	approxRE = regexp.MustCompile(`approximated from the frequent-items summaries`)
	boundsRE = regexp.MustCompile(` (-?\d+)\*? (\d+)\.\.(\d+)`)
)

func main() {
	var o options
	benchkit.EventFlags(&o.rows, &o.days, &o.users, 20_000_000, "events to generate")
	flag.IntVar(&o.runs, "runs", 9, "timed runs of each proxy mode, one per round")
	flag.IntVar(&o.exactRuns, "exact-runs", 3, "timed runs of each exact query, in the first rounds")
	benchkit.KeepFlag(&o.keep, " and reuse its events table")
	benchkit.ProxyFlag(&o.proxy)
	flag.Parse()
	benchkit.Run("bench-topk", o, run)
}

func run(ctx context.Context, o options) error {
	settings := benchkit.Settings()
	delete(settings, "checkpoint_timeout")
	settings["work_mem"] = "256MB"
	db, err := benchkit.Open(ctx, "", o.keep, settings)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, dsn := db.Conn, db.DSN
	if err := setup(ctx, conn, dsn, o); err != nil {
		return err
	}
	build, bytes, err := buildRollup(ctx, conn)
	if err != nil {
		return err
	}
	fmt.Printf("## Top-k from frequent-items summaries (`scripts/bench-topk.sh%s`)\n\n", flagLine())
	fmt.Printf("%d events over %d days, user_id = floor(%d · u³); rollup %s: daily, no dimensions, top-k summary of user_id (1024 counters): built in %s, %s. "+
		"Medians of the timed runs (min–max), PostgreSQL's buffers and the proxy's rollup-row cache warm, rounds interleaved.\n\n",
		o.rows, o.days, o.users, rollup, build.Round(100*time.Millisecond), mb(bytes))
	queries := []query{
		{"top 10, one month", `SELECT user_id, count(*) AS n FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{"top 10, one week", `SELECT user_id, count(*) AS n FROM events WHERE created_at >= '2026-02-02' AND created_at < '2026-02-09' GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
		{"top 10, all time", `SELECT user_id, count(*) AS n FROM events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10`},
	}
	threshold, err := thresholdFor(ctx, conn, queries[0].sql)
	if err != nil {
		return err
	}
	queries = append(queries, query{fmt.Sprintf("count ≥ %d, one month", threshold),
		fmt.Sprintf(`SELECT user_id, count(*) AS n FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY user_id HAVING count(*) >= %d ORDER BY n DESC, user_id`, threshold)})
	indexes := []struct{ what, cols string }{
		{"without an index on user_id (an index on created_at only)", ""},
		{"with a btree index on user_id", "user_id"},
		{"with a btree index on (user_id, created_at)", "user_id, created_at"},
	}
	for _, ix := range indexes {
		if _, err := conn.Exec(ctx, "DROP INDEX IF EXISTS events_topk_item"); err != nil {
			return err
		}
		if ix.cols != "" {
			t0 := time.Now()
			for _, sql := range []string{"CREATE INDEX events_topk_item ON events (" + ix.cols + ")", "VACUUM ANALYZE events"} {
				if _, err := conn.Exec(ctx, sql); err != nil {
					return err
				}
			}
			fmt.Fprintf(os.Stderr, "index on (%s) built in %s\n", ix.cols, time.Since(t0).Round(time.Second))
		}
		if err := measure(ctx, o, dsn, queries, ix.what); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, "DROP INDEX IF EXISTS events_topk_item")
	return err
}

// measure runs every query in every mode, round by round, checks the
// answers and prints a table.
func measure(ctx context.Context, o options, dsn string, queries []query, what string) error {
	p, err := benchproxy.Start(ctx, o.proxy, dsn, -1, false)
	if err != nil {
		return err
	}
	defer p.Stop()
	direct, err := benchproxy.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer direct.Close(ctx)
	verified, err := benchproxy.Connect(ctx, p.URL(dsn))
	if err != nil {
		return err
	}
	defer verified.Close(ctx)
	approx, err := benchproxy.Connect(ctx, p.URL(dsn))
	if err != nil {
		return err
	}
	defer approx.Close(ctx)
	if err := approx.Exec(ctx, "SET pgsketch.topk = approx").Close(); err != nil {
		return err
	}
	conns := map[string]*benchproxy.Conn{"exact": direct, "verified": verified, "approx": approx}
	times := map[string]map[string][]time.Duration{}
	exact := map[string][][]string{}
	notes := map[string]string{}
	for _, q := range queries {
		times[q.name] = map[string][]time.Duration{}
		rows, _, _, err := timed(ctx, direct, q.sql) // warm-up, and the answer
		if err != nil {
			return err
		}
		exact[q.name] = rows
	}
	for round := range o.runs {
		for _, q := range queries {
			for _, m := range modes {
				if m == "exact" && round >= o.exactRuns {
					continue
				}
				rows, notices, d, err := timed(ctx, conns[m], q.sql)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", q.name, m, err)
				}
				times[q.name][m] = append(times[q.name][m], d)
				note, err := check(ctx, direct, m, q, rows, exact[q.name], notices)
				if err != nil {
					return err
				}
				if note != "" {
					notes[q.name+"/"+m] = note
				}
			}
		}
		fmt.Fprintf(os.Stderr, "round %d done\n", round+1)
	}
	fmt.Printf("### %s\n\n", strings.ToUpper(what[:1])+what[1:])
	fmt.Println("| query | exact | verified | approx | exact ÷ verified | exact ÷ approx | verified path | approx |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---|---|")
	for _, q := range queries {
		t := times[q.name]
		fmt.Printf("| %s | %s | %s | %s | %.1f× | %.0f× | %s | %s |\n", q.name, benchkit.Spread(t["exact"]), benchkit.Spread(t["verified"]), benchkit.Spread(t["approx"]),
			benchkit.Median(t["exact"]).Seconds()/benchkit.Median(t["verified"]).Seconds(), benchkit.Median(t["exact"]).Seconds()/benchkit.Median(t["approx"]).Seconds(),
			notes[q.name+"/verified"], notes[q.name+"/approx"])
	}
	fmt.Println()
	return nil
}

// check verifies an answer: exact ones as the warm-up's, verified ones
// identical to PostgreSQL's and proven, approx ones as many rows with
// every true count inside the stated bounds; it returns a note.
func check(ctx context.Context, direct *benchproxy.Conn, mode string, q query, rows, exact [][]string, notices []string) (string, error) {
	switch mode {
	case "exact":
		if !slices.EqualFunc(rows, exact, slices.Equal) {
			return "", fmt.Errorf("%s: the exact answer changed", q.name)
		}
		return "", nil
	case "verified":
		if len(notices) != 1 || !exactRE.MatchString(notices[0]) {
			return "", fmt.Errorf("%s: not answered on the verified path: %q", q.name, notices)
		}
		if !slices.EqualFunc(rows, exact, slices.Equal) {
			return "", fmt.Errorf("%s: verified answer %v, PostgreSQL's %v", q.name, rows, exact)
		}
		m := exactRE.FindStringSubmatch(notices[0])
		return fmt.Sprintf("identical to PostgreSQL's, %s candidates, %s round", m[1], m[2]), nil
	}
	if len(notices) != 1 || !approxRE.MatchString(notices[0]) {
		return "", fmt.Errorf("%s: not answered from the summaries: %q", q.name, notices)
	}
	threshold := strings.Contains(q.sql, "HAVING")
	if !threshold && len(rows) != len(exact) {
		return "", fmt.Errorf("%s: approx answered %d rows, PostgreSQL %d", q.name, len(rows), len(exact))
	}
	truth := map[string]bool{}
	for _, r := range exact {
		truth[r[0]] = true
	}
	hits := 0
	for _, r := range rows {
		if truth[r[0]] {
			hits++
		}
	}
	named := map[string]bool{}
	for _, b := range boundsRE.FindAllStringSubmatch(notices[0], -1) {
		named[b[1]] = true
	}
	for _, r := range exact {
		if threshold && !named[r[0]] {
			return "", fmt.Errorf("%s: user %s reaches the threshold, but approx neither answers nor names it: %q", q.name, r[0], notices[0])
		}
	}
	where := ""
	if i := strings.Index(q.sql, "WHERE "); i >= 0 {
		where = q.sql[i+6 : strings.Index(q.sql, " GROUP BY")]
	}
	checked := 0
	for _, b := range boundsRE.FindAllStringSubmatch(notices[0], -1) {
		sql := "SELECT count(*) FROM events WHERE user_id = " + b[1]
		if where != "" {
			sql += " AND " + where
		}
		res, err := direct.Exec(ctx, sql).ReadAll()
		if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
			return "", fmt.Errorf("count of user %s: %v", b[1], err)
		}
		n, _ := strconv.ParseInt(string(res[0].Rows[0][0]), 10, 64)
		lo, _ := strconv.ParseInt(b[2], 10, 64)
		hi, _ := strconv.ParseInt(b[3], 10, 64)
		if n < lo || n > hi {
			return "", fmt.Errorf("%s: user %s counts %d, outside the stated %d..%d", q.name, b[1], n, lo, hi)
		}
		checked++
	}
	if checked < len(rows) && len(rows) <= 20 {
		return "", fmt.Errorf("%s: %d rows, bounds stated for %d", q.name, len(rows), checked)
	}
	if threshold {
		return fmt.Sprintf("%d rows, all right (PostgreSQL: %d), %d more named as uncertain; all %d true counts inside their bounds",
			len(rows), len(exact), checked-len(rows), checked), nil
	}
	return fmt.Sprintf("precision %d/%d, all %d true counts inside their bounds", hits, len(rows), checked), nil
}

// timed runs sql as one simple Query: its rows as text, its notices, and
// how long it took.
func timed(ctx context.Context, c *benchproxy.Conn, sql string) ([][]string, []string, time.Duration, error) {
	c.ResetNotices()
	t0 := time.Now()
	res, err := c.Exec(ctx, sql).ReadAll()
	d := time.Since(t0)
	if err != nil {
		return nil, nil, d, err
	}
	var rows [][]string
	for _, r := range res[0].Rows {
		var row []string
		for _, v := range r {
			row = append(row, string(v))
		}
		rows = append(rows, row)
	}
	return rows, slices.Clone(c.Notices()), d, nil
}

// thresholdFor is the 10th largest count of the query's range rounded
// down to a multiple of 100: about 10 users reach it. (A threshold is
// proven only above the summaries' error, about N/1025 for N rows: a lower
// one is counted exactly.)
func thresholdFor(ctx context.Context, conn *pgx.Conn, top10 string) (int64, error) {
	sql := strings.Replace(strings.Replace(top10, "LIMIT 10", "LIMIT 1 OFFSET 9", 1), "SELECT user_id, count(*) AS n", "SELECT count(*) AS n", 1)
	var t int64
	err := conn.QueryRow(ctx, sql).Scan(&t)
	return t / 100 * 100, err
}

func setup(ctx context.Context, conn *pgx.Conn, dsn string, o options) error {
	if err := benchkit.Prepare(ctx, dsn); err != nil {
		return err
	}
	spec := benchkit.Events("events", o.rows, o.days, o.users)
	if !benchkit.Marked(ctx, conn, spec) {
		fmt.Fprintf(os.Stderr, "generating %d events...\n", o.rows)
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS events CASCADE; "+spec.CreateSQL()+benchkit.MarkSQL(spec)); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "CREATE INDEX IF NOT EXISTS events_created_at ON events (created_at)"); err != nil {
		return err
	}
	// Any other index (an earlier run's, another script's) would change
	// what "without an index on user_id" measures.
	names, err := benchkit.Strings(ctx, conn, `SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'events'
		AND indexname NOT IN ('events_pkey', 'events_created_at')`)
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "dropping index %s\n", n)
		if _, err := conn.Exec(ctx, "DROP INDEX "+pgx.Identifier{n}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// buildRollup (re)creates the top-k rollup and builds it.
func buildRollup(ctx context.Context, conn *pgx.Conn) (time.Duration, int64, error) {
	if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup($1, if_exists => true)", rollup); err != nil {
		return 0, 0, err
	}
	if _, err := conn.Exec(ctx, `SELECT pgsketch.create_rollup($1, 'events', 'created_at', grain => 'day', topk_columns => '{user_id}')`, rollup); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if _, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, rollup, refresh.Options{Streams: 4}); err != nil {
		return 0, 0, err
	}
	d := time.Since(t0)
	var bytes int64
	err := conn.QueryRow(ctx, "SELECT bytes FROM pgsketch.rollups WHERE name = $1", rollup).Scan(&bytes)
	return d, bytes, err
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// flagLine is the flags given, as the wrapper's arguments.
func flagLine() string {
	var parts []string
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "proxy" {
			parts = append(parts, " --"+f.Name+" "+f.Value.String())
		}
	})
	return strings.Join(parts, "")
}
