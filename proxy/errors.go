package proxy

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/exec"
)

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

// sessionGoesOn reports whether err, from answering a query from a
// rollup, leaves the session able to go on: PostgreSQL's answer, a sketch
// the executor could not read (exec.ErrData), or a table that is not the
// rollup's source (exec.ErrNotSource). Any other error ends the session.
func sessionGoesOn(err error) bool {
	return isPgError(err) || errors.Is(err, exec.ErrData) || errors.Is(err, exec.ErrNotSource)
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
