package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/wire"
)

// sessionConn runs statements on a client's upstream session for packages
// exec and refresh (it implements upstream.Session). Asynchronous messages
// the upstream sends meanwhile (notices, parameter changes, notifications)
// are queued for the client. It reads every reply up to ReadyForQuery
// before returning.
type sessionConn struct {
	s *wire.Session
	// txStatus is the status byte of the last ReadyForQuery: I, T or E.
	txStatus byte
	// ext: the statements run inside an extended-protocol request of the
	// client's, under a pgsketch-owned statement and portal name, so the
	// client's unnamed statement and portal upstream are left alone; Exec
	// uses the extended protocol too (a simple Query would drop the
	// unnamed statement, and end an implicit transaction).
	ext bool
	// noSync: each statement ends with Flush instead of Sync, so that it
	// runs inside the implicit transaction the client's request has open
	// upstream. An error then leaves the upstream discarding until the
	// client's Sync; failed records it, and every later statement fails.
	noSync bool
	failed bool
	// bare: statements run without the JIT setting sent before them
	// outside a transaction block (see execBare).
	bare bool
	// spec, when set, is a view the statement was planned in, to confirm
	// with the first statement sent upstream (speculate.go).
	spec *speculation
	// desc, when set, is the description of a simple Query's statement,
	// read after the first statements sent upstream (describe.go).
	desc *description
	// hold: runMany sends its last statement without Sync (nor, for an
	// OwnSnapshot one, COMMIT) and reads its replies up to its
	// CommandComplete, leaving its transaction open for another statement
	// (QueryPair); held says it is open.
	hold, held bool
}

var _ upstream.Session = (*sessionConn)(nil)

// internalName is the statement and portal name of the statements the
// proxy runs inside a client's extended-protocol request.
const internalName = "pgsketch_q"

var errDiscarding = errors.New("upstream discards until Sync after an error")

var (
	errProtocol = errors.New("unexpected message from the upstream")
	errUpstream = errors.New("upstream connection")
)

// relayAsync passes an asynchronous message to the client and reports
// whether msg was one.
func (c *sessionConn) relayAsync(msg pgproto3.BackendMessage) (bool, error) {
	switch msg.(type) {
	case *pgproto3.NoticeResponse, *pgproto3.ParameterStatus, *pgproto3.NotificationResponse:
		return true, c.s.Send(msg)
	}
	return false, nil
}

// receive returns the next upstream message that is not asynchronous: the
// asynchronous ones (notices, parameter changes, notifications) go to the
// client meanwhile.
func (c *sessionConn) receive() (pgproto3.BackendMessage, error) {
	for {
		msg, err := c.s.Frontend.Receive()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errUpstream, err)
		}
		if async, err := c.relayAsync(msg); err != nil || !async {
			return msg, err
		}
	}
}

// finish reads replies up to ReadyForQuery, handing each other message to
// each (which may be nil), and returns the first ErrorResponse as a
// *pgconn.PgError.
func (c *sessionConn) finish(each func(pgproto3.BackendMessage) error) error {
	var first error
	for {
		msg, err := c.receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			c.txStatus = m.TxStatus
			return first
		case *pgproto3.ErrorResponse:
			if first == nil {
				first = pgconn.ErrorResponseToPgError(m)
			}
		default:
			if each != nil && first == nil {
				if err := each(msg); err != nil {
					first = err
				}
			}
		}
	}
}

func (c *sessionConn) send(msgs ...pgproto3.FrontendMessage) error {
	for _, m := range msgs {
		c.s.Frontend.Send(m)
	}
	return c.s.Frontend.Flush()
}

// Exec implements upstream.Session.
func (c *sessionConn) Exec(ctx context.Context, sql string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.confirm(ctx); err != nil {
		return err
	}
	if c.ext {
		return c.run(ctx, upstream.Statement{SQL: sql}, nil)
	}
	if err := c.send(&pgproto3.Query{String: sql}); err != nil {
		return err
	}
	return c.finish(nil)
}

