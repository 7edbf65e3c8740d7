package upstream

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Session is one upstream PostgreSQL session: a role, a transaction state,
// one statement at a time. An error PostgreSQL reports is a
// *pgconn.PgError.
type Session interface {
	// Query runs one statement with the extended protocol and returns its
	// whole result.
	Query(ctx context.Context, st Statement) (*Result, error)
	// QueryPair runs first, then the statement next makes of first's
	// result (none when next returns nil), in one transaction: with
	// first.OwnSnapshot, in first's own REPEATABLE READ transaction, so
	// that both read one snapshot. second is nil when next made none.
	QueryPair(ctx context.Context, first Statement, next Next) (res, second *Result, err error)
	// Exec runs sql, which may hold several statements, and discards any
	// rows.
	Exec(ctx context.Context, sql string) error
	// CopyTo runs a COPY ... TO STDOUT statement, writing the data to w.
	CopyTo(ctx context.Context, w io.Writer, sql string) error
	// CopyFrom runs a COPY ... FROM STDIN statement, reading the data from
	// r, and returns the number of rows copied.
	CopyFrom(ctx context.Context, r io.Reader, sql string) (int64, error)
}

// Next makes the statement QueryPair runs second from the result of the
// first, or returns nil for none.
type Next func(first *Result) (*Statement, error)

// InTurn runs first, then the statement next makes of its result, with
// query, one after the other: QueryPair for a session whose statements
// already share a transaction.
func InTurn(ctx context.Context, query func(context.Context, Statement) (*Result, error), first Statement, next Next) (res, second *Result, err error) {
	if res, err = query(ctx, first); err != nil {
		return nil, nil, err
	}
	st, err := next(res)
	if err != nil || st == nil {
		return res, nil, err
	}
	if second, err = query(ctx, *st); err != nil {
		return nil, nil, err
	}
	return res, second, nil
}

// FormatOf is the format of result column i under a Bind's result format
// codes: none means text for all, one is every column's, else one per
// column.
func FormatOf(codes []int16, i int) int16 {
	switch {
	case len(codes) == 0:
		return 0
	case len(codes) == 1:
		return codes[0]
	case i < len(codes):
		return codes[i]
	}
	return 0
}

// Statement is one statement with its parameters, run with the extended
// protocol.
type Statement struct {
	SQL string
	// ParamOIDs are the parameters' types (0: let PostgreSQL infer it).
	ParamOIDs []uint32
	// Params are the values, in ParamFormats (0 text, 1 binary; one code
	// for all, or one per parameter); nil is NULL.
	Params       [][]byte
	ParamFormats []int16
	// ResultFormats are the result columns' formats, as in Bind.
	ResultFormats []int16
	// Reparse: the statement is parsed each time it runs, never kept
	// prepared (plan.Head.Reparse).
	Reparse bool
	// OwnSnapshot: the statement runs in a REPEATABLE READ transaction of
	// its own in which Citus reads each worker over one connection
	// (OwnSnapshotSettings), in time zone Zone (SetLocalZone;
	// plan.Head.OwnSnapshot); a session that cannot run it so refuses it.
	OwnSnapshot bool
	// Zone is the session's TimeZone, for an OwnSnapshot statement.
	Zone string
}

// OwnSnapshotSettings are the settings of an OwnSnapshot statement's
// transaction, local to it: Citus reads each worker over one connection
// (one snapshot per worker), and sends the transaction's SET LOCAL
// commands to the workers.
const OwnSnapshotSettings = "pg_catalog.set_config('citus.max_adaptive_executor_pool_size', '1', true), " +
	"pg_catalog.set_config('citus.propagate_set_commands', 'local', true)"

// SetLocalZone is the SET LOCAL of TimeZone zone that an OwnSnapshot
// statement's transaction runs after OwnSnapshotSettings, which Citus then
// sends to every worker it opens a transaction on ("" for no zone). The
// session's zone set again: without it the workers compute what is pushed
// down to them (the base rows' group keys: date_trunc of a timestamptz,
// say) in their own zone, which Citus does not take from the session,
// while the coordinator computes the rollup rows' in the session's.
func SetLocalZone(zone string) string {
	if zone == "" {
		return ""
	}
	return "SET LOCAL TimeZone = " + quoteLiteral(zone)
}

// quoteLiteral quotes s as PostgreSQL's quote_literal does.
func quoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

// Result is a statement's description and rows.
type Result struct {
	Fields []pgproto3.FieldDescription
	Rows   [][][]byte
	// Tag is the CommandComplete tag, e.g. "SELECT 3".
	Tag string
}

// Rows runs sql on s with args as parameters in text format (each a
// string, or nil for NULL) and returns the rows as text; a NULL is a nil
// slice.
func Rows(ctx context.Context, s Session, sql string, args ...any) ([][][]byte, error) {
	params, err := textParams(args)
	if err != nil {
		return nil, err
	}
	res, err := s.Query(ctx, Statement{SQL: sql, Params: params})
	if err != nil {
		return nil, err
	}
	return res.Rows, nil
}

// textParams turns the arguments of Rows into parameters in text format.
func textParams(args []any) ([][]byte, error) {
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
