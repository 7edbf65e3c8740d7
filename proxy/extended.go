package proxy

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/wire"
)

// The extended protocol.
//
// A statement whose Parse the Handler takes (the relay then routes every
// later Bind, Describe, Execute and Close naming it, or a portal bound to
// it, here) is prepared upstream under a pgsketch-owned name, upStmtPrefix
// + the client's name. What is prepared is the client's SQL itself, or, when
// it calls APPROX_COUNT_DISTINCT (which PostgreSQL does not have), the same
// query with exact counts (rewrite's Substitute plan): so PostgreSQL checks
// the statement at Parse, as it would, and describes it; the proxy keeps the
// description (parameter types, result columns) and answers Describe of the
// statement, and of its portals, from it.
//
// A Bind of such a statement is kept in the proxy (checked against the
// description; anything wrong is bound upstream, so that PostgreSQL raises
// its own error). Execute plans the statement with the session's settings
// and catalog: answered from a rollup, the rows are kept in the portal and
// sent up to the row limit, PortalSuspended in between; otherwise the portal
// is bound upstream (upPortalPrefix + the client's name) and executed there.
//
// Every other message of the request goes upstream unchanged, in order. The
// replies are read back as the request is walked: before the proxy answers
// an Execute itself, the upstream has answered everything sent before it.
// An error, the upstream's or the proxy's own, discards the rest up to Sync,
// as PostgreSQL does; when the proxy raises an error itself it also makes
// the upstream fail (Describe of a portal that does not exist, reply
// swallowed), so that the transaction ends as PostgreSQL would end it.
//
// The statements the proxy runs to answer an Execute use a pgsketch-owned
// statement and portal name. While no client message that opens or uses a
// portal has gone upstream since the last ReadyForQuery ("clean"), each is
// followed by Sync (inside a transaction block, under a savepoint), and a
// failure falls back to executing upstream. Otherwise ("dirty": the upstream
// holds an implicit transaction with the client's work, which a Sync would
// commit) they end with Flush, and a failure of one of them is the
// Execute's error.
const (
	upStmtPrefix   = "pgsketch_s_"
	upPortalPrefix = "pgsketch_p_"
	// poisonPortal never exists: describing it makes the upstream fail.
	poisonPortal = "pgsketch_no_such_portal"
)

// extSession is a session's extended-protocol state.
type extSession struct {
	// id is the session's number among the proxy's sessions, never reused.
	id      uint64
	stmts   map[string]*ownedStmt
	portals map[string]*ownedPortal
	// ready is the session's ReadyForQuery count when the last request
	// served here ended.
	ready    uint64
	txStatus byte
	// dirty: client messages opening or using portals went upstream since
	// the last ReadyForQuery.
	dirty bool
	// discarding: an error came, and messages are skipped up to Sync.
	discarding bool
	// catalogOK: the session's role could read the catalog last time; the
	// catalog's fingerprint is then read with the settings.
	catalogOK bool
	// prepared are the proxy's own statements prepared upstream in this
	// session (see sessionConn.runMany); describedStmts the exact
	// statements of simple Queries kept to be described (describe.go).
	prepared, describedStmts preparedStmts
	// last is the view last read, which the next statement may be planned
	// in before it is confirmed (speculate.go).
	last *lastView
}

// ownedStmt is a prepared statement the proxy holds for the client.
type ownedStmt struct {
	name, up string
	sql      string
	// described: the upstream described the prepared statement.
	described bool
	paramOIDs []uint32
	fields    []pgproto3.FieldDescription // nil: NoData
}

// ownedPortal is a portal of an ownedStmt.
type ownedPortal struct {
	name, up      string
	stmt          *ownedStmt
	params        [][]byte
	paramFormats  []int16
	resultFormats []int16
	// upstream: the portal is bound upstream and executes there.
	upstream bool
	// answered: the proxy answered it; rows are those not yet sent.
	answered bool
	rows     [][][]byte
	done     bool
}

// sessionState returns the session's state, made on first use.
// sessionIDs numbers the sessions (extSession.id).
var sessionIDs atomic.Uint64

func sessionState(s *wire.Session) *extSession {
	es, _ := s.State().(*extSession)
	if es == nil {
		es = &extSession{id: sessionIDs.Add(1), stmts: map[string]*ownedStmt{}, portals: map[string]*ownedPortal{}, txStatus: 'I',
			describedStmts: preparedStmts{prefix: describedPrefix, max: maxDescribed}}
		s.SetState(es)
	}
	return es
}

