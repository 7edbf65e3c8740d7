package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
)

// Attacks on the star-join planner's reading of CROSS JOIN and of a short
// integer series beside the fact table (Malloy's nested views): every
// statement runs through the proxy and directly, in the simple protocol
// and the extended one, and the proxy's answer must be PostgreSQL's (its
// distinct counts within 5 standard errors) or PostgreSQL's own error.

// crossAttack is one statement of these tests.
type crossAttack struct {
	name string
	set  []string
	sql  string
	args []any
	// json: the answer is one column of JSON (Malloy's row_to_json),
	// whose "users" members are estimates.
	json bool
	// answered: the statement must be answered from the rollup.
	answered bool
}

// crossRun runs a through the proxy and directly and compares them more
// strictly than runAttack: a rollup answer carries exactly one NOTICE
// starting "pgsketch:", its rows are PostgreSQL's as a multiset (every
// column but the estimates), and when both fail they fail with one
// SQLSTATE. It reports whether the rollup answered.
func crossRun(t *testing.T, proxied, direct *noticeConn, a crossAttack) bool {
	t.Helper()
	ctx := context.Background()
	for _, s := range a.set {
		mustExec(t, proxied.Conn, s)
		mustExec(t, direct.Conn, s)
	}
	defer func() {
		for _, s := range a.set {
			if f := strings.Fields(s); len(f) >= 2 && strings.EqualFold(f[0], "SET") {
				mustExec(t, proxied.Conn, "RESET "+f[1])
				mustExec(t, direct.Conn, "RESET "+f[1])
			}
		}
	}()
	want, werr := direct.query(ctx, a.sql, a.args...)
	got, gerr := proxied.query(ctx, a.sql, a.args...)
	if werr != nil || gerr != nil {
		var wpe, gpe *pgconn.PgError
		switch {
		case werr == nil:
			t.Errorf("%s: PostgreSQL answers (%d rows), the proxy fails: %v\n%s", a.name, len(want.rows), gerr, a.sql)
		case gerr == nil:
			t.Errorf("%s: PostgreSQL fails (%v), the proxy answers %q (notices %q)\n%s", a.name, werr, got.rows, got.notices, a.sql)
		case !errors.As(werr, &wpe) || !errors.As(gerr, &gpe) || wpe.Code != gpe.Code:
			t.Errorf("%s: PostgreSQL fails with %v, the proxy with %v\n%s", a.name, werr, gerr, a.sql)
		default:
			t.Logf("%s: both fail: %v", a.name, werr)
		}
		return false
	}
	var ours []string
	answered := false
	for _, n := range got.notices {
		if strings.HasPrefix(n, "pgsketch:") {
			ours = append(ours, n)
			if strings.Contains(n, "approximated") || strings.Contains(n, "from rollup") && !strings.Contains(n, "not used") {
				answered = true
			}
		}
	}
	if !answered {
		if a.answered {
			t.Errorf("%s: not answered from the rollup (notices %q)\n%s", a.name, got.notices, a.sql)
		}
		if columnsOf(got) != columnsOf(want) || fmt.Sprint(got.rows) != fmt.Sprint(want.rows) || fmt.Sprint(got.nulls) != fmt.Sprint(want.nulls) {
			t.Errorf("%s: passed through, yet got %q, PostgreSQL's %q\n%s", a.name, got.rows, want.rows, a.sql)
		} else {
			t.Logf("%s: PostgreSQL's answer (%d rows; notices %q)", a.name, len(want.rows), ours)
		}
		return false
	}
	if len(ours) != 1 {
		t.Errorf("%s: %d pgsketch notices, want 1: %q", a.name, len(ours), ours)
	}
	var errs []float64
	var err error
	if a.json {
		errs, err = compareJSONAnswer(got, want)
	} else {
		errs, err = compareCross(got, want)
	}
	if err != nil {
		t.Errorf("%s: rollup answer wrong: %v\n%s\n got %q\nwant %q", a.name, err, a.sql, got.rows, want.rows)
		return true
	}
	if w := worstOf(errs); w > 5 {
		t.Errorf("%s: an estimate is %.2f standard errors off\n%s\n got %q\nwant %q", a.name, w, a.sql, got.rows, want.rows)
		return true
	}
	t.Logf("%s: rollup answer, %d rows, worst %.2f standard errors", a.name, len(got.rows), worstOf(errs))
	return true
}

// columnsOf is an answer's column names and types, as text.
func columnsOf(a *answer) string {
	var b strings.Builder
	for _, f := range a.fields {
		fmt.Fprintf(&b, "%s %d %d %d %d|", f.Name, f.DataTypeOID, f.TypeModifier, f.DataTypeSize, f.Format)
	}
	return b.String()
}

// compareCross checks a rollup answer against PostgreSQL's: the same
// columns and command tag, the same rows as a multiset of their exact
// columns, and per row the estimates (columns named users...) NULL where
// PostgreSQL's are; it returns the estimates' errors in standard errors.
func compareCross(got, want *answer) ([]float64, error) {
	if columnsOf(got) != columnsOf(want) {
		return nil, fmt.Errorf("columns %s, want %s", columnsOf(got), columnsOf(want))
	}
	if len(got.rows) != len(want.rows) || got.tag != want.tag {
		return nil, fmt.Errorf("%d rows (%s), want %d (%s)", len(got.rows), got.tag, len(want.rows), want.tag)
	}
	if err := sameMultiset(got, want); err != nil {
		return nil, err
	}
	key := func(a *answer, r int) string {
		var b strings.Builder
		for i, v := range a.rows[r] {
			if !strings.HasPrefix(a.fields[i].Name, "users") {
				fmt.Fprintf(&b, "%v:%q|", a.nulls[r][i], v)
			}
		}
		return b.String()
	}
	byKey := map[string][]int{}
	for r := range want.rows {
		byKey[key(want, r)] = append(byKey[key(want, r)], r)
	}
	var errs []float64
	for r := range got.rows {
		k := key(got, r)
		w := byKey[k][0]
		byKey[k] = byKey[k][1:]
		for i, f := range got.fields {
			if !strings.HasPrefix(f.Name, "users") {
				continue
			}
			if got.nulls[r][i] || want.nulls[w][i] {
				if got.nulls[r][i] != want.nulls[w][i] {
					return nil, fmt.Errorf("row %d %q column %d: NULL %v, PostgreSQL's NULL %v", r+1, got.rows[r], i+1, got.nulls[r][i], want.nulls[w][i])
				}
				continue
			}
			var est, exact float64
			if _, err := fmt.Sscan(got.rows[r][i], &est); err != nil {
				return nil, fmt.Errorf("row %d column %d: %q: %v", r+1, i+1, got.rows[r][i], err)
			}
			if _, err := fmt.Sscan(want.rows[w][i], &exact); err != nil {
				return nil, fmt.Errorf("exact row %d column %d: %q: %v", w+1, i+1, want.rows[w][i], err)
			}
			errs = append(errs, stdErrs(est, exact))
		}
	}
	return errs, nil
}

