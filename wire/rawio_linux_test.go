//go:build linux && !race

package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// plainPair returns both ends of a connection over network ("tcp" or
// "unix"), closed when the test ends.
func plainPair(t testing.TB, network string) (a, b net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		acc <- c
	}()
	d, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.FailNow()
	}
	t.Cleanup(func() { d.Close(); s.Close() })
	return d, s
}

// rawPair returns both ends of a connection over network ("tcp" or
// "unix"), each wrapped by rawIO.
func rawPair(t *testing.T, network string) (a, b net.Conn) {
	t.Helper()
	d, s := plainPair(t, network)
	a, b = rawIO(d), rawIO(s)
	for _, c := range []net.Conn{a, b} {
		if _, ok := c.(*rawConn); !ok {
			t.Fatalf("rawIO(%T) = %T, want *rawConn", d, c)
		}
	}
	return a, b
}

func TestRawConnStream(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			a, b := rawPair(t, network)
			// 8 MB outgrows the socket buffers: writes wait for room (EAGAIN)
			// while the reader's small reads are sometimes short.
			want := make([]byte, 8<<20)
			for i := range want {
				want[i] = byte(i*7 + i>>13)
			}
			werr := make(chan error, 1)
			go func() {
				_, err := a.Write(want)
				if err == nil {
					err = a.Close()
				}
				werr <- err
			}()
			var got bytes.Buffer
			buf := make([]byte, 3000)
			b.SetReadDeadline(time.Now().Add(30 * time.Second))
			for {
				n, err := b.Read(buf)
				got.Write(buf[:n])
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("read after %d bytes: %v", got.Len(), err)
				}
			}
			if err := <-werr; err != nil {
				t.Fatalf("write: %v", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("read %d bytes, not the %d written", got.Len(), len(want))
			}
		})
	}
}

// Reads that come up short, with data arriving before, during and after
// the next Read, lose nothing and do not hang.
func TestRawConnShortReads(t *testing.T) {
	a, b := rawPair(t, "tcp")
	buf := make([]byte, 100)
	for i, delay := range []time.Duration{0, 20 * time.Millisecond, 0, 5 * time.Millisecond, -1} {
		msg := []byte{'m', byte('0' + i)}
		if delay < 0 { // already queued when Read is called
			if _, err := a.Write(msg); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		} else {
			go func() {
				time.Sleep(delay)
				a.Write(msg)
			}()
		}
		b.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := b.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("message %d: read %q, %v; want %q", i, buf[:n], err, msg)
		}
	}
}

// Two goroutines relaying a request and its answer back and forth, as the
// relay's two loops do, with GOMAXPROCS > 1: a lost readiness hangs it.
func TestRawConnPingPong(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, b := rawPair(t, "tcp")
	const rounds = 20000
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for range rounds {
			n, err := b.Read(buf)
			if err == nil {
				_, err = b.Write(buf[:n])
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, 64)
	a.SetDeadline(time.Now().Add(30 * time.Second))
	for i := range rounds {
		msg := []byte{byte(i), byte(i >> 8)}
		if _, err := a.Write(msg); err != nil {
			t.Fatalf("round %d: write: %v", i, err)
		}
		for got := 0; got < len(msg); {
			n, err := a.Read(buf[got:])
			if err != nil {
				t.Fatalf("round %d: read: %v", i, err)
			}
			got += n
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRawConnDeadlineCloseEOF(t *testing.T) {
	a, b := rawPair(t, "tcp")
	buf := make([]byte, 16)

	b.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	_, err := b.Read(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	b.SetReadDeadline(time.Time{})

	done := make(chan error, 1)
	go func() {
		_, err := b.Read(buf)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on a closed connection: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Read")
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed connection: %v, want net.ErrClosed", err)
	}

	// The peer's side sees the end of the stream.
	if _, err := a.Read(buf); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
}

func TestRawConnNoAllocs(t *testing.T) {
	a, b := rawPair(t, "tcp")
	msg := []byte("Q\x00\x00\x00\x0dSELECT 1\x00")
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := a.Write(msg); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(msg); {
			n, err := b.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per write and read, want 0", allocs)
	}
}

func TestRawIOLeavesOtherConns(t *testing.T) {
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if c := rawIO(p); c != p {
		t.Fatalf("rawIO(net.Pipe end) = %T, want it unchanged", c)
	}
}

// A Write blocked on a peer that does not read is released by a write
// deadline (session.abort sets one from another goroutine) and by Close,
// reporting the bytes it wrote.
func TestRawConnBlockedWrite(t *testing.T) {
	big := make([]byte, 64<<20)
	for _, how := range []string{"deadline", "deadline from another goroutine", "close"} {
		t.Run(how, func(t *testing.T) {
			a, _ := rawPair(t, "tcp")
			type result struct {
				n   int
				err error
			}
			res := make(chan result, 1)
			if how == "deadline" {
				a.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			}
			go func() {
				n, err := a.Write(big)
				res <- result{n, err}
			}()
			time.Sleep(50 * time.Millisecond)
			switch how {
			case "deadline from another goroutine":
				a.SetWriteDeadline(time.Now())
			case "close":
				a.Close()
			}
			select {
			case r := <-res:
				if r.n <= 0 || r.n >= len(big) {
					t.Errorf("wrote %d of %d bytes, want some but not all", r.n, len(big))
				}
				var ne net.Error
				switch how {
				case "close":
					if !errors.Is(r.err, net.ErrClosed) {
						t.Errorf("error %v, want net.ErrClosed", r.err)
					}
				default:
					if !errors.Is(r.err, os.ErrDeadlineExceeded) || !errors.As(r.err, &ne) || !ne.Timeout() {
						t.Errorf("error %v, want a timeout", r.err)
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the blocked Write was not released")
			}
		})
	}
}

// A peer that resets the connection fails the Write (ECONNRESET or EPIPE)
// without a SIGPIPE ending the process.
func TestRawConnPeerReset(t *testing.T) {
	a, b := rawPair(t, "tcp")
	b.(*rawConn).Conn.(*net.TCPConn).SetLinger(0) // close sends RST
	b.Close()
	time.Sleep(20 * time.Millisecond)
	var err error
	for range 100 {
		if _, err = a.Write([]byte("after the reset")); err != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a reset connection: %v, want ECONNRESET or EPIPE", err)
	}
	if _, err := a.Read(make([]byte, 8)); err == nil {
		t.Fatal("read from a reset connection succeeded")
	}
	if n, err := a.Write(nil); n != 0 || err != nil {
		t.Fatalf("empty write: %d, %v; want 0, nil", n, err)
	}
	a.Close()
	if _, err := a.Write(nil); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("empty write on a closed connection: %v, want net.ErrClosed", err)
	}
}
