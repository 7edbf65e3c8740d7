package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
)

// sameAnswer compares two answers of the same query: columns, tag,
// notices and rows (in any order: a query without ORDER BY has none).
// withoutMerge is notices without the ending that says where the rollup
// rows were merged (or that they came from the cache).
func withoutMerge(notices []string) []string {
	out := make([]string, len(notices))
	for i, n := range notices {
		out[i], _, _ = strings.Cut(n, "; rollup rows ")
	}
	return out
}

func sameAnswer(got, want *answer) error {
	if fmt.Sprint(got.fields) != fmt.Sprint(want.fields) {
		return fmt.Errorf("columns %v, want %v", got.fields, want.fields)
	}
	if got.tag != want.tag {
		return fmt.Errorf("tag %q, want %q", got.tag, want.tag)
	}
	if fmt.Sprint(withoutMerge(got.notices)) != fmt.Sprint(withoutMerge(want.notices)) {
		return fmt.Errorf("notices %q, want %q", got.notices, want.notices)
	}
	rows := func(a *answer) []string {
		var out []string
		for _, r := range a.raw {
			out = append(out, fmt.Sprintf("%q", r))
		}
		slices.Sort(out)
		return out
	}
	if g, w := rows(got), rows(want); !slices.Equal(g, w) {
		return fmt.Errorf("rows %v, want %v", g, w)
	}
	return nil
}

