package refresh

import (
	"bufio"
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
// connection exists for this one statement. It reads the protocol itself
// with a large buffer, which costs a fraction of pgconn's per-message path
// at tens of millions of CopyData messages.
func rawCopyTo(ctx context.Context, pc *pgconn.PgConn, w io.Writer, sql string) error {
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
	r := bufio.NewReaderSize(conn, 1<<20)
	var head [5]byte
	var body []byte
	var first error
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return ctxErr(ctx, err)
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 || n > maxMessage {
			return fmt.Errorf("backend message %q of %d bytes", head[0], n)
		}
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return ctxErr(ctx, err)
		}
		switch head[0] {
		case 'd': // CopyData
			if first == nil {
				if _, err := w.Write(body); err != nil {
					first = err
				}
			}
		case 'E': // ErrorResponse
			var e pgproto3.ErrorResponse
			if err := e.Decode(body); err != nil {
				return err
			}
			if first == nil {
				first = pgconn.ErrorResponseToPgError(&e)
			}
		case 'Z': // ReadyForQuery
			return first
		case 'H', 'c', 'C', 'N', 'S', 'A': // CopyOutResponse, CopyDone, CommandComplete, notices, parameters, notifications
		default:
			return fmt.Errorf("unexpected backend message %q during COPY TO", head[0])
		}
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
