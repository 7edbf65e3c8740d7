package refresh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// PinnedSettings are the session settings under which values are printed
// for hashing (docs/design.md §2.2), set LOCAL in every refresh transaction. The
// client encoding is pinned as well: the hash is of UTF-8 text.
var PinnedSettings = []struct{ Name, Value string }{
	{"DateStyle", "ISO, MDY"},
	{"TimeZone", "UTC"},
	{"IntervalStyle", "postgres"},
	{"extra_float_digits", "3"},
	{"bytea_output", "hex"},
	{"client_encoding", "UTF8"},
}

// SessionSettings are set LOCAL in every refresh and verify transaction
// besides PinnedSettings: a search_path no other schema can hijack (the
// generated statements call built-in functions by their bare names), and no
// idle-in-transaction timeout, as the transaction waits while sketches are
// merged between the reading and the writing.
var SessionSettings = []struct{ Name, Value string }{
	{"search_path", "pg_catalog, pg_temp"},
	{"idle_in_transaction_session_timeout", "0"},
}

// setLocal appends "; SET LOCAL name = 'value'" for each pinned and session
// setting to b.
func setLocal(b *strings.Builder) {
	for _, s := range append(PinnedSettings[:len(PinnedSettings):len(PinnedSettings)], SessionSettings...) {
		fmt.Fprintf(b, "; SET LOCAL %s = %s", s.Name, catalog.QuoteLiteral(s.Value))
	}
}

// Options say which buckets a refresh rebuilds.
type Options struct {
	// Full rebuilds every bucket.
	Full bool
	// From and To, when either is set, rebuild exactly the buckets that
	// overlap [From, To), read in the rollup's time zone (any text
	// PostgreSQL accepts as a timestamptz, e.g. 2026-01-05).
	From, To string
	// Streams > 1 reads the base rows of a plain table in that many parts
	// at once, each on its own connection from Dial (sharing one snapshot
	// exported by the refresh's transaction): a full build uses more of the
	// server's cores. Without Dial, one stream.
	Streams int
	Dial    Dialer
	// Progress, when set, is called about every ProgressEvery while base rows
	// are read, and once when reading ends.
	Progress      func(Progress)
	ProgressEvery time.Duration
}

// MaxStreams caps Options.Streams.
const MaxStreams = 16

// DefaultStreams is the number of readers the CLI uses unless told
// otherwise. On the 2-core benchmark machine four readers built the 20 M-row
// rollup 6 % faster than two and spent less CPU on both sides (docs/benchmarks.md,
// "rollup build"); more parts also even out how the parts' rows fall on the
// server's cores.
const DefaultStreams = 4

// Dialer opens another connection to the same database as the refresh's
// own, returning it and the function that closes it.
type Dialer func(ctx context.Context) (upstream.Session, func(), error)

// Progress reports a running refresh.
type Progress struct {
	Rollup string
	// Rows is the number of rows read so far; Estimate the planner's
	// estimate of the total (0 when unknown).
	Rows, Estimate int64
	Elapsed        time.Duration
	Done           bool
}

// Result describes a committed refresh.
type Result struct {
	Rollup string
	// Mode is full, incremental or range.
	Mode string
	// From and To bound the rebuilt buckets (empty = unbounded).
	From, To string
	// RowsRead counts the base rows streamed (for sketches) or, for a
	// rollup without sketches, the partials rows.
	RowsRead int64
	// Written is the number of rollup rows rebuilt; RollupRows the rollup
	// table's rows after the refresh.
	Written, RollupRows int64
	// Levels are the rollup's levels, rebuilt from its rows.
	Levels    []LevelResult
	Version   int64
	Watermark string
	Elapsed   time.Duration
}

