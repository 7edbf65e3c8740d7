//go:build linux && !race

package wire

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// rawConn reads and writes a plain socket (TCP or Unix) with raw system
// calls, waiting for readiness in Go's network poller as net.Conn does.
//
// Why: the sockets are non-blocking, so a read or write never blocks, but
// net.Conn's calls go through the runtime's syscall entry and exit. When the
// thread is descheduled inside one (on a busy machine a write that wakes
// PostgreSQL often is), the runtime's monitor hands the processor to another
// thread, and the relay pays for the thread switches on the way back. A raw
// system call keeps the processor: the relay spends less CPU per
// transaction (docs/benchmarks.md, "relay").
//
// Deadlines, Close from another goroutine and every other method behave as
// the wrapped connection's, which also does the waiting (syscall.RawConn).
//
// The trade-off: a raw call keeps its processor while in the kernel. On a
// non-blocking socket that is the time to copy one socket buffer, but a
// page fault on a swapped-out buffer or a socket lock held by the other
// side's softirq stalls every goroutine of this processor for as long (on
// a machine of two CPUs, half the goroutines).
//
// Race builds use net.Conn's own calls (rawio_other.go): RawSyscall is
// invisible to the race detector, which would neither see the kernel touch
// the buffers nor the happens-before edge net's calls give it. `make test`
// runs the wire and end-to-end tests once more without -race for this file.
type rawConn struct {
	net.Conn
	rc      syscall.RawConn
	network string // "tcp" or "unix", for errors

	// The calls in progress, one per direction.
	r, w rawCall
}

// rawCall holds the arguments and results of the call in progress in one
// direction, so that the callback handed to rc is allocated once (a
// closure per call would be a heap allocation per call).
type rawCall struct {
	mu    sync.Mutex
	buf   []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// rawIO wraps c in a rawConn when it is a plain socket; anything else (a TLS
// connection, a pipe) is returned as it is.
func rawIO(c net.Conn) net.Conn {
	var sc syscall.Conn
	network := "tcp"
	switch t := c.(type) {
	case *net.TCPConn:
		sc = t
	case *net.UnixConn:
		sc, network = t, "unix"
	default:
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawConn{Conn: c, rc: rc, network: network}
	r.r.fn = r.read
	r.w.fn = r.write
	return r
}

// read is called by rc.Read with the socket; false means wait for it to be
// readable and call again.
//
// It reads before it waits, as net.Conn does, even after a short read that
// makes EAGAIN likely: rc.Read forgets a readiness the poller has already
// reported (it resets it before calling read), so waiting first could wait
// for data that has arrived.
func (c *rawConn) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.r.buf[0])), uintptr(len(c.r.buf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.r.n, c.r.errno = int(n), e
		return true
	}
}

// write is called by rc.Write; it writes all of w.buf unless an error stops
// it.
func (c *rawConn) write(fd uintptr) bool {
	for c.w.n < len(c.w.buf) {
		b := c.w.buf[c.w.n:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			if n == 0 {
				c.w.errno = syscall.EIO // as net does with io.ErrUnexpectedEOF: never loop on no progress
				return true
			}
			c.w.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.w.errno = e
			return true
		}
	}
	return true
}

func (c *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 { // no system call, but a closed connection still says so
		return 0, c.callError("read", c.rc.Read(noCall), 0)
	}
	n, errno, err := c.call(&c.r, b, false)
	if err := c.callError("read", err, errno); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (c *rawConn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, c.callError("write", c.rc.Write(noCall), 0)
	}
	n, errno, err := c.call(&c.w, b, true)
	return n, c.callError("write", err, errno)
}

// call makes one read (write false) or write of b through rc, with d's
// callback and under d's lock, and returns its results: the bytes moved,
// the system call's error and rc's own.
func (c *rawConn) call(d *rawCall, b []byte, write bool) (int, syscall.Errno, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.buf, d.n, d.errno = b, 0, 0
	var err error
	if write {
		err = c.rc.Write(d.fn)
	} else {
		err = c.rc.Read(d.fn)
	}
	n, errno := d.n, d.errno
	d.buf = nil
	return n, errno, err
}

// noCall stands for the system call of a read or write of no bytes: there
// is none, and rc.Read or rc.Write only checks that the connection is open.
func noCall(uintptr) bool { return true }

// callError is the error of a read or write (op) that rc reported as err
// and the system call as errno, or nil when neither failed.
func (c *rawConn) callError(op string, err error, errno syscall.Errno) error {
	switch {
	case err != nil:
		return c.opError(op, err)
	case errno != 0:
		return c.opError(op, os.NewSyscallError(op, errno))
	}
	return nil
}

// opError wraps err as net.Conn's methods do, keeping what it wraps: a
// closed connection is still net.ErrClosed, a deadline a timeout.
func (c *rawConn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: c.network, Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// detach takes the socket out of Go's poller and returns a descriptor of
// its own for it, for an event loop that waits for it in an epoll set of
// its own (loop_linux.go). Go's poller would otherwise wake a thread for
// every message the loop relays, only to find nobody waiting.
//
// The descriptor is a duplicate (close-on-exec); closing the connection's
// own descriptor unregisters it from the poller, and the socket stays open
// through the duplicate. Until attach, the connection is closed: nothing
// may use it, which the loop guarantees (a session leaves the loop before
// anything else writes to or closes its connections). On error the
// connection is unchanged.
func (c *rawConn) detach() (int, error) {
	fd := -1
	var errno syscall.Errno
	err := c.rc.Control(func(s uintptr) {
		r, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		fd, errno = int(r), e
	})
	switch {
	case err != nil:
		return -1, err
	case errno != 0:
		return -1, os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", errno)
	}
	if err := c.Conn.Close(); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// attach makes fd, from detach, the connection's socket again, waited for
// in Go's poller, and closes fd. On error the socket is closed too (fd was
// its last descriptor) and the connection stays closed: reads and writes
// fail with net.ErrClosed.
func (c *rawConn) attach(fd int) error {
	// Blocking for a moment, so that os.NewFile does not add it to the
	// poller only for FileConn to take a copy; FileConn makes the socket
	// non-blocking again (the flag belongs to the socket, shared by both
	// descriptors).
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return os.NewSyscallError("fcntl O_NONBLOCK", err)
	}
	f := os.NewFile(uintptr(fd), c.network+" socket")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		nc.Close()
		return fmt.Errorf("socket came back as %T", nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		nc.Close()
		return err
	}
	c.Conn, c.rc = nc, rc
	return nil
}
