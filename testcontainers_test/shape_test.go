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

	pgexec "github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// countingSession records the statements a plan runs.
type countingSession struct {
	upstream.Session
	sqls []string
}

func (s *countingSession) Query(ctx context.Context, st upstream.Statement) (*upstream.Result, error) {
	s.sqls = append(s.sqls, st.SQL)
	return s.Session.Query(ctx, st)
}

// shaped reports whether a shaping statement ran.
func (s *countingSession) shaped() bool {
	return slices.ContainsFunc(s.sqls, func(q string) bool { return strings.HasPrefix(q, "WITH "+plan.GroupsRelation+"(") })
}

// TestShapeInProxy: an answer whose shape only selects the merged groups'
// columns (plan.Groups.Columns) is built in the proxy, and its rows are
// byte for byte those of PostgreSQL's shaping statement, in text and in
// binary, for dimensions of every type a rollup takes (NULLs and values
// PostgreSQL prints specially among them), with estimates, counts and
// exact counts, over rollup rows and base rows; where the proxy does not
// print a column's text itself (dates and times), the shaping statement
// runs.
func TestShapeInProxy(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 10, 1)
	ctx := context.Background()
	mustExec(t, conn, `CREATE TABLE kinds (t timestamptz NOT NULL, u bigint, k2 int2, k4 int4, k8 int8, kb bool, ku uuid,
		kt text, kv varchar(8), kc char(4), kd date, kts timestamp, ktz timestamptz);
	INSERT INTO kinds SELECT timestamptz '2026-01-01' + i * interval '37 minutes', i % 53,
		CASE WHEN i % 7 > 0 THEN ((i % 3) - 1) * 32767 END,
		CASE WHEN i % 7 > 1 THEN ((i % 3) - 1) * 2147483647 END,
		CASE WHEN i % 7 > 2 THEN ((i % 3) - 1) * 9223372036854775807 END,
		CASE WHEN i % 5 > 0 THEN i % 2 = 0 END,
		CASE WHEN i % 6 > 0 THEN md5((i % 4)::text)::uuid END,
		(ARRAY['a', 'Ünï', ' sp ', '', NULL, 'tab	x', 'quote''s', 'back\slash'])[1 + i % 8],
		(ARRAY['vé', 'v2', NULL])[1 + i % 3],
		(ARRAY['ab', 'abcd', NULL])[1 + i % 3],
		date '2026-01-01' + (i % 3) - 800000,
		timestamp '2026-01-01 12:34:56.789' + (i % 3) * interval '1 microsecond',
		CASE WHEN i % 4 > 0 THEN timestamptz 'infinity' - (i % 2) * interval '1 day' END
	FROM generate_series(1, 400) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('kinds_daily', 'kinds', 't',
		dimensions => '{k2,k4,k8,kb,ku,kt,kv,kc,kd,kts,ktz}', distinct_columns => '{u}')`)
	refreshRollup(t, conn, "kinds_daily", refresh.Options{})
	// Rows after the watermark: base rows merged in too.
	mustExec(t, conn, `INSERT INTO kinds SELECT t + interval '20 days', u + 1000, k2, k4, k8, kb, ku, kt, kv, kc, kd, kts, ktz FROM kinds`)

	snap, sess := directPlanning(t, conn)
	dims := []struct {
		col     string
		printed bool // the proxy prints its text itself
	}{
		{"k2", true}, {"k4", true}, {"k8", true}, {"kb", true}, {"ku", true}, {"kt", true}, {"kv", true}, {"kc", true},
		{"kd", false}, {"kts", false}, {"ktz", false},
	}
	type query struct {
		sql     string
		printed bool
		exact   bool // approximate answers off: distinct counts counted by PostgreSQL beside the rollup
	}
	var queries []query
	for _, d := range dims {
		queries = append(queries,
			query{fmt.Sprintf("SELECT %s, count(DISTINCT u) FROM kinds GROUP BY %[1]s", d.col), d.printed, false},
			query{fmt.Sprintf("SELECT count(*) AS n, %s AS key, count(DISTINCT u) AS users FROM kinds WHERE t >= '2026-01-02 07:00' GROUP BY 2", d.col), d.printed, false})
	}
	queries = append(queries,
		query{"SELECT count(DISTINCT u) FROM kinds", true, false},
		query{"SELECT count(DISTINCT u) FROM kinds WHERE t >= '2030-01-01'", true, false},
		query{"SELECT kt, count(DISTINCT u) FROM kinds WHERE t >= '2030-01-01' GROUP BY kt", true, false},
		query{"SELECT kb, kt, ku, count(*), count(DISTINCT u), count(DISTINCT u) AS again, kt AS twice FROM kinds GROUP BY kt, kb, ku", true, false},
		query{"SELECT kb, approx_count_distinct(u), count(DISTINCT u), count(*) FROM kinds WHERE t >= '2026-01-02 07:00' GROUP BY kb", true, true},
		query{"SELECT k4, count(DISTINCT u) FROM kinds GROUP BY k4, kd", true, false},
	)
	projected := 0
	for _, q := range queries {
		qs := sess
		qs.Approx = !q.exact
		res := rewrite.Rewrite(q.sql, snap, qs)
		p, ok := res.Plan.(*plan.Rollup)
		if !ok {
			t.Errorf("%s: not planned from the rollup: %s", q.sql, res.Reason)
			continue
		}
		if q.exact && !slices.ContainsFunc(p.Aggs, func(a plan.Agg) bool { return a.Op == plan.Exact }) {
			t.Errorf("%s: no exact count:\n%s", q.sql, p)
		}
		if len(p.Columns) == 0 {
			t.Errorf("%s: no shape in the proxy:\n%s", q.sql, p)
			continue
		}
		bare := *p
		bare.Columns = nil
		for _, formats := range [][]int16{nil, {1}} {
			name := fmt.Sprintf("%s (formats %v)", q.sql, formats)
			proxy := &countingSession{Session: pgsession.Conn{C: conn.PgConn()}}
			got, err := pgexec.Run(ctx, proxy, p, pgexec.Params{}, formats)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			pg := &countingSession{Session: pgsession.Conn{C: conn.PgConn()}}
			want, err := pgexec.Run(ctx, pg, &bare, pgexec.Params{}, formats)
			if err != nil {
				t.Errorf("%s: shaped by PostgreSQL: %v", name, err)
				continue
			}
			if !pg.shaped() {
				t.Fatalf("%s: no shaping statement without Columns: %q", name, pg.sqls)
			}
			if inProxy := !proxy.shaped(); inProxy != (q.printed || formats != nil) {
				t.Errorf("%s: shaped in the proxy %v, want %v", name, inProxy, !inProxy)
			} else if inProxy {
				projected++
			}
			if got.Tag != want.Tag || len(got.Fields) != len(want.Fields) {
				t.Errorf("%s: %q with %d columns, PostgreSQL's shape %q with %d", name, got.Tag, len(got.Fields), want.Tag, len(want.Fields))
				continue
			}
			for i, f := range got.Fields {
				w := want.Fields[i]
				if f.DataTypeOID != w.DataTypeOID || f.Format != w.Format || string(f.Name) != string(w.Name) {
					t.Errorf("%s: column %d: %s type %d format %d, PostgreSQL's %s type %d format %d",
						name, i, f.Name, f.DataTypeOID, f.Format, w.Name, w.DataTypeOID, w.Format)
				}
			}
			if g, w := sortedRows(got.Rows), sortedRows(want.Rows); g != w {
				t.Errorf("%s: rows differ\nproxy:      %s\nPostgreSQL: %s", name, g, w)
			}
		}
	}
	if want := 2 * len(queries) * 3 / 4; projected < want {
		t.Errorf("%d answers shaped in the proxy, want at least %d", projected, want)
	}
	t.Logf("%d queries, %d answers shaped in the proxy, each the same as PostgreSQL's shaping statement", len(queries), projected)
}