func (r Result) String() string {
	rng := "all buckets"
	switch {
	case r.From != "" && r.To != "":
		rng = "buckets from " + r.From + " to " + r.To
	case r.From != "":
		rng = "buckets from " + r.From
	}
	wm := r.Watermark
	if wm == "" {
		wm = "none"
	}
	levels := ""
	for _, l := range r.Levels {
		levels += fmt.Sprintf(", %d %s level rows (%s)", l.Written, l.Grain, l.Elapsed.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s: %s refresh of %s: %d rows read, %d rollup rows written (%d in total)%s, version %d, watermark %s, %s",
		r.Rollup, r.Mode, rng, r.RowsRead, r.Written, r.RollupRows, levels, r.Version, wm, r.Elapsed.Round(time.Millisecond))
}

// Refresh refreshes rollup name on conn in one transaction of its own: conn
// must not be inside a transaction block. On any error the transaction is
// rolled back and the rollup is unchanged.
func Refresh(ctx context.Context, conn upstream.Session, name string, opt Options) (res Result, err error) {
	start := time.Now()
	res = Result{Rollup: name, Mode: "incremental"}
	switch {
	case opt.Full && (opt.From != "" || opt.To != ""):
		return res, errors.New("a refresh is either full or a time range, not both")
	case opt.Full:
		res.Mode = "full"
	case opt.From != "" || opt.To != "":
		res.Mode = "range"
	}
	if err := beginTransaction(ctx, conn, name); err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			// The context may be what failed; the rollback must still go out.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = conn.Exec(rctx, "ROLLBACK")
		}
	}()

	job, err := beginRefresh(ctx, conn, name, opt)
	if err != nil {
		return res, fmt.Errorf("refresh %s: %w", name, err)
	}
	res.From, res.To = string(job.lo), string(job.hi)
	g, err := job.read(ctx, conn, opt, start)
	if err != nil {
		return res, fmt.Errorf("refresh %s: %w", name, err)
	}
	res.RowsRead = g.rows
	if g.rows == 0 {
		res.RowsRead = g.tuples.Load()
	}
	if err := job.write(ctx, conn, g, &res); err != nil {
		return res, fmt.Errorf("refresh %s: %w", name, err)
	}
	if err := conn.Exec(ctx, "COMMIT"); err != nil {
		return res, fmt.Errorf("refresh %s: commit: %w", name, err)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// beginTransaction opens the refresh's transaction, with the settings of
// setLocal. The capture triggers commit before the refresh reads anything,
// so every write the refresh does not see is logged (see capture_v1.sql).
func beginTransaction(ctx context.Context, conn upstream.Session, name string) error {
	if _, err := upstream.Rows(ctx, conn, "SELECT pgsketch.capture_prepare($1)", name); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42883" {
			return fmt.Errorf("refresh %s: the catalog predates change capture (run pgsketch-proxy migrate up): %w", name, err)
		}
		return fmt.Errorf("refresh %s: change capture: %w", name, err)
	}
	var b strings.Builder
	b.WriteString("BEGIN ISOLATION LEVEL READ COMMITTED")
	setLocal(&b)
	if err := conn.Exec(ctx, b.String()); err != nil {
		return fmt.Errorf("refresh %s: begin: %w", name, err)
	}
	return nil
}

// write replaces the rebuilt buckets' rollup rows with those of g, rebuilds
// the levels over them and has pgsketch.refresh_finish record the refresh,
// noting in res what was written. It does not commit.
func (job *refreshJob) write(ctx context.Context, conn upstream.Session, g *groups, res *Result) error {
	var err error
	if zone := job.zone; zone != nil {
		// Local bucket starts become the instants date_trunc(grain, t, zone) gives.
		if g.instants, err = instants(ctx, conn, g.localBuckets(), string(zone)); err != nil {
			return fmt.Errorf("bucket starts: %w", err)
		}
	}

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(g.writeTo(pw)) }()
	res.Written, err = conn.CopyFrom(ctx, pr, job.writeSQL)
	pr.Close()
	if err != nil {
		return fmt.Errorf("write rollup rows: %w", err)
	}

	var loArg, hiArg any
	if job.lo != nil {
		loArg = string(job.lo)
	}
	if job.hi != nil {
		hiArg = string(job.hi)
	}
	if res.Levels, err = rebuildLevels(ctx, conn, job.name, loArg, hiArg); err != nil {
		return err
	}
	if err := analyze(ctx, conn, job.name, res.Written); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	rows, err := upstream.Rows(ctx, conn, `SELECT version, watermark, rollup_rows FROM pgsketch.refresh_finish($1, $2, $3)`,
		job.name, loArg, job.ranged)
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	if len(rows) == 1 && len(rows[0]) == 3 {
		res.Version, _ = strconv.ParseInt(string(rows[0][0]), 10, 64)
		res.Watermark = string(rows[0][1])
		res.RollupRows, _ = strconv.ParseInt(string(rows[0][2]), 10, 64)
	}
	return nil
}

