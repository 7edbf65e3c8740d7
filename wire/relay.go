package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

const readBufSize = 32 << 10

// relayState is shared by a session's two loops: the client loop (the
// session goroutine) and the upstream loop.
type relayState struct {
	mu sync.Mutex
	// pending holds the requests forwarded upstream whose ReadyForQuery has
	// not come back, oldest first: 'Q' (Query), 'F' (FunctionCall), 'S' (Sync).
	// Empty means the upstream has answered everything.
	pending []byte
	// copyIn: the upstream is reading COPY data; it ignores the Syncs (and
	// Flushes) it reads until CopyDone or CopyFail, so those are not pending.
	copyIn bool
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
	// ready counts the upstream's ReadyForQuery messages (high bits) and
	// holds the status byte of the last one (low 8 bits); written only by
	// the upstream loop.
	ready atomic.Uint64
	// replies counts the upstream's replies that complete an
	// extended-protocol message (see completes) relayed to the client
	// since the last ReadyForQuery or handover; failed says an
	// ErrorResponse came since the last ReadyForQuery, so the upstream
	// skips what it reads up to Sync. Written by the side reading the
	// upstream; the client side reads them once it holds the handover.
	replies atomic.Int64
	failed  atomic.Bool
	// leaving asks the upstream loop to stop where it is (a read deadline
	// in the past wakes it), so that the session can go back to the event
	// loop; it then leaves its walk of the upstream's messages in left.
	leaving atomic.Bool
	left    upScan
}

// completes reports whether an upstream message of type typ is the last
// reply to one extended-protocol message: ParseComplete, BindComplete,
// CloseComplete, NoData, RowDescription (a Describe of a statement sends
// ParameterDescription first), CommandComplete, EmptyQueryResponse or
// PortalSuspended.
func completes(typ byte) bool {
	switch typ {
	case '1', '2', '3', 'n', 'T', 'C', 'I', 's':
		return true
	}
	return false
}

// replied records an upstream message of type typ for the counts of
// replies; relayed says it goes to the client rather than to a Handler.
func (rs *relayState) replied(typ byte, relayed bool) {
	switch {
	case typ == 'Z':
		rs.replies.Store(0)
		rs.failed.Store(false)
	case typ == 'E':
		rs.failed.Store(true)
	case relayed && completes(typ):
		rs.replies.Add(1)
	}
}

// forwarded records a request written upstream that ReadyForQuery will answer.
func (rs *relayState) forwarded(kind byte) {
	rs.mu.Lock()
	if kind != 'S' || !rs.copyIn {
		rs.pending = append(rs.pending, kind)
	}
	rs.mu.Unlock()
}

// copyEnded records a CopyDone or CopyFail written upstream.
func (rs *relayState) copyEnded() {
	rs.mu.Lock()
	rs.copyIn = false
	rs.mu.Unlock()
}

// answeredLocked records a ReadyForQuery from the upstream, which is also
// never sent during a COPY.
func (rs *relayState) answeredLocked() {
	rs.copyIn = false
	if len(rs.pending) > 0 {
		rs.pending = rs.pending[:copy(rs.pending, rs.pending[1:])]
	}
}

// copyStartedLocked records CopyInResponse or CopyBothResponse. Every Sync
// still pending was written after the command that started the COPY (the
// ReadyForQuery of earlier ones comes before this message), so the upstream
// reads them during the COPY and ignores them.
func (rs *relayState) copyStartedLocked() {
	rs.copyIn = true
	k := 0
	for _, kind := range rs.pending {
		if kind != 'S' {
			rs.pending[k] = kind
			k++
		}
	}
	rs.pending = rs.pending[:k]
}

// errHandoverDone closes a handover pipe when the Handler returns.
var errHandoverDone = errors.New("handover done")

// errNotCaughtUp: the upstream did not answer everything forwarded within
// the wait; the request goes upstream unseen instead.
var errNotCaughtUp = errors.New("upstream still busy")

