package proxy

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/upstream"
)

// The request pipeline: what the simple protocol, the extended protocol
// and each statement of a multi-statement text share. An entry reads the
// session's view (readView), then hands each statement to answer, which
// plans it and, when a rollup answers it, runs the plan; the entry turns
// the verdict into its protocol's messages, or sends the statement to
// PostgreSQL as it is.

// statement is one statement to answer, as its protocol entry has it.
type statement struct {
	sql string
	// params are the values of $1, $2, ... (extended protocol only), and
	// formats the result formats the client asked for.
	params  exec.Params
	formats []int16
	// described is PostgreSQL's description of the statement's result
	// (extended protocol): an answer must have these columns.
	described []pgproto3.FieldDescription
	extended  bool
	// inText: the statement is one of several in a simple Query.
	inText bool
}

// view is what statements are planned against: the session's settings
// and the rollup catalog as the session's role sees it.
type view struct {
	st   sessionSettings
	snap *catalog.Snapshot
}

// verdict is the pipeline's answer for one statement. pass says why the
// statement goes to PostgreSQL as it is; otherwise plan is set, and, for
// a rollup's answer, ans; for EXPLAIN, explain; for a substitute plan
// (APPROX_COUNT_DISTINCT written by the user, answered exactly), nothing
// more: the entry runs plan.SubstituteSQL.
type verdict struct {
	pass string
	// unsupported, with pass: the statement calls APPROX_COUNT_DISTINCT
	// in a form pgsketch does not support (rewrite.Result.Unsupported),
	// and is refused rather than passed.
	unsupported string
	multi       bool // several statements: the simple-protocol entry answers them one by one
	plan        rewrite.Plan
	// exact, with plan, is the statement PostgreSQL runs in its place
	// (APPROX_COUNT_DISTINCT counted exactly): its description is the
	// answer's in the simple protocol.
	exact   string
	ans     *exec.Answer
	explain []string
}

// substitute is the verdict's plan when it runs an exact statement in the
// statement's place, else nil.
func (vd verdict) substitute() *plan.Substitute {
	s, _ := vd.plan.(*plan.Substitute)
	return s
}

// readView reads the session's settings and the catalog. pass says why no
// statement can be answered (the role cannot read the catalog, or it is
// unreadable); err is an error of reading the settings or the catalog on
// the session.
func (h *Handler) readView(ctx context.Context, c *sessionConn) (v view, pass string, err error) {
	if v.st, err = h.settings(ctx, c); err != nil {
		return v, "", err
	}
	if !v.st.standardStrings {
		// With it off, 'a\' OR ...' is one literal to PostgreSQL and a
		// backslash and a condition to the parser.
		return v, "standard_conforming_strings is off: pgsketch reads string literals as PostgreSQL does with it on", nil
	}
	if !v.st.catalogOK {
		return v, "the role cannot read the pgsketch catalog", nil
	}
	if v.snap, err = h.catalogFor(ctx, c, v.st.fingerprint); err != nil {
		if errors.Is(err, errCatalog) {
			h.Log.Info("rollup catalog unreadable: statement passed through", "err", err)
			return v, "the rollup catalog is unreadable: " + err.Error(), nil
		}
		return v, "", err
	}
	return v, "", nil
}