// sameMultiset compares the rows of two answers as multisets of their
// exact columns (those whose names do not start with "users"):
// compareRollupAnswer matches each row to some exact row, which two
// copies of one row and one of another would pass.
func sameMultiset(got, want *answer) error {
	keys := func(a *answer) []string {
		var ks []string
		for r := range a.rows {
			var b strings.Builder
			for i, v := range a.rows[r] {
				if !strings.HasPrefix(a.fields[i].Name, "users") {
					fmt.Fprintf(&b, "%v:%q|", a.nulls[r][i], v)
				}
			}
			ks = append(ks, b.String())
		}
		slices.Sort(ks)
		return ks
	}
	g, w := keys(got), keys(want)
	for i := range g {
		if g[i] != w[i] {
			return fmt.Errorf("rows differ as multisets: %q against %q", g[i], w[i])
		}
	}
	return nil
}

// compareJSONAnswer compares answers of one JSON column each: rows and the
// members of arrays of objects are matched by their exact members (not
// those named users...), whose numbers are estimates.
func compareJSONAnswer(got, want *answer) ([]float64, error) {
	if len(got.fields) != 1 || len(want.fields) != 1 || got.fields[0].Name != want.fields[0].Name || got.fields[0].DataTypeOID != want.fields[0].DataTypeOID {
		return nil, fmt.Errorf("columns %v, want %v", got.fields, want.fields)
	}
	if len(got.rows) != len(want.rows) {
		return nil, fmt.Errorf("%d rows, want %d", len(got.rows), len(want.rows))
	}
	var g, w []any
	for r := range got.rows {
		var x, y any
		if err := json.Unmarshal([]byte(got.rows[r][0]), &x); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(want.rows[r][0]), &y); err != nil {
			return nil, err
		}
		g, w = append(g, x), append(w, y)
	}
	var errs []float64
	return errs, compareJSON(g, w, "", &errs)
}

// exactPart is a JSON value without its estimates, as text.
func exactPart(v any) string {
	switch v := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			if !strings.HasPrefix(k, "users") {
				m[k] = json.RawMessage(exactPart(x))
			}
		}
		b, _ := json.Marshal(m)
		return string(b)
	case []any:
		var parts []string
		for _, x := range v {
			parts = append(parts, exactPart(x))
		}
		slices.Sort(parts)
		return "[" + strings.Join(parts, ",") + "]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func compareJSON(got, want any, key string, errs *[]float64) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: %v, want %v", key, got, want)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s: no member %q", key, k)
			}
			if err := compareJSON(gv, wv, k, errs); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: %d elements, want %d", key, len(g), len(w))
		}
		used := make([]bool, len(g))
	next:
		for _, wv := range w {
			for i, gv := range g {
				if !used[i] && exactPart(gv) == exactPart(wv) {
					used[i] = true
					if err := compareJSON(gv, wv, key, errs); err != nil {
						return err
					}
					continue next
				}
			}
			return fmt.Errorf("%s: no element like %s in %s", key, exactPart(wv), exactPart(got))
		}
		return nil
	case float64:
		g, ok := got.(float64)
		if !ok {
			return fmt.Errorf("%s: %v, want %v", key, got, want)
		}
		if strings.HasPrefix(key, "users") {
			*errs = append(*errs, stdErrs(g, w))
			return nil
		}
		if math.Abs(g-w) > 0 {
			return fmt.Errorf("%s: %v, want %v", key, g, w)
		}
		return nil
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("%s: %v, want %v", key, got, want)
	}
	return nil
}

// malloyWhere is the time range Malloy's filters give.
const malloyWhere = `WHERE (base."created_at">=TIMESTAMP '2026-02-01 00:00:00') and (base."created_at"<TIMESTAMP '2026-03-01 00:00:00')`

// malloyStage0 is the first stage of a Malloy nested view over series.
func malloyStage0(series string) string {
	return `SELECT group_set, base."country" as "country__0",
  CASE WHEN group_set=0 THEN count(distinct base."user_id") END as "users__0",
  CASE WHEN group_set=1 THEN base."device" END as "device__1",
  CASE WHEN group_set=1 THEN count(distinct base."user_id") END as "users__1"
FROM public.events as base
CROSS JOIN ` + series + ` as group_set
` + malloyWhere + `
GROUP BY 1,2,4`
}

// malloyFull is the whole statement Malloy sends for a nested view.
func malloyFull(stage0 string) string {
	return `WITH __stage0 AS (
` + stage0 + `
)
, __stage1 AS (
  SELECT
    "country__0" as "country",
    (ARRAY_AGG("users__0") FILTER (WHERE group_set=0 AND "users__0" IS NOT NULL))[1] as "users",
    COALESCE(TO_JSONB((ARRAY_AGG((SELECT TO_JSONB(__x) FROM (SELECT
      "device__1" as "device",
      "users__1"::DOUBLE PRECISION as "users"
      ) as __x)  ORDER BY  "users__1" DESC NULLS LAST ) FILTER (WHERE group_set=1))),'[]'::JSONB) as "by_device"
  FROM __stage0
  GROUP BY 1
  ORDER BY 2 desc NULLS LAST
)
SELECT row_to_json(finalStage) as row FROM __stage1 AS finalStage`
}

// crossFixture is rolledUpEvents over 40 000 rows with its proxy.
func crossFixture(t *testing.T) (*testDB, *pgx.Conn, *proxyProc) {
	t.Helper()
	db, conn := rolledUpEvents(t, 40_000, 90, "2026-03-29 12:00", "3 days")
	return db, conn, startProxy(t, server.adminURL, "--approx", "on")
}

// runCrossAttacks runs attacks in both protocols.
func runCrossAttacks(t *testing.T, db *testDB, p *proxyProc, attacks []crossAttack) {
	t.Helper()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied, direct := connectMode(t, p.URL(db.DSN), mode), connectMode(t, db.DSN, mode)
		answered := 0
		for _, a := range attacks {
			a.name = fmt.Sprintf("%v: %s", mode, a.name)
			if crossRun(t, proxied, direct, a) {
				answered++
			}
		}
		t.Logf("%v: %d of %d answered from the rollup", mode, answered, len(attacks))
	}
}

