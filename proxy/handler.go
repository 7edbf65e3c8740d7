package proxy

import (
	"time"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unsafe"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
	"github.com/pgsketch/pgsketch/status"
	"github.com/pgsketch/pgsketch/wire"
)

// Handler is pgsketch-proxy's wire.Handler.
type Handler struct {
	Log *slog.Logger
	// Approx is pgsketch.approx for sessions that leave it unset: whether
	// COUNT(DISTINCT ...) is answered from rollups (APPROX_COUNT_DISTINCT
	// always is).
	Approx bool
	// Merge is pgsketch.merge for sessions that leave it unset: where the
	// sketches of a rollup's rows are merged ("" is rewrite.MergeAuto).
	Merge rewrite.Merge
	// Recorder, when set, is told every query looked at (answered from a
	// rollup, or passed through and why) and the error samples of answers
	// that computed a count both ways, for the status page.
	Recorder *status.Recorder
	// Cache, when set, keeps the rollup halves of fetches (see exec.Cache);
	// privileges and the rollup's version are still checked by PostgreSQL
	// on every query.
	Cache *exec.Cache

	catalogs catalogCache
	plans    planCache
}

// New returns a Handler logging to log.
func New(log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{Log: log}
}

// Intercept implements wire.Handler.
//
// It wants the refresh call and whatever the rewriter's prefilter lets
// through (a mention of COUNT and DISTINCT, APPROX_COUNT_DISTINCT or
// pgsketch): a byte scan, no parsing.
func (h *Handler) Intercept(sql []byte) bool {
	if len(sql) == 0 {
		return false
	}
	// The prefilter keeps nothing of its argument.
	return syntax.Prefilter(unsafe.String(unsafe.SliceData(sql), len(sql)))
}

// Serve implements wire.Handler.
func (h *Handler) Serve(ctx context.Context, req *wire.Request, s *wire.Session) error {
	if len(req.Messages) == 1 {
		if q, ok := req.Messages[0].(*pgproto3.Query); ok {
			cmd, _ := syntax.ParseCommand(q.String)
			if cmd.Refresh != nil {
				return h.serveRefresh(ctx, *cmd.Refresh, s)
			}
			return h.serveQuery(ctx, q, cmd, s)
		}
	}
	return serveExtended(ctx, req, s, h)
}

// forwardReplies relays the upstream's replies to the client up to and
// including ReadyForQuery.
func forwardReplies(s *wire.Session) error {
	for {
		msg, err := s.Frontend.Receive()
		if err != nil {
			return err
		}
		if err := s.Send(msg); err != nil {
			return err
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return s.Flush()
		}
	}
}

// errorResponse turns err into the ErrorResponse the client gets.
func errorResponse(err error) *pgproto3.ErrorResponse {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		msg := pe.Message
		// The refresher's context around PostgreSQL's error, e.g.
		// "refresh daily: read base rows".
		if ctx := strings.Trim(strings.TrimSuffix(err.Error(), pe.Error()), ": \n"); ctx != "" && ctx != err.Error() {
			msg = fmt.Sprintf("%s (%s)", pe.Message, ctx)
		}
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: pe.Code, Message: msg,
			Detail: pe.Detail, Hint: pe.Hint, Where: pe.Where}
	}
	return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "XX000", Message: err.Error()}
}

// forward sends a request upstream unchanged and relays every reply, up to
// ReadyForQuery when the request ends with Sync or is a Query, or up to the
// replies its messages are owed when it ends with Flush.
func forward(req *wire.Request, s *wire.Session) error {
	owed, synced := 0, false
	for _, m := range req.Messages {
		s.Frontend.Send(m)
		switch m := m.(type) {
		case *pgproto3.Query, *pgproto3.Sync:
			synced = true
		case *pgproto3.Describe:
			owed++
			if m.ObjectType == 'S' {
				owed++ // ParameterDescription, then RowDescription or NoData
			}
		case *pgproto3.Parse, *pgproto3.Bind, *pgproto3.Close, *pgproto3.Execute:
			owed++
		}
	}
	if err := s.Frontend.Flush(); err != nil {
		return err
	}
	for synced || owed > 0 {
		msg, err := s.Frontend.Receive()
		if err != nil {
			return err
		}
		if err := s.Send(msg); err != nil {
			return err
		}
		switch msg.(type) {
		case *pgproto3.ReadyForQuery:
			if synced {
				return s.Flush()
			}
		case *pgproto3.ErrorResponse:
			if !synced {
				owed = 0 // the server skips the rest up to the client's Sync
			}
		case *pgproto3.ParseComplete, *pgproto3.BindComplete, *pgproto3.CloseComplete, *pgproto3.ParameterDescription,
			*pgproto3.RowDescription, *pgproto3.NoData, *pgproto3.CommandComplete, *pgproto3.EmptyQueryResponse,
			*pgproto3.PortalSuspended:
			owed--
		}
	}
	return s.Flush()
}

// recordPassed tells the recorder that sql went to PostgreSQL unchanged and
// why, and returns err.
func (h *Handler) recordPassed(sql, reason string, start time.Time, err error) error {
	if h.Recorder != nil {
		q := status.Query{Time: start, SQL: sql, Detail: reason, Latency: time.Since(start)}
		if err != nil {
			q.Err = err.Error()
		}
		h.Recorder.Query(q)
	}
	return err
}

// recordAnswered tells the recorder that sql was answered from p's rollup.
func (h *Handler) recordAnswered(sql string, p rewrite.Plan, ans *exec.Answer, start time.Time) {
	if h.Recorder == nil {
		return
	}
	rollup := p.Header().Rollup
	h.Recorder.Query(status.Query{Time: start, SQL: sql, Rewritten: true, Rollup: rollup, Plan: p,
		Latency: time.Since(start)})
	for _, smp := range ans.Samples {
		h.Recorder.Sample(status.Sample{Time: start, Rollup: rollup, Exact: smp.Exact, Approx: smp.Estimate, StdErr: smp.StdErr})
	}
}
