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
// holds bytes or an end of stream stays reported, and its goroutine waits in
// epoll_wait itself, a blocking system call the runtime knows of (its
// processor is handed on if other goroutines need it). So one system call
// both waits and says what is ready, as in PgBouncer; waiting in Go's poller
// instead costs a turn through the scheduler and a second epoll_wait per
// wake-up. A loop therefore holds a thread while it waits: the loops are
// half the GOMAXPROCS threads (at least one), and the rest run everything
// else.
//
// While a session is in the loop its sockets are out of Go's poller
// (rawConn.detach): the loop owns a duplicate descriptor of each, and the
// net.Conn is closed until the session leaves, when the descriptor becomes
// a net.Conn again (rawConn.attach) before the goroutines take over. A
// socket in both sets would wake the poller's thread too for every message.
// Nothing else uses the connections meanwhile: whatever wants to write to
// or close them makes the session leave first (session.leaveLoop).
//
// Race builds do without the loop (loop_other.go), as they do without raw
// system calls (rawio_linux.go).

// loopBufSize is the loop's read buffer per session and direction. The
// client's grows for a request up to Config.InspectSize; a bigger one makes
// the session leave the loop.
const loopBufSize = readBufSize

// loopEvents is how many events one epoll_wait returns at most.
const loopEvents = 128

// loopSet is a server's event loops: half as many as the threads that run
// Go code (GOMAXPROCS), at least one, each started with its first session
// and ended loopLinger after its last (at once once the server shuts
// down), so that a session that leaves its loop to be answered and comes
// back, as one does for every statement answered from a rollup, finds it
// running.
type loopSet struct {
	once    sync.Once
	slots   []loopSlot
	next    atomic.Uint32
	closing atomic.Bool
}

// loopLinger is how long a loop without sessions waits for one before it
// ends, in milliseconds (epoll_wait's timeout).
const loopLinger = 2000

// close makes the loops end as soon as they hold no session.
func (set *loopSet) close() {
	set.closing.Store(true)
	for i := range set.slots {
		slot := &set.slots[i]
		slot.mu.Lock()
		if slot.loop != nil {
			slot.loop.wake()
		}
		slot.mu.Unlock()
	}
}

