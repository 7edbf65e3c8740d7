package exec

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/upstream"
)

// project is the shaped answer of groups g built in the proxy, when g's
// shape only selects group columns (plan.Groups.Columns): the rows the
// shaping statement would return, without its round trip. It gives the
// same values as that statement's aggregates over the merged columns
// (an estimate's max, a count's sum, COALESCE'd to 0), each column in its
// asked-for format. ok is false when the statement must run instead: an
// aggregate other than an estimate or a count, a key whose text the proxy
// does not print itself, a value not of its type's size, a count's sum
// beyond bigint (PostgreSQL then says so).
func (m *merged) project(g *plan.Groups, formats []int16) (res *upstream.Result, ok bool) {
	if len(g.Columns) == 0 {
		return nil, false
	}
	nkeys := len(g.Keys)
	for _, k := range g.Keys {
		if k.Type != "" { // the statement casts the key
			return nil, false
		}
	}
	for _, a := range g.Aggs {
		if !projectable(a) {
			return nil, false
		}
	}
	for j, a := range g.Aggs {
		if a.Op == plan.Exact && m.elemOIDs[nkeys+j] != pgtype.Int8OID {
			return nil, false
		}
	}
	// The groups' values, one slot per key and aggregate, in the order
	// the groups first appear among the merged rows.
	var (
		rows  [][][]byte
		sums  [][]int64
		index = map[string]int{}
		kb    []byte
		nrows int
	)
	if len(m.cols) > 0 {
		nrows = len(m.cols[0])
	}
	keys := make([][]byte, nkeys)
	for r := 0; r < nrows; r++ {
		for i := range keys {
			keys[i] = m.cols[i][r]
		}
		kb = groupKey(kb[:0], m.elemOIDs[:nkeys], keys)
		gi, seen := index[string(kb)]
		if !seen {
			gi = len(rows)
			index[string(kb)] = gi
			row := make([][]byte, nkeys+len(g.Aggs))
			copy(row, keys)
			rows = append(rows, row)
			sums = append(sums, make([]int64, len(g.Aggs)))
		}
		for j, a := range g.Aggs {
			v := m.cols[nkeys+j][r]
			if v == nil {
				continue
			}
			if len(v) != 8 {
				return nil, false
			}
			n := int64(binary.BigEndian.Uint64(v))
			switch a.Op {
			case plan.AddCounts:
				s := sums[gi][j]
				if (n > 0 && s > math.MaxInt64-n) || (n < 0 && s < math.MinInt64-n) {
					return nil, false
				}
				sums[gi][j] = s + n
			default: // an estimate or exact count: the group's one value, or the largest (max)
				if cur := rows[gi][nkeys+j]; cur == nil || n > int64(binary.BigEndian.Uint64(cur)) {
					rows[gi][nkeys+j] = v
				}
			}
		}
	}
	for gi := range rows {
		for j, a := range g.Aggs {
			if a.Op == plan.AddCounts {
				rows[gi][nkeys+j] = binary.BigEndian.AppendUint64(nil, uint64(sums[gi][j]))
			}
		}
	}
	res = &upstream.Result{Fields: make([]pgproto3.FieldDescription, len(g.Columns)), Rows: make([][][]byte, len(rows)),
		Tag: "SELECT " + strconv.Itoa(len(rows))}
	for c, col := range g.Columns {
		if col.Of < 0 || col.Of >= nkeys+len(g.Aggs) {
			return nil, false
		}
		format := upstream.FormatOf(formats, c)
		if format != 0 && format != 1 {
			return nil, false
		}
		oid := uint32(pgtype.Int8OID)
		if col.Of < nkeys {
			oid = m.elemOIDs[col.Of]
		}
		size, printable := textTypes[oid]
		if !printable && (format == 0 || col.Of >= nkeys) {
			return nil, false
		}
		if !printable {
			size = -1 // binary of a type the proxy passes along as it came
		}
		res.Fields[c] = pgproto3.FieldDescription{Name: []byte(col.Name), DataTypeOID: oid, DataTypeSize: size,
			TypeModifier: -1, Format: format}
	}
	for gi, row := range rows {
		out := make([][]byte, len(g.Columns))
		for c, col := range g.Columns {
			v := row[col.Of]
			if v == nil || res.Fields[c].Format == 1 {
				out[c] = v
				continue
			}
			t, ok := printText(res.Fields[c].DataTypeOID, v)
			if !ok {
				return nil, false
			}
			out[c] = t
		}
		res.Rows[gi] = out
	}
	return res, true
}

// projectable reports whether project computes aggregate a's column as
// the shaping statement does: bigint estimates, counts and exact counts.
func projectable(a plan.Agg) bool {
	switch a.Op {
	case plan.MergeHLL, plan.MergeTheta:
		return !a.Sketch
	case plan.AddCounts, plan.Exact:
		return true
	}
	return false
}

// textTypes are the types whose text form project prints from their
// binary one, with their sizes (pg_type.typlen).
var textTypes = map[uint32]int16{
	pgtype.Int2OID: 2, pgtype.Int4OID: 4, pgtype.Int8OID: 8, pgtype.BoolOID: 1, pgtype.UUIDOID: 16,
	pgtype.TextOID: -1, pgtype.VarcharOID: -1, pgtype.BPCharOID: -1, pgtype.NameOID: 64,
}

// printText is PostgreSQL's text output of value v of type oid, given in
// its binary form (the type's send function). ok is false for a type not
// in textTypes or a value of the wrong size.
func printText(oid uint32, v []byte) (_ []byte, ok bool) {
	switch oid {
	case pgtype.Int2OID:
		if len(v) != 2 {
			return nil, false
		}
		return strconv.AppendInt(nil, int64(int16(binary.BigEndian.Uint16(v))), 10), true
	case pgtype.Int4OID:
		if len(v) != 4 {
			return nil, false
		}
		return strconv.AppendInt(nil, int64(int32(binary.BigEndian.Uint32(v))), 10), true
	case pgtype.Int8OID:
		if len(v) != 8 {
			return nil, false
		}
		return strconv.AppendInt(nil, int64(binary.BigEndian.Uint64(v)), 10), true
	case pgtype.BoolOID:
		if len(v) != 1 {
			return nil, false
		}
		if v[0] != 0 {
			return []byte("t"), true
		}
		return []byte("f"), true
	case pgtype.UUIDOID:
		if len(v) != 16 {
			return nil, false
		}
		out := make([]byte, 36)
		hex.Encode(out[0:8], v[0:4])
		out[8] = '-'
		hex.Encode(out[9:13], v[4:6])
		out[13] = '-'
		hex.Encode(out[14:18], v[6:8])
		out[18] = '-'
		hex.Encode(out[19:23], v[8:10])
		out[23] = '-'
		hex.Encode(out[24:36], v[10:16])
		return out, true
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
		// textsend and textout write the same bytes (in the client's
		// encoding); so do the others'.
		return v, true
	}
	return nil, false
}
