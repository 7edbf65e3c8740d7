package main

// The check part: what the answering statement's catalog check costs a
// warm answer. capture_check asks require_source_read (the role's right to
// read the source) and capture_broken, which compares every captured
// relation's definition with the fingerprint the last refresh recorded;
// the rollup table's row-level security policy asks require_source_read
// once more. "Off" is the check as it was before them: capture_broken's
// earlier form (sql/capture_v2.sql) and no policy. The two are swapped in
// the database between blocks of queries on one proxy connection, blocks
// interleaved, the first query of each block not counted (it replans the
// fetch after the swap).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"
	pgsql "github.com/pgsketch/pgsketch/sql"
)

type checkResult struct {
	on, off     []time.Duration // every timed answer
	roundOn     []time.Duration // per round, the median of its block
	roundOff    []time.Duration
	perBlock    int
	rollupRows  int64
	fingerprint string
}

func checkCost(ctx context.Context, db *pgx.Conn, dsn string, o options) (*checkResult, error) {
	if err := eventsRollup(ctx, db, dsn, o); err != nil {
		return nil, err
	}
	// The rollup's first refresh under catalog version 11 recorded its
	// fingerprint: the check compares it.
	r := &checkResult{perBlock: 5}
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+rollupName+`),
		(SELECT fingerprint::text FROM pgsketch.rollup_captured WHERE rollup = $1 LIMIT 1)`, rollupName).Scan(&r.rollupRows, &r.fingerprint); err != nil {
		return nil, err
	}
	sw, err := newCheckSwitch(ctx, db)
	if err != nil {
		return nil, err
	}
	defer sw.restore()
	s, err := benchproxy.Open(ctx, o.proxy, dsn, o.cacheBytes, false)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	b := &checkBench{ctx: ctx, sw: sw, c: s.Conn, perBlock: r.perBlock}
	for range 2 {
		if _, err := b.ask(false); err != nil {
			return nil, err
		}
	}
	fmt.Printf("check cost: %d rounds of a block of %d warm answers with the check on and one with it off (order alternating)\n", o.rounds, r.perBlock)
	for i := range o.rounds {
		line := fmt.Sprintf("round %d", i+1)
		for _, k := range benchkit.Rotation(i, 2) {
			on := k == 0
			ds, err := b.block(on)
			if err != nil {
				return nil, err
			}
			r.add(on, ds)
			line += fmt.Sprintf("  %s %s", map[bool]string{true: "on", false: "off"}[on], benchkit.Ms(benchkit.Median(ds)))
		}
		fmt.Println(line)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return r, nil
}

func (r *checkResult) add(on bool, ds []time.Duration) {
	if on {
		r.on, r.roundOn = append(r.on, ds...), append(r.roundOn, benchkit.Median(ds))
	} else {
		r.off, r.roundOff = append(r.off, ds...), append(r.roundOff, benchkit.Median(ds))
	}
}

// checkSwitch turns the check on (capture_check as it is, the rollup
// table's policy enabled) and off (capture_check as it was, with the
// earlier capture_broken, and no policy).
type checkSwitch struct {
	ctx           context.Context
	db            *pgx.Conn
	onSrc, offSrc string
}

