package proxy

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/wire"
)

// sendExplain answers EXPLAIN of a planned query with its lines, one per
// row, as PostgreSQL's EXPLAIN prints its own.
func sendExplain(lines []string, c *sessionConn, s *wire.Session) error {
	s.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{
		Name: []byte("QUERY PLAN"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}})
	for _, l := range lines {
		s.Send(&pgproto3.DataRow{Values: [][]byte{[]byte(l)}})
	}
	s.Send(&pgproto3.CommandComplete{CommandTag: []byte("EXPLAIN")})
	s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
	return s.Flush()
}

// explainLines is EXPLAIN's answer for plan p: pgsketch's plan, then
// PostgreSQL's EXPLAIN of the fetch statement that would run (the merge
// strategy's; the cache's token filter aside) and of the exact statement,
// with the client's parameters. A statement PostgreSQL cannot explain
// (no privilege, say) gets its error as a line instead; inside a
// transaction block the explains run under a savepoint, so the block
// stays as it was.
func (h *Handler) explainLines(ctx context.Context, c *sessionConn, p rewrite.Plan, params exec.Params) ([]string, error) {
	lines := strings.Split("pgsketch plan\n"+p.Explain(p.Header().Verbose), "\n")
	facts := p.Facts()
	if c.noSync {
		// Inside an extended-protocol request not yet synced, an error
		// would discard the rest of the client's request: only pgsketch's
		// plan.
		return lines, nil
	}
	if facts.ExplainRuns != "" {
		return h.explainRun(ctx, c, p, facts.ExplainRuns, params, lines)
	}
	inBlock := c.txStatus == 'T'
	for _, st := range facts.Explained {
		if inBlock {
			if err := c.Exec(ctx, "SAVEPOINT "+savepoint); err != nil {
				return nil, err
			}
		}
		bound := exec.Bind("EXPLAIN "+st.SQL, p.Header().Params, st.Refs, params, st.Lifted...)
		bound.Reparse = p.Header().Reparse
		res, err := c.Query(ctx, bound)
		lines = append(lines, "", "PostgreSQL plan of the "+st.What+" statement")
		switch {
		case err == nil:
			for _, r := range res.Rows {
				if len(r) == 1 {
					lines = append(lines, string(r[0]))
				}
			}
		case isPgError(err) && !clientCancelled(err):
			lines = append(lines, "(not available: "+err.Error()+")")
		default:
			return nil, err
		}
		if inBlock {
			end := "RELEASE SAVEPOINT " + savepoint
			if err != nil {
				end = "ROLLBACK TO SAVEPOINT " + savepoint + "; " + end
			}
			if err := c.Exec(ctx, end); err != nil {
				return nil, err
			}
		}
	}
	return lines, nil
}

// explainRun adds to the EXPLAIN of a plan whose estimate decides whether
// the proxy answers it (an overlap, a retention grid, a top-k) what its
// answer would be: the sketches are merged (a cheap read of the rollup and
// the edges), and the estimate, its 95 % interval and whether the proxy
// would answer it or count it exactly are shown (for a grid: how many
// cells would be estimated and how many counted exactly, which that
// EXPLAIN does count). what names the line: "estimate" or "answer".
func (h *Handler) explainRun(ctx context.Context, c *sessionConn, p rewrite.Plan, what string, params exec.Params, lines []string) ([]string, error) {
	st, err := h.settings(ctx, c)
	if err != nil {
		return nil, err
	}
	ans, err := h.run(ctx, c, st, p, params, nil)
	var re *exec.Refused
	switch {
	case err == nil:
		lines = append(lines, ans.Explained)
	case errors.As(err, &re):
		lines = append(lines, what+": "+strings.TrimPrefix(re.Error(), "pgsketch: ")+": counted exactly by PostgreSQL")
	case isPgError(err) && !clientCancelled(err) && !clientVisible(err):
		lines = append(lines, "estimate: not available ("+err.Error()+")")
	default:
		return nil, err
	}
	return lines, nil
}
