//go:build linux && !race

package wire

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The event loop relays plain sessions the way PgBouncer does: one goroutine
// waits for all their sockets at once and moves the bytes of whichever is
// ready, with no goroutine per direction to park and wake per message. It
// serves the steady state of a session that a Handler does not touch: the
// Query and extended-protocol messages the Handler does not want, and every
// reply. Anything else makes the session leave the loop, handing what it
// read to the relay's goroutines (relay.go, client.go), which carry on from
// there: a request the Handler wants, COPY from the client, a function
// call, Terminate, a message too big for the loop's buffer, a socket that
// will not take all it is given, an end of stream or an error (which the
// goroutines then meet and report), and Shutdown or anything else that
// wants to write to or close the session's connections. Once the Handler
// has served a request and the session is quiet, the goroutines give it
// back to the loop (session.steady).
//
// The loop keeps its own epoll set, level-triggered, so a socket that still
// holds bytes or an end of stream stays reported, and waits for that set in
// Go's poller: the epoll descriptor is readable when one of its sockets is,
// and the loop runs inside one long syscall.RawConn.Read of it. The
// runtime's thread waits in its own epoll_wait as for any connection, and no
// thread blocks outside the runtime's knowledge.
//
// A session's sockets stay open, owned by their net.Conn, while the loop
// uses their descriptors: they are closed only after the loop let go of
// them (session.leaveLoop).
//
// Race builds do without the loop (loop_other.go), as they do without raw
// system calls (rawio_linux.go).

// loopBufSize is the loop's read buffer per session and direction. The
// client's grows for a request up to Config.InspectSize; a bigger one makes
// the session leave the loop.
const loopBufSize = readBufSize

// loopEvents is how many events one epoll_wait returns at most.
const loopEvents = 128

// loopSet is a server's event loops: one per thread that runs Go code
// (GOMAXPROCS), each started with its first session and ended with its last.
type loopSet struct {
	once  sync.Once
	slots []loopSlot
	next  atomic.Uint32
}

// loopSlot holds a loop while it runs and the requests for it.
type loopSlot struct {
	mu    sync.Mutex
	loop  *eventLoop
	queue []loopRequest
}

type loopRequest struct {
	fs    *fastSession
	leave bool // take fs out of the loop; otherwise add it
}

// fastSession is a session while a loop relays it.
type fastSession struct {
	ss       *session
	cfd, ufd int // the client's and the upstream's socket
	cbuf     []byte
	cr, cw   int // client bytes read and not yet forwarded: cbuf[cr:cw]
	ubuf     []byte
	up       upScan
	fwd      forwardLog
	// h is what the goroutines start from; written before released closes.
	h        handoff
	released chan struct{}
	gone     bool // the loop let go (loop goroutine only)
	// queued: the request to add it went to a loop; leaving: a request to
	// take it out came. Both under the slot's mu.
	queued, leaving bool
}

// relay runs ss in an event loop, from start (the state the relay's
// goroutines left, or the zero handoff of a new session), until it leaves
// the loop, and returns where the goroutines take over. A session the loop
// cannot serve (TLS on either side, an unknown kind of socket, bytes held)
// returns start at once.
func (set *loopSet) relay(ss *session, start handoff) handoff {
	ss.mu.Lock()
	client, up, closed := ss.client, ss.up, ss.closed
	ss.mu.Unlock()
	cfd, ok1 := socketFD(client)
	ufd, ok2 := socketFD(up)
	if closed || !ok1 || !ok2 || len(start.clientBuf) > 0 || len(start.toUp) > 0 || len(start.toClient) > 0 {
		return start
	}
	set.once.Do(func() { set.slots = make([]loopSlot, runtime.GOMAXPROCS(0)) })
	slot := &set.slots[int(set.next.Add(1))%len(set.slots)]
	fs := &fastSession{ss: ss, cfd: cfd, ufd: ufd, up: start.up, fwd: forwardLog{rs: &ss.relay, owing: start.owing},
		h: start, released: make(chan struct{})}
	ss.mu.Lock()
	if ss.noLoop {
		ss.mu.Unlock()
		return start
	}
	ss.leave = func() {
		slot.request(loopRequest{fs: fs, leave: true})
		<-fs.released
	}
	ss.mu.Unlock()
	if err := slot.request(loopRequest{fs: fs}); err != nil {
		ss.log.Debug("event loop unavailable", "err", err)
		close(fs.released)
	}
	<-fs.released
	ss.mu.Lock()
	ss.leave = nil
	ss.mu.Unlock()
	return fs.h
}