// newCheckSwitch reads capture_check's sources and installs the earlier
// capture_broken beside the current one.
func newCheckSwitch(ctx context.Context, db *pgx.Conn) (*checkSwitch, error) {
	s := &checkSwitch{ctx: ctx, db: db}
	var v6Src string
	for _, f := range []struct {
		fn  string
		src *string
	}{{"capture_check", &s.onSrc}, {"capture_check_v6", &v6Src}} {
		if err := db.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE oid = 'pgsketch.`+f.fn+`(text, timestamptz, timestamptz)'::regprocedure`).Scan(f.src); err != nil {
			return nil, err
		}
	}
	v10, err := pgsql.Files.ReadFile("capture_v2.sql")
	if err != nil {
		return nil, err
	}
	broken10 := strings.ReplaceAll(string(v10), "pgsketch.capture_broken(", "pgsketch.bench_capture_broken_v10(")
	if _, err := db.Exec(ctx, broken10); err != nil {
		return nil, fmt.Errorf("the earlier capture_broken: %w", err)
	}
	s.offSrc = strings.ReplaceAll(v6Src, "pgsketch.capture_broken(", "pgsketch.bench_capture_broken_v10(")
	return s, nil
}

// set turns the check on or off.
func (s *checkSwitch) set(on bool) error {
	src, sw := s.offSrc, "DISABLE"
	if on {
		src, sw = s.onSrc, "ENABLE"
	}
	_, err := s.db.Exec(s.ctx, `CREATE OR REPLACE FUNCTION pgsketch.capture_check(r text, lo timestamptz, hi timestamptz) RETURNS bigint
		LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS `+quoteDollar(src)+`;
		ALTER TABLE `+rollupName+` `+sw+` ROW LEVEL SECURITY`)
	return err
}

// restore turns the check on and drops the earlier capture_broken.
func (s *checkSwitch) restore() {
	_ = s.set(true)
	_, _ = s.db.Exec(context.Background(), `DROP FUNCTION IF EXISTS pgsketch.bench_capture_broken_v10(text)`)
}

// checkBench asks the query on one proxy connection.
type checkBench struct {
	ctx      context.Context
	sw       *checkSwitch
	c        *benchproxy.Conn
	perBlock int
}

// ask runs the query; a warm answer takes the rollup rows from the
// proxy's cache.
func (b *checkBench) ask(warm bool) (time.Duration, error) {
	_, n, d, err := b.c.Ask(b.ctx, exactSQL)
	if err != nil {
		return d, err
	}
	if !benchproxy.FromRollup(n, rollupName) || (warm && !strings.Contains(n[0], "from the proxy's cache")) {
		return d, fmt.Errorf("not a warm answer from the rollup: notices %q", n)
	}
	return d, nil
}

// block turns the check on or off and times a block of warm answers.
func (b *checkBench) block(on bool) ([]time.Duration, error) {
	if err := b.sw.set(on); err != nil {
		return nil, err
	}
	if _, err := b.ask(false); err != nil { // replans after the swap: not counted
		return nil, err
	}
	var ds []time.Duration
	for range b.perBlock {
		d, err := b.ask(true)
		if err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// quoteDollar quotes a function body with a dollar tag it does not hold.
func quoteDollar(src string) string {
	tag := "$bench$"
	for strings.Contains(src, tag) {
		tag = "$" + strings.Trim(tag, "$") + "x$"
	}
	return tag + src + tag
}

// bootstrapDiff is the 95 % interval of benchkit.Median(on) - benchkit.Median(off) by the
// percentile bootstrap (each sample resampled with replacement).
func bootstrapDiff(on, off []time.Duration, n int) (lo, hi time.Duration) {
	rng := rand.New(rand.NewPCG(1, 2))
	diffs := make([]time.Duration, n)
	a, b := make([]time.Duration, len(on)), make([]time.Duration, len(off))
	for i := range diffs {
		for j := range a {
			a[j] = on[rng.IntN(len(on))]
		}
		for j := range b {
			b[j] = off[rng.IntN(len(off))]
		}
		diffs[i] = benchkit.Median(a) - benchkit.Median(b)
	}
	slices.Sort(diffs)
	return diffs[n*25/1000], diffs[n*975/1000]
}

func (r *checkResult) print(o options) {
	mOn, mOff := benchkit.Median(r.on), benchkit.Median(r.off)
	lo, hi := bootstrapDiff(r.on, r.off, 5000)
	var perRound []time.Duration
	for i := range r.roundOn {
		perRound = append(perRound, r.roundOn[i]-r.roundOff[i])
	}
	fmt.Printf("check cost: a warm answer of one month by country (%s rollup rows), %d answers each, %d rounds\n",
		fmt.Sprint(r.rollupRows), len(r.on), len(r.roundOn))
	fmt.Printf("  median with the check %s, without %s: +%.3f ms (bootstrap 95%% interval %+.3f to %+.3f ms); median of the per-round differences %+.3f ms; goal <= 0.3 ms: %s\n",
		benchkit.Ms(mOn), benchkit.Ms(mOff), float64(mOn-mOff)/1e6, float64(lo)/1e6, float64(hi)/1e6, float64(benchkit.Median(perRound))/1e6, benchkit.Met(mOn-mOff <= 300*time.Microsecond))
	fmt.Printf("  the fingerprint compared: %s\n\n", r.fingerprint)
}
