package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// The client's messages in the steady state, as both relay loops (the
// event loop and the relay goroutines) frame and record them.

// frameError is a client message length the relay refuses; code is the
// SQLSTATE the client is told.
type frameError struct {
	code, msg string
}

func (e *frameError) Error() string { return e.msg }

// clientFrame reads the header of the client message at the start of b: its
// type and its whole length (type byte and length word included). ok is
// false while b holds fewer than 5 bytes; err is a length the protocol or
// maxSize refuses.
func clientFrame(b []byte, maxSize int) (typ byte, total int, ok bool, err *frameError) {
	if len(b) < 5 {
		return 0, 0, false, nil
	}
	typ = b[0]
	l := int(int32(binary.BigEndian.Uint32(b[1:])))
	switch {
	case l < 4:
		return typ, 0, true, &frameError{sqlstateProtocolViolation, fmt.Sprintf("invalid message length %d", l)}
	case l-4 > maxSize:
		return typ, 0, true, &frameError{sqlstateProgramLimit,
			fmt.Sprintf("message of %d bytes exceeds pgsketch-proxy's limit of %d bytes", l-4, maxSize)}
	}
	return typ, 1 + l, true, nil
}

// isInspected reports whether the relay reads a whole message of this type
// before forwarding it.
func isInspected(typ byte) bool {
	switch typ {
	case 'Q', 'P', 'B', 'D', 'E', 'C', 'H', 'S':
		return true
	}
	return false
}

// forwardLog records the client messages forwarded upstream: the requests a
// ReadyForQuery will answer (relayState.pending), and how many
// extended-protocol messages owing a reply went since the last Sync (a
// request served next must relay their replies first: Session.relayOwed).
type forwardLog struct {
	rs    *relayState
	owing int
}

// sent records a whole message of type typ as forwarded.
func (f *forwardLog) sent(typ byte) {
	switch typ {
	case 'Q', 'F', 'S': // their ReadyForQuery also settles what came before
		f.rs.forwarded(typ)
		f.owing = 0
	case 'P', 'B', 'D', 'E', 'C': // a Flush alone owes no reply
		f.owing++
	}
}

// sentAll records whole messages (a group, a Query) as forwarded.
func (f *forwardLog) sentAll(msgs []byte) {
	for len(msgs) >= 5 {
		f.sent(msgs[0])
		msgs = msgs[1+int(binary.BigEndian.Uint32(msgs[1:])):]
	}
}

// cstring splits b at its first NUL; without one, all of b is the string.
func cstring(b []byte) (s, rest []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i+1:]
}

// requestMessages makes an empty message of each type a request may hold,
// by its type byte; nil for the others.
var requestMessages = [256]func() pgproto3.FrontendMessage{
	'Q': newMessage[pgproto3.Query], 'P': newMessage[pgproto3.Parse], 'B': newMessage[pgproto3.Bind],
	'D': newMessage[pgproto3.Describe], 'E': newMessage[pgproto3.Execute], 'C': newMessage[pgproto3.Close],
	'H': newMessage[pgproto3.Flush], 'S': newMessage[pgproto3.Sync],
}

// newMessage makes an empty message of type T.
func newMessage[T any, P interface {
	*T
	pgproto3.FrontendMessage
}]() pgproto3.FrontendMessage {
	return P(new(T))
}

// decodeRequest decodes a Query or an extended-protocol group. msgs is a
// copy owned by the request: decoded messages may point into it.
func decodeRequest(msgs []byte) (*Request, error) {
	req := &Request{}
	for len(msgs) > 0 {
		if len(msgs) < 5 {
			return nil, fmt.Errorf("%w: truncated message", ErrProtocol)
		}
		typ := msgs[0]
		l := int(binary.BigEndian.Uint32(msgs[1:]))
		body := msgs[5 : 1+l]
		msgs = msgs[1+l:]
		newMsg := requestMessages[typ]
		if newMsg == nil {
			return nil, fmt.Errorf("%w: unexpected message %q in a request", ErrProtocol, typ)
		}
		m := newMsg()
		if err := m.Decode(body); err != nil {
			return nil, fmt.Errorf("%w: message %q: %v", ErrProtocol, typ, err)
		}
		req.Messages = append(req.Messages, m)
	}
	return req, nil
}
