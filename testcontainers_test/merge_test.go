package e2e

import (
	"bytes"
	"context"
	bin "encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/catalog"
	pgexec "github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/rewrite/plan"
)

// The NOTICE endings that say where a rewritten answer's sketches were
// merged (exec.Answer.Notice).
const (
	mergedInProxy    = "; rollup rows merged in the proxy"
	mergedInPostgres = "; rollup rows merged in PostgreSQL (hll_union_agg)"
)

// TestMergeStrategies: for every rewritten
// query of the differential suites (queries.txt, more_queries.txt), the
// sketches PostgreSQL merges per group (hll_union_agg) are byte for byte
// the proxy's merge of the same rollup rows, and the answers through the
// proxy are identical with pgsketch.merge = proxy and = server; auto runs
// what the plan's rule says. Then, in a database without the extension,
// auto merges in the proxy and server is refused with a clear error.
func TestMergeStrategies(t *testing.T) {
	t.Parallel()
	// Small enough that the day × country × device sketches are EXPLICIT
	// and SPARSE and their unions cross to SPARSE and FULL.
	db, conn := rolledUpEvents(t, 300_000, 90, "2026-03-29 12:00", "3 days")
	// No cache: every answer merges the rollup rows it fetched.
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "0")
	url := p.URL(db.DSN)
	ctx := context.Background()

	snap, sess := directPlanning(t, conn)
	if !snap.HLL().Installed() {
		t.Fatal("the test database has no hll extension")
	}
	conns := map[rewrite.Merge]*noticeConn{}
	for _, m := range []rewrite.Merge{rewrite.MergeProxy, rewrite.MergeServer, rewrite.MergeAuto} {
		conns[m] = connectSimple(t, url)
		mustExec(t, conns[m].Conn, "SET pgsketch.merge = "+string(m))
	}

	queries := append(readQueryFile(t, "testdata/aggregates/queries.txt"), readQueryFile(t, "testdata/aggregates/more_queries.txt")...)
	planned, groups, sketches, autoServer := 0, 0, 0, 0
	for i, q := range queries {
		if !q.rollup {
			continue
		}
		name := fmt.Sprintf("query %d (line %d)", i, q.line)
		res := rewrite.Rewrite(q.sql, snap, sess)
		pl := res.Plan
		_, rollup := pl.(*plan.Rollup)
		_, nested := pl.(*plan.Nested)
		if !rollup && !nested {
			t.Errorf("%s: not planned from the rollup: %s\n%s", name, res.Reason, q.sql)
			continue
		}
		if pl.Header().Params > 0 {
			continue // the suites' parameterized forms come from the literal ones
		}
		planned++
		// The rollup halves, merged both ways (a nested plan's, per arm).
		arms := pl.Fetches()
		merge := arms[0].Merge
		if nested {
			merge = rewrite.MergeProxy
			for _, a := range arms {
				if a.Merge == rewrite.MergeServer {
					merge = rewrite.MergeServer
				}
			}
		}
		for _, arm := range arms {
			byProxy := rollupHalf(t, conn, arm, arm.FetchSQL)
			byServer := rollupHalf(t, conn, arm, arm.ServerFetchSQL)
			if len(byProxy) != len(byServer) {
				t.Errorf("%s: %d rollup groups merged in the proxy, %d in PostgreSQL", name, len(byProxy), len(byServer))
				continue
			}
			for key, ps := range byProxy {
				ss, ok := byServer[key]
				if !ok {
					t.Errorf("%s: group %x merged in the proxy only", name, key)
					continue
				}
				groups++
				for j := range ps {
					sketches++
					if !bytes.Equal(ps[j], ss[j]) {
						t.Errorf("%s: group %x, sketch %d: proxy merge %x, PostgreSQL's %x", name, key, j, head(ps[j]), head(ss[j]))
					}
				}
			}
		}
		// The answers through the proxy.
		var answers [3]*answer
		for k, m := range []rewrite.Merge{rewrite.MergeProxy, rewrite.MergeServer, rewrite.MergeAuto} {
			a, err := conns[m].query(ctx, q.sql)
			if err != nil {
				t.Errorf("%s: pgsketch.merge = %s: %v", name, m, err)
				continue
			}
			answers[k] = a
			want := mergedInProxy
			if m == rewrite.MergeServer || m == rewrite.MergeAuto && merge == rewrite.MergeServer {
				want = mergedInPostgres
			}
			if len(a.notices) != 1 || !strings.HasSuffix(a.notices[0], want) {
				t.Errorf("%s: pgsketch.merge = %s (plan: %s, %s): notices %q, want one ending %q", name, m, arms[0].Merge, arms[0].MergeReason, a.notices, want)
			}
		}
		if merge == rewrite.MergeServer {
			autoServer++
		}
		if answers[0] == nil || answers[1] == nil || answers[2] == nil {
			continue
		}
		for k := 1; k < 3; k++ {
			if fmt.Sprint(answers[k].fields, answers[k].raw, answers[k].tag) != fmt.Sprint(answers[0].fields, answers[0].raw, answers[0].tag) {
				t.Errorf("%s: answers differ by strategy:\nproxy %q\nother %q", name, answers[0].rows, answers[k].rows)
			}
		}
	}
	t.Logf("%d rewritten queries: %d rollup groups, %d merged sketches compared byte for byte; auto merged %d of them in PostgreSQL",
		planned, groups, sketches, autoServer)
	if planned < 100 {
		t.Errorf("%d rewritten queries compared, want at least 100", planned)
	}
	if autoServer == 0 || autoServer == planned {
		t.Errorf("auto chose server for %d of %d queries: the suite should exercise both sides of the rule", autoServer, planned)
	}

	t.Run("without the extension", func(t *testing.T) {
		testMergeWithoutExtension(t, p)
	})
}