// execBare runs sql as Exec does, but without the JIT setting that
// precedes a statement outside a transaction block: a statement that must
// be the first of its transaction (BEGIN ISOLATION LEVEL ...) then is.
func (c *sessionConn) execBare(ctx context.Context, sql string) error {
	c.bare = true
	defer func() { c.bare = false }()
	return c.Exec(ctx, sql)
}

// Query implements upstream.Session: one statement with the extended
// protocol, as run runs it.
func (c *sessionConn) Query(ctx context.Context, st upstream.Statement) (*upstream.Result, error) {
	if st.OwnSnapshot && !c.ownsTransaction() {
		return nil, &exec.Refused{Reason: ownSnapshotRefus}
	}
	res := &upstream.Result{}
	if err := c.run(ctx, st, resultCollector(res)); err != nil {
		return nil, err
	}
	return res, nil
}

// resultCollector is a function of runMany's each that fills res with a
// statement's description and rows.
func resultCollector(res *upstream.Result) func(pgproto3.BackendMessage) error {
	return func(msg pgproto3.BackendMessage) error {
		switch m := msg.(type) {
		case *pgproto3.RowDescription:
			res.Fields = make([]pgproto3.FieldDescription, len(m.Fields))
			for i, f := range m.Fields { // a flyweight: copy
				f.Name = slices.Clone(f.Name)
				res.Fields[i] = f
			}
		case *pgproto3.DataRow:
			res.Rows = append(res.Rows, cloneRow(m.Values))
		case *pgproto3.CommandComplete:
			res.Tag = string(m.CommandTag)
		default:
			return fmt.Errorf("%w: %T in a query's reply", errProtocol, msg)
		}
		return nil
	}
}

func cloneRow(vals [][]byte) [][]byte {
	row := make([][]byte, len(vals))
	for i, v := range vals { // DataRow is a flyweight: copy
		if v != nil {
			row[i] = slices.Clone(v)
		}
	}
	return row
}

// run runs one statement with the extended protocol, handing each reply
// other than the protocol's acknowledgements to each, and returns the
// first ErrorResponse as a *pgconn.PgError.
func (c *sessionConn) run(ctx context.Context, st upstream.Statement, each func(pgproto3.BackendMessage) error) error {
	return c.runMany(ctx, []upstream.Statement{st}, []func(pgproto3.BackendMessage) error{each})[0]
}

// noJIT turns JIT compilation off for the statement that follows it in the
// same implicit transaction.
// (SET LOCAL would only warn outside a transaction block: the extended
// protocol's implicit transaction is not one.)
const noJIT = "SELECT pg_catalog.set_config('jit', 'off', true)"

// A statement marked OwnSnapshot (a plan over a rollup whose source Citus
// distributes) runs in a transaction block of its own, REPEATABLE READ,
// begun before it and committed after it (or after the second statement of
// a pair, QueryPair) in the same round trip, in which Citus reads each
// worker over one connection. Citus opens a transaction on a worker for a
// read only inside a transaction block (else each shard's read is a
// transaction, and a snapshot, of its own); in one, every read of a
// worker's shards (the change log's rows, the base rows) comes from that
// worker's one snapshot. A failure leaves the block aborted at Sync, and
// the proxy rolls it back (endOwn).
// The block's settings and the session's TimeZone for the workers:
// upstream.OwnSnapshotSettings, upstream.SetLocalZone.
const (
	ownSnapshot  = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
	ownCommit    = "COMMIT"
	noJITOneConn = "SELECT pg_catalog.set_config('jit', 'off', true), " + upstream.OwnSnapshotSettings

	ownSnapshotRefus = "a rollup whose source Citus distributes is read in a transaction of its own, which a statement cannot have " +
		"inside a transaction block or a pipeline"
)

