package main

// The matrix benchmark, run by --matrix: the rollup a user gets from
// pgsketch-proxy rollup create without tuning flags (a daily rollup by
// country and device, distinct user_id, count and sum of amount; its
// default levels), and distinct users over six ranges (a day, a week, a
// month, a quarter, all time, and 7 days from noon to noon, whose edges
// the proxy reads from the base table and no hll table answers) by three
// groupings (none: 1 group; country: 20; country and device: 60), each
// timed, interleaved, as:
//
//	exact        the COUNT(DISTINCT) query in PostgreSQL, each run on a
//	             new connection (--exact-runs runs): the query's time, and
//	             with the connection's (exact-new);
//	hll-daily    hll_cardinality(hll_union_agg(distinct_user_id::hll)) over
//	             the daily rollup table, on a long-lived connection, and on
//	             a new one per query (hll-daily-new, connection included);
//	hll-monthly  the same over a monthly table built by hand from the
//	             daily one (month, quarter and all time only): the best a
//	             postgresql-hll user could do; a reference, not a goal;
//	cold         through a running pgsketch-proxy without a cache
//	             (--cache-bytes 0), on a long-lived connection: every query
//	             reads and merges its rollup rows, as the first query of a
//	             range after a refresh does;
//	warm         through a running pgsketch-proxy with its default cache,
//	             the same query again on a long-lived connection;
//	new          the cached proxy, a new connection per query (connection
//	             included), as Superset or a scheduled report connects;
//	new-cold     the uncached proxy, a new connection per query.
//
// Each kind runs over two clients: simple (pgconn's simple Query, the
// protocol psql speaks) and pgx (pgx.Conn.Query: the extended protocol,
// each statement prepared once per connection). Every answer is checked
// against the exact one, and every proxy answer must carry its NOTICE.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/scripts/benchproxy"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

const monthlyHand = "events_monthly_by_hand"

type span struct {
	name, from, to string // from and to empty: all time
	monthly        bool   // whole months: the monthly table can answer
	// ragged: bounds inside days, so that the proxy reads base rows at
	// both edges; no hll table, which holds whole days, can answer it.
	ragged bool
}

var spans = []span{
	{"day", "2026-02-10", "2026-02-11", false, false},
	{"week", "2026-02-09", "2026-02-16", false, false},
	{"month", "2026-02-01", "2026-03-01", true, false},
	{"quarter", "2026-01-01", "2026-04-01", true, false},
	{"all time", "", "", true, false},
	{"7 days, ragged", "2026-03-24 12:00", "2026-03-31 12:00", false, true},
}

var groupings = []struct {
	name string
	keys []string
}{{"none", nil}, {"country", []string{"country"}}, {"country, device", []string{"country", "device"}}}

type mshape struct {
	span span
	gi   int
}

func (s mshape) name() string { return s.span.name + " by " + groupings[s.gi].name }

func (s mshape) sql(table, timeCol, count string) string {
	keys := groupings[s.gi].keys
	var b strings.Builder
	b.WriteString("SELECT ")
	for _, k := range keys {
		b.WriteString(k + ", ")
	}
	b.WriteString(count + " AS users FROM " + table)
	if s.span.from != "" {
		fmt.Fprintf(&b, " WHERE %s >= '%s' AND %s < '%s'", timeCol, s.span.from, timeCol, s.span.to)
	}
	if len(keys) > 0 {
		b.WriteString(" GROUP BY " + strings.Join(keys, ", "))
	}
	return b.String()
}

func (s mshape) exactSQL() string { return s.sql("events", "created_at", "count(DISTINCT user_id)") }
func (s mshape) hllSQL(table, timeCol string) string {
	return s.sql(table, timeCol, "hll_cardinality(hll_union_agg(distinct_user_id::hll))::bigint")
}

// mclient is one connection of one of the two clients.
type mclient interface {
	query(ctx context.Context, sql string) (map[string]float64, error)
	notices() []string
	close()
}

type simpleClient struct{ c *benchproxy.Conn }

func (s *simpleClient) query(ctx context.Context, sql string) (map[string]float64, error) {
	s.c.ResetNotices()
	ans, _, err := benchproxy.Timed(ctx, s.c.PgConn, sql)
	return ans, err
}
func (s *simpleClient) notices() []string { return s.c.Notices() }
func (s *simpleClient) close()            { s.c.Close(context.Background()) }

