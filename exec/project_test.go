package exec

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
)

func int8Bytes(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// projectGroups are two keys' groups of a text key, an estimate and a
// count: rollup rows carry counts, the estimate rows the estimates.
func projectGroups() (*merged, *plan.Groups) {
	m := &merged{elemOIDs: []uint32{pgtype.TextOID, pgtype.Int8OID, pgtype.Int8OID}, cols: make([][][]byte, 3)}
	for _, r := range [][][]byte{
		{[]byte("DE"), nil, int8Bytes(3)},
		{nil, nil, int8Bytes(4)},
		{[]byte("DE"), nil, int8Bytes(5)},
		{[]byte("DE"), int8Bytes(7), nil},
		{nil, int8Bytes(2), nil},
	} {
		m.addRow(r)
	}
	g := &plan.Groups{
		Keys:    []plan.Key{{Name: "k"}},
		Aggs:    []plan.Agg{{Name: "a", Op: plan.MergeHLL}, {Name: "n", Op: plan.AddCounts}},
		Columns: []plan.Column{{Of: 2, Name: "n"}, {Of: 0, Name: "country"}, {Of: 1, Name: "users"}},
	}
	return m, g
}

func TestProject(t *testing.T) {
	m, g := projectGroups()
	res, ok := m.project(g, nil)
	if !ok {
		t.Fatal("not projected")
	}
	got := ""
	for _, r := range res.Rows {
		for _, v := range r {
			if v == nil {
				got += "NULL "
				continue
			}
			got += string(v) + " "
		}
		got += "| "
	}
	if want := "8 DE 7 | 4 NULL 2 | "; got != want || res.Tag != "SELECT 2" {
		t.Fatalf("rows %q, tag %q; want %q, SELECT 2", got, res.Tag, want)
	}
	if f := res.Fields[1]; string(f.Name) != "country" || f.DataTypeOID != pgtype.TextOID || f.Format != 0 {
		t.Fatalf("field %+v", f)
	}
	bin, ok := m.project(g, []int16{1, 0, 1})
	if !ok || string(bin.Rows[0][0]) != string(int8Bytes(8)) || string(bin.Rows[0][1]) != "DE" || bin.Fields[0].Format != 1 {
		t.Fatalf("binary: %v %q", ok, bin.Rows)
	}
}

// TestProjectDeclines: what the shaping statement must answer instead.
func TestProjectDeclines(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*merged, *plan.Groups) []int16
	}{
		{"no columns", func(_ *merged, g *plan.Groups) []int16 { g.Columns = nil; return nil }},
		{"a sum", func(_ *merged, g *plan.Groups) []int16 { g.Aggs[1].Op = plan.AddSums; return nil }},
		{"a sketch", func(_ *merged, g *plan.Groups) []int16 { g.Aggs[0].Sketch = true; return nil }},
		{"a cast key", func(_ *merged, g *plan.Groups) []int16 { g.Keys[0].Type = "text"; return nil }},
		{"a date key as text", func(m *merged, _ *plan.Groups) []int16 { m.elemOIDs[0] = pgtype.DateOID; return nil }},
		{"a format code 2", func(*merged, *plan.Groups) []int16 { return []int16{2} }},
		{"a count beyond bigint", func(m *merged, _ *plan.Groups) []int16 {
			m.addRow([][]byte{[]byte("DE"), nil, int8Bytes(math.MaxInt64)})
			return nil
		}},
		{"a value of another size", func(m *merged, _ *plan.Groups) []int16 {
			m.addRow([][]byte{[]byte("DE"), nil, []byte{1, 2}})
			return nil
		}},
	} {
		m, g := projectGroups()
		formats := c.change(m, g)
		if res, ok := m.project(g, formats); ok {
			t.Errorf("%s: projected %q", c.name, res.Rows)
		}
	}
	// A date key in binary is passed along as it came.
	m, g := projectGroups()
	m.elemOIDs[0] = pgtype.DateOID
	m.cols[0][0], m.cols[0][2], m.cols[0][3] = []byte{0, 0, 0, 1}, []byte{0, 0, 0, 1}, []byte{0, 0, 0, 1}
	if res, ok := m.project(g, []int16{1}); !ok || string(res.Rows[0][1]) != "\x00\x00\x00\x01" {
		t.Fatalf("a date key in binary: %v %v", ok, res)
	}
}

func TestPrintText(t *testing.T) {
	for _, c := range []struct {
		oid  uint32
		v    []byte
		want string
	}{
		{pgtype.Int2OID, []byte{0x80, 0}, "-32768"},
		{pgtype.Int4OID, []byte{0xff, 0xff, 0xff, 0xfe}, "-2"},
		{pgtype.Int8OID, int8Bytes(math.MaxInt64), "9223372036854775807"},
		{pgtype.BoolOID, []byte{1}, "t"},
		{pgtype.BoolOID, []byte{0}, "f"},
		{pgtype.UUIDOID, []byte{0xc4, 0xca, 0x42, 0x38, 0xa0, 0xb9, 0x23, 0x82, 0x0d, 0xcc, 0x50, 0x9a, 0x6f, 0x75, 0x84, 0x9b},
			"c4ca4238-a0b9-2382-0dcc-509a6f75849b"},
		{pgtype.BPCharOID, []byte("ab  "), "ab  "},
	} {
		got, ok := printText(c.oid, c.v)
		if !ok || string(got) != c.want {
			t.Errorf("type %d, %x: %q %v, want %q", c.oid, c.v, got, ok, c.want)
		}
	}
	for _, c := range []struct {
		oid uint32
		v   []byte
	}{{pgtype.Int4OID, []byte{1}}, {pgtype.UUIDOID, []byte{1}}, {pgtype.BoolOID, nil}, {pgtype.DateOID, []byte{0, 0, 0, 0}}} {
		if got, ok := printText(c.oid, c.v); ok {
			t.Errorf("type %d, %x: printed %q", c.oid, c.v, got)
		}
	}
}
