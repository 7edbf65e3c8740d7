package proxy

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/rewrite/syntax"
	"github.com/pgsketch/pgsketch/wire"
	"github.com/pgsketch/pgsketch/wire/wiretest"
)

// The extended-protocol machine, as conversations: the messages the client
// sends (those the relay hands the Handler, each wanted or not), the
// messages the upstream must receive and its replies, and the exact
// messages the client gets. The rollup answers come from fakeAnswers: what
// is under test is the bookkeeping around them.

// fakeAnswers answers a portal whose statement's SQL it holds with those
// rows, and declines the others (they execute upstream).
type fakeAnswers struct {
	rows map[string][][][]byte
	// dirty records, per answer, whether the upstream held unsynced work.
	dirty []bool
}

const fakeNotice = "answered from rollup r"

func (f *fakeAnswers) answerPortal(_ context.Context, x *extRequest, p *ownedPortal) (string, error) {
	f.dirty = append(f.dirty, x.es.dirty)
	rows, ok := f.rows[p.stmt.sql]
	if !ok {
		return "", nil
	}
	p.answered = true
	p.rows = append([][][]byte(nil), rows...)
	return fakeNotice, nil
}

// msgSpec is one client message of a request and whether the Handler
// wants it.
type msgSpec struct {
	m      pgproto3.FrontendMessage
	wanted bool
}

func want(m pgproto3.FrontendMessage) msgSpec { return msgSpec{m, true} }
func pass(m pgproto3.FrontendMessage) msgSpec { return msgSpec{m, false} }

func request(specs ...msgSpec) *wire.Request {
	r := &wire.Request{}
	for _, s := range specs {
		r.Messages = append(r.Messages, s.m)
		r.Wanted = append(r.Wanted, s.wanted)
	}
	return r
}

const (
	answerable = "SELECT count(DISTINCT user_id) FROM events"
	other      = "SELECT count(DISTINCT user_id) FROM other"
)

