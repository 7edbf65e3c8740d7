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
	// buf[:data] is COPY data not yet used by feed; buf[pos:] the protocol
	// bytes not yet parsed (data <= pos).
	buf := make([]byte, 0, 1<<20)
	data, pos := 0, 0
	var first error
	flush := func() {
		if data == 0 || first != nil {
			return
		}
		used, err := feed(buf[:data])
		if err != nil {
			first = err
			data = 0
			return
		}
		if used > 0 {
			data = copy(buf, buf[used:data])
		}
	}
	for {
		// One whole message in buf[pos:], or read more.
		if len(buf)-pos < 5 || len(buf)-pos < 5+int(binary.BigEndian.Uint32(buf[pos+1:]))-4 {
			flush()
			need := 5
			if len(buf)-pos >= 5 {
				n := int(binary.BigEndian.Uint32(buf[pos+1:])) - 4
				if n < 0 || n > maxMessage {
					return fmt.Errorf("backend message %q of %d bytes", buf[pos], n)
				}
				need = 5 + n
			}
			// Close the gap between the data and the unparsed bytes.
			rest := len(buf) - pos
			if data+max(need, rest) > cap(buf) {
				nb := make([]byte, data+rest, max(2*cap(buf), data+need))
				copy(nb, buf[:data])
				copy(nb[data:], buf[pos:])
				buf = nb
			} else if pos > data {
				buf = buf[:data+copy(buf[data:], buf[pos:])]
			}
			pos = data
			n, err := r.Read(buf[len(buf):cap(buf)])
			if n == 0 && err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
			buf = buf[:len(buf)+n]
			continue
		}
		typ := buf[pos]
		n := int(binary.BigEndian.Uint32(buf[pos+1:])) - 4
		if n < 0 || n > maxMessage {
			return fmt.Errorf("backend message %q of %d bytes", typ, n)
		}
		body := buf[pos+5 : pos+5+n]
		pos += 5 + n
		switch typ {
		case 'd': // CopyData
			if first == nil {
				data += copy(buf[data:], body)
			}
		case 'E': // ErrorResponse
			flush()
			var e pgproto3.ErrorResponse
			if err := e.Decode(body); err != nil {
				return err
			}
			if first == nil {
				first = pgconn.ErrorResponseToPgError(&e)
			}
		case 'Z': // ReadyForQuery
			flush()
			if first == nil && data > 0 {
				first = fmt.Errorf("%w: copy data ends inside a tuple", errCopyFormat)
			}
			return first
		case 'H', 'c', 'C', 'N', 'S', 'A': // CopyOutResponse, CopyDone, CommandComplete, notices, parameters, notifications
		default:
			return fmt.Errorf("unexpected backend message %q during COPY TO", typ)
		}
	}
}
