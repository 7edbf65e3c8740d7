package proxy

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
	"github.com/pgsketch/pgsketch/wire"
)

// serveRefresh runs a refresh for a simple Query and answers like
// PostgreSQL would for SELECT f(): one bigint column, the base rows read.
func (h *Handler) serveRefresh(ctx context.Context, call syntax.RefreshCall, s *wire.Session) error {
	c := &sessionConn{s: s}
	// An empty query only reports the transaction status.
	if err := c.Exec(ctx, ""); err != nil {
		return err
	}
	var res refresh.Result
	var err error
	switch c.txStatus {
	case 'I':
		h.Log.Info("refresh through the proxy", "rollup", call.Name, "user", s.Params()["user"])
		res, err = refresh.Refresh(ctx, c, call.Name, refresh.Options{Full: call.Full, From: call.From, To: call.To})
	default:
		// Inside a transaction block the statement fails as VACUUM's does,
		// and, as there, the transaction is aborted: PostgreSQL itself
		// raises the error (or, in an aborted transaction, its 25P02).
		if err := c.send(&pgproto3.Query{String: refuseInTransaction}); err != nil {
			return err
		}
		return forwardReplies(s)
	}
	if err != nil {
		// The session is only lost if the upstream is; else the error is the client's.
		if errors.Is(err, errProtocol) || errors.Is(err, errUpstream) || c.txStatus == 0 {
			return err
		}
		h.Log.Info("refresh through the proxy failed", "rollup", call.Name, "err", err)
		if err := s.Send(errorResponse(err)); err != nil {
			return err
		}
	} else {
		h.Log.Info("refreshed through the proxy", "result", res.String())
		s.Send(&pgproto3.NoticeResponse{Severity: "INFO", SeverityUnlocalized: "INFO", Code: "00000", Message: res.String()})
		s.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{
			Name: []byte("refresh_rollup"), DataTypeOID: 20, DataTypeSize: 8, TypeModifier: -1}}})
		s.Send(&pgproto3.DataRow{Values: [][]byte{strconv.AppendInt(nil, res.RowsRead, 10)}})
		s.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
	}
	s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
	return s.Flush()
}

// refuseInTransaction raises, in the client's transaction, the error that
// refresh_rollup inside a transaction block gets.
const refuseInTransaction = `DO $pgsketch$ BEGIN RAISE EXCEPTION USING ERRCODE = '25001',
	MESSAGE = 'pgsketch.refresh_rollup cannot run inside a transaction block',
	HINT = 'A refresh commits its own transaction. Run it outside BEGIN ... COMMIT.'; END $pgsketch$`
