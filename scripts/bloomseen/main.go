// Command bloomseen measures a Bloom filter (sketch.Bloom) as the "seen
// before?" oracle of first-seen bookkeeping, against the exact table the
// refresher keeps in PostgreSQL (pgsketch.first_<rollup>: one row per key,
// unique on the key, indexed on its first bucket), for -users known keys
// each (2 M and 20 M by default):
//
//   - build: the exact table filled with the known keys (INSERT ... SELECT
//     from generate_series, its unique index and its bucket index), and
//     the filter sized for them at -p (the false-positive rate) filled
//     with the same keys (as 8 big-endian bytes, as the refresher would
//     add a bigint);
//   - bytes per key: the table's total relation size, the filter's
//     marshaled size;
//   - one day: -day keys, -new of them never seen, asked of each oracle:
//     the exact table the refresher's way (the day's distinct keys in a
//     table, those the key table lacks inserted by an anti-join, in a
//     transaction rolled back), the filter alone (Contains, then Add, in
//     the refresher's process), and the filter as a prefilter in front of
//     the table (keys it has never seen are inserted plainly, the rest by
//     the anti-join as before; both copied in, as the refresher would have
//     to, since its day's keys come from its own read); plus the cost of moving the filter from
//     and to PostgreSQL as a bytea each refresh, which a refresher that
//     does not keep it in memory pays;
//   - error: new keys the filter called seen (false positives), against
//     the rate its shape predicts, at the design fill and at twice it.
//
// Each day measurement is repeated -rounds times, the oracles interleaved;
// medians are printed as Markdown tables. It needs PostgreSQL 15 (a
// throwaway cluster, or -dsn) and Go.
//
//	go run ./scripts/bloomseen [-users 2000000,20000000] [-day 200000] [-new 0.05] [-p 0.01] [-rounds 5] [-dsn URL]
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/sketch"
)

type options struct {
	users  []uint64
	day    int
	newFr  float64
	p      float64
	rounds int
	dsn    string
	keep   string
}

func main() {
	var o options
	var users string
	flag.StringVar(&users, "users", "2000000,20000000", "comma-separated numbers of known keys")
	flag.IntVar(&o.day, "day", 200_000, "distinct keys of the day asked")
	flag.Float64Var(&o.newFr, "new", 0.05, "fraction of the day's keys never seen")
	flag.Float64Var(&o.p, "p", 0.01, "the filter's false-positive rate at its design fill (the known keys)")
	flag.IntVar(&o.rounds, "rounds", 5, "repetitions of the day's measurements")
	benchkit.DSNFlag(&o.dsn, "the tables bloomseen_<n> are made in it")
	benchkit.KeepFlag(&o.keep, "")
	flag.Parse()
	for _, f := range strings.Split(users, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || n == 0 {
			benchkit.Exit("bloomseen", fmt.Errorf("-users: %q", f))
		}
		o.users = append(o.users, n)
	}
	benchkit.Run("bloomseen", o, run)
}

func key(k uint64) []byte { return binary.BigEndian.AppendUint64(nil, k) }

// result is one size's measurements.
type result struct {
	n                                    uint64
	tableBuild, bloomBuild               time.Duration
	tableBytes, bloomBytes               int64
	exactDay, bloomDay, prefilterDay     time.Duration
	bloomMove                            time.Duration
	missed, newKeys                      int
	predicted, missedAt2x, predictedAt2x float64
	probesSaved                          float64
}

