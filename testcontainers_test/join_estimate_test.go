package e2e

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/sketch"
)

// TestUnitedInPostgresEstimatedAsStated: where PostgreSQL unites the
// rollup's sketches itself (a join to a dimension table, a ROLLUP, a
// HAVING or ORDER BY on the distinct count), each answer is pgsketch's
// estimate of the united sketch, the estimator whose standard error the
// notice states, and not the extension's hll_cardinality (classic
// HyperLogLog, biased by up to a few per cent at 2.5 to 5 times the
// number of registers, where these groups are).
func TestUnitedInPostgresEstimatedAsStated(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	ctx := context.Background()
	mustExec(t, conn, `CREATE TABLE events (created_at timestamptz NOT NULL, user_id bigint, country text)`)
	// Twelve countries of about 12 700 users each, neighbours sharing half
	// of theirs: regions of three or four of them hold 26 000 to 34 000
	// users, five countries 40 000 and all twelve 88 000, around and in
	// the range where the two estimators part most at log2m 14. One
	// country has no region.
	mustExec(t, conn, `INSERT INTO events
		SELECT '2026-01-01'::timestamptz + (d || ' days')::interval + (i || ' seconds')::interval,
		       c * 7000 + (hashint4(d * 100000 + c * 5000 + i) & 16383) % 15000,
		       'C' || c
		  FROM generate_series(0, 9) AS d, generate_series(0, 11) AS c, generate_series(1, 3000) AS i`)
	mustExec(t, conn, `CREATE TABLE countries (code text PRIMARY KEY, region text)`)
	mustExec(t, conn, `INSERT INTO countries
		SELECT 'C' || c, CASE WHEN c < 11 THEN 'R' || (c / 4) END FROM generate_series(0, 11) AS c`)
	createRollup(t, conn, "daily", `grain => 'day', dimensions => '{country}', distinct_columns => '{user_id}'`)
	refreshRollup(t, conn, "daily", refresh.Options{})

	// The sketches per country, from the rollup table.
	var table string
	if err := conn.QueryRow(ctx, `SELECT format('%I.%I', rollup_schema, rollup_table) FROM pgsketch.rollup_defs WHERE name = 'daily'`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT country, distinct_user_id FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	byCountry := map[string]*sketch.HLL{}
	for rows.Next() {
		var c string
		var b []byte
		if err := rows.Scan(&c, &b); err != nil {
			t.Fatal(err)
		}
		h := new(sketch.HLL)
		if err := h.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if byCountry[c] == nil {
			byCountry[c] = h
		} else if err := byCountry[c].Union(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(byCountry) != 12 {
		t.Fatalf("%d countries in the rollup, want 12", len(byCountry))
	}
	union := func(codes ...string) float64 {
		u, err := sketch.NewHLL(14, 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range codes {
			if err := u.Union(byCountry[c]); err != nil {
				t.Fatal(err)
			}
		}
		return u.Estimate()
	}
	region := func(r int) []string {
		var codes []string
		for c := 4 * r; c < min(4*r+4, 11); c++ {
			codes = append(codes, "C"+strconv.Itoa(c))
		}
		return codes
	}
	var all []string
	for c := range 12 {
		all = append(all, "C"+strconv.Itoa(c))
	}

	p := startProxy(t, server.adminURL, "--approx", "on")
	proxied := connectSimple(t, p.URL(db.DSN))
	cases := []struct {
		sql  string
		want map[string]float64 // by the first column's text
	}{
		{`SELECT c.region, count(DISTINCT e.user_id) AS users FROM events e JOIN countries c ON c.code = e.country
		   GROUP BY c.region ORDER BY users DESC`,
			map[string]float64{"R0": union(region(0)...), "R1": union(region(1)...), "R2": union(region(2)...), "": union("C11")}},
		{`SELECT c.region, count(DISTINCT e.user_id) AS users FROM events e JOIN countries c ON c.code = e.country
		   GROUP BY c.region HAVING count(DISTINCT e.user_id) > 20000 ORDER BY 1`,
			map[string]float64{"R0": union(region(0)...), "R1": union(region(1)...), "R2": union(region(2)...)}},
		{`SELECT coalesce(c.region, 'none'), count(DISTINCT e.user_id) AS users FROM events e LEFT JOIN countries c ON c.code = e.country
		   GROUP BY 1 ORDER BY 1`,
			map[string]float64{"R0": union(region(0)...), "R1": union(region(1)...), "R2": union(region(2)...), "none": union("C11")}},
		{`SELECT coalesce(country, 'all'), count(DISTINCT user_id) FROM events WHERE country IN ('C0', 'C1', 'C2', 'C3', 'C4')
		   GROUP BY ROLLUP (country) ORDER BY 1`,
			map[string]float64{"all": union("C0", "C1", "C2", "C3", "C4"), "C0": union("C0"), "C1": union("C1"),
				"C2": union("C2"), "C3": union("C3"), "C4": union("C4")}},
		{`SELECT 'everyone', count(DISTINCT e.user_id) * 1 FROM events e JOIN countries c ON c.code = e.country`,
			map[string]float64{"everyone": union(all...)}},
	}
	for _, c := range cases {
		got, err := proxied.query(ctx, c.sql)
		if err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup daily (standard error 0.81%)") {
			t.Errorf("%s: notices %q, want the rollup's", c.sql, got.notices)
			continue
		}
		if len(got.rows) != len(c.want) {
			t.Errorf("%s: %d rows %q, want %d", c.sql, len(got.rows), got.rows, len(c.want))
			continue
		}
		for _, r := range got.rows {
			want, ok := c.want[r[0]]
			if !ok {
				t.Errorf("%s: unexpected row %q", c.sql, r)
				continue
			}
			v, err := strconv.ParseFloat(r[1], 64)
			if err != nil {
				t.Errorf("%s: row %q: %v", c.sql, r, err)
				continue
			}
			if math.Abs(v-want) > 1 {
				t.Errorf("%s: %s = %v, pgsketch's estimate of the united sketch is %.1f (%+.2f %%)", c.sql, r[0], v, want, 100*(v-want)/want)
			}
		}
		t.Logf("%s: %q", strings.Join(strings.Fields(c.sql), " "), got.rows)
	}
}
