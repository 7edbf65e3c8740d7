package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/upstream"
)

// A simple Query's answer from a rollup goes to the client with
// PostgreSQL's own RowDescription of the statement: the one PostgreSQL
// gives when it describes the exact statement (the client's text, its
// APPROX_COUNT_DISTINCT counted as COUNT(DISTINCT ...)) on the client's
// session. Only PostgreSQL knows it whole: which output column is a
// column of which table (through aliases, joins, subqueries, CTEs, views
// and SELECT *; a cast to the column's own type keeps it, another cast
// does not), its type modifier, the names it gives. The shaping
// statement's columns have the names and types, but come from arrays.
// (The extended protocol describes the statement at Parse already.)
//
// The description is read in the round trip of the first statements the
// answer runs upstream, ahead of them (its replies wait in the buffer
// while they run): Describe of the exact statement, with a Sync of its
// own, which outside a transaction block stays prepared in the session
// (describedPrefix) and costs PostgreSQL no parsing the next time.
// PostgreSQL revalidates it after DDL (another search_path, a table
// replaced, a column altered) as it does every prepared statement; one
// that it can no longer describe ("cached plan must not change result
// type") is closed and prepared again once. A statement PostgreSQL cannot
// describe is not answered from the rollup: it goes to PostgreSQL, which
// says why.

// describedPrefix starts the names of the exact statements prepared in a
// session to be described (reserved with internalName).
const describedPrefix = internalName + "_d"

// maxDescribed bounds them per session, apart from the proxy's own
// statements (maxPrepared), so that a dashboard's descriptions do not
// evict its fetches.
const maxDescribed = 64

// description is PostgreSQL's description of the exact statement a simple
// Query's answer stands for.
type description struct {
	sql string
	// pending: the next round trip carries it (describeWithNext); sent:
	// one did.
	pending, sent bool
	// retried: a kept statement failed to describe and was prepared anew.
	retried bool
	// stale, when set, is a kept statement to close before preparing the
	// statement anew.
	stale  string
	fields []pgproto3.FieldDescription // nil: NoData
	err    error
}

// undescribedError is PostgreSQL's error describing the exact statement:
// the statement goes to PostgreSQL instead of being answered.
type undescribedError struct{ err error }

func (e *undescribedError) Error() string {
	return "PostgreSQL did not describe the statement: " + e.err.Error()
}

func (e *undescribedError) Unwrap() error { return e.err }

// toDescribe has PostgreSQL describe sql for the answer about to run on
// the session: in the round trip of its first statement once
// describeWithNext armed it, or by itself (described).
func (c *sessionConn) toDescribe(sql string) {
	c.desc = &description{sql: sql}
}

// describeWithNext has the next round trip carry the description asked
// for, if any. Called where a failure to describe cannot harm the client's
// transaction: outside a transaction block (where each statement the
// proxy sends is synced alone), under the run's savepoint, or in the
// run's own transaction.
func (c *sessionConn) describeWithNext() {
	if d := c.desc; d != nil && !d.sent {
		d.pending = true
	}
}

// described returns the description toDescribe asked for, reading it in
// a round trip of its own if none carried it. err is an undescribedError
// for PostgreSQL's refusal to describe the statement, other errors as
// they came (a cancel, a lost session).
func (c *sessionConn) described(ctx context.Context) ([]pgproto3.FieldDescription, error) {
	d := c.desc
	if d == nil {
		return nil, errors.New("proxy: no description was asked for")
	}
	if !d.sent || d.pending {
		d.pending = true
		c.runMany(ctx, nil, nil)
	}
	switch {
	case d.pending:
		return nil, cmp.Or(ctx.Err(), errDiscarding)
	case d.err != nil && isPgError(d.err) && !clientVisible(d.err):
		return nil, &undescribedError{d.err}
	case d.err != nil:
		return nil, d.err
	}
	return d.fields, nil
}

// sendDescribe sends the messages describing d.sql: under name (the
// unnamed statement) or, with ps, prepared once per session. fresh says
// whether it is prepared now.
func (c *sessionConn) sendDescribe(d *description, name string, ps *preparedStmts) (st upstream.Statement, stmt string, fresh bool) {
	st = upstream.Statement{SQL: d.sql}
	if d.stale != "" {
		c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'S', Name: d.stale})
		d.stale = ""
	}
	stmt, fresh = name, true
	if ps != nil {
		var evicted string
		stmt, fresh, evicted = ps.name(st)
		if evicted != "" {
			c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'S', Name: evicted})
		}
	}
	if fresh {
		c.s.Frontend.Send(&pgproto3.Parse{Name: stmt, Query: d.sql})
	}
	c.s.Frontend.Send(&pgproto3.Describe{ObjectType: 'S', Name: stmt})
	c.s.Frontend.Send(&pgproto3.Sync{})
	return st, stmt, fresh
}

// readDescribe reads the replies sendDescribe asked for. A statement kept
// from before that fails to describe (dropped by the client, or changed
// under it) is forgotten and d made pending again, to be prepared anew
// once; a failed fresh one is forgotten.
func (c *sessionConn) readDescribe(d *description, ps *preparedStmts, st upstream.Statement, stmt string, fresh bool) {
	d.err = c.finish(func(msg pgproto3.BackendMessage) error {
		switch m := msg.(type) {
		case *pgproto3.RowDescription:
			d.fields = cloneFields(m.Fields)
		case *pgproto3.NoData:
			d.fields = nil
		case *pgproto3.ParseComplete, *pgproto3.ParameterDescription, *pgproto3.CloseComplete:
		default:
			return fmt.Errorf("%w: %T in a statement's description", errProtocol, msg)
		}
		return nil
	})
	if d.err == nil || ps == nil {
		return
	}
	ps.forget(st)
	if !fresh && !d.retried && isPgError(d.err) && !clientVisible(d.err) {
		// Closing a statement the client dropped is no error.
		d.pending, d.retried, d.stale, d.err = true, true, stmt, nil
	}
}

// withDescription is err, the error of running a plan, or the error of
// describing the statement when one was asked for (c.desc): a statement
// PostgreSQL did not describe is an undescribedError, whether the run
// succeeded or failed as a fallback would (PostgreSQL's error, not the
// client's), unless the run's failure aborted the transaction the
// description came after (in_failed_sql_transaction, 25P02): then the
// run's error stands. Either way the run is rolled back as for a failed
// run, and PostgreSQL answers the statement.
func (c *sessionConn) withDescription(ctx context.Context, err error) error {
	if c.desc == nil || (err != nil && (!sessionGoesOn(err) || clientVisible(err))) {
		return err
	}
	if err != nil && !c.desc.sent {
		return err // never sent: nothing to say
	}
	if _, derr := c.described(ctx); derr != nil && (err == nil || !transactionAborted(derr)) {
		return derr
	}
	return err
}

// transactionAborted reports PostgreSQL's refusal to run a statement in a
// transaction an earlier error aborted.
func transactionAborted(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25P02"
}