// extState returns the session's state at the start of a request.
func extState(s *wire.Session) *extSession {
	es := sessionState(s)
	n, status := s.ReadyForQuery()
	if n != es.ready {
		// Requests the relay passed on reached a Sync meanwhile.
		es.ready, es.txStatus, es.dirty, es.discarding = n, status, false, false
		if status == 'I' {
			clear(es.portals) // the transaction that held them ended
		}
	}
	return es
}

// portalAnswerer answers an Execute of a portal of a statement the machine
// holds: from a rollup (it sets p.answered and p.rows) or not, and the
// machine then binds and executes the portal upstream. It may run
// statements of its own on the session (sessionConn); an error that is the
// client's it sends and sets es.discarding.
type portalAnswerer interface {
	answerPortal(ctx context.Context, x *extRequest, p *ownedPortal) (notice string, err error)
}

type extRequest struct {
	a     portalAnswerer
	s     *wire.Session
	es    *extSession
	queue []entry
	// upErr: the upstream failed and discards up to Sync.
	upErr bool
}

// serveExtended serves one extended-protocol request: the messages from
// the first the Handler wants up to Sync or Flush.
func serveExtended(ctx context.Context, req *wire.Request, s *wire.Session, a portalAnswerer) error {
	x := &extRequest{a: a, s: s, es: extState(s)}
	x.es.dirty = x.es.dirty || req.Unsynced
	for i, m := range req.Messages {
		wanted := i < len(req.Wanted) && req.Wanted[i]
		if err := x.message(ctx, m, wanted); err != nil {
			return err
		}
	}
	if len(x.queue) > 0 {
		if err := x.drain(false); err != nil {
			return err
		}
	}
	x.es.ready, _ = s.ReadyForQuery()
	return s.Flush()
}

func (x *extRequest) message(ctx context.Context, m pgproto3.FrontendMessage, wanted bool) error {
	es := x.es
	if _, ok := m.(*pgproto3.Sync); ok {
		return x.sync()
	}
	if _, ok := m.(*pgproto3.Flush); ok {
		return x.drain(false)
	}
	if es.discarding {
		return nil
	}
	switch m := m.(type) {
	case *pgproto3.Parse:
		if wanted {
			x.parse(m)
			return nil
		}
		if old := es.stmts[m.Name]; old != nil {
			// The client's statement of that name is now the upstream's.
			delete(es.stmts, m.Name)
			x.upstream(entry{kind: 'C'}, &pgproto3.Close{ObjectType: 'S', Name: old.up})
		}
		x.upstream(entry{kind: 'P', relay: true}, m)
	case *pgproto3.Bind:
		if old := es.portals[m.DestinationPortal]; old != nil && (!wanted || m.DestinationPortal == "") {
			delete(es.portals, m.DestinationPortal)
			if old.upstream {
				x.upstream(entry{kind: 'C'}, &pgproto3.Close{ObjectType: 'P', Name: old.up})
			}
		}
		if wanted {
			return x.bind(m)
		}
		es.dirty = true
		x.upstream(entry{kind: 'B', relay: true}, m)
	case *pgproto3.Describe:
		if !wanted {
			if m.ObjectType == 'P' {
				es.dirty = true
			}
			x.upstream(entry{kind: describeKind(m.ObjectType), relay: true}, m)
			return nil
		}
		x.describe(m)
	case *pgproto3.Execute:
		if !wanted {
			es.dirty = true
			x.upstream(entry{kind: 'E', relay: true}, m)
			return nil
		}
		return x.execute(ctx, m)
	case *pgproto3.Close:
		if !wanted {
			x.upstream(entry{kind: 'C', relay: true}, m)
			return nil
		}
		x.close(m)
	}
	return nil
}

func describeKind(objectType byte) byte {
	if objectType == 'S' {
		return 'S'
	}
	return 'D'
}

func upStmtName(name string) string   { return upStmtPrefix + name }
func upPortalName(name string) string { return upPortalPrefix + name }

func (x *extRequest) parse(m *pgproto3.Parse) {
	es := x.es
	if old := es.stmts[m.Name]; old != nil {
		if m.Name != "" {
			x.localError("42P05", `prepared statement "`+m.Name+`" already exists`, "")
			return
		}
		// PostgreSQL drops the unnamed statement first, even when the
		// new one fails.
		delete(es.stmts, m.Name)
		x.upstream(entry{kind: 'C'}, &pgproto3.Close{ObjectType: 'S', Name: old.up})
	}
	sql, unsupported := describeSQL(m.Query)
	if unsupported != "" {
		// Refused at Parse, where PostgreSQL would say the function
		// does not exist.
		x.localError(unsupportedCode, "pgsketch: "+unsupported, unsupportedHint)
		return
	}
	st := &ownedStmt{name: m.Name, up: upStmtName(m.Name), sql: m.Query}
	es.stmts[m.Name] = st
	x.upstream(entry{kind: 'P', relay: true, upName: st.up, clientName: m.Name, onError: func() {
		if es.stmts[m.Name] == st {
			delete(es.stmts, m.Name)
		}
	}}, &pgproto3.Parse{Name: st.up, Query: sql, ParameterOIDs: m.ParameterOIDs})
	x.upstream(entry{kind: 'S', onReply: func(msg pgproto3.BackendMessage) {
		switch r := msg.(type) {
		case *pgproto3.ParameterDescription:
			st.paramOIDs = append([]uint32(nil), r.ParameterOIDs...)
		case *pgproto3.RowDescription:
			st.fields = cloneFields(r.Fields)
			st.described = true
		case *pgproto3.NoData:
			st.described = true
		}
	}}, &pgproto3.Describe{ObjectType: 'S', Name: st.up})
}