// decide is the one path from a statement to a plan or to "pass through,
// because ...", for every protocol entry: the rewriter, against the
// catalog and the settings the session holds when the statement runs,
// then the checks a plan needs that no I/O decides (the base rows' text is
// hashed as the refresher hashed it; what the statement's protocol can
// carry).
func (h *Handler) decide(v view, s statement) verdict {
	res, exact := h.plans.rewrite(s.sql, v.snap, v.st.rw)
	if len(res.ZoneParams) > 0 && s.extended {
		if zones, ok := boundZones(res.ZoneParams, s.params); ok {
			rw := v.st.rw
			rw.Zones = zones
			res, exact = h.plans.rewrite(s.sql, v.snap, rw)
		}
	}
	p := res.Plan
	if res.Multi {
		return verdict{pass: res.Reason, multi: true}
	}
	if p == nil {
		return verdict{pass: res.Reason, unsupported: res.Unsupported}
	}
	head := p.Header()
	switch {
	case head.Params > 0 && !s.extended: // PostgreSQL says there is no parameter $1
		return verdict{pass: "parameters in a simple query"}
	case s.inText && (!p.Facts().InText || head.Explain):
		return verdict{pass: "only rollup answers and exact substitutes are served within a text of several statements"}
	case head.Explain && s.extended && (len(s.described) != 1 || s.described[0].DataTypeOID != 25):
		return verdict{pass: "PostgreSQL described the EXPLAIN otherwise"}
	case !head.Explain:
		for _, q := range p.Fetches() {
			if why := hashable(q, v.snap, v.st.exec); why != "" {
				return verdict{pass: why}
			}
		}
	}
	return verdict{plan: p, exact: exact}
}

// boundZones encodes the values bound to the parameters ns, which the
// statement uses as time zones, for rewrite.Session.Zones: each must be a
// text or varchar value that is not NULL (whose bytes are the same in
// either format).
func boundZones(ns []int, params exec.Params) (string, bool) {
	values := map[int]string{}
	for _, n := range ns {
		i := n - 1
		if i < 0 || i >= len(params.Values) || i >= len(params.OIDs) {
			return "", false
		}
		v := params.Values[i]
		switch {
		case params.OIDs[i] != pgtype.TextOID && params.OIDs[i] != pgtype.VarcharOID,
			v == nil, len(v) > maxZoneName, !utf8.Valid(v):
			return "", false
		}
		values[n] = string(v)
	}
	return plan.ZoneValues(values)
}

// maxZoneName caps a zone parameter's value: longer ones are not planned
// for (PostgreSQL's zone names and POSIX specifications are far shorter).
const maxZoneName = 256

// answer takes a statement from decide to its answer: EXPLAIN's lines, or
// the table guard and the plan's run. A substitute plan and a pass come
// back as decide made them. An error of the guard or the run comes back
// with the verdict's plan; inside a transaction block the run was rolled
// back to its savepoint unless the client must see the error
// (clientVisible).
func (h *Handler) answer(ctx context.Context, c *sessionConn, v view, s statement) (verdict, error) {
	return h.carryOut(ctx, c, v, s, h.decide(v, s))
}

// carryOut is answer for a verdict decide already gave for s in view v.
func (h *Handler) carryOut(ctx context.Context, c *sessionConn, v view, s statement, vd verdict) (verdict, error) {
	// The statements it prepares upstream are kept under the settings
	// they are planned in.
	sessionState(c.s).prepared.settings = v.st.parse
	p := vd.plan
	switch {
	case p == nil || vd.substitute() != nil:
		return vd, nil
	case p.Header().Explain:
		lines, err := h.explainLines(ctx, c, p, s.params)
		return verdict{plan: p, explain: lines}, err
	}
	head := p.Header()
	described := s.described
	if !s.extended {
		// PostgreSQL describes the exact statement, in the run's first
		// round trip (describe.go).
		c.toDescribe(vd.exact)
		defer func() { c.desc = nil }()
	}
	// The fetch checks the table guard (plan.Head.Guard) first.
	ans, err := h.run(ctx, c, v.st, p, s.params, s.formats)
	if errors.Is(err, exec.ErrNotSource) {
		h.Log.Debug("statement passed through: its table is not the rollup's source on this search_path", "rollup", head.Rollup)
		return verdict{pass: "the table is not the source of rollup " + head.Rollup + " on this search_path"}, nil
	}
	if ud := (*undescribedError)(nil); errors.As(err, &ud) {
		h.Log.Info("statement not described by PostgreSQL: executed upstream", "rollup", head.Rollup, "err", ud.err)
		return verdict{pass: ud.Error()}, nil
	}
	if err != nil {
		return vd, err
	}
	if !s.extended {
		described = c.desc.fields
	}
	if !sameColumns(ans.Fields, described) {
		h.Log.Info("rollup answer has other columns than the statement: executed upstream", "rollup", head.Rollup)
		return verdict{pass: "the answer's columns differ from PostgreSQL's description"}, nil
	}
	if !s.extended {
		// The rows as shaped, described as PostgreSQL describes them
		// (the answer may be the cache's: its columns are not changed).
		ans.Fields = described
	}
	return verdict{plan: p, ans: ans}, nil
}

