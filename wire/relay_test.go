package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// readMsgs reads typed messages from r and sends their types on ch.
func readMsgs(r io.Reader, ch chan<- byte) {
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			close(ch)
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[1:])) - 4
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			close(ch)
			return
		}
		ch <- hdr[0]
	}
}

// watch reads c's messages in the background and sends their types on the
// channel it returns, closed when c ends.
func watch(c net.Conn) chan byte {
	ch := make(chan byte, 100)
	go readMsgs(c, ch)
	return ch
}

func newRelay(t *testing.T, h Handler) (sess *session, client, up net.Conn, done chan struct{}) {
	srv := fuzzServer(t, h)
	client, clientEnd := net.Pipe()
	up, upEnd := net.Pipe()
	sess = newSession(srv, clientEnd)
	sess.up = upEnd
	done = make(chan struct{})
	go func() { sess.steady(handoff{}); close(done) }()
	return
}

// Regression tests for defects an independent review found in the relay,
// each with a fake upstream on a net.Pipe.

// A Flush-terminated group has no ReadyForQuery: a wanted request behind it
// is served only once the upstream's replies to that group have reached
// the client, in order (the relay asks for them with a Flush of its own).
func TestRelayFlushGroupHandover(t *testing.T) {
	_, client, up, done := newRelay(t, interceptX{})
	got := watch(client)
	upGot := watch(up)
	go func() {
		client.Write(bytes.Join([][]byte{
			msg('P', "\x00select pg_sleep(1)\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"), msg('E', "\x00\x00\x00\x00\x00"), msg('H', ""),
			msg('P', "\x00x\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"), msg('E', "\x00\x00\x00\x00\x00"), msg('S', ""),
		}, nil))
	}()
	// P B E H of the first group, then the relay's own Flush.
	if upSeen := collect(upGot, 5, 2*time.Second); upSeen != "PBEHH" {
		t.Fatalf("upstream got %q, want the first group and a Flush \"PBEHH\"", upSeen)
	}
	time.Sleep(100 * time.Millisecond) // the "slow" query runs
	up.Write(bytes.Join([][]byte{msg('1', ""), msg('2', ""), msg('C', "SELECT 1\x00")}, nil))
	if order := collect(got, 5, 2*time.Second); order != "12CIZ" {
		t.Errorf("client saw %q, want the Flush group's replies, then the served request's \"12CIZ\"", order)
	}
	if extra := collect(upGot, 1, 200*time.Millisecond); extra != "" {
		t.Errorf("the served request reached the upstream: %q", extra)
	}
	client.Close()
	up.Close()
	<-done
}

// An error among the replies owed to an unsynced group makes the upstream
// skip up to Sync: a wanted request behind it goes upstream unseen.
func TestRelayOwedError(t *testing.T) {
	_, client, up, done := newRelay(t, interceptX{})
	got := watch(client)
	upGot := watch(up)
	go client.Write(bytes.Join([][]byte{
		msg('P', "\x00select 1/0\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"), msg('E', "\x00\x00\x00\x00\x00"), msg('H', ""),
		msg('P', "\x00x\x00\x00\x00"), msg('S', ""),
	}, nil))
	if upSeen := collect(upGot, 5, 2*time.Second); upSeen != "PBEHH" {
		t.Fatalf("upstream got %q, want \"PBEHH\"", upSeen)
	}
	up.Write(bytes.Join([][]byte{msg('1', ""), msg('2', ""), msg('E', "SERROR\x00C22012\x00Mdivision by zero\x00\x00")}, nil))
	if upSeen := collect(upGot, 2, 2*time.Second); upSeen != "PS" {
		t.Fatalf("upstream got %q after the error, want the wanted request \"PS\"", upSeen)
	}
	up.Write(msg('Z', "I"))
	if order := collect(got, 4, 2*time.Second); order != "12EZ" {
		t.Errorf("client saw %q, want \"12EZ\"", order)
	}
	client.Close()
	up.Close()
	<-done
}