type pgxClient struct {
	c *pgx.Conn
	n *[]string
}

func (p *pgxClient) query(ctx context.Context, sql string) (map[string]float64, error) {
	*p.n = nil
	rows, err := p.c.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ans := map[string]float64{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		key := make([]string, len(vals)-1)
		for i, v := range vals[:len(vals)-1] {
			key[i] = "NULL"
			if v != nil {
				key[i] = fmt.Sprint(v)
			}
		}
		var n float64
		switch v := vals[len(vals)-1].(type) {
		case int64:
			n = float64(v)
		case float64:
			n = v
		default:
			return nil, fmt.Errorf("count of type %T", v)
		}
		ans[strings.Join(key, "|")] = n
	}
	return ans, rows.Err()
}
func (p *pgxClient) notices() []string { return *p.n }
func (p *pgxClient) close()            { p.c.Close(context.Background()) }

var clientNames = []string{"simple", "pgx"}

func dial(ctx context.Context, client, dsn string) (mclient, error) {
	if client == "simple" {
		c, err := benchproxy.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return &simpleClient{c}, nil
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	n := new([]string)
	cfg.OnNotice = func(_ *pgconn.PgConn, x *pgconn.Notice) { *n = append(*n, x.Message) }
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &pgxClient{c, n}, nil
}

// mkind is one way of answering a shape: on a long-lived connection per
// client (long) or on a new one per query (dsn).
type mkind struct {
	name   string
	proxy  bool
	newDSN string             // a new connection per query to this
	long   map[string]mclient // or these, per client
	table  string             // the table the baseline reads ("": the query itself)
	col    string
}

// matrix holds the kinds' connections and what the rounds found.
type matrix struct {
	ctx    context.Context
	o      options
	dsn    string
	shapes []mshape
	kinds  []*mkind
	times  map[string]map[string]map[string][]time.Duration // [client][shape][kind]
	exact  map[string]map[string]float64                    // by shape
}

func runMatrix(ctx context.Context, o options, dsn string) error {
	if err := setupMatrix(ctx, dsn, o); err != nil {
		return err
	}
	cached, err := benchproxy.Start(ctx, o.proxy, dsn, -1, false)
	if err != nil {
		return err
	}
	defer cached.Stop()
	uncached, err := benchproxy.Start(ctx, o.proxy, dsn, 0, false)
	if err != nil {
		return err
	}
	defer uncached.Stop()
	m := &matrix{ctx: ctx, o: o, dsn: dsn, times: map[string]map[string]map[string][]time.Duration{},
		exact: map[string]map[string]float64{}}
	for _, sp := range spans {
		for gi := range groupings {
			m.shapes = append(m.shapes, mshape{sp, gi})
		}
	}
	defer m.close()
	if err := m.openKinds(cached.URL(dsn), uncached.URL(dsn)); err != nil {
		return err
	}
	if err := m.warmUp(); err != nil {
		return err
	}
	if err := m.rounds(); err != nil {
		return err
	}
	printMatrix(m.times, m.shapes)
	return nil
}

// openKinds makes the kinds and opens the long-lived connections of those
// that have them, per client.
func (m *matrix) openKinds(cachedURL, uncachedURL string) error {
	m.kinds = []*mkind{
		{name: "cold", proxy: true}, {name: "warm", proxy: true}, {name: "new", proxy: true, newDSN: cachedURL},
		{name: "new-cold", proxy: true, newDSN: uncachedURL},
		{name: "hll-daily", table: rollupName, col: "bucket"}, {name: "hll-daily-new", table: rollupName, col: "bucket", newDSN: m.dsn},
		{name: "hll-monthly", table: monthlyHand, col: "month"}, {name: "hll-monthly-new", table: monthlyHand, col: "month", newDSN: m.dsn},
	}
	long := map[string]string{"cold": uncachedURL, "warm": cachedURL, "hll-daily": m.dsn, "hll-monthly": m.dsn}
	for _, k := range m.kinds {
		url, ok := long[k.name]
		if !ok {
			continue
		}
		k.long = map[string]mclient{}
		for _, c := range clientNames {
			x, err := dial(m.ctx, c, url)
			if err != nil {
				return err
			}
			k.long[c] = x
		}
	}
	return nil
}

func (m *matrix) close() {
	for _, k := range m.kinds {
		for _, c := range k.long {
			c.close()
		}
	}
}

func (m *matrix) record(client string, s mshape, kind string, d time.Duration) {
	if m.times[client] == nil {
		m.times[client] = map[string]map[string][]time.Duration{}
	}
	if m.times[client][s.name()] == nil {
		m.times[client][s.name()] = map[string][]time.Duration{}
	}
	m.times[client][s.name()][kind] = append(m.times[client][s.name()][kind], d)
}

// runExact answers shape s exactly on a new connection, keeping the
// answer to check the others by and, when rec, recording its time with
// and without the connection's.
func (m *matrix) runExact(s mshape, rec bool) error {
	t0 := time.Now()
	c, err := dial(m.ctx, "simple", m.dsn)
	if err != nil {
		return err
	}
	defer c.close()
	t1 := time.Now()
	ans, err := c.query(m.ctx, s.exactSQL())
	if err != nil {
		return fmt.Errorf("%s exact: %w", s.name(), err)
	}
	t2 := time.Now()
	m.exact[s.name()] = ans
	if rec {
		for _, cl := range clientNames {
			m.record(cl, s, "exact", t2.Sub(t1))
			m.record(cl, s, "exact-new", t2.Sub(t0))
		}
	}
	return nil
}

// once answers shape s one way over one client and checks the answer; it
// returns 0 for a shape the kind cannot answer.
func (m *matrix) once(k *mkind, client string, s mshape) (time.Duration, error) {
	sql := s.exactSQL()
	if k.table != "" {
		if k.table == monthlyHand && !s.span.monthly || s.span.ragged {
			return 0, nil
		}
		sql = s.hllSQL(k.table, k.col)
	}
	t0 := time.Now()
	c := k.long[client]
	if k.newDSN != "" {
		var err error
		if c, err = dial(m.ctx, client, k.newDSN); err != nil {
			return 0, err
		}
		defer c.close()
	}
	ans, err := c.query(m.ctx, sql)
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("%s, %s over %s: %w", s.name(), k.name, client, err)
	}
	if err := compare(k.name+" "+s.name(), ans, m.exact[s.name()]); err != nil {
		return 0, err
	}
	if n := c.notices(); k.proxy && !benchproxy.FromRollup(n, rollupName) {
		return 0, fmt.Errorf("%s, %s over %s: notices %q", s.name(), k.name, client, n)
	}
	return d, nil
}