func cloneFields(fs []pgproto3.FieldDescription) []pgproto3.FieldDescription {
	out := make([]pgproto3.FieldDescription, len(fs))
	for i, f := range fs {
		f.Name = append([]byte(nil), f.Name...)
		out[i] = f
	}
	return out
}

// describeSQL is what is prepared upstream for a statement the proxy
// takes: the SQL itself, or, when it calls APPROX_COUNT_DISTINCT, the
// query with exact counts, which has the same columns and parameters
// (what PostgreSQL runs when no rollup answers, or a rollup answer fails);
// unsupported says why a form of APPROX_COUNT_DISTINCT has none.
func describeSQL(sql string) (prepared, unsupported string) {
	return exactly(sql)
}

// validFormats reports whether a Bind's format codes fit n values.
func validFormats(codes []int16, n int) bool {
	if len(codes) > 1 && len(codes) != n {
		return false
	}
	for _, c := range codes {
		if c != 0 && c != 1 {
			return false
		}
	}
	return true
}

func (x *extRequest) bind(m *pgproto3.Bind) error {
	es := x.es
	st := es.stmts[m.PreparedStatement]
	if st != nil && !st.described {
		// Its Parse is in this request: its description comes first.
		if err := x.drain(false); err != nil {
			return err
		}
		if es.discarding {
			return nil
		}
	}
	p := &ownedPortal{name: m.DestinationPortal, up: upPortalName(m.DestinationPortal), stmt: st,
		params: m.Parameters, paramFormats: m.ParameterFormatCodes, resultFormats: m.ResultFormatCodes}
	if old := es.portals[m.DestinationPortal]; old != nil {
		// PostgreSQL would say the cursor exists; but the proxy cannot
		// tell a portal of an ended transaction block from a live one,
		// so it replaces it, as for the unnamed portal.
		delete(es.portals, m.DestinationPortal)
		if old.upstream {
			x.upstream(entry{kind: 'C'}, &pgproto3.Close{ObjectType: 'P', Name: old.up})
		}
	}
	ok := st != nil && st.described && es.txStatus != 'E' &&
		len(m.Parameters) == len(st.paramOIDs) && validFormats(m.ParameterFormatCodes, len(m.Parameters)) &&
		validFormats(m.ResultFormatCodes, len(st.fields))
	if !ok {
		// PostgreSQL says what is wrong (or binds it after all).
		upStmt := upStmtName(m.PreparedStatement)
		es.dirty = true
		p.upstream = true
		es.portals[m.DestinationPortal] = p
		x.upstream(entry{kind: 'B', relay: true, upName: upStmt, clientName: m.PreparedStatement,
			onError: func() { delete(es.portals, p.name) }},
			&pgproto3.Bind{DestinationPortal: p.up, PreparedStatement: upStmt,
				ParameterFormatCodes: m.ParameterFormatCodes, Parameters: m.Parameters, ResultFormatCodes: m.ResultFormatCodes})
		return nil
	}
	p.params = cloneValues(m.Parameters)
	p.paramFormats = append([]int16(nil), m.ParameterFormatCodes...)
	p.resultFormats = append([]int16(nil), m.ResultFormatCodes...)
	es.portals[m.DestinationPortal] = p
	x.local(func() []pgproto3.BackendMessage { return []pgproto3.BackendMessage{&pgproto3.BindComplete{}} })
	return nil
}

func cloneValues(vs [][]byte) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		if v != nil {
			out[i] = append([]byte{}, v...)
		}
	}
	return out
}

