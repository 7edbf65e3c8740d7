package exec

import (
	"encoding/binary"
	"math"
	"math/big"

	"github.com/jackc/pgx/v5/pgtype"
)

// The proxy merges rows into groups by their keys' bytes, in binary
// format (groupKey), where PostgreSQL groups by its equality operator.
// Most types a key can have are equal exactly when their bytes are: the
// integers, text types, boolean, uuid, dates and times. A few are not,
// and their keys are compared in a form of their own (sameKey): floats
// (-0 = 0, every NaN equal), numeric (1.0 = 1.00: the display scale is
// left out) and interval ('1 day' = '24 hours': compared by the span
// PostgreSQL orders them by). A key of any other type is not merged: the
// statement is answered by PostgreSQL.

// byteEqual are the key types whose equal values have equal bytes.
var byteEqual = map[uint32]bool{
	pgtype.Int2OID: true, pgtype.Int4OID: true, pgtype.Int8OID: true, pgtype.OIDOID: true,
	pgtype.BoolOID: true, pgtype.TextOID: true, pgtype.VarcharOID: true, pgtype.BPCharOID: true,
	pgtype.NameOID: true, pgtype.QCharOID: true, pgtype.UUIDOID: true, pgtype.ByteaOID: true,
	pgtype.DateOID: true, pgtype.TimeOID: true, pgtype.TimestampOID: true, pgtype.TimestamptzOID: true,
	// Arrays of those: equal arrays have the same dimensions, lower
	// bounds and NULLs (array_eq), and so the same bytes.
	pgtype.Int2ArrayOID: true, pgtype.Int4ArrayOID: true, pgtype.Int8ArrayOID: true, pgtype.BoolArrayOID: true,
	pgtype.TextArrayOID: true, pgtype.VarcharArrayOID: true, pgtype.BPCharArrayOID: true, pgtype.NameArrayOID: true,
	pgtype.UUIDArrayOID: true, pgtype.DateArrayOID: true, pgtype.TimestampArrayOID: true, pgtype.TimestamptzArrayOID: true,
}

// groupable reports whether keys of type oid can be grouped by groupKey.
func groupable(oid uint32) bool {
	switch oid {
	case pgtype.Float4OID, pgtype.Float8OID, pgtype.NumericOID, pgtype.IntervalOID:
		return true
	}
	return byteEqual[oid]
}

// sameKey is key k of type oid (binary) in a form equal for equal values.
// A value of the wrong size is left as it is.
func sameKey(oid uint32, k []byte) []byte {
	switch oid {
	case pgtype.Float4OID:
		if len(k) == 4 {
			f := math.Float32frombits(binary.BigEndian.Uint32(k))
			switch {
			case f == 0:
				return []byte{0, 0, 0, 0}
			case f != f:
				return []byte{0x7f, 0xc0, 0, 0}
			}
		}
	case pgtype.Float8OID:
		if len(k) == 8 {
			f := math.Float64frombits(binary.BigEndian.Uint64(k))
			switch {
			case f == 0:
				return make([]byte, 8)
			case math.IsNaN(f):
				return []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 0}
			}
		}
	case pgtype.NumericOID:
		// ndigits, weight, sign, dscale (int16 each), then the digits,
		// without leading or trailing zeros: all but dscale is the value.
		if len(k) >= 8 && (k[6] != 0 || k[7] != 0) {
			c := append([]byte(nil), k...)
			c[6], c[7] = 0, 0
			return c
		}
	case pgtype.IntervalOID:
		// microseconds (int64), days, months (int32 each): compared as
		// months of 30 days and days of 24 hours.
		if len(k) == 16 {
			span := big.NewInt(int64(int32(binary.BigEndian.Uint32(k[12:16]))))
			span.Mul(span, big.NewInt(30))
			span.Add(span, big.NewInt(int64(int32(binary.BigEndian.Uint32(k[8:12])))))
			span.Mul(span, big.NewInt(86_400_000_000))
			span.Add(span, big.NewInt(int64(binary.BigEndian.Uint64(k[0:8]))))
			return span.Append([]byte{'i'}, 10)
		}
	}
	return k
}
