package refresh

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgconn"
)

// Conn is the session a refresh runs on. Its methods run one statement each;
// Query and QueryRows use the extended protocol with text parameters and
// results.
type Conn interface {
	// Exec runs sql, which may hold several statements, and discards any rows.
	Exec(ctx context.Context, sql string) error
	// Query runs sql with args (each a string, or nil for NULL) and returns
	// the rows as text; a NULL is a nil slice.
	Query(ctx context.Context, sql string, args ...any) ([][][]byte, error)
	// CopyTo runs a COPY ... TO STDOUT statement, writing the data to w.
	CopyTo(ctx context.Context, w io.Writer, sql string) error
	// CopyFrom runs a COPY ... FROM STDIN statement, reading the data from r.
	CopyFrom(ctx context.Context, r io.Reader, sql string) (int64, error)
}

// PgConn adapts a pgconn.PgConn (pgx's low-level connection) to Conn.
type PgConn struct{ C *pgconn.PgConn }

// DialPgConn returns a Dialer opening pgconn connections to dsn.
func DialPgConn(dsn string) Dialer {
	return func(ctx context.Context) (Conn, func(), error) {
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		return PgConn{C: c}, func() { c.Close(context.WithoutCancel(ctx)) }, nil
	}
}

// Exec implements Conn.
func (c PgConn) Exec(ctx context.Context, sql string) error {
	_, err := c.C.Exec(ctx, sql).ReadAll()
	return err
}

// Query implements Conn.
func (c PgConn) Query(ctx context.Context, sql string, args ...any) ([][][]byte, error) {
	params, err := TextParams(args)
	if err != nil {
		return nil, err
	}
	res := c.C.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	return res.Rows, nil
}

// TextParams turns the arguments of Conn.Query into parameters in text
// format: a string, or nil for NULL.
func TextParams(args []any) ([][]byte, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
		case string:
			params[i] = []byte(v)
		default:
			return nil, fmt.Errorf("query parameter $%d: unsupported type %T", i+1, a)
		}
	}
	return params, nil
}

// CopyTo implements Conn.
func (c PgConn) CopyTo(ctx context.Context, w io.Writer, sql string) error {
	_, err := c.C.CopyTo(ctx, w, sql)
	return err
}

// CopyFrom implements Conn.
func (c PgConn) CopyFrom(ctx context.Context, r io.Reader, sql string) (int64, error) {
	tag, err := c.C.CopyFrom(ctx, r, sql)
	return tag.RowsAffected(), err
}