// directPlanning reads the catalog and the session settings the proxy
// would plan with on conn.
func directPlanning(t *testing.T, conn *pgx.Conn) (*catalog.Snapshot, rewrite.Session) {
	t.Helper()
	ctx := context.Background()
	var js []byte
	if err := conn.QueryRow(ctx, catalog.Query).Scan(&js); err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Parse(js)
	if err != nil {
		t.Fatal(err)
	}
	var ext catalog.Extension
	err = conn.QueryRow(ctx, catalog.ExtensionQuery).Scan(&ext.Schema, &ext.Version)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	sess := rewrite.Session{Approx: true}
	if err := conn.QueryRow(ctx, "SELECT current_setting('search_path'), current_setting('TimeZone'), current_user").
		Scan(&sess.SearchPath, &sess.TimeZone, &sess.User); err != nil {
		t.Fatal(err)
	}
	return snap.WithHLL(ext), sess
}

// rollupHalf runs a plan's fetch statement (fetchSQL: the proxy-merge or
// the server-merge form) and returns, per group key, each sketch column of
// its rollup half as the proxy merges it: marshalled, nil for no sketch.
// PostgreSQL's merge must come back as one sketch per group; it is
// returned as PostgreSQL sent it, after checking that it decodes.
func rollupHalf(t *testing.T, conn *pgx.Conn, pl *plan.Rollup, fetchSQL string) map[string][][]byte {
	t.Helper()
	ncols := 1 + len(pl.Keys)
	for _, a := range pl.Aggs {
		ncols = max(ncols, a.RollupColumn+1, a.BaseColumn+1)
	}
	formats := slices.Repeat([]int16{1}, ncols)
	var lifted [][]byte // the literals of the time bounds, which the fetch binds
	for _, v := range pl.Lifted {
		lifted = append(lifted, []byte(v))
	}
	res := conn.PgConn().ExecParams(context.Background(), fetchSQL, lifted, nil, nil, formats).Read()
	if res.Err != nil {
		t.Fatalf("fetch: %v\n%s", res.Err, fetchSQL)
	}
	server := fetchSQL == pl.ServerFetchSQL
	out := map[string][][]byte{}
	for _, r := range res.Rows {
		if string(r[0]) != "rollup" {
			continue
		}
		var key []byte
		for _, k := range r[1 : 1+len(pl.Keys)] {
			key = bin.BigEndian.AppendUint32(key, uint32(len(k)))
			key = append(key, k...)
		}
		var cols [][]byte
		for _, a := range pl.Aggs {
			if a.Op != rewrite.MergeHLL {
				continue
			}
			h, err := pgexec.MergeSketches(r[a.RollupColumn], a)
			if err != nil {
				t.Fatalf("merge %s: %v", a.Measure, err)
			}
			var b []byte
			if server {
				switch elems := byteaArray(t, r[a.RollupColumn]); {
				case len(elems) == 1:
					b = elems[0]
				case len(elems) > 1:
					t.Fatalf("server merge returned %d sketches for a group", len(elems))
				}
			} else if h != nil {
				if b, err = h.MarshalBinary(); err != nil {
					t.Fatal(err)
				}
			}
			cols = append(cols, b)
		}
		if _, dup := out[string(key)]; dup {
			t.Fatalf("group %x twice in the rollup half", key)
		}
		out[string(key)] = cols
	}
	return out
}

