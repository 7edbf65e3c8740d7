package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

const rollupUsage = `create NAME --table T --time COL --distinct COLS [flags]
       pgsketch-proxy rollup refresh NAME|--all [--full | --from T --to T] [flags]
       pgsketch-proxy rollup list [flags]
       pgsketch-proxy rollup drop NAME [flags]
       pgsketch-proxy rollup verify NAME [--buckets N] [flags]`

func runRollup(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 || isHelp(args[0]) {
		f := a.newFlags(rollupUsage)
		f.Usage()
		if len(args) == 0 {
			return fmt.Errorf("%w: missing create, refresh, list, drop or verify", errUsage)
		}
		return nil
	}
	action, rest := args[0], args[1:]
	a.cmdPath += " " + action
	switch action {
	case "create":
		return rollupCreate(ctx, a, rest)
	case "refresh":
		return rollupRefresh(ctx, a, rest)
	case "list":
		return rollupList(ctx, a, rest)
	case "drop":
		return rollupDrop(ctx, a, rest)
	case "verify":
		return rollupVerify(ctx, a, rest)
	}
	return fmt.Errorf("%w: unknown action %q: want create, refresh, list, drop or verify", errUsage, action)
}

// nameFirst lets the rollup name come before the flags, as in
// "rollup create events_daily --table events ...": Go's flag package stops
// at the first argument that is not a flag.
func nameFirst(args []string) (name string, rest []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

// parseNamed parses flags and returns the one rollup name given before or
// after them ("" when none and optional).
func parseNamed(f *flags, args []string, required bool) (string, error) {
	name, rest := nameFirst(args)
	if err := f.parse(rest); err != nil {
		return "", err
	}
	if name == "" && f.NArg() > 0 {
		name = f.Arg(0)
		if f.NArg() > 1 {
			return "", fmt.Errorf("%w: unexpected argument %q", errUsage, f.Arg(1))
		}
	} else if f.NArg() > 0 {
		return "", fmt.Errorf("%w: unexpected argument %q", errUsage, f.Arg(0))
	}
	if required && name == "" {
		return "", fmt.Errorf("%w: missing the rollup name", errUsage)
	}
	return name, nil
}

func dsnFlag(f *flags) *string {
	return f.String("dsn", "", "PostgreSQL connection string of the database holding the rollup (required)")
}

// withConn runs fn on a connection to dsn (--dsn, required), closed when fn
// returns.
func withConn(ctx context.Context, dsn string, fn func(*pgx.Conn) error) error {
	if dsn == "" {
		return fmt.Errorf("%w: --dsn (or PGSKETCH_DSN) is required", errUsage)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}

// explain adds what to do to the errors a missing catalog causes.
func explain(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "3F000" || (pe.Code == "42883" && strings.Contains(pe.Message, "pgsketch."))) {
		return fmt.Errorf("%w (the pgsketch catalog is missing or old: run pgsketch-proxy migrate up --dsn ...)", err)
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func rollupCreate(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("NAME --dsn URL --table SCHEMA.TABLE --time COLUMN --distinct COLS [flags]")
	dsn := dsnFlag(f)
	def := definitionFlags(f)
	noBuild := f.Bool("no-build", false, "only define the rollup; do not fill it now")
	streams := streamsFlag(f)
	name, err := parseNamed(f, args, true)
	if err != nil {
		return err
	}
	if def.table == "" || def.timeCol == "" {
		return fmt.Errorf("%w: --table and --time are required", errUsage)
	}
	grains, err := levelGrains(def.levels, def.grain)
	if err != nil {
		return err
	}
	if why := rewrite.AbbreviatedZone(def.tz); why != "" {
		// Its meaning is each session's: no query would be answered
		// from the rollup, and its capture would cost every write.
		return fmt.Errorf("%w: --tz %s: %s, so no query would be answered from the rollup; name the zone as the tz database does (America/New_York, Etc/GMT+5)",
			errUsage, def.tz, why)
	}
	return withConn(ctx, *dsn, func(conn *pgx.Conn) error {
		rel, err := def.create(ctx, conn, name, grains)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "created rollup %s (table %s)\n", name, rel)
		if *noBuild {
			return nil
		}
		return buildCreated(ctx, a, conn, name, *dsn, *streams)
	})
}

// rollupDefinition is what rollup create's flags say of the rollup; the
// column lists are comma-separated.
type rollupDefinition struct {
	table, timeCol, grain, tz, late, levels string
	dims, distinct, sum, minCols, maxCols   string
	theta, topk, firstSeen                  string
	thetaLgK, topkSize, log2m, regwidth     int
}

func definitionFlags(f *flags) *rollupDefinition {
	d := &rollupDefinition{}
	f.StringVar(&d.table, "table", "", "base table, optionally schema-qualified (required)")
	f.StringVar(&d.timeCol, "time", "", "time column of the base table: date, timestamp or timestamptz (required)")
	f.StringVar(&d.grain, "grain", "day", "bucket width: hour, day, week or month")
	f.StringVar(&d.tz, "tz", "UTC", "time zone whose calendar cuts the buckets of a timestamptz column")
	f.StringVar(&d.dims, "dims", "", "comma-separated dimension columns")
	f.StringVar(&d.distinct, "distinct", "", "comma-separated columns to sketch for COUNT(DISTINCT)")
	f.StringVar(&d.theta, "theta", "", "comma-separated columns to keep Theta sketches of, for overlaps (INTERSECT, EXCEPT, IN): smallint, integer, bigint, text or varchar")
	f.IntVar(&d.thetaLgK, "theta-lgk", 12, "Theta sketch nominal entries 2^lgk (5..16); up to 8·2^lgk bytes per rollup row")
	f.StringVar(&d.topk, "topk", "", "comma-separated columns to keep frequent-items summaries of, for top-k queries: smallint, integer, bigint, text or varchar")
	f.IntVar(&d.topkSize, "topk-size", 1024, "counters per top-k summary: a power of two from 16 to 65536")
	f.StringVar(&d.firstSeen, "first-seen", "", "key column (one the rollup reads, e.g. a --distinct column) to keep each key's first bucket of, exactly, "+
		"for new-user counts: users by first-seen day, week or month, new users in a range")
	f.Bool("count", true, "store the row count per bucket (always on: every rollup has row_count)")
	f.StringVar(&d.sum, "sum", "", "comma-separated columns to store SUM partials of")
	f.StringVar(&d.minCols, "min", "", "comma-separated columns to store MIN partials of")
	f.StringVar(&d.maxCols, "max", "", "comma-separated columns to store MAX partials of")
	f.IntVar(&d.log2m, "log2m", 14, "sketch registers 2^log2m (4..17); standard error 1.04/sqrt(2^log2m)")
	f.IntVar(&d.regwidth, "regwidth", 5, "bits per sketch register (1..5)")
	f.StringVar(&d.late, "late-window", "", "how far before the watermark refreshes re-read late rows, as a PostgreSQL interval (default one bucket)")
	f.StringVar(&d.levels, "levels", "auto", "comma-separated coarser grains to keep pre-merged copies of the rollup by "+
		"(week, month for a daily rollup; also day for an hourly one): queries over long ranges read those instead; "+
		"auto: week,month for a daily rollup, day,month for an hourly one, none for coarser grains; none: no levels")
	return d
}

// create defines rollup name and its levels of grains, together or not at
// all, and returns the rollup table's name.
func (d *rollupDefinition) create(ctx context.Context, conn *pgx.Conn, name string, grains []string) (string, error) {
	var lateArg any
	if d.late != "" {
		lateArg = d.late
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var rel string
	err = tx.QueryRow(ctx, `SELECT pgsketch.create_rollup($1, $2, $3, grain => $4, time_zone => $5,
		dimensions => $6, distinct_columns => $7, sum_columns => $8, min_columns => $9, max_columns => $10,
		log2m => $11, regwidth => $12, late_window => $13::interval, theta_columns => $14, theta_lgk => $15,
		topk_columns => $16, topk_size => $17)::text`,
		name, d.table, d.timeCol, d.grain, d.tz, nonNil(splitList(d.dims)), nonNil(splitList(d.distinct)),
		nonNil(splitList(d.sum)), nonNil(splitList(d.minCols)), nonNil(splitList(d.maxCols)), d.log2m, d.regwidth, lateArg,
		nonNil(splitList(d.theta)), d.thetaLgK, nonNil(splitList(d.topk)), d.topkSize).Scan(&rel)
	if err != nil {
		return "", explain(err)
	}
	for _, g := range grains {
		if _, err := tx.Exec(ctx, `SELECT pgsketch.add_rollup_level($1, $2)`, name, g); err != nil {
			return "", explain(err)
		}
	}
	if d.firstSeen != "" {
		if _, err := tx.Exec(ctx, `SELECT pgsketch.add_first_seen($1, $2)`, name, strings.TrimSpace(d.firstSeen)); err != nil {
			return "", explain(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return "", explain(err)
	}
	return rel, nil
}

// buildCreated fills rollup name, just created; rollup create is one
// command, so a rollup that could not be built is not left behind.
func buildCreated(ctx context.Context, a *app, conn *pgx.Conn, name, dsn string, streams int) error {
	res, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, name, refresh.Options{Full: true,
		Progress: progressReporter(a), Streams: streams, Dial: pgsession.Dial(dsn)})
	if err != nil {
		if _, derr := conn.Exec(context.WithoutCancel(ctx), "SELECT pgsketch.drop_rollup($1)", name); derr != nil {
			return fmt.Errorf("%w; the rollup is defined but empty (dropping it failed: %v)", err, derr)
		}
		return fmt.Errorf("%w; rollup %s was not created", err, name)
	}
	fmt.Fprintln(a.stdout, res)
	return nil
}

// levelGrains is the list of level grains --levels names for a rollup of
// grain g: auto gives the levels that pay for a daily or hourly rollup (a
// week or a month then reads one row per group instead of 7 or 30, for
// about a quarter more storage; docs/benchmarks.md), none gives none.
func levelGrains(levels, g string) ([]string, error) {
	switch strings.TrimSpace(levels) {
	case "auto":
		switch g {
		case "day":
			return []string{"week", "month"}, nil
		case "hour":
			return []string{"day", "month"}, nil
		}
		return nil, nil
	case "none", "":
		return nil, nil
	}
	grains := splitList(levels)
	for _, x := range grains {
		if x == "auto" || x == "none" {
			return nil, fmt.Errorf("%w: --levels %s: auto and none stand alone", errUsage, levels)
		}
	}
	return grains, nil
}

func streamsFlag(f *flags) *int {
	return f.Int("streams", refresh.DefaultStreams, "read the base table of a refresh over this many connections at once "+
		"(plain tables; one snapshot); 1 reads over the command's own connection only")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func rollupRefresh(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("NAME|--all --dsn URL [--full | --from T --to T] [flags]")
	dsn := dsnFlag(f)
	all := f.Bool("all", false, "refresh every rollup of the database")
	full := f.Bool("full", false, "rebuild every bucket")
	from := f.String("from", "", "rebuild the buckets from this time (a timestamp in the rollup's time zone) ...")
	to := f.String("to", "", "... up to this time, exclusive; the buckets it cuts through are rebuilt whole")
	streams := streamsFlag(f)
	name, err := parseNamed(f, args, false)
	if err != nil {
		return err
	}
	if (name == "") == !*all {
		return fmt.Errorf("%w: give a rollup name or --all", errUsage)
	}
	if *full && (*from != "" || *to != "") {
		return fmt.Errorf("%w: --full and --from/--to exclude each other", errUsage)
	}
	return withConn(ctx, *dsn, func(conn *pgx.Conn) error {
		names := []string{name}
		if *all {
			rows, err := conn.Query(ctx, "SELECT name FROM pgsketch.rollup_defs ORDER BY name")
			if err != nil {
				return explain(err)
			}
			if names, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return explain(err)
			}
		}
		for _, n := range names {
			res, err := refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, n,
				refresh.Options{Full: *full, From: *from, To: *to, Progress: progressReporter(a),
					Streams: *streams, Dial: pgsession.Dial(*dsn)})
			if err != nil {
				return explain(err)
			}
			fmt.Fprintln(a.stdout, res)
		}
		return nil
	})
}

func rollupList(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("--dsn URL [flags]")
	dsn := dsnFlag(f)
	if err := f.parseFlagsOnly(args); err != nil {
		return err
	}
	return withConn(ctx, *dsn, func(conn *pgx.Conn) error { return listRollups(ctx, conn, a.stdout) })
}

// listRollups prints a table of the rollups of conn's database to out.
func listRollups(ctx context.Context, conn *pgx.Conn, out io.Writer) error {
	firstSeen, err := listFirstSeen(ctx, conn)
	if err != nil {
		return explain(err)
	}
	rows, err := conn.Query(ctx, `SELECT name, source, grain, time_zone, array_to_string(dimensions, ','),
		array_to_string(measures, '; '), coalesce(to_char(watermark AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI"Z"'), 'never'),
		coalesce(rows, 0), pg_size_pretty(bytes), coalesce(to_char(last_refresh AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS"Z"'), 'never'),
		coalesce(justify_interval(date_trunc('second', lag))::text, ''),
		CASE WHEN capture_broken IS NULL THEN format('captured, %s changed', dirty_buckets)
		          || coalesce(', ' || nullif(to_jsonb(r) ->> 'inserted_rows', '0') || ' rows inserted', '')
		     ELSE 'not captured: ' || capture_broken END,
		coalesce((SELECT string_agg(l.grain || ' ' || coalesce(pg_size_pretty(pg_total_relation_size(
		            to_regclass(format('%I.%I', l.table_schema, l.table_name)))), '?'), ', ' ORDER BY l.grain)
		            FROM pgsketch.rollup_levels AS l WHERE l.rollup = r.name), 'none')
		FROM pgsketch.rollups AS r ORDER BY name`)
	if err != nil {
		return explain(err)
	}
	defer rows.Close()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSOURCE\tGRAIN\tTZ\tDIMS\tMEASURES\tWATERMARK\tROWS\tSIZE\tLEVELS\tFIRST SEEN\tLAST REFRESH\tLAG\tCHANGES")
	for rows.Next() {
		var s [12]string
		var n int64
		if err := rows.Scan(&s[0], &s[1], &s[2], &s[3], &s[4], &s[5], &s[6], &n, &s[7], &s[8], &s[9], &s[10], &s[11]); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s[0], s[1], s[2], s[3], s[4], s[5], s[6], n, s[7], s[11],
			cmp.Or(firstSeen[s[0]], "-"), s[8], s[9], s[10])
	}
	if err := rows.Err(); err != nil {
		return explain(err)
	}
	return w.Flush()
}

// listFirstSeen returns, per rollup that keeps first-seen bookkeeping,
// its key column and whether the next refresh builds it (none before the
// catalog has first-seen bookkeeping).
func listFirstSeen(ctx context.Context, conn *pgx.Conn) (map[string]string, error) {
	var has bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('pgsketch.rollup_first_seen') IS NOT NULL").Scan(&has); err != nil || !has {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT f.rollup, f.key_column || CASE WHEN f.built_version IS NOT DISTINCT FROM d.version THEN ''
		                                          ELSE ' (built by the next refresh)' END
		  FROM pgsketch.rollup_first_seen f JOIN pgsketch.rollup_defs d ON d.name = f.rollup`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, key string
		if err := rows.Scan(&name, &key); err != nil {
			return nil, err
		}
		out[name] = key
	}
	return out, rows.Err()
}

func rollupDrop(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("NAME --dsn URL [flags]")
	dsn := dsnFlag(f)
	ifExists := f.Bool("if-exists", false, "succeed when the rollup does not exist")
	name, err := parseNamed(f, args, true)
	if err != nil {
		return err
	}
	return withConn(ctx, *dsn, func(conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup($1, $2)", name, *ifExists); err != nil {
			return explain(err)
		}
		fmt.Fprintf(a.stdout, "dropped rollup %s\n", name)
		return nil
	})
}

func rollupVerify(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("NAME --dsn URL [--buckets N] [flags]")
	dsn := dsnFlag(f)
	buckets := f.Int("buckets", 10, "how many buckets to recompute exactly, spread over the rollup's range")
	verbose := f.Bool("v", false, "print every checked row, not only the summary and the worst rows")
	firstSeen := f.Bool("first-seen", true, "also compare the new keys per bucket of the rollup's first-seen bookkeeping "+
		"with their exact count (a read of the whole source)")
	name, err := parseNamed(f, args, true)
	if err != nil {
		return err
	}
	if *buckets < 1 {
		return fmt.Errorf("%w: --buckets must be at least 1", errUsage)
	}
	return withConn(ctx, *dsn, func(conn *pgx.Conn) error {
		sess := pgsession.Conn{C: conn.PgConn()}
		checks, err := refresh.Verify(ctx, sess, name, *buckets)
		if err != nil {
			return explain(err)
		}
		failed := reportChecks(a.stdout, name, checks, *verbose)
		if !*firstSeen {
			return failed
		}
		fs, err := refresh.VerifyFirstSeen(ctx, sess, name)
		if err != nil {
			return errors.Join(failed, explain(err))
		}
		return errors.Join(failed, reportFirstSeen(a.stdout, name, fs))
	})
}

// reportFirstSeen prints the comparison of rollup name's first-seen
// bookkeeping (nothing when it keeps none) and fails when a count is
// wrong.
func reportFirstSeen(out io.Writer, name string, c *refresh.FirstSeenCheck) error {
	if c == nil {
		return nil
	}
	if c.Skipped != "" {
		fmt.Fprintf(out, "first seen by %s: not checked: %s\n", c.Key, c.Skipped)
		return nil
	}
	if len(c.Wrong) > 0 {
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "BUCKET\tNEW KEYS ANSWERED\tEXACT\t")
		for _, b := range c.Wrong {
			fmt.Fprintf(w, "%s\t%d\t%d\t\n", b.Bucket, b.Answered, b.Exact)
		}
		w.Flush()
	}
	fmt.Fprintf(out, "first seen by %s: %d buckets checked, %d wrong; %d keys with another first bucket in the key table\n",
		c.Key, c.Buckets, len(c.Wrong), c.WrongKeys)
	if len(c.Wrong) > 0 || c.WrongKeys > 0 {
		return fmt.Errorf("rollup %s failed verification of its first-seen counts: rebuild it with pgsketch-proxy rollup refresh %s --full", name, name)
	}
	return nil
}

// reportChecks prints the checks of rollup name (every one with all, else
// the worst) and their summary, and fails when the rollup is off.
func reportChecks(out io.Writer, name string, checks []refresh.Check, all bool) error {
	printChecks(out, checks, all)
	s := refresh.Summarize(checks)
	fmt.Fprintf(out, "%d rows checked: largest error %.2f standard errors, %.1f%% within 3, %d beyond 5, %d row counts wrong\n",
		s.Checks, s.MaxStdErrs, 100*s.Within3, s.Beyond5, s.CountErrors)
	if s.Beyond5 > 0 || s.CountErrors > 0 {
		return fmt.Errorf("rollup %s failed verification: rebuild it with pgsketch-proxy rollup refresh %s --full", name, name)
	}
	return nil
}

func printChecks(out io.Writer, checks []refresh.Check, all bool) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "BUCKET AND DIMENSIONS\tMEASURE\tEXACT\tESTIMATE\tERROR (SE)\tROWS\t")
	shown := 0
	for _, c := range checks {
		if !all && (c.StdErrs < 3 && c.StdErrs > -3) && c.RowCount == c.ExactRows && shown >= 10 {
			continue
		}
		shown++
		fmt.Fprintf(w, "%s\t%s\t%d\t%.0f\t%+.2f\t%d\t\n", strings.ReplaceAll(c.Key, "\t", " | "), c.Measure, c.Exact, c.Estimate, c.StdErrs, c.RowCount)
	}
	w.Flush()
}

// progressReporter shows a refresh's progress: a bar redrawn in place on a
// terminal, a log line every 10 seconds otherwise.
func progressReporter(a *app) func(refresh.Progress) {
	if isTerminal(a.stderr) {
		return func(p refresh.Progress) { drawBar(a.stderr, p) }
	}
	var last time.Time
	return func(p refresh.Progress) {
		if p.Done || time.Since(last) >= 10*time.Second {
			last = time.Now()
			a.log.Info("refreshing", "rollup", p.Rollup, "rows", p.Rows, "estimated_rows", p.Estimate,
				"rows_per_s", int64(rate(p)), "elapsed", p.Elapsed.Round(time.Second).String(), "done", p.Done)
		}
	}
}

func rate(p refresh.Progress) float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Rows) / p.Elapsed.Seconds()
}

// drawBar redraws one line: [#####.....] 45% 9.0M/20.0M rows 1.2M rows/s ETA 9s.
func drawBar(w io.Writer, p refresh.Progress) {
	const width = 30
	r := rate(p)
	line := fmt.Sprintf("%s: %s rows  %s rows/s", p.Rollup, human(float64(p.Rows)), human(r))
	if p.Estimate > 0 {
		frac := min(float64(p.Rows)/float64(p.Estimate), 1)
		n := int(frac * width)
		eta := "?"
		if r > 0 && p.Rows < p.Estimate {
			eta = (time.Duration(float64(p.Estimate-p.Rows)/r) * time.Second).Round(time.Second).String()
		} else if p.Rows >= p.Estimate {
			eta = "0s"
		}
		line = fmt.Sprintf("%s: [%s%s] %3.0f%%  %s/~%s rows  %s rows/s  ETA %s", p.Rollup,
			strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac,
			human(float64(p.Rows)), human(float64(p.Estimate)), human(r), eta)
	}
	if p.Done {
		line = fmt.Sprintf("%s: read %s rows in %s (%s rows/s)", p.Rollup, human(float64(p.Rows)),
			p.Elapsed.Round(100*time.Millisecond), human(r))
	}
	end := ""
	if p.Done {
		end = "\n"
	}
	fmt.Fprintf(w, "\r\033[K%s%s", line, end)
}

func human(x float64) string {
	switch {
	case x >= 1e9:
		return fmt.Sprintf("%.1fG", x/1e9)
	case x >= 1e6:
		return fmt.Sprintf("%.1fM", x/1e6)
	case x >= 1e4:
		return fmt.Sprintf("%.0fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}
