package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"
)

const readBufSize = 32 << 10

// relayState is shared by a session's two loops: the client loop (the
// session goroutine) and the upstream loop.
type relayState struct {
	mu sync.Mutex
	// forwarded counts the requests (Query, Sync, FunctionCall) the client loop
	// has written upstream; answered counts the ReadyForQuery messages the
	// upstream loop has relayed to the client. Equal means caught up.
	forwarded uint64
	answered  uint64
	// idle: the upstream loop is between messages, waiting for bytes.
	idle bool
	// handover: a Handler owns the upstream; its bytes go to pipeW.
	handover bool
	// want: the client loop waits (on granted) for the upstream to catch up
	// so it can hand it over.
	want    atomic.Bool
	granted chan struct{}
	pipeR   *io.PipeReader
	pipeW   *io.PipeWriter
	closed  bool
	doneCh  chan struct{}
}

// errHandoverDone closes a handover pipe when the Handler returns.
var errHandoverDone = errors.New("handover done")

// acquire waits until the upstream has answered everything forwarded, then
// switches the upstream loop to hand its bytes to a pipe, whose reader it
// returns.
func (rs *relayState) acquire(ctx context.Context) (*io.PipeReader, error) {
	rs.mu.Lock()
	if rs.closed {
		rs.mu.Unlock()
		return nil, errSessionClosed
	}
	rs.pipeR, rs.pipeW = io.Pipe()
	pr := rs.pipeR
	if rs.answered >= rs.forwarded && rs.idle {
		rs.handover = true
		rs.mu.Unlock()
		return pr, nil
	}
	rs.granted = make(chan struct{})
	g := rs.granted
	rs.want.Store(true)
	rs.mu.Unlock()
	select {
	case <-g:
		return pr, nil
	case <-rs.done():
		return nil, errSessionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// grantLocked hands the upstream over if a handover is wanted and the
// upstream has caught up. The upstream loop calls it at message boundaries.
func (rs *relayState) grantLocked() bool {
	if !rs.want.Load() || rs.answered < rs.forwarded {
		return false
	}
	rs.want.Store(false)
	rs.handover = true
	close(rs.granted)
	return true
}

// release gives the upstream back to the relay.
func (rs *relayState) release() {
	rs.mu.Lock()
	rs.handover = false
	pr := rs.pipeR
	rs.mu.Unlock()
	if pr != nil {
		pr.CloseWithError(errHandoverDone)
	}
}

// done returns a channel closed when the session closes.
func (rs *relayState) done() chan struct{} {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.doneCh == nil {
		rs.doneCh = make(chan struct{})
		if rs.closed {
			close(rs.doneCh)
		}
	}
	return rs.doneCh
}

func (rs *relayState) closeHandover() {
	rs.mu.Lock()
	if !rs.closed && rs.doneCh != nil {
		close(rs.doneCh)
	}
	rs.closed = true
	pr, pw := rs.pipeR, rs.pipeW
	rs.mu.Unlock()
	if pr != nil {
		pr.CloseWithError(errSessionClosed)
		pw.CloseWithError(errSessionClosed)
	}
}

var errSessionClosed = errors.New("session closed")

// relayLoop runs the steady state until either side leaves.
func (ss *session) relayLoop() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	upDone := make(chan error, 1)
	go func() {
		err := ss.upstreamLoop()
		ss.close() // without its upstream the session cannot go on
		upDone <- err
	}()
	err := ss.clientLoop(ctx)
	cancel()
	ss.close()
	uerr := <-upDone
	return errors.Join(err, uerr)
}

// upstreamLoop copies the upstream's bytes to the client (or, during a
// handover, to the Handler), walking message headers to count ReadyForQuery.
func (ss *session) upstreamLoop() error {
	rs := &ss.relay
	buf := make([]byte, readBufSize)
	var (
		hdr      [5]byte
		hdrN     int  // header bytes seen of the current message
		need     int  // body bytes still to come of the current message
		typ      byte // type of the current (or last) message
		lastType byte // type of the last complete message
	)
	for {
		rs.mu.Lock()
		rs.idle = hdrN == 0 && need == 0
		if rs.idle {
			rs.grantLocked()
		}
		rs.mu.Unlock()
		n, err := ss.up.Read(buf)
		rs.mu.Lock()
		rs.idle = false
		handover := rs.handover
		rs.mu.Unlock()

		chunk := buf[:n]
		start := 0 // first byte of chunk not yet delivered
		deliver := func(end int) error {
			if end <= start {
				return nil
			}
			part := chunk[start:end]
			start = end
			if handover {
				k, werr := rs.pipeW.Write(part)
				if werr == nil {
					return nil
				}
				// The Handler is done: what it did not read goes to the client.
				rs.mu.Lock()
				handover = rs.handover
				closed := rs.closed
				rs.mu.Unlock()
				if closed || handover {
					return werr
				}
				part = part[k:]
			}
			return ss.writeClient(part)
		}
		for pos := 0; pos < n; {
			if need > 0 {
				k := min(need, n-pos)
				pos += k
				need -= k
			} else {
				k := min(5-hdrN, n-pos)
				copy(hdr[hdrN:], chunk[pos:pos+k])
				hdrN += k
				pos += k
				if hdrN < 5 {
					continue
				}
				hdrN = 0
				typ = hdr[0]
				l := int(int32(binary.BigEndian.Uint32(hdr[1:])))
				if l < 4 {
					ss.abort(sqlstateProtocolViolation, fmt.Sprintf("pgsketch-proxy: invalid message length %d from the upstream server", l))
					return fmt.Errorf("%w: upstream message length %d", ErrProtocol, l)
				}
				need = l - 4
			}
			if need > 0 || hdrN > 0 {
				continue
			}
			// A message ended at pos.
			lastType = typ
			if handover {
				if err := deliver(pos); err != nil {
					return err
				}
				continue
			}
			if typ == 'Z' {
				rs.mu.Lock()
				rs.answered++
				granted := rs.grantLocked()
				rs.mu.Unlock()
				if granted {
					if err := deliver(pos); err != nil {
						return err
					}
					handover = true
				}
			}
		}
		if err := deliver(n); err != nil {
			return err
		}
		if err != nil {
			rs.mu.Lock()
			closed := rs.closed
			rs.mu.Unlock()
			if closed || ss.terminating.Load() {
				ss.close()
				return nil
			}
			if lastType == 'E' && errors.Is(err, io.EOF) {
				// The upstream said why (e.g. FATAL terminating connection).
				ss.close()
				return nil
			}
			ss.abort(sqlstateConnectionFailure,
				fmt.Sprintf("pgsketch-proxy lost the upstream server %s: %v", ss.srv.upstreamName, err))
			return fmt.Errorf("upstream: %w", err)
		}
	}
}

// statementTracker remembers the prepared statements and portals whose
// Parse a Handler intercepted, so that Bind, Describe, Execute and Close on
// them go to the Handler too.
type statementTracker struct {
	stmts   map[string]bool
	portals map[string]bool
}

// clientLoop reads the client's messages and forwards them upstream, handing
// wanted requests to the Handler.
func (ss *session) clientLoop(ctx context.Context) error {
	cfg := &ss.srv.cfg
	rs := &ss.relay
	h := cfg.Handler
	tr := statementTracker{stmts: map[string]bool{}, portals: map[string]bool{}}
	buf := make([]byte, readBufSize)
	var (
		r, w           int    // unread bytes are buf[r:w]
		stream         int    // bytes still to relay raw of a message too big to hold
		out            []byte // bytes for the upstream
		groupStart     = -1   // where the open extended-protocol group starts in out
		groupWanted    bool   // the open group holds a message the Handler wants
		groupCommitted bool   // the open group goes upstream whatever comes
	)
	inspectLimit := cfg.InspectSize + 5
	flush := func(all bool) error {
		end := len(out)
		if !all && groupStart >= 0 && !groupCommitted {
			end = groupStart
		}
		if end == 0 {
			return nil
		}
		if _, err := ss.up.Write(out[:end]); err != nil {
			return ss.upstreamLost(err)
		}
		rest := copy(out, out[end:])
		out = out[:rest]
		if groupStart >= 0 {
			groupStart = max(groupStart-end, 0)
		}
		return nil
	}
	commitGroup := func() {
		groupCommitted = true
		groupWanted = false
	}
	serve := func(msgs []byte) error {
		if err := flush(true); err != nil {
			return err
		}
		req, err := decodeRequest(msgs)
		if err != nil {
			ss.abort(sqlstateProtocolViolation, err.Error())
			return err
		}
		pr, err := rs.acquire(ctx)
		if err != nil {
			return err
		}
		sess := &Session{ss: ss, Frontend: pgproto3.NewFrontend(pr, ss.up)}
		err = h.Serve(ctx, req, sess)
		rs.release()
		if err != nil {
			ss.abort("XX000", "pgsketch-proxy: "+err.Error())
			return fmt.Errorf("handler: %w", err)
		}
		return nil
	}
	for {
		n, err := ss.client.Read(buf[w:])
		w += n
		for r < w {
			if stream > 0 {
				k := min(stream, w-r)
				out = append(out, buf[r:r+k]...)
				r += k
				stream -= k
				continue
			}
			if w-r < 5 {
				break
			}
			typ := buf[r]
			l := int(int32(binary.BigEndian.Uint32(buf[r+1:])))
			if l < 4 {
				ss.abort(sqlstateProtocolViolation, fmt.Sprintf("invalid message length %d", l))
				return fmt.Errorf("%w: client message length %d", ErrProtocol, l)
			}
			if l-4 > cfg.MaxMessageSize {
				ss.abort(sqlstateProgramLimit, fmt.Sprintf(
					"message of %d bytes exceeds pgsketch-proxy's limit of %d bytes", l-4, cfg.MaxMessageSize))
				return fmt.Errorf("%w: client message of %d bytes", ErrProtocol, l-4)
			}
			total := 1 + l
			if w-r < total {
				if isInspected(typ) && total <= inspectLimit {
					break // read the rest of it
				}
				// Too big to inspect: stream it; its group can no longer be held back.
				if groupStart >= 0 {
					commitGroup()
				}
				if typ == 'Q' || typ == 'F' {
					rs.mu.Lock()
					rs.forwarded++
					rs.mu.Unlock()
				}
				out = append(out, buf[r:w]...)
				stream = total - (w - r)
				r = w
				break
			}
			msg := buf[r : r+total]
			r += total
			body := msg[5:]
			switch typ {
			case 'Q':
				if groupStart >= 0 { // a Query inside a group: the group goes as it is
					commitGroup()
					groupStart = -1
				}
				if len(body) > 0 && h.Intercept(body[:len(body)-1]) {
					if err := serve(bytes.Clone(msg)); err != nil {
						return err
					}
					continue
				}
				out = append(out, msg...)
				rs.mu.Lock()
				rs.forwarded++
				rs.mu.Unlock()
			case 'P', 'B', 'D', 'E', 'C', 'H', 'S':
				if groupStart < 0 {
					groupStart, groupWanted, groupCommitted = len(out), false, false
				}
				if tr.wants(h, typ, body, cfg.InspectSize) && !groupCommitted {
					groupWanted = true
				}
				out = append(out, msg...)
				if typ != 'S' && typ != 'H' {
					if !groupCommitted && len(out)-groupStart > cfg.InspectSize {
						commitGroup()
					}
					continue
				}
				if groupWanted {
					group := bytes.Clone(out[groupStart:])
					out = out[:groupStart]
					groupStart = -1
					if err := serve(group); err != nil {
						return err
					}
					continue
				}
				groupStart = -1
				if typ == 'S' {
					rs.mu.Lock()
					rs.forwarded++
					rs.mu.Unlock()
				}
			case 'X':
				ss.terminating.Store(true)
				out = append(out, msg...)
				flush(true)
				return nil
			default:
				if typ == 'F' {
					rs.mu.Lock()
					rs.forwarded++
					rs.mu.Unlock()
				}
				out = append(out, msg...)
			}
		}
		if err := flush(false); err != nil {
			return err
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The client left without Terminate: tell the upstream politely.
				ss.terminating.Store(true)
				ss.up.Write([]byte{'X', 0, 0, 0, 4})
				return nil
			}
			return err
		}
		if r == w {
			r, w = 0, 0
			if len(buf) > readBufSize {
				buf = make([]byte, readBufSize) // drop a buffer grown for one big message
			}
			continue
		}
		// A partial message is left: move it to the front, grow for a big one.
		if r > 0 {
			w = copy(buf, buf[r:w])
			r = 0
		}
		if w == len(buf) {
			l := int(int32(binary.BigEndian.Uint32(buf[1:])))
			nb := make([]byte, max(1+l, 2*len(buf)))
			copy(nb, buf[:w])
			buf = nb
		}
	}
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

// wants updates the tracker with an extended-protocol message and reports
// whether the Handler wants it.
func (tr *statementTracker) wants(h Handler, typ byte, body []byte, inspectSize int) bool {
	switch typ {
	case 'P':
		name, rest := cstring(body)
		query, _ := cstring(rest)
		if len(query) <= inspectSize && h.Intercept(query) {
			tr.stmts[string(name)] = true
			return true
		}
		if len(tr.stmts) > 0 {
			delete(tr.stmts, string(name))
		}
	case 'B':
		if len(tr.stmts) == 0 && len(tr.portals) == 0 {
			return false
		}
		portal, rest := cstring(body)
		stmt, _ := cstring(rest)
		if tr.stmts[string(stmt)] {
			tr.portals[string(portal)] = true
			return true
		}
		delete(tr.portals, string(portal))
	case 'D', 'C':
		if len(body) < 1 || len(tr.stmts) == 0 && len(tr.portals) == 0 {
			return false
		}
		name, _ := cstring(body[1:])
		m := tr.portals
		if body[0] == 'S' {
			m = tr.stmts
		}
		wanted := m[string(name)]
		if typ == 'C' {
			delete(m, string(name))
		}
		return wanted
	case 'E':
		if len(tr.portals) == 0 {
			return false
		}
		portal, _ := cstring(body)
		return tr.portals[string(portal)]
	}
	return false
}

// cstring splits b at its first NUL; without one, all of b is the string.
func cstring(b []byte) (s, rest []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i+1:]
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
		var m pgproto3.FrontendMessage
		switch typ {
		case 'Q':
			m = &pgproto3.Query{}
		case 'P':
			m = &pgproto3.Parse{}
		case 'B':
			m = &pgproto3.Bind{}
		case 'D':
			m = &pgproto3.Describe{}
		case 'E':
			m = &pgproto3.Execute{}
		case 'C':
			m = &pgproto3.Close{}
		case 'H':
			m = &pgproto3.Flush{}
		case 'S':
			m = &pgproto3.Sync{}
		default:
			return nil, fmt.Errorf("%w: unexpected message %q in a request", ErrProtocol, typ)
		}
		if err := m.Decode(body); err != nil {
			return nil, fmt.Errorf("%w: message %q: %v", ErrProtocol, typ, err)
		}
		req.Messages = append(req.Messages, m)
	}
	return req, nil
}

// Session is what a Handler gets to answer a request: the client's own
// upstream connection, exclusively, and a way to write to the client.
type Session struct {
	ss *session
	// Frontend talks to the upstream: Send and Flush write to it, Receive
	// reads its replies. The Handler must read every reply it caused, up to
	// and including the last ReadyForQuery, before returning.
	Frontend *pgproto3.Frontend
	out      []byte
}

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
	err := s.ss.writeClient(s.out)
	s.out = s.out[:0]
	return err
}
