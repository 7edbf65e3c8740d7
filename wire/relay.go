package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

const readBufSize = 32 << 10

// bufPool holds read buffers of readBufSize bytes. A session answered from
// a rollup leaves the event loop and comes back for every answer; without
// the pool each trip made 96 KiB of garbage, and collecting it cost more
// CPU than the answer.
var bufPool = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// getBuf returns a read buffer of readBufSize bytes from the pool.
func getBuf() []byte { return bufPool.Get().(*[readBufSize]byte)[:] }

// putBuf gives b back to the pool, unless it is not one of its size (a
// buffer grown for a big message). Nothing may hold b afterwards.
func putBuf(b []byte) {
	if len(b) == readBufSize {
		bufPool.Put((*[readBufSize]byte)(b))
	}
}

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
	buf := getBuf() // what it reads is written on before it returns
	defer putBuf(buf)
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