// Messages the Handler does not want go upstream as they come, not held
// back until the Sync that ends their group: a statement_timeout between a
// Parse and its Describe fires as it would without the proxy.
func TestRelayForwardsAtOnce(t *testing.T) {
	_, client, up, done := newRelay(t, interceptX{})
	upGot := watch(up)
	client.Write(msg('P', "\x00select 1\x00\x00\x00"))
	if upSeen := collect(upGot, 1, 2*time.Second); upSeen != "P" {
		t.Fatalf("upstream got %q before the Describe, want the Parse", upSeen)
	}
	client.Write(bytes.Join([][]byte{msg('D', "S\x00"), msg('S', "")}, nil))
	if upSeen := collect(upGot, 2, 2*time.Second); upSeen != "DS" {
		t.Fatalf("upstream got %q, want \"DS\"", upSeen)
	}
	client.Close()
	up.Close()
	<-done
}

// collect reads up to n message types from ch within d.
func collect(ch <-chan byte, n int, d time.Duration) string {
	var out []byte
	timeout := time.After(d)
	for len(out) < n {
		select {
		case b, ok := <-ch:
			if !ok {
				return string(out)
			}
			out = append(out, b)
		case <-timeout:
			return string(out)
		}
	}
	return string(out)
}

// Messages the relay does not inspect must not pile up behind a held-back
// group: they end the group and go upstream.
func TestRelayHeldGroupUnbounded(t *testing.T) {
	_, client, up, done := newRelay(t, Passthrough{})
	var upBytes int64
	var mu sync.Mutex
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, err := up.Read(buf)
			mu.Lock()
			upBytes += int64(n)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go io.Copy(io.Discard, client)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	client.Write(msg('P', "\x00select 1\x00\x00\x00"))
	d := msg('d', string(make([]byte, 16000)))
	chunk := bytes.Repeat(d, 64) // ~1 MB
	for range 64 * 64 {
		client.Write(d) // one message per write: each read holds whole messages
	}
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	mu.Lock()
	got := upBytes
	mu.Unlock()
	grew := int64(ms.HeapInuse) - int64(before)
	if sent := int64(64 * len(chunk)); got < sent || grew > 16<<20 {
		t.Errorf("client sent %d bytes after one Parse; upstream received %d; heap grew by %d MB", sent, got, grew>>20)
	}
	client.Close()
	up.Close()
	<-done
}

// Shutdown must end a session whose client does not read, although the
// upstream loop is blocked writing to it.
func TestRelayShutdownStalledClient(t *testing.T) {
	srv := fuzzServer(t, nil)
	client, clientEnd := net.Pipe()
	up, upEnd := net.Pipe()
	_ = client // never read
	sess := newSession(srv, clientEnd)
	sess.up = upEnd
	srv.mu.Lock()
	srv.sessions[sess] = struct{}{}
	srv.wg.Add(1)
	srv.mu.Unlock()
	go func() {
		defer srv.wg.Done()
		sess.steady(handoff{})
		srv.mu.Lock()
		delete(srv.sessions, sess)
		srv.mu.Unlock()
	}()
	go func() { // a big result the client is not reading
		for {
			if _, err := up.Write(msg('D', string(make([]byte, 8000)))); err != nil {
				return
			}
		}
	}()
	go io.Copy(io.Discard, up)
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ret := make(chan error, 1)
	go func() { ret <- srv.Shutdown(ctx) }()
	select {
	case <-ret:
	case <-time.After(3 * time.Second):
		client.Close() // unblock, to clean up
		up.Close()
		<-ret
		t.Fatal("Shutdown still blocked 3 s after a 100 ms timeout")
	}
}

