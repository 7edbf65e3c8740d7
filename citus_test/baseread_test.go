//go:build citus

package citus

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestCitusBaseRead: on a distributed source the proxy reads the base rows
// in a second statement, over the spans the first returns. Checked against
// PostgreSQL: a ragged range bound as parameters of the extended protocol
// (binary timestamps), changed buckets inside it, the rows whose time is
// NULL (read for a query without a time range), and a source whose time
// column is a timestamp without time zone.
func TestCitusBaseRead(t *testing.T) {
	conn, schema, table, name := distributedRollup(t)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())

	ragged := `SELECT country, count(*), count(DISTINCT user_id) FROM ` + table +
		` WHERE created_at >= $1 AND created_at < $2 GROUP BY country`
	from := time.Date(2026, 1, 4, 7, 30, 0, 0, time.UTC)
	to := time.Date(2026, 1, 18, 16, 45, 0, 0, time.UTC)
	checkParams(t, pc, conn, ragged, from, to)

	// Changed buckets inside the range and at its edges.
	mustExec(t, conn, `INSERT INTO `+table+` SELECT 91000000 + g, timestamptz '2026-01-04 08:00+00' + g * interval '1 day', 940000 + g, 'DE', 'ios', 1
		FROM generate_series(0, 14) g`)
	checkParams(t, pc, conn, ragged, from, to)

	// Rows whose time is NULL: no bucket holds them. (The rollup is
	// answered exactly from the ALTER TABLE to its next refresh.)
	mustExec(t, conn, `ALTER TABLE `+table+` ALTER COLUMN created_at DROP NOT NULL`)
	if r := cli(t, "rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
		t.Fatalf("rollup refresh: %s", r)
	}
	mustExec(t, conn, `INSERT INTO `+table+` SELECT 92000000 + g, NULL, 950000 + g, 'FR', 'web', 1 FROM generate_series(1, 30) g`)
	checkFresh(t, pc, conn, table, "")

	// A timestamp without time zone: the spans are timestamps.
	plain := schema + ".plain"
	mustExec(t, conn, `CREATE TABLE `+plain+` AS SELECT id, created_at AT TIME ZONE 'UTC' AS created_at, user_id, country, device, amount FROM `+table+
		` WHERE created_at IS NOT NULL`)
	mustExec(t, conn, `SELECT create_distributed_table('`+plain+`', 'user_id', colocate_with => '`+table+`')`)
	if r := rollupCreate(t, coordURL(), name+"_plain", plain); r.code != 0 {
		t.Fatalf("rollup create on a timestamp column: %s", r)
	}
	mustExec(t, conn, `INSERT INTO `+plain+` VALUES (93000001, '2026-01-06 10:00', 960001, 'GB', 'ios', 1)`)
	checkParams(t, pc, conn, `SELECT count(*), count(DISTINCT user_id) FROM `+plain)
	checkParams(t, pc, conn, strings.ReplaceAll(ragged, table, plain), from.Add(-time.Hour), to.Add(time.Minute))

	// Under a TimeZone other than the workers', the base rows' statement
	// computes its group keys on the workers: in the session's zone, as the
	// rollup rows' (the workers computed date_trunc of the day in their own
	// zone, UTC, and the answer put the edges' rows into days of UTC beside
	// the rollup's days of New York). Checked against Citus with the zone
	// written in, which it computes right (without it, Citus's own answer
	// has UTC days).
	if r := rollupCreate(t, coordURL(), name+"_hourly", table, "--grain", "hour"); r.code != 0 {
		t.Fatalf("rollup create --grain hour: %s", r)
	}
	mustExec(t, pc.Conn, "SET TimeZone = 'America/New_York'")
	byDay := `SELECT date_trunc('day', created_at) AS d, count(*), count(DISTINCT user_id) FROM ` + table +
		` WHERE created_at >= $1 AND created_at < $2 GROUP BY 1`
	checkParamsAgainst(t, pc, conn, byDay, strings.Replace(byDay, "date_trunc('day', created_at)", "date_trunc('day', created_at, 'America/New_York')", 1), from, to)
	mustExec(t, pc.Conn, "RESET TimeZone")

	// Under a DateStyle other than ISO, Citus writes the times it sends
	// its workers in that style, and they read them as ISO, MDY: day and
	// month swapped. The proxy then leaves the query to PostgreSQL (it
	// answered from the rollup, with the edges' rows missing).
	dmy := connect(t, coordURL())
	mustExec(t, dmy, "SET DateStyle = 'SQL, DMY'")
	mustExec(t, pc.Conn, "SET DateStyle = 'SQL, DMY'")
	// (Days up to the 12th: a worker reads 18/01/2026 as no date at all.)
	q := `SELECT count(*), count(DISTINCT user_id) FROM ` + table + ` WHERE created_at >= '2026-01-04 07:30' AND created_at < '2026-01-11 16:45'`
	var want, got [2]int64
	if err := dmy.QueryRow(context.Background(), q).Scan(&want[0], &want[1]); err != nil {
		t.Fatal(err)
	}
	pc.takeNotices()
	if err := pc.QueryRow(context.Background(), q).Scan(&got[0], &got[1]); err != nil {
		t.Fatal(err)
	}
	if n := strings.Join(pc.takeNotices(), "\n"); got != want || strings.Contains(n, "approximated from rollup") {
		t.Errorf("under DateStyle SQL, DMY: %v through the proxy (notices %q), want PostgreSQL's %v", got, n, want)
	}
}

