// Package pgsession implements upstream.Session over a connection of pgx's
// pgconn that pgsketch opens itself, rather than one borrowed from a
// client. It is the only part of package upstream that imports a
// connection package.
package pgsession

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/upstream"
)

// Conn adapts a pgconn.PgConn (pgx's low-level connection) to
// upstream.Session.
type Conn struct{ C *pgconn.PgConn }

var _ upstream.Session = Conn{}

// Dial returns a function opening pgconn connections to dsn, each with the
// function that closes it (refresh.Options.Dial).
func Dial(dsn string) func(context.Context) (upstream.Session, func(), error) {
	return func(ctx context.Context) (upstream.Session, func(), error) {
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		return Conn{C: c}, func() { c.Close(context.WithoutCancel(ctx)) }, nil
	}
}

// Query implements upstream.Session with pgconn's ExecParams: the unnamed
// statement, parsed each time (so every statement is run as Reparse asks).
func (c Conn) Query(ctx context.Context, st upstream.Statement) (*upstream.Result, error) {
	rr := c.C.ExecParams(ctx, st.SQL, st.Params, st.ParamOIDs, st.ParamFormats, st.ResultFormats)
	res := &upstream.Result{}
	if fds := rr.FieldDescriptions(); fds != nil {
		res.Fields = make([]pgproto3.FieldDescription, len(fds))
		for i, f := range fds {
			res.Fields[i] = pgproto3.FieldDescription{Name: []byte(f.Name), TableOID: f.TableOID,
				TableAttributeNumber: f.TableAttributeNumber, DataTypeOID: f.DataTypeOID,
				DataTypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier, Format: f.Format}
		}
	}
	for rr.NextRow() {
		vals := rr.Values() // valid until the next row: copy
		row := make([][]byte, len(vals))
		for i, v := range vals {
			if v != nil {
				row[i] = slices.Clone(v)
			}
		}
		res.Rows = append(res.Rows, row)
	}
	tag, err := rr.Close()
	if err != nil {
		return nil, err
	}
	res.Tag = tag.String()
	return res, nil
}

// QueryPair implements upstream.Session: outside a transaction block, in
// a transaction of its own (REPEATABLE READ, READ ONLY with
// first.OwnSnapshot); inside one, in that transaction.
func (c Conn) QueryPair(ctx context.Context, first upstream.Statement, next upstream.Next) (res, second *upstream.Result, err error) {
	if c.C.TxStatus() == 'I' {
		begin := "BEGIN"
		if first.OwnSnapshot {
			// Citus reads each worker over one connection (one
			// snapshot), in the session's TimeZone.
			begin = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SELECT " + upstream.OwnSnapshotSettings
			if z := upstream.SetLocalZone(first.Zone); z != "" {
				begin += "; " + z
			}
		}
		if err := c.Exec(ctx, begin); err != nil {
			return nil, nil, err
		}
		defer func() {
			end := "COMMIT"
			if err != nil {
				end = "ROLLBACK"
			}
			if eerr := c.Exec(context.WithoutCancel(ctx), end); err == nil {
				err = eerr
			}
		}()
	} else if first.OwnSnapshot {
		return nil, nil, fmt.Errorf("pgsession: a statement that must run in a transaction of its own, inside a transaction block")
	}
	return upstream.InTurn(ctx, c.Query, first, next)
}

// Exec implements upstream.Session.
func (c Conn) Exec(ctx context.Context, sql string) error {
	_, err := c.C.Exec(ctx, sql).ReadAll()
	return err
}

// CopyTo implements upstream.Session.
func (c Conn) CopyTo(ctx context.Context, w io.Writer, sql string) error {
	_, err := c.C.CopyTo(ctx, w, sql)
	return err
}

// CopyFrom implements upstream.Session.
func (c Conn) CopyFrom(ctx context.Context, r io.Reader, sql string) (int64, error) {
	tag, err := c.C.CopyFrom(ctx, r, sql)
	return tag.RowsAffected(), err
}
