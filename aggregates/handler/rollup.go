package handler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/aggregates/exec"
	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/wire"
)

// ApproxSetting is the session variable that turns transparent mode on:
// COUNT(DISTINCT ...) answered from rollups too. It lives in PostgreSQL as a
// placeholder (custom) setting, so SET, SET LOCAL, RESET, ROLLBACK and
// ALTER ROLE|DATABASE ... SET work as for any setting; the proxy only reads
// it, and supplies Handler.Approx while it is unset or empty.
const ApproxSetting = "pgsketch.approx"

// MergeSetting is the session variable that says where the sketches of a
// rollup's rows are merged: auto, proxy or server (rewrite.Merge). Like
// ApproxSetting it is a placeholder setting PostgreSQL keeps; the proxy
// supplies Handler.Merge while it is unset or empty.
const MergeSetting = "pgsketch.merge"

// settingsSQL reads, without any chance of an error outside an aborted
// transaction, what the rewriter and the executor need of the session, and
// whether the role may read the catalog.
const settingsSQL = `SELECT current_setting('search_path'), current_setting('TimeZone'), current_user,
 current_setting('` + ApproxSetting + `', true),
 current_setting('DateStyle'), current_setting('IntervalStyle'), current_setting('extra_float_digits'),
 current_setting('bytea_output'), current_setting('client_encoding'),
 COALESCE(has_schema_privilege(to_regnamespace('pgsketch'), 'USAGE')
   AND has_function_privilege(to_regprocedure('pgsketch.catalog()'), 'EXECUTE')
   AND has_table_privilege(to_regclass('pgsketch.rollup_defs'), 'SELECT'), false),
 current_setting('` + MergeSetting + `', true)`

// savepoint protects the client's transaction block from errors of the
// statements the proxy runs: on one, the proxy rolls back to it and lets
// PostgreSQL answer the original query instead.
const savepoint = "pgsketch_exec"

type sessionSettings struct {
	rw        rewrite.Session
	exec      exec.Settings
	catalogOK bool
	// fingerprint identifies the catalog's state ("" if not read).
	fingerprint string
	// badMerge is a pgsketch.merge value that is not a strategy: a plan
	// is refused rather than run (rw.Merge is then auto).
	badMerge string
}

func parseBool(s string) (v, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "true", "yes", "1", "t", "y":
		return true, true
	case "off", "false", "no", "0", "f", "n":
		return false, true
	}
	return false, false
}

func (h *Handler) settings(ctx context.Context, c *sessionConn) (sessionSettings, error) {
	es := sessionState(c.s)
	sqls := []string{settingsSQL}
	if es.catalogOK {
		sqls = append(sqls, fingerprintSQL)
	}
	rows, errs := c.queryRows(ctx, sqls...)
	if errs[0] != nil {
		return sessionSettings{}, errs[0]
	}
	if len(rows[0]) != 1 || len(rows[0][0]) != 11 {
		return sessionSettings{}, errProtocol
	}
	r := rows[0][0]
	st := sessionSettings{
		rw: rewrite.Session{SearchPath: string(r[0]), TimeZone: string(r[1]), User: string(r[2]), Approx: h.Approx},
		exec: exec.Settings{DateStyle: string(r[4]), TimeZone: string(r[1]), IntervalStyle: string(r[5]),
			ExtraFloatDigits: string(r[6]), ByteaOutput: string(r[7]), ClientEncoding: string(r[8])},
		catalogOK: string(r[9]) == "t",
	}
	if v, ok := parseBool(string(r[3])); ok {
		st.rw.Approx = v
	}
	st.rw.Merge = h.Merge
	if v := strings.TrimSpace(string(r[10])); v != "" {
		if m, ok := rewrite.ParseMerge(v); ok {
			st.rw.Merge = m
		} else {
			st.badMerge = v
		}
	}
	if st.rw.Merge == "" {
		st.rw.Merge = rewrite.MergeAuto
	}
	es.catalogOK = st.catalogOK
	if len(sqls) == 2 {
		switch err := errs[1]; {
		case err == nil:
			if len(rows[1]) == 1 && len(rows[1][0]) == 1 && rows[1][0][0] != nil {
				st.fingerprint = string(rows[1][0][0])
			}
		case !isPgError(err) && !errors.Is(err, errDiscarding):
			return sessionSettings{}, err
		case c.failed:
			// The privileges changed in between, inside the client's
			// implicit transaction: it is lost.
			return sessionSettings{}, err
		}
	}
	return st, nil
}

