package exec

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/upstream"
)

// A fetch over a source Citus distributes reads its base rows with a
// second statement (plan.BaseRead), run in the fetch's transaction: the
// fetch returns the spans to read as plan.SpanPrefix rows, baseStatement
// binds them, and addBase adds the statement's rows to the fetch's.

// baseStatement is the plan's BaseRead statement for the spans among the
// fetch's rows, or nil when there are none and it need not run.
func (x *run) baseStatement(p *plan.Rollup, fetch *upstream.Result, formats []int16) (*upstream.Statement, error) {
	b := p.BaseRead
	var firsts, lasts [][]byte
	for _, r := range fetch.Rows {
		if len(r) == 0 || !strings.HasPrefix(string(r[0]), plan.SpanPrefix) {
			continue
		}
		span, err := hex.DecodeString(strings.TrimPrefix(string(r[0]), plan.SpanPrefix))
		if err != nil || len(span) != 16 {
			return nil, fmt.Errorf("%w: fetch span row %q", ErrData, r[0])
		}
		firsts, lasts = append(firsts, span[:8]), append(lasts, span[8:])
	}
	if len(firsts) == 0 && !b.Always {
		return nil, nil
	}
	var elem, array uint32
	switch b.SpanType {
	case "timestamptz":
		elem, array = pgtype.TimestamptzOID, pgtype.TimestamptzArrayOID
	case "timestamp":
		elem, array = pgtype.TimestampOID, pgtype.TimestampArrayOID
	default:
		return nil, fmt.Errorf("exec: base rows read over spans of type %q", b.SpanType)
	}
	st := statement(b.SQL, p.Params, b.Params, x.params, formats)
	bindLifted(&st, p.Lifted)
	if len(st.Params)+1 != b.SpansParam {
		return nil, fmt.Errorf("exec: the base rows' spans are $%d, after %d parameters", b.SpansParam, len(st.Params))
	}
	if len(st.ParamFormats) == 0 {
		st.ParamFormats = make([]int16, len(st.Params))
	}
	st.ParamOIDs = append(st.ParamOIDs, array, array)
	st.Params = append(st.Params, appendBinaryArray(nil, elem, firsts), appendBinaryArray(nil, elem, lasts))
	st.ParamFormats = append(st.ParamFormats, 1, 1)
	return &st, nil
}

// addBase adds the base rows the BaseRead statement returned to the
// fetch's. The two statements type their columns apart (one statement's
// UNION ALL resolved them together): the group keys and the columns the
// rollup rows and base rows share must have one type, or the rows would
// not meet in their groups.
func (f *fetched) addBase(p *plan.Rollup, base *upstream.Result) error {
	if len(base.Fields) != len(f.res.Fields) {
		return fmt.Errorf("%w: the base rows' statement returned %d columns, the fetch %d", ErrData, len(base.Fields), len(f.res.Fields))
	}
	shared := make([]int, 0, len(p.Keys)+len(p.Aggs))
	for i := range p.Keys {
		shared = append(shared, 1+i)
	}
	for _, a := range p.Aggs {
		if a.RollupColumn >= 0 && a.RollupColumn == a.BaseColumn {
			shared = append(shared, a.RollupColumn)
		}
	}
	for _, c := range shared {
		if got, want := base.Fields[c].DataTypeOID, f.res.Fields[c].DataTypeOID; got != want {
			return fmt.Errorf("%w: column %d is of type %d among the rollup rows and of type %d among the base rows", ErrData, c+1, want, got)
		}
	}
	for _, r := range base.Rows {
		if len(r) != len(base.Fields) || string(r[0]) != "base" {
			return fmt.Errorf("%w: a row of the base rows' statement", ErrData)
		}
	}
	f.res.Rows = append(f.res.Rows, base.Rows...)
	return nil
}
