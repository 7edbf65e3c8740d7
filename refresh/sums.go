package refresh

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"slices"
)

// sumState is a group's sum of one measure's values while it is rebuilt,
// added exactly as PostgreSQL's sum() adds them, from the values the read
// statement streams in COPY BINARY form (field form int2, int4, int8 or
// numeric):
//
//   - sum(smallint) and sum(integer) are a bigint (their int64 total);
//   - sum(bigint) and sum(numeric) are a numeric, whose display scale is
//     the largest of the values', NaN if any value is NaN or if both
//     infinities occur, else an infinity if one occurs.
//
// A group without a non-NULL value sums to NULL.
type sumState struct {
	any  bool
	ints int64 // int2, int4
	// The total of int8 and numeric values is dec + small, both in units
	// of 10000^-frac: most values are added to small, an int64, and
	// reach dec, a big.Int, only when small would overflow.
	dec    *big.Int
	small  int64
	frac   int // base-10000 fraction digits dec and small count
	dscale int // the largest display scale
	nan    bool
	posInf bool
	negInf bool
}

// numeric sign words (PostgreSQL's numeric.c).
const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
)

// add adds one value in the given form.
func (s *sumState) add(form string, v []byte) error {
	switch form {
	case "int2", "int4":
		var n int64
		switch {
		case form == "int2" && len(v) == 2:
			n = int64(int16(binary.BigEndian.Uint16(v)))
		case form == "int4" && len(v) == 4:
			n = int64(int32(binary.BigEndian.Uint32(v)))
		default:
			return fmt.Errorf("%s of %d bytes", form, len(v))
		}
		if (n > 0 && s.ints > math.MaxInt64-n) || (n < 0 && s.ints < math.MinInt64-n) {
			return fmt.Errorf("sum out of bigint range")
		}
		s.ints += n
	case "int8":
		if len(v) != 8 {
			return fmt.Errorf("int8 of %d bytes", len(v))
		}
		s.addInt(int64(binary.BigEndian.Uint64(v)), 0, 0)
	case "numeric":
		if err := s.addNumeric(v); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown sum form %q", form)
	}
	s.any = true
	return nil
}

// addNumeric adds a numeric in binary form: ndigits, weight, sign and
// dscale (16 bits each), then ndigits base-10000 digits, the first worth
// 10000^weight.
func (s *sumState) addNumeric(v []byte) error {
	if len(v) < 8 {
		return fmt.Errorf("numeric of %d bytes", len(v))
	}
	ndigits := int(binary.BigEndian.Uint16(v))
	weight := int(int16(binary.BigEndian.Uint16(v[2:])))
	sign := binary.BigEndian.Uint16(v[4:])
	dscale := int(binary.BigEndian.Uint16(v[6:]))
	if len(v) != 8+2*ndigits || dscale > 0x3FFF {
		return fmt.Errorf("numeric of %d bytes for %d digits", len(v), ndigits)
	}
	switch sign {
	case numericNaN:
		s.nan = true
		return nil
	case numericPInf:
		s.posInf = true
		return nil
	case numericNInf:
		s.negInf = true
		return nil
	case numericPos, numericNeg:
	default:
		return fmt.Errorf("numeric sign %#x", sign)
	}
	frac := ndigits - 1 - weight // the digits count units of 10000^-frac
	if ndigits <= 4 && frac >= 0 {
		// Below 10000^4 = 10^16: an int64.
		var n int64
		for i := range ndigits {
			d := binary.BigEndian.Uint16(v[8+2*i:])
			if d >= 10000 {
				return fmt.Errorf("numeric digit %d", d)
			}
			n = n*10000 + int64(d)
		}
		if sign == numericNeg {
			n = -n
		}
		s.addInt(n, frac, dscale)
		return nil
	}
	n := new(big.Int)
	tenK := big.NewInt(10000)
	for i := range ndigits {
		d := binary.BigEndian.Uint16(v[8+2*i:])
		if d >= 10000 {
			return fmt.Errorf("numeric digit %d", d)
		}
		n.Mul(n, tenK).Add(n, big.NewInt(int64(d)))
	}
	if sign == numericNeg {
		n.Neg(n)
	}
	if frac < 0 {
		n.Mul(n, new(big.Int).Exp(tenK, big.NewInt(int64(-frac)), nil))
		frac = 0
	}
	s.addScaled(n, frac, dscale)
	return nil
}

