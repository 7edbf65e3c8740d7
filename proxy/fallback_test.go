package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/status"
)

// TestFallbackOf: the error of a rollup answer is classed for the status
// page, and the NOTICE names the rollup, the error and its SQLSTATE, and
// says that PostgreSQL answers exactly.
func TestFallbackOf(t *testing.T) {
	p := &plan.Rollup{Head: plan.Head{Rollup: "events_daily"}}
	for _, c := range []struct {
		err    error
		reason string
		notice string
	}{
		{&pgconn.PgError{Code: "42501", Message: "permission denied for table events_daily"}, status.ReasonPrivilege,
			"pgsketch: rollup events_daily not used: permission denied for table events_daily (SQLSTATE 42501); answered exactly by PostgreSQL"},
		{fmt.Errorf("fetch: %w", &pgconn.PgError{Code: "55000", Message: "pgsketch: rollup events_daily not used: 80 of the buckets in the range changed"}),
			status.ReasonNotReady,
			"pgsketch: rollup events_daily not used: 80 of the buckets in the range changed (SQLSTATE 55000); answered exactly by PostgreSQL"},
		{&exec.Refused{Reason: "count(*) of the INTERSECT: relative error 12% over pgsketch.max_overlap_error 10%"}, status.ReasonRefused,
			"pgsketch: count(*) of the INTERSECT: relative error 12% over pgsketch.max_overlap_error 10%; answered exactly by PostgreSQL"},
		{fmt.Errorf("%w: distinct_user_id: bad sketch", exec.ErrData), status.ReasonData,
			"pgsketch: rollup events_daily not used: exec: rollup data: distinct_user_id: bad sketch; answered exactly by PostgreSQL"},
		{&pgconn.PgError{Code: "22000", Message: "unknown schema version 0"}, status.ReasonData,
			"pgsketch: rollup events_daily not used: unknown schema version 0 (SQLSTATE 22000); answered exactly by PostgreSQL"},
		// A check of the plan's own statement (a rolling window's bound).
		{&pgconn.PgError{Code: "22007", Message: `invalid input syntax for type timestamp with time zone: "pgsketch: a window bound is not a bucket start of the rollup within the span read"`},
			status.ReasonRefused,
			"pgsketch: a window bound is not a bucket start of the rollup within the span read (SQLSTATE 22007); answered exactly by PostgreSQL"},
		{&pgconn.PgError{Code: "22007", Message: `invalid input syntax for type interval: "pgsketch: a window bound is not a bucket start of the rollup within the span read"`},
			status.ReasonRefused,
			"pgsketch: a window bound is not a bucket start of the rollup within the span read (SQLSTATE 22007); answered exactly by PostgreSQL"},
		{&pgconn.PgError{Code: "22007", Message: `invalid input syntax for type interval: "not an interval"`}, "", ""},
		// The statement's own error, which PostgreSQL raises again.
		{&pgconn.PgError{Code: "22007", Message: `invalid input syntax for type timestamp with time zone: "not a time"`}, "", ""},
		{&pgconn.PgError{Code: "42P01", Message: `relation "events_daily" does not exist`}, status.ReasonOther,
			`pgsketch: rollup events_daily not used: relation "events_daily" does not exist (SQLSTATE 42P01); answered exactly by PostgreSQL`},
	} {
		fb := fallbackOf(p, c.err)
		if c.reason == "" {
			if !fb.own {
				t.Errorf("%v: not the statement's own error", c.err)
			}
			continue
		}
		if fb.own || fb.reason != c.reason || fb.notice() != c.notice {
			t.Errorf("%v: reason %q, notice %q; want %q, %q", c.err, fb.reason, fb.notice(), c.reason, c.notice)
		}
	}
}

// TestExactly: what PostgreSQL runs for a statement the proxy does not
// answer never calls APPROX_COUNT_DISTINCT: the statement, its exact
// equivalent, or none (refused, saying which form).
func TestExactly(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT 1": "SELECT 1",
		"SELECT 'approx_count_distinct(x)', count(DISTINCT a) FROM t": "SELECT 'approx_count_distinct(x)', count(DISTINCT a) FROM t",
		"SELECT approx_count_distinct(DISTINCT a) FROM t":             `SELECT count(DISTINCT "a") AS "approx_count_distinct" FROM "t"`,
		"SELECT approx_count_distinct(a) FILTER (WHERE b) FROM t":     `SELECT count(DISTINCT "a") FILTER (WHERE "b") AS "approx_count_distinct" FROM "t"`,
		"SELECT approx_count_distinct(*) FROM t":                      "",
	} {
		run, unsupported := exactly(sql)
		if want == "" {
			if !strings.Contains(unsupported, "APPROX_COUNT_DISTINCT(*)") {
				t.Errorf("%s: run %q, unsupported %q; want it refused", sql, run, unsupported)
			}
			continue
		}
		if run != want || unsupported != "" {
			t.Errorf("%s: run %q, unsupported %q; want %q", sql, run, unsupported, want)
		}
	}
}
