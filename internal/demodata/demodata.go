// Package demodata generates the events table that the demo, the end-to-end
// tests and the benchmarks use: deterministic (the same rows for the same
// parameters, on any PostgreSQL 15), made inside PostgreSQL with one
// INSERT ... SELECT over generate_series, and shaped like product
// analytics: activity skewed towards a minority of heavy users, countries
// with a long tail and a few NULLs, three devices.
package demodata

import (
	"fmt"
	"strings"
	"time"
)

// Spec describes a generated events table.
type Spec struct {
	// Table is the (possibly schema-qualified, already quoted as needed)
	// name of the table to create.
	Table string
	// Rows is the number of events; Days how many days they span from
	// Start (UTC midnight). Users is the number of distinct possible users.
	Rows  int64
	Days  int
	Users int64
	Start time.Time
	// DistributeBy, when set, is the column Citus distributes the table by
	// (create_distributed_table, before the rows go in); the primary key
	// then holds it too, as Citus requires.
	DistributeBy string
}

// Default is the demo's table: 5 M events over 90 days by up to 2 M users.
var Default = Spec{Table: "events", Rows: 5_000_000, Days: 90, Users: 2_000_000,
	Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}

// countries and their weights (a long tail, like real traffic).
var countries = []struct {
	code   string
	weight int
}{
	{"US", 30}, {"IN", 12}, {"DE", 8}, {"GB", 7}, {"BR", 6}, {"FR", 5}, {"JP", 5}, {"CA", 4},
	{"MX", 3}, {"ES", 3}, {"IT", 3}, {"AU", 2}, {"NL", 2}, {"PL", 2}, {"SE", 1}, {"KR", 1},
	{"NG", 1}, {"AR", 1}, {"ZA", 1}, {"", 1}, // "" is NULL: an unknown country
}

// CreateSQL returns the statements that create and fill the table. Column
// created_at is timestamptz, events arrive in time order (like an
// append-only log), user_id is bigint, amount numeric(10,2).
func (s Spec) CreateSQL() string {
	var cases strings.Builder
	total, acc := 0, 0
	for _, c := range countries {
		total += c.weight
	}
	cases.WriteString("CASE")
	for _, c := range countries {
		acc += c.weight
		v := "NULL"
		if c.code != "" {
			v = "'" + c.code + "'"
		}
		fmt.Fprintf(&cases, " WHEN u2 < %d THEN %s", acc, v)
	}
	cases.WriteString(" END")
	// u1..u4: independent uniform values from hashes of the row number.
	// user_id = floor(users * u1^3): the lowest 10% of ids make about 46%
	// of the events, and many possible users never show up.
	key, distribute := "PRIMARY KEY (id)", ""
	if s.DistributeBy != "" {
		key = "PRIMARY KEY (id, " + s.DistributeBy + ")"
		distribute = fmt.Sprintf("SELECT create_distributed_table('%s', '%s');\n", s.Table, s.DistributeBy)
	}
	return fmt.Sprintf(`CREATE TABLE %[1]s (
    id         bigint NOT NULL,
    created_at timestamptz NOT NULL,
    user_id    bigint NOT NULL,
    country    text,
    device     text NOT NULL,
    amount     numeric(10,2) NOT NULL,
    %[8]s
);
%[9]sINSERT INTO %[1]s (id, created_at, user_id, country, device, amount)
SELECT i,
       timestamptz %[2]s + (i - 1) * (interval '1 second' * %[3]d / %[4]d),
       floor(%[5]d * u1 * u1 * u1)::bigint,
       %[6]s,
       CASE WHEN u3 < 0.45 THEN 'android' WHEN u3 < 0.85 THEN 'ios' ELSE 'web' END,
       round((u4 * u4 * 200)::numeric, 2)
  FROM generate_series(1, %[4]d) AS i,
       LATERAL (SELECT (hashint8extended(i, 1) & 9007199254740991)::float8 / 9007199254740992 AS u1,
                       floor((hashint8extended(i, 2) & 9007199254740991)::float8 / 9007199254740992 * %[7]d)::int AS u2,
                       (hashint8extended(i, 3) & 9007199254740991)::float8 / 9007199254740992 AS u3,
                       (hashint8extended(i, 4) & 9007199254740991)::float8 / 9007199254740992 AS u4) AS u;
ANALYZE %[1]s;`,
		s.Table, "'"+s.Start.UTC().Format("2006-01-02 15:04:05")+"+00'", s.Days*86400, s.Rows, s.Users, cases.String(), total,
		key, distribute)
}
