package handler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/aggregates/exec"
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
func (h *Handler) explainLines(ctx context.Context, c *sessionConn, p *rewrite.Plan, params exec.Params) ([]string, error) {
	lines := strings.Split("pgsketch plan\n"+p.String(), "\n")
	if (p.Kind == rewrite.Overlap || p.Kind == rewrite.Retention || p.Kind == rewrite.TopK) && !c.noSync {
		return h.explainOverlap(ctx, c, p, params, lines)
	}
	if p.Kind != rewrite.FromRollup {
		return lines, nil
	}
	fetch := p.FetchSQL
	if p.Merge == rewrite.MergeServer && p.ServerFetchSQL != "" {
		fetch = p.ServerFetchSQL
	}
	if c.noSync {
		// Inside an extended-protocol request not yet synced, an error
		// would discard the rest of the client's request: only pgsketch's
		// plan.
		return lines, nil
	}
	inBlock := c.txStatus == 'T'
	for _, st := range []struct {
		what, sql string
		refs      []int
	}{{"fetch", fetch, p.FetchParams}, {"exact", p.ExactSQL, p.ExactParams}} {
		if st.sql == "" {
			continue
		}
		if inBlock {
			if err := c.Exec(ctx, "SAVEPOINT "+savepoint); err != nil {
				return nil, err
			}
		}
		res, err := querier{c}.Query(ctx, exec.Bind("EXPLAIN "+st.sql, p.Params, st.refs, params))
		lines = append(lines, "", "PostgreSQL plan of the "+st.what+" statement")
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

// explainOverlap adds to an overlap's or a retention grid's EXPLAIN what
// its answer would be: the sketches are merged (a cheap read of the rollup
// and the edges), and the estimate, its 95 % interval and whether the
// proxy would answer it or count it exactly are shown (for a grid: how
// many cells would be estimated and how many counted exactly, which that
// EXPLAIN does count).
func (h *Handler) explainOverlap(ctx context.Context, c *sessionConn, p *rewrite.Plan, params exec.Params, lines []string) ([]string, error) {
	st, err := h.settings(ctx, c)
	if err != nil {
		return nil, err
	}
	ans, err := h.run(ctx, c, st, p, params, nil)
	var re *exec.Refused
	switch {
	case err == nil && (ans.Retention != nil || ans.TopK != nil):
		lines = append(lines, "answer: "+strings.TrimPrefix(ans.Notice(p), "pgsketch: "))
	case err == nil:
		o := ans.Overlap
		lines = append(lines, fmt.Sprintf("estimate: %.0f, 95%% interval %.0f to %.0f (relative error %.2g%%): answered from the sketches",
			o.Estimate, o.Lower, o.Upper, 100*o.RelErr()))
	case errors.As(err, &re):
		what := "estimate: "
		if p.Kind == rewrite.TopK {
			what = "answer: "
		}
		lines = append(lines, what+strings.TrimPrefix(re.Error(), "pgsketch: ")+": counted exactly by PostgreSQL")
	case isPgError(err) && !clientCancelled(err) && !clientVisible(err):
		lines = append(lines, "estimate: not available ("+err.Error()+")")
	default:
		return nil, err
	}
	return lines, nil
}