var showRE = regexp.MustCompile(`(?is)^\s*show\s+pgsketch\s*\.\s*(approx|merge)\s*;?\s*$`)

// refusal is an error PostgreSQL raised on the proxy's behalf (see refuse):
// the client gets it as its query's error, as it would a cancel.
type refusal struct{ err error }

func (r refusal) Error() string { return r.err.Error() }
func (r refusal) Unwrap() error { return r.err }

// refuse has PostgreSQL raise an error for the client's query, so that the
// session's state (an aborted transaction block, an extended-protocol
// request discarding up to Sync) is what the error makes it, and returns
// it as a refusal.
func refuse(ctx context.Context, c *sessionConn, code, msg, hint string) error {
	lit := func(s string) string { return catalog.QuoteLiteral(strings.ReplaceAll(s, "$", "_")) }
	err := c.Exec(ctx, "DO $pgsketch$BEGIN RAISE EXCEPTION USING ERRCODE = "+lit(code)+", MESSAGE = "+lit(msg)+
		", HINT = "+lit(hint)+"; END$pgsketch$")
	if err == nil {
		return fmt.Errorf("%w: %s did not fail", errProtocol, "RAISE")
	}
	if !isPgError(err) {
		return err
	}
	return refusal{err}
}

// mergeRefusal refuses a plan the session's pgsketch.merge cannot run: a
// value that is no strategy, or server without the hll extension. It
// returns nil when the plan may run.
func mergeRefusal(ctx context.Context, c *sessionConn, st sessionSettings, p *rewrite.Plan) error {
	switch {
	case st.badMerge != "":
		return refuse(ctx, c, "22023", fmt.Sprintf("invalid value for parameter \"%s\": %q", MergeSetting, st.badMerge),
			"Available values: auto, proxy, server.")
	case p.Merge == rewrite.MergeServer && p.ServerFetchSQL == "":
		return refuse(ctx, c, "55000", MergeSetting+" is server, but this database has no hll extension to merge sketches with",
			"CREATE EXTENSION hll, or SET "+MergeSetting+" = auto.")
	}
	return nil
}

// clientVisible reports an error of answering a query that the client
// must get as its query's error, rather than have PostgreSQL answer the
// query instead: a cancel or timeout, the server going away, a refusal.
func clientVisible(err error) bool {
	var r refusal
	return clientCancelled(err) || errors.As(err, &r)
}

// isPgError reports whether err is PostgreSQL's answer (the session goes
// on) rather than a lost or confused upstream connection.
func isPgError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && !errors.Is(err, errProtocol) && !errors.Is(err, errUpstream)
}

// clientCancelled reports an error the client must see even though the
// proxy could retry: a cancel request or a timeout, or the server going away.
func clientCancelled(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Code == "57014" || strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08")
}