// sortedRows prints rows, NULLs apart from empty values, in sorted order.
func sortedRows(rows [][][]byte) string {
	out := make([]string, len(rows))
	for i, r := range rows {
		var b bytes.Buffer
		for _, v := range r {
			if v == nil {
				b.WriteString("NULL|")
				continue
			}
			fmt.Fprintf(&b, "%x|", v)
		}
		out[i] = b.String()
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestGroupKeysEqualInSQL: group keys that PostgreSQL holds equal though
// their bytes differ (-0 and 0, 1.0 and 1.00, '1 day' and '24 hours') are
// one group of the proxy's answer, as of PostgreSQL's, in each way the
// answer is shaped; arrays of types compared by their bytes are grouped
// by theirs; a key of a type the proxy cannot compare so is answered by
// PostgreSQL.
func TestGroupKeysEqualInSQL(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 10, 1)
	ctx := context.Background()
	mustExec(t, conn, `CREATE TABLE eq (t timestamptz NOT NULL, u bigint, k4 int4, kb bool);
	INSERT INTO eq SELECT timestamptz '2026-01-01' + i * interval '37 minutes', i % 53, -7, true FROM generate_series(1, 400) i;
	SELECT pgsketch.create_rollup('eq_daily', 'eq', 't', dimensions => '{k4,kb}', distinct_columns => '{u}')`)
	refreshRollup(t, conn, "eq_daily", refresh.Options{})
	// The rows after the watermark (read from the table) hold the other
	// value of each pair, the rollup's rows the one: each pair's values
	// come from different arms of the fetch, which each group by SQL.
	mustExec(t, conn, `INSERT INTO eq SELECT t + interval '20 days', u + 1000, 7, false FROM eq`)
	snap, sess := directPlanning(t, conn)
	for _, c := range []struct {
		key  string
		rows int
	}{
		{"k4 * CAST(0.0 AS float8)", 1},
		{"CASE WHEN kb THEN 1.0 ELSE 1.00 END", 1},
		{"CASE WHEN kb THEN interval '1 day' ELSE interval '24 hours' END", 1},
		{"CASE WHEN kb THEN interval '1 mon' ELSE interval '30 days' END", 1},
		{"CASE WHEN kb THEN interval '1 mon' ELSE interval '31 days' END", 2},
		{"CASE WHEN kb THEN ARRAY['a'] ELSE ARRAY['a', NULL] END", 2},
		{"ARRAY[CAST(kb AS int)]", 2},
	} {
		for _, shape := range []string{"", " ORDER BY 2"} {
			if strings.Contains(c.key, "ARRAY") && shape != "" {
				continue // the shaping statement binds no array of arrays: PostgreSQL answers
			}
			q := "SELECT " + c.key + " AS k, count(DISTINCT u) FROM eq GROUP BY 1" + shape
			res := rewrite.Rewrite(q, snap, sess)
			p, ok := res.Plan.(*plan.Rollup)
			if !ok {
				t.Fatalf("%s: not planned from the rollup: %s", q, res.Reason)
			}
			ans, err := pgexec.Run(ctx, pgsession.Conn{C: conn.PgConn()}, p, pgexec.Params{}, []int16{1})
			if err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			// Few enough values that the sketches are exact (EXPLICIT).
			var want []int64
			rows, err := conn.Query(ctx, "SELECT count FROM ("+q+") x ORDER BY 1")
			if err == nil {
				want, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range ans.Rows {
				got = append(got, int64(bin.BigEndian.Uint64(r[1])))
			}
			slices.Sort(got)
			if fmt.Sprint(got) != fmt.Sprint(want) || len(want) != c.rows {
				t.Errorf("%s: counts %v from the rollup, %v from PostgreSQL, want %d rows", q, got, want, c.rows)
			}
		}
	}
	// A key of a type compared otherwise than by its bytes, and not
	// known to the proxy: refused with the rollup's data error.
	q := "SELECT CAST(CASE WHEN kb THEN '{\"a\": 1.0}' ELSE '{\"a\": 1}' END AS jsonb) AS k, count(DISTINCT u) FROM eq GROUP BY 1"
	res := rewrite.Rewrite(q, snap, sess)
	p, ok := res.Plan.(*plan.Rollup)
	if !ok {
		t.Fatalf("%s: not planned from the rollup: %s", q, res.Reason)
	}
	if _, err := pgexec.Run(ctx, pgsession.Conn{C: conn.PgConn()}, p, pgexec.Params{}, nil); !errors.Is(err, pgexec.ErrData) {
		t.Errorf("%s: %v, want the rollup's data error", q, err)
	}
}
