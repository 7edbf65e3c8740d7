//go:build linux && !race

package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newLoopRelay starts a session in the steady state on TCP sockets, as the
// server runs it: in the event loop first, then in its goroutines. client
// and up are the test's ends; done closes when the session is over.
func newLoopRelay(t testing.TB, srv *Server) (sess *session, client, up net.Conn, done chan struct{}) {
	c, cEnd := plainPair(t, "tcp")
	u, uEnd := plainPair(t, "tcp")
	m := &srv.metrics
	sess = newSession(srv, countedConn{rawIO(cEnd), &m.bytesFromClients, &m.bytesToClients})
	sess.up = countedConn{rawIO(uEnd), &m.bytesFromUpstream, &m.bytesToUpstream}
	done = make(chan struct{})
	go func() {
		defer close(done)
		defer sess.close()
		sess.steady(handoff{})
	}()
	t.Cleanup(func() {
		c.Close()
		u.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("session did not end")
		}
	})
	return sess, c, u, done
}

func loopServer(t testing.TB, h Handler) *Server {
	s, err := NewServer(Config{Upstream: "postgres://127.0.0.1:1/?sslmode=disable", Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	// Its loops end with the test's sessions, not loopLinger after.
	t.Cleanup(s.loops.close)
	return s
}

// inLoop reports whether the event loop holds the session.
func inLoop(sess *session) bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.leave != nil
}

// waitInLoop waits until the session is in the event loop.
func waitInLoop(t testing.TB, sess *session) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !inLoop(sess); {
		if time.Now().After(deadline) {
			t.Fatal("the session never entered the event loop")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitOutOfLoop waits until the session's relay goroutine has taken it
// back from the event loop: leaveLoop returns once the loop has let go of
// the sockets, a moment before that goroutine clears session.leave.
func waitOutOfLoop(t testing.TB, sess *session) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); inLoop(sess); {
		if time.Now().After(deadline) {
			t.Fatal("the session is still in the loop")
		}
		time.Sleep(time.Millisecond)
	}
}

// readN reads exactly n bytes from c within a few seconds.
func readN(t testing.TB, c net.Conn, n int) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

// The loop relays requests and replies byte for byte, across reads that
// split messages anywhere, and keeps the relay's books (ReadyForQuery, the
// counters) as the goroutines do.
func TestLoopRelays(t *testing.T) {
	srv := loopServer(t, nil)
	sess, client, up, _ := newLoopRelay(t, srv)
	waitInLoop(t, sess)
	req := bytes.Join([][]byte{
		msg('Q', "select 1\x00"),
		msg('P', "\x00select $1\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"),
		msg('D', "P\x00"), msg('E', "\x00\x00\x00\x00\x00"), msg('S', ""),
		msg('P', "s\x00select 2\x00\x00\x00"), msg('H', ""),
	}, nil)
	for i := range req { // one byte at a time
		if _, err := client.Write(req[i : i+1]); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if got := readN(t, up, len(req)); !bytes.Equal(got, req) {
		t.Fatalf("upstream got %q, want %q", got, req)
	}
	reply := bytes.Join([][]byte{
		msg('T', "\x00\x01a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x17\x00\x04\xff\xff\xff\xff\x00\x00"),
		msg('D', "\x00\x01\x00\x00\x00\x011"), msg('C', "SELECT 1\x00"), msg('Z', "I"),
		msg('1', ""), msg('2', ""), msg('n', ""), msg('D', "\x00\x01\x00\x00\x00\x011"), msg('C', "SELECT 1\x00"), msg('Z', "T"),
		msg('1', ""),
	}, nil)
	for _, part := range [][]byte{reply[:3], reply[3:40], reply[40:]} {
		up.Write(part)
		time.Sleep(time.Millisecond)
	}
	if got := readN(t, client, len(reply)); !bytes.Equal(got, reply) {
		t.Fatalf("client got %q, want %q", got, reply)
	}
	if n, status := (&Session{ss: sess}).ReadyForQuery(); n != 2 || status != 'T' {
		t.Errorf("ReadyForQuery count %d status %q, want 2 'T'", n, status)
	}
	sess.relay.mu.Lock()
	pending := string(sess.relay.pending)
	sess.relay.mu.Unlock()
	if pending != "" {
		t.Errorf("pending %q after every reply, want none", pending)
	}
	if !inLoop(sess) {
		t.Error("the session left the event loop")
	}
	m := srv.Metrics()
	if got := m.messagesFromClients.Load(); got != 8 {
		t.Errorf("messages from the client: %d, want 8", got)
	}
	if got := m.messagesFromUpstream.Load(); got != 11 {
		t.Errorf("messages from the upstream: %d, want 11", got)
	}
	if got := m.bytesToUpstream.Load(); got != int64(len(req)) {
		t.Errorf("bytes to the upstream: %d, want %d", got, len(req))
	}
	if got := m.bytesToClients.Load(); got != int64(len(reply)) {
		t.Errorf("bytes to the client: %d, want %d", got, len(reply))
	}
}

// A request the Handler wants makes the session leave the loop; the
// goroutines serve it after the replies to what the loop forwarded, relay
// what follows, and, the session quiet, give it back to the loop.
func TestLoopLeavesForHandler(t *testing.T) {
	sess, client, up, _ := newLoopRelay(t, loopServer(t, interceptX{}))
	waitInLoop(t, sess)
	client.Write(bytes.Join([][]byte{msg('Q', "select 1\x00"), msg('Q', "x\x00"), msg('Q', "select 2\x00")}, nil))
	first := msg('Q', "select 1\x00")
	if got := readN(t, up, len(first)); !bytes.Equal(got, first) {
		t.Fatalf("upstream got %q, want %q", got, first)
	}
	time.Sleep(50 * time.Millisecond) // the Handler waits for this reply
	reply := bytes.Join([][]byte{msg('C', "SELECT 1\x00"), msg('Z', "I")}, nil)
	up.Write(reply)
	served := bytes.Join([][]byte{msg('I', ""), msg('Z', "I")}, nil)
	want := append(append([]byte{}, reply...), served...)
	if got := readN(t, client, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("client got %q, want %q", got, want)
	}
	third := msg('Q', "select 2\x00")
	if got := readN(t, up, len(third)); !bytes.Equal(got, third) {
		t.Fatalf("upstream got %q, want %q", got, third)
	}
	up.Write(reply)
	if got := readN(t, client, len(reply)); !bytes.Equal(got, reply) {
		t.Fatalf("client got %q, want %q", got, reply)
	}
	// Quiet after the served request, the session goes back to the loop,
	// which relays what follows and hands the next wanted request over
	// again.
	waitInLoop(t, sess)
	for round := range 3 {
		q := msg('Q', fmt.Sprintf("select %d\x00", round))
		client.Write(q)
		if got := readN(t, up, len(q)); !bytes.Equal(got, q) {
			t.Fatalf("round %d: upstream got %q, want %q", round, got, q)
		}
		up.Write(reply)
		if got := readN(t, client, len(reply)); !bytes.Equal(got, reply) {
			t.Fatalf("round %d: client got %q, want %q", round, got, reply)
		}
		if !inLoop(sess) {
			t.Fatalf("round %d: a passed-through query took the session out of the loop", round)
		}
		client.Write(msg('Q', "x\x00"))
		if got := readN(t, client, len(served)); !bytes.Equal(got, served) {
			t.Fatalf("round %d: client got %q, want the served request's %q", round, got, served)
		}
		waitInLoop(t, sess)
	}
}

// The loop forwards each message the Handler does not want as it comes,
// not at the end of its group. When a wanted Parse follows in the same
// group, the session leaves the loop owing the replies to what went ahead:
// they reach the client before the served request's.
func TestLoopForwardsAtOnce(t *testing.T) {
	sess, client, up, _ := newLoopRelay(t, loopServer(t, interceptX{}))
	waitInLoop(t, sess)
	parse := msg('P', "\x00select 1\x00\x00\x00")
	client.Write(parse)
	if got := readN(t, up, len(parse)); !bytes.Equal(got, parse) {
		t.Fatalf("upstream got %q, want the Parse before its Sync", got)
	}
	if !inLoop(sess) {
		t.Fatal("the session left the loop")
	}
	client.Write(bytes.Join([][]byte{msg('P', "\x00x\x00\x00\x00"), msg('S', "")}, nil))
	if got, want := readN(t, up, 5), msg('H', ""); !bytes.Equal(got, want) {
		t.Fatalf("upstream got %q, want the relay's Flush %q", got, want)
	}
	up.Write(msg('1', ""))
	want := bytes.Join([][]byte{msg('1', ""), msg('I', ""), msg('Z', "I")}, nil)
	if got := readN(t, client, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("client got %q, want %q", got, want)
	}
}

// A session whose statement the Handler owns goes back to the loop all the
// same: the loop hands it over again for a message naming that statement,
// and relays the rest.
func TestLoopOwnedStatement(t *testing.T) {
	sess, client, up, _ := newLoopRelay(t, loopServer(t, interceptX{}))
	waitInLoop(t, sess)
	served := bytes.Join([][]byte{msg('I', ""), msg('Z', "I")}, nil)
	client.Write(bytes.Join([][]byte{msg('P', "s\x00x\x00\x00\x00"), msg('S', "")}, nil))
	if got := readN(t, client, len(served)); !bytes.Equal(got, served) {
		t.Fatalf("client got %q, want the served Parse's %q", got, served)
	}
	waitInLoop(t, sess)
	for round := range 2 {
		q := msg('Q', "select 1\x00")
		client.Write(q)
		if got := readN(t, up, len(q)); !bytes.Equal(got, q) {
			t.Fatalf("round %d: upstream got %q, want %q", round, got, q)
		}
		reply := bytes.Join([][]byte{msg('C', "SELECT 1\x00"), msg('Z', "I")}, nil)
		up.Write(reply)
		if got := readN(t, client, len(reply)); !bytes.Equal(got, reply) {
			t.Fatalf("round %d: client got %q, want %q", round, got, reply)
		}
		client.Write(bytes.Join([][]byte{msg('B', "\x00s\x00\x00\x00\x00\x00\x00\x00"), msg('E', "\x00\x00\x00\x00\x00"), msg('S', "")}, nil))
		if got := readN(t, client, len(served)); !bytes.Equal(got, served) {
			t.Fatalf("round %d: client got %q, want the served Bind's %q", round, got, served)
		}
		waitInLoop(t, sess)
	}
	// Nothing of the statement the Handler owns reached the upstream.
	up.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := up.Read(make([]byte, 64)); n > 0 {
		t.Errorf("upstream got %d more bytes", n)
	}
}

// A client that does not read makes the session leave the loop when its
// socket is full; nothing is lost or reordered.
func TestLoopClientSocketFull(t *testing.T) {
	sess, client, up, _ := newLoopRelay(t, loopServer(t, nil))
	waitInLoop(t, sess)
	row := msg('D', "\x00\x01\x00\x00\x03\xe8"+strings.Repeat("r", 1000))
	var want []byte
	for len(want) < 48<<20 {
		want = append(want, row...)
	}
	want = append(want, msg('Z', "I")...)
	go up.Write(want)
	time.Sleep(100 * time.Millisecond) // the sockets fill up
	if inLoop(sess) {
		t.Error("the session is still in the event loop with the client's socket full")
	}
	if got := readN(t, client, len(want)); !bytes.Equal(got, want) {
		t.Fatal("the client got other bytes than the upstream sent")
	}
	client.Write(msg('Q', "select 1\x00"))
	if got := readN(t, up, 14); !bytes.Equal(got, msg('Q', "select 1\x00")) {
		t.Fatalf("upstream got %q", got)
	}
}

// A request bigger than the loop's buffer grows it, up to the inspect size;
// a bigger one goes to the goroutines, which stream it.
func TestLoopBigRequests(t *testing.T) {
	sess, client, up, _ := newLoopRelay(t, loopServer(t, nil))
	waitInLoop(t, sess)
	for _, size := range []int{200 << 10, 3 << 20} {
		q := msg('Q', "select '"+strings.Repeat("q", size)+"'\x00")
		go client.Write(q)
		if got := readN(t, up, len(q)); !bytes.Equal(got, q) {
			t.Fatalf("%d-byte query: the upstream got other bytes", size)
		}
		if want := size < 1<<20; inLoop(sess) != want {
			t.Errorf("%d-byte query: in the event loop %v, want %v", size, !want, want)
		}
	}
}

// An abort (as Shutdown's) takes the session out of the loop before it
// writes the FATAL message.
func TestLoopAbort(t *testing.T) {
	sess, client, _, done := newLoopRelay(t, loopServer(t, nil))
	waitInLoop(t, sess)
	sess.abort(sqlstateAdminShutdown, "terminating connection: shutting down")
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 5 || got[0] != 'E' || !bytes.Contains(got, []byte("57P01")) {
		t.Fatalf("client got %q, want a FATAL 57P01", got)
	}
	<-done
}

// The loop's goroutine outlives its last session by loopLinger, and ends
// then, or at once when the server shuts down; it starts again with the
// next session.
func TestLoopEndsWithLastSession(t *testing.T) {
	srv := loopServer(t, nil)
	for round := range 3 {
		sess, client, up, done := newLoopRelay(t, srv)
		waitInLoop(t, sess)
		client.Close()
		up.Close()
		<-done
		if running := runningLoops(srv); running != 1 {
			t.Fatalf("round %d: %d event loops run right after the last session, want 1 (lingering)", round, running)
		}
		if round == 2 {
			start := time.Now()
			srv.loops.close()
			waitLoopsEnd(t, srv)
			if d := time.Since(start); d > loopLinger*time.Millisecond/2 {
				t.Fatalf("the loop ended %v after the server closed its loops, want at once", d)
			}
			continue
		}
		start := time.Now()
		waitLoopsEnd(t, srv)
		if d := time.Since(start); d < loopLinger*time.Millisecond/2 {
			t.Fatalf("round %d: the loop ended %v after its last session, want about %dms", round, d, loopLinger)
		}
	}
}

// runningLoops is the number of event loops of srv that run.
func runningLoops(srv *Server) int {
	running := 0
	for i := range srv.loops.slots {
		slot := &srv.loops.slots[i]
		slot.mu.Lock()
		if slot.loop != nil {
			running++
		}
		slot.mu.Unlock()
	}
	return running
}

// FuzzLoopRelay is FuzzRelay through the event loop: arbitrary bytes from
// both sides, which then hang up, neither panic nor hang the session.
func FuzzLoopRelay(f *testing.F) {
	f.Add([]byte("Q\x00\x00\x00\x0dselect 1\x00"), []byte("Z\x00\x00\x00\x05I"))
	f.Add(bytes.Join([][]byte{msg('P', "s\x00x\x00\x00\x00"), msg('B', "\x00s\x00\x00\x00\x00\x00\x00\x00"),
		msg('E', "\x00\x00\x00\x00\x00"), msg('S', "")}, nil), []byte{})
	f.Add(bytes.Join([][]byte{msg('Q', "select\x00"), msg('Q', "x\x00"), msg('H', ""), msg('X', "")}, nil),
		bytes.Join([][]byte{msg('Z', "I"), msg('E', "SFATAL\x00\x00")}, nil))
	f.Add([]byte("Q\x00\x00\x00\x03"), []byte("Z\x00\x00\x00\x00"))
	f.Add(msg('S', ""), binary.BigEndian.AppendUint32([]byte("Z\x00\x00\x00\x05ID"), 3))
	srv := fuzzServer(f, interceptX{})
	f.Fuzz(func(t *testing.T, fromClient, fromUpstream []byte) {
		sess, client, up, done := newLoopRelay(t, srv)
		go io.Copy(io.Discard, client)
		go io.Copy(io.Discard, up)
		waitInLoop(t, sess)
		up.Write(fromUpstream)
		client.Write(fromClient)
		up.(*net.TCPConn).CloseWrite()
		client.(*net.TCPConn).CloseWrite()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the session hangs")
		}
	})
}

// While the loop relays a session, its sockets are in the loop's epoll set
// only, not in Go's poller too (which would wake a thread for every message
// the loop relays); they are back in Go's poller, and work there, once the
// session has left.
func TestLoopTakesSocketsFromGoPoller(t *testing.T) {
	c, cEnd := plainPair(t, "tcp")
	u, uEnd := plainPair(t, "tcp")
	srv := loopServer(t, nil)
	m := &srv.metrics
	sess := newSession(srv, countedConn{rawIO(cEnd), &m.bytesFromClients, &m.bytesToClients})
	sess.up = countedConn{rawIO(uEnd), &m.bytesFromUpstream, &m.bytesToUpstream}
	cIno, uIno, goIno := socketInode(t, cEnd), socketInode(t, uEnd), socketInode(t, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer sess.close()
		sess.steady(handoff{})
	}()
	defer func() {
		c.Close()
		u.Close()
		<-done
	}()
	waitInLoop(t, sess)

	// in lists the epoll sets that hold each socket.
	in := func() (client, upstream, goPoller []string) {
		for set, socks := range epollSets(t) {
			if socks[cIno] {
				client = append(client, set)
			}
			if socks[uIno] {
				upstream = append(upstream, set)
			}
			if socks[goIno] {
				goPoller = append(goPoller, set)
			}
		}
		return client, upstream, goPoller
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		cs, us, gs := in()
		if len(cs) == 1 && len(us) == 1 && len(gs) == 1 && cs[0] == us[0] && cs[0] != gs[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in the loop, the client's socket is in epoll sets %v, the upstream's in %v; Go's poller is %v", cs, us, gs)
		}
		time.Sleep(time.Millisecond)
	}
	q := msg('Q', "select 1\x00")
	c.Write(q)
	if got := readN(t, u, len(q)); !bytes.Equal(got, q) {
		t.Fatalf("upstream got %q through the loop, want %q", got, q)
	}

	sess.leaveLoop()
	waitOutOfLoop(t, sess)
	cs, us, gs := in()
	if len(cs) != 1 || len(us) != 1 || len(gs) != 1 || cs[0] != gs[0] || us[0] != gs[0] {
		t.Fatalf("out of the loop, the client's socket is in epoll sets %v, the upstream's in %v; Go's poller is %v", cs, us, gs)
	}
	reply := bytes.Join([][]byte{msg('C', "SELECT 1\x00"), msg('Z', "I")}, nil)
	u.Write(reply)
	if got := readN(t, c, len(reply)); !bytes.Equal(got, reply) {
		t.Fatalf("client got %q from the goroutines, want %q", got, reply)
	}
	c.Write(q)
	if got := readN(t, u, len(q)); !bytes.Equal(got, q) {
		t.Fatalf("upstream got %q from the goroutines, want %q", got, q)
	}
}

// socketInode names the socket under c as /proc does ("socket:[N]").
func socketInode(t testing.TB, c net.Conn) string {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var link string
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		link, lerr = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	}); err != nil || lerr != nil {
		t.Fatal(err, lerr)
	}
	return link
}