func run(ctx context.Context, o options) error {
	dsn, stop, err := benchkit.Database(ctx, o.dsn, o.keep, benchkit.Settings())
	if err != nil {
		return err
	}
	defer stop()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var res []result
	for _, n := range o.users {
		r, err := measure(ctx, conn, o, n)
		if err != nil {
			return err
		}
		res = append(res, r)
	}
	fmt.Printf("\nknown keys %v; a day of %d distinct keys, %.0f%% never seen; filter p = %g; medians of %d rounds\n\n",
		o.users, o.day, 100*o.newFr, o.p, o.rounds)
	fmt.Println("| known keys | exact table: bytes/key, build | filter: bytes/key, build | one day: exact table | filter alone | filter + moving it as bytea | filter as prefilter, then table | probes the prefilter saves |")
	fmt.Println("|---:|---|---|---:|---:|---:|---:|---:|")
	for _, r := range res {
		fmt.Printf("| %d | %.1f B, %s | %.2f B, %s | %s | %s | %s | %s | %.1f%% |\n", r.n,
			float64(r.tableBytes)/float64(r.n), r.tableBuild.Round(time.Millisecond),
			float64(r.bloomBytes)/float64(r.n), r.bloomBuild.Round(time.Millisecond),
			benchkit.Ms(r.exactDay), benchkit.Ms(r.bloomDay), benchkit.Ms(r.bloomDay+r.bloomMove), benchkit.Ms(r.prefilterDay), r.probesSaved)
	}
	fmt.Println()
	fmt.Println("| known keys | new keys of the day | called seen by the filter (missed) | rate | predicted (1 − e^(−kn/m))^k | at twice the design fill: measured, predicted |")
	fmt.Println("|---:|---:|---:|---:|---:|---|")
	for _, r := range res {
		fmt.Printf("| %d | %d | %d | %.3f%% | %.3f%% | %.2f%%, %.2f%% |\n", r.n, r.newKeys, r.missed,
			100*float64(r.missed)/float64(r.newKeys), 100*r.predicted, 100*r.missedAt2x, 100*r.predictedAt2x)
	}
	return nil
}

