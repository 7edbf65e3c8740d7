package wire

import (
	"context"

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