// preamble is what runMany sends before st, in its transaction, when it
// turns JIT off: noJIT, or for an OwnSnapshot statement the beginning of
// its block.
func preamble(st upstream.Statement) []string {
	if !st.OwnSnapshot {
		return []string{noJIT}
	}
	if z := upstream.SetLocalZone(st.Zone); z != "" {
		return []string{ownSnapshot, noJITOneConn, z}
	}
	return []string{ownSnapshot, noJITOneConn}
}

// runMany runs statements in one round trip: with Sync, each is followed by
// its own Sync (a failure does not skip the next); without, a failure
// skips the rest. It returns each statement's error. A description still
// pending (c.desc) is read before them, in the same round trip.
func (c *sessionConn) runMany(ctx context.Context, sts []upstream.Statement, each []func(pgproto3.BackendMessage) error) []error {
	errs := make([]error, len(sts))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if c.failed {
		return fail(errDiscarding)
	}
	if c.spec != nil && c.spec.pending {
		return c.speculate(ctx, sts, each)
	}
	name := ""
	if c.ext {
		name = internalName
	}
	jitOff := c.ownsTransaction()
	// Outside a transaction block, with Sync, statements are prepared once
	// per session and bound by name afterwards: PostgreSQL skips parsing
	// them (and, once it settles on a generic plan, planning). A statement
	// a client dropped (DEALLOCATE, DISCARD ALL) fails alone there, and is
	// prepared again below.
	var ps *preparedStmts
	if jitOff {
		ps = &sessionState(c.s).prepared
	}
	// The description is only asked for in the simple protocol, which
	// always syncs; outside a transaction block its statement is kept
	// (its Sync ends its own implicit transaction: it needs no JIT setting
	// and may come before a statement that must begin one, c.bare). It
	// goes first: PostgreSQL describes in microseconds, and its replies
	// wait in the buffer while the statements run.
	d := c.desc
	if d == nil || !d.pending || c.noSync {
		d = nil
	}
	var dps *preparedStmts
	if d != nil && c.txStatus == 'I' {
		dps = &sessionState(c.s).describedStmts
	}
	var (
		dst    upstream.Statement
		dstmt  string
		dfresh bool
	)
	if d != nil {
		d.pending, d.sent = false, true
		dst, dstmt, dfresh = c.sendDescribe(d, name, dps)
	}
	fresh := c.sendMany(sts, name, jitOff, ps)
	if c.noSync {
		c.s.Frontend.Send(&pgproto3.Flush{})
	}
	if err := c.s.Frontend.Flush(); err != nil {
		if d != nil {
			d.err = err
		}
		return fail(err)
	}
	var retry []int
	defer func() {
		// The client dropped the proxy's statements: forget them all,
		// and run those that failed again, prepared anew, once the
		// batch's replies are read (the statements are independent reads).
		if len(retry) > 0 {
			ps.reset()
			for _, i := range retry {
				var f []func(pgproto3.BackendMessage) error
				if i < len(each) {
					f = each[i : i+1]
				}
				errs[i] = c.runMany(ctx, sts[i:i+1], f)[0]
			}
		}
		// A kept statement that failed to describe, prepared anew.
		if d != nil && d.pending {
			c.runMany(ctx, nil, nil)
		}
	}()
	if d != nil {
		c.readDescribe(d, dps, dst, dstmt, dfresh) // its error is d.err
		if errors.Is(d.err, errUpstream) || errors.Is(d.err, errProtocol) {
			return fail(d.err)
		}
	}
	// ended: an OwnSnapshot statement's transaction block ended, or was
	// left aborted by a failure (endOwn rolls it back after the batch,
	// whose later statements failed in it).
	ended := false
	defer func() {
		if ended {
			if err := c.endOwn(ctx); err != nil {
				fail(err)
			}
		}
	}()
	for i := range sts {
		var f func(pgproto3.BackendMessage) error
		if i < len(each) {
			f = each[i]
		}
		var missing bool
		skip := 0
		if jitOff {
			skip = len(preamble(sts[i]))
		}
		held := c.hold && i == len(sts)-1
		if missing, errs[i] = c.readOne(replyFilter(f, skip), ps, sts[i], fresh[i], held, skip+1); errors.Is(errs[i], errUpstream) || errors.Is(errs[i], errProtocol) {
			return fail(errs[i])
		}
		ended = ended || jitOff && sts[i].OwnSnapshot && !c.held
		if missing {
			retry = append(retry, i)
		}
	}
	return errs
}