// TestRollupCache runs queries.txt and more_queries.txt through a proxy with --cache-bytes and
// one without, in the simple protocol and with bound parameters: every
// answer, the first (filling the cache) and the second (from it), is the
// uncached one. Then it shows that a cached answer does not read the
// rollup table (rows deleted behind the catalog's back do not change it),
// that a refresh (a new rollup version) invalidates it, and that
// privileges are checked on every query: after REVOKE SELECT on the base
// table the role gets PostgreSQL's permission error, not the cached number.
func TestRollupCache(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 400_000, 90, "2026-03-29 12:00", "3 days")
	cached := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	uncached := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "0")
	ctx := context.Background()
	cs, us := connectSimple(t, cached.URL(db.DSN)), connectSimple(t, uncached.URL(db.DSN))
	cx := connectMode(t, cached.URL(db.DSN), pgx.QueryExecModeCacheStatement)
	ux := connectMode(t, uncached.URL(db.DSN), pgx.QueryExecModeCacheStatement)

	n, fromCache := 0, 0
	type named struct {
		name string
		q    rollupQuery
	}
	var queries []named
	for _, file := range []string{"queries.txt", "more_queries.txt"} {
		for _, q := range readQueryFile(t, "testdata/aggregates/"+file) {
			if q.rollup {
				queries = append(queries, named{fmt.Sprintf("%s:%d", file, q.line), q})
			}
		}
	}
	for _, nq := range queries {
		name, q := nq.name, nq.q
		psql, args := parameterize(q.sql)
		for _, k := range []struct {
			mode        string
			cache, none *noticeConn
			sql         string
			args        []any
		}{{"simple", cs, us, q.sql, nil}, {"params", cx, ux, psql, args}} {
			if k.mode == "params" && len(args) == 0 {
				continue
			}
			want, err := k.none.query(ctx, k.sql, k.args...)
			if err != nil {
				t.Errorf("%s %s: uncached: %v\n%s", name, k.mode, err, k.sql)
				continue
			}
			if len(want.notices) != 1 {
				t.Errorf("%s %s: not answered from the rollup: %q", name, k.mode, want.notices)
			}
			for _, pass := range []string{"filling", "cached"} {
				got, err := k.cache.query(ctx, k.sql, k.args...)
				if err == nil {
					err = sameAnswer(got, want)
				}
				if err == nil && pass == "cached" && strings.Contains(got.notices[0], "; rollup rows from the proxy's cache") {
					fromCache++ // plans that are not cached say where they merged
				}
				if err != nil {
					t.Errorf("%s %s, %s: %v\n%s", name, k.mode, pass, err, k.sql)
				}
			}
			n++
		}
	}
	t.Logf("%d answers the same with the cache (filled, then used) as without; %d said their rollup rows came from the cache", n, fromCache)
	if fromCache < n/2 {
		t.Errorf("only %d of %d repeated answers came from the cache", fromCache, n)
	}
	if t.Failed() {
		l := cached.Log()
		t.Fatalf("the cached proxy's log ends:\n%s", l[max(0, len(l)-4000):])
	}
	if n < 100 {
		t.Errorf("only %d queries compared", n)
	}

	month := `SELECT country, count(DISTINCT user_id) AS users, sum(amount) AS amount FROM events
		WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY country ORDER BY country`
	ask := func(c *noticeConn) *answer {
		t.Helper()
		a, err := c.query(ctx, month)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.notices) != 1 {
			t.Fatalf("not answered from the rollup: %q", a.notices)
		}
		return a
	}
	before := ask(cs)
	if err := sameAnswer(ask(us), before); err != nil {
		t.Fatal(err)
	}
	// Rows deleted from the rollup table behind the catalog (no refresh,
	// no new version): the cached answer does not read them, the uncached
	// one does.
	mustExec(t, conn, `DELETE FROM daily WHERE bucket = '2026-02-10'`)
	if err := sameAnswer(ask(cs), before); err != nil {
		t.Fatalf("the cached answer read the rollup table: %v", err)
	}
	if sameAnswer(ask(us), before) == nil {
		t.Fatal("deleting a bucket's rows changed nothing")
	}
	// A refresh bumps the rollup's version: the cache entry is dropped.
	var v0, v1 int64
	if err := conn.QueryRow(ctx, `SELECT version FROM pgsketch.rollup_defs WHERE name = 'daily'`).Scan(&v0); err != nil {
		t.Fatal(err)
	}
	refreshRollup(t, conn, "daily", refresh.Options{})
	if err := conn.QueryRow(ctx, `SELECT version FROM pgsketch.rollup_defs WHERE name = 'daily'`).Scan(&v1); err != nil || v1 <= v0 {
		t.Fatalf("version %d after the refresh, %d before (%v)", v1, v0, err)
	}
	after := ask(us)
	if sameAnswer(after, before) == nil {
		t.Fatal("the refresh restored the deleted bucket: the test shows nothing")
	}
	if err := sameAnswer(ask(cs), after); err != nil {
		t.Fatalf("after a refresh, the cached proxy: %v", err)
	}

	t.Run("privileges", func(t *testing.T) {
		suffix := strings.TrimPrefix(db.Name, server.prefix)
		reader := "pgsk_cache_reader" + suffix
		mustExec(t, conn, fmt.Sprintf(`DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s; GRANT USAGE ON SCHEMA pgsketch TO %[1]s;
			GRANT SELECT ON events, daily, pgsketch.inserts_daily, pgsketch.rollup_defs TO %[1]s`, reader))
		t.Cleanup(func() {
			c, err := pgx.Connect(context.Background(), db.DSN)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			if _, err := c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s; DROP ROLE %[1]s`, reader)); err != nil {
				t.Errorf("drop role %s: %v", reader, err)
			}
		})
		c := connectSimple(t, cached.URL(db.DSN))
		mustExec(t, c.Conn, "SET ROLE "+reader)
		first := ask(c)
		if err := sameAnswer(ask(c), first); err != nil {
			t.Fatal(err)
		}
		if err := sameAnswer(first, after); err != nil {
			t.Fatal(err)
		}
		// Without SELECT on the rollup table the query is PostgreSQL's:
		// exact, with a NOTICE saying why the rollup was not used.
		mustExec(t, conn, "REVOKE SELECT ON daily FROM "+reader)
		a, err := c.query(ctx, month)
		if err != nil || len(a.notices) != 1 || !strings.Contains(a.notices[0], "(SQLSTATE 42501)") ||
			!strings.Contains(a.notices[0], "answered exactly by PostgreSQL") {
			t.Fatalf("without SELECT on the rollup: %v, notices %q", err, a.notices)
		}
		mustExec(t, conn, "GRANT SELECT ON daily TO "+reader)
		if err := sameAnswer(ask(c), first); err != nil {
			t.Fatal(err)
		}
		// Without SELECT on the base table: PostgreSQL's error.
		mustExec(t, conn, "REVOKE SELECT ON events FROM "+reader)
		_, err = c.query(ctx, month)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, "events") {
			t.Fatalf("after REVOKE SELECT ON events: %v", err)
		}
		// In the extended protocol too.
		x := connectMode(t, cached.URL(db.DSN), pgx.QueryExecModeCacheStatement)
		mustExec(t, x.Conn, "SET ROLE "+reader)
		_, err = x.query(ctx, strings.ReplaceAll(month, "'2026-02-01'", "$1"), "2026-02-01")
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Fatalf("extended, after REVOKE SELECT ON events: %v", err)
		}
	})
}
