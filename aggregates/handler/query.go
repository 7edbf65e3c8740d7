package handler

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/aggregates/exec"
)

// querier runs exec's statements on the session (it implements
// exec.Querier) with the extended protocol and the unnamed statement and
// portal, ending each with Sync.
type querier struct{ c *sessionConn }

// Query implements exec.Querier.
func (q querier) Query(ctx context.Context, st exec.Statement) (*exec.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := q.c
	if err := c.send(
		&pgproto3.Parse{Query: st.SQL, ParameterOIDs: st.ParamOIDs},
		&pgproto3.Bind{ParameterFormatCodes: st.ParamFormats, Parameters: st.Params, ResultFormatCodes: st.ResultFormats},
		&pgproto3.Describe{ObjectType: 'P'},
		&pgproto3.Execute{},
		&pgproto3.Sync{},
	); err != nil {
		return nil, err
	}
	res := &exec.Result{}
	err := c.finish(func(msg pgproto3.BackendMessage) error {
		switch m := msg.(type) {
		case *pgproto3.ParseComplete, *pgproto3.BindComplete, *pgproto3.NoData, *pgproto3.EmptyQueryResponse:
		case *pgproto3.RowDescription:
			res.Fields = make([]pgproto3.FieldDescription, len(m.Fields))
			for i, f := range m.Fields { // a flyweight: copy
				f.Name = slices.Clone(f.Name)
				res.Fields[i] = f
			}
		case *pgproto3.DataRow:
			row := make([][]byte, len(m.Values))
			for i, v := range m.Values {
				if v != nil {
					row[i] = slices.Clone(v)
				}
			}
			res.Rows = append(res.Rows, row)
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
