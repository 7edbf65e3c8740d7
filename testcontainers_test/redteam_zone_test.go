package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// Attacks on three features: local-zone charts answered from an hourly
// rollup cut in another zone, count(col) of a NOT NULL column the rollup
// does not read answered as count(*), and sum/count over
// CASE WHEN c THEN x ELSE 0 END answered as FILTER aggregates. Every
// statement runs directly and through the proxy, in the simple protocol
// and the extended one, and runAttack compares the answers.

var bothModes = []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe}

// zoneAttack is an attack run in a session whose TimeZone is zone ("" for
// the server's default, UTC in the tests).
type zoneAttack struct {
	zone string
	// setTimeZone is a SET TIME ZONE statement run first on both
	// connections (RESET TimeZone after).
	setTimeZone string
	attack
}

// runAttacks runs every attack in both protocols on fresh connection pairs
// and returns how many the rollups answered.
func runAttacks(t *testing.T, dsn, proxyURL string, attacks []zoneAttack) int {
	t.Helper()
	answered := 0
	for _, mode := range bothModes {
		direct, proxied := connectMode(t, dsn, mode), connectMode(t, proxyURL, mode)
		for _, a := range attacks {
			a.name = a.name + " (" + mode.String() + ")"
			if a.zone != "" {
				a.set = append([]string{"SET TimeZone = '" + a.zone + "'"}, a.set...)
			}
			if a.setTimeZone != "" {
				mustExec(t, proxied.Conn, a.setTimeZone)
				mustExec(t, direct.Conn, a.setTimeZone)
			}
			if runAttack(t, proxied, direct, a.attack) {
				answered++
			}
			if a.setTimeZone != "" {
				mustExec(t, proxied.Conn, "RESET TimeZone")
				mustExec(t, direct.Conn, "RESET TimeZone")
			}
		}
	}
	t.Logf("%d of %d runs answered from rollups", answered, 2*len(attacks))
	return answered
}