// serveQuery answers a simple Query the rewriter may answer from a rollup.
// Whatever it cannot answer goes upstream unchanged.
func (h *Handler) serveQuery(ctx context.Context, q *pgproto3.Query, s *wire.Session) error {
	start := time.Now()
	pass := func(reason string) error { return h.recordPassed(q.String, reason, start, forwardQuery(q.String, s)) }
	c := &sessionConn{s: s}
	st, err := h.settings(ctx, c)
	if err != nil {
		if isPgError(err) { // an aborted transaction: PostgreSQL answers
			return pass("the transaction is aborted")
		}
		return err
	}
	if m := showRE.FindStringSubmatch(q.String); m != nil {
		name, v := ApproxSetting, "off"
		if st.rw.Approx {
			v = "on"
		}
		if strings.EqualFold(m[1], "merge") {
			name, v = MergeSetting, string(st.rw.Merge)
			if st.badMerge != "" {
				v = st.badMerge
			}
		}
		s.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{
			Name: []byte(name), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}})
		s.Send(&pgproto3.DataRow{Values: [][]byte{[]byte(v)}})
		s.Send(&pgproto3.CommandComplete{CommandTag: []byte("SHOW")})
		s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
		return s.Flush()
	}
	if !st.catalogOK {
		return pass("the role cannot read the pgsketch catalog")
	}
	snap, err := h.catalogFor(ctx, c, st.fingerprint)
	if err != nil {
		if isPgError(err) || errors.Is(err, errCatalog) {
			h.Log.Info("rollup catalog unreadable: query passed through", "err", err)
			return pass("the rollup catalog is unreadable: " + err.Error())
		}
		return err
	}
	pd := h.planStatement(q.String, snap, st)
	if pd.multi {
		done, why, err := h.serveMulti(ctx, q, c, st, snap, s, start)
		if !done && err == nil {
			return pass(why)
		}
		return err
	}
	p := pd.plan
	if p == nil {
		h.Log.Debug("query passed through", "reason", pd.pass)
		return pass(pd.pass)
	}
	if p.Params > 0 { // PostgreSQL says there is no parameter $1
		return pass("parameters in a simple query")
	}
	if p.Explain {
		return h.explain(ctx, p, c, s)
	}
	if p.Kind == rewrite.Substitute {
		if p.Notice != "" {
			s.Send(notice(p.Notice))
		}
		return forwardQuery(p.SubstituteSQL, s)
	}
	if holds, err := c.guardHolds(ctx, p.Guard); err != nil {
		if isPgError(err) {
			return pass("the table could not be resolved: " + err.Error())
		}
		return err
	} else if !holds {
		h.Log.Debug("query passed through: its table is not the rollup's source on this search_path", "rollup", p.Rollup)
		return pass("the table is not the source of rollup " + p.Rollup + " on this search_path")
	}
	ans, err := h.run(ctx, c, st, p, exec.Params{}, nil)
	if err != nil {
		return h.failed(ctx, c, s, p, err, q.String)
	}
	s.Send(notice(ans.Notice(p)))
	s.Send(&pgproto3.RowDescription{Fields: ans.Fields})
	for _, r := range ans.Rows {
		s.Send(&pgproto3.DataRow{Values: r})
	}
	s.Send(&pgproto3.CommandComplete{CommandTag: []byte(ans.Tag)})
	s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
	h.recordAnswered(q.String, p, ans, start)
	return s.Flush()
}

// planned is the pipeline's verdict on one statement: the plan that
// answers it, or why it goes to PostgreSQL as it is.
type planned struct {
	plan *rewrite.Plan
	pass string
	// multi is set for a text of several statements, which only the
	// simple protocol answers (statement by statement).
	multi bool
}

// planStatement is the one path from a statement to a plan or a reason to
// pass it through, for the simple protocol, the extended protocol and each
// statement of a multi-statement text: the rewriter, against the catalog
// and the settings the session holds when the statement runs, then the
// checks a plan needs that no I/O decides (the base rows' text is hashed
// as the refresher hashed it). A plan to answer still needs its table
// guard (sessionConn.guardHolds) on the session; EXPLAIN and substitute
// plans come back for the caller to show or run.
func (h *Handler) planStatement(sql string, snap *catalog.Snapshot, st sessionSettings) planned {
	res := rewrite.Rewrite(sql, snap, st.rw)
	switch p := res.Plan; {
	case res.Multi:
		return planned{multi: true, pass: res.Reason}
	case p == nil:
		return planned{pass: res.Reason}
	case p.Kind == rewrite.FromRollup && !p.Explain:
		if why := hashable(p, snap, st.exec); why != "" {
			return planned{pass: why}
		}
	}
	return planned{plan: res.Plan}
}