// The reply before a handover reaches the client before the Handler can
// write: a Handler that answers at once must not overtake it.
func TestRelayGrantBeforeDeliver(t *testing.T) {
	bad := 0
	const runs = 1000
	for range runs {
		_, client, up, done := newRelay(t, interceptX{})
		got := watch(client)
		upGot := watch(up)
		go client.Write(append(msg('Q', "select 1\x00"), msg('Q', "x\x00")...))
		<-upGot
		up.Write(bytes.Join([][]byte{msg('C', "SELECT 1\x00"), msg('Z', "I")}, nil))
		var order []byte
		for range 4 {
			order = append(order, <-got)
		}
		if string(order) != "CZIZ" {
			bad++
			if bad == 1 {
				t.Logf("client saw %q, want \"CZIZ\"", order)
			}
		}
		client.Close()
		up.Close()
		<-done
	}
	if bad > 0 {
		t.Errorf("%d of %d misordered", bad, runs)
	}
}

// fwdHandler forwards the request and relays the replies up to ReadyForQuery.
type fwdHandler struct{}

func (fwdHandler) Intercept(sql []byte) bool { return len(sql) > 0 && sql[0] == 'x' }
func (fwdHandler) Serve(_ context.Context, req *Request, s *Session) error {
	for _, m := range req.Messages {
		s.Frontend.Send(m)
	}
	if err := s.Frontend.Flush(); err != nil {
		return err
	}
	for {
		m, err := s.Frontend.Receive()
		if err != nil {
			return err
		}
		s.Send(m)
		if _, ok := m.(*pgproto3.ReadyForQuery); ok {
			return s.Flush()
		}
	}
}

// Leftovers of one handover's chunk (an async notice after its
// ReadyForQuery) must go to the client, not into the next handover's pipe.
func TestRelayPipeSwap(t *testing.T) {
	hung := 0
	for range 100 {
		_, client, up, done := newRelay(t, fwdHandler{})
		go io.Copy(io.Discard, client)
		upGot := watch(up)
		go client.Write(append(msg('Q', "x1\x00"), msg('Q', "x2\x00")...))
		<-upGot
		// Z of the first request and an async notice in one chunk.
		go up.Write(bytes.Join([][]byte{msg('C', "SELECT 1\x00"), msg('Z', "I"), msg('N', "SNOTICE\x00Mhello world\x00\x00")}, nil))
		select {
		case <-upGot: // the second request reached the upstream
			up.Write(bytes.Join([][]byte{msg('C', "SELECT 1\x00"), msg('Z', "I")}, nil))
		case <-time.After(time.Second):
			hung++
		}
		client.Close()
		up.Close()
		<-done
	}
	if hung > 0 {
		t.Errorf("%d of 100 hung", hung)
	}
}

// COPY FROM STDIN through the extended protocol as libpq sends it: the
// server ignores the Sync after Execute during copy-in, so one ReadyForQuery
// answers two Syncs; the relay must not wait for a second one.
func TestRelayCopySyncCount(t *testing.T) {
	sess, client, up, done := newRelay(t, fwdHandler{})
	got := watch(client)
	upGot := watch(up)
	client.Write(bytes.Join([][]byte{
		msg('P', "\x00copy t from stdin\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"),
		msg('D', "P\x00"), msg('E', "\x00\x00\x00\x00\x00"), msg('S', ""),
	}, nil))
	for range 5 {
		<-upGot
	}
	up.Write(bytes.Join([][]byte{msg('1', ""), msg('2', ""), msg('n', ""), msg('G', "\x00\x00\x00")}, nil))
	for range 4 {
		<-got
	}
	client.Write(bytes.Join([][]byte{msg('d', "1\n"), msg('c', ""), msg('S', "")}, nil))
	for range 3 {
		<-upGot
	}
	up.Write(bytes.Join([][]byte{msg('C', "COPY 1\x00"), msg('Z', "I")}, nil))
	<-got
	<-got
	sess.relay.mu.Lock()
	pending := string(sess.relay.pending)
	sess.relay.mu.Unlock()
	if pending != "" {
		t.Errorf("after the COPY, pending requests %q, want none", pending)
	}
	go client.Write(msg('Q', "x\x00"))
	select {
	case <-upGot:
		up.Write(bytes.Join([][]byte{msg('I', ""), msg('Z', "I")}, nil))
	case <-time.After(time.Second):
		t.Error("the wanted query never reached the upstream")
	}
	client.Close()
	select {
	case <-done:
	case <-time.After(time.Second):
		up.Close()
		<-done
		t.Error("session still running 1 s after the client left")
	}
}

