package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// fuzzServer's upstream refuses connections at once, so a valid startup
// packet ends the session quickly with an error.
func fuzzServer(t testing.TB, h Handler) *Server {
	s, err := NewServer(Config{
		Upstream:       "postgres://127.0.0.1:1/?sslmode=disable",
		ConnectTimeout: 200 * time.Millisecond,
		StartupTimeout: time.Second,
		MaxMessageSize: 1 << 16,
		InspectSize:    1 << 10,
		Handler:        h,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startupPacket(code uint32, rest ...byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(rest)))
	b = binary.BigEndian.AppendUint32(b, code)
	return append(b, rest...)
}

func msg(typ byte, body string) []byte { return appendMessage(nil, typ, []byte(body)) }

// runWithin fails the test if f does not return within d.
func runWithin(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		stacks := make([]byte, 1<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		t.Fatalf("%s hangs; goroutines:\n%s", what, stacks)
	}
}

// FuzzStartup feeds arbitrary bytes to the startup phase of a session: it
// must neither panic nor hang.
func FuzzStartup(f *testing.F) {
	f.Add([]byte{})
	f.Add(startupPacket(codeSSLRequest))
	f.Add(startupPacket(codeGSSENCRequest))
	f.Add(append(startupPacket(codeSSLRequest), startupPacket(codeGSSENCRequest)...))
	f.Add(startupPacket(codeCancelRequest, 0, 0, 0, 1, 1, 2, 3, 4))
	f.Add(startupPacket(3<<16, []byte("user\x00bob\x00database\x00db\x00\x00")...))
	f.Add(startupPacket(3<<16|2, []byte("user\x00bob\x00\x00")...))
	f.Add(startupPacket(2<<16, []byte("user\x00bob\x00\x00")...))
	f.Add(startupPacket(3<<16, []byte("user\x00bob")...))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 4})
	srv := fuzzServer(f, nil)
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		sess := newSession(srv, server)
		go io.Copy(io.Discard, client)
		runWithin(t, 5*time.Second, "startup", func() {
			go func() {
				client.Write(in)
				client.Close()
			}()
			sess.run()
		})
		client.Close()
	})
}

// interceptX wants every SQL text starting with "x" and answers it with an
// empty reply, without using the upstream.
type interceptX struct{}

func (interceptX) Intercept(sql []byte) bool { return len(sql) > 0 && sql[0] == 'x' }

func (interceptX) Serve(_ context.Context, req *Request, s *Session) error {
	last := req.Messages[len(req.Messages)-1]
	switch last.(type) {
	case *pgproto3.Query, *pgproto3.Sync:
		s.Send(&pgproto3.EmptyQueryResponse{})
		s.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	}
	return s.Flush()
}

// FuzzRelay feeds arbitrary bytes to both sides of a session in the steady
// state, from the client and from the upstream, each of which then hangs up.
// It must neither panic nor hang.
func FuzzRelay(f *testing.F) {
	f.Add([]byte("Q\x00\x00\x00\x0dselect 1\x00"), []byte("Z\x00\x00\x00\x05I"))
	f.Add(bytes.Join([][]byte{msg('P', "s\x00x\x00\x00\x00"), msg('B', "\x00s\x00\x00\x00\x00\x00\x00\x00"),
		msg('E', "\x00\x00\x00\x00\x00"), msg('S', "")}, nil), []byte{})
	f.Add(bytes.Join([][]byte{msg('Q', "x\x00"), msg('Q', "select\x00"), msg('H', ""), msg('X', "")}, nil),
		bytes.Join([][]byte{msg('Z', "I"), msg('E', "SFATAL\x00\x00")}, nil))
	f.Add([]byte("d\x00\x10\x00\x00abc"), []byte("D\x7f\xff\xff\xff"))
	f.Add([]byte("Q\x00\x00\x00\x03"), []byte("Z\x00\x00\x00\x00"))
	f.Add(bytes.Join([][]byte{msg('P', "\x00x\x00\x00\x00"), msg('D', "S\x00"), msg('C', "S\x00"), msg('S', "")}, nil), msg('Z', "I"))
	srv := fuzzServer(f, interceptX{})
	f.Fuzz(func(t *testing.T, fromClient, fromUpstream []byte) {
		client, clientEnd := net.Pipe()
		up, upEnd := net.Pipe()
		sess := newSession(srv, clientEnd)
		sess.up = upEnd
		go io.Copy(io.Discard, client)
		go io.Copy(io.Discard, up)
		runWithin(t, 5*time.Second, "relay", func() {
			go func() {
				up.Write(fromUpstream)
				up.Close() // the upstream hangs up once it has said its piece
			}()
			go func() {
				client.Write(fromClient)
				client.Close()
			}()
			sess.steady(handoff{})
		})
		client.Close()
		up.Close()
	})
}

func TestReadStartupPacketLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"ssl request", startupPacket(codeSSLRequest), true},
		{"too short", []byte{0, 0, 0, 7, 0, 0, 0}, false},
		{"negative", []byte{0x80, 0, 0, 0}, false},
		{"over the cap", []byte{0, 1, 0, 0}, false},
		{"truncated", []byte{0, 0, 0, 16, 0, 3, 0, 0}, false},
	} {
		body, err := readStartupPacket(bytes.NewReader(tc.in), 10000)
		if (err == nil) != tc.ok {
			t.Errorf("%s: body %x, err %v", tc.name, body, err)
		}
	}
}

func TestStartupParams(t *testing.T) {
	p, err := startupParams([]byte("\x00\x03\x00\x00user\x00bob\x00database\x00db\x00\x00"))
	if err != nil || p["user"] != "bob" || p["database"] != "db" || len(p) != 2 {
		t.Fatalf("params %v, err %v", p, err)
	}
	for _, bad := range []string{"\x00\x03\x00\x00user", "\x00\x03\x00\x00user\x00bob", "\x00\x03\x00\x00\x00junk"} {
		if _, err := startupParams([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
