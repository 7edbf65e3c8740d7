package e2e

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

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
		// Returned as they are, the united sketches are estimated by the
		// proxy.
		{`SELECT c.region, count(DISTINCT e.user_id) AS users, count(*) AS events FROM events e JOIN countries c ON c.code = e.country
		   GROUP BY c.region`,
			map[string]float64{"R0": union(region(0)...), "R1": union(region(1)...), "R2": union(region(2)...), "": union("C11")}},
		{`SELECT coalesce(country, 'all'), count(DISTINCT user_id) FROM events WHERE country IN ('C0', 'C1', 'C2', 'C3', 'C4')
		   GROUP BY ROLLUP (country)`,
			map[string]float64{"all": union("C0", "C1", "C2", "C3", "C4"), "C0": union("C0"), "C1": union("C1"),
				"C2": union("C2"), "C3": union("C3"), "C4": union("C4")}},
		{`SELECT c.region, count(DISTINCT e.user_id) AS users FROM events e JOIN countries c ON c.code = e.country
		   WHERE c.region = 'nowhere' GROUP BY ROLLUP (c.region)`,
			map[string]float64{"": 0}},
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied := connectMode(t, p.URL(db.DSN), mode)
		for _, c := range cases {
			checkUnited(t, ctx, proxied, mode, c.sql, c.want)
		}
	}
}

// checkUnited requires sql's answer through the proxy to be a bigint in
// its second column, want by the text of the first, within 1 (rounding).
func checkUnited(t *testing.T, ctx context.Context, proxied *noticeConn, mode pgx.QueryExecMode, sql string, want map[string]float64) {
	t.Helper()
	got, err := proxied.query(ctx, sql)
	if err != nil {
		t.Errorf("%v: %s: %v", mode, sql, err)
		return
	}
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup daily (standard error 0.81%)") {
		t.Errorf("%v: %s: notices %q, want the rollup's", mode, sql, got.notices)
		return
	}
	if len(got.rows) != len(want) {
		t.Errorf("%v: %s: %d rows %q, want %d", mode, sql, len(got.rows), got.rows, len(want))
		return
	}
	if f := got.fields[1]; f.DataTypeOID != 20 || f.DataTypeSize != 8 {
		t.Errorf("%v: %s: column 2 is of type %d (size %d), want bigint", mode, sql, f.DataTypeOID, f.DataTypeSize)
	}
	for _, r := range got.rows {
		w, ok := want[r[0]]
		if !ok {
			t.Errorf("%v: %s: unexpected row %q", mode, sql, r)
			continue
		}
		v, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			t.Errorf("%v: %s: row %q: %v", mode, sql, r, err)
			continue
		}
		if math.Abs(v-w) > 1 {
			t.Errorf("%v: %s: %s = %v, pgsketch's estimate of the united sketch is %.1f (%+.2f %%)", mode, sql, r[0], v, w, 100*(v-w)/w)
		}
	}
	t.Logf("%v: %s: %q", mode, strings.Join(strings.Fields(sql), " "), got.rows)
}
