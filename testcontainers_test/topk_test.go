package e2e

import (
	"context"
	endian "encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/aggregates/refresh"
	"github.com/pgsketch/pgsketch/migrations"
	"github.com/pgsketch/pgsketch/sketch"
)

// freqOf reads a stored frequent-items summary.
func freqOf(t *testing.T, b []byte) *sketch.Freq {
	t.Helper()
	var f sketch.Freq
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatalf("stored top-k summary: %v", err)
	}
	return &f
}

// TestTopkRollupBounds: a rollup's top-k summaries, small enough to prune,
// bound every item's exact count in every bucket (NULL an item too) and
// count every row; bad sizes and types are refused.
func TestTopkRollupBounds(t *testing.T) {
	t.Parallel()
	tdb, conn := catalogDB(t)
	ctx := context.Background()
	mustExec(t, conn, `CREATE TABLE hits (t timestamptz NOT NULL, i8 bigint, s text, n numeric);
		INSERT INTO hits SELECT timestamptz '2026-01-01' + i * interval '1 minute',
		       CASE WHEN i % 13 = 0 THEN NULL WHEN i % 3 = 0 THEN i % 7 ELSE (i * 7919) % 400 END,
		       'page' || CASE WHEN i % 2 = 0 THEN i % 5 ELSE i % 211 END, i
		  FROM generate_series(1, 20000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('hits_daily', 'hits', 't', topk_columns => '{i8,s}', topk_size => 16)`)
	refreshRollup(t, conn, "hits_daily", refresh.Options{})

	type key struct {
		day  int64
		item string
	}
	exact := map[string]map[key]int64{"i8": {}, "s": {}}
	for _, col := range []string{"i8", "s"} {
		rows, err := conn.Query(ctx, `SELECT date_trunc('day', t, 'UTC'), `+col+`::text, count(*) FROM hits GROUP BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var day time.Time
			var item *string
			var n int64
			if err := rows.Scan(&day, &item, &n); err != nil {
				t.Fatal(err)
			}
			k := key{day: day.Unix(), item: "\x00NULL"}
			if item != nil {
				k.item = *item
			}
			exact[col][k] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.Query(ctx, `SELECT bucket, row_count, topk_i8, topk_s FROM hits_daily`)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[int64][2]*sketch.Freq{}
	var counts = map[int64]int64{}
	for rows.Next() {
		var day time.Time
		var n int64
		var a, b []byte
		if err := rows.Scan(&day, &n, &a, &b); err != nil {
			t.Fatal(err)
		}
		sums[day.Unix()] = [2]*sketch.Freq{freqOf(t, a), freqOf(t, b)}
		counts[day.Unix()] = n
	}
	if err := rows.Err(); err != nil || len(sums) < 13 {
		t.Fatalf("%d buckets (%v)", len(sums), err)
	}
	pruned := 0
	for j, col := range []string{"i8", "s"} {
		for k, n := range exact[col] {
			f := sums[k.day][j]
			var lo, hi int64
			switch {
			case k.item == "\x00NULL":
				lo, hi = f.NullBounds()
			case col == "i8":
				var v int64
				for _, c := range k.item {
					if c != '-' {
						v = v*10 + int64(c-'0')
					}
				}
				if strings.HasPrefix(k.item, "-") {
					v = -v
				}
				lo, hi = f.Bounds(endian.BigEndian.AppendUint64(nil, uint64(v)))
			default:
				lo, hi = f.Bounds([]byte(k.item))
			}
			if n < lo || n > hi {
				t.Errorf("%s %q on day %d: exact %d outside [%d, %d]", col, k.item, k.day, n, lo, hi)
			}
		}
		for day, fs := range sums {
			if fs[j].N() != counts[day] {
				t.Errorf("%s on day %d: N %d, row count %d", col, day, fs[j].N(), counts[day])
			}
			if fs[j].MaxError() > 0 {
				pruned++
			}
		}
	}
	if pruned == 0 {
		t.Fatal("no summary was pruned: the test does not exercise the bounds")
	}
	// Migrating below the version that added topk measures is refused
	// while a rollup keeps one.
	m, err := migrations.Open(tdb.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Down(int(migrations.Latest()) - 7); err == nil || !strings.Contains(err.Error(), "keep topk measures") {
		t.Fatalf("down with a topk rollup: %v", err)
	}
	for _, c := range []struct{ args, code, msg string }{
		{`topk_columns => '{n}'`, "42804", "cannot keep a top-k summary of column n of type numeric"},
		{`topk_columns => '{i8}', topk_size => 100`, "22023", "topk_size 100 is not a power of two"},
	} {
		_, err := conn.Exec(ctx, `SELECT pgsketch.create_rollup('bad', 'hits', 't', `+c.args+`)`)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != c.code || !strings.Contains(pe.Message, c.msg) {
			t.Errorf("%s: got %v, want %s %q", c.args, err, c.code, c.msg)
		}
	}
}

// TestTopkRollupEvents: a top-k summary of user_id beside the other
// measures of the events rollup: a week level's summaries bound the week's
// exact counts of the users they track, and an incremental refresh after
// late rows gives the bytes of a full rebuild by several streams.
func TestTopkRollupEvents(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 200_000, 28)
	ctx := context.Background()
	args := `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}', topk_columns => '{user_id}', sum_columns => '{amount}'`
	createRollup(t, conn, "tk", args)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('tk', 'week')`)
	refreshRollup(t, conn, "tk", refresh.Options{Full: true})
	rows, err := conn.Query(ctx, `SELECT w.topk_user_id, x.users, x.counts FROM tk_week w JOIN (
		SELECT b, country, device, array_agg(user_id) AS users, array_agg(n) AS counts
		  FROM (SELECT date_trunc('week', created_at, 'UTC') AS b, country, device, user_id, count(*) AS n FROM events GROUP BY 1, 2, 3, 4) e
		 GROUP BY 1, 2, 3) x ON x.b = w.bucket AND x.country IS NOT DISTINCT FROM w.country AND x.device IS NOT DISTINCT FROM w.device`)
	if err != nil {
		t.Fatal(err)
	}
	cells := 0
	for rows.Next() {
		var b []byte
		var users, counts []int64
		if err := rows.Scan(&b, &users, &counts); err != nil {
			t.Fatal(err)
		}
		f := freqOf(t, b)
		for i, u := range users {
			lo, hi := f.Bounds(endian.BigEndian.AppendUint64(nil, uint64(u)))
			if counts[i] < lo || counts[i] > hi {
				t.Fatalf("user %d: exact %d outside [%d, %d]", u, counts[i], lo, hi)
			}
		}
		cells++
	}
	if err := rows.Err(); err != nil || cells < 100 {
		t.Fatalf("%d week cells (%v)", cells, err)
	}
	mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 10000000 + i, timestamptz '2026-01-03' + i * interval '1 minute', 7, 'DE', 'web', 1 FROM generate_series(1, 300) i`)
	refreshRollup(t, conn, "tk", refresh.Options{})
	sameAsFull(t, conn, "tk", args)
}