// sendMany sends the statements of runMany: each under name (the unnamed
// statement and portal, or the proxy's own in the extended protocol), or
// prepared once per session in ps; with noJIT first when jitOff, and a Sync
// after each unless the session must not sync. fresh says which it
// prepares now.
func (c *sessionConn) sendMany(sts []upstream.Statement, name string, jitOff bool, ps *preparedStmts) (fresh []bool) {
	fresh = make([]bool, len(sts))
	for i, st := range sts {
		if c.ext {
			// A statement left by an earlier failure would make the Parse fail.
			c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'S', Name: name})
			c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'P', Name: name})
		}
		if jitOff {
			// The proxy's statements are small by design, but their cost
			// estimates are often above jit_above_cost: JIT compilation
			// would take longer than the query (seconds, measured by
			// bench-query). Outside a transaction block, a local setting
			// lasts until this statement's Sync.
			for _, q := range preamble(st) {
				c.sendBare(name, q)
			}
		}
		stmt := name
		// A statement quoting 'now' or 'today' is parsed anew every time.
		keep := ps != nil && !st.Reparse
		if keep {
			var evicted string
			stmt, fresh[i], evicted = ps.name(st)
			if evicted != "" {
				c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'S', Name: evicted})
			}
			if fresh[i] {
				c.s.Frontend.Send(&pgproto3.Parse{Name: stmt, Query: st.SQL, ParameterOIDs: st.ParamOIDs})
			}
		} else {
			c.s.Frontend.Send(&pgproto3.Parse{Name: name, Query: st.SQL, ParameterOIDs: st.ParamOIDs})
		}
		c.s.Frontend.Send(&pgproto3.Bind{DestinationPortal: name, PreparedStatement: stmt,
			ParameterFormatCodes: st.ParamFormats, Parameters: st.Params, ResultFormatCodes: st.ResultFormats})
		c.s.Frontend.Send(&pgproto3.Describe{ObjectType: 'P', Name: name})
		c.s.Frontend.Send(&pgproto3.Execute{Portal: name})
		if c.ext {
			c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'P', Name: name})
			if !keep {
				c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'S', Name: name})
			}
		}
		held := c.hold && i == len(sts)-1
		if jitOff && st.OwnSnapshot && !held {
			c.sendBare(name, ownCommit)
		}
		switch {
		case c.hold && i == len(sts)-1:
			// PostgreSQL sends what it has buffered at a Flush as at a Sync.
			c.s.Frontend.Send(&pgproto3.Flush{})
		case !c.noSync:
			c.s.Frontend.Send(&pgproto3.Sync{})
		}
	}
	return fresh
}

// sendBare sends sql, which takes no parameters and returns at most a row,
// as statement and portal name, parsed now.
func (c *sessionConn) sendBare(name, sql string) {
	c.s.Frontend.Send(&pgproto3.Parse{Name: name, Query: sql})
	c.s.Frontend.Send(&pgproto3.Bind{DestinationPortal: name, PreparedStatement: name})
	c.s.Frontend.Send(&pgproto3.Execute{Portal: name})
	if c.ext {
		c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'P', Name: name})
		c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'S', Name: name})
	}
}

// endOwn rolls back the transaction block an OwnSnapshot statement began,
// left aborted by its failure (or open by a reply cut short), so that the
// client's session is idle again as it was.
func (c *sessionConn) endOwn(ctx context.Context) error {
	if c.txStatus == 'I' {
		return nil
	}
	if err := c.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		return fmt.Errorf("%w: rolling back the transaction of a statement of its own: %w", errUpstream, err)
	}
	return nil
}

