package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/exec"
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

// MaxOverlapErrorSetting is the session variable bounding the relative
// error of an overlap (INTERSECT, EXCEPT) answered from Theta sketches, in
// per cent ("10", "2.5%"): a larger one is counted exactly instead. A
// placeholder setting like ApproxSetting; unset or empty, 10.
const MaxOverlapErrorSetting = "pgsketch.max_overlap_error"

// TopKSetting is the session variable that says how a top-k (GROUP BY item
// ORDER BY count(*) DESC LIMIT k, or HAVING count(*) >= T) over a rollup's
// frequent-items summaries is answered: verified (exactly, or not at all),
// approx (from the summaries, with bounds) or off. A placeholder setting
// like ApproxSetting; unset or empty, verified.
const TopKSetting = "pgsketch.topk"

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
 current_setting('` + MergeSetting + `', true), current_setting('` + MaxOverlapErrorSetting + `', true),
 current_setting('` + TopKSetting + `', true), current_setting('standard_conforming_strings'),
 current_setting('timezone_abbreviations'), pg_catalog.pg_my_temp_schema() OPERATOR(pg_catalog.<>) 0`

// settingsColumns is the number of columns settingsSQL returns.
const settingsColumns = 16

// savepoint protects the client's transaction block from errors of the
// statements the proxy runs: on one, the proxy rolls back to it and lets
// PostgreSQL answer the original query instead.
const savepoint = "pgsketch_exec"

type sessionSettings struct {
	rw        rewrite.Session
	exec      exec.Settings
	catalogOK bool
	// standardStrings: standard_conforming_strings is on, so the session's
	// SQL text reads as the parser reads it.
	standardStrings bool
	// tempSchema: the session has a schema of temporary objects. PostgreSQL
	// looks a type name up there before pg_catalog, so the proxy's
	// statements, which name types such as bigint and timestamptz
	// unqualified, may mean other types in this session than in others:
	// what it reads is not shared with them (cacheScope).
	tempSchema bool
	// fingerprint identifies the catalog's state ("" if not read).
	fingerprint string
	// read is the settings row and the fingerprint as read, to compare
	// with a later reading (see speculation).
	read string
	// parse is the settings PostgreSQL reads when it parses a statement:
	// search_path, TimeZone, DateStyle, IntervalStyle,
	// standard_conforming_strings and timezone_abbreviations.
	parse string
	// badMerge is a pgsketch.merge value that is not a strategy: a plan
	// is refused rather than run (rw.Merge is then auto).
	badMerge string
	// badOverlap is a pgsketch.max_overlap_error value that is not a
	// percentage in (0, 100]: an overlap plan is refused rather than run.
	badOverlap string
	// badTopK is a pgsketch.topk value that is no mode: a top-k plan is
	// refused rather than run.
	badTopK string
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
	if len(rows[0]) != 1 || len(rows[0][0]) != settingsColumns {
		return sessionSettings{}, errProtocol
	}
	r := rows[0][0]
	st := sessionSettings{
		rw: rewrite.Session{SearchPath: string(r[0]), TimeZone: string(r[1]), DateStyle: string(r[4]), User: string(r[2]), Approx: h.Approx},
		exec: exec.Settings{DateStyle: string(r[4]), TimeZone: string(r[1]), IntervalStyle: string(r[5]),
			ExtraFloatDigits: string(r[6]), ByteaOutput: string(r[7]), ClientEncoding: string(r[8])},
		catalogOK: string(r[9]) == "t",
		// The parser reads string literals as PostgreSQL does with the
		// setting on ('a\' is a backslash, not an escaped quote).
		standardStrings: string(r[13]) == "on",
		tempSchema:      string(r[15]) != "f",
	}
	st.rw.Abbreviations = string(r[14])
	st.parse = strings.Join([]string{string(r[0]), string(r[1]), string(r[4]), string(r[5]), string(r[13]), string(r[14])}, "\x00")
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
	if v := strings.TrimSpace(string(r[11])); v != "" {
		pct, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, "%")), 64)
		if err == nil && pct > 0 && pct <= 100 {
			st.rw.MaxOverlapError = pct / 100
		} else {
			st.badOverlap = v
		}
	}
	switch v := strings.ToLower(strings.TrimSpace(string(r[12]))); v {
	case "", rewrite.TopKVerified:
		st.rw.TopK = rewrite.TopKVerified
	case rewrite.TopKApprox, rewrite.TopKOff:
		st.rw.TopK = v
	default:
		st.rw.TopK, st.badTopK = rewrite.TopKVerified, string(r[12])
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
	st.read = viewKey(r, st.fingerprint)
	return st, nil
}

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
func mergeRefusal(ctx context.Context, c *sessionConn, st sessionSettings, p rewrite.Plan) error {
	switch {
	case st.badMerge != "":
		return refuse(ctx, c, "22023", fmt.Sprintf("invalid value for parameter \"%s\": %q", MergeSetting, st.badMerge),
			"Available values: auto, proxy, server.")
	case st.badOverlap != "" && p.Facts().ReadsOverlapError:
		return refuse(ctx, c, "22023", fmt.Sprintf("invalid value for parameter \"%s\": %q", MaxOverlapErrorSetting, st.badOverlap),
			"A percentage above 0 and at most 100, such as 10 or 2.5%.")
	case st.badTopK != "" && p.Facts().ReadsTopKMode:
		return refuse(ctx, c, "22023", fmt.Sprintf("invalid value for parameter \"%s\": %q", TopKSetting, st.badTopK),
			"Available values: verified, approx, off.")
	case needsServerMerge(p):
		return refuse(ctx, c, "55000", MergeSetting+" is server, but this database has no hll extension to merge sketches with",
			"CREATE EXTENSION hll, or SET "+MergeSetting+" = auto.")
	}
	return nil
}

// show answers SHOW pgsketch.approx or SHOW pgsketch.merge (which) with
// the session's value, or the handler's default.
func show(which string, st sessionSettings, c *sessionConn, s *wire.Session) error {
	name, v := ApproxSetting, "off"
	if st.rw.Approx {
		v = "on"
	}
	switch {
	case strings.EqualFold(which, "merge"):
		name, v = MergeSetting, string(st.rw.Merge)
		if st.badMerge != "" {
			v = st.badMerge
		}
	case strings.EqualFold(which, "topk"):
		name, v = TopKSetting, cmp.Or(st.badTopK, st.rw.TopK)
	}
	s.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{
		Name: []byte(name), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}})
	s.Send(&pgproto3.DataRow{Values: [][]byte{[]byte(v)}})
	s.Send(&pgproto3.CommandComplete{CommandTag: []byte("SHOW")})
	s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
	return s.Flush()
}

// needsServerMerge reports whether p, or an arm of it, must merge its
// sketches in PostgreSQL but has no statement to do it with.
func needsServerMerge(p rewrite.Plan) bool {
	for _, r := range p.Fetches() {
		if r.Merge == rewrite.MergeServer && r.ServerFetchSQL == "" {
			return true
		}
	}
	return false
}