// run executes p inside a savepoint when the client is in a transaction
// block, releasing it on success.
func (h *Handler) run(ctx context.Context, c *sessionConn, st sessionSettings, p *rewrite.Plan, params exec.Params, formats []int16) (*exec.Answer, error) {
	if err := mergeRefusal(ctx, c, st, p); err != nil {
		return nil, err
	}
	inBlock := c.txStatus == 'T' && !c.noSync
	if inBlock {
		if err := c.Exec(ctx, "SAVEPOINT "+savepoint); err != nil {
			return nil, err
		}
	}
	ans, err := exec.RunCached(ctx, querier{c}, p, params, formats, h.Cache, cacheScope(c, st))
	if err != nil {
		return nil, err
	}
	if inBlock {
		if err := c.Exec(ctx, "RELEASE SAVEPOINT "+savepoint); err != nil {
			return nil, err
		}
	}
	h.Log.Debug("answered from rollup", "rollup", p.Rollup, "groups", ans.Groups, "base_rows", ans.BaseRows,
		"cached_rollup", ans.CachedRollup, "merge", ans.Merge)
	return ans, nil
}

// cacheScope identifies, for the cache of rollup rows, what beyond the plan
// and its parameters decides the rows a fetch's rollup half returns: the
// database, the role (row-level security, should a rollup table have it)
// and the session's settings.
func cacheScope(c *sessionConn, st sessionSettings) string {
	p := c.s.Params()
	return strings.Join([]string{p["database"], p["user"], st.rw.User, st.rw.SearchPath, st.rw.TimeZone,
		st.exec.DateStyle, st.exec.IntervalStyle, st.exec.ExtraFloatDigits, st.exec.ByteaOutput, st.exec.ClientEncoding}, "\x00")
}

// failed handles an error of run: the session ends if the upstream is
// lost; a cancel or timeout goes to the client as PostgreSQL's error (the
// transaction block, if any, is then aborted as the original query's would
// be); anything else (no privilege on the rollup or the base table, bad
// rollup data) is rolled back to the savepoint and the original query goes
// to PostgreSQL, which gives its own answer or error.
func (h *Handler) failed(ctx context.Context, c *sessionConn, s *wire.Session, p *rewrite.Plan, err error, original string) error {
	if !isPgError(err) && !errors.Is(err, exec.ErrData) {
		return err
	}
	if clientVisible(err) {
		s.Send(errorResponse(err))
		s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
		return s.Flush()
	}
	h.Log.Info("rollup answer failed: query passed through", "rollup", p.Rollup, "err", err)
	if n := refusedNotice(err); n != nil {
		s.Send(n)
	}
	if c.txStatus == 'E' || c.txStatus == 'T' {
		if err := c.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint); err != nil {
			return err // the savepoint is gone: the state is unknown
		}
	}
	return forwardQuery(original, s)
}

// hashable says why the base rows' text cannot be hashed as the refresher
// hashed them, or "" if it can.
func hashable(p *rewrite.Plan, snap *catalog.Snapshot, st exec.Settings) string {
	r, ok := snap.Rollup(p.Rollup)
	if !ok {
		return "rollup " + p.Rollup + " is not in the catalog"
	}
	for _, a := range p.Aggs {
		if a.Op != rewrite.MergeHLL {
			continue
		}
		for _, m := range r.Measures {
			if m.Column == a.Measure && !exec.CanonicalText(m.Type, st) {
				return "the session prints " + m.Type + " values differently from the pinned settings the rollup was hashed under"
			}
		}
	}
	return ""
}