func (m *matrix) warmUp() error {
	fmt.Println("warm-up: every shape exactly, then every kind once")
	for _, s := range m.shapes {
		if err := m.runExact(s, false); err != nil {
			return err
		}
		for _, k := range m.kinds {
			for _, cl := range clientNames {
				if _, err := m.once(k, cl, s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// rounds runs the timed rounds: every shape, kind and client, the orders
// rotating, and the exact query in --exact-runs of the rounds per shape.
func (m *matrix) rounds() error {
	o := m.o
	fmt.Printf("%d rounds over %d shapes, %d kinds, 2 clients; the exact query in %d of them\n", o.runs, len(m.shapes), len(m.kinds), o.exactRuns)
	every := max(1, o.runs/o.exactRuns)
	for i := range o.runs {
		t0 := time.Now()
		for si := range m.shapes {
			s := m.shapes[(si+i)%len(m.shapes)]
			if i%every == 0 && len(m.times["simple"][s.name()]["exact"]) < o.exactRuns {
				if err := m.runExact(s, true); err != nil {
					return err
				}
			}
			if err := m.shapeRound(i, si, s); err != nil {
				return err
			}
		}
		fmt.Printf("round %d of %d: %s\n", i+1, o.runs, time.Since(t0).Round(time.Second))
		if m.ctx.Err() != nil {
			return m.ctx.Err()
		}
	}
	return nil
}

// shapeRound runs shape s, the si-th of round i, every way.
func (m *matrix) shapeRound(i, si int, s mshape) error {
	for ki := range m.kinds {
		k := m.kinds[(ki+i+si)%len(m.kinds)]
		for ci := range clientNames {
			cl := clientNames[(ci+i+ki)%2]
			d, err := m.once(k, cl, s)
			if err != nil {
				return err
			}
			if d > 0 {
				m.record(cl, s, k.name, d)
			}
		}
	}
	return nil
}

func printMatrix(times map[string]map[string]map[string][]time.Duration, shapes []mshape) {
	med := func(t []time.Duration) time.Duration { return benchkit.Percentile(t, 50) }
	cell := func(t []time.Duration) string {
		if len(t) == 0 {
			return "—"
		}
		lo, hi := slices.Min(t), slices.Max(t)
		return fmt.Sprintf("%s (%s–%s)", short(med(t)), short(lo), short(hi))
	}
	for _, cl := range clientNames {
		fmt.Printf("\n%s client: medians (min–max) in ms; exact over the simple client, on a new connection each run\n\n", cl)
		fmt.Println("| shape | exact | hll-daily | hll-daily-new | hll-monthly | cold | warm | new | new-cold |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|")
		for _, s := range shapes {
			t := times[cl][s.name()]
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name(), short(med(t["exact"])), cell(t["hll-daily"]),
				cell(t["hll-daily-new"]), cell(t["hll-monthly"]), cell(t["cold"]), cell(t["warm"]), cell(t["new"]), cell(t["new-cold"]))
		}
		fmt.Printf("\n%s client: ratios of medians; * marks a goal not met (warm ≥ 5× hll-daily from a week up, ≥ 2× for a day; "+
			"cold ≥ 1× hll-daily, and ≥ 1× hll-monthly from a month up; new ≥ 1× hll-daily-new; the exact ratios and new-cold have none)\n\n", cl)
		fmt.Println("| shape | warm vs hll-daily | cold vs hll-daily | cold vs hll-monthly | new vs hll-daily-new | new-cold vs hll-daily-new | cold ÷ exact | new ÷ exact-new |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for _, s := range shapes {
			t := times[cl][s.name()]
			r := func(slow, fast string, goal float64) string {
				if len(t[slow]) == 0 || len(t[fast]) == 0 {
					return "—"
				}
				x := med(t[slow]).Seconds() / med(t[fast]).Seconds()
				mark := ""
				if goal > 0 && x < goal {
					mark = " *"
				}
				return fmt.Sprintf("%.3g×%s", x, mark)
			}
			warmGoal := 5.0
			if s.span.name == "day" {
				warmGoal = 2
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name(), r("hll-daily", "warm", warmGoal), r("hll-daily", "cold", 1),
				r("hll-monthly", "cold", 1), r("hll-daily-new", "new", 1), r("hll-daily-new", "new-cold", 0), r("exact", "cold", 0),
				r("exact-new", "new", 0))
		}
		if t := times[cl][monthByCountry]; len(t["warm"]) > 0 {
			w := med(t["warm"])
			mark := ""
			if w > 1500*time.Microsecond {
				mark = " *"
			}
			fmt.Printf("\nwarm, %s over %s: median %s ms (goal ≤ 1.5 ms)%s\n", monthByCountry, cl, short(w), mark)
		}
	}
}

// monthByCountry is the shape whose warm answer has a goal of its own.
const monthByCountry = "month by country"

func short(d time.Duration) string {
	ms := float64(d.Microseconds()) / 1000
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%.0f", ms)
	case ms >= 100:
		return fmt.Sprintf("%.0f", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.2f", ms)
}

// setupMatrix makes events_daily the rollup rollup create makes without
// tuning flags (the only rollup of events), measures what its default
// levels cost (storage; a one-day refresh against the same rollup
// without levels, interleaved), and builds the monthly table by hand.
func setupMatrix(ctx context.Context, dsn string, o options) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	cli := proxyCLI{ctx: ctx, bin: o.proxy, dsn: dsn}
	if err := defaultRollup(ctx, conn, cli); err != nil {
		return err
	}
	if err := levelCost(ctx, conn, cli); err != nil {
		return err
	}
	// The refreshes left dead rows behind: storage is reported vacuumed.
	for _, t := range []string{rollupName, rollupName + "_week", rollupName + "_month"} {
		if err := benchkit.Exec(ctx, conn, "VACUUM FULL "+t, "VACUUM ANALYZE "+t); err != nil {
			return err
		}
	}
	out, err := cli.run("rollup", "list")
	if err != nil {
		return err
	}
	fmt.Print(out)
	return monthlyByHand(ctx, conn)
}

// proxyCLI runs pgsketch-proxy's commands on one database.
type proxyCLI struct {
	ctx      context.Context
	bin, dsn string
}

// run runs a command and returns its output.
func (c proxyCLI) run(args ...string) (string, error) {
	args = append(args, "--dsn", c.dsn, "--log-level", "warn")
	out, err := exec.CommandContext(c.ctx, c.bin, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pgsketch-proxy %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// create runs rollup create for the matrix's rollup, named name, with the
// extra flags, and prints the command and its output.
func (c proxyCLI) create(name string, extra ...string) error {
	fmt.Printf("pgsketch-proxy rollup create %s --table public.events --time created_at --dims country,device --distinct user_id --sum amount %s\n",
		name, strings.Join(extra, " "))
	out, err := c.run(append([]string{"rollup", "create", name, "--table", "public.events", "--time", "created_at",
		"--dims", "country,device", "--distinct", "user_id", "--sum", "amount"}, extra...)...)
	fmt.Print(out)
	return err
}

// defaultRollup drops the other rollups of events and makes events_daily
// anew unless it is already the rollup create's default one.
func defaultRollup(ctx context.Context, conn *pgx.Conn, cli proxyCLI) error {
	others, err := benchkit.Strings(ctx, conn, `SELECT name FROM pgsketch.rollup_defs WHERE source_table = 'events' AND name <> $1`, rollupName)
	if err != nil {
		return err
	}
	for _, n := range others {
		if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup($1)", n); err != nil {
			return err
		}
	}
	var ok bool
	_ = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgsketch.rollup_measures WHERE rollup = $1 AND column_name = 'sum_amount')
		AND (SELECT array_agg(grain ORDER BY grain) FROM pgsketch.rollup_levels WHERE rollup = $1) = '{month,week}'`, rollupName).Scan(&ok)
	if ok {
		return nil
	}
	if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup($1, if_exists => true)", rollupName); err != nil {
		return err
	}
	return cli.create(rollupName)
}

// levelCost measures what the default levels cost a refresh: of the last
// day with them, against the same rollup without levels, interleaved.
func levelCost(ctx context.Context, conn *pgx.Conn, cli proxyCLI) error {
	const bare = "events_daily_no_levels"
	if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup($1, if_exists => true)", bare); err != nil {
		return err
	}
	if err := cli.create(bare, "--levels", "none"); err != nil {
		return err
	}
	fmt.Println("refreshing the last day of each, interleaved, 5 times (pgsketch-proxy rollup refresh NAME --from 2026-03-31 --to 2026-04-01):")
	times := map[string][]time.Duration{}
	for range 5 {
		for _, n := range []string{rollupName, bare} {
			t0 := time.Now()
			out, err := cli.run("rollup", "refresh", n, "--from", "2026-03-31", "--to", "2026-04-01")
			if err != nil {
				return err
			}
			times[n] = append(times[n], time.Since(t0))
			fmt.Print("  " + out)
		}
	}
	fmt.Printf("one-day refresh, median of 5 (command included): %s with the default levels, %s without\n",
		benchkit.Ms(benchkit.Percentile(times[rollupName], 50)), benchkit.Ms(benchkit.Percentile(times[bare], 50)))
	_, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup($1)", bare)
	return err
}

// monthlyByHand builds the monthly table a postgresql-hll user would.
func monthlyByHand(ctx context.Context, conn *pgx.Conn) error {
	if err := benchkit.Exec(ctx, conn, `DROP TABLE IF EXISTS `+monthlyHand+`;
		CREATE TABLE `+monthlyHand+` AS SELECT date_trunc('month', bucket, 'UTC') AS month, country, device,
		       hll_union_agg(distinct_user_id::hll) AS distinct_user_id
		  FROM `+rollupName+` GROUP BY 1, 2, 3;
		CREATE INDEX ON `+monthlyHand+` (month)`, "VACUUM ANALYZE "+monthlyHand); err != nil {
		return err
	}
	var n int64
	_ = conn.QueryRow(ctx, "SELECT count(*) FROM "+monthlyHand).Scan(&n)
	fmt.Fprintf(os.Stdout, "%s: %d rows (hll_union_agg of %s by month, country and device)\n\n", monthlyHand, n, rollupName)
	return nil
}
