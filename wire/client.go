package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/jackc/pgx/v5/pgproto3"
)

// clientRelay is the client-to-upstream direction in the relay goroutines:
// it reads the client's messages, forwards them upstream, and hands the
// requests the Handler wants to it.
//
// Extended-protocol messages the Handler does not want go upstream as they
// come. The open group runs from the first message the Handler wants up to
// Sync or Flush: it is held back, to be served whole (or, past InspectSize
// bytes, committed: sent upstream as it is).
type clientRelay struct {
	ss  *session
	ctx context.Context
	h   Handler
	tr  *statementTracker // the session's
	fwd forwardLog
	// out holds the bytes for the upstream; stream counts the bytes still
	// to relay raw of a message too big to hold.
	out    []byte
	stream int
	// groupStart is where the open group starts in out (-1: none);
	// groupCommitted says it goes upstream whatever comes; groupWants says,
	// per message of the group, whether the Handler wants it.
	groupStart     int
	groupCommitted bool
	groupWants     []bool
	// served: the Handler served a request since the session left the
	// event loop.
	served bool
}

// quiet reports whether the session may go back to the event loop: the
// Handler served a request (so the loop's first reason to hand it over is
// behind it), nothing is held or streaming, and no COPY is under way. (The
// loop hands the session over again for a message naming a statement or
// portal the Handler owns: see fastSession.requests.)
func (c *clientRelay) quiet() bool {
	if !c.served || len(c.out) > 0 || c.stream > 0 || c.groupStart >= 0 || len(c.tr.marks) > 0 ||
		!c.ss.srv.loops.takes(c.ss) {
		return false
	}
	rs := &c.ss.relay
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return !rs.copyIn && !rs.closed
}