// TestRedteamZoneBefore1970: an hourly UTC rollup answering New York's days
// holds rows from before 1970 too, where New York's clock was local mean
// time (UTC-4:56:02 until 1883-11-18): the days start at 04:56:02 UTC, in
// the middle of an hour bucket, and the rows of the bucket's last four
// minutes belong to the next day. The same with the rollup cut in Berlin
// (UTC+0:53:28 until 1893) answering UTC days. The zones' hours are
// checked from 1970 on only.
func TestRedteamZoneBefore1970(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rollupZone, query, zone string }{
		{"UTC", `SELECT date_trunc('day', created_at AT TIME ZONE 'America/New_York') AS day, count(*) AS n, sum(amount) AS s, count(DISTINCT user_id) AS users
		   FROM events WHERE created_at < '1900-01-01' GROUP BY 1 ORDER BY 1`, "UTC"},
		{"UTC", `SELECT created_at::date AS day, count(*) AS n, count(DISTINCT user_id) AS users
		   FROM events WHERE created_at < '1900-01-01' GROUP BY 1 ORDER BY 1`, "America/New_York"},
		{"Europe/Berlin", `SELECT date_trunc('day', created_at, 'UTC') AS day, count(*) AS n, count(DISTINCT user_id) AS users
		   FROM events WHERE created_at < '1900-01-01' GROUP BY 1 ORDER BY 1`, "UTC"},
	} {
		db, conn := eventsDB(t, 20_000, 30)
		// Rows every three minutes over 1880-03-01, 00:00 to 10:00 UTC:
		// New York's midnight (04:56:02 UTC) falls inside hour 04.
		mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
			SELECT 50000000 + i, '1880-03-01 00:00+00'::timestamptz + i * interval '3 minutes', i, 'US', 'web', 1.25
			  FROM generate_series(0, 199) i;
			INSERT INTO events (id, created_at, user_id, country, device, amount)
			SELECT 51000000 + i, '1880-03-01 22:00+00'::timestamptz + i * interval '3 minutes', i, 'DE', 'web', 1.25
			  FROM generate_series(0, 59) i; ANALYZE events`)
		args := hourlyRollupArgs
		if c.rollupZone != "UTC" {
			args += ", time_zone => '" + c.rollupZone + "'"
		}
		createRollup(t, conn, "hourly", args)
		refreshRollup(t, conn, "hourly", refresh.Options{})
		p := startProxy(t, server.adminURL, "--approx", "on")
		runAttacks(t, db.DSN, p.URL(db.DSN), []zoneAttack{{zone: c.zone, attack: attack{name: "rollup in " + c.rollupZone + ", session " + c.zone, sql: c.query}}})
	}
}

// TestRedteamZoneCountOfInheritedNotNull: the table declares id NOT NULL
// (its primary key), but an inheritance child, whose rows the rollup and
// every query of the table read, has dropped the declaration (PostgreSQL
// 15 allows that on an inheritance child, not on a partition) and holds
// rows whose id is NULL. count(id) is not count(*) there; the catalog's
// NOT NULL columns and the fetch's check (rewrite/fetch.go notNullCheck)
// read the parent's declaration only. This test fails while that is so:
// the rollup's row counts include the child's rows without an id.
func TestRedteamZoneCountOfInheritedNotNull(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 30)
	mustExec(t, conn, `CREATE TABLE events_archive () INHERITS (events);
		ALTER TABLE events_archive ALTER COLUMN id DROP NOT NULL;
		INSERT INTO events_archive SELECT NULL, created_at, user_id, country, device, amount FROM events WHERE id % 10 = 0;
		ANALYZE events; ANALYZE events_archive`)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	runAttacks(t, db.DSN, p.URL(db.DSN), []zoneAttack{
		{zone: "", attack: attack{name: "count(id) with a child's NULL ids", sql: `SELECT country, count(id) AS n, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`}},
		{zone: "", attack: attack{name: "Cube's count(id)", sql: `SELECT "events".device, count("events".id) "events__count" FROM events AS "events"
		   WHERE "events".created_at >= '2026-01-05T00:00:00.000Z'::timestamptz AND "events".created_at < '2026-01-20T00:00:00.000Z'::timestamptz GROUP BY 1 ORDER BY 1`}},
	})
}

// TestRedteamZoneCountOfInheritedReadColumn: the same with a column the
// rollup reads (user_id, its distinct count's): the change capture's
// fingerprint holds the parent's declaration; the child dropped its own.
// This test fails while the NOT NULL columns are read from the parent
// alone.
func TestRedteamZoneCountOfInheritedReadColumn(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 30)
	mustExec(t, conn, `CREATE TABLE events_archive () INHERITS (events);
		ALTER TABLE events_archive ALTER COLUMN user_id DROP NOT NULL;
		INSERT INTO events_archive SELECT id + 1000000, created_at, NULL, country, device, amount FROM events WHERE id % 10 = 0;
		ANALYZE events; ANALYZE events_archive`)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	runAttacks(t, db.DSN, p.URL(db.DSN), []zoneAttack{
		{zone: "", attack: attack{name: "count(user_id) with a child's NULL user_ids", sql: `SELECT country, count(user_id) AS n, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`}},
	})
}

// TestRedteamZoneInheritedNullTime: the parent declares the time column
// NOT NULL, an inheritance child does not and holds rows without a time:
// they are in no bucket, and every count of the table includes them.
func TestRedteamZoneInheritedNullTime(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 30)
	mustExec(t, conn, `CREATE TABLE events_archive () INHERITS (events);
		ALTER TABLE events_archive ALTER COLUMN created_at DROP NOT NULL;
		INSERT INTO events_archive SELECT id + 1000000, NULL, user_id, country, device, amount FROM events WHERE id % 10 = 0;
		ANALYZE events; ANALYZE events_archive`)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	runAttacks(t, db.DSN, p.URL(db.DSN), []zoneAttack{
		{zone: "", attack: attack{name: "count(*) with a child's rows without a time", sql: `SELECT country, count(*) AS n, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`}},
	})
}

// extraRows are rows every 7 min 13 s over the periods around odd clock
// changes: Apia skipping 2011-12-30, Sao Paulo's midnight changes
// (2018-11-04, 2019-02-17), Caracas at -4:30 (2007-2016) and back
// (2016-05-01), Pyongyang at +8:30 (2015-08-15) and back (2018-05-05),
// Casablanca's Ramadan changes (2019-05-05, 2019-06-09), New York's and
// Berlin's autumn changes of 2025, and New Year 1970.
const extraRows = `INSERT INTO events (id, created_at, user_id, country, device, amount)
	SELECT 30000000 + row_number() OVER (), t, abs(hashtext(t::text)) % 3000,
	       (ARRAY['DE', 'US', 'BR', NULL])[1 + abs(extract(epoch FROM t)::bigint / 433) % 4],
	       (ARRAY['ios', 'android', 'web'])[1 + abs(extract(epoch FROM t)::bigint / 1299) % 3],
	       (abs(extract(epoch FROM t)::bigint % 10000) / 100.0)::numeric(10,2)
	  FROM (VALUES ('2011-12-27+00'::timestamptz, '2012-01-03+00'::timestamptz),
	               ('2018-11-01+00', '2018-11-07+00'), ('2019-02-14+00', '2019-02-20+00'),
	               ('2016-04-28+00', '2016-05-04+00'), ('2015-08-12+00', '2015-08-18+00'),
	               ('2018-05-02+00', '2018-05-08+00'), ('2019-05-02+00', '2019-05-08+00'),
	               ('2019-06-06+00', '2019-06-12+00'), ('2025-10-24+00', '2025-11-05+00'),
	               ('1969-12-28+00', '1970-01-04+00')) v(a, b),
	       generate_series(a, b, interval '7 min 13 s') t;
	ANALYZE events`

// TestRedteamZoneCharts: local-zone charts over an hourly UTC rollup with
// day and month levels (in UTC), in zones with odd rules, written every
// way, in sessions of many zones.
func TestRedteamZoneCharts(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 100_000, 90)
	mustExec(t, conn, extraRows)
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('hourly', 'day')`)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('hourly', 'month')`)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	// Late rows in rolled-up hours next to New York's autumn change.
	mustExec(t, conn, `INSERT INTO events SELECT id + 40000000, created_at + interval '17 minutes', user_id + 3, country, device, amount
		FROM events WHERE created_at >= '2025-11-02 05:00+00' AND created_at < '2025-11-02 07:00+00'; ANALYZE events`)
	mustExec(t, conn, `CREATE TABLE holidays (day date PRIMARY KEY, name text);
		INSERT INTO holidays VALUES ('2025-11-02', 'a'), ('2026-03-08', 'b'), ('2018-11-04', 'c')`)
	p := startProxy(t, server.adminURL, "--approx", "on")

	days := func(expr, where string) string {
		return `SELECT ` + expr + ` AS k, count(*) AS n, sum(amount) AS s, count(DISTINCT user_id) AS users, min(amount) AS lo, max(created_at) AS hi
		  FROM events WHERE ` + where + ` GROUP BY 1 ORDER BY 1`
	}
	const ny = `created_at >= '2025-10-24' AND created_at < '2025-11-05'`
	attacks := []zoneAttack{
		{zone: "UTC", attack: attack{name: "Sao Paulo days at the 2018 change", sql: days(`date_trunc('day', created_at AT TIME ZONE 'America/Sao_Paulo')`, `created_at >= '2018-11-01' AND created_at < '2018-11-07'`)}},
		{zone: "UTC", attack: attack{name: "Sao Paulo days at the 2019 change", sql: days(`date_trunc('day', created_at, 'America/Sao_Paulo')`, `created_at >= '2019-02-14' AND created_at < '2019-02-20'`)}},
		{zone: "America/Sao_Paulo", attack: attack{name: "Sao Paulo session days", sql: days(`created_at::date`, `created_at >= '2018-11-01' AND created_at < '2018-11-07'`)}},
		{zone: "America/Sao_Paulo", attack: attack{name: "Sao Paulo session shifted weeks", sql: days(`date_trunc('week', created_at + interval '1 day') - interval '1 day'`, `created_at >= '2018-11-01' AND created_at < '2019-02-20'`)}},
		{zone: "UTC", attack: attack{name: "Apia skipping a day", sql: days(`date_trunc('day', created_at AT TIME ZONE 'Pacific/Apia')`, `created_at >= '2011-12-27' AND created_at < '2012-01-03'`)}},
		{zone: "Pacific/Apia", attack: attack{name: "Apia session weeks", sql: days(`date_trunc('week', created_at)`, `created_at >= '2011-12-27' AND created_at < '2012-01-03'`)}},
		{zone: "UTC", attack: attack{name: "Caracas at -4:30", sql: days(`date_trunc('day', created_at AT TIME ZONE 'America/Caracas')`, `created_at >= '2016-04-28' AND created_at < '2016-05-04'`)}},
		{zone: "America/Caracas", attack: attack{name: "Caracas session", sql: days(`date_trunc('day', created_at)`, `created_at >= '2016-04-28' AND created_at < '2016-05-04'`)}},
		{zone: "UTC", attack: attack{name: "Pyongyang at +8:30", sql: days(`date_trunc('day', created_at, 'Asia/Pyongyang')`, `created_at >= '2015-08-12' AND created_at < '2015-08-18'`)}},
		{zone: "UTC", attack: attack{name: "Casablanca Ramadan", sql: days(`date_trunc('day', created_at AT TIME ZONE 'Africa/Casablanca')`, `created_at >= '2019-05-02' AND created_at < '2019-06-12'`)}},
		{zone: "Africa/Casablanca", attack: attack{name: "Casablanca session", sql: days(`created_at::date`, `created_at >= '2019-05-02' AND created_at < '2019-06-12'`)}},
		{zone: "UTC", attack: attack{name: "New York days across the autumn change", sql: days(`date_trunc('day', created_at AT TIME ZONE 'America/New_York')`, ny)}},
		{zone: "UTC", attack: attack{name: "New York local hours", sql: days(`date_trunc('hour', created_at AT TIME ZONE 'America/New_York')`, `created_at >= '2025-11-02 03:00' AND created_at < '2025-11-02 09:00'`)}},
		{zone: "UTC", attack: attack{name: "New York hour of day", sql: days(`extract(hour FROM created_at AT TIME ZONE 'America/New_York')`, ny)}},
		{zone: "UTC", attack: attack{name: "Berlin isodow", sql: days(`date_part('isodow', created_at AT TIME ZONE 'Europe/Berlin')`, ny)}},
		{zone: "UTC", attack: attack{name: "New York quarters", sql: days(`date_trunc('quarter', created_at AT TIME ZONE 'America/New_York')`, `created_at >= '2025-01-01'`)}},
		{zone: "UTC", attack: attack{name: "New York years", sql: days(`date_trunc('year', created_at, 'America/New_York')`, `created_at >= '1969-01-01'`)}},
		{zone: "UTC", attack: attack{name: "New York months (the month level is UTC's)", sql: days(`date_trunc('month', created_at AT TIME ZONE 'America/New_York')`, `created_at >= '2025-12-01'`)}},
		{zone: "America/New_York", attack: attack{name: "New York session months", sql: days(`date_trunc('month', created_at)`, `created_at >= '2025-12-01'`)}},
		{zone: "America/New_York", attack: attack{name: "New York session days (the day level is UTC's)", sql: days(`date_trunc('day', created_at)`, `created_at >= '2026-01-01' AND created_at < '2026-02-01'`)}},
		{zone: "UTC", attack: attack{name: "Sydney weeks, Metabase form", sql: days(`date_trunc('week', created_at AT TIME ZONE 'Australia/Sydney') AT TIME ZONE 'Australia/Sydney'`, `created_at >= '2026-01-01'`)}},
		{zone: "UTC", attack: attack{name: "to_char of a New York day", sql: days(`to_char(created_at AT TIME ZONE 'America/New_York', 'YYYY-MM-DD')`, ny)}},
		{zone: "UTC", attack: attack{name: "New York decades", sql: days(`date_trunc('decade', created_at AT TIME ZONE 'America/New_York')`, `true`)}},
		{zone: "UTC", attack: attack{name: "New Year 1970 in New York", sql: days(`date_trunc('day', created_at AT TIME ZONE 'America/New_York')`, `created_at < '1971-01-01'`)}},
		{zone: "UTC", attack: attack{name: "EST5EDT", sql: days(`date_trunc('day', created_at AT TIME ZONE 'EST5EDT')`, ny)}},
		{zone: "UTC", attack: attack{name: "EST (an abbreviation in PostgreSQL)", sql: days(`date_trunc('day', created_at AT TIME ZONE 'EST')`, ny)}},
		{zone: "UTC", attack: attack{name: "MET (an abbreviation in PostgreSQL)", sql: days(`date_trunc('day', created_at AT TIME ZONE 'MET')`, ny)}},
		{zone: "UTC", attack: attack{name: "POSIX UTC+3", sql: days(`date_trunc('day', created_at AT TIME ZONE 'UTC+3')`, ny)}},
		{zone: "UTC", attack: attack{name: "POSIX <+0530>-05:30", sql: days(`date_trunc('day', created_at AT TIME ZONE '<+0530>-05:30')`, ny)}},
		{zone: "UTC", attack: attack{name: "Etc/GMT-14", sql: days(`date_trunc('day', created_at AT TIME ZONE 'Etc/GMT-14')`, ny)}},
		{zone: "UTC", attack: attack{name: "IST (+2 in PostgreSQL's abbreviations)", sql: days(`date_trunc('day', created_at AT TIME ZONE 'IST')`, ny)}},
		{zone: "UTC", attack: attack{name: "lower-case zone name", sql: days(`date_trunc('day', created_at AT TIME ZONE 'america/new_york')`, ny)}},
		{zone: "UTC", attack: attack{name: "Kolkata days", sql: days(`date_trunc('day', created_at AT TIME ZONE 'Asia/Kolkata')`, ny)}},
		{zone: "UTC", attack: attack{name: "Chatham days", sql: days(`date_trunc('day', created_at, 'Pacific/Chatham')`, ny)}},
		{zone: "EST5EDT", attack: attack{name: "session EST5EDT", sql: days(`created_at::date`, ny)}},
		{zone: "UTC+3", attack: attack{name: "session POSIX UTC+3", sql: days(`created_at::date`, ny)}},
		{zone: "<+0530>-05:30", attack: attack{name: "session POSIX +05:30", sql: days(`created_at::date`, ny)}},
		{zone: "Asia/Kolkata", attack: attack{name: "session Kolkata", sql: days(`date_trunc('day', created_at)`, ny)}},
		{zone: "Australia/Lord_Howe", attack: attack{name: "session Lord Howe", sql: days(`date_trunc('week', created_at)`, ny)}},
		{setTimeZone: `SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE`, attack: attack{name: "SET TIME ZONE INTERVAL +05:30", sql: days(`created_at::date`, ny)}},
		{setTimeZone: `SET TIME ZONE -3`, attack: attack{name: "SET TIME ZONE -3", sql: days(`created_at::date`, ny)}},
		{setTimeZone: `SET TIME ZONE 5.5`, attack: attack{name: "SET TIME ZONE 5.5", sql: days(`created_at::date`, ny)}},
		{zone: "UTC", attack: attack{name: "filter on a New York day", sql: `SELECT device, count(*) AS n, count(DISTINCT user_id) AS users FROM events
		   WHERE date_trunc('day', created_at AT TIME ZONE 'America/New_York') = '2025-11-02' GROUP BY 1 ORDER BY 1`}},
		{zone: "UTC", attack: attack{name: "filter on a New York date range", sql: `SELECT device, count(*) AS n, sum(amount) AS s FROM events
		   WHERE (created_at AT TIME ZONE 'America/New_York')::date BETWEEN '2025-11-01' AND '2025-11-02' GROUP BY 1 ORDER BY 1`}},
		{zone: "UTC", attack: attack{name: "filter on Berlin's repeated 02:00", sql: `SELECT device, count(*) AS n FROM events
		   WHERE extract(hour FROM created_at AT TIME ZONE 'Europe/Berlin') = 2 AND created_at >= '2025-10-25' AND created_at < '2025-10-28' GROUP BY 1 ORDER BY 1`}},
		{zone: "America/New_York", attack: attack{name: "filter on a session day", sql: `SELECT device, count(*) AS n FROM events WHERE created_at::date = '2025-11-02' GROUP BY 1 ORDER BY 1`}},
		{zone: "America/New_York", attack: attack{name: "filter on a session day written as a timestamp", sql: `SELECT device, count(*) AS n FROM events
		   WHERE date_trunc('day', created_at) = '2025-11-02 00:00' GROUP BY 1 ORDER BY 1`}},
		{zone: "UTC", attack: attack{name: "HAVING and ORDER BY a count", sql: `SELECT date_trunc('day', created_at AT TIME ZONE 'America/New_York') AS k, count(*) AS n FROM events
		   WHERE ` + ny + ` GROUP BY 1 HAVING count(*) > 180 ORDER BY 2 DESC, 1 LIMIT 3`}},
		{zone: "UTC", attack: attack{name: "join to holidays on a New York date", sql: `SELECT h.name, count(*) AS n, count(DISTINCT e.user_id) AS users FROM events e
		   JOIN holidays h ON h.day = (e.created_at AT TIME ZONE 'America/New_York')::date GROUP BY 1 ORDER BY 1`}},
		{zone: "America/New_York", attack: attack{name: "join to holidays on a session date", sql: `SELECT h.name, count(*) AS n FROM events e
		   JOIN holidays h ON h.day = e.created_at::date GROUP BY 1 ORDER BY 1`}},
		{zone: "UTC", attack: attack{name: "subquery of New York days", sql: `SELECT max(n) AS n FROM (SELECT date_trunc('day', created_at AT TIME ZONE 'America/New_York') AS d, count(*) AS n
		   FROM events WHERE ` + ny + ` GROUP BY 1) x`}},
		{zone: "UTC", attack: attack{name: "New York days shifted by hours", sql: days(`date_trunc('day', created_at AT TIME ZONE 'America/New_York' + interval '30 minutes')`, ny)}},
		{zone: "UTC", attack: attack{name: "New York days of a shifted time", sql: days(`date_trunc('day', (created_at + interval '1 day') AT TIME ZONE 'America/New_York')`, ny)}},
		{zone: "America/New_York", attack: attack{name: "session shift by hours", sql: days(`date_trunc('day', created_at + interval '90 minutes')`, ny)}},
		{zone: "America/New_York", attack: attack{name: "session shift by days, day unit", sql: days(`date_trunc('day', created_at - interval '1 day') + interval '1 day'`, ny)}},
		{zone: "Europe/Berlin", attack: attack{name: "date_trunc with UTC in a Berlin session", sql: days(`date_trunc('day', created_at, 'UTC')`, ny)}},
		{zone: "Europe/Berlin", attack: attack{name: "epoch buckets in a Berlin session", sql: days(`to_timestamp(floor(extract(epoch FROM created_at) / 86400) * 86400)`, ny)}},
		{zone: "America/New_York", attack: attack{name: "local wall clock cast back in the session", sql: days(`date_trunc('day', created_at AT TIME ZONE 'Europe/Berlin')::timestamptz`, ny)}},
		{zone: "UTC", attack: attack{name: "date_trunc of a wall clock with a zone", sql: days(`date_trunc('day', created_at AT TIME ZONE 'UTC', 'America/New_York')`, ny)}},
		{zone: "UTC", attack: attack{name: "zone from a parameter", sql: days(`date_trunc('day', created_at AT TIME ZONE $1::text)`, ny), args: []any{"America/New_York"}}},
		{zone: "UTC", attack: attack{name: "Kolkata zone from a parameter", sql: days(`date_trunc('day', created_at AT TIME ZONE $1::text)`, ny), args: []any{"Asia/Kolkata"}}},
	}
	runAttacks(t, db.DSN, p.URL(db.DSN), attacks)
}

// TestRedteamZoneRollupInLocalZone: hourly rollups cut in New York's and
// Berlin's zones (with a day level in theirs) answering UTC days, Sydney
// weeks and other zones' charts across clock changes.
func TestRedteamZoneRollupInLocalZone(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"America/New_York", "Europe/Berlin"} {
		db, conn := eventsDB(t, 60_000, 90)
		mustExec(t, conn, extraRows)
		createRollup(t, conn, "hourly", hourlyRollupArgs+", time_zone => '"+zone+"'")
		mustExec(t, conn, `SELECT pgsketch.add_rollup_level('hourly', 'day')`)
		mustExec(t, conn, `SELECT pgsketch.add_rollup_level('hourly', 'week')`)
		refreshRollup(t, conn, "hourly", refresh.Options{})
		mustExec(t, conn, `INSERT INTO events SELECT id + 40000000, created_at + interval '17 minutes', user_id + 3, country, device, amount
			FROM events WHERE created_at >= '2026-03-08 05:00+00' AND created_at < '2026-03-08 08:00+00'; ANALYZE events`)
		p := startProxy(t, server.adminURL, "--approx", "on")
		days := func(expr, where string) string {
			return `SELECT ` + expr + ` AS k, count(*) AS n, sum(amount) AS s, count(DISTINCT user_id) AS users
			  FROM events WHERE ` + where + ` GROUP BY 1 ORDER BY 1`
		}
		const spring = `created_at >= '2026-03-01' AND created_at < '2026-04-05'`
		const autumn = `created_at >= '2025-10-24' AND created_at < '2025-11-05'`
		runAttacks(t, db.DSN, p.URL(db.DSN), []zoneAttack{
			{zone: "UTC", attack: attack{name: zone + ": UTC days", sql: days(`date_trunc('day', created_at)`, spring)}},
			{zone: "UTC", attack: attack{name: zone + ": UTC days in autumn", sql: days(`created_at::date`, autumn)}},
			{zone: "UTC", attack: attack{name: zone + ": UTC weeks", sql: days(`date_trunc('week', created_at)`, spring)}},
			{zone: "UTC", attack: attack{name: zone + ": Sydney weeks", sql: days(`date_trunc('week', created_at AT TIME ZONE 'Australia/Sydney')`, spring)}},
			{zone: "Australia/Sydney", attack: attack{name: zone + ": Sydney session days", sql: days(`date_trunc('day', created_at)`, spring)}},
			{zone: "UTC", attack: attack{name: zone + ": Sao Paulo days", sql: days(`date_trunc('day', created_at, 'America/Sao_Paulo')`, `created_at >= '2018-11-01' AND created_at < '2018-11-07'`)}},
			{zone: "UTC", attack: attack{name: zone + ": Apia days", sql: days(`date_trunc('day', created_at AT TIME ZONE 'Pacific/Apia')`, `created_at >= '2011-12-27' AND created_at < '2012-01-03'`)}},
			{zone: "UTC", attack: attack{name: zone + ": Kolkata days", sql: days(`date_trunc('day', created_at AT TIME ZONE 'Asia/Kolkata')`, spring)}},
			{zone: "UTC", attack: attack{name: zone + ": its own days", sql: days(`date_trunc('day', created_at AT TIME ZONE '`+zone+`')`, spring)}},
			{zone: zone, attack: attack{name: zone + ": its own session's weeks", sql: days(`date_trunc('week', created_at)`, spring)}},
			{zone: "UTC", attack: attack{name: zone + ": New York hour of day", sql: days(`extract(hour FROM created_at AT TIME ZONE 'America/New_York')`, autumn)}},
			{zone: "UTC", attack: attack{name: zone + ": UTC hours", sql: days(`date_trunc('hour', created_at)`, `created_at >= '2025-11-02 04:00' AND created_at < '2025-11-02 08:00'`)}},
			{zone: "UTC", attack: attack{name: zone + ": a UTC day filter", sql: `SELECT device, count(*) AS n, count(DISTINCT user_id) AS users FROM events
			   WHERE date_trunc('day', created_at, 'UTC') = '2026-03-08' GROUP BY 1 ORDER BY 1`}},
			{zone: "UTC", attack: attack{name: zone + ": UTC epoch days", sql: days(`to_timestamp(floor(extract(epoch FROM created_at) / 86400) * 86400)`, spring)}},
			{zone: "UTC", attack: attack{name: zone + ": UTC month of 1970", sql: days(`date_trunc('month', created_at)`, `created_at < '1971-01-01'`)}},
		})
	}
}

// TestRedteamZoneWallClockColumns: hourly rollups of a timestamp (without
// time zone) column and of a date column, in sessions of other zones.
func TestRedteamZoneWallClockColumns(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 60_000, 90)
	mustExec(t, conn, extraRows)
	mustExec(t, conn, `ALTER TABLE events ALTER COLUMN created_at TYPE timestamp USING created_at AT TIME ZONE 'UTC'; ANALYZE events`)
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	days := func(expr, where string) string {
		return `SELECT ` + expr + ` AS k, count(*) AS n, sum(amount) AS s, count(DISTINCT user_id) AS users
		  FROM events WHERE ` + where + ` GROUP BY 1 ORDER BY 1`
	}
	const autumn = `created_at >= '2025-10-24' AND created_at < '2025-11-05'`
	runAttacks(t, db.DSN, p.URL(db.DSN), []zoneAttack{
		{zone: "America/New_York", attack: attack{name: "wall days in a New York session", sql: days(`date_trunc('day', created_at)`, autumn)}},
		{zone: "America/New_York", attack: attack{name: "wall clock read in New York, its days", sql: days(`date_trunc('day', created_at::timestamptz)`, autumn)}},
		{zone: "America/New_York", attack: attack{name: "wall clock read as UTC, New York days", sql: days(`date_trunc('day', created_at AT TIME ZONE 'UTC')`, autumn)}},
		{zone: "UTC", attack: attack{name: "wall clock read as UTC, New York days (UTC session)", sql: days(`date_trunc('day', (created_at AT TIME ZONE 'UTC') AT TIME ZONE 'America/New_York')`, autumn)}},
		{zone: "UTC", attack: attack{name: "wall clock read in New York, UTC days", sql: days(`date_trunc('day', created_at AT TIME ZONE 'America/New_York')`, autumn)}},
		{zone: "America/Sao_Paulo", attack: attack{name: "wall clock read in Sao Paulo, its weeks", sql: days(`date_trunc('week', created_at::timestamptz)`, `created_at >= '2018-11-01' AND created_at < '2018-11-07'`)}},
		{zone: "Asia/Kolkata", attack: attack{name: "wall clock read in Kolkata, its days", sql: days(`date_trunc('day', created_at::timestamptz)`, autumn)}},
		{zone: "Asia/Kolkata", attack: attack{name: "wall clock read in Kolkata, UTC days", sql: days(`date_trunc('day', created_at::timestamptz, 'UTC')`, autumn)}},
		{zone: "America/New_York", attack: attack{name: "date_trunc with a zone of a wall clock", sql: days(`date_trunc('day', created_at, 'Europe/Berlin')`, autumn)}},
		{zone: "America/New_York", attack: attack{name: "epoch days of a wall clock in New York", sql: days(`to_timestamp(floor(extract(epoch FROM created_at) / 86400) * 86400)`, autumn)}},
	})

	// A date column.
	db2, conn2 := eventsDB(t, 30_000, 90)
	mustExec(t, conn2, `ALTER TABLE events ALTER COLUMN created_at TYPE date USING (created_at AT TIME ZONE 'UTC')::date; ANALYZE events`)
	createRollup(t, conn2, "daily", eventsRollupArgs)
	refreshRollup(t, conn2, "daily", refresh.Options{})
	p2 := startProxy(t, server.adminURL, "--approx", "on")
	runAttacks(t, db2.DSN, p2.URL(db2.DSN), []zoneAttack{
		{zone: "America/New_York", attack: attack{name: "date weeks in a New York session", sql: days(`date_trunc('week', created_at)`, `true`)}},
		{zone: "Asia/Kolkata", attack: attack{name: "date months in a Kolkata session", sql: days(`date_trunc('month', created_at)`, `true`)}},
		{zone: "Asia/Kolkata", attack: attack{name: "date read in Kolkata, UTC days", sql: days(`date_trunc('day', created_at::timestamptz, 'UTC')`, `true`)}},
		{zone: "America/New_York", attack: attack{name: "date read in New York, Berlin days", sql: days(`date_trunc('day', created_at::timestamptz AT TIME ZONE 'Europe/Berlin')`, `true`)}},
	})
}

// rowsOf runs sql on c and returns its rows as text, or the error's text.
func rowsOf(ctx context.Context, c *pgx.Conn, sql string) string {
	rows, err := c.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return "error: " + err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r []string
		for _, v := range rows.RawValues() {
			r = append(r, string(v))
		}
		out = append(out, strings.Join(r, "|"))
	}
	if err := rows.Err(); err != nil {
		return "error: " + err.Error()
	}
	return strings.Join(out, "\n")
}

// TestRedteamZoneSessionChanges: the session's TimeZone changed every way
// between statements that a daily and an hourly UTC rollup answer (exact
// measures only, so that every answer must be PostgreSQL's byte for
// byte): SET, SET LOCAL and ROLLBACK, set_config, a pipeline holding
// the SET and the query, a prepared statement run again after the SET,
// two statements in one simple query, the database's default, a startup
// parameter, and sessions of different zones on one proxy (its caches).
func TestRedteamZoneSessionChanges(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 60_000, 60)
	createRollup(t, conn, "daily", eventsRollupArgs)
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	refreshRollup(t, conn, "hourly", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	const q = `SELECT date_trunc('day', created_at) AS k, count(*) AS n, sum(amount) AS s FROM events
		WHERE created_at >= '2026-01-05' AND created_at < '2026-01-12' GROUP BY 1 ORDER BY 1`
	const q2 = `SELECT created_at::date AS k, count(*) AS n FROM events GROUP BY 1 ORDER BY 1`

	// Scripts of statements run in order on one connection each, directly
	// and through the proxy; every output is compared.
	scripts := map[string][]string{
		"SET between":           {q, "SET TimeZone = 'Asia/Kolkata'", q, q2, "SET TimeZone = 'America/New_York'", q, q2, "RESET TimeZone", q},
		"SET LOCAL":             {q, "BEGIN", "SET LOCAL TimeZone = 'Asia/Kolkata'", q, q2, "COMMIT", q, q2},
		"SET rolled back":       {"BEGIN", q, "SET TimeZone = 'Asia/Kolkata'", q, "ROLLBACK", q, q2},
		"SET in a savepoint":    {"BEGIN", "SAVEPOINT a", "SET TimeZone = 'Asia/Kolkata'", q, "ROLLBACK TO SAVEPOINT a", q, "COMMIT", q},
		"REPEATABLE READ":       {"BEGIN ISOLATION LEVEL REPEATABLE READ", q, "SET TimeZone = 'Asia/Kolkata'", q, "COMMIT"},
		"set_config":            {q, "SELECT set_config('TimeZone', 'Asia/Kolkata', false)", q, q2},
		"set_config local":      {"BEGIN", "SELECT set_config('TimeZone', 'Asia/Kolkata', true)", q, "COMMIT", q},
		"two statements":        {q, "SET TimeZone = 'Asia/Kolkata'; " + q, q2},
		"query then SET":        {q + "; SET TimeZone = 'Asia/Kolkata'", q},
		"SET in a DO block":     {q, "DO $$BEGIN PERFORM set_config('TimeZone', 'Asia/Kolkata', false); END$$", q},
		"function SET clause":   {"CREATE FUNCTION pg_temp.k() RETURNS bigint LANGUAGE sql SET TimeZone = 'Asia/Kolkata' RETURN (SELECT count(*) FROM events)", q, "SELECT pg_temp.k()", q},
		"SET TIME ZONE LOCAL":   {"SET TimeZone = 'Asia/Kolkata'", q, "SET TIME ZONE LOCAL", q, "SET TIME ZONE 'Asia/Kolkata'", q, "SET TIME ZONE DEFAULT", q},
		"zone with odd spacing": {"SET TimeZone = ' Asia/Kolkata'", q, "SET TimeZone = 'asia/kolkata'", q},
	}
	for name, script := range scripts {
		for _, mode := range append(bothModes, pgx.QueryExecModeCacheStatement) {
			direct, proxied := connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)
			for i, stmt := range script {
				want, werr := direct.query(ctx, stmt)
				got, gerr := proxied.query(ctx, stmt)
				switch {
				case werr != nil || gerr != nil:
					if (werr == nil) != (gerr == nil) {
						t.Errorf("%s, %v, statement %d: direct error %v, proxy error %v\n%s", name, mode, i+1, werr, gerr, stmt)
					}
				case fmt.Sprint(got.rows, got.nulls) != fmt.Sprint(want.rows, want.nulls):
					t.Errorf("%s, %v, statement %d: got %q (notices %q), want %q\n%s", name, mode, i+1, got.rows, got.notices, want.rows, stmt)
				}
			}
		}
	}

	// A pipeline: SET, the query, RESET and the query again in one batch.
	for _, mode := range bothModes {
		direct, proxied := connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)
		run := func(c *pgx.Conn) []string {
			b := &pgx.Batch{}
			for _, s := range []string{q, "SET TimeZone = 'Asia/Kolkata'", q, q2, "RESET TimeZone", q} {
				b.Queue(s)
			}
			br := c.SendBatch(ctx, b)
			defer br.Close()
			var out []string
			for i := 0; i < b.Len(); i++ {
				rows, err := br.Query()
				if err != nil {
					out = append(out, "error: "+err.Error())
					continue
				}
				var rs []string
				for rows.Next() {
					var r []string
					for _, v := range rows.RawValues() {
						r = append(r, string(v))
					}
					rs = append(rs, strings.Join(r, "|"))
				}
				rows.Close()
				out = append(out, strings.Join(rs, "\n"))
			}
			return out
		}
		want, got := run(direct.Conn), run(proxied.Conn)
		for i := range want {
			if i >= len(got) || got[i] != want[i] {
				t.Errorf("pipeline, %v, statement %d: got\n%s\nwant\n%s", mode, i+1, got[i], want[i])
			}
		}
	}

	// Sessions of three zones in turn on one proxy, the same text.
	for round := 0; round < 2; round++ {
		for _, zone := range []string{"UTC", "America/New_York", "Asia/Kolkata", "Europe/Berlin", "America/New_York"} {
			for _, mode := range bothModes {
				direct, proxied := connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)
				mustExec(t, direct.Conn, "SET TimeZone = '"+zone+"'")
				mustExec(t, proxied.Conn, "SET TimeZone = '"+zone+"'")
				for _, s := range []string{q, q2} {
					if w, g := rowsOf(ctx, direct.Conn, s), rowsOf(ctx, proxied.Conn, s); w != g {
						t.Errorf("session in %s, %v: got\n%s\nwant\n%s\n%s", zone, mode, g, w, s)
					}
				}
			}
		}
	}

	// The zone as a startup parameter and as the database's default.
	for _, url := range []string{p.URL(db.DSN) + "&timezone=Asia%2FKolkata", p.URL(db.DSN) + "&options=-c%20TimeZone%3DAsia%2FKolkata"} {
		if !strings.Contains(p.URL(db.DSN), "?") {
			url = strings.Replace(url, "&", "?", 1)
		}
		proxied := connectMode(t, url, pgx.QueryExecModeSimpleProtocol)
		direct := connectMode(t, db.DSN, pgx.QueryExecModeSimpleProtocol)
		mustExec(t, direct.Conn, "SET TimeZone = 'Asia/Kolkata'")
		if w, g := rowsOf(ctx, direct.Conn, q), rowsOf(ctx, proxied.Conn, q); w != g {
			t.Errorf("startup zone %s: got\n%s\nwant\n%s", url, g, w)
		}
	}
	mustExec(t, conn, "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" SET TimeZone = 'Asia/Kolkata'")
	direct, proxied := connectMode(t, db.DSN, pgx.QueryExecModeSimpleProtocol), connectMode(t, p.URL(db.DSN), pgx.QueryExecModeSimpleProtocol)
	if w, g := rowsOf(ctx, direct.Conn, q), rowsOf(ctx, proxied.Conn, q); w != g {
		t.Errorf("database default zone: got\n%s\nwant\n%s", g, w)
	}
}

// TestRedteamZoneZeroElse: sums and counts over CASE WHEN c THEN x ELSE 0
// END of every type the rollup sums, with NULL conditions, NULL values,
// empty groups and tables, grouping sets, HAVING and ORDER BY on the
// expression, and CASEs PostgreSQL rejects (a type that does not match
// 0's, a literal that is no integer), which must stay errors.
func TestRedteamZoneZeroElse(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 40_000, 30)
	mustExec(t, conn, `ALTER TABLE events ADD COLUMN bonus numeric(10,2), ADD COLUMN qty integer, ADD COLUMN small smallint,
		ADD COLUMN big bigint, ADD COLUMN dur interval, ADD COLUMN label text;
		UPDATE events SET bonus = CASE WHEN id % 3 = 0 AND country IS DISTINCT FROM 'JP' THEN amount END,
		  qty = CASE WHEN id % 5 <> 0 THEN 2147483000 END, small = CASE WHEN id % 7 <> 0 THEN 32000 END,
		  big = CASE WHEN id % 11 <> 0 THEN 9223372036854775000 / 100000 END, dur = CASE WHEN id % 2 = 0 THEN interval '90 minutes' END,
		  label = CASE WHEN id % 2 = 0 THEN 'x' END;
		ANALYZE events`)
	createRollup(t, conn, "daily", `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}',
		sum_columns => '{amount,bonus,qty,small,big,dur}', max_columns => '{created_at}'`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	mustExec(t, conn, `CREATE TABLE events_empty (LIKE events INCLUDING ALL)`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('empty_daily', 'events_empty', 'created_at', grain => 'day', dimensions => '{country,device}',
		distinct_columns => '{user_id}', sum_columns => '{amount,bonus}')`)
	refreshRollup(t, conn, "empty_daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")

	sel := func(items string) string {
		return `SELECT country, ` + items + `, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`
	}
	attacks := []zoneAttack{
		{attack: attack{name: "sum of numeric, NULL condition", sql: sel(`sum(CASE WHEN country = 'DE' THEN bonus ELSE 0 END) AS s`)}},
		{attack: attack{name: "sum of numeric by device", sql: `SELECT country, device, sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s, count(DISTINCT user_id) AS users
		   FROM events GROUP BY 1, 2 ORDER BY 1, 2`}},
		{attack: attack{name: "sum of integer near overflow", sql: sel(`sum(CASE WHEN device <> 'web' THEN qty ELSE 0 END) AS s`)}},
		{attack: attack{name: "sum of smallint", sql: sel(`sum(CASE WHEN device = 'ios' THEN small ELSE 0 END) AS s`)}},
		{attack: attack{name: "sum of bigint", sql: sel(`sum(CASE WHEN device = 'android' THEN big ELSE 0 END) AS s`)}},
		{attack: attack{name: "sum of interval (an error in PostgreSQL)", sql: sel(`sum(CASE WHEN device = 'ios' THEN dur ELSE 0 END) AS s`)}},
		{attack: attack{name: "count of text (an error in PostgreSQL)", sql: sel(`count(CASE WHEN device = 'ios' THEN country ELSE 0 END) AS n`)}},
		{attack: attack{name: "count of a timestamptz (an error in PostgreSQL)", sql: sel(`count(CASE WHEN device = 'ios' THEN created_at ELSE 0 END) AS n`)}},
		{attack: attack{name: "count of a string that is no integer (an error in PostgreSQL)", sql: sel(`count(CASE WHEN device = 'ios' THEN 'yes' ELSE 0 END) AS n`)}},
		{attack: attack{name: "count of an interval (an error in PostgreSQL)", sql: sel(`count(CASE WHEN device = 'ios' THEN dur ELSE 0 END) AS n`)}},
		{attack: attack{name: "sum of a string that is no integer (an error in PostgreSQL)", sql: sel(`sum(CASE WHEN device = 'ios' THEN 'yes' ELSE 0 END) AS s`)}},
		{attack: attack{name: "count of a boolean (an error in PostgreSQL)", sql: sel(`count(CASE WHEN device = 'ios' THEN true ELSE 0 END) AS n`)}},
		{attack: attack{name: "count of NULL", sql: sel(`count(CASE WHEN device = 'ios' THEN NULL ELSE 0 END) AS n`)}},
		{attack: attack{name: "sum of NULL", sql: sel(`sum(CASE WHEN device = 'ios' THEN NULL ELSE 0 END) AS s`)}},
		{attack: attack{name: "sum of a numeric literal", sql: sel(`sum(CASE WHEN device = 'ios' THEN 1.50 ELSE 0 END) AS s`)}},
		{attack: attack{name: "ELSE 0.0", sql: sel(`sum(CASE WHEN device = 'ios' THEN bonus ELSE 0.0 END) AS s`)}},
		{attack: attack{name: "ELSE '0'", sql: sel(`sum(CASE WHEN device = 'ios' THEN bonus ELSE '0' END) AS s`)}},
		{attack: attack{name: "simple CASE on a NULL-able key", sql: sel(`count(CASE country WHEN 'DE' THEN user_id ELSE 0 END) AS n, sum(CASE country WHEN 'DE' THEN amount ELSE 0 END) AS s`)}},
		{attack: attack{name: "simple CASE of NULL", sql: sel(`count(CASE NULL WHEN 'DE' THEN user_id ELSE 0 END) AS n`)}},
		{attack: attack{name: "condition always NULL", sql: sel(`sum(CASE WHEN country = NULL THEN amount ELSE 0 END) AS s, count(CASE WHEN NULL THEN 1 ELSE 0 END) AS n`)}},
		{attack: attack{name: "condition on the time column, day-aligned", sql: sel(`sum(CASE WHEN created_at >= '2026-01-10' THEN amount ELSE 0 END) AS s`)}},
		{attack: attack{name: "condition on the time column, mid-day", sql: sel(`sum(CASE WHEN created_at >= '2026-01-10 12:00' THEN amount ELSE 0 END) AS s`)}},
		{attack: attack{name: "condition on a measure", sql: sel(`sum(CASE WHEN amount > 100 THEN amount ELSE 0 END) AS s`)}},
		{attack: attack{name: "nested in an expression", sql: sel(`sum(CASE WHEN device = 'ios' THEN amount ELSE 0 END) / nullif(count(*), 0) AS s`)}},
		{attack: attack{name: "cast around it", sql: sel(`sum(CASE WHEN device = 'ios' THEN amount ELSE 0 END)::float8 AS s`)}},
		{attack: attack{name: "two of them, one named", sql: sel(`sum(CASE WHEN device = 'ios' THEN amount ELSE 0 END), count(CASE WHEN device = 'ios' THEN amount ELSE 0 END) AS "count"`)}},
		{attack: attack{name: "HAVING on the expression", sql: `SELECT country, sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s FROM events GROUP BY 1
		   HAVING sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) > 100 ORDER BY 1`}},
		{attack: attack{name: "ORDER BY the expression", sql: `SELECT country, sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s FROM events GROUP BY 1
		   ORDER BY sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) DESC NULLS LAST, 1`}},
		{attack: attack{name: "ORDER BY its name", sql: `SELECT country, count(CASE WHEN device = 'ios' THEN 1 ELSE 0 END) FROM events GROUP BY 1 ORDER BY count, 1`}},
		{attack: attack{name: "no rows match the WHERE", sql: `SELECT sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s, count(CASE WHEN device = 'ios' THEN 1 ELSE 0 END) AS n
		   FROM events WHERE created_at >= '2030-01-01'`}},
		{attack: attack{name: "no rows, grouped", sql: `SELECT country, sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s FROM events WHERE created_at >= '2030-01-01' GROUP BY 1`}},
		{attack: attack{name: "empty table", sql: `SELECT sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s, count(CASE WHEN device = 'ios' THEN 1 ELSE 0 END) AS n,
		   count(DISTINCT user_id) AS users FROM events_empty`}},
		{attack: attack{name: "GROUP BY ROLLUP", sql: `SELECT country, device, sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s, count(CASE WHEN country = 'US' THEN 1 ELSE 0 END) AS n
		   FROM events GROUP BY ROLLUP (country, device) ORDER BY 1, 2`}},
		{attack: attack{name: "GROUPING SETS", sql: `SELECT country, device, sum(CASE WHEN device = 'ios' THEN amount ELSE 0 END) AS s FROM events
		   GROUP BY GROUPING SETS ((country), (device), ()) ORDER BY 1, 2`}},
		{attack: attack{name: "with a FILTER beside", sql: sel(`sum(amount) FILTER (WHERE device = 'ios') AS f, sum(CASE WHEN device = 'ios' THEN amount ELSE 0 END) AS s`)}},
		{attack: attack{name: "with a FILTER of its own", sql: sel(`sum(CASE WHEN device = 'ios' THEN amount ELSE 0 END) FILTER (WHERE country <> 'US') AS s`)}},
		{attack: attack{name: "in a subquery", sql: `SELECT max(s) AS s FROM (SELECT country, sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) AS s FROM events GROUP BY 1) x`}},
		{attack: attack{name: "in a UNION", sql: `SELECT sum(CASE WHEN device = 'ios' THEN bonus ELSE 0 END) FROM events UNION ALL SELECT 1.5 ORDER BY 1`}},
		{attack: attack{name: "SELECT DISTINCT", sql: `SELECT DISTINCT count(CASE WHEN device = 'ios' THEN 1 ELSE 0 END) AS n FROM events GROUP BY country ORDER BY 1`}},
		{attack: attack{name: "count of a NOT NULL key in it", sql: sel(`count(CASE WHEN device = 'ios' THEN id ELSE 0 END) AS n, count(CASE WHEN device = 'ios' THEN id END) AS m`)}},
		{attack: attack{name: "local-zone condition", sql: sel(`count(CASE WHEN date_trunc('day', created_at AT TIME ZONE 'America/New_York') = '2026-01-10' THEN 1 ELSE 0 END) AS n`)}},
		{attack: attack{name: "window over it", sql: `SELECT country, sum(CASE WHEN device = 'ios' THEN amount ELSE 0 END) AS s,
		   sum(sum(CASE WHEN device = 'ios' THEN amount ELSE 0 END)) OVER () AS total FROM events GROUP BY 1 ORDER BY 1`}},
	}
	runAttacks(t, db.DSN, p.URL(db.DSN), attacks)
}

