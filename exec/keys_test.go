package exec

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

func TestSameKey(t *testing.T) {
	f8 := func(f float64) []byte { return binary.BigEndian.AppendUint64(nil, math.Float64bits(f)) }
	f4 := func(f float32) []byte { return binary.BigEndian.AppendUint32(nil, math.Float32bits(f)) }
	iv := func(us int64, days, months int32) []byte {
		b := binary.BigEndian.AppendUint64(nil, uint64(us))
		b = binary.BigEndian.AppendUint32(b, uint32(days))
		return binary.BigEndian.AppendUint32(b, uint32(months))
	}
	// numeric 1 with display scales 1 and 2: one digit, weight 0.
	num := func(dscale uint16) []byte { return []byte{0, 1, 0, 0, 0, 0, byte(dscale >> 8), byte(dscale), 0, 1} }
	for _, c := range []struct {
		oid  uint32
		a, b []byte
		same bool
	}{
		{pgtype.Float8OID, f8(0), f8(math.Copysign(0, -1)), true},
		{pgtype.Float8OID, f8(math.NaN()), binary.BigEndian.AppendUint64(nil, 0xfff8000000000001), true},
		{pgtype.Float8OID, f8(1), f8(-1), false},
		{pgtype.Float4OID, f4(0), f4(float32(math.Copysign(0, -1))), true},
		{pgtype.Float4OID, f4(float32(math.NaN())), binary.BigEndian.AppendUint32(nil, 0xffc00001), true},
		{pgtype.NumericOID, num(1), num(2), true},
		{pgtype.NumericOID, num(1), []byte{0, 1, 0, 0, 0, 0, 0, 1, 0, 2}, false},
		{pgtype.IntervalOID, iv(86_400_000_000, 0, 0), iv(0, 1, 0), true},
		{pgtype.IntervalOID, iv(0, 30, 0), iv(0, 0, 1), true},
		{pgtype.IntervalOID, iv(0, 31, 0), iv(0, 0, 1), false},
		{pgtype.IntervalOID, iv(math.MaxInt64, math.MaxInt32, math.MaxInt32), iv(math.MaxInt64, math.MaxInt32, math.MaxInt32-1), false},
		{pgtype.TextOID, []byte("a"), []byte("a "), false},
	} {
		if got := string(sameKey(c.oid, c.a)) == string(sameKey(c.oid, c.b)); got != c.same {
			t.Errorf("type %d: %x and %x compared equal %v, want %v", c.oid, c.a, c.b, got, c.same)
		}
	}
	if groupable(pgtype.JSONBOID) || groupable(pgtype.TimetzOID) || !groupable(pgtype.TimestamptzOID) {
		t.Error("groupable: jsonb and timetz are not, timestamptz is")
	}
}