// ownsTransaction reports whether a statement of runMany runs in an
// implicit transaction of its own: outside a transaction block, ended by
// its own Sync, with nothing before it in that transaction.
func (c *sessionConn) ownsTransaction() bool {
	return !c.noSync && c.txStatus == 'I' && !c.bare
}

// replyFilter hands f the replies of one statement of runMany but the
// protocol's acknowledgements and the replies of the statements sent
// before it in its transaction, which come first (skip CommandCompletes:
// preamble's, and their rows), and after
// it (ownCommit's).
func replyFilter(f func(pgproto3.BackendMessage) error, skip int) func(pgproto3.BackendMessage) error {
	done := false
	return func(msg pgproto3.BackendMessage) error {
		switch msg.(type) {
		case *pgproto3.ParseComplete, *pgproto3.BindComplete, *pgproto3.CloseComplete, *pgproto3.NoData,
			*pgproto3.EmptyQueryResponse:
			return nil
		case *pgproto3.DataRow:
			if skip > 0 || done {
				return nil
			}
		case *pgproto3.CommandComplete:
			switch {
			case skip > 0:
				skip--
				return nil
			case done:
				return nil
			}
			done = true
		}
		if f == nil {
			return nil
		}
		return f(msg)
	}
}

// readOne reads the replies of one statement of runMany through filter.
// missing reports a statement prepared earlier in the session that the
// client dropped (DEALLOCATE, DISCARD ALL): runMany runs it again.
func (c *sessionConn) readOne(filter func(pgproto3.BackendMessage) error, ps *preparedStmts, st upstream.Statement, fresh bool, held bool, commands int) (missing bool, err error) {
	if c.noSync {
		if c.failed {
			return false, errDiscarding // the upstream skipped it
		}
		return false, c.readOwed(filter)
	}
	if held {
		err = c.readHeld(filter, commands)
	} else {
		err = c.finish(filter)
	}
	if ps != nil && fresh && err != nil {
		ps.forget(st) // it may not have been prepared
	}
	return ps != nil && !fresh && isMissingStatement(err), err
}

// readHeld reads the replies of a statement sent without Sync (hold) up
// to its CommandComplete, the commands-th of them (those of the statements
// sent before it in its transaction come first), handing them to filter;
// its transaction is then open (held). After an ErrorResponse it sends
// Sync and reads up to ReadyForQuery (an aborted transaction block is
// runMany's to roll back).
func (c *sessionConn) readHeld(filter func(pgproto3.BackendMessage) error, commands int) error {
	var first error
	for {
		msg, err := c.receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			perr := pgconn.ErrorResponseToPgError(m)
			if err := c.send(&pgproto3.Sync{}); err != nil {
				return fmt.Errorf("%w: %w", errUpstream, err)
			}
			if err := c.finish(nil); err != nil {
				return err
			}
			return perr // runMany ends the transaction block
		case *pgproto3.ReadyForQuery:
			return fmt.Errorf("%w: ReadyForQuery without Sync", errProtocol)
		}
		if first == nil {
			first = filter(msg)
		}
		if _, ok := msg.(*pgproto3.CommandComplete); ok {
			if commands--; commands == 0 {
				c.held = true
				return first
			}
		}
	}
}