// TestRedteamCross: CROSS JOIN and comma joins to short integer series and
// to dimension tables, Malloy's nested views and variations, through the
// proxy and directly.
func TestRedteamCross(t *testing.T) {
	t.Parallel()
	db, conn, p := crossFixture(t)
	const gs = `GENERATE_SERIES(0,1,1)`
	sel := func(series, rest string) string {
		return `SELECT g, base.country, count(DISTINCT base.user_id) AS users, count(*) AS n, sum(base.amount) AS s, min(base.amount) AS lo, max(base.created_at) AS hi
			FROM events base CROSS JOIN ` + series + ` AS g ` + rest
	}
	attacks := []crossAttack{
		// Malloy's shapes.
		{name: "malloy stage 0", sql: malloyStage0(gs), answered: true},
		{name: "malloy full", sql: malloyFull(malloyStage0(gs)), json: true, answered: true},
		{name: "malloy full, three groups", json: true, sql: malloyFull(strings.Replace(malloyStage0(`GENERATE_SERIES(0,2,1)`), `END as "users__1"`,
			`END as "users__1", CASE WHEN group_set=2 THEN count(distinct base."user_id") END as "users__2"`, 1))},
		{name: "malloy stage 0, counts and sums under CASE", answered: true, sql: `SELECT group_set, base."country" as "country__0",
			CASE WHEN group_set=0 THEN count(1) END as "n__0", CASE WHEN group_set=0 THEN COALESCE(SUM(base."amount"),0) END as "s__0",
			CASE WHEN group_set=1 THEN base."device" END as "device__1", CASE WHEN group_set=1 THEN MIN(base."amount") END as "lo__1",
			CASE WHEN group_set=1 THEN MAX(base."created_at") END as "last__1", CASE WHEN group_set=1 THEN count(distinct base."user_id") END as "users__1"
			FROM public.events as base CROSS JOIN GENERATE_SERIES(0,1,1) as group_set ` + malloyWhere + ` GROUP BY 1,2,5`},
		{name: "malloy stage 0, ORDER BY group_set DESC LIMIT", sql: malloyStage0(gs) + ` ORDER BY group_set DESC, 2 NULLS FIRST, 4 NULLS FIRST LIMIT 7`},
		{name: "malloy stage 0, HAVING group_set", sql: malloyStage0(gs) + ` HAVING group_set = 1`},
		{name: "malloy stage 0, HAVING on the estimate", sql: malloyStage0(gs) + ` HAVING count(distinct base."user_id") > 1000`},
		{name: "malloy stage 0, WHERE group_set", sql: strings.Replace(malloyStage0(gs), "GROUP BY", "AND group_set = 1 GROUP BY", 1)},
		{name: "malloy stage 0, WHERE group_set or fact", sql: strings.Replace(malloyStage0(gs), "GROUP BY", `AND (group_set = 0 OR base."country" = 'DE') GROUP BY`, 1)},
		{name: "malloy stage 0, comma", sql: strings.Replace(malloyStage0(gs), "CROSS JOIN", ",", 1)},
		{name: "malloy stage 0, series first", sql: strings.Replace(malloyStage0(gs), "public.events as base\nCROSS JOIN GENERATE_SERIES(0,1,1) as group_set", "GENERATE_SERIES(0,1,1) as group_set CROSS JOIN public.events as base", 1)},
		{name: "malloy stage 0, pg_catalog.generate_series", sql: malloyStage0(`pg_catalog.generate_series(0,1,1)`)},
		{name: "malloy stage 0, one group", sql: malloyStage0(`GENERATE_SERIES(1,1,1)`)},
		{name: "malloy stage 0, negative start", sql: malloyStage0(`GENERATE_SERIES(-1,1,1)`)},
		{name: "malloy stage 0, step 2", sql: malloyStage0(`GENERATE_SERIES(-3,3,2)`)},
		{name: "malloy stage 0, descending", sql: malloyStage0(`GENERATE_SERIES(1,0,-1)`)},
		{name: "malloy stage 0, descending, one", sql: malloyStage0(`GENERATE_SERIES(0,0,-1)`)},
		{name: "malloy stage 0, empty", sql: malloyStage0(`GENERATE_SERIES(1,0,1)`)},
		{name: "malloy stage 0, zero step", sql: malloyStage0(`GENERATE_SERIES(0,1,0)`)},
		{name: "malloy stage 0, 64 values", sql: malloyStage0(`GENERATE_SERIES(0,63,1)`)},
		{name: "malloy stage 0, 65 values", sql: malloyStage0(`GENERATE_SERIES(0,64,1)`)},
		{name: "malloy stage 0, near the int range's end", sql: malloyStage0(`GENERATE_SERIES(2147483646,2147483647,1)`)},
		{name: "malloy stage 0, two arguments", sql: malloyStage0(`GENERATE_SERIES(0,1)`)},
		{name: "malloy stage 0, bigint step", sql: malloyStage0(`GENERATE_SERIES(0,1,1::bigint)`)},
		{name: "malloy stage 0, numeric", sql: malloyStage0(`GENERATE_SERIES(0.0,1,1)`)},
		{name: "malloy stage 0, parameter", sql: malloyStage0(`GENERATE_SERIES(0,$1::int,1)`), args: []any{1}},
		{name: "malloy stage 0, column alias", sql: strings.Replace(malloyStage0(gs), "as group_set", "as s(group_set)", 1)},
		{name: "malloy stage 0, column alias qualified", sql: strings.ReplaceAll(strings.Replace(malloyStage0(gs), "as group_set", "as s(n)", 1), "group_set", "s.n")},
		{name: "malloy stage 0, column alias bare", sql: strings.ReplaceAll(strings.Replace(malloyStage0(gs), "as group_set", "as s(n)", 1), "group_set", "n")},
		{name: "malloy stage 0, alias read when renamed", sql: strings.Replace(malloyStage0(gs), "as group_set", "as group_set(n)", 1)},
		{name: "malloy stage 0, parameter in CASE", sql: strings.Replace(malloyStage0(gs), "group_set=0", "group_set=$1::int", 1), args: []any{0}},
		{name: "malloy stage 0, LEFT JOIN ON true", sql: strings.Replace(malloyStage0(gs), "CROSS JOIN GENERATE_SERIES(0,1,1) as group_set", "LEFT JOIN GENERATE_SERIES(0,1,1) as group_set ON true", 1)},
		{name: "malloy stage 0, JOIN ON true", sql: strings.Replace(malloyStage0(gs), "CROSS JOIN GENERATE_SERIES(0,1,1) as group_set", "JOIN GENERATE_SERIES(0,1,1) as group_set ON true", 1)},
		{name: "malloy stage 0, JOIN ON group_set < 2", sql: strings.Replace(malloyStage0(gs), "CROSS JOIN GENERATE_SERIES(0,1,1) as group_set", "JOIN GENERATE_SERIES(0,1,1) as group_set ON group_set < 2", 1)},
		{name: "malloy stage 0, CROSS JOIN LATERAL", sql: strings.Replace(malloyStage0(gs), "CROSS JOIN", "CROSS JOIN LATERAL", 1)},
		{name: "malloy stage 0, series of the fact", sql: strings.Replace(malloyStage0(gs), "GENERATE_SERIES(0,1,1)", "GENERATE_SERIES(0,length(base.device),1)", 1)},
		{name: "malloy stage 0, WITH ORDINALITY", sql: strings.Replace(malloyStage0(gs), "GENERATE_SERIES(0,1,1) as group_set", "GENERATE_SERIES(0,1,1) WITH ORDINALITY as s(group_set, o)", 1)},
		{name: "malloy stage 0, session New York", set: []string{"SET TimeZone = 'America/New_York'"}, sql: malloyStage0(gs)},
		{name: "malloy stage 0, session Kolkata", set: []string{"SET TimeZone = 'Asia/Kolkata'"}, sql: malloyStage0(gs)},
		{name: "malloy full, session New York", set: []string{"SET TimeZone = 'America/New_York'"}, sql: malloyFull(malloyStage0(gs)), json: true},
		{name: "malloy stage 0, approx off", set: []string{"SET pgsketch.approx = off"}, sql: malloyStage0(gs)},
		{name: "malloy stage 0 in a subquery", sql: `SELECT group_set, count(*) AS k, sum("users__0")::bigint AS users_sum FROM (` + malloyStage0(gs) + `) x GROUP BY 1 ORDER BY 1`},

		// Aggregates over the crossed rows: counts and sums multiply.
		{name: "counts and sums per series value", sql: sel(gs, `GROUP BY 1, 2`), answered: true},
		{name: "counts and sums not grouped by the series", sql: `SELECT base.country, count(DISTINCT base.user_id) AS users, count(*) AS n, sum(base.amount) AS s
			FROM events base CROSS JOIN generate_series(1,3,1) AS g GROUP BY 1`, answered: true},
		{name: "count of a nullable column crossed", sql: `SELECT base.device, count(DISTINCT base.user_id) AS users, count(base.country) AS nc, count(*) AS n
			FROM events base CROSS JOIN generate_series(1,3,1) AS g GROUP BY 1`},
		{name: "no GROUP BY, fact filter", sql: `SELECT count(DISTINCT base.user_id) AS users, count(*) AS n, sum(base.amount) AS s FROM events base CROSS JOIN generate_series(1,5,2) AS g WHERE base.country = 'DE' OR g = 5`},
		{name: "no rows after the series filter", sql: `SELECT count(DISTINCT base.user_id) AS users, count(*) AS n, sum(base.amount) AS s, min(base.amount) AS lo FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE base.country = 'DE' AND g = 7 GROUP BY base.device`},
		{name: "no rows after the series filter, no GROUP BY", sql: `SELECT count(DISTINCT base.user_id) AS users, count(*) AS n, sum(base.amount) AS s, min(base.amount) AS lo FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE (base.country = 'DE' OR base.device = 'web') AND g = 7`},
		{name: "empty series, no GROUP BY", sql: `SELECT count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(1,0,1) AS g WHERE base.country = 'DE' OR g = 7`},
		{name: "count(DISTINCT) not under CASE, grouped by series", sql: sel(gs, `GROUP BY 1, 2 ORDER BY 1, 2 NULLS FIRST`)},
		{name: "series value times a count", sql: `SELECT g, base.country, g * count(*) AS n, count(DISTINCT base.user_id) + g AS users FROM events base CROSS JOIN generate_series(-2,2,1) AS g GROUP BY 1, 2`},
		{name: "series value inside sum", sql: `SELECT base.country, sum(base.amount * g) AS s, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,2,1) AS g GROUP BY 1`},
		{name: "series value inside count(DISTINCT)", sql: `SELECT base.country, count(DISTINCT CASE WHEN g = 0 THEN base.user_id END) AS users FROM events base CROSS JOIN generate_series(0,2,1) AS g GROUP BY 1`},
		{name: "series in an aggregate in HAVING", sql: `SELECT base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,2,1) AS g GROUP BY 1 HAVING max(g) > 1`},
		{name: "FILTER on the series", sql: `SELECT g, base.country, count(DISTINCT base.user_id) FILTER (WHERE g = 0) AS users, count(*) FILTER (WHERE g = 1) AS n, sum(base.amount) FILTER (WHERE g = 1) AS s
			FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`, answered: true},
		{name: "FILTER on the series and a dimension", sql: `SELECT g, count(DISTINCT base.user_id) FILTER (WHERE g = 0 OR base.device = 'ios') AS users, count(*) FILTER (WHERE g = 1 AND base.country IS NULL) AS n
			FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1`},
		{name: "FILTER on the time column", sql: `SELECT g, base.country, count(DISTINCT base.user_id) FILTER (WHERE base.created_at >= '2026-02-01' AND g = 0) AS users, count(*) FILTER (WHERE base.created_at < '2026-02-01') AS n
			FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "FILTER on the time column, New York", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT g, base.country, count(DISTINCT base.user_id) FILTER (WHERE base.created_at >= '2026-02-01' AND g = 0) AS users, count(*) FILTER (WHERE base.created_at < '2026-02-01') AS n
			FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "day key, New York", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT g, date_trunc('day', base.created_at) AS d, count(DISTINCT base.user_id) AS users, count(*) AS n
			FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE base.created_at >= '2026-02-01' AND base.created_at < '2026-02-05' GROUP BY 1, 2`},
		{name: "day key", sql: `SELECT g, date_trunc('day', base.created_at) AS d, count(DISTINCT base.user_id) AS users, count(*) AS n
			FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE base.created_at >= '2026-02-01' AND base.created_at < '2026-02-05' GROUP BY 1, 2`},
		{name: "time column against the series", sql: `SELECT g, count(DISTINCT base.user_id) AS users, count(*) AS n
			FROM events base CROSS JOIN generate_series(0,3,1) AS g WHERE base.created_at >= timestamptz '2026-02-01' + g * interval '1 day' AND base.created_at < '2026-02-10' GROUP BY 1`},
		{name: "time column against the series, hours", sql: `SELECT g, count(DISTINCT base.user_id) AS users, count(*) AS n
			FROM events base, generate_series(0,3,1) AS g WHERE base.created_at >= timestamptz '2026-02-01' + g * interval '1 hour' AND base.created_at < '2026-02-10' GROUP BY 1`},
		{name: "series compared with a fact expression", sql: `SELECT g, base.device, count(DISTINCT base.user_id) AS users, count(*) AS n
			FROM events base CROSS JOIN generate_series(3,7,1) AS g WHERE length(base.device) = g GROUP BY 1, 2`},
		{name: "series compared with a fact expression in CASE key", sql: `SELECT g, CASE WHEN g = 0 THEN base.country ELSE base.device END AS k, count(DISTINCT base.user_id) AS users, count(*) AS n
			FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "ROLLUP with the series", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY ROLLUP (1, 2)`},
		{name: "CUBE with GROUPING", sql: `SELECT g, base.country, GROUPING(g, base.country) AS gr, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY CUBE (g, base.country)`},
		{name: "GROUPING SETS with the series", sql: `SELECT g, base.country, base.device, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g
			GROUP BY GROUPING SETS ((g, base.country), (g, base.device), ())`},
		{name: "GROUPING SETS of the series alone", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY GROUPING SETS (g, base.country)`},
		{name: "SELECT DISTINCT", sql: `SELECT DISTINCT base.country, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY g, 1 HAVING count(DISTINCT base.user_id) > 0`},
		{name: "DISTINCT ON", sql: `SELECT DISTINCT ON (g) g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2 ORDER BY g, count(*) DESC, 2`},
		{name: "window over the groups", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users, sum(count(*)) OVER (PARTITION BY g) AS total, rank() OVER (PARTITION BY g ORDER BY count(*) DESC, base.country) AS r
			FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "ORDER BY the estimate, LIMIT", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE base.country IN ('US', 'NG', 'IN') GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 4`},
		{name: "LIMIT and OFFSET", sql: `SELECT g, base.country, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2 HAVING count(DISTINCT base.user_id) > 0 ORDER BY 1, 2 LIMIT 5 OFFSET 3`},
		{name: "UNION ALL of two", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2
			UNION ALL SELECT g, base.device, count(DISTINCT base.user_id) FROM events base CROSS JOIN generate_series(2,3,1) AS g GROUP BY 1, 2`},
		{name: "count(DISTINCT dimension)", sql: `SELECT g, count(DISTINCT base.country) AS nc, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, base.device`},
		{name: "avg", sql: `SELECT g, base.country, avg(base.amount) AS a, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "bool key", sql: `SELECT g, base.country IS NULL AS unknown, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},

		// Names.
		{name: "bare fact column", sql: `SELECT g, country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "series named as a fact column", sql: `SELECT country, base.device, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS country GROUP BY 1, 2`},
		{name: "series column named as a fact column", sql: `SELECT s.country, base.country AS c2, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS s(country) GROUP BY 1, 2`},
		{name: "series column named as the fact alias", sql: `SELECT base, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS s(base) GROUP BY 1, 2`},
		{name: "series named as the fact table", sql: `SELECT events, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS events GROUP BY 1, 2`},
		{name: "series column named as the fact table", sql: `SELECT events, events.country, count(DISTINCT events.user_id) AS users FROM events CROSS JOIN generate_series(0,1,1) AS s(events) GROUP BY 1, 2`},
		{name: "series alias and its column alias swapped", sql: `SELECT g.n, n.g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g(n), generate_series(5,6,1) AS n(g) GROUP BY 1, 2, 3`},
		{name: "whole row of a renamed series", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g(n) GROUP BY 1, 2`},
		{name: "output alias named as the series, GROUP BY it", sql: `SELECT base.country AS g, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY g`},
		{name: "output alias named as the series, ORDER BY it", sql: `SELECT base.country AS g, g AS x, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2 ORDER BY g NULLS FIRST, x`},
		{name: "output alias named as the series, ORDER BY an expression of it", sql: `SELECT base.country AS g, g AS x, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2 ORDER BY -g, 1 NULLS FIRST`},
		{name: "quoted series name", sql: `SELECT "G", base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS "G" GROUP BY 1, 2`},
		{name: "quoted series name read unquoted", sql: `SELECT G, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS "G" GROUP BY 1, 2`},
		{name: "series named user_id", sql: `SELECT user_id, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS user_id GROUP BY 1, 2`},
		{name: "no alias", sql: `SELECT generate_series, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) GROUP BY 1, 2`},
		{name: "schema-qualified fact reference", sql: `SELECT g, public.events.country, count(DISTINCT public.events.user_id) AS users FROM public.events CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "subquery reading the series and a key", sql: `SELECT g, base.country, (SELECT count(*) FROM countries c WHERE c.code = base.country AND g = 0) AS k, count(DISTINCT base.user_id) AS users
			FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "subquery with an outer aggregate", sql: `SELECT g, base.country, (SELECT count(base.device) FROM countries c WHERE c.code = 'US') AS k, count(DISTINCT base.user_id) AS users
			FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},

		// Dimension tables crossed.
		{name: "CROSS JOIN countries", sql: `SELECT c.region, base.country, count(*) AS n, sum(base.amount) AS s, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN countries c GROUP BY 1, 2`, answered: true},
		{name: "CROSS JOIN countries, WHERE equi-join", sql: `SELECT c.region, count(*) AS n, sum(base.amount) AS s, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN countries c WHERE c.code = base.country GROUP BY 1`},
		{name: "CROSS JOIN country_tags (two rows per country)", sql: `SELECT t.tag, count(*) AS n, sum(base.amount) AS s, min(base.amount) AS lo, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN country_tags t WHERE t.code = base.country GROUP BY 1`},
		{name: "CROSS JOIN country_tags, not grouped by it", sql: `SELECT base.country, count(*) AS n, sum(base.amount) AS s, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN country_tags t WHERE t.code = base.country GROUP BY 1`},
		{name: "country_tags CROSS JOIN events", sql: `SELECT t.tag, base.device, count(*) AS n, count(DISTINCT base.user_id) AS users FROM country_tags t CROSS JOIN events base WHERE t.code = base.country OR t.tag = 'g7' AND base.country IS NULL GROUP BY 1, 2`},
		{name: "CROSS JOIN a dimension, bare dimension column", sql: `SELECT region, base.country, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN countries c GROUP BY 1, 2`},
		{name: "CROSS JOIN a dimension, FILTER on it", sql: `SELECT base.country, count(*) FILTER (WHERE c.region = 'Europe') AS n, count(DISTINCT base.user_id) FILTER (WHERE c.region IS NULL) AS users FROM events base CROSS JOIN countries c GROUP BY 1`},
		{name: "CROSS JOIN the fact table twice", sql: `SELECT a.country, count(*) AS n, count(DISTINCT a.user_id) AS users FROM events a CROSS JOIN events b WHERE b.id = 1 GROUP BY 1`},
		{name: "three-way: CROSS JOIN series then JOIN ON", sql: `SELECT g, c.region, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g JOIN countries c ON c.code = base.country GROUP BY 1, 2`},
		{name: "three-way: JOIN ON then CROSS JOIN series", sql: `SELECT g, c.region, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base JOIN countries c ON c.code = base.country CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "three-way: CROSS JOIN dimension then series", sql: `SELECT g, c.region, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN countries c CROSS JOIN generate_series(0,1,1) AS g WHERE c.code = base.country GROUP BY 1, 2`},
		{name: "three-way: comma list", sql: `SELECT g, c.region, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base, countries c, generate_series(0,1,1) AS g WHERE c.code = base.country GROUP BY 1, 2`},
		{name: "three-way: CROSS JOIN dimension, JOIN ON dimension", sql: `SELECT t.tag, c.region, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN country_tags t JOIN countries c ON c.code = base.country WHERE t.code = c.code GROUP BY 1, 2`},
		{name: "three-way: JOIN ON dimensions, CROSS JOIN inside parentheses", sql: `SELECT t.tag, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base JOIN (countries c CROSS JOIN country_tags t) ON c.code = base.country AND t.code = c.code GROUP BY 1`},
		{name: "CROSS JOIN inside a LEFT JOIN", sql: `SELECT c.region, g, count(*) AS n, count(DISTINCT base.user_id) AS users FROM countries c LEFT JOIN (events base CROSS JOIN generate_series(0,1,1) AS g) ON base.country = c.code GROUP BY 1, 2`},
		{name: "fact CROSS JOIN subquery of the series", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN (SELECT generate_series(0,1,1) AS g) s GROUP BY 1, 2`},
		{name: "fact CROSS JOIN VALUES", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN (VALUES (0), (1)) AS s(g) GROUP BY 1, 2`},
		{name: "fact CROSS JOIN unnest", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN unnest(ARRAY[0, 1, 1]) AS g GROUP BY 1, 2`},
		{name: "parameters in the arm and around it", sql: strings.Replace(malloyStage0(gs), "GROUP BY", `AND base."country" <> $1 AND group_set <= $2 GROUP BY`, 1), args: []any{"US", 1}},
		{name: "one parameter in the arm and around it", sql: strings.Replace(malloyStage0(gs), "GROUP BY", `AND (base."country" = $1 OR ($1 = 'x' AND group_set = 0)) GROUP BY`, 1), args: []any{"DE"}},
		{name: "untyped parameter against the series", sql: strings.Replace(malloyStage0(gs), "GROUP BY", `AND group_set >= $1 GROUP BY`, 1), args: []any{"1"}},
		{name: "CASE ... ELSE 0 on the estimate", sql: `SELECT group_set, base.country, CASE WHEN group_set = 0 THEN count(DISTINCT base.user_id) ELSE 0 END AS users, CASE WHEN group_set = 1 THEN count(*) ELSE -1 END AS n
			FROM events base CROSS JOIN generate_series(0,1,1) AS group_set GROUP BY 1, 2`},
		{name: "set-returning function in GROUP BY", sql: `SELECT base.country, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) g GROUP BY 1, generate_series(1, 2)`},
		{name: "set-returning function in the select list", sql: `SELECT base.country, generate_series(1, 2) AS k, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) g GROUP BY 1`},
		{name: "volatile function around", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) g WHERE random() >= 0 GROUP BY 1, 2`},
		{name: "fact CROSS JOIN a series of the same values twice", sql: `SELECT base.country, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g CROSS JOIN generate_series(0,1,1) AS h GROUP BY 1`},
	}
	runCrossAttacks(t, db, p, attacks)

	// Changes after the refresh, in the range and past the watermark:
	// buckets the rollup answers from the base table.
	mustExec(t, conn, `DELETE FROM events WHERE created_at >= '2026-02-05' AND created_at < '2026-02-06' AND country = 'US'`)
	mustExec(t, conn, `UPDATE events SET user_id = user_id + 50000000, amount = amount + 1000, device = 'web' WHERE created_at >= '2026-02-07' AND created_at < '2026-02-07 06:00'`)
	mustExec(t, conn, `UPDATE events SET country = NULL WHERE created_at >= '2026-02-09' AND created_at < '2026-02-09 03:00'`)
	mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT 90000000 + g, '2026-02-08 13:00'::timestamptz + g * interval '1 second', 70000000 + g, 'NZ', 'ios', 5 FROM generate_series(1, 3000) g`)
	wide := strings.Replace(malloyStage0(gs), "2026-03-01 00:00:00", "2026-04-10 00:00:00", 1)
	runCrossAttacks(t, db, p, []crossAttack{
		{name: "changed: malloy stage 0", sql: malloyStage0(gs), answered: true},
		{name: "changed: malloy stage 0 past the watermark", sql: wide},
		{name: "changed: malloy full", sql: malloyFull(malloyStage0(gs)), json: true},
		{name: "changed: counts and sums", sql: sel(gs, `WHERE base.created_at >= '2026-02-01' AND base.created_at < '2026-02-15' GROUP BY 1, 2`)},
		{name: "changed: CROSS JOIN country_tags", sql: `SELECT t.tag, count(*) AS n, sum(base.amount) AS s, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN country_tags t WHERE t.code = base.country AND base.created_at < '2026-02-15' GROUP BY 1`},
	})
}