// takes reports whether an event loop can relay ss: plain sockets on both
// sides, and nothing about to write to or close them.
func (*loopSet) takes(ss *session) bool {
	ss.mu.Lock()
	client, up, closed, noLoop := ss.client, ss.up, ss.closed, ss.noLoop
	ss.mu.Unlock()
	_, ok1 := socketFD(client)
	_, ok2 := socketFD(up)
	return ok1 && ok2 && !closed && !noLoop
}

// socketFD returns the descriptor of a connection the loop can serve: a
// plain socket read and written with raw system calls.
func socketFD(c any) (int, bool) {
	cc, ok := c.(countedConn)
	if !ok {
		return 0, false
	}
	rc, ok := cc.Conn.(*rawConn)
	if !ok {
		return 0, false
	}
	fd := -1
	if err := rc.rc.Control(func(f uintptr) { fd = int(f) }); err != nil || fd < 0 {
		return 0, false
	}
	return fd, true
}

// errLeaving refuses to add a session that was asked to leave first.
var errLeaving = errors.New("session leaving")

// request queues req for the slot's loop, starting one if none runs. A
// session asked to leave before it was added is not added; one asked after
// its loop ended has left already.
func (slot *loopSlot) request(req loopRequest) error {
	slot.mu.Lock()
	if req.leave {
		req.fs.leaving = true
		if slot.loop == nil || !req.fs.queued {
			slot.mu.Unlock()
			return nil
		}
	} else if req.fs.leaving {
		slot.mu.Unlock()
		return errLeaving
	}
	l := slot.loop
	if l == nil {
		var err error
		if l, err = newEventLoop(slot); err != nil {
			slot.mu.Unlock()
			return err
		}
		slot.loop = l
		go l.run()
	}
	req.fs.queued = true
	slot.queue = append(slot.queue, req)
	slot.mu.Unlock()
	l.wake()
	return nil
}

// eventLoop is one loop: its epoll set, the wake-up eventfd in it, and the
// sessions it holds.
type eventLoop struct {
	slot *loopSlot
	epfd int
	efd  int
	file *os.File // epfd, for Go's poller
	rc   syscall.RawConn
	// bySocket holds each session at both its descriptors (nil elsewhere);
	// held counts the sessions.
	bySocket []*fastSession
	held     int
	events   [loopEvents]syscall.EpollEvent
	reqs     []loopRequest
	pollFn   func(uintptr) bool
}

func newEventLoop(slot *loopSlot) (*eventLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	efd, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		syscall.Close(epfd)
		return nil, os.NewSyscallError("eventfd2", errno)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(efd)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(efd), &ev); err != nil {
		syscall.Close(int(efd))
		syscall.Close(epfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	l := &eventLoop{slot: slot, epfd: epfd, efd: int(efd)}
	l.file = os.NewFile(uintptr(epfd), "epoll")
	if l.rc, err = l.file.SyscallConn(); err != nil {
		l.file.Close()
		syscall.Close(l.efd)
		return nil, err
	}
	l.pollFn = l.poll
	return l, nil
}

// wake makes the loop look at its requests.
func (l *eventLoop) wake() {
	one := uint64(1)
	for {
		_, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(l.efd), uintptr(unsafe.Pointer(&one)), 8)
		if errno != syscall.EINTR {
			return // EAGAIN: the counter is full, so the loop has a wake-up coming
		}
	}
}

// run is the loop's goroutine. It ends when the loop holds no session and
// no request waits, or if its epoll set fails, after letting every session go.
func (l *eventLoop) run() {
	err := l.rc.Read(l.pollFn)
	if err != nil || l.held > 0 {
		// Not an exit by poll: let every session go and refuse new ones.
		l.slot.mu.Lock()
		l.slot.loop = nil
		reqs := l.slot.queue
		l.slot.queue = nil
		l.slot.mu.Unlock()
		for _, fs := range l.bySocket {
			if fs != nil {
				l.release(fs, "event loop failed")
			}
		}
		for _, r := range reqs {
			l.release(r.fs, "event loop failed")
		}
	}
	l.file.Close()
	syscall.Close(l.efd)
}