var (
	countField = pgproto3.FieldDescription{Name: []byte("count"), DataTypeOID: 20, DataTypeSize: 8, TypeModifier: -1}
	countRow   = &pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{countField}}
	noParams   = &pgproto3.ParameterDescription{ParameterOIDs: []uint32{}}
	fakes      = map[string][][][]byte{answerable: {{[]byte("42")}, {[]byte("43")}}}
	// answered is what the client gets for an Execute of answerable.
	answered = msgs(notice(fakeNotice), &pgproto3.DataRow{Values: [][]byte{[]byte("42")}},
		&pgproto3.DataRow{Values: [][]byte{[]byte("43")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 2")})
)

func msgs(m ...pgproto3.BackendMessage) []pgproto3.BackendMessage { return m }

func serveAll(t *testing.T, c *wiretest.Conn, a portalAnswerer, reqs ...*wire.Request) {
	t.Helper()
	for _, r := range reqs {
		if err := serveExtended(context.Background(), r, c.Session, a); err != nil {
			t.Fatalf("serve: %v", err)
		}
	}
}

// prepared is the upstream's part of preparing answerable under the
// proxy's name for the client's statement name.
func prepared(name string) []wiretest.Step {
	return []wiretest.Step{
		wiretest.Expect(&pgproto3.Parse{Name: upStmtName(name), Query: answerable}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'S', Name: upStmtName(name)}),
	}
}

// described is prepared, then the Flush the proxy sends to read the
// description before it answers a Bind.
func described(name string) []wiretest.Step {
	return append(prepared(name), wiretest.Expect(&pgproto3.Flush{}),
		wiretest.Reply(&pgproto3.ParseComplete{}, noParams, countRow))
}

func steps(parts ...any) []wiretest.Step {
	var out []wiretest.Step
	for _, p := range parts {
		switch p := p.(type) {
		case wiretest.Step:
			out = append(out, p)
		case []wiretest.Step:
			out = append(out, p...)
		}
	}
	return out
}

// Parse, Bind, Describe and Execute of a statement answered from a rollup:
// PostgreSQL prepares and describes it (under the proxy's name), the proxy
// answers the rest.
func TestExtendedAnswered(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	c := wiretest.New(t, steps(
		described(""),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	serveAll(t, c, a, request(
		want(&pgproto3.Parse{Query: answerable}), want(&pgproto3.Bind{}), want(&pgproto3.Describe{ObjectType: 'P'}),
		want(&pgproto3.Execute{}), pass(&pgproto3.Sync{})))
	c.WantClient(slices.Concat(msgs(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, countRow), answered, msgs(&pgproto3.ReadyForQuery{TxStatus: 'I'}))...)
}

// Statements PostgreSQL runs and a statement the proxy answers, mixed in
// one pipeline: every reply in the order of the messages.
func TestExtendedMixedOrder(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	c := wiretest.New(t, steps(
		described("s"),
		wiretest.Expect(&pgproto3.Parse{Query: "SELECT 1"}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.DataRow{Values: [][]byte{[]byte("1")}},
			&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	serveAll(t, c, a, request(
		want(&pgproto3.Parse{Name: "s", Query: answerable}), want(&pgproto3.Bind{PreparedStatement: "s"}),
		want(&pgproto3.Execute{}),
		pass(&pgproto3.Parse{Query: "SELECT 1"}), pass(&pgproto3.Bind{}), pass(&pgproto3.Execute{}),
		pass(&pgproto3.Sync{})))
	c.WantClient(slices.Concat(msgs(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}), answered, msgs(
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.DataRow{Values: [][]byte{[]byte("1")}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}))...)
}

// A request served after messages the relay forwarded ahead of it in the
// same group (a passed Parse, then an answerable one): the answerer is
// told the upstream holds unsynced work, so that it does not Sync it.
func TestExtendedAfterForwarded(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	c := wiretest.New(t, steps(
		described(""),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	r := request(want(&pgproto3.Parse{Query: answerable}), want(&pgproto3.Bind{}), want(&pgproto3.Execute{}), pass(&pgproto3.Sync{}))
	r.Unsynced = true
	serveAll(t, c, a, r)
	c.WantClient(slices.Concat(msgs(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}), answered, msgs(&pgproto3.ReadyForQuery{TxStatus: 'I'}))...)
	if len(a.dirty) != 1 || !a.dirty[0] {
		t.Errorf("answerer saw dirty %v, want [true]", a.dirty)
	}
}

// A statement the answerer declines at Execute (answerability can depend
// on the parameters) is bound and executed upstream, from the statement
// prepared at Parse; its BindComplete was the proxy's already.
func TestExtendedFallbackAtExecute(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	params := [][]byte{[]byte("7")}
	c := wiretest.New(t, steps(
		wiretest.Expect(&pgproto3.Parse{Name: upStmtName(""), Query: other}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'S', Name: upStmtName("")}),
		wiretest.Expect(&pgproto3.Flush{}),
		wiretest.Reply(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{ParameterOIDs: []uint32{23}}, countRow),
		wiretest.Expect(&pgproto3.Bind{DestinationPortal: upPortalName(""), PreparedStatement: upStmtName(""), Parameters: params,
			ParameterFormatCodes: []int16{}, ResultFormatCodes: []int16{}}),
		wiretest.Expect(&pgproto3.Execute{Portal: upPortalName("")}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.BindComplete{}, &pgproto3.DataRow{Values: [][]byte{[]byte("9")}},
			&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	serveAll(t, c, a, request(
		want(&pgproto3.Parse{Query: other}), want(&pgproto3.Bind{Parameters: params}), want(&pgproto3.Execute{}),
		pass(&pgproto3.Sync{})))
	c.WantClient(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.DataRow{Values: [][]byte{[]byte("9")}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
}

// A Bind the proxy cannot check (a parameter count that does not match) is
// bound upstream, and so is the Execute of its portal, so that PostgreSQL
// raises its own error and skips the rest up to Sync; the error names the
// client's statement.
func TestExtendedBindErrorUpstream(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	c := wiretest.New(t, steps(
		described("s"),
		wiretest.Expect(&pgproto3.Bind{DestinationPortal: upPortalName(""), PreparedStatement: upStmtName("s"),
			Parameters: [][]byte{[]byte("1")}}),
		wiretest.Expect(&pgproto3.Execute{Portal: upPortalName("")}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "08P01",
			Message: `bind message supplies 1 parameters, but prepared statement "` + upStmtName("s") + `" requires 0`},
			&pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	serveAll(t, c, a, request(
		want(&pgproto3.Parse{Name: "s", Query: answerable}), want(&pgproto3.Bind{PreparedStatement: "s", Parameters: [][]byte{[]byte("1")}}),
		want(&pgproto3.Execute{}), pass(&pgproto3.Sync{})))
	c.WantClient(&pgproto3.ParseComplete{},
		&pgproto3.ErrorResponse{Severity: "ERROR", Code: "08P01", Message: `bind message supplies 1 parameters, but prepared statement "s" requires 0`},
		&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if len(a.dirty) != 0 {
		t.Errorf("the answerer was asked %d times after the error", len(a.dirty))
	}
}

// An upstream error in the middle of a pipeline: the replies before it
// reach the client, nothing after it does (not even what the proxy would
// answer itself) up to Sync, and the next request is served afresh.
func TestExtendedErrorMidBatch(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	divZero := &pgproto3.ErrorResponse{Severity: "ERROR", Code: "22012", Message: "division by zero"}
	c := wiretest.New(t, steps(
		described("s"),
		wiretest.Expect(&pgproto3.Parse{Query: "SELECT 1/0"}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Flush{}),
		wiretest.Reply(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, divZero),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'I'}),
		// The next request.
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	serveAll(t, c, a, request(
		want(&pgproto3.Parse{Name: "s", Query: answerable}), want(&pgproto3.Bind{PreparedStatement: "s"}), want(&pgproto3.Execute{}),
		pass(&pgproto3.Parse{Query: "SELECT 1/0"}), pass(&pgproto3.Bind{}), pass(&pgproto3.Execute{}),
		want(&pgproto3.Bind{PreparedStatement: "s"}), want(&pgproto3.Execute{}), pass(&pgproto3.Sync{})))
	c.WantClient(slices.Concat(msgs(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}), answered, msgs(
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, divZero, &pgproto3.ReadyForQuery{TxStatus: 'I'}))...)
	serveAll(t, c, a, request(want(&pgproto3.Bind{PreparedStatement: "s"}), want(&pgproto3.Execute{}), pass(&pgproto3.Sync{})))
	c.WantClient(slices.Concat(msgs(&pgproto3.BindComplete{}), answered, msgs(&pgproto3.ReadyForQuery{TxStatus: 'I'}))...)
}

// An error the proxy raises itself (a Parse of a name it already holds)
// also fails the upstream (a Describe of a portal that does not exist,
// its error swallowed), so that both skip to Sync; after Sync the session
// goes on.
func TestExtendedSyncAfterProxyError(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	poison := &pgproto3.ErrorResponse{Severity: "ERROR", Code: "34000", Message: `portal "` + poisonPortal + `" does not exist`}
	c := wiretest.New(t, steps(
		prepared("s"),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ParseComplete{}, noParams, countRow, &pgproto3.ReadyForQuery{TxStatus: 'I'}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'P', Name: poisonPortal}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(poison, &pgproto3.ReadyForQuery{TxStatus: 'I'}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	serveAll(t, c, a, request(want(&pgproto3.Parse{Name: "s", Query: answerable}), pass(&pgproto3.Sync{})))
	c.WantClient(&pgproto3.ParseComplete{}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	serveAll(t, c, a, request(want(&pgproto3.Parse{Name: "s", Query: answerable}), want(&pgproto3.Bind{PreparedStatement: "s"}),
		want(&pgproto3.Execute{}), pass(&pgproto3.Sync{})))
	c.WantClient(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "42P05",
		Message: `prepared statement "s" already exists`}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	serveAll(t, c, a, request(want(&pgproto3.Bind{PreparedStatement: "s"}), want(&pgproto3.Execute{}), pass(&pgproto3.Sync{})))
	c.WantClient(slices.Concat(msgs(&pgproto3.BindComplete{}), answered, msgs(&pgproto3.ReadyForQuery{TxStatus: 'I'}))...)
}

// A Parse of the unnamed statement replaces the one the proxy held: a
// passed Parse closes the proxy's upstream copy first (its reply the
// proxy's), and the portal then runs upstream.
func TestExtendedUnnamedReplaced(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	c := wiretest.New(t, steps(
		prepared(""),
		wiretest.Expect(&pgproto3.Close{ObjectType: 'S', Name: upStmtName("")}),
		wiretest.Expect(&pgproto3.Parse{Query: "SELECT 1"}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ParseComplete{}, noParams, countRow, &pgproto3.CloseComplete{}, &pgproto3.ParseComplete{},
			&pgproto3.BindComplete{}, &pgproto3.DataRow{Values: [][]byte{[]byte("1")}},
			&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	serveAll(t, c, a, request(want(&pgproto3.Parse{Query: answerable}),
		pass(&pgproto3.Parse{Query: "SELECT 1"}), pass(&pgproto3.Bind{}), pass(&pgproto3.Execute{}), pass(&pgproto3.Sync{})))
	c.WantClient(&pgproto3.ParseComplete{}, &pgproto3.ParseComplete{}, &pgproto3.BindComplete{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("1")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
		&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if len(a.dirty) != 0 {
		t.Errorf("the answerer was asked %d times", len(a.dirty))
	}
}

// Execute with a row limit suspends the portal the proxy answered; the
// next Execute goes on from there, and one past the end completes it.
func TestExtendedPortalSuspended(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	c := wiretest.New(t, steps(
		described(""),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'T'}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'T'}),
	)...)
	serveAll(t, c, a, request(want(&pgproto3.Parse{Query: answerable}), want(&pgproto3.Bind{DestinationPortal: "c"}),
		want(&pgproto3.Execute{Portal: "c", MaxRows: 1}), pass(&pgproto3.Sync{})))
	c.WantClient(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, notice(fakeNotice),
		&pgproto3.DataRow{Values: [][]byte{[]byte("42")}}, &pgproto3.PortalSuspended{}, &pgproto3.ReadyForQuery{TxStatus: 'T'})
	serveAll(t, c, a, request(want(&pgproto3.Execute{Portal: "c", MaxRows: 1}), want(&pgproto3.Execute{Portal: "c", MaxRows: 1}),
		pass(&pgproto3.Sync{})))
	c.WantClient(&pgproto3.DataRow{Values: [][]byte{[]byte("43")}}, &pgproto3.PortalSuspended{},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")}, &pgproto3.ReadyForQuery{TxStatus: 'T'})
}

// Describe of a statement the proxy holds is answered from the
// description PostgreSQL gave at Parse; Close of it goes upstream under
// the proxy's name, and its reply is the client's.
func TestExtendedDescribeAndClose(t *testing.T) {
	a := &fakeAnswers{rows: fakes}
	c := wiretest.New(t, steps(
		prepared("s"),
		wiretest.Expect(&pgproto3.Close{ObjectType: 'S', Name: upStmtName("s")}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ParseComplete{}, noParams, countRow, &pgproto3.CloseComplete{}, &pgproto3.ReadyForQuery{TxStatus: 'I'}),
	)...)
	serveAll(t, c, a, request(want(&pgproto3.Parse{Name: "s", Query: answerable}), want(&pgproto3.Describe{ObjectType: 'S', Name: "s"}),
		want(&pgproto3.Close{ObjectType: 'S', Name: "s"}), pass(&pgproto3.Sync{})))
	c.WantClient(&pgproto3.ParseComplete{}, noParams, countRow, &pgproto3.CloseComplete{}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
}

// A simple Query after an extended-protocol request served without Sync:
// the upstream may be inside a block the request began (BEGIN, unsynced),
// so the proxy's first statements go without the JIT setting (which would
// last until the block ends) and unprepared. Here the role cannot read the
// catalog, and the Query then goes upstream as it is.
func TestSimpleQueryAfterUnsyncedRequest(t *testing.T) {
	row := make([][]byte, settingsColumns)
	for i := range row {
		row[i] = []byte("x")
	}
	row[9] = []byte("f")   // the catalog is not readable
	row[13] = []byte("on") // standard_conforming_strings
	row[14] = []byte("Default")
	row[15] = []byte("f") // no temporary schema
	c := wiretest.New(t,
		// The last request synced: idle.
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'I'}),
		wiretest.Expect(&pgproto3.Parse{Query: settingsSQL}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'P'}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{},
			&pgproto3.DataRow{Values: row}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
			&pgproto3.ReadyForQuery{TxStatus: 'T'}),
		wiretest.Expect(&pgproto3.Query{String: answerable}),
		wiretest.Reply(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")}, &pgproto3.ReadyForQuery{TxStatus: 'T'}),
	)
	c.Session.Frontend.Send(&pgproto3.Sync{})
	if err := c.Session.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Session.Frontend.Receive(); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*pgproto3.ReadyForQuery); !ok {
		t.Fatalf("got %T", m)
	}
	// Then an extended request served here ended with Flush (BEGIN
	// among its statements, say).
	es := extState(c.Session)
	es.dirty = true
	if err := New(nil).serveQuery(context.Background(), &pgproto3.Query{String: answerable}, syntax.Command{}, c.Session); err != nil {
		t.Fatal(err)
	}
	c.WantClient(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")}, &pgproto3.ReadyForQuery{TxStatus: 'T'})
}
