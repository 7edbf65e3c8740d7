package refresh

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// numericBytes is a numeric's binary form: digits base 10000, most
// significant first, the first worth 10000^weight.
func numericBytes(weight int16, sign, dscale uint16, digits ...uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(digits)))
	b = binary.BigEndian.AppendUint16(b, uint16(weight))
	b = binary.BigEndian.AppendUint16(b, sign)
	b = binary.BigEndian.AppendUint16(b, dscale)
	for _, d := range digits {
		b = binary.BigEndian.AppendUint16(b, d)
	}
	return b
}

// TestSumState: sums as PostgreSQL's sum() makes them, in its binary
// forms (the expected bytes are numeric_send's for the same values).
func TestSumState(t *testing.T) {
	for _, c := range []struct {
		name string
		form string
		in   [][]byte
		want []byte
	}{
		{"10.25 + 2.25", "numeric", [][]byte{numericBytes(0, numericPos, 2, 10, 2500), numericBytes(0, numericPos, 2, 2, 2500)},
			numericBytes(0, numericPos, 2, 12, 5000)},
		{"1.5 + -1.50: zero at scale 2", "numeric", [][]byte{numericBytes(0, numericPos, 1, 1, 5000), numericBytes(0, numericNeg, 2, 1, 5000)},
			numericBytes(0, numericPos, 2)},
		{"99999999 + 0.0001", "numeric", [][]byte{numericBytes(1, numericPos, 0, 9999, 9999), numericBytes(-1, numericPos, 4, 1)},
			numericBytes(1, numericPos, 4, 9999, 9999, 1)},
		{"-20000 + 5", "numeric", [][]byte{numericBytes(1, numericNeg, 0, 2), numericBytes(0, numericPos, 0, 5)},
			numericBytes(1, numericNeg, 0, 1, 9995)},
		{"NaN wins", "numeric", [][]byte{numericBytes(0, numericPos, 0, 5), numericBytes(0, numericNaN, 0)}, numericBytes(0, numericNaN, 0)},
		{"+Inf", "numeric", [][]byte{numericBytes(0, numericPos, 0, 5), numericBytes(0, numericPInf, 0)}, numericBytes(0, numericPInf, 0)},
		{"+Inf + -Inf", "numeric", [][]byte{numericBytes(0, numericPInf, 0), numericBytes(0, numericNInf, 0)}, numericBytes(0, numericNaN, 0)},
		{"int8", "int8", [][]byte{binary.BigEndian.AppendUint64(nil, 1<<62), binary.BigEndian.AppendUint64(nil, 1<<62), binary.BigEndian.AppendUint64(nil, 1<<62)},
			numericBytes(4, numericPos, 0, 1383, 5058, 552, 8216, 3712)}, // 13835058055282163712
		{"int4", "int4", [][]byte{binary.BigEndian.AppendUint32(nil, 7), binary.BigEndian.AppendUint32(nil, uint32(0xFFFFFFFF))},
			binary.BigEndian.AppendUint64(nil, 6)},
		{"a 6-digit value and a small one", "numeric", [][]byte{numericBytes(4, numericPos, 1, 12, 3456, 7890, 1234, 5678, 5000), numericBytes(-1, numericPos, 2, 2500)},
			numericBytes(4, numericPos, 2, 12, 3456, 7890, 1234, 5678, 7500)}, // 123456789012345678.5 + 0.25
		{"scales growing: 7 + 0.5 + 0.00000001", "numeric", [][]byte{numericBytes(0, numericPos, 0, 7), numericBytes(-1, numericPos, 1, 5000), numericBytes(-2, numericPos, 8, 1)},
			numericBytes(0, numericPos, 8, 7, 5000, 1)},
		{"no values", "numeric", nil, nil},
	} {
		var a, b sumState
		for i, v := range c.in {
			s := &a
			if i%2 == 1 {
				s = &b
			}
			if err := s.add(c.form, v); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		a.absorb(&b)
		if got := a.marshal(c.form); !bytes.Equal(got, c.want) {
			t.Errorf("%s: got % x, want % x", c.name, got, c.want)
		}
	}
	var s sumState
	for _, bad := range [][]byte{{1, 2}, numericBytes(0, 0x1234, 0, 1), append(numericBytes(0, numericPos, 0, 1), 0)} {
		if err := s.add("numeric", bad); err == nil {
			t.Errorf("% x: no error", bad)
		}
	}
}
