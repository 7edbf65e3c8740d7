//go:build linux && !race

package wire

import (
	"strconv"
	"syscall"
	"unsafe"
)

// The event loop's side of a session (fastSession): reading what the
// client and the upstream sent and forwarding it, as relay.go and client.go
// do in the goroutines.

// fromClient reads what the client sent and forwards the whole requests the
// loop may.
func (l *eventLoop) fromClient(fs *fastSession) {
	ss := fs.ss
	if fs.cw == len(fs.cbuf) {
		// A request bigger than the buffer, within the limit requests
		// checks: make room for it.
		fs.cbuf = append(fs.cbuf, make([]byte, len(fs.cbuf))...)
	}
	n, ok := l.read(fs, fs.cfd, fs.cbuf[fs.cw:], "client")
	if !ok {
		return
	}
	ss.srv.metrics.bytesFromClients.Add(int64(n))
	fs.cw += n
	start := fs.cr
	end, msgs, why := fs.requests()
	ss.srv.metrics.messagesFromClients.Add(msgs)
	fs.cr = end
	if end > start {
		w, errno := rawWrite(fs.ufd, fs.cbuf[start:end])
		if w > 0 {
			ss.srv.metrics.bytesToUpstream.Add(int64(w))
		}
		if w < end-start {
			// The rest is forwarded as far as the relay's state goes; the
			// goroutines write it (and meet the error, if there was one).
			fs.h.toUp = append(fs.h.toUp, fs.cbuf[start+w:end]...)
			if why == "" {
				why = "upstream socket full"
				if errno != 0 && errno != syscall.EAGAIN {
					why = "upstream write error"
				}
			}
		}
	}
	if why != "" {
		l.release(fs, why)
		return
	}
	if fs.cr == fs.cw {
		fs.cr, fs.cw = 0, 0
		if len(fs.cbuf) > loopBufSize {
			fs.cbuf = getBuf() // drop a buffer grown for one big request
		}
	} else if fs.cw == len(fs.cbuf) && fs.cr > 0 {
		fs.cw = copy(fs.cbuf, fs.cbuf[fs.cr:fs.cw])
		fs.cr = 0
	}
}

// requests walks the client's bytes from cbuf[cr:cw] and returns the end of
// the messages the loop forwards: every whole message up to one the Handler
// wants or the loop does not forward. It records them as forwarded, as
// clientLoop does. A non-empty why says the session must leave the loop at
// end: a message the loop does not forward (or that needs more than its
// buffer) comes next.
func (fs *fastSession) requests() (end int, msgs int64, why string) {
	cfg := &fs.ss.srv.cfg
	b := fs.cbuf[:fs.cw]
	limit := cfg.InspectSize + 5 // as clientLoop holds back
	end = fs.cr
	for p := fs.cr; ; {
		typ, total, ok, ferr := clientFrame(b[p:], cfg.MaxMessageSize)
		switch {
		case !ok:
			return end, msgs, ""
		case ferr != nil:
			return end, msgs, "invalid message length" // clientLoop reports it
		case total > limit:
			return end, msgs, "client message larger than the inspect size"
		case len(b)-p < total:
			return end, msgs, "" // read the rest of it
		}
		body := b[p+5 : p+total]
		switch typ {
		case 'Q':
			if len(body) > 0 && cfg.Handler.Intercept(body[:len(body)-1]) {
				return end, msgs, "request for the handler"
			}
			fs.ss.tracker.loopWants(typ, body)
		case 'P':
			_, rest := cstring(body)
			if query, _ := cstring(rest); len(query) <= cfg.InspectSize && cfg.Handler.Intercept(query) {
				return end, msgs, "request for the handler"
			}
			fs.ss.tracker.loopWants(typ, body)
		case 'B', 'D', 'E', 'C':
			if fs.ss.tracker.loopWants(typ, body) {
				return end, msgs, "request for the handler's statement or portal"
			}
		case 'S', 'H':
		default:
			return end, msgs, "client message " + strconv.QuoteRune(rune(typ))
		}
		fs.fwd.sent(typ)
		p += total
		end = p
		msgs++
	}
}

// fromUpstream reads what the upstream sent and writes it to the client,
// following the messages as upstreamLoop does.
func (l *eventLoop) fromUpstream(fs *fastSession) {
	ss := fs.ss
	rs := &ss.relay
	m := &ss.srv.metrics
	n, ok := l.read(fs, fs.ufd, fs.ubuf, "upstream")
	if !ok {
		return
	}
	m.bytesFromUpstream.Add(int64(n))
	chunk := fs.ubuf[:n]
	var msgs int64
	last := -1 // where the last message that ended in chunk ends
	for pos := 0; pos < n; {
		var ended bool
		var err error
		pos, ended, err = fs.up.next(chunk, pos)
		if err != nil {
			// The messages before the bad one still reach the client, then
			// upstreamLoop reports it.
			if last >= 0 {
				fs.h.toClient = append(fs.h.toClient, chunk[:last]...)
				fs.h.toClientBoundary = true
			}
			fs.h.upErr = err
			m.messagesFromUpstream.Add(msgs)
			l.release(fs, err.Error())
			return
		}
		if !ended {
			continue
		}
		msgs++
		last = pos
		if fs.up.typ == 'Z' {
			rs.readyFor(chunk[pos-1])
			rs.mu.Lock()
			rs.answeredLocked()
			rs.mu.Unlock()
		} else {
			rs.noted(fs.up.typ)
		}
		rs.replied(fs.up.typ, true)
	}
	m.messagesFromUpstream.Add(msgs)
	boundary := fs.up.atBoundary()
	w, errno := rawWrite(fs.cfd, chunk)
	if w > 0 {
		m.bytesToClients.Add(int64(w))
		ss.clientBoundary.Store(w == n && boundary)
	}
	if w < n {
		fs.h.toClient = append(fs.h.toClient, chunk[w:]...)
		fs.h.toClientBoundary = boundary
		why := "client socket full"
		if errno != 0 && errno != syscall.EAGAIN {
			why = "client write error"
		}
		l.release(fs, why)
		return
	}
}

// read reads from one of fs's sockets (side names it). Nothing to read or
// an end of stream or error returns false; the latter two also let the
// session go: its goroutines read again and meet the end or the error.
func (l *eventLoop) read(fs *fastSession, fd int, b []byte, side string) (int, bool) {
	n, errno := rawRead(fd, b)
	switch {
	case errno == syscall.EAGAIN:
		return 0, false
	case errno != 0 || n == 0:
		l.release(fs, side+" end of stream or error")
		return 0, false
	}
	return n, true
}

// rawRead and rawWrite make one system call on a non-blocking socket,
// retrying only when a signal interrupted it.
func rawRead(fd int, b []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
		if errno != syscall.EINTR {
			return int(n), errno
		}
	}
}

func rawWrite(fd int, b []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), syscall.MSG_NOSIGNAL, 0, 0)
		if errno != syscall.EINTR {
			if errno != 0 {
				n = 0
			}
			return int(n), errno
		}
	}
}