// byteaArray decodes a one-dimensional bytea[] in binary format.
func byteaArray(t *testing.T, b []byte) [][]byte {
	t.Helper()
	if b == nil {
		return nil
	}
	be := bin.BigEndian
	if len(b) < 12 || be.Uint32(b) != 1 {
		if len(b) >= 12 && be.Uint32(b) == 0 {
			return nil
		}
		t.Fatalf("not a one-dimensional array: %x", head(b))
	}
	n := int(be.Uint32(b[12:]))
	b = b[20:]
	var out [][]byte
	for range n {
		l := int32(be.Uint32(b))
		b = b[4:]
		if l < 0 {
			out = append(out, nil)
			continue
		}
		out = append(out, b[:l])
		b = b[l:]
	}
	return out
}

func head(b []byte) []byte { return b[:min(len(b), 24)] }

// testMergeWithoutExtension: auto never merges in PostgreSQL without the
// hll extension, and server is refused with SQLSTATE 55000 (as the query's
// own error: a transaction block is aborted); an invalid setting with
// 22023. Once the extension is created, auto follows the rule.
func testMergeWithoutExtension(t *testing.T, p *proxyProc) {
	db, conn := eventsDB(t, 20_000, 10)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	mustExec(t, conn, "DROP EXTENSION hll")
	ctx := context.Background()
	url := p.URL(db.DSN)
	c := connectSimple(t, url)
	const many = "SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country ORDER BY country"
	const one = "SELECT date_trunc('day', created_at) AS day, country, device, count(DISTINCT user_id) AS users FROM events GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"

	notice := func(c *noticeConn, sql, want string) {
		t.Helper()
		a, err := c.query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if len(a.notices) != 1 || !strings.HasSuffix(a.notices[0], want) {
			t.Errorf("%s: notices %q, want one ending %q", sql, a.notices, want)
		}
	}
	explain := func(c *noticeConn, sql, want string) {
		t.Helper()
		a, err := c.query(ctx, "EXPLAIN "+sql)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, r := range a.rows {
			lines = append(lines, r[0])
		}
		if !slices.Contains(lines, want) {
			t.Errorf("EXPLAIN %s: no line %q in\n%s", sql, want, strings.Join(lines, "\n"))
		}
	}
	wantErr := func(err error, code, msg string) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, msg) {
			t.Errorf("error %v, want SQLSTATE %s %q", err, code, msg)
		}
	}

	notice(c, many, mergedInProxy)
	explain(c, many, "merge: proxy (auto: the database has no hll extension)")

	mustExec(t, c.Conn, "SET pgsketch.merge = server")
	_, err := c.query(ctx, many)
	wantErr(err, "55000", "pgsketch.merge is server, but this database has no hll extension")
	// Inside a transaction block the error aborts it, as PostgreSQL's own.
	mustExec(t, c.Conn, "BEGIN")
	_, err = c.query(ctx, many)
	wantErr(err, "55000", "no hll extension")
	if st := c.PgConn().TxStatus(); st != 'E' {
		t.Errorf("transaction status %c after the refusal, want E", st)
	}
	_, err = c.query(ctx, "SELECT 1")
	wantErr(err, "25P02", "current transaction is aborted")
	mustExec(t, c.Conn, "ROLLBACK")
	// The extended protocol: the error, then the session goes on.
	ext := connectMode(t, url, pgx.QueryExecModeExec)
	mustExec(t, ext.Conn, "SET pgsketch.merge = server")
	_, err = ext.query(ctx, many)
	wantErr(err, "55000", "no hll extension")
	if a, err := ext.query(ctx, "SELECT 41 + 1"); err != nil || len(a.rows) != 1 || a.rows[0][0] != "42" {
		t.Errorf("after the refusal: %v %v", a, err)
	}

	mustExec(t, c.Conn, "SET pgsketch.merge = sometimes")
	_, err = c.query(ctx, many)
	wantErr(err, "22023", `invalid value for parameter "pgsketch.merge": "sometimes"`)
	if a, err := c.query(ctx, "SHOW pgsketch.merge"); err != nil || len(a.rows) != 1 || a.rows[0][0] != "sometimes" {
		t.Errorf("SHOW pgsketch.merge: %v %v", a, err)
	}
	mustExec(t, c.Conn, "RESET pgsketch.merge")
	if a, err := c.query(ctx, "SHOW pgsketch.merge"); err != nil || len(a.rows) != 1 || a.rows[0][0] != "auto" {
		t.Errorf("SHOW pgsketch.merge after RESET: %v %v", a, err)
	}

	// With the extension (the catalog fingerprint changes with it).
	mustExec(t, conn, "CREATE EXTENSION hll")
	notice(c, many, mergedInPostgres)
	explain(c, many, `merge: server (auto: rows per group unknown: constants do not bound the time range)`)
	notice(c, one, mergedInProxy)
	explain(c, one, `merge: proxy (auto: one rollup row per group (the GROUP BY truncates "created_at" to the rollup's day))`)
	// By country over four days: 4 days x 3 devices, the device count from
	// the statistics the refresh gathered.
	const few = "SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-01-02' AND created_at < '2026-01-06' GROUP BY 1"
	notice(c, few, mergedInPostgres)
	explain(c, few, `merge: server (auto: about 12 rollup rows per group (the time range holds that many day buckets; 3 values of "device" not grouped))`)
	const fewer = "SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-01-02' AND created_at < '2026-01-05' GROUP BY 1"
	notice(c, fewer, mergedInProxy)
	explain(c, fewer, `merge: proxy (auto: about 9 rollup rows per group (the time range holds that many day buckets; 3 values of "device" not grouped))`)
	mustExec(t, c.Conn, "SET pgsketch.merge = server")
	notice(c, one, mergedInPostgres)

	// serve --merge sets the default.
	p2 := startProxy(t, server.adminURL, "--approx", "on", "--merge", "proxy", "--cache-bytes", "0")
	c2 := connectSimple(t, p2.URL(db.DSN))
	if a, err := c2.query(ctx, "SHOW pgsketch.merge"); err != nil || len(a.rows) != 1 || a.rows[0][0] != "proxy" {
		t.Errorf("SHOW pgsketch.merge with --merge proxy: %v %v", a, err)
	}
	notice(c2, many, mergedInProxy)
	mustExec(t, c2.Conn, "SET pgsketch.merge = auto")
	notice(c2, many, mergedInPostgres)
}