type recHandler struct {
	mu   sync.Mutex
	reqs [][]string
}

func (h *recHandler) Intercept(sql []byte) bool { return len(sql) > 0 && sql[0] == 'x' }
func (h *recHandler) Serve(_ context.Context, req *Request, s *Session) error {
	var names []string
	for _, m := range req.Messages {
		switch m := m.(type) {
		case *pgproto3.Parse:
			names = append(names, "Parse("+m.Query[:min(10, len(m.Query))]+")")
		case *pgproto3.Bind:
			names = append(names, "Bind(stmt="+m.PreparedStatement+")")
		case *pgproto3.Execute:
			names = append(names, "Execute")
		case *pgproto3.Sync:
			names = append(names, "Sync")
		}
	}
	h.mu.Lock()
	h.reqs = append(h.reqs, names)
	h.mu.Unlock()
	s.Send(&pgproto3.ParseComplete{})
	s.Send(&pgproto3.BindComplete{})
	s.Send(&pgproto3.EmptyQueryResponse{})
	s.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return s.Flush()
}

// A Parse too big to inspect replaces the unnamed statement upstream: later
// Binds of it go upstream, not to the Handler that had the old one.
func TestRelayStaleUnnamed(t *testing.T) {
	h := &recHandler{}
	_, client, up, done := newRelay(t, h)
	go io.Copy(io.Discard, client)
	go io.Copy(io.Discard, up)
	bes := bytes.Join([][]byte{msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"), msg('E', "\x00\x00\x00\x00\x00"), msg('S', "")}, nil)
	client.Write(append(msg('P', "\x00x small\x00\x00\x00"), bes...))
	big := "select 1 /*" + string(bytes.Repeat([]byte("a"), 50000)) + "*/"
	_, err := client.Write(msg('P', "\x00"+big+"\x00\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	client.Write(bes)
	time.Sleep(200 * time.Millisecond)
	h.mu.Lock()
	if len(h.reqs) != 1 {
		t.Errorf("handler got %d requests, want only the first: %v", len(h.reqs), h.reqs)
	}
	h.mu.Unlock()
	client.Close()
	up.Close()
	<-done
}

// A Bind too big to inspect inside a group that began with a small Parse
// (libpq's PQexecParams with a large parameter) streams through, and the
// relay counts the group's Sync: no panic, every byte upstream.
func TestRelayBigBindInGroup(t *testing.T) {
	sess, client, up, done := newRelay(t, Passthrough{})
	go io.Copy(io.Discard, client)
	var upBuf bytes.Buffer
	upDone := make(chan struct{})
	go func() { io.Copy(&upBuf, up); close(upDone) }()
	param := bytes.Repeat([]byte{0xab}, 50000) // over the test config's InspectSize of 1 KiB
	bind := append([]byte("\x00\x00\x00\x00\x00\x01"), binary.BigEndian.AppendUint32(nil, uint32(len(param)))...)
	bind = append(append(bind, param...), 0, 0)
	in := bytes.Join([][]byte{msg('P', "\x00insert into t values ($1)\x00\x00\x00"), msg('D', "S\x00"),
		appendMessage(nil, 'B', bind), msg('D', "P\x00"), msg('E', "\x00\x00\x00\x00\x00"), msg('S', "")}, nil)
	for i := 0; i < len(in); i += 4096 { // arrive in pieces, as over TCP
		client.Write(in[i:min(i+4096, len(in))])
	}
	time.Sleep(100 * time.Millisecond)
	sess.relay.mu.Lock()
	pending := string(sess.relay.pending)
	sess.relay.mu.Unlock()
	client.Close()
	<-done
	up.Close()
	<-upDone
	if !bytes.Equal(upBuf.Bytes(), append(in, 'X', 0, 0, 0, 4)) {
		t.Errorf("upstream got %d bytes, want the %d sent and a Terminate", upBuf.Len(), len(in))
	}
	if pending != "S" {
		t.Errorf("pending %q, want the group's Sync", pending)
	}
}

// pgx's CopyFrom sends CopyData and CopyDone before the CopyInResponse comes
// back; the ReadyForQuery that ends the COPY must end copy-in for the relay.
func TestRelayCopyDoneBeforeCopyInResponse(t *testing.T) {
	sess, client, up, done := newRelay(t, Passthrough{})
	got := watch(client)
	upGot := watch(up)
	client.Write(bytes.Join([][]byte{msg('Q', "copy t from stdin\x00"), msg('d', "1\n"), msg('c', "")}, nil))
	for range 3 {
		<-upGot
	}
	up.Write(bytes.Join([][]byte{msg('G', "\x00\x00\x00"), msg('C', "COPY 1\x00"), msg('Z', "I")}, nil))
	for range 3 {
		<-got
	}
	client.Write(bytes.Join([][]byte{msg('P', "\x00select 1\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"),
		msg('E', "\x00\x00\x00\x00\x00"), msg('S', "")}, nil))
	for range 4 {
		<-upGot
	}
	sess.relay.mu.Lock()
	pending, copyIn := string(sess.relay.pending), sess.relay.copyIn
	sess.relay.mu.Unlock()
	if pending != "S" || copyIn {
		t.Errorf("after the COPY and a group: pending %q, copyIn %v; want \"S\", false", pending, copyIn)
	}
	client.Close()
	up.Close()
	<-done
}

// wantHandler records, per request, which messages the relay says it
// wants and the session's ReadyForQuery count and status; it answers
// nothing but a ReadyForQuery.
type wantHandler struct {
	mu     sync.Mutex
	wanted [][]bool
	ready  []uint64
	status []byte
}

func (h *wantHandler) Intercept(sql []byte) bool { return len(sql) > 0 && sql[0] == 'x' }
func (h *wantHandler) Serve(_ context.Context, req *Request, s *Session) error {
	n, st := s.ReadyForQuery()
	h.mu.Lock()
	h.wanted = append(h.wanted, req.Wanted)
	h.ready = append(h.ready, n)
	h.status = append(h.status, st)
	h.mu.Unlock()
	s.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return s.Flush()
}

// Request.Wanted marks the messages naming the Handler's statements and
// portals, also when a later unwanted Parse or Bind in the same group takes
// the name back; Session.ReadyForQuery counts the upstream's.
func TestRelayWantedAndReady(t *testing.T) {
	h := &wantHandler{}
	_, client, up, done := newRelay(t, h)
	go io.Copy(io.Discard, client)
	upGot := watch(up)
	bind := func(portal, stmt string) []byte {
		return msg('B', portal+"\x00"+stmt+"\x00\x00\x00\x00\x00\x00\x00")
	}
	exec := func(portal string) []byte { return msg('E', portal+"\x00\x00\x00\x00\x00") }
	// A plain Query first: its ReadyForQuery (status T) passes through.
	client.Write(msg('Q', "begin\x00"))
	<-upGot
	up.Write(msg('Z', "T"))
	time.Sleep(50 * time.Millisecond)
	client.Write(bytes.Join([][]byte{
		msg('P', "a\x00x1\x00\x00\x00"), bind("", "a"), exec(""), // wanted
		msg('P', "\x00select 1\x00\x00\x00"), bind("", ""), exec(""), // the upstream's
		bind("p", "a"), exec("p"), msg('S', ""),
	}, nil))
	waitFor := time.Now().Add(2 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.wanted)
		h.mu.Unlock()
		if n == 1 || time.Now().After(waitFor) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	want := []bool{true, true, true, false, false, false, true, true, false}
	if len(h.wanted) != 1 || fmt.Sprint(h.wanted[0]) != fmt.Sprint(want) {
		t.Errorf("Wanted %v, want [%v]", h.wanted, want)
	} else if h.ready[0] != 1 || h.status[0] != 'T' {
		t.Errorf("ReadyForQuery() = %d, %c; want 1, T", h.ready[0], h.status[0])
	}
	client.Close()
	up.Close()
	<-done
}