// refreshJob is what pgsketch.refresh_begin decided for a refresh: the
// bucket range it rebuilds (lo, hi: NULL for open ends), the statements
// that read the base rows (one per stream) and write the rollup rows, and
// how the rows read are laid out and bucketed.
type refreshJob struct {
	name     string
	lo, hi   []byte
	readSQL  []string
	writeSQL string
	ndims    int
	fields   []field
	bk       bucketer
	zone     []byte // the zone of local buckets, or nil
	ranged   string
}

// beginRefresh calls pgsketch.refresh_begin inside the refresh's
// transaction and reads its answer.
func beginRefresh(ctx context.Context, conn upstream.Session, name string, opt Options) (*refreshJob, error) {
	var from, to any
	if opt.From != "" {
		from = opt.From
	}
	if opt.To != "" {
		to = opt.To
	}
	parts := 1
	if opt.Dial != nil && opt.Streams > 1 {
		parts = min(opt.Streams, MaxStreams)
	}
	rows, err := upstream.Rows(ctx, conn, `SELECT lo, hi, array_to_json(read_sql), ndims, array_to_json(fields), write_sql, ranged,
		bucket_zone, time_kind, grain
		FROM pgsketch.refresh_begin($1, $2, $3, $4, $5)`, name, strconv.FormatBool(opt.Full), from, to, strconv.Itoa(parts))
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 || len(rows[0]) != 10 {
		return nil, fmt.Errorf("refresh_begin returned %d rows", len(rows))
	}
	row := rows[0]
	job := &refreshJob{name: name, lo: row[0], hi: row[1], writeSQL: string(row[5]), ranged: string(row[6]), zone: row[7]}
	if err := json.Unmarshal(row[2], &job.readSQL); err != nil || len(job.readSQL) == 0 {
		return nil, fmt.Errorf("read statements: %v", err)
	}
	if job.ndims, err = strconv.Atoi(string(row[3])); err != nil {
		return nil, fmt.Errorf("ndims: %w", err)
	}
	var kinds []string
	if err := json.Unmarshal(row[4], &kinds); err != nil {
		return nil, fmt.Errorf("fields: %w", err)
	}
	if job.fields, err = parseFields(kinds); err != nil {
		return nil, err
	}
	var grain catalog.Grain // none: the times are bucket starts already
	if string(row[9]) != "none" {
		if grain, err = catalog.ParseGrain(string(row[9])); err != nil {
			return nil, err
		}
	}
	job.bk = bucketer{grain: grain, date: string(row[8]) == "date"}
	return job, nil
}

// read reads the base rows into groups, one stream per read statement
// (merged at the end), reporting progress every opt.ProgressEvery.
func (job *refreshJob) read(ctx context.Context, conn upstream.Session, opt Options, start time.Time) (*groups, error) {
	estimate := int64(0)
	if opt.Progress != nil {
		for _, q := range job.readSQL {
			estimate += planRows(ctx, conn, q)
		}
	}
	streams := make([]*groups, len(job.readSQL))
	for i := range streams {
		streams[i] = newGroups(job.ndims, job.fields, job.bk)
	}
	stop := make(chan struct{})
	ticked := make(chan struct{})
	if opt.Progress != nil {
		every := opt.ProgressEvery
		if every <= 0 {
			every = 200 * time.Millisecond
		}
		go func() {
			defer close(ticked)
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					opt.Progress(Progress{Rollup: job.name, Rows: tuples(streams), Estimate: estimate, Elapsed: time.Since(start)})
				}
			}
		}()
	} else {
		close(ticked)
	}
	rerr := readStreams(ctx, conn, opt.Dial, job.readSQL, streams)
	close(stop)
	<-ticked
	if rerr != nil {
		return nil, fmt.Errorf("read base rows: %w", rerr)
	}
	g := streams[0]
	for _, o := range streams[1:] {
		if err := g.merge(o); err != nil {
			return nil, fmt.Errorf("merge streams: %w", err)
		}
	}
	if opt.Progress != nil {
		opt.Progress(Progress{Rollup: job.name, Rows: g.tuples.Load(), Estimate: estimate, Elapsed: time.Since(start), Done: true})
	}
	return g, nil
}