// refusedNotice is the NOTICE telling the client why its query was run
// exactly when the fetch statement refused the rollup (pgsketch's
// capture_check: the change capture is not in place, or too many buckets
// changed), or nil for any other error.
func refusedNotice(err error) *pgproto3.NoticeResponse {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55000" || !strings.HasPrefix(pe.Message, "pgsketch: ") {
		return nil
	}
	return notice(pe.Message + "; answered exactly by PostgreSQL")
}

func notice(msg string) *pgproto3.NoticeResponse {
	return &pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: msg}
}

// explain answers EXPLAIN of a planned query with the plan, one line per
// row, as PostgreSQL's EXPLAIN prints its own: pgsketch's plan, then
// PostgreSQL's plans of the statements it runs.
func (h *Handler) explain(ctx context.Context, p *rewrite.Plan, c *sessionConn, s *wire.Session) error {
	lines, err := h.explainLines(ctx, c, p, exec.Params{})
	if err != nil {
		return err
	}
	s.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{
		Name: []byte("QUERY PLAN"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}})
	for _, l := range lines {
		s.Send(&pgproto3.DataRow{Values: [][]byte{[]byte(l)}})
	}
	s.Send(&pgproto3.CommandComplete{CommandTag: []byte("EXPLAIN")})
	s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
	return s.Flush()
}

// explainLines is EXPLAIN's answer for plan p: pgsketch's plan, then
// PostgreSQL's EXPLAIN of the fetch statement that would run (the merge
// strategy's; the cache's token filter aside) and of the exact statement,
// with the client's parameters. A statement PostgreSQL cannot explain
// (no privilege, say) gets its error as a line instead; inside a
// transaction block the explains run under a savepoint, so the block
// stays as it was.
func (h *Handler) explainLines(ctx context.Context, c *sessionConn, p *rewrite.Plan, params exec.Params) ([]string, error) {
	lines := strings.Split("pgsketch plan\n"+p.String(), "\n")
	if p.Kind != rewrite.FromRollup {
		return lines, nil
	}
	fetch := p.FetchSQL
	if p.Merge == rewrite.MergeServer && p.ServerFetchSQL != "" {
		fetch = p.ServerFetchSQL
	}
	if c.noSync {
		// Inside an extended-protocol request not yet synced, an error
		// would discard the rest of the client's request: only pgsketch's
		// plan.
		return lines, nil
	}
	inBlock := c.txStatus == 'T'
	for _, st := range []struct {
		what, sql string
		refs      []int
	}{{"fetch", fetch, p.FetchParams}, {"exact", p.ExactSQL, p.ExactParams}} {
		if st.sql == "" {
			continue
		}
		if inBlock {
			if err := c.Exec(ctx, "SAVEPOINT "+savepoint); err != nil {
				return nil, err
			}
		}
		res, err := querier{c}.Query(ctx, exec.Bind("EXPLAIN "+st.sql, p.Params, st.refs, params))
		lines = append(lines, "", "PostgreSQL plan of the "+st.what+" statement")
		switch {
		case err == nil:
			for _, r := range res.Rows {
				if len(r) == 1 {
					lines = append(lines, string(r[0]))
				}
			}
		case isPgError(err) && !clientCancelled(err):
			lines = append(lines, "(not available: "+err.Error()+")")
		default:
			return nil, err
		}
		if inBlock {
			end := "RELEASE SAVEPOINT " + savepoint
			if err != nil {
				end = "ROLLBACK TO SAVEPOINT " + savepoint + "; " + end
			}
			if err := c.Exec(ctx, end); err != nil {
				return nil, err
			}
		}
	}
	return lines, nil
}

// forwardQuery sends a simple Query upstream and relays its replies.
func forwardQuery(sql string, s *wire.Session) error {
	return forward(&wire.Request{Messages: []pgproto3.FrontendMessage{&pgproto3.Query{String: sql}}}, s)
}