// epollSets returns, for each epoll descriptor of the process, the sockets
// it waits for, as socketInode names them.
func epollSets(t testing.TB) map[string]map[string]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]map[string]bool{}
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err != nil || link != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + fd.Name())
		if err != nil {
			continue // closed meanwhile
		}
		socks := map[string]bool{}
		for _, line := range strings.Split(string(info), "\n") {
			var target int
			if _, err := fmt.Sscanf(line, "tfd: %d", &target); err != nil {
				continue
			}
			if link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", target)); err == nil {
				socks[link] = true
			}
		}
		sets[fd.Name()] = socks
	}
	return sets
}

// A session that enters and leaves the loop again and again, then ends,
// leaves no descriptor behind: each duplicate the loop took is closed.
func TestLoopLeaksNoDescriptors(t *testing.T) {
	srv := loopServer(t, interceptX{})
	openFDs := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	// Other tests' servers' loops linger, then close their descriptors.
	time.Sleep(loopLinger*time.Millisecond + 200*time.Millisecond)
	before := openFDs()
	sess, client, up, done := newLoopRelay(t, srv)
	served := bytes.Join([][]byte{msg('I', ""), msg('Z', "I")}, nil)
	for round := range 5 {
		waitInLoop(t, sess)
		client.Write(msg('Q', "x\x00"))
		if got := readN(t, client, len(served)); !bytes.Equal(got, served) {
			t.Fatalf("round %d: client got %q, want %q", round, got, served)
		}
	}
	waitInLoop(t, sess)
	client.Close()
	up.Close()
	<-done
	waitLoopsEnd(t, srv)
	if after := openFDs(); after != before {
		t.Fatalf("%d descriptors open after the session, %d before", after, before)
	}
}

// waitLoopsEnd waits until no event loop of srv runs.
func waitLoopsEnd(t testing.TB, srv *Server) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		running := runningLoops(srv)
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d event loops still run without sessions", running)
		}
		time.Sleep(time.Millisecond)
	}
}