// checkParams runs sql, whose last two columns are count(*) and
// count(DISTINCT ...) and the others its keys, with args bound in the
// extended protocol, directly and through the proxy: row counts exact,
// distinct counts within 5 standard errors, answered from the rollup with
// base rows.
func checkParams(t *testing.T, pc *noticeConn, direct *pgx.Conn, sql string, args ...any) {
	t.Helper()
	checkParamsAgainst(t, pc, direct, sql, sql, args...)
}

// checkParamsAgainst is checkParams with the exact answer from directSQL.
func checkParamsAgainst(t *testing.T, pc *noticeConn, direct *pgx.Conn, sql, directSQL string, args ...any) {
	t.Helper()
	read := func(c *pgx.Conn, sql string) map[string][2]int64 {
		rows, err := c.Query(context.Background(), sql, args...)
		if err != nil {
			t.Fatalf("%s: %v (SQLSTATE %s)", sql, err, sqlstate(err))
		}
		out := map[string][2]int64{}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			nv := len(vals)
			n, ok1 := vals[nv-2].(int64)
			d, ok2 := vals[nv-1].(int64)
			if !ok1 || !ok2 {
				t.Fatalf("%s: counts of types %T and %T", sql, vals[nv-2], vals[nv-1])
			}
			out[fmt.Sprint(vals[:nv-2])] = [2]int64{n, d}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v (SQLSTATE %s)", sql, err, sqlstate(err))
		}
		return out
	}
	exact := read(direct, directSQL)
	pc.takeNotices()
	got := read(pc.Conn, sql)
	notices := strings.Join(pc.takeNotices(), "\n")
	if !strings.Contains(notices, "approximated from rollup") || !strings.Contains(notices, "read from the base table") {
		t.Errorf("%s: not answered from the rollup with base rows (notices %q)", sql, notices)
	}
	if len(got) != len(exact) {
		t.Errorf("%s: %d groups through the proxy, %d directly", sql, len(got), len(exact))
	}
	se := 1.04 / math.Sqrt(1<<14)
	for k, e := range exact {
		g := got[k]
		if g[0] != e[0] {
			t.Errorf("%s: %s: count(*) %d through the proxy, exactly %d", sql, k, g[0], e[0])
		}
		if math.Abs(float64(g[1]-e[1])) > 5*se*float64(e[1]) {
			t.Errorf("%s: %s: count(DISTINCT) %d through the proxy, exactly %d", sql, k, g[1], e[1])
		}
	}
}