// loopSlot holds a loop while it runs and the requests for it.
type loopSlot struct {
	set   *loopSet
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
	cc, uc   *rawConn // the client's and the upstream's connection, detached
	cfd, ufd int      // their sockets, the loop's own descriptors
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
	cc, ok1 := loopConn(client)
	uc, ok2 := loopConn(up)
	if closed || !ok1 || !ok2 || len(start.clientBuf) > 0 || len(start.toUp) > 0 || len(start.toClient) > 0 {
		return start
	}
	set.once.Do(func() {
		set.slots = make([]loopSlot, max(1, runtime.GOMAXPROCS(0)/2))
		for i := range set.slots {
			set.slots[i].set = set
		}
	})
	slot := &set.slots[int(set.next.Add(1))%len(set.slots)]
	fs := &fastSession{ss: ss, cc: cc, uc: uc, up: start.up, fwd: forwardLog{rs: &ss.relay, owing: start.owing},
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
	// Detached only now that a leaveLoop waits for released, which comes
	// after the sockets are attached again.
	if err := fs.detach(); err != nil {
		ss.log.Debug("event loop unavailable", "err", err)
		close(fs.released)
	} else if err := slot.request(loopRequest{fs: fs}); err != nil {
		ss.log.Debug("event loop unavailable", "err", err)
		fs.handBack()
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
	_, ok1 := loopConn(client)
	_, ok2 := loopConn(up)
	return ok1 && ok2 && !closed && !noLoop
}

// loopConn returns a connection the loop can serve: a plain socket read and
// written with raw system calls.
func loopConn(c any) (*rawConn, bool) {
	cc, ok := c.(countedConn)
	if !ok {
		return nil, false
	}
	rc, ok := cc.Conn.(*rawConn)
	return rc, ok
}

// detach takes both sockets out of Go's poller for the loop; on error
// neither is.
func (fs *fastSession) detach() error {
	var err error
	if fs.cfd, err = fs.cc.detach(); err != nil {
		return err
	}
	if fs.ufd, err = fs.uc.detach(); err != nil {
		if aerr := fs.cc.attach(fs.cfd); aerr != nil {
			fs.ss.log.Warn("client socket lost leaving the event loop", "err", aerr)
		}
		return err
	}
	return nil
}

// handBack makes the sockets net.Conns again and releases the session's
// goroutines. A socket that cannot be is closed, and the goroutines meet
// net.ErrClosed on it.
func (fs *fastSession) handBack() {
	if err := fs.cc.attach(fs.cfd); err != nil {
		fs.ss.log.Warn("client socket lost leaving the event loop", "err", err)
	}
	if err := fs.uc.attach(fs.ufd); err != nil {
		fs.ss.log.Warn("upstream socket lost leaving the event loop", "err", err)
	}
	close(fs.released)
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
	// bySocket holds each session at both its descriptors (nil elsewhere);
	// held counts the sessions.
	bySocket []*fastSession
	held     int
	events   [loopEvents]syscall.EpollEvent
	reqs     []loopRequest
}

func newEventLoop(slot *loopSlot) (*eventLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
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
	return &eventLoop{slot: slot, epfd: epfd, efd: int(efd)}, nil
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
	if l.wait() != nil || l.held > 0 {
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
	syscall.Close(l.epfd)
	syscall.Close(l.efd)
}

// wait waits for the epoll set and serves what is ready until the loop has
// nothing left (nil) or the set fails. Syscall, not RawSyscall: the runtime
// knows the thread is blocked and hands its processor on if need be.
func (l *eventLoop) wait() error {
	for {
		timeout := waitForever
		if l.held == 0 {
			timeout = loopLinger
		}
		n, _, errno := syscall.Syscall6(syscall.SYS_EPOLL_WAIT, uintptr(l.epfd),
			uintptr(unsafe.Pointer(&l.events[0])), loopEvents, timeout, 0, 0)
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		default:
			return os.NewSyscallError("epoll_wait", errno)
		}
		if n == 0 && l.held == 0 && l.idle() {
			return nil
		}
		for i := range int(n) {
			ev := &l.events[i]
			if int(ev.Fd) == l.efd {
				if l.requests() {
					return nil
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

// waitForever is epoll_wait's timeout of -1, as the uintptr a system call
// takes (the kernel reads an int).
const waitForever = ^uintptr(0)

// session returns the session holding socket fd, or nil.
func (l *eventLoop) session(fd int32) *fastSession {
	if fd < 0 || int(fd) >= len(l.bySocket) {
		return nil
	}
	return l.bySocket[fd]
}

// idle ends the loop, which holds no session, unless a request waits: it
// reports whether it did (then no request can reach it: the slot is
// empty).
func (l *eventLoop) idle() bool {
	l.slot.mu.Lock()
	defer l.slot.mu.Unlock()
	if len(l.slot.queue) > 0 {
		return false
	}
	l.slot.loop = nil
	return true
}

// requests takes in the queued requests; it reports whether the loop has
// nothing left and ends (then no request can reach it: the slot is empty):
// only once the server shuts down, else after loopLinger without sessions.
func (l *eventLoop) requests() (exit bool) {
	var cnt [8]byte
	syscall.RawSyscall(syscall.SYS_READ, uintptr(l.efd), uintptr(unsafe.Pointer(&cnt[0])), 8)
	l.slot.mu.Lock()
	l.reqs = append(l.reqs[:0], l.slot.queue...)
	l.slot.queue = l.slot.queue[:0]
	if len(l.reqs) == 0 && l.held == 0 && l.slot.set.closing.Load() {
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
	if l.held == 0 && l.slot.set.closing.Load() {
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
	fs.cbuf = getBuf()
	fs.ubuf = getBuf()
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
		if l.held == 0 && l.slot.set.closing.Load() {
			l.wake() // to end the loop, unless a request comes first
		}
	}
	if fs.cr < fs.cw {
		fs.h.clientBuf = append(fs.h.clientBuf, fs.cbuf[fs.cr:fs.cw]...)
	}
	fs.h.up = fs.up
	fs.h.owing = fs.fwd.owing
	putBuf(fs.cbuf) // what the session still needs of them was copied above
	putBuf(fs.ubuf)
	fs.cbuf, fs.ubuf = nil, nil
	fs.ss.log.Debug("relay leaves the event loop", "reason", why)
	fs.handBack()
}
