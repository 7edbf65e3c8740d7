package refresh

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// chunkReader returns its data a random number of bytes at a time.
type chunkReader struct {
	data []byte
	r    *rand.Rand
	max  int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), 1+c.r.IntN(c.max))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func encode(t *testing.T, msgs ...pgproto3.BackendMessage) []byte {
	t.Helper()
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestReadCopyOut checks that the COPY data fed is the payloads in order,
// whatever the read sizes and however feed cuts it, and the errors.
func TestReadCopyOut(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	response := func(big bool) (payload, stream []byte) {
		msgs := []pgproto3.BackendMessage{&pgproto3.CopyOutResponse{OverallFormat: 1}}
		for i := range 3000 {
			d := bytes.Repeat([]byte{byte(i)}, r.IntN(300))
			if i == 1500 && big {
				d = bytes.Repeat([]byte{7}, 3<<20) // larger than the buffer
			}
			payload = append(payload, d...)
			msgs = append(msgs, &pgproto3.CopyData{Data: d})
			if i%700 == 0 {
				msgs = append(msgs, &pgproto3.NoticeResponse{Message: "hello"})
			}
		}
		msgs = append(msgs, &pgproto3.CopyDone{}, &pgproto3.CommandComplete{CommandTag: []byte("COPY 3000")},
			&pgproto3.ReadyForQuery{TxStatus: 'I'})
		return payload, encode(t, msgs...)
	}
	smallPayload, smallStream := response(false)
	payload, stream := response(true)
	for _, maxRead := range []int{13, 4096, 1 << 22} {
		payload, stream := payload, stream
		if maxRead < 4096 { // a byte at a time through 3 MB is slow with -race
			payload, stream = smallPayload, smallStream
		}
		var got []byte
		feed := func(b []byte) (int, error) {
			n := r.IntN(len(b) + 1) // use some of it; the rest comes again
			got = append(got, b[:n]...)
			return n, nil
		}
		err := readCopyOut(&chunkReader{data: stream, r: r, max: maxRead}, feed)
		// feed left some data unused at the end: a tuple cut short.
		if len(got) == len(payload) {
			if err != nil {
				t.Fatalf("reads of %d: %v", maxRead, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), "inside a tuple") {
			t.Fatalf("reads of %d: %d of %d bytes used, err %v", maxRead, len(got), len(payload), err)
		}
		if !bytes.Equal(got, payload[:len(got)]) {
			t.Fatalf("reads of %d: data fed differs", maxRead)
		}
		got = got[:0]
		all := func(b []byte) (int, error) { got = append(got, b...); return len(b), nil }
		if err := readCopyOut(&chunkReader{data: stream, r: r, max: maxRead}, all); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("reads of %d: err %v, %d of %d bytes", maxRead, err, len(got), len(payload))
		}
	}

	// A server error ends the data; it is returned after ReadyForQuery.
	bad := encode(t, &pgproto3.CopyOutResponse{}, &pgproto3.CopyData{Data: []byte("ab")},
		&pgproto3.ErrorResponse{Severity: "ERROR", Code: "57014", Message: "canceled"},
		&pgproto3.ReadyForQuery{TxStatus: 'E'})
	err := readCopyOut(bytes.NewReader(bad), func(b []byte) (int, error) { return len(b), nil })
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("server error: %v", err)
	}
	// A feed error is returned, and no more data is fed.
	calls := 0
	boom := errors.New("boom")
	err = readCopyOut(&chunkReader{data: stream, r: r, max: 100}, func(b []byte) (int, error) { calls++; return 0, boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("feed error: %v after %d calls", err, calls)
	}
	// The connection ends early.
	if err := readCopyOut(bytes.NewReader(stream[:len(stream)/2]), func(b []byte) (int, error) { return len(b), nil }); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short stream: %v", err)
	}
}

// TestLowWaterReader checks that data below the low-water mark is read
// (after the poll interval, not never) and that cancelling stops a read.
func TestLowWaterReader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		time.Sleep(50 * time.Millisecond) // the reader waits in the poller by then
		c.Write([]byte("small"))          // far below the mark, and the sender stays
		time.Sleep(2 * time.Second)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	if !setLowWater(tc, lowWater) {
		t.Skip("no low-water mark here")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &lowWaterReader{ctx: ctx, c: tc}
	buf := make([]byte, 64)
	start := time.Now()
	n, err := r.Read(buf)
	if err != nil || string(buf[:n]) != "small" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("read took %v", d)
	}
	time.AfterFunc(30*time.Millisecond, cancel)
	if _, err := r.Read(buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
}
