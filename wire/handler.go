package wire

import (
	"context"
	"io"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Handler decides which client requests to answer itself. It is consulted on
// the hot path and must be safe for concurrent use by many sessions.
type Handler interface {
	// Intercept reports whether the handler wants a request containing this
	// SQL text (of a Query, or of a Parse). sql is only valid during the call.
	// It must be fast and must not block.
	Intercept(sql []byte) bool
	// Serve answers an intercepted request. It runs with exclusive use of the
	// session's upstream connection and owes the client the complete reply,
	// ending with ReadyForQuery when the request ends with Sync or is a
	// Query. Asynchronous messages the upstream sends meanwhile
	// (NotificationResponse, NoticeResponse, ParameterStatus) arrive among
	// its replies and must be passed on to the client. An error that is the
	// client's (a bad query) belongs in an ErrorResponse to the client and a
	// nil return; a non-nil error ends the session.
	Serve(ctx context.Context, req *Request, s *Session) error
}

// Request is one client request handed to a Handler: a single Query, or the
// extended-protocol messages of one group from the first one the Handler
// wants up to and including the Sync or Flush that ends the group (the
// messages before it went upstream as they came, and their replies reached
// the client before Serve is called). Its messages are copies the Handler
// may keep.
type Request struct {
	Messages []pgproto3.FrontendMessage
	// Wanted says, per message, whether the Handler wants it: a Query or a
	// Parse it intercepts, or a Bind, Describe, Execute or Close naming a
	// statement or portal whose Parse or Bind it took. The others belong to
	// the upstream's statements and portals.
	Wanted []bool
	// Unsynced says extended-protocol messages went upstream ahead of the
	// request since the last Sync: the upstream may hold an implicit
	// transaction with the client's work, which a Sync would commit.
	Unsynced bool
}

// Passthrough is the Handler that wants nothing: every request goes upstream.
type Passthrough struct{}

// Intercept implements Handler.
func (Passthrough) Intercept([]byte) bool { return false }

// Serve implements Handler; it is never called.
func (Passthrough) Serve(context.Context, *Request, *Session) error { return nil }

// Session is what a Handler gets to answer a request: the client's own
// upstream connection, exclusively, and a way to write to the client.
type Session struct {
	ss *session
	// client, when set, receives what Flush writes (NewSession).
	client io.Writer
	// Frontend talks to the upstream: Send and Flush write to it, Receive
	// reads its replies. The Handler must read every reply it caused, up to
	// and including the last ReadyForQuery, before returning.
	Frontend *pgproto3.Frontend
	out      []byte
}

// ReadyForQuery returns how many ReadyForQuery messages the upstream has
// sent in this session, and the transaction status of the last one ('I'
// before any). A Handler that left state between requests (a group ending
// with Flush) learns from a changed count that requests it did not see
// reached a Sync meanwhile.
func (s *Session) ReadyForQuery() (n uint64, status byte) {
	v := s.ss.relay.ready.Load()
	return v >> 8, byte(v)
}

// State returns what the Handler stored for this session with SetState.
func (s *Session) State() any { return s.ss.handlerState }

// SetState stores per-session Handler state; it lives as long as the session.
func (s *Session) SetState(v any) { s.ss.handlerState = v }

// Params returns the client's startup parameters (user, database, ...).
func (s *Session) Params() map[string]string { return s.ss.params }

// Send queues a message for the client; Flush writes the queue.
func (s *Session) Send(msg pgproto3.BackendMessage) error {
	var err error
	s.out, err = msg.Encode(s.out)
	return err
}

// Flush writes the messages queued by Send to the client.
func (s *Session) Flush() error {
	if len(s.out) == 0 {
		return nil
	}
	var err error
	if s.client != nil {
		_, err = s.client.Write(s.out)
	} else {
		err = s.ss.reply(s.out)
	}
	s.out = s.out[:0]
	return err
}

// NewSession returns a Session outside any relay, over a connection to the
// upstream and a writer to the client: for driving a Handler from tests and
// tools. Its ReadyForQuery count follows the ReadyForQuery messages the
// Handler reads from up.
func NewSession(up io.ReadWriter, client io.Writer, params map[string]string) *Session {
	ss := &session{params: params}
	return &Session{ss: ss, client: client, Frontend: pgproto3.NewFrontend(&readyCounter{r: up, rs: &ss.relay}, up)}
}

// readyCounter counts the ReadyForQuery messages read through it.
type readyCounter struct {
	r  io.Reader
	rs *relayState
	u  upScan
}

func (rc *readyCounter) Read(b []byte) (int, error) {
	n, err := rc.r.Read(b)
	for pos := 0; pos < n; {
		var ended bool
		var perr error
		if pos, ended, perr = rc.u.next(b[:n], pos); perr != nil {
			return n, err // the Frontend reports the bad message
		}
		if ended && rc.u.typ == 'Z' {
			rc.rs.readyFor(b[pos-1])
		}
	}
	return n, err
}

// relayOwed relays to the client the replies the upstream owes for the last
// owing extended-protocol messages forwarded unsynced, less those already
// relayed, with a Flush to have them sent. It runs while the session's
// upstream is handed over. relayed is false when the upstream skips what
// comes next up to Sync (an error among those replies or before them, a
// COPY FROM STDIN): the request must then go upstream as it is.
func (s *Session) relayOwed(owing int) (relayed bool, err error) {
	rs := &s.ss.relay
	rs.mu.Lock()
	copyIn := rs.copyIn
	rs.mu.Unlock()
	n := owing - int(rs.replies.Load())
	if rs.failed.Load() || copyIn || n < 0 {
		return false, nil
	}
	if n > 0 {
		s.Frontend.Send(&pgproto3.Flush{})
		if err := s.Frontend.Flush(); err != nil {
			return false, err
		}
	}
	for n > 0 {
		msg, err := s.Frontend.Receive()
		if err != nil {
			return false, err
		}
		if err := s.Send(msg); err != nil {
			return false, err
		}
		switch msg.(type) {
		case *pgproto3.CopyInResponse, *pgproto3.CopyBothResponse:
			rs.noted('G')
			return false, s.Flush()
		case *pgproto3.ErrorResponse:
			return false, s.Flush()
		case *pgproto3.ParseComplete, *pgproto3.BindComplete, *pgproto3.CloseComplete, *pgproto3.NoData,
			*pgproto3.RowDescription, *pgproto3.CommandComplete, *pgproto3.EmptyQueryResponse, *pgproto3.PortalSuspended:
			n--
		}
	}
	return true, s.Flush()
}