// TestRedteamZoneCountOfKey: count(id) of the primary key, which the
// rollup does not read, where id can be NULL in the joined rows (a LEFT
// JOIN's NULL side, a rolling window without rows), renamed, and dropped
// by another session while a REPEATABLE READ transaction reads.
func TestRedteamZoneCountOfKey(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 40_000, 30)
	mustExec(t, conn, `CREATE TABLE countries (code text PRIMARY KEY, region text NOT NULL, id int NOT NULL);
		INSERT INTO countries VALUES ('US', 'Americas', 1), ('BR', 'Americas', 2), ('DE', 'Europe', 3), ('FR', 'Europe', 4), ('JP', 'Asia', 5);
		ANALYZE countries`)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	runAttacks(t, db.DSN, p.URL(db.DSN), []zoneAttack{
		{attack: attack{name: "count of the dimension's key across a LEFT JOIN", sql: `SELECT c.region, count(c.id) AS n, count(c.code) AS m, count(*) AS k, count(DISTINCT e.user_id) AS users
		   FROM events e LEFT JOIN countries c ON c.code = e.country GROUP BY 1 ORDER BY 1`}},
		{attack: attack{name: "count of the fact's key across a LEFT JOIN", sql: `SELECT c.region, count(e.id) AS n, count(*) AS k
		   FROM countries c LEFT JOIN events e ON e.country = c.code AND e.device = 'none' GROUP BY 1 ORDER BY 1`}},
		{attack: attack{name: "count of the key over a rolling window with empty windows", sql: `SELECT d.d, count(e.id) AS n, count(*) AS k, count(DISTINCT e.user_id) AS users
		   FROM generate_series('2026-01-25'::timestamp, '2026-02-12'::timestamp, interval '1 day') d
		   LEFT JOIN events e ON e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + interval '1 day' GROUP BY 1 ORDER BY 1`}},
		{attack: attack{name: "count of the key, qualified by schema", sql: `SELECT device, count(public.events.id) AS n, count(DISTINCT user_id) AS users FROM public.events GROUP BY 1 ORDER BY 1`}},
		{attack: attack{name: "count of the key's text", sql: `SELECT device, count(id::text) AS n, count(id::text || '-' || user_id::text) AS m FROM events GROUP BY 1 ORDER BY 1`}},
		{attack: attack{name: "count of the key plus one (can fail: not answered as count(*))", sql: `SELECT device, count(id + 1) AS n FROM events GROUP BY 1 ORDER BY 1`}},
	})

	// Renamed: the key renamed away and a NULL-able column named id.
	rename := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeSimpleProtocol)
	direct := connectMode(t, db.DSN, pgx.QueryExecModeSimpleProtocol)
	const q = `SELECT device, count(id) AS n FROM events GROUP BY 1 ORDER BY 1`
	if w, g := rowsOf(ctx, direct.Conn, q), rowsOf(ctx, rename.Conn, q); w != g {
		t.Errorf("before the rename: got\n%s\nwant\n%s", g, w)
	}
	mustExec(t, conn, `ALTER TABLE events RENAME COLUMN id TO event_id; ALTER TABLE events ADD COLUMN id bigint;
		UPDATE events SET id = event_id WHERE event_id % 4 = 0`)
	if w, g := rowsOf(ctx, direct.Conn, q), rowsOf(ctx, rename.Conn, q); w != g {
		t.Errorf("after the rename: got\n%s\nwant\n%s", g, w)
	}
	mustExec(t, conn, `ALTER TABLE events DROP COLUMN id; ALTER TABLE events RENAME COLUMN event_id TO id`)

	// REPEATABLE READ: both transactions' snapshots taken before another
	// session drops the key and adds rows without one (and refreshes).
	a := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeSimpleProtocol)
	d := connectMode(t, db.DSN, pgx.QueryExecModeSimpleProtocol)
	for _, c := range []*noticeConn{a, d} {
		mustExec(t, c.Conn, "BEGIN ISOLATION LEVEL REPEATABLE READ")
		mustExec(t, c.Conn, "SELECT 1")
	}
	mustExec(t, conn, `ALTER TABLE events DROP CONSTRAINT events_pkey; ALTER TABLE events ALTER COLUMN id DROP NOT NULL;
		INSERT INTO events SELECT NULL, created_at, user_id, country, device, amount FROM events WHERE id % 7 = 0`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	const q2 = `SELECT country, count(id) AS n, count(*) AS k FROM events GROUP BY 1 ORDER BY 1`
	if w, g := rowsOf(ctx, d.Conn, q2), rowsOf(ctx, a.Conn, q2); w != g {
		t.Errorf("in REPEATABLE READ: got\n%s\nwant\n%s", g, w)
	}
	for _, c := range []*noticeConn{a, d} {
		mustExec(t, c.Conn, "COMMIT")
	}
	if w, g := rowsOf(ctx, d.Conn, q2), rowsOf(ctx, a.Conn, q2); w != g {
		t.Errorf("after the transaction: got\n%s\nwant\n%s", g, w)
	}
	// SET NOT NULL back after deleting the rows: answered again, and right.
	mustExec(t, conn, `DELETE FROM events WHERE id IS NULL; ALTER TABLE events ALTER COLUMN id SET NOT NULL`)
	if w, g := rowsOf(ctx, d.Conn, q2), rowsOf(ctx, a.Conn, q2); w != g {
		t.Errorf("after SET NOT NULL: got\n%s\nwant\n%s", g, w)
	}
}