// QueryPair implements upstream.Session. Where a statement runs in a
// transaction of its own (ownsTransaction), first is sent without Sync
// (for an OwnSnapshot one, after BEGIN and without its COMMIT), its rows
// read, and the second statement sent in the same transaction, then
// COMMIT if first began one, and Sync; else both run, one after the
// other, in the client's transaction (which first.OwnSnapshot refuses).
func (c *sessionConn) QueryPair(ctx context.Context, first upstream.Statement, next upstream.Next) (res, second *upstream.Result, err error) {
	if !c.ownsTransaction() {
		if first.OwnSnapshot {
			return nil, nil, &exec.Refused{Reason: ownSnapshotRefus}
		}
		return upstream.InTurn(ctx, c.Query, first, next)
	}
	c.hold = true
	res, err = c.Query(ctx, first)
	c.hold = false
	if !c.held {
		return nil, nil, err // the transaction ended
	}
	c.held = false
	var st *upstream.Statement
	if err == nil {
		st, err = next(res)
	}
	if err != nil || st == nil {
		if serr := c.endHeld(first.OwnSnapshot); serr != nil {
			return nil, nil, serr
		}
		if ferr := c.finish(nil); err == nil {
			err = ferr
		}
		if eerr := c.endOwn(ctx); err == nil {
			err = eerr
		}
		if err != nil {
			return nil, nil, err
		}
		return res, nil, nil
	}
	second, err = c.queryIn(ctx, *st, first.OwnSnapshot)
	if eerr := c.endOwn(ctx); err == nil {
		err = eerr
	}
	if err != nil {
		return nil, nil, err
	}
	return res, second, nil
}

// endHeld sends, after what is queued, what ends the transaction a held
// statement left open: its COMMIT when it began its own (own), and Sync.
func (c *sessionConn) endHeld(own bool) error {
	if own {
		name := ""
		if c.ext {
			name = internalName
		}
		c.sendBare(name, ownCommit)
	}
	if err := c.send(&pgproto3.Sync{}); err != nil {
		return fmt.Errorf("%w: %w", errUpstream, err)
	}
	return nil
}

// queryIn runs st in the transaction a held statement left open, as the
// unnamed statement (or the proxy's own, in the extended protocol), parsed
// now, then ends the transaction (endHeld), and returns st's rows.
func (c *sessionConn) queryIn(ctx context.Context, st upstream.Statement, own bool) (*upstream.Result, error) {
	if err := ctx.Err(); err != nil {
		// The transaction must still end.
		if serr := c.endHeld(own); serr != nil {
			return nil, serr
		}
		if ferr := c.finish(nil); ferr != nil {
			return nil, ferr
		}
		return nil, err
	}
	name := ""
	if c.ext {
		name = internalName
		c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'S', Name: name})
		c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'P', Name: name})
	}
	c.s.Frontend.Send(&pgproto3.Parse{Name: name, Query: st.SQL, ParameterOIDs: st.ParamOIDs})
	c.s.Frontend.Send(&pgproto3.Bind{DestinationPortal: name, PreparedStatement: name,
		ParameterFormatCodes: st.ParamFormats, Parameters: st.Params, ResultFormatCodes: st.ResultFormats})
	c.s.Frontend.Send(&pgproto3.Describe{ObjectType: 'P', Name: name})
	c.s.Frontend.Send(&pgproto3.Execute{Portal: name})
	if c.ext {
		c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'P', Name: name})
		c.s.Frontend.Send(&pgproto3.Close{ObjectType: 'S', Name: name})
	}
	if err := c.endHeld(own); err != nil {
		return nil, err
	}
	res := &upstream.Result{}
	if err := c.finish(replyFilter(resultCollector(res), 0)); err != nil {
		return nil, err
	}
	return res, nil
}

// readOwed reads the replies of one statement sent without Sync: there is
// no ReadyForQuery, so it counts the replies owed (Close, Close, Parse,
// Bind, Describe, Execute, Close, Close).
func (c *sessionConn) readOwed(filter func(pgproto3.BackendMessage) error) error {
	var first error
	for owed := 8; owed > 0; {
		msg, err := c.receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			c.failed = true // the upstream skips the rest up to the client's Sync
			return pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ParseComplete, *pgproto3.BindComplete, *pgproto3.CloseComplete, *pgproto3.RowDescription,
			*pgproto3.NoData, *pgproto3.CommandComplete, *pgproto3.EmptyQueryResponse, *pgproto3.PortalSuspended:
			owed--
		case *pgproto3.ReadyForQuery:
			return fmt.Errorf("%w: ReadyForQuery without Sync", errProtocol)
		}
		if first == nil {
			if err := filter(msg); err != nil {
				first = err
			}
		}
	}
	return first
}

