package refresh

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// maxMessage caps a backend message read by rawCopyTo.
const maxMessage = 256 << 20

// rawCopyTo runs a COPY ... TO STDOUT on a connection it takes over from
// pgconn (which must be idle) and closes when done: a parallel reader's
// connection exists for this one statement. It reads the protocol itself,
// 1 MB at a time, and hands each CopyData payload to feed in place (feed
// returns how much it used; the rest is kept for the next payload), which
// costs a fraction of pgconn's per-message path at tens of millions of
// CopyData messages.
func rawCopyTo(ctx context.Context, pc *pgconn.PgConn, feed func([]byte) (int, error), sql string) error {
	if err := pc.SyncConn(ctx); err != nil {
		return err
	}
	hc, err := pc.Hijack()
	if err != nil {
		return err
	}
	conn := hc.Conn
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	q, err := (&pgproto3.Query{String: sql}).Encode(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(q); err != nil {
		return err
	}
	buf := make([]byte, 0, 1<<20)
	var carry []byte // an unused tail of the previous payload
	var first error
	pos := 0
	for {
		// One whole message in buf[pos:], or read more.
		if len(buf)-pos < 5 || len(buf)-pos < 5+int(binary.BigEndian.Uint32(buf[pos+1:]))-4 {
			if len(buf)-pos >= 5 {
				if n := int(binary.BigEndian.Uint32(buf[pos+1:])) - 4; n < 0 || n > maxMessage {
					return fmt.Errorf("backend message %q of %d bytes", buf[pos], n)
				} else if 5+n > cap(buf) {
					nb := make([]byte, len(buf)-pos, 5+n)
					copy(nb, buf[pos:])
					buf, pos = nb, 0
				}
			}
			if pos > 0 {
				buf = buf[:copy(buf, buf[pos:])]
				pos = 0
			}
			n, err := conn.Read(buf[len(buf):cap(buf)])
			if n == 0 && err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
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
			if first != nil {
				continue
			}
			data := body
			if len(carry) > 0 {
				carry = append(carry, body...)
				data = carry
			}
			used, err := feed(data)
			if err != nil {
				first = err
			}
			carry = append(carry[:0], data[used:]...)
		case 'E': // ErrorResponse
			var e pgproto3.ErrorResponse
			if err := e.Decode(body); err != nil {
				return err
			}
			if first == nil {
				first = pgconn.ErrorResponseToPgError(&e)
			}
		case 'Z': // ReadyForQuery
			if first == nil && len(carry) > 0 {
				first = fmt.Errorf("%w: copy data ends inside a tuple", errCopyFormat)
			}
			return first
		case 'H', 'c', 'C', 'N', 'S', 'A': // CopyOutResponse, CopyDone, CommandComplete, notices, parameters, notifications
		default:
			return fmt.Errorf("unexpected backend message %q during COPY TO", typ)
		}
	}
}