func (x *extRequest) describe(m *pgproto3.Describe) {
	es := x.es
	if m.ObjectType == 'S' {
		st := es.stmts[m.Name]
		if st == nil {
			x.upstream(entry{kind: 'S', relay: true, upName: upStmtName(m.Name), clientName: m.Name},
				&pgproto3.Describe{ObjectType: 'S', Name: upStmtName(m.Name)})
			return
		}
		x.local(func() []pgproto3.BackendMessage {
			out := []pgproto3.BackendMessage{&pgproto3.ParameterDescription{ParameterOIDs: st.paramOIDs}}
			if st.fields == nil {
				return append(out, &pgproto3.NoData{})
			}
			return append(out, &pgproto3.RowDescription{Fields: st.fields})
		})
		return
	}
	p := es.portals[m.Name]
	if p == nil || p.upstream {
		es.dirty = true
		x.upstream(entry{kind: 'D', relay: true, upName: upPortalName(m.Name), clientName: m.Name},
			&pgproto3.Describe{ObjectType: 'P', Name: upPortalName(m.Name)})
		return
	}
	x.local(func() []pgproto3.BackendMessage {
		if p.stmt.fields == nil {
			return []pgproto3.BackendMessage{&pgproto3.NoData{}}
		}
		return []pgproto3.BackendMessage{&pgproto3.RowDescription{Fields: withFormats(p.stmt.fields, p.resultFormats)}}
	})
}

// withFormats returns fields with the format codes a Bind asked for.
func withFormats(fields []pgproto3.FieldDescription, codes []int16) []pgproto3.FieldDescription {
	out := make([]pgproto3.FieldDescription, len(fields))
	copy(out, fields)
	for i := range out {
		out[i].Format = upstream.FormatOf(codes, i)
	}
	return out
}

func (x *extRequest) close(m *pgproto3.Close) {
	es := x.es
	if m.ObjectType == 'S' {
		delete(es.stmts, m.Name)
		x.upstream(entry{kind: 'C', relay: true}, &pgproto3.Close{ObjectType: 'S', Name: upStmtName(m.Name)})
		return
	}
	p := es.portals[m.Name]
	delete(es.portals, m.Name)
	if p == nil || p.upstream {
		x.upstream(entry{kind: 'C', relay: true}, &pgproto3.Close{ObjectType: 'P', Name: upPortalName(m.Name)})
		return
	}
	x.local(func() []pgproto3.BackendMessage { return []pgproto3.BackendMessage{&pgproto3.CloseComplete{}} })
}

func (x *extRequest) execute(ctx context.Context, m *pgproto3.Execute) error {
	es := x.es
	p := es.portals[m.Portal]
	if p == nil || p.upstream {
		es.dirty = true
		x.upstream(entry{kind: 'E', relay: true, upName: upPortalName(m.Portal), clientName: m.Portal},
			&pgproto3.Execute{Portal: upPortalName(m.Portal), MaxRows: m.MaxRows})
		return nil
	}
	if !p.answered {
		// The upstream answers what came before, then the proxy works.
		if err := x.drain(false); err != nil {
			return err
		}
		if es.discarding {
			return nil
		}
		msg, err := x.a.answerPortal(ctx, x, p)
		if err != nil {
			return err
		}
		if es.discarding {
			return nil
		}
		if msg != "" {
			x.s.Send(notice(msg))
		}
		if !p.answered {
			x.bindUpstream(p)
			x.upstream(entry{kind: 'E', relay: true}, &pgproto3.Execute{Portal: p.up, MaxRows: m.MaxRows})
			return nil
		}
	}
	n := len(p.rows)
	if m.MaxRows > 0 {
		n = min(n, int(m.MaxRows))
	}
	if p.done {
		n = 0
	}
	rows := p.rows[:n]
	p.rows = p.rows[n:]
	suspended := m.MaxRows > 0 && n == int(m.MaxRows) && !p.done
	x.local(func() []pgproto3.BackendMessage {
		out := make([]pgproto3.BackendMessage, 0, len(rows)+1)
		for _, r := range rows {
			out = append(out, &pgproto3.DataRow{Values: r})
		}
		if suspended {
			return append(out, &pgproto3.PortalSuspended{})
		}
		return append(out, &pgproto3.CommandComplete{CommandTag: []byte("SELECT " + strconv.Itoa(len(rows)))})
	})
	if !suspended {
		p.done = true
	}
	return nil
}

// bindUpstream binds p upstream, where it then executes; its BindComplete
// is the proxy's (the client had one), an error the client's.
func (x *extRequest) bindUpstream(p *ownedPortal) {
	x.es.dirty = true
	p.upstream = true
	x.upstream(entry{kind: 'B', relayErr: true, upName: p.stmt.up, clientName: p.stmt.name},
		&pgproto3.Bind{DestinationPortal: p.up, PreparedStatement: p.stmt.up,
			ParameterFormatCodes: p.paramFormats, Parameters: p.params, ResultFormatCodes: p.resultFormats})
}