func tuples(gs []*groups) int64 {
	var n int64
	for _, g := range gs {
		n += g.tuples.Load()
	}
	return n
}

// readStreams runs the read statements, the first on conn and each other on
// a connection of its own that imports conn's snapshot, so every part sees
// the same rows; their data goes into the matching groups.
func readStreams(ctx context.Context, conn upstream.Session, dial Dialer, readSQL []string, streams []*groups) error {
	if len(readSQL) == 1 {
		return readStream(ctx, conn, readSQL[0], streams[0])
	}
	rows, err := upstream.Rows(ctx, conn, "SELECT pg_export_snapshot()")
	if err != nil {
		return fmt.Errorf("export snapshot: %w", err)
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return errors.New("export snapshot: no snapshot")
	}
	snapshot := string(rows[0][0])
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(readSQL))
	var wg sync.WaitGroup
	for i := range readSQL {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = readPart(ctx, dial, snapshot, readSQL[i], streams[i]); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// readPart reads one part on a new connection in a read-only transaction
// on snapshot.
func readPart(ctx context.Context, dial Dialer, snapshot, query string, g *groups) error {
	c, closeConn, err := dial(ctx)
	if err != nil {
		return fmt.Errorf("connect a parallel reader: %w", err)
	}
	defer closeConn()
	var b strings.Builder
	fmt.Fprintf(&b, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT %s", catalog.QuoteLiteral(snapshot))
	setLocal(&b)
	if err := c.Exec(ctx, b.String()); err != nil {
		return err
	}
	if pc, ok := c.(pgsession.Conn); ok {
		// The connection exists for this statement: read it raw, then drop it
		// (ending its read-only transaction).
		return rawCopyTo(ctx, pc.C, g.feed, "COPY ("+query+") TO STDOUT (FORMAT binary)")
	}
	if err := readStream(ctx, c, query, g); err != nil {
		return err
	}
	return c.Exec(ctx, "COMMIT")
}

// readStream streams query's rows with COPY TO into g.
func readStream(ctx context.Context, conn upstream.Session, query string, g *groups) error {
	pipe := newPipeline(g.feed)
	cerr := conn.CopyTo(ctx, pipe, "COPY ("+query+") TO STDOUT (FORMAT binary)")
	perr := pipe.close()
	if cerr != nil {
		return cerr
	}
	return perr
}

// instants converts local bucket starts (µs since 2000-01-01, wall clock
// in zone) into the instants they are in that zone, by PostgreSQL's own
// rule (timestamp AT TIME ZONE zone).
func instants(ctx context.Context, conn upstream.Session, local []int64, zone string) (map[int64]int64, error) {
	texts := make([]string, len(local))
	for i, v := range local {
		t, err := localText(v)
		if err != nil {
			return nil, err
		}
		texts[i] = t
	}
	arr, _ := json.Marshal(texts)
	rows, err := upstream.Rows(ctx, conn, `SELECT (extract(epoch FROM b::timestamp AT TIME ZONE $2) * 1000000)::bigint
		FROM json_array_elements_text($1::json) WITH ORDINALITY AS u(b, i) ORDER BY i`, string(arr), zone)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(local) {
		return nil, fmt.Errorf("%d instants for %d buckets", len(rows), len(local))
	}
	m := make(map[int64]int64, len(local))
	for i, v := range local {
		us, err := strconv.ParseInt(string(rows[i][0]), 10, 64)
		if err != nil {
			return nil, err
		}
		m[v] = us - pgEpochUnix*1_000_000
	}
	return m, nil
}

// planRows returns the planner's row estimate for query, or 0.
func planRows(ctx context.Context, conn upstream.Session, query string) int64 {
	rows, err := upstream.Rows(ctx, conn, "EXPLAIN (FORMAT JSON) "+query)
	if err != nil || len(rows) != 1 || len(rows[0]) != 1 {
		return 0
	}
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if json.Unmarshal(rows[0][0], &plan) != nil || len(plan) != 1 {
		return 0
	}
	return int64(plan[0].Plan.Rows)
}
