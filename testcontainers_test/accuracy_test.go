package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pgsketch/pgsketch/refresh"
)

// accuracyKinds are the plan kinds whose distinct counts are estimated in
// different places, each a statement of at least 40 groups: the rollup's
// own groups merged by the proxy; a join to a dimension table, returned
// as is (the proxy estimates PostgreSQL's united sketches) and ordered by
// the count (PostgreSQL estimates them with pgsketch.hll_estimate); a
// ROLLUP; FILTER measures; an aggregate subquery of a larger statement;
// New York's weeks from an hourly UTC rollup; a nested view (a series
// crossed with the table, the counts under CASE); rolling windows, as
// analysts and as Cube write them.
var accuracyKinds = []struct{ kind, sql string }{
	{"one table, merged by the proxy",
		`SELECT country, date_trunc('month', created_at) AS m, count(DISTINCT user_id) AS users FROM events
		  WHERE created_at < '2026-03-29' GROUP BY 1, 2`},
	{"join, estimated by the proxy",
		`SELECT c.region, date_trunc('week', e.created_at) AS w, count(DISTINCT e.user_id) AS users FROM events e
		  JOIN countries c ON c.code = e.country WHERE e.created_at >= '2026-01-05' AND e.created_at < '2026-03-23' GROUP BY 1, 2`},
	{"join, estimated in PostgreSQL",
		`SELECT c.region, date_trunc('week', e.created_at) AS w, count(DISTINCT e.user_id) AS users FROM events e
		  JOIN countries c ON c.code = e.country WHERE e.created_at >= '2026-01-05' AND e.created_at < '2026-03-23' GROUP BY 1, 2
		  ORDER BY users DESC`},
	{"ROLLUP, estimated by the proxy",
		`SELECT GROUPING(country, device) AS g, country, device, count(DISTINCT user_id) AS users FROM events WHERE created_at < '2026-03-01'
		  GROUP BY ROLLUP (country, device)`},
	{"FILTER measures",
		`SELECT country, date_trunc('month', created_at) AS m, count(DISTINCT user_id) FILTER (WHERE device = 'ios') AS users FROM events
		  WHERE created_at < '2026-03-29' GROUP BY 1, 2`},
	{"aggregate subquery",
		`SELECT s.country, s.m, s.users FROM (SELECT country, date_trunc('month', created_at) AS m, count(DISTINCT user_id) AS users
		  FROM events WHERE created_at < '2026-03-29' GROUP BY 1, 2) AS s WHERE s.users >= 0`},
	{"New York's weeks, the hourly rollup",
		`SELECT country, date_trunc('week', created_at AT TIME ZONE 'America/New_York') AS w, count(DISTINCT user_id) AS users FROM events
		  WHERE created_at >= '2026-01-05 05:00+00' AND created_at < '2026-03-23 04:00+00' GROUP BY 1, 2`},
	{"a nested view (CROSS JOIN a series), estimated in PostgreSQL",
		`SELECT group_set, e.country, CASE WHEN group_set = 1 THEN e.device END AS device,
		  CASE WHEN group_set >= 0 THEN count(DISTINCT e.user_id) END AS users
		  FROM events e CROSS JOIN generate_series(0, 1, 1) AS group_set WHERE e.created_at < '2026-03-29' GROUP BY 1, 2, 3`},
	{"rolling windows (a series joined to the facts)",
		`SELECT d.d, count(DISTINCT e.user_id) AS users FROM generate_series('2026-01-08'::timestamp, '2026-03-20'::timestamp, interval '1 day') AS d
		  LEFT JOIN events e ON e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + interval '1 day' GROUP BY 1`},
	{"Cube's rolling windows (a VALUES list joined to a subquery), estimated in PostgreSQL", cubeRollingSQL("2026-02-01", 42)},
}