// run executes p inside a savepoint when the client is in a transaction
// block, releasing it on success and rolling back to it on an error the
// client is not to see (PostgreSQL then answers the statement instead). It
// refuses p (a Refused error: PostgreSQL answers) inside an extended-
// protocol request in which a client's statement went upstream since the
// last Sync, where neither a savepoint nor a Sync of the proxy's own can
// contain such an error.
func (h *Handler) run(ctx context.Context, c *sessionConn, st sessionSettings, p rewrite.Plan, params exec.Params, formats []int16) (*exec.Answer, error) {
	if c.noSync {
		// A client's statement went upstream since the last Sync: no
		// savepoint can contain a failure of the answer's statements (a
		// run-time check refusing the rollup), which would be the
		// client's error and roll back the request's implicit
		// transaction. PostgreSQL answers instead.
		return nil, &exec.Refused{Reason: "inside an extended-protocol request not yet synced, after a statement PostgreSQL ran, " +
			"a failure of the rollup's statements could not be contained"}
	}
	if err := mergeRefusal(ctx, c, st, p); err != nil {
		return nil, err
	}
	if why := p.Facts().OneSnapshot; why != "" {
		own, err := h.oneSnapshot(ctx, c, why)
		if err != nil || own {
			return h.runInSnapshot(ctx, c, st, p, params, formats, err)
		}
	}
	inBlock := c.txStatus == 'T'
	if inBlock {
		if err := c.Exec(ctx, "SAVEPOINT "+savepoint); err != nil {
			return nil, err
		}
	}
	c.describeWithNext()
	ans, err := exec.RunCached(ctx, c, p, params, formats, h.Cache, cacheScope(c, st))
	err = c.withDescription(ctx, err)
	if err != nil {
		if inBlock && sessionGoesOn(err) && !clientVisible(err) {
			if rerr := c.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint); rerr != nil {
				return nil, rerr // the savepoint is gone: the state is unknown
			}
			if rerr := c.Exec(ctx, "RELEASE SAVEPOINT "+savepoint); rerr != nil {
				return nil, rerr
			}
		}
		return nil, err
	}
	if inBlock {
		if err := c.Exec(ctx, "RELEASE SAVEPOINT "+savepoint); err != nil {
			return nil, err
		}
	}
	h.Log.Debug("answered from rollup", "rollup", p.Header().Rollup, "groups", ans.Groups, "base_rows", ans.BaseRows,
		"cached_rollup", ans.CachedRollup, "merge", ans.Merge)
	return ans, nil
}

// oneSnapshot decides how a plan whose statements must all see one
// snapshot (why says which and why) runs, in a request synced since the
// client's last statement (run refuses the others): own is true outside a
// transaction block, where it runs in a REPEATABLE READ transaction of its
// own; inside a REPEATABLE READ or SERIALIZABLE block it runs as any plan
// does; inside a READ COMMITTED or READ UNCOMMITTED block each statement
// would take a snapshot of its own: a Refused error, and the query runs
// exactly.
func (h *Handler) oneSnapshot(ctx context.Context, c *sessionConn, why string) (own bool, err error) {
	refused := &exec.Refused{Reason: why + ", which must see one snapshot: "}
	if c.txStatus == 'I' {
		return true, nil
	}
	res, err := c.Query(ctx, upstream.Statement{SQL: "SELECT current_setting('transaction_isolation')"})
	if err != nil {
		return false, err
	}
	// READ UNCOMMITTED runs as READ COMMITTED: a snapshot per statement.
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 || (string(res.Rows[0][0]) != "repeatable read" && string(res.Rows[0][0]) != "serializable") {
		refused.Reason += "in a transaction block whose isolation level is not REPEATABLE READ or SERIALIZABLE they would not"
		return false, refused
	}
	return false, nil
}