// addInt adds n units of 10000^-frac, of display scale dscale, to small
// while it fits.
func (s *sumState) addInt(n int64, frac, dscale int) {
	if frac > s.frac {
		s.addScaled(new(big.Int), frac, dscale) // rescales
	}
	for f := frac; f < s.frac; f++ {
		if n > math.MaxInt64/10000 || n < math.MinInt64/10000 {
			s.addScaled(big.NewInt(n), f, dscale)
			return
		}
		n *= 10000
	}
	if (n > 0 && s.small > math.MaxInt64-n) || (n < 0 && s.small < math.MinInt64-n) {
		s.flushSmall()
	}
	s.small += n
	s.dscale = max(s.dscale, dscale)
}

// flushSmall moves small into dec.
func (s *sumState) flushSmall() {
	if s.dec == nil {
		s.dec = new(big.Int)
	}
	if s.small != 0 {
		s.dec.Add(s.dec, big.NewInt(s.small))
		s.small = 0
	}
}

// addScaled adds n units of 10000^-frac, of display scale dscale.
func (s *sumState) addScaled(n *big.Int, frac, dscale int) {
	s.flushSmall()
	tenK := big.NewInt(10000)
	switch {
	case frac > s.frac:
		s.dec.Mul(s.dec, new(big.Int).Exp(tenK, big.NewInt(int64(frac-s.frac)), nil))
		s.frac = frac
	case frac < s.frac:
		n = new(big.Int).Mul(n, new(big.Int).Exp(tenK, big.NewInt(int64(s.frac-frac)), nil))
	}
	s.dec.Add(s.dec, n)
	s.dscale = max(s.dscale, dscale)
}

// absorb adds another stream's sum of the same group.
func (s *sumState) absorb(o *sumState) {
	if !o.any {
		return
	}
	s.any = true
	s.ints += o.ints
	s.nan, s.posInf, s.negInf = s.nan || o.nan, s.posInf || o.posInf, s.negInf || o.negInf
	o.flushSmall()
	s.addScaled(o.dec, o.frac, o.dscale)
}

// marshal returns the sum as a COPY BINARY value of its type (nil for
// NULL): int8 for form int2 and int4, numeric otherwise.
func (s *sumState) marshal(form string) []byte {
	if !s.any {
		return nil
	}
	if form == "int2" || form == "int4" {
		return binary.BigEndian.AppendUint64(nil, uint64(s.ints))
	}
	special := func(sign uint16) []byte {
		return []byte{0, 0, 0, 0, byte(sign >> 8), byte(sign), 0, 0}
	}
	switch {
	case s.nan || (s.posInf && s.negInf):
		return special(numericNaN)
	case s.posInf:
		return special(numericPInf)
	case s.negInf:
		return special(numericNInf)
	}
	s.flushSmall()
	sign := uint16(numericPos)
	n := new(big.Int).Set(s.dec)
	if n.Sign() < 0 {
		sign = numericNeg
		n.Neg(n)
	}
	// Base-10000 digits, least significant first; n counts 10000^-frac.
	var digits []uint16
	tenK := big.NewInt(10000)
	r := new(big.Int)
	for n.Sign() > 0 {
		n.QuoRem(n, tenK, r)
		digits = append(digits, uint16(r.Int64()))
	}
	weight := len(digits) - 1 - s.frac
	// Trailing (least significant) zero digits are not stored, nor are
	// leading ones.
	lo := 0
	for lo < len(digits) && digits[lo] == 0 {
		lo++
	}
	digits = digits[lo:]
	slices.Reverse(digits)
	if len(digits) == 0 {
		weight = 0
		sign = numericPos
	}
	out := make([]byte, 8, 8+2*len(digits))
	binary.BigEndian.PutUint16(out, uint16(len(digits)))
	binary.BigEndian.PutUint16(out[2:], uint16(int16(weight)))
	binary.BigEndian.PutUint16(out[4:], sign)
	binary.BigEndian.PutUint16(out[6:], uint16(s.dscale))
	for _, d := range digits {
		out = binary.BigEndian.AppendUint16(out, d)
	}
	return out
}