// acquire waits until the upstream has answered everything forwarded, then
// switches the upstream loop to hand its bytes to a pipe, whose reader it
// returns. It gives up after wait with errNotCaughtUp.
func (rs *relayState) acquire(ctx context.Context, wait time.Duration) (*io.PipeReader, error) {
	rs.mu.Lock()
	if rs.closed {
		rs.mu.Unlock()
		return nil, errSessionClosed
	}
	rs.pipeR, rs.pipeW = io.Pipe()
	pr := rs.pipeR
	if len(rs.pending) == 0 && rs.idle {
		rs.handover = true
		rs.mu.Unlock()
		return pr, nil
	}
	rs.granted = make(chan struct{})
	g := rs.granted
	rs.want.Store(true)
	rs.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var giveUp error
	select {
	case <-g:
		return pr, nil
	case <-rs.done():
		return nil, errSessionClosed
	case <-ctx.Done():
		giveUp = ctx.Err()
	case <-timer.C:
		giveUp = errNotCaughtUp
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.handover { // granted just now
		return pr, nil
	}
	rs.want.Store(false)
	pr.Close()
	return nil, giveUp
}

// canGrantLocked reports whether a wanted handover may happen now.
func (rs *relayState) canGrantLocked() bool {
	return rs.want.Load() && len(rs.pending) == 0
}

// grantLocked hands the upstream over and returns the pipe to write to.
func (rs *relayState) grantLocked() *io.PipeWriter {
	rs.want.Store(false)
	rs.handover = true
	close(rs.granted)
	return rs.pipeW
}

// release gives the upstream back to the relay.
func (rs *relayState) release() {
	rs.mu.Lock()
	rs.handover = false
	rs.replies.Store(0) // the Handler read every reply it was owed
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

// handoff is where the event loop (loop_linux.go) left a session it gives
// back to the relay's goroutines: the bytes it read but did not forward and
// the state of both directions. The zero handoff starts a session afresh.
type handoff struct {
	clientBuf        []byte // client bytes read, from a message start, not yet looked at
	toUp             []byte // client bytes recorded as forwarded, not yet written upstream
	toClient         []byte // upstream bytes walked, not yet written to the client
	toClientBoundary bool   // toClient ends at a message boundary
	up               upScan
	upErr            error // the upstream broke the protocol after toClient
	// owing counts the extended-protocol messages forwarded since the last
	// Sync (or Query, or request a Handler served) that owe a reply.
	owing int
}

// errLeft ends the upstream loop when the session goes back to the event
// loop; errBackToLoop ends the client loop for that.
var (
	errLeft       = errors.New("upstream loop left")
	errBackToLoop = errors.New("back to the event loop")
)

// relayLoop runs the steady state until either side leaves, starting from h.
// When the client loop finds the session quiet after a request the Handler
// served, both loops stop where they are and next is where the event loop
// takes over; otherwise next is nil and the session is over.
func (ss *session) relayLoop(h handoff) (next *handoff, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss.mu.Lock()
	ss.cancel = cancel
	closed := ss.closed
	ss.mu.Unlock()
	if closed {
		return nil, errSessionClosed
	}
	rs := &ss.relay
	upDone := make(chan error, 1)
	go func() {
		err := ss.upstreamLoop(h)
		if !errors.Is(err, errLeft) {
			ss.close() // without its upstream the session cannot go on
		}
		upDone <- err
	}()
	var owing int
	err = ss.clientLoop(ctx, h, &owing)
	cancel()
	if errors.Is(err, errBackToLoop) {
		rs.leaving.Store(true)
		ss.up.SetReadDeadline(time.Now())
		uerr := <-upDone
		rs.leaving.Store(false)
		ss.up.SetReadDeadline(time.Time{})
		if errors.Is(uerr, errLeft) {
			return &handoff{up: rs.left, owing: owing}, nil
		}
		ss.close()
		return nil, uerr
	}
	ss.close()
	uerr := <-upDone
	return nil, errors.Join(err, uerr)
}

// upScan follows the upstream's message boundaries across reads, looking
// only at the 5-byte headers.
type upScan struct {
	hdr      [5]byte
	hdrN     int  // header bytes seen of the current message
	need     int  // body bytes still to come of the current message
	typ      byte // type of the current (or last) message
	lastType byte // type of the last complete message
}

// next walks chunk from pos to the end of the current message or of chunk,
// whichever comes first, and returns where it stopped; ended reports that a
// message (of type u.typ) ended there.
func (u *upScan) next(chunk []byte, pos int) (end int, ended bool, err error) {
	for pos < len(chunk) {
		if u.need > 0 {
			k := min(u.need, len(chunk)-pos)
			pos += k
			u.need -= k
		} else {
			k := min(5-u.hdrN, len(chunk)-pos)
			copy(u.hdr[u.hdrN:], chunk[pos:pos+k])
			u.hdrN += k
			pos += k
			if u.hdrN < 5 {
				continue
			}
			u.hdrN = 0
			u.typ = u.hdr[0]
			l := int(int32(binary.BigEndian.Uint32(u.hdr[1:])))
			if l < 4 {
				return pos, false, fmt.Errorf("%w: invalid message length %d from the upstream server", ErrProtocol, l)
			}
			u.need = l - 4
		}
		if u.need == 0 && u.hdrN == 0 {
			u.lastType = u.typ
			return pos, true, nil
		}
	}
	return pos, false, nil
}

// atBoundary reports whether the bytes walked end at a message boundary.
func (u *upScan) atBoundary() bool { return u.hdrN == 0 && u.need == 0 }

// readyFor records a ReadyForQuery with transaction status status.
func (rs *relayState) readyFor(status byte) {
	rs.ready.Store((rs.ready.Load()>>8+1)<<8 | uint64(status))
}

// upstreamLoop copies the upstream's bytes to the client (or, during a
// handover, to the Handler), walking message headers to count ReadyForQuery
// and to notice COPY.
func (ss *session) upstreamLoop(h handoff) error {
	rs := &ss.relay
	buf := make([]byte, readBufSize)
	var msgs int64 // messages seen since the last count
	defer func() { ss.srv.metrics.messagesFromUpstream.Add(msgs) }()
	u := h.up
	if len(h.toClient) > 0 {
		if err := ss.writeClient(h.toClient, h.toClientBoundary); err != nil {
			return err
		}
	}
	if h.upErr != nil {
		ss.abort(sqlstateProtocolViolation, "pgsketch-proxy: "+h.upErr.Error())
		return h.upErr
	}
	for {
		if rs.leaving.Load() {
			rs.left = u
			return errLeft
		}
		rs.mu.Lock()
		rs.idle = u.atBoundary()
		granted := rs.idle && rs.canGrantLocked()
		if granted {
			rs.grantLocked()
		}
		rs.mu.Unlock()
		if msgs > 0 {
			ss.srv.metrics.messagesFromUpstream.Add(msgs)
			msgs = 0
		}
		n, err := ss.up.Read(buf)
		rs.mu.Lock()
		rs.idle = false
		// The pipe is captured with the mode: a later handover has a pipe of
		// its own that this chunk's leftovers must not reach.
		c := upChunk{ss: ss, b: buf[:n], handover: rs.handover, pw: rs.pipeW}
		rs.mu.Unlock()
		k, werr := c.walk(&u)
		msgs += k
		if werr != nil {
			return werr
		}
		if err := c.deliver(n, u.atBoundary()); err != nil {
			return err
		}
		if err != nil {
			return ss.upstreamEnded(&u, err)
		}
	}
}

// upChunk is one read from the upstream on its way to the client or,
// during a handover, to the Handler's pipe.
type upChunk struct {
	ss       *session
	b        []byte
	start    int // first byte not yet delivered
	handover bool
	pw       *io.PipeWriter
}

// deliver passes on the chunk's bytes up to end; boundary says end is at a
// message boundary.
func (c *upChunk) deliver(end int, boundary bool) error {
	if end <= c.start {
		return nil
	}
	part := c.b[c.start:end]
	c.start = end
	if c.handover {
		k, werr := c.pw.Write(part)
		if werr == nil {
			return nil
		}
		// The Handler is done: what it did not read goes to the client.
		rs := &c.ss.relay
		rs.mu.Lock()
		c.handover = rs.handover && rs.pipeW == c.pw
		closed := rs.closed
		rs.mu.Unlock()
		if closed || c.handover {
			return werr
		}
		part = part[k:]
	}
	return c.ss.writeClient(part, boundary)
}

// walk follows the chunk's messages with u: it counts ReadyForQuery and
// the replies, notes COPY, delivers a handover's messages one by one, and
// hands the upstream over at the ReadyForQuery a waiting request needs. It
// returns the number of messages that ended in the chunk.
func (c *upChunk) walk(u *upScan) (msgs int64, err error) {
	rs := &c.ss.relay
	for pos := 0; pos < len(c.b); {
		var ended bool
		var perr error
		pos, ended, perr = u.next(c.b, pos)
		if perr != nil {
			c.ss.abort(sqlstateProtocolViolation, "pgsketch-proxy: "+perr.Error())
			return msgs, perr
		}
		if !ended {
			continue
		}
		msgs++
		typ := u.typ
		if typ == 'Z' {
			// Its one-byte body, the transaction status, ends at pos.
			rs.readyFor(c.b[pos-1])
		}
		rs.replied(typ, !c.handover)
		if c.handover {
			// One message per pipe write, so the Handler never reads past
			// the last reply it waits for.
			if err := c.deliver(pos, true); err != nil {
				return msgs, err
			}
			continue
		}
		if typ != 'Z' {
			rs.noted(typ)
			continue
		}
		rs.mu.Lock()
		rs.answeredLocked()
		grant := rs.canGrantLocked()
		rs.mu.Unlock()
		if !grant {
			continue
		}
		// The client gets this reply before the Handler may write.
		if err := c.deliver(pos, true); err != nil {
			return msgs, err
		}
		// Check again: the waiting request may have given up meanwhile
		// (HandoverWait) and gone upstream.
		rs.mu.Lock()
		if rs.canGrantLocked() {
			c.pw = rs.grantLocked()
			c.handover = true
		}
		rs.mu.Unlock()
	}
	return msgs, nil
}

// upstreamEnded handles the error of a read from the upstream: the session
// going back to the event loop (errLeft), or ending: quietly when it was
// closing or the upstream said why, else as a lost upstream.
func (ss *session) upstreamEnded(u *upScan, err error) error {
	rs := &ss.relay
	if rs.leaving.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		rs.left = *u
		return errLeft
	}
	rs.mu.Lock()
	closed := rs.closed
	rs.mu.Unlock()
	if closed || ss.terminating.Load() {
		ss.close()
		return nil
	}
	if u.lastType == 'E' && errors.Is(err, io.EOF) {
		// The upstream said why (e.g. FATAL terminating connection).
		ss.close()
		return nil
	}
	ss.abort(sqlstateConnectionFailure,
		fmt.Sprintf("pgsketch-proxy lost the upstream server %s: %v", ss.srv.upstreamName, err))
	return fmt.Errorf("%w: %w", errUpstreamGone, err)
}

// noted records what an upstream message other than ReadyForQuery changes:
// the start or the end of a COPY from the client.
func (rs *relayState) noted(typ byte) {
	if typ != 'G' && typ != 'W' && typ != 'E' {
		return
	}
	rs.mu.Lock()
	if typ == 'E' {
		rs.copyIn = false // an error ends COPY; later copy messages are dropped
	} else { // CopyInResponse, CopyBothResponse
		rs.copyStartedLocked()
	}
	rs.mu.Unlock()
}

// statementTracker remembers the prepared statements and portals whose
// Parse or Bind a Handler took, so that later Bind, Describe, Execute and
// Close on them go to the Handler too. Names marked in the open group count
// only once the group is served; if it goes upstream instead, the upstream
// holds those names and the marks are dropped.
type statementTracker struct {
	stmts   map[string]bool
	portals map[string]bool
	marks   []trackMark
}

type trackMark struct {
	portal bool
	name   string
}

func (tr *statementTracker) has(portal bool, name []byte) bool {
	m := tr.stmts
	if portal {
		m = tr.portals
	}
	if m[string(name)] {
		return true
	}
	for _, mk := range tr.marks {
		if mk.portal == portal && mk.name == string(name) {
			return true
		}
	}
	return false
}

// unmark drops the open group's marks of a name that an unwanted Parse or
// Bind later in the group gave to the upstream.
func (tr *statementTracker) unmark(portal bool, name []byte) {
	k := 0
	for _, mk := range tr.marks {
		if mk.portal != portal || mk.name != string(name) {
			tr.marks[k] = mk
			k++
		}
	}
	tr.marks = tr.marks[:k]
}

// served applies the open group's marks; passed drops them.
func (tr *statementTracker) served() {
	for _, mk := range tr.marks {
		if mk.portal {
			tr.portals[mk.name] = true
		} else {
			tr.stmts[mk.name] = true
		}
	}
	tr.marks = tr.marks[:0]
}

func (tr *statementTracker) passed() {
	for _, mk := range tr.marks {
		if mk.portal {
			delete(tr.portals, mk.name)
		} else {
			delete(tr.stmts, mk.name)
		}
	}
	tr.marks = tr.marks[:0]
}

// streamed updates the tracker for a message that goes upstream unread (too
// big to inspect); head is the start of its body. Parse and Bind replace the
// statement or portal they name, a Close removes one: that name is no longer
// the Handler's. If the name is not in head, everything is forgotten. It
// reports a Bind of a statement the Handler owns: the upstream does not have
// that statement (or has an older one of the same name), so the session
// cannot go on.
func (tr *statementTracker) streamed(typ byte, head []byte) (conflict bool) {
	switch typ {
	case 'P', 'B':
		if i := bytes.IndexByte(head, 0); i >= 0 {
			if typ == 'P' {
				delete(tr.stmts, string(head[:i]))
				return false
			}
			delete(tr.portals, string(head[:i]))
			stmt, _ := cstring(head[i+1:])
			return tr.stmts[string(stmt)]
		}
	case 'C':
		if len(head) > 1 {
			if i := bytes.IndexByte(head[1:], 0); i >= 0 {
				if head[0] == 'S' {
					delete(tr.stmts, string(head[1:1+i]))
				} else {
					delete(tr.portals, string(head[1:1+i]))
				}
				return false
			}
		}
	default:
		return false
	}
	clear(tr.stmts)
	clear(tr.portals)
	tr.marks = tr.marks[:0]
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
			tr.marks = append(tr.marks, trackMark{false, string(name)})
			return true
		}
		delete(tr.stmts, string(name))
		if len(tr.marks) > 0 {
			tr.unmark(false, name)
		}
	case 'B':
		if len(tr.stmts) == 0 && len(tr.portals) == 0 && len(tr.marks) == 0 {
			return false
		}
		portal, rest := cstring(body)
		stmt, _ := cstring(rest)
		if tr.has(false, stmt) {
			tr.marks = append(tr.marks, trackMark{true, string(portal)})
			return true
		}
		delete(tr.portals, string(portal))
		if len(tr.marks) > 0 {
			tr.unmark(true, portal)
		}
	case 'D', 'C':
		if len(body) < 1 || len(tr.stmts) == 0 && len(tr.portals) == 0 && len(tr.marks) == 0 {
			return false
		}
		name, _ := cstring(body[1:])
		return tr.has(body[0] != 'S', name)
	case 'E':
		if len(tr.portals) == 0 && len(tr.marks) == 0 {
			return false
		}
		portal, _ := cstring(body)
		return tr.has(true, portal)
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