// queryRows runs parameterless statements in one round trip (see runMany)
// and returns each one's rows.
func (c *sessionConn) queryRows(ctx context.Context, sqls ...string) ([][][][]byte, []error) {
	sts := make([]upstream.Statement, len(sqls))
	rows := make([][][][]byte, len(sqls))
	each := make([]func(pgproto3.BackendMessage) error, len(sqls))
	for i, sql := range sqls {
		sts[i] = upstream.Statement{SQL: sql}
		each[i] = func(msg pgproto3.BackendMessage) error {
			if dr, ok := msg.(*pgproto3.DataRow); ok {
				rows[i] = append(rows[i], cloneRow(dr.Values))
			}
			return nil
		}
	}
	return rows, c.runMany(ctx, sts, each)
}

// CopyTo implements upstream.Session.
func (c *sessionConn) CopyTo(ctx context.Context, w io.Writer, sql string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.confirm(ctx); err != nil {
		return err
	}
	if err := c.send(&pgproto3.Query{String: sql}); err != nil {
		return err
	}
	return c.finish(func(msg pgproto3.BackendMessage) error {
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if err := ctx.Err(); err != nil {
				return err // the rest is drained; the caller rolls back
			}
			_, err := w.Write(m.Data)
			return err
		case *pgproto3.CopyOutResponse, *pgproto3.CopyDone, *pgproto3.CommandComplete:
			return nil
		}
		return fmt.Errorf("%w: %T during COPY TO", errProtocol, msg)
	})
}

// CopyFrom implements upstream.Session.
func (c *sessionConn) CopyFrom(ctx context.Context, r io.Reader, sql string) (int64, error) {
	if err := c.confirm(ctx); err != nil {
		return 0, err
	}
	if err := c.send(&pgproto3.Query{String: sql}); err != nil {
		return 0, err
	}
	// Wait for CopyInResponse (or an error, then ReadyForQuery).
	msg, err := c.receive()
	if err != nil {
		return 0, err
	}
	switch m := msg.(type) {
	case *pgproto3.CopyInResponse:
	case *pgproto3.ErrorResponse:
		return 0, errors.Join(pgconn.ErrorResponseToPgError(m), c.finish(nil))
	default:
		return 0, fmt.Errorf("%w: %T before COPY FROM data", errProtocol, msg)
	}
	buf := make([]byte, 64<<10)
	var rerr error
	for rerr == nil {
		if rerr = ctx.Err(); rerr != nil {
			break
		}
		var n int
		n, rerr = r.Read(buf)
		if n > 0 {
			c.s.Frontend.Send(&pgproto3.CopyData{Data: buf[:n]})
			if err := c.s.Frontend.Flush(); err != nil {
				return 0, err
			}
		}
	}
	if rerr == io.EOF {
		c.s.Frontend.Send(&pgproto3.CopyDone{})
	} else {
		c.s.Frontend.Send(&pgproto3.CopyFail{Message: fmt.Sprintf("pgsketch: %v", rerr)})
	}
	if err := c.s.Frontend.Flush(); err != nil {
		return 0, err
	}
	var n int64
	err = c.finish(func(msg pgproto3.BackendMessage) error {
		if cc, ok := msg.(*pgproto3.CommandComplete); ok {
			n = pgconn.NewCommandTag(string(cc.CommandTag)).RowsAffected()
		}
		return nil
	})
	if rerr != io.EOF {
		// PostgreSQL's answer to CopyFail only echoes rerr, as 57014.
		return n, fmt.Errorf("copy aborted: %w", rerr)
	}
	return n, err
}