// TestRedteamCrossArmColumns: the arm's own columns (pgsketch_a1, the
// sketches; pgsketch_g1, a key expression) beside the series in the outer
// statement. A series named so makes the outer statement's bare name
// ambiguous: the proxy falls back and PostgreSQL answers.
func TestRedteamCrossArmColumns(t *testing.T) {
	t.Parallel()
	db, _, p := crossFixture(t)
	runCrossAttacks(t, db, p, []crossAttack{
		{name: "series named pgsketch_a1", sql: `SELECT pgsketch_a1, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS pgsketch_a1 GROUP BY 1, 2`},
		{name: "series named pgsketch_g1 beside a key expression", sql: `SELECT pgsketch_g1, lower(base.country) AS lc, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS pgsketch_g1 GROUP BY 1, 2`},
		{name: "series column named pgsketch_a2", sql: `SELECT pgsketch_a2, base.country, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g(pgsketch_a2) GROUP BY 1, 2`},
		{name: "fact aliased pgsketch_groups", sql: `SELECT g, pgsketch_groups.country, count(DISTINCT pgsketch_groups.user_id) AS users FROM events pgsketch_groups CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "series named pgsketch_groups", sql: `SELECT pgsketch_groups, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS pgsketch_groups GROUP BY 1, 2`},
	})
}

// TestRedteamCrossArmColumnsLeak: a name neither table of the statement
// has, in a subquery, is PostgreSQL's error; around the arm it could name
// one of the arm's own columns (pgsketch_a1, a sketch), which the fact
// table does not have. The proxy gives PostgreSQL's error.
func TestRedteamCrossArmColumnsLeak(t *testing.T) {
	t.Parallel()
	db, _, p := crossFixture(t)
	runCrossAttacks(t, db, p, []crossAttack{
		{name: "WHERE EXISTS reads pgsketch_a1", sql: `SELECT g, base.country, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g
			WHERE EXISTS (SELECT 1 WHERE pgsketch_a1 IS NOT NULL) GROUP BY 1, 2`},
		{name: "WHERE subquery reads pgsketch_a2", sql: `SELECT g, base.country, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g
			WHERE (SELECT pgsketch_a1) > 0 GROUP BY 1, 2`},
		{name: "dimension join, WHERE subquery reads pgsketch_a1", sql: `SELECT c.region, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base JOIN countries c ON c.code = base.country
			WHERE (SELECT pgsketch_a1) > 0 GROUP BY 1`},
	})
}

// TestRedteamCrossSeriesNamedColumn: a fact table with a column named as
// the series' alias: the bare name is ambiguous in PostgreSQL, whichever
// way the column came to have that name, and the proxy must give
// PostgreSQL's error.
func TestRedteamCrossSeriesNamedColumn(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 100_000, 90, "2026-03-29 12:00", "3 days")
	mustExec(t, conn, `CREATE TABLE ev2 (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, user_id bigint NOT NULL, country text, device text NOT NULL, group_set int)`)
	mustExec(t, conn, `INSERT INTO ev2 SELECT id, created_at, user_id, country, device, (id % 2)::int FROM events`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev2_daily', 'ev2', 'created_at', grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}')`)
	refreshRollup(t, conn, "ev2_daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ev2 := strings.Replace(malloyStage0(`GENERATE_SERIES(0,1,1)`), "public.events", "public.ev2", 1)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied, direct := connectMode(t, p.URL(db.DSN), mode), connectMode(t, db.DSN, mode)
		crossRun(t, proxied, direct, crossAttack{name: fmt.Sprintf("%v: ev2.group_set", mode), sql: ev2})
		crossRun(t, proxied, direct, crossAttack{name: fmt.Sprintf("%v: ev2.group_set, column alias", mode), sql: strings.Replace(ev2, "as group_set", "as s(group_set)", 1)})
		crossRun(t, proxied, direct, crossAttack{name: fmt.Sprintf("%v: events, answered", mode), sql: malloyStage0(`GENERATE_SERIES(0,1,1)`), answered: true})
	}

	// A column added, or renamed, after the proxy read the catalog.
	proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	crossRun(t, proxied, direct, crossAttack{name: "before the change", sql: malloyStage0(`GENERATE_SERIES(0,1,1)`), answered: true})
	mustExec(t, conn, `ALTER TABLE events ADD COLUMN group_set int`)
	crossRun(t, proxied, direct, crossAttack{name: "column added", sql: malloyStage0(`GENERATE_SERIES(0,1,1)`)})
	mustExec(t, conn, `ALTER TABLE events DROP COLUMN group_set`)
	crossRun(t, proxied, direct, crossAttack{name: "column dropped", sql: malloyStage0(`GENERATE_SERIES(0,1,1)`)})
}

// TestRedteamCrossRenamedColumn: a column of the fact table renamed to the
// series' name after the proxy read the catalog. PostgreSQL finds the bare
// name ambiguous; the proxy must give its error, not an answer.
func TestRedteamCrossRenamedColumn(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 100_000, 90, "2026-03-29 12:00", "3 days")
	p := startProxy(t, server.adminURL, "--approx", "on")
	proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	stage0 := malloyStage0(`GENERATE_SERIES(0,1,1)`)
	crossRun(t, proxied, direct, crossAttack{name: "before the rename", sql: stage0, answered: true})
	mustExec(t, conn, `ALTER TABLE events RENAME COLUMN id TO group_set`)
	crossRun(t, proxied, direct, crossAttack{name: "column renamed", sql: stage0})
	fresh, freshDirect := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	crossRun(t, fresh, freshDirect, crossAttack{name: "column renamed, new session", sql: stage0})
	mustExec(t, conn, `ALTER TABLE events RENAME COLUMN group_set TO id`)
	crossRun(t, proxied, direct, crossAttack{name: "renamed back", sql: stage0})

	// Two columns the rollup reads swapped by renames.
	mustExec(t, conn, `ALTER TABLE events RENAME COLUMN country TO tmp; ALTER TABLE events RENAME COLUMN device TO country; ALTER TABLE events RENAME COLUMN tmp TO device`)
	crossRun(t, proxied, direct, crossAttack{name: "country and device swapped", sql: stage0})
	crossRun(t, proxied, direct, crossAttack{name: "country and device swapped, one table", sql: `SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY 1`})
}

// TestRedteamCrossSecurity: privileges, row-level security and search_path
// around a nested view.
func TestRedteamCrossSecurity(t *testing.T) {
	t.Parallel()
	db, conn, p := crossFixture(t)
	ctx := context.Background()
	suffix := strings.TrimPrefix(db.Name, server.prefix)
	var schemas []string
	rows, err := conn.Query(ctx, `SELECT DISTINCT rollup_schema FROM pgsketch.rollup_defs UNION SELECT 'pgsketch' UNION SELECT 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		schemas = append(schemas, s)
	}
	rows.Close()
	role := func(name string, revoke ...string) string {
		r := "rt_cross_" + name + suffix
		mustExec(t, conn, fmt.Sprintf(`DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s`, r))
		for _, s := range schemas {
			mustExec(t, conn, fmt.Sprintf(`GRANT USAGE ON SCHEMA %[1]s TO %[2]s; GRANT SELECT ON ALL TABLES IN SCHEMA %[1]s TO %[2]s`, s, r))
		}
		for _, rv := range revoke {
			mustExec(t, conn, fmt.Sprintf(rv, r))
		}
		t.Cleanup(func() {
			c, err := pgx.Connect(context.Background(), db.DSN)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			if _, err := c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s; DROP ROLE %[1]s`, r)); err != nil {
				t.Errorf("drop role %s: %v", r, err)
			}
		})
		return r
	}
	noEvents := role("noevents", `REVOKE SELECT ON events FROM %s`)
	noCountries := role("nocountries", `REVOKE SELECT ON countries FROM %s`)
	reader := role("reader")

	stage0 := malloyStage0(`GENERATE_SERIES(0,1,1)`)
	crossCountries := `SELECT c.region, base.country, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN countries c GROUP BY 1, 2`
	var attacks []crossAttack
	asRole := func(r string) []crossAttack {
		return []crossAttack{
			{name: r + ": malloy stage 0", set: []string{"SET ROLE " + r}, sql: stage0},
			{name: r + ": malloy full", set: []string{"SET ROLE " + r}, sql: malloyFull(stage0), json: true},
			{name: r + ": CROSS JOIN countries", set: []string{"SET ROLE " + r}, sql: crossCountries},
		}
	}
	for _, r := range []string{noEvents, noCountries, reader} {
		attacks = append(attacks, asRole(r)...)
	}

	// search_path: another events, a temporary one, another
	// generate_series, a table named generate_series.
	mustExec(t, conn, `CREATE SCHEMA shadow; CREATE TABLE shadow.events (LIKE public.events); INSERT INTO shadow.events SELECT * FROM public.events WHERE country = 'DE'`)
	mustExec(t, conn, `CREATE FUNCTION shadow.generate_series(a int, b int, c int) RETURNS SETOF int LANGUAGE sql IMMUTABLE AS $$ SELECT x FROM pg_catalog.generate_series(a, b, c) x, pg_catalog.generate_series(1, 3) $$`)
	mustExec(t, conn, `CREATE TABLE public.generate_series (generate_series int, g int)`)
	mustExec(t, conn, `INSERT INTO public.generate_series VALUES (0, 0), (1, 1), (1, 1)`)
	mustExec(t, conn, fmt.Sprintf(`GRANT USAGE ON SCHEMA shadow TO %[1]s; GRANT SELECT ON ALL TABLES IN SCHEMA shadow TO %[1]s; GRANT SELECT ON public.generate_series TO %[1]s`, reader))
	unqualified := strings.Replace(stage0, "public.events", "events", 1)
	attacks = append(attacks,
		crossAttack{name: "search_path shadow first", set: []string{"SET search_path = shadow, public"}, sql: unqualified},
		crossAttack{name: "search_path shadow before pg_catalog", set: []string{"SET search_path = shadow, pg_catalog, public"}, sql: stage0},
		crossAttack{name: "search_path shadow before pg_catalog, counts", set: []string{"SET search_path = shadow, pg_catalog, public"},
			sql: `SELECT g, base.country, count(*) AS n, sum(base.amount) AS s, count(DISTINCT base.user_id) AS users FROM public.events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		crossAttack{name: "table named generate_series", sql: `SELECT g.g, base.country, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series g GROUP BY 1, 2`},
		crossAttack{name: "table named generate_series, bare column", sql: `SELECT generate_series, base.country, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series GROUP BY 1, 2`},
		crossAttack{name: "reader: table named generate_series", set: []string{"SET ROLE " + reader}, sql: `SELECT g.g, base.country, count(*) AS n, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN public.generate_series g GROUP BY 1, 2`},
	)
	runCrossAttacks(t, db, p, attacks)

	// A temporary events table, in one session.
	proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	for _, c := range []*noticeConn{proxied, direct} {
		mustExec(t, c.Conn, `CREATE TEMP TABLE events (LIKE public.events); INSERT INTO events SELECT * FROM public.events WHERE device = 'web' AND created_at < '2026-02-10'`)
	}
	crossRun(t, proxied, direct, crossAttack{name: "temporary events", sql: unqualified})
	crossRun(t, proxied, direct, crossAttack{name: "temporary events, public named", sql: stage0, answered: true})

	// Row-level security on the fact table: never a rollup answer.
	mustExec(t, conn, fmt.Sprintf(`CREATE POLICY us_only ON events FOR SELECT TO %s USING (country = 'US')`, reader))
	mustExec(t, conn, `ALTER TABLE events ENABLE ROW LEVEL SECURITY`)
	rls := []crossAttack{
		{name: "rls: reader, malloy stage 0", set: []string{"SET ROLE " + reader}, sql: stage0},
		{name: "rls: reader, CROSS JOIN countries", set: []string{"SET ROLE " + reader}, sql: crossCountries},
		{name: "rls: owner, malloy stage 0", sql: stage0},
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied, direct := connectMode(t, p.URL(db.DSN), mode), connectMode(t, db.DSN, mode)
		for _, a := range rls {
			a.name = fmt.Sprintf("%v: %s", mode, a.name)
			if crossRun(t, proxied, direct, a) {
				t.Errorf("%s: a rollup answer with row-level security enabled on events", a.name)
			}
		}
	}
	mustExec(t, conn, `ALTER TABLE events DISABLE ROW LEVEL SECURITY`)

	// Column privileges: a role that may read the columns the statement
	// reads (PostgreSQL answers it), and one that may not. Granting them
	// changes the columns' catalog rows, after which the rollup is not used
	// until its next refresh; either way PostgreSQL's answer or error.
	someColumns := role("somecols", `REVOKE SELECT ON events FROM %[1]s`, `GRANT SELECT (created_at, user_id, country, device) ON events TO %[1]s`)
	fewColumns := role("fewcols", `REVOKE SELECT ON events FROM %[1]s`, `GRANT SELECT (created_at, country, device) ON events TO %[1]s`)
	runCrossAttacks(t, db, p, append(asRole(someColumns), asRole(fewColumns)...))
	refreshRollup(t, conn, "daily", refresh.Options{})
	runCrossAttacks(t, db, p, append(asRole(someColumns), asRole(fewColumns)...))
}

// rawQuery runs sql in the simple protocol through pgconn (pgx refuses
// its simple protocol when standard_conforming_strings is off) and
// returns its last result as text.
func rawQuery(ctx context.Context, nc *noticeConn, sql string) (*answer, error) {
	nc.mu.Lock()
	nc.notices = nil
	nc.mu.Unlock()
	results, err := nc.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	a := &answer{}
	if len(results) > 0 {
		r := results[len(results)-1]
		a.fields, a.tag = r.FieldDescriptions, r.CommandTag.String()
		for _, row := range r.Rows {
			var vs []string
			var nl []bool
			for _, v := range row {
				vs, nl = append(vs, string(v)), append(nl, v == nil)
			}
			a.rows, a.nulls = append(a.rows, vs), append(a.nulls, nl)
		}
	}
	nc.mu.Lock()
	a.notices = nc.notices
	nc.mu.Unlock()
	return a, nil
}

// TestRedteamCrossStandardStrings: with standard_conforming_strings off a
// backslash escapes a quote in '...', so PostgreSQL reads
//
//	WHERE base.country = 'a\' OR base.device <> '
//	' -- '
//
// as one condition, country equal to the string "a' OR base.device <> \n -- "
// (two literals on two lines, concatenated): no row. pgsketch's parser
// (pg_query) always lexes standard strings: it reads 'a\' as the string
// a\, then OR base.device <> '\n', then a comment, and prints the
// condition back as E'a\\' (valid in either mode), so the rollup answers
// a statement PostgreSQL would not run: every device's users and rows
// instead of no row. The proxy must leave statements alone in a session
// whose standard_conforming_strings is off (it is a reported setting,
// ParameterStatus), or lex as the session does.
func TestRedteamCrossStandardStrings(t *testing.T) {
	t.Parallel()
	db, _ := rolledUpEvents(t, 100_000, 90, "2026-03-29 12:00", "3 days")
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	cross := "SELECT g, base.device, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE base.country = 'a\\' OR base.device <> '\n' -- '\nGROUP BY 1, 2"
	single := "SELECT base.device, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base WHERE base.country = 'a\\' OR base.device <> '\n' -- '\nGROUP BY 1"
	for _, sql := range []string{cross, single} {
		// In the simple protocol.
		proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
		for _, c := range []*noticeConn{proxied, direct} {
			if _, err := rawQuery(ctx, c, "SET standard_conforming_strings = off"); err != nil {
				t.Fatal(err)
			}
		}
		want, werr := rawQuery(ctx, direct, sql)
		got, gerr := rawQuery(ctx, proxied, sql)
		switch {
		case werr != nil || gerr != nil:
			if (werr == nil) != (gerr == nil) {
				t.Errorf("simple protocol: PostgreSQL's error %v, the proxy's %v\n%s", werr, gerr, sql)
			}
		case len(got.rows) != len(want.rows) || fmt.Sprint(got.rows) != fmt.Sprint(want.rows):
			t.Errorf("simple protocol, standard_conforming_strings off: got %d rows %q (notices %q), PostgreSQL's %d rows %q\n%s",
				len(got.rows), got.rows, got.notices, len(want.rows), want.rows, sql)
		default:
			t.Logf("simple protocol: PostgreSQL's answer, %d rows (notices %q)", len(got.rows), got.notices)
		}

		// In the extended protocol.
		proxied, direct = connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheDescribe), connectMode(t, db.DSN, pgx.QueryExecModeCacheDescribe)
		crossRun(t, proxied, direct, crossAttack{name: "extended protocol, standard_conforming_strings off", set: []string{"SET standard_conforming_strings = off"}, sql: sql})
	}
}

// TestRedteamCrossSessionSettings: settings that change how PostgreSQL
// reads the statement's text (transform_null_equals turns expr = NULL into
// expr IS NULL) or evaluates it, around a nested view.
func TestRedteamCrossSessionSettings(t *testing.T) {
	t.Parallel()
	db, _ := rolledUpEvents(t, 100_000, 90, "2026-03-29 12:00", "3 days")
	p := startProxy(t, server.adminURL, "--approx", "on")
	nullEquals := []string{"SET transform_null_equals = on"}
	runCrossAttacks(t, db, p, []crossAttack{
		{name: "= NULL in WHERE", set: nullEquals, sql: `SELECT g, base.device, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE base.country = NULL GROUP BY 1, 2`},
		{name: "NULL = in WHERE, OR", set: nullEquals, sql: `SELECT g, base.device, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE NULL = base.country OR base.country = 'NG' GROUP BY 1, 2`},
		{name: "= NULL in FILTER", set: nullEquals, sql: `SELECT g, base.device, count(DISTINCT base.user_id) FILTER (WHERE base.country = NULL) AS users, count(*) FILTER (WHERE base.country = NULL) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "= NULL in a key", set: nullEquals, sql: `SELECT g, base.country = NULL AS unknown, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base CROSS JOIN generate_series(0,1,1) AS g GROUP BY 1, 2`},
		{name: "= NULL in CASE", set: nullEquals, sql: `SELECT group_set, CASE WHEN group_set = 0 THEN base.country = NULL END AS k, CASE WHEN group_set = 1 THEN count(DISTINCT base.user_id) END AS users FROM events base CROSS JOIN generate_series(0,1,1) AS group_set GROUP BY 1, 2`},
		{name: "= NULL, one table", set: nullEquals, sql: `SELECT device, count(DISTINCT user_id) AS users, count(*) AS n FROM events WHERE country = NULL GROUP BY 1`},
		{name: "= NULL against the series", set: nullEquals, sql: `SELECT g, base.device, count(DISTINCT base.user_id) AS users FROM events base CROSS JOIN generate_series(0,1,1) AS g WHERE g = NULL OR base.device = 'web' GROUP BY 1, 2`},
		{name: "= NULL, time range", set: nullEquals, sql: `SELECT base.device, count(DISTINCT base.user_id) AS users, count(*) AS n FROM events base WHERE base.created_at >= '2026-02-01' AND (base.country = NULL OR base.created_at = NULL) GROUP BY 1`},
	})
}