// clientLoop reads the client's messages and forwards them upstream, handing
// wanted requests to the Handler. It returns errBackToLoop when the session
// is quiet after a request the Handler served (see quiet), with *owing what
// the event loop starts from.
func (ss *session) clientLoop(ctx context.Context, h0 handoff, owing *int) error {
	cfg := &ss.srv.cfg
	c := &clientRelay{ss: ss, ctx: ctx, h: cfg.Handler, out: h0.toUp, groupStart: -1,
		tr:  &ss.tracker,
		fwd: forwardLog{rs: &ss.relay, owing: h0.owing}}
	buf := make([]byte, max(readBufSize, len(h0.clientBuf)))
	r, w := 0, copy(buf, h0.clientBuf)  // unread bytes are buf[r:w]
	primed := w > 0 || len(h0.toUp) > 0 // work to do before reading
	inspectLimit := cfg.InspectSize + 5
	var msgs int64 // messages seen since the last count
	defer func() { ss.srv.metrics.messagesFromClients.Add(msgs) }()
	for {
		if msgs > 0 {
			ss.srv.metrics.messagesFromClients.Add(msgs)
			msgs = 0
		}
		var n int
		var err error
		if primed {
			primed = false
		} else {
			n, err = ss.client.Read(buf[w:])
			w += n
		}
		for r < w {
			if c.stream > 0 {
				k := min(c.stream, w-r)
				c.out = append(c.out, buf[r:r+k]...)
				r += k
				c.stream -= k
				continue
			}
			typ, total, ok, ferr := clientFrame(buf[r:w], cfg.MaxMessageSize)
			if !ok {
				break
			}
			if ferr != nil {
				ss.abort(ferr.code, ferr.msg)
				return fmt.Errorf("%w: client %s", ErrProtocol, ferr.msg)
			}
			msgs++
			if w-r < total {
				if isInspected(typ) && total <= inspectLimit {
					msgs-- // not yet: read the rest of it
					break
				}
				if err := c.startStream(typ, buf[r:w], total); err != nil {
					return err
				}
				r = w
				break
			}
			msg := buf[r : r+total]
			r += total
			if done, err := c.message(typ, msg); done || err != nil {
				return err
			}
		}
		if err := c.flush(false); err != nil {
			return err
		}
		if err == nil && r == w && c.quiet() {
			*owing = c.fwd.owing
			return errBackToLoop
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
		r, w, buf = compact(buf, r, w)
	}
}

// compact moves a partial message left in buf[r:w] to the front, growing
// buf for a big one, or drops a buffer grown for one big message when
// nothing is left.
func compact(buf []byte, r, w int) (int, int, []byte) {
	if r == w {
		if len(buf) > readBufSize {
			buf = make([]byte, readBufSize)
		}
		return 0, 0, buf
	}
	if r > 0 {
		w = copy(buf, buf[r:w])
	}
	if w == len(buf) {
		_, total, _, _ := clientFrame(buf[:w], int(^uint(0)>>2))
		nb := make([]byte, max(total, 2*len(buf)))
		copy(nb, buf[:w])
		buf = nb
	}
	return 0, w, buf
}

// startStream starts relaying raw a message too big to inspect, of which
// part is what has been read. Its group can no longer be held back; later
// messages start a group of their own.
func (c *clientRelay) startStream(typ byte, part []byte, total int) error {
	c.commitGroup()
	c.groupStart = -1
	if c.tr.streamed(typ, part[5:]) {
		msg := fmt.Sprintf("pgsketch-proxy: a Bind of more than %d bytes for a statement pgsketch answers is not supported",
			c.ss.srv.cfg.InspectSize)
		c.ss.abort(sqlstateProgramLimit, msg)
		return fmt.Errorf("%w: %s", ErrProtocol, msg)
	}
	c.out = append(c.out, part...)
	c.fwd.sent(typ)
	c.stream = total - len(part)
	return nil
}

// message relays one whole client message, or hands the request it ends
// to the Handler; done reports a Terminate.
func (c *clientRelay) message(typ byte, msg []byte) (done bool, err error) {
	body := msg[5:]
	switch typ {
	case 'Q':
		c.commitGroup() // a Query inside a group: the group goes as it is
		c.groupStart = -1
		// A Query drops the unnamed statement and portal.
		if len(c.tr.stmts) > 0 {
			delete(c.tr.stmts, "")
		}
		if len(c.tr.portals) > 0 {
			delete(c.tr.portals, "")
		}
		if len(body) > 0 && c.h.Intercept(body[:len(body)-1]) {
			return false, c.serve(bytes.Clone(msg), []bool{true})
		}
		c.out = append(c.out, msg...)
		c.fwd.sent(typ)
	case 'P', 'B', 'D', 'E', 'C', 'H', 'S':
		return false, c.extended(typ, msg)
	case 'X':
		c.ss.terminating.Store(true)
		c.out = append(c.out, msg...)
		c.flush(true)
		return true, nil
	default: // COPY data, FunctionCall, anything else: it goes as it comes
		c.commitGroup()
		c.groupStart = -1
		c.out = append(c.out, msg...)
		c.fwd.sent(typ)
		if typ == 'c' || typ == 'f' {
			c.ss.relay.copyEnded()
		}
	}
	return false, nil
}

// extended relays an extended-protocol message: upstream at once, unless
// it is wanted or follows one wanted in its group; a held group is served
// at its Sync or Flush.
func (c *clientRelay) extended(typ byte, msg []byte) error {
	wanted := c.tr.wants(c.h, typ, msg[5:], c.ss.srv.cfg.InspectSize)
	if c.groupStart < 0 && wanted {
		c.groupStart, c.groupCommitted = len(c.out), false
		c.groupWants = c.groupWants[:0]
	}
	c.out = append(c.out, msg...)
	if c.groupStart < 0 || c.groupCommitted {
		// Nothing held: it goes upstream now.
		c.tr.passed()
		c.fwd.sent(typ)
		if typ == 'S' || typ == 'H' {
			c.groupStart = -1
		}
		return nil
	}
	c.groupWants = append(c.groupWants, wanted)
	if typ != 'S' && typ != 'H' {
		if len(c.out)-c.groupStart > c.ss.srv.cfg.InspectSize {
			c.commitGroup()
		}
		return nil
	}
	group := bytes.Clone(c.out[c.groupStart:])
	c.out = c.out[:c.groupStart]
	c.groupStart = -1
	return c.serve(group, slices.Clone(c.groupWants))
}

// flush writes out upstream: all of it, or (all false) what precedes a
// group held back.
func (c *clientRelay) flush(all bool) error {
	end := len(c.out)
	if !all && c.groupStart >= 0 && !c.groupCommitted {
		end = c.groupStart
	}
	if end == 0 {
		return nil
	}
	if _, err := c.ss.up.Write(c.out[:end]); err != nil {
		return c.ss.upstreamLost(err)
	}
	c.out = c.out[:copy(c.out, c.out[end:])]
	if c.groupStart >= 0 {
		c.groupStart = max(c.groupStart-end, 0)
	}
	return nil
}

// commitGroup sends the open group upstream as it is, whatever comes.
func (c *clientRelay) commitGroup() {
	if c.groupStart >= 0 && !c.groupCommitted {
		c.groupCommitted = true
		c.tr.passed()
		c.fwd.sentAll(c.out[c.groupStart:])
	}
}

// passUp sends a wanted request upstream unseen instead.
func (c *clientRelay) passUp(msgs []byte) {
	c.tr.passed()
	c.out = append(c.out, msgs...)
	c.fwd.sentAll(msgs)
}

// serve hands a wanted request to the Handler once the upstream has
// answered everything before it, or sends it upstream when the upstream
// cannot be handed over.
func (c *clientRelay) serve(msgs []byte, wants []bool) error {
	ss, rs, cfg := c.ss, &c.ss.relay, &c.ss.srv.cfg
	if err := c.flush(true); err != nil {
		return err
	}
	if c.fwd.owing > 0 && msgs[0] == 'Q' {
		c.passUp(msgs) // its replies follow those of an unsynced group
		return nil
	}
	req, err := decodeRequest(msgs)
	if err != nil {
		ss.abort(sqlstateProtocolViolation, err.Error())
		return err
	}
	req.Wanted = wants
	pr, err := rs.acquire(c.ctx, cfg.HandoverWait)
	if errors.Is(err, errNotCaughtUp) {
		ss.log.Info("upstream still busy: request passed through unseen", "waited", cfg.HandoverWait.String())
		c.passUp(msgs)
		return nil
	}
	if err != nil {
		return err
	}
	sess := &Session{ss: ss, Frontend: pgproto3.NewFrontend(pr, ss.up)}
	req.Unsynced = c.fwd.owing > 0
	if c.fwd.owing > 0 {
		relayed, err := sess.relayOwed(c.fwd.owing)
		if err != nil {
			rs.release()
			return err
		}
		if !relayed {
			// The upstream skips up to Sync (an error, or COPY): so must
			// the request.
			rs.release()
			c.passUp(msgs)
			return nil
		}
		c.fwd.owing = 0
	}
	c.tr.served()
	err = c.h.Serve(c.ctx, req, sess)
	rs.release()
	c.served = true
	if err != nil {
		ss.abort("XX000", "pgsketch-proxy: "+err.Error())
		return fmt.Errorf("handler: %w", err)
	}
	return nil
}