// measure makes the table and the filter of n known keys (1..n) and times
// the day's oracles.
func measure(ctx context.Context, conn *pgx.Conn, o options, n uint64) (result, error) {
	r := result{n: n}
	tbl := fmt.Sprintf("bloomseen_%d", n)
	fmt.Printf("%d known keys: building the table and the filter...\n", n)
	t0 := time.Now()
	if _, err := conn.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %[1]s;
		CREATE TABLE %[1]s (key bigint, bucket timestamptz NOT NULL, CONSTRAINT %[1]s_key UNIQUE NULLS NOT DISTINCT (key));
		CREATE INDEX ON %[1]s (bucket);
		INSERT INTO %[1]s SELECT k, timestamptz '2026-01-01' + (k %% 90) * interval '1 day' FROM generate_series(1, %[2]d) k`, tbl, n)); err != nil {
		return r, err
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+tbl); err != nil {
		return r, err
	}
	r.tableBuild = time.Since(t0)
	if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", tbl).Scan(&r.tableBytes); err != nil {
		return r, err
	}
	t0 = time.Now()
	b, err := sketch.NewBloom(n, o.p)
	if err != nil {
		return r, err
	}
	for k := uint64(1); k <= n; k++ {
		b.Add(key(k))
	}
	r.bloomBuild = time.Since(t0)
	enc, err := b.MarshalBinary()
	if err != nil {
		return r, err
	}
	r.bloomBytes = int64(len(enc))
	r.predicted = b.FalsePositiveRate(n)

	// The day's keys: known ones drawn at random, then new ones.
	rng := rand.New(rand.NewPCG(n, 7))
	nNew := int(float64(o.day) * o.newFr)
	seen := map[uint64]bool{}
	var day []uint64
	for len(day) < o.day-nNew {
		k := 1 + rng.Uint64N(n)
		if !seen[k] {
			seen[k] = true
			day = append(day, k)
		}
	}
	for i := range nNew {
		day = append(day, n+1+uint64(i))
	}
	r.newKeys = nNew
	if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS bloomseen_day; CREATE TABLE bloomseen_day (key bigint, bucket timestamptz)`); err != nil {
		return r, err
	}
	rows := make([][]any, len(day))
	for i, k := range day {
		rows[i] = []any{int64(k), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"bloomseen_day"}, []string{"key", "bucket"}, pgx.CopyFromRows(rows)); err != nil {
		return r, err
	}
	if _, err := conn.Exec(ctx, `ANALYZE bloomseen_day`); err != nil {
		return r, err
	}

	var exact, alone, pre, move []time.Duration
	for range o.rounds {
		// The exact table, the refresher's way.
		d, inserted, err := exactDay(ctx, conn, tbl, "bloomseen_day")
		if err != nil {
			return r, err
		}
		if inserted != int64(nNew) {
			return r, fmt.Errorf("the exact table found %d new keys, want %d", inserted, nNew)
		}
		exact = append(exact, d)

		// The filter alone, on a copy (the day is asked afresh each round).
		c := b.Clone()
		t0 := time.Now()
		missed := 0
		for i, k := range day {
			kb := key(k)
			if c.Contains(kb) {
				if i >= len(day)-nNew {
					missed++
				}
				continue
			}
			c.Add(kb)
		}
		alone = append(alone, time.Since(t0))
		r.missed = missed

		// Moving the filter: read from and written back to PostgreSQL.
		t0 = time.Now()
		var back []byte
		if err := conn.QueryRow(ctx, "SELECT $1::bytea", enc).Scan(&back); err != nil {
			return r, err
		}
		move = append(move, time.Since(t0))

		// The filter as a prefilter: keys it has never seen are new
		// without a probe (inserted plainly: the unique index still checks
		// them); the others are asked of the table as before.
		t0 = time.Now()
		var maybe, fresh [][]any
		for _, k := range day {
			row := []any{int64(k), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
			if b.Contains(key(k)) {
				maybe = append(maybe, row)
			} else {
				fresh = append(fresh, row)
			}
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return r, err
		}
		for _, part := range []struct {
			rows [][]any
			sql  string
		}{
			{maybe, `INSERT INTO %[1]s (key, bucket) SELECT n.key, n.bucket FROM (SELECT d.key, min(d.bucket) AS bucket FROM bloomseen_part d GROUP BY d.key) n
				WHERE NOT EXISTS (SELECT FROM %[1]s p WHERE p.key = n.key) ON CONFLICT (key) DO NOTHING`},
			{fresh, `INSERT INTO %[1]s (key, bucket) SELECT d.key, min(d.bucket) FROM bloomseen_part d GROUP BY d.key`},
		} {
			if _, err := tx.Exec(ctx, `CREATE TEMP TABLE bloomseen_part (key bigint, bucket timestamptz) ON COMMIT DROP`); err != nil {
				tx.Rollback(ctx)
				return r, err
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"bloomseen_part"}, []string{"key", "bucket"}, pgx.CopyFromRows(part.rows)); err != nil {
				tx.Rollback(ctx)
				return r, err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(part.sql, tbl)+"; DROP TABLE bloomseen_part"); err != nil {
				tx.Rollback(ctx)
				return r, err
			}
		}
		if err := tx.Rollback(ctx); err != nil {
			return r, err
		}
		pre = append(pre, time.Since(t0))
		r.probesSaved = 100 * float64(len(day)-len(maybe)) / float64(len(day))
	}
	r.exactDay, r.bloomDay, r.prefilterDay, r.bloomMove = benchkit.Median(exact), benchkit.Median(alone), benchkit.Median(pre), benchkit.Median(move)

	// Past the design fill: n more keys added, then n fresh ones asked.
	c := b.Clone()
	for k := n + 1; k <= 2*n; k++ {
		c.Add(key(k))
	}
	fp := 0
	probe := min(n, 1_000_000)
	for k := 3 * n; k < 3*n+probe; k++ {
		if c.Contains(key(k)) {
			fp++
		}
	}
	r.missedAt2x, r.predictedAt2x = float64(fp)/float64(probe), c.FalsePositiveRate(2*n)
	_, err = conn.Exec(ctx, "DROP TABLE "+tbl+"; DROP TABLE bloomseen_day")
	return r, err
}

// exactDay inserts the day's distinct keys of table day into tbl as the
// refresher does (pgsketch.first_seen_update: an anti-join against the
// table, ON CONFLICT for a NULL key), in a transaction rolled back, and returns the time and
// the keys inserted (the new ones).
func exactDay(ctx context.Context, conn *pgx.Conn, tbl, day string) (time.Duration, int64, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback(context.Background())
	t0 := time.Now()
	tag, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s (key, bucket) SELECT n.key, n.bucket FROM (SELECT d.key, min(d.bucket) AS bucket FROM %[2]s d GROUP BY d.key) n
		WHERE NOT EXISTS (SELECT FROM %[1]s p WHERE p.key = n.key) ON CONFLICT (key) DO NOTHING`, tbl, day))
	return time.Since(t0), tag.RowsAffected(), err
}