// poll is called by rc.Read whenever the epoll set is readable; it returns
// false to wait for it again, true to end the loop.
func (l *eventLoop) poll(uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, uintptr(l.epfd),
			uintptr(unsafe.Pointer(&l.events[0])), loopEvents, 0, 0, 0)
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		default:
			return true
		}
		if n == 0 {
			// Wait only with the ready list empty. An event the loop did not
			// exhaust (a read that took the data but left the end of stream,
			// a full buffer) stays on the list, level-triggered, but adds no
			// new edge for Go's poller, which would then never wake the loop.
			// Asking again also finds what came in while the loop worked,
			// which costs less than a turn through Go's scheduler and poller.
			return false
		}
		for i := range int(n) {
			ev := &l.events[i]
			if int(ev.Fd) == l.efd {
				if l.requests() {
					return true
				}
				continue
			}
			fs := l.session(ev.Fd)
			if fs == nil {
				continue // let go earlier in this batch
			}
			if ev.Fd == int32(fs.cfd) {
				l.fromClient(fs)
			} else {
				l.fromUpstream(fs)
			}
		}
	}
}

// session returns the session holding socket fd, or nil.
func (l *eventLoop) session(fd int32) *fastSession {
	if fd < 0 || int(fd) >= len(l.bySocket) {
		return nil
	}
	return l.bySocket[fd]
}

// requests takes in the queued requests; it reports whether the loop has
// nothing left and ends (then no request can reach it: the slot is empty).
func (l *eventLoop) requests() (exit bool) {
	var cnt [8]byte
	syscall.RawSyscall(syscall.SYS_READ, uintptr(l.efd), uintptr(unsafe.Pointer(&cnt[0])), 8)
	l.slot.mu.Lock()
	l.reqs = append(l.reqs[:0], l.slot.queue...)
	l.slot.queue = l.slot.queue[:0]
	if len(l.reqs) == 0 && l.held == 0 {
		l.slot.loop = nil
		l.slot.mu.Unlock()
		return true
	}
	l.slot.mu.Unlock()
	for _, r := range l.reqs {
		switch {
		case r.leave:
			if !r.fs.gone && l.session(int32(r.fs.cfd)) == r.fs {
				l.release(r.fs, "asked to")
			}
		case r.fs.gone:
		default:
			l.add(r.fs)
		}
	}
	clear(l.reqs)
	if l.held == 0 {
		// Wake once more to end, after any request that raced this one.
		l.wake()
	}
	return false
}

// add registers a session's sockets.
func (l *eventLoop) add(fs *fastSession) {
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fs.cfd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fs.cfd, &ev); err != nil {
		l.release(fs, "epoll_ctl: "+err.Error())
		return
	}
	ev.Fd = int32(fs.ufd)
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fs.ufd, &ev); err != nil {
		syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, fs.cfd, nil)
		l.release(fs, "epoll_ctl: "+err.Error())
		return
	}
	fs.cbuf = make([]byte, loopBufSize)
	fs.ubuf = make([]byte, loopBufSize)
	if top := max(fs.cfd, fs.ufd); top >= len(l.bySocket) {
		l.bySocket = append(l.bySocket, make([]*fastSession, top+1-len(l.bySocket))...)
	}
	l.bySocket[fs.cfd] = fs
	l.bySocket[fs.ufd] = fs
	l.held++
}

// release takes fs out of the loop, if it is in, and hands it to its
// goroutines with what the loop holds of it.
func (l *eventLoop) release(fs *fastSession, why string) {
	if fs.gone {
		return
	}
	fs.gone = true
	if l.session(int32(fs.cfd)) == fs {
		syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, fs.cfd, nil)
		syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, fs.ufd, nil)
		l.bySocket[fs.cfd] = nil
		l.bySocket[fs.ufd] = nil
		l.held--
		if l.held == 0 {
			l.wake() // to end the loop, unless a request comes first
		}
	}
	if fs.cr < fs.cw {
		fs.h.clientBuf = append(fs.h.clientBuf, fs.cbuf[fs.cr:fs.cw]...)
	}
	fs.h.up = fs.up
	fs.h.owing = fs.fwd.owing
	fs.cbuf, fs.ubuf = nil, nil
	fs.ss.log.Debug("relay leaves the event loop", "reason", why)
	close(fs.released)
}