// runInSnapshot runs p in a REPEATABLE READ transaction of its own, or
// fails with err, oneSnapshot's.
func (h *Handler) runInSnapshot(ctx context.Context, c *sessionConn, st sessionSettings, p rewrite.Plan, params exec.Params, formats []int16, err error) (*exec.Answer, error) {
	if err != nil {
		return nil, err
	}
	// The description rides with the view's confirmation, if one is due
	// before BEGIN, else with the first statement in the transaction.
	c.describeWithNext()
	if err := c.execBare(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return nil, err
	}
	// As outside a block: the proxy's statements are not worth compiling.
	// And the session is idle in this transaction while the proxy merges:
	// a client's idle_in_transaction_session_timeout must not end it.
	for _, set := range []string{"SET LOCAL jit = off", "SET LOCAL idle_in_transaction_session_timeout = 0"} {
		if err == nil {
			err = c.Exec(ctx, set)
		}
	}
	var ans *exec.Answer
	if err == nil {
		ans, err = exec.RunCached(ctx, c, p, params, formats, h.Cache, cacheScope(c, st))
		err = c.withDescription(ctx, err)
	}
	end := "COMMIT"
	if err != nil {
		end = "ROLLBACK"
	}
	// Even when the client cancelled: the session must not stay in the
	// proxy's transaction.
	if eerr := c.Exec(context.WithoutCancel(ctx), end); eerr != nil {
		return nil, eerr
	}
	return ans, err
}

// cacheScope identifies, for the cache of rollup rows, what beyond the plan
// and its parameters decides the rows a fetch's rollup half returns: the
// database, the role (row-level security, should a rollup table have it)
// and the session's settings; and the session itself where it has
// temporary objects.
func cacheScope(c *sessionConn, st sessionSettings) string {
	p := c.s.Params()
	scope := []string{p["database"], p["user"], st.rw.User, st.rw.SearchPath, st.rw.TimeZone, st.rw.Abbreviations,
		st.exec.DateStyle, st.exec.IntervalStyle, st.exec.ExtraFloatDigits, st.exec.ByteaOutput, st.exec.ClientEncoding}
	if st.tempSchema {
		// A temporary type may stand for a type the fetch names: this
		// session's rows are its own.
		scope = append(scope, "session "+strconv.FormatUint(sessionState(c.s).id, 10))
	}
	return strings.Join(scope, "\x00")
}

// hashable says why the base rows' text cannot be hashed as the refresher
// hashed it, or "" if it can.
func hashable(p *plan.Rollup, snap *catalog.Snapshot, st exec.Settings) string {
	r, ok := snap.Rollup(p.Rollup)
	if !ok {
		return "rollup " + p.Rollup + " is not in the catalog"
	}
	for _, a := range p.Aggs {
		if a.Op != rewrite.MergeHLL && a.Op != rewrite.MergeTheta && a.Op != rewrite.MergeFreq {
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

// sameColumns reports whether an answer's columns have the types of
// PostgreSQL's description of the statement.
func sameColumns(a, b []pgproto3.FieldDescription) bool {
	if len(a) != len(b) || len(b) == 0 {
		return false
	}
	for i := range a {
		if a[i].DataTypeOID != b[i].DataTypeOID {
			return false
		}
	}
	return true
}
