package exec

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/upstream"
)

// spanRow is a fetch row naming the span [first, last], microseconds
// since 2000-01-01 (timestamp_send's form), in a fetch of n columns.
func spanRow(first, last int64, n int) [][]byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(first))
	b = binary.BigEndian.AppendUint64(b, uint64(last))
	row := make([][]byte, n)
	row[0] = []byte(plan.SpanPrefix + hex.EncodeToString(b))
	return row
}

// TestBaseStatement: the BaseRead statement binds the client's parameters
// it reads, the lifted literals, then the spans the fetch returned as two
// binary arrays of the span type; without spans it is not run, unless it
// must be (Always: an empty array each). A malformed span row fails.
func TestBaseStatement(t *testing.T) {
	p := &plan.Rollup{Head: plan.Head{Params: 1}, Lifted: []string{"2026-01-01 06:00"},
		BaseRead: &plan.BaseRead{SQL: "SELECT $1, $2, $3, $4", Params: []int{1}, SpansParam: 3, SpanType: "timestamptz"}}
	x := &run{params: Params{Values: [][]byte{[]byte("DE")}, OIDs: []uint32{pgtype.TextOID}}}
	fetch := &upstream.Result{Rows: [][][]byte{{[]byte("rollup"), nil}, spanRow(-1, 86_399_999_999, 2), spanRow(86_400_000_000, 172_799_999_999, 2)}}
	st, err := x.baseStatement(p, fetch, []int16{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Params) != 4 || string(st.Params[0]) != "DE" || string(st.Params[1]) != "2026-01-01 06:00" {
		t.Fatalf("parameters %q", st.Params)
	}
	if st.ParamOIDs[2] != pgtype.TimestamptzArrayOID || st.ParamOIDs[3] != pgtype.TimestamptzArrayOID ||
		st.ParamFormats[2] != 1 || st.ParamFormats[3] != 1 || st.ParamFormats[0] != 0 {
		t.Errorf("span parameters typed %v, formats %v", st.ParamOIDs, st.ParamFormats)
	}
	var firsts pgtype.FlatArray[pgtype.Timestamptz]
	if err := pgtype.NewMap().Scan(pgtype.TimestamptzArrayOID, pgtype.BinaryFormatCode, st.Params[2], &firsts); err != nil {
		t.Fatalf("the firsts do not decode as timestamptz[]: %v", err)
	}
	if len(firsts) != 2 || firsts[0].Time.UTC().Format("2006-01-02 15:04:05.999999") != "1999-12-31 23:59:59.999999" ||
		firsts[1].Time.UTC().Format("2006-01-02") != "2000-01-02" {
		t.Errorf("firsts %v", firsts)
	}

	none := &upstream.Result{Rows: [][][]byte{{[]byte("rollup"), nil}}}
	if st, err := x.baseStatement(p, none, nil); st != nil || err != nil {
		t.Errorf("without spans: %v, %v; want nothing to run", st, err)
	}
	p.BaseRead.Always = true
	st, err = x.baseStatement(p, none, nil)
	if err != nil || st == nil {
		t.Fatalf("without spans, Always: %v, %v", st, err)
	}
	var empty pgtype.FlatArray[pgtype.Timestamptz]
	if err := pgtype.NewMap().Scan(pgtype.TimestamptzArrayOID, pgtype.BinaryFormatCode, st.Params[3], &empty); err != nil || len(empty) != 0 {
		t.Errorf("the empty array: %v, %v", empty, err)
	}

	bad := &upstream.Result{Rows: [][][]byte{{[]byte(plan.SpanPrefix + "00ff"), nil}}}
	if _, err := x.baseStatement(p, bad, nil); !errors.Is(err, ErrData) {
		t.Errorf("a short span row: %v, want ErrData", err)
	}
}

// TestAddBaseTypes: the base rows join the fetch's only when the group
// keys and the columns both halves fill have the same types in the two
// statements; else the plan is not answered (ErrData), rather than the
// groups splitting.
func TestAddBaseTypes(t *testing.T) {
	p := &plan.Rollup{Groups: plan.Groups{Keys: []plan.Key{{Name: "k"}},
		Aggs: []plan.Agg{{Op: plan.AddCounts, RollupColumn: 2, BaseColumn: 2}}}}
	fields := func(key uint32) []pgproto3.FieldDescription {
		return []pgproto3.FieldDescription{field(pgtype.TextOID), field(key), field(pgtype.Int8OID)}
	}
	f := &fetched{res: &upstream.Result{Fields: fields(pgtype.Int4OID)}}
	row := [][]byte{[]byte("base"), {0, 0, 0, 1}, {0, 0, 0, 0, 0, 0, 0, 3}}
	if err := f.addBase(p, &upstream.Result{Fields: fields(pgtype.Int4OID), Rows: [][][]byte{row}}); err != nil {
		t.Fatal(err)
	}
	if len(f.res.Rows) != 1 {
		t.Errorf("%d rows after adding one", len(f.res.Rows))
	}
	if err := f.addBase(p, &upstream.Result{Fields: fields(pgtype.Int8OID), Rows: [][][]byte{row}}); !errors.Is(err, ErrData) {
		t.Errorf("a key int4 in the fetch and int8 among the base rows: %v, want ErrData", err)
	}
}

// FuzzBaseStatement: whatever the fetch's part column holds, binding the
// spans returns a statement or an error, never a panic, and a statement's
// two arrays hold as many spans as the fetch named.
func FuzzBaseStatement(f *testing.F) {
	f.Add(plan.SpanPrefix + "00000000000000000000000000000001")
	f.Add(plan.SpanPrefix + "zz")
	f.Add(plan.SpanPrefix)
	f.Add("rollup")
	f.Fuzz(func(t *testing.T, part string) {
		p := &plan.Rollup{BaseRead: &plan.BaseRead{SQL: "SELECT $1, $2", SpansParam: 1, SpanType: "timestamp"}}
		st, err := (&run{}).baseStatement(p, &upstream.Result{Rows: [][][]byte{{[]byte(part)}}}, nil)
		if err != nil || st == nil {
			return
		}
		if len(st.Params) != 2 {
			t.Fatalf("%d parameters", len(st.Params))
		}
	})
}
