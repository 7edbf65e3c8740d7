package proxy

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/status"
)

// What PostgreSQL runs instead of a statement the proxy does not answer
// from a rollup, whatever the reason: the statement itself, or, when it
// calls APPROX_COUNT_DISTINCT (which PostgreSQL does not have), the
// statement with it counted exactly; and when even that cannot be, an
// error of the proxy's saying what pgsketch supports, never PostgreSQL's
// "function approx_count_distinct does not exist".

// exactly returns the statement PostgreSQL is to run for sql: sql, or its
// exact equivalent (rewrite.ExactOrUnsupported). unsupported, when set,
// says which form of APPROX_COUNT_DISTINCT has none: sql is then to be
// refused (refuseUnsupported).
func exactly(sql string) (run, unsupported string) {
	exact, unsupported := rewrite.ExactOrUnsupported(sql)
	if exact != "" {
		return exact, ""
	}
	return sql, unsupported
}

// countedExactly is the NOTICE text for a statement whose
// APPROX_COUNT_DISTINCT PostgreSQL counts exactly because of why.
func countedExactly(why string) string {
	return "pgsketch: APPROX_COUNT_DISTINCT counted exactly: " + why
}

// unsupportedHint is the HINT of the error refusing a form of
// APPROX_COUNT_DISTINCT.
const unsupportedHint = "pgsketch answers APPROX_COUNT_DISTINCT(x) and APPROX_COUNT_DISTINCT(DISTINCT x) of one expression, " +
	"with or without FILTER (WHERE ...), as an aggregate in a SELECT statement: from a rollup when one matches, " +
	"otherwise counted exactly as COUNT(DISTINCT x)."

// unsupportedCode is its SQLSTATE: feature_not_supported.
const unsupportedCode = "0A000"

// refuseUnsupported has PostgreSQL raise the error refusing a statement
// that calls APPROX_COUNT_DISTINCT in a form pgsketch does not support
// (why), and returns it as a refusal, which the client gets.
func refuseUnsupported(ctx context.Context, c *sessionConn, why string) error {
	return refuse(ctx, c, unsupportedCode, "pgsketch: "+why, unsupportedHint)
}

// fallback is why a rollup answer was not used: the error it failed with
// when it ran. PostgreSQL then answers the statement exactly.
type fallback struct {
	rollup string
	// reason is the error's class (status.FallbackReasons).
	reason string
	// code is the error's SQLSTATE ("" for an error the proxy found in
	// the rollup's data, or a refusal of its answer).
	code, message string
	// own: the error is most likely the statement's own, which PostgreSQL
	// raises for the exact statement too (a data exception other than
	// the hll extension's 22000 for a sketch it cannot read: a parameter
	// that is no time, a division by zero). It is then neither announced
	// nor counted as a fallback.
	own bool
}

// fallbackOf classifies err, the error of running plan p.
func fallbackOf(p rewrite.Plan, err error) fallback {
	fb := fallback{reason: status.ReasonOther, message: err.Error()}
	if p != nil {
		fb.rollup = p.Header().Rollup
	}
	var re *exec.Refused
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &re): // before ErrData, which it wraps
		fb.reason, fb.message = status.ReasonRefused, re.Error()
	case errors.As(err, &pe):
		fb.code, fb.message = pe.Code, pe.Message
		if why, ok := checkFailed(pe); ok {
			fb.reason, fb.message = status.ReasonRefused, why
			break
		}
		switch {
		case pe.Code == "42501":
			fb.reason = status.ReasonPrivilege
		case pe.Code == "55000":
			fb.reason = status.ReasonNotReady
		case pe.Code == "22000" || pe.Code == "XX001" || pe.Code == "XX002":
			fb.reason = status.ReasonData
		case strings.HasPrefix(pe.Code, "22"):
			fb.own = true
		}
	case errors.Is(err, exec.ErrData):
		fb.reason = status.ReasonData
	}
	return fb
}

// checkFailedPrefixes start the error of a check a plan's statement makes
// at run time by casting its message to timestamptz or interval (a
// rolling window's bound that is no bucket start): PostgreSQL's message,
// with pgsketch's own in quotes.
var checkFailedPrefixes = []string{`invalid input syntax for type timestamp with time zone: "`, `invalid input syntax for type interval: "`}

// checkFailed reports whether pe is such a check's failure, and its
// message.
func checkFailed(pe *pgconn.PgError) (string, bool) {
	if pe.Code != "22007" {
		return "", false
	}
	for _, p := range checkFailedPrefixes {
		if msg, ok := strings.CutPrefix(pe.Message, p); ok && strings.HasPrefix(msg, "pgsketch: ") {
			return strings.TrimSuffix(msg, `"`), true
		}
	}
	return "", false
}

// notice is the NOTICE the client gets before PostgreSQL's answer: which
// rollup was not used, why (the error and its SQLSTATE), and that the
// statement is answered exactly.
func (fb fallback) notice() string {
	msg := fb.message
	if !strings.HasPrefix(msg, "pgsketch: ") {
		// The catalog's checks and the executor's refusals name the
		// rollup themselves.
		what := "the rollup"
		if fb.rollup != "" {
			what = "rollup " + fb.rollup
		}
		msg = "pgsketch: " + what + " not used: " + msg
	}
	if fb.code != "" {
		msg += " (SQLSTATE " + fb.code + ")"
	}
	return msg + "; answered exactly by PostgreSQL"
}

// recordFallback tells the log and the recorder that sql's rollup answer
// failed with fb, and PostgreSQL answered it; it returns the NOTICE for
// the client, or "" for an error that is the statement's own.
func (h *Handler) recordFallback(sql string, fb fallback, start time.Time) string {
	if fb.own {
		h.Log.Debug("rollup answer failed with the statement's own error: executed upstream", "rollup", fb.rollup,
			"sqlstate", fb.code, "err", fb.message)
		return ""
	}
	h.Log.Info("rollup answer failed: answered exactly by PostgreSQL", "rollup", fb.rollup, "reason", fb.reason,
		"sqlstate", fb.code, "err", fb.message)
	h.Recorder.Fallback(status.Fallback{Time: start, SQL: sql, Rollup: fb.rollup, Reason: fb.reason,
		Code: fb.code, Message: fb.message})
	return fb.notice()
}
