package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgsketch/pgsketch/refresh"
)

// TestRollupCollation: a text column whose collation is not the
// database's default (here an ICU one, whose order puts "ar" before "AR",
// where the test cluster's C puts "AR" before "ar") orders, and takes its
// min and max, as PostgreSQL does on the base table, whether the query is
// answered from the rollup or passed through.
func TestRollupCollation(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 10)
	ctx := context.Background()
	var coll string
	if err := conn.QueryRow(ctx, `SELECT collname FROM pg_collation WHERE collname IN ('und-x-icu', 'en-x-icu')
		ORDER BY collname DESC LIMIT 1`).Scan(&coll); err != nil {
		t.Fatalf("no ICU collation in the test cluster: %v", err)
	}
	mustExec(t, conn, fmt.Sprintf(`ALTER TABLE events ALTER COLUMN country TYPE text COLLATE %q;
		UPDATE events SET country = lower(country) WHERE id %% 3 = 0; ANALYZE events`, coll))
	createRollup(t, conn, "daily", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}',
		min_columns => '{country}', max_columns => '{country}'`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	proxied := connectSimple(t, p.URL(db.DSN))

	for _, tc := range []struct {
		sql string
		// cols are the columns compared with PostgreSQL's answer (the
		// others are distinct counts, approximated or not).
		cols []int
	}{
		{"SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country ORDER BY country LIMIT 3", []int{0}},
		{"SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country ORDER BY country DESC NULLS LAST LIMIT 3", []int{0}},
		{"SELECT min(country) AS lo, max(country) AS hi, count(DISTINCT user_id) AS users FROM events", []int{0, 1}},
		{"SELECT device, min(country) AS lo, count(DISTINCT user_id) AS users FROM events GROUP BY device ORDER BY device", []int{0, 1}},
		{"SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country HAVING country > 'm' ORDER BY 1", []int{0}},
		{"SELECT min(country) AS lo, count(DISTINCT user_id) AS users FROM events WHERE country <> 'US'", []int{0}},
	} {
		exact, err := conn.Query(ctx, tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		var want [][]string
		for exact.Next() {
			var r []string
			for _, v := range exact.RawValues() {
				r = append(r, string(v))
			}
			want = append(want, r)
		}
		exact.Close()
		if err := exact.Err(); err != nil {
			t.Fatal(err)
		}
		got, err := proxied.query(ctx, tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		pick := func(rows [][]string) (out []string) {
			for _, r := range rows {
				var vs []string
				for _, c := range tc.cols {
					vs = append(vs, r[c])
				}
				out = append(out, strings.Join(vs, "|"))
			}
			return out
		}
		if g, w := pick(got.rows), pick(want); fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s:\n through the proxy %q (NOTICE %q)\n PostgreSQL        %q", tc.sql, g, got.notices, w)
		}
	}
	// A query that does not name the column is still answered from the
	// rollup.
	got, err := proxied.query(ctx, "SELECT device, count(DISTINCT user_id) AS users FROM events GROUP BY device ORDER BY device")
	if err != nil || len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup daily") {
		t.Errorf("by device: %v %v", got, err)
	}
}