// cubeRollingSQL is 7-day active users per day as Cube writes it, for n
// days from first, its parameters written in.
func cubeRollingSQL(first string, n int) string {
	start, _ := time.Parse("2006-01-02", first)
	var rows []string
	for i := range n {
		d := start.AddDate(0, 0, i).Format("2006-01-02")
		rows = append(rows, fmt.Sprintf("('%sT00:00:00.000', '%sT23:59:59.999')", d, d))
	}
	last := start.AddDate(0, 0, n-1).Format("2006-01-02")
	return `SELECT q_0.day, users FROM (SELECT s.date_from AS day, count(distinct "users") AS users
		FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + strings.Join(rows, ",") + `) AS dates (date_from, date_to)) AS s
		LEFT JOIN (SELECT (e.created_at::timestamptz AT TIME ZONE 'UTC') AS "day", e.user_id AS "users" FROM events AS e
		  WHERE (e.created_at::timestamptz AT TIME ZONE 'UTC') > '` + first + `T00:00:00.000'::timestamp - interval '7 days'
		    AND (e.created_at::timestamptz AT TIME ZONE 'UTC') <= '` + last + `T23:59:59.999'::timestamp) AS b
		ON b."day" > s.date_to - interval '7 days' AND b."day" <= s.date_to GROUP BY 1) AS q_0 ORDER BY 1`
}

// TestAccuracyByPlanKind: through the proxy, each plan kind's estimates
// against PostgreSQL's exact counts over at least 40 groups, in standard
// errors of the one the notice states (1.04/√m at log2m 14): the root
// mean square at most 1.5 and at most one group beyond 3. It logs the
// table docs/accuracy.md quotes.
func TestAccuracyByPlanKind(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 2_000_000, 90, "2026-03-29 12:00", "3 days")
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	direct := connectSimple(t, db.DSN)
	proxied := connectSimple(t, p.URL(db.DSN))
	ctx := context.Background()
	table := []string{"| plan kind | groups | RMS error | RMS (standard errors) | max (standard errors) | beyond 3 SE |", "|---|---:|---:|---:|---:|---:|"}
	for _, k := range accuracyKinds {
		want, err := direct.query(ctx, k.sql)
		if err != nil {
			t.Fatalf("%s: direct: %v", k.kind, err)
		}
		got, err := proxied.query(ctx, k.sql)
		if err != nil {
			t.Fatalf("%s: through the proxy: %v", k.kind, err)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "(standard error 0.81%)") {
			t.Errorf("%s: notices %q, want one stating 0.81 %%", k.kind, got.notices)
			continue
		}
		exact := map[string]float64{}
		// A group's key: its values, NULL told from '' (ROLLUP's
		// subtotals beside a group whose dimension is NULL).
		key := func(a *answer, i int) string {
			var b strings.Builder
			for j, v := range a.rows[i][:len(a.rows[i])-1] {
				fmt.Fprintf(&b, "%v:%q|", a.nulls[i][j], v)
			}
			return b.String()
		}
		for i, r := range want.rows {
			var v float64
			fmt.Sscan(r[len(r)-1], &v)
			if _, dup := exact[key(want, i)]; dup {
				t.Fatalf("%s: group %q twice in the exact answer", k.kind, r)
			}
			exact[key(want, i)] = v
		}
		if len(got.rows) != len(want.rows) || len(got.rows) < 40 {
			t.Errorf("%s: %d groups through the proxy, %d exact; want the same, at least 40", k.kind, len(got.rows), len(want.rows))
			continue
		}
		var sumRel, sumSE, worst float64
		var beyond3 int
		var errs []float64
		for i, r := range got.rows {
			x, ok := exact[key(got, i)]
			if !ok {
				t.Errorf("%s: group %q not in the exact answer", k.kind, r)
				continue
			}
			var est float64
			fmt.Sscan(r[len(r)-1], &est)
			se := stdErrs(est, x)
			rel := 0.0
			if x > 0 {
				rel = (est - x) / x
			}
			sumRel += rel * rel
			sumSE += se * se
			worst = max(worst, se)
			if se > 3 {
				beyond3++
			}
			errs = append(errs, se)
		}
		n := float64(len(got.rows))
		rmsSE := math.Sqrt(sumSE / n)
		sort.Float64s(errs)
		table = append(table, fmt.Sprintf("| %s | %d | %.2f %% | %.2f | %.2f | %d (%.1f %%) |", k.kind, len(got.rows),
			100*math.Sqrt(sumRel/n), rmsSE, worst, beyond3, 100*float64(beyond3)/n))
		if rmsSE > 1.5 || beyond3 > 1 {
			t.Errorf("%s: RMS %.2f standard errors, %d of %d groups beyond 3 (want ≤ 1.5 and ≤ 1)", k.kind, rmsSE, beyond3, len(got.rows))
		}
	}
	t.Log("\n" + strings.Join(table, "\n"))
}
