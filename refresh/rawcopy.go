package refresh

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// maxMessage caps a backend message read by rawCopyTo.
const maxMessage = 256 << 20

// rawCopyTo runs a COPY ... TO STDOUT on a connection it takes over from
// pgconn (which must be idle) and closes when done: a parallel reader's
// connection exists for this one statement. It reads the protocol itself,
// 1 MB at a time, and gathers the payloads of the CopyData messages in
// place (PostgreSQL sends one message per tuple) into one run of COPY data
// that it hands to feed before each read (see readCopyOut). This costs a
// fraction of pgconn's per-message path at tens of millions of CopyData
// messages, and lets feed work on many tuples at once.
func rawCopyTo(ctx context.Context, pc *pgconn.PgConn, feed func([]byte) (int, error), sql string) error {
	c, err := hijackRaw(ctx, pc)
	if err != nil {
		return err
	}
	defer c.close()
	return c.copyTo(ctx, sql, feed)
}

// rawConn is a connection taken over from pgconn, with its socket set up
// for reading COPY data (see lowWater).
type rawConn struct {
	conn net.Conn
	r    io.Reader
	stop func() bool
}

func hijackRaw(ctx context.Context, pc *pgconn.PgConn) (*rawConn, error) {
	if err := pc.SyncConn(ctx); err != nil {
		return nil, err
	}
	hc, err := pc.Hijack()
	if err != nil {
		return nil, err
	}
	c := &rawConn{conn: hc.Conn, r: hc.Conn}
	c.stop = context.AfterFunc(ctx, func() { hc.Conn.SetDeadline(time.Now()) })
	if tc, ok := hc.Conn.(*net.TCPConn); ok && setLowWater(tc, lowWater) {
		c.r = &lowWaterReader{ctx: ctx, c: tc}
	}
	return c, nil
}

func (c *rawConn) close() {
	c.stop()
	c.conn.Close()
}

// copyTo runs sql, a COPY ... TO STDOUT, and hands its data to feed.
func (c *rawConn) copyTo(ctx context.Context, sql string, feed func([]byte) (int, error)) error {
	q, err := (&pgproto3.Query{String: sql}).Encode(nil)
	if err != nil {
		return err
	}
	_, err = c.conn.Write(q)
	if err == nil {
		err = readCopyOut(c.r, feed)
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// lowWater is the receive low-water mark (SO_RCVLOWAT) of a parallel
// reader's socket: the reader is woken when that much data has arrived
// rather than at every few kilobytes. Both it and the server, on the same
// cores, spend much less time in the kernel and in the scheduler: about a
// tenth of the wake-ups and reads.
const lowWater = 256 << 10

// lowWaterPoll bounds the wait for data below the low-water mark: the end
// of the response is smaller than the mark and wakes nobody.
const lowWaterPoll = 10 * time.Millisecond

// lowWaterReader reads a socket with a low-water mark, with a read deadline
// that lets it take data below the mark.
type lowWaterReader struct {
	ctx context.Context
	c   *net.TCPConn
}

func (l *lowWaterReader) Read(p []byte) (int, error) {
	for {
		if err := l.ctx.Err(); err != nil {
			return 0, err
		}
		if err := l.c.SetReadDeadline(time.Now().Add(lowWaterPoll)); err != nil {
			return 0, err
		}
		n, err := l.c.Read(p)
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			continue // a read now takes whatever has arrived
		}
		return n, err
	}
}

// readCopyOut reads a COPY TO's response from r up to ReadyForQuery (see
// rawCopyTo) and returns the first error of the data, of feed or of the
// server.
func readCopyOut(r io.Reader, feed func([]byte) (int, error)) error {
	c := &copyOut{r: r, feed: feed, buf: make([]byte, 0, 1<<20)}
	for {
		// One whole message in buf[pos:], or read more.
		if !c.whole() {
			if err := c.fill(); err != nil {
				return err
			}
			continue
		}
		typ := c.buf[c.pos]
		n := int(binary.BigEndian.Uint32(c.buf[c.pos+1:])) - 4
		if n < 0 || n > maxMessage {
			return fmt.Errorf("backend message %q of %d bytes", typ, n)
		}
		body := c.buf[c.pos+5 : c.pos+5+n]
		c.pos += 5 + n
		switch typ {
		case 'd': // CopyData
			if c.first == nil {
				c.data += copy(c.buf[c.data:], body)
			}
		case 'E': // ErrorResponse
			c.flush()
			var e pgproto3.ErrorResponse
			if err := e.Decode(body); err != nil {
				return err
			}
			if c.first == nil {
				c.first = pgconn.ErrorResponseToPgError(&e)
			}
		case 'Z': // ReadyForQuery
			c.flush()
			if c.first == nil && c.data > 0 {
				c.first = fmt.Errorf("%w: copy data ends inside a tuple", errCopyFormat)
			}
			return c.first
		case 'H', 'c', 'C', 'N', 'S', 'A': // CopyOutResponse, CopyDone, CommandComplete, notices, parameters, notifications
		default:
			return fmt.Errorf("unexpected backend message %q during COPY TO", typ)
		}
	}
}

// copyOut is readCopyOut's buffer. buf[:data] is COPY data not yet used by
// feed; buf[pos:] the protocol bytes not yet parsed (data <= pos). The
// payloads of CopyData messages are moved down to the data as they are
// parsed, over the headers between them.
type copyOut struct {
	r         io.Reader
	feed      func([]byte) (int, error)
	buf       []byte
	data, pos int
	first     error // of feed or of the server
}

// whole reports whether buf[pos:] starts with a whole message.
func (c *copyOut) whole() bool {
	rest := len(c.buf) - c.pos
	return rest >= 5 && rest >= 5+int(binary.BigEndian.Uint32(c.buf[c.pos+1:]))-4
}

// flush hands the data to feed and keeps what it leaves; after an error of
// feed's, the data is dropped and feed not called again.
func (c *copyOut) flush() {
	if c.data == 0 || c.first != nil {
		return
	}
	used, err := c.feed(c.buf[:c.data])
	if err != nil {
		c.first = err
		c.data = 0
		return
	}
	if used > 0 {
		c.data = copy(c.buf, c.buf[used:c.data])
	}
}

// fill flushes the data, then reads more of the response after the bytes
// not yet parsed, with room for the whole of the message they begin.
func (c *copyOut) fill() error {
	c.flush()
	need := 5
	if len(c.buf)-c.pos >= 5 {
		n := int(binary.BigEndian.Uint32(c.buf[c.pos+1:])) - 4
		if n < 0 || n > maxMessage {
			return fmt.Errorf("backend message %q of %d bytes", c.buf[c.pos], n)
		}
		need = 5 + n
	}
	// Close the gap between the data and the unparsed bytes.
	rest := len(c.buf) - c.pos
	if c.data+max(need, rest) > cap(c.buf) {
		nb := make([]byte, c.data+rest, max(2*cap(c.buf), c.data+need))
		copy(nb, c.buf[:c.data])
		copy(nb[c.data:], c.buf[c.pos:])
		c.buf = nb
	} else if c.pos > c.data {
		c.buf = c.buf[:c.data+copy(c.buf[c.data:], c.buf[c.pos:])]
	}
	c.pos = c.data
	n, err := c.r.Read(c.buf[len(c.buf):cap(c.buf)])
	if n == 0 && err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	c.buf = c.buf[:len(c.buf)+n]
	return nil
}
