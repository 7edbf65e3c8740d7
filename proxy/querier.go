package proxy

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/exec"
)

// querier runs exec's statements on the session (it implements
// exec.Querier) with the extended protocol, as sessionConn.run does.
type querier struct{ c *sessionConn }

// Query implements exec.Querier.
func (q querier) Query(ctx context.Context, st exec.Statement) (*exec.Result, error) {
	res := &exec.Result{}
	err := q.c.run(ctx, st, func(msg pgproto3.BackendMessage) error {
		switch m := msg.(type) {
		case *pgproto3.RowDescription:
			res.Fields = make([]pgproto3.FieldDescription, len(m.Fields))
			for i, f := range m.Fields { // a flyweight: copy
				f.Name = slices.Clone(f.Name)
				res.Fields[i] = f
			}
		case *pgproto3.DataRow:
			res.Rows = append(res.Rows, cloneRow(m.Values))
		case *pgproto3.CommandComplete:
			res.Tag = string(m.CommandTag)
		default:
			return fmt.Errorf("%w: %T in a query's reply", errProtocol, msg)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