// TestRedteamZoneCountOfPartitionKey: a partitioned table declares id NOT
// NULL; PostgreSQL keeps the declaration on every partition (DROP NOT
// NULL on one is refused), so count(id) is count(*) across partitions,
// including one attached after the refresh.
func TestRedteamZoneCountOfPartitionKey(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 30)
	mustExec(t, conn, `ALTER TABLE events RENAME TO events_src;
		CREATE TABLE events (LIKE events_src) PARTITION BY RANGE (created_at);
		ALTER TABLE events ALTER COLUMN id SET NOT NULL;
		CREATE TABLE events_jan PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2026-01-16');
		CREATE TABLE events_late PARTITION OF events FOR VALUES FROM ('2026-01-16') TO ('2026-02-01');
		INSERT INTO events SELECT * FROM events_src; ANALYZE events`)
	if _, err := conn.Exec(context.Background(), `ALTER TABLE events_late ALTER COLUMN id DROP NOT NULL`); err == nil {
		t.Log("PostgreSQL let a partition drop NOT NULL")
	}
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	mustExec(t, conn, `CREATE TABLE events_feb (LIKE events_src); ALTER TABLE events_feb ALTER COLUMN id SET NOT NULL;
		INSERT INTO events_feb SELECT id + 1000000, created_at + interval '31 days', user_id, country, device, amount FROM events_src WHERE id % 3 = 0;
		ALTER TABLE events ATTACH PARTITION events_feb FOR VALUES FROM ('2026-02-01') TO ('2026-04-01')`)
	p := startProxy(t, server.adminURL, "--approx", "on")
	runAttacks(t, db.DSN, p.URL(db.DSN), []zoneAttack{
		{attack: attack{name: "count of a partitioned table's key", sql: `SELECT country, count(id) AS n, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`}},
	})
}
