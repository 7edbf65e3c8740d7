package handler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/aggregates/refresh"
	"github.com/pgsketch/pgsketch/wire"
)

// refreshCall is a parsed SELECT pgsketch.refresh_rollup(...).
type refreshCall struct {
	name     string
	full     bool
	from, to string
}

var refreshRE = regexp.MustCompile(`(?is)^\s*select\s+pgsketch\s*\.\s*refresh_rollup\s*\((.*)\)\s*;?\s*$`)

var refreshArgs = []string{"name", "full_rebuild", "from_time", "to_time"}

// parseRefresh recognizes the call with literal arguments, positional or
// named (name, full_rebuild, from_time, to_time). ok is false for anything
// else, which then goes to PostgreSQL and its explanatory error.
func parseRefresh(sql string) (c refreshCall, ok bool) {
	m := refreshRE.FindStringSubmatch(sql)
	if m == nil {
		return c, false
	}
	args, ok := splitArgs(m[1])
	if !ok || len(args) == 0 || len(args) > len(refreshArgs) {
		return c, false
	}
	set := map[string]bool{}
	for i, a := range args {
		key := refreshArgs[min(i, len(refreshArgs)-1)]
		if k, v, named := strings.Cut(a, "=>"); named {
			key, a = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		} else if len(set) > i { // positional after named
			return c, false
		}
		if set[key] {
			return c, false
		}
		set[key] = true
		switch key {
		case "full_rebuild":
			switch strings.ToLower(a) {
			case "true":
				c.full = true
			case "false":
			default:
				return c, false
			}
		case "name", "from_time", "to_time":
			s, ok := unquote(a)
			if !ok {
				return c, false
			}
			switch key {
			case "name":
				c.name = s
			case "from_time":
				c.from = s
			default:
				c.to = s
			}
		default:
			return c, false
		}
	}
	return c, set["name"]
}

// splitArgs splits at commas outside single quotes and trims each part.
func splitArgs(s string) ([]string, bool) {
	var out []string
	start, inQ := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'':
			inQ = !inQ
		case ',':
			if !inQ {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if inQ {
		return nil, false
	}
	return append(out, strings.TrimSpace(s[start:])), true
}

// unquote reads a standard SQL string literal.
func unquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false
	}
	body := s[1 : len(s)-1]
	if strings.Count(body, "'")%2 != 0 || strings.Contains(strings.ReplaceAll(body, "''", ""), "'") {
		return "", false
	}
	return strings.ReplaceAll(body, "''", "'"), true
}

func (c refreshCall) String() string {
	return fmt.Sprintf("refresh_rollup(%q, full=%v, from=%q, to=%q)", c.name, c.full, c.from, c.to)
}

// serveRefresh runs a refresh for a simple Query and answers like
// PostgreSQL would for SELECT f(): one bigint column, the base rows read.
func (h *Handler) serveRefresh(ctx context.Context, call refreshCall, s *wire.Session) error {
	c := &sessionConn{s: s}
	// An empty query only reports the transaction status.
	if err := c.Exec(ctx, ""); err != nil {
		return err
	}
	var res refresh.Result
	var err error
	switch c.txStatus {
	case 'I':
		h.Log.Info("refresh through the proxy", "rollup", call.name, "user", s.Params()["user"])
		res, err = refresh.Refresh(ctx, c, call.name, refresh.Options{Full: call.full, From: call.from, To: call.to})
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
		h.Log.Info("refresh through the proxy failed", "rollup", call.name, "err", err)
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
