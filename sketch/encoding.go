package sketch

import (
	"fmt"
	"math/bits"
	"slices"
)

// Serialized type ordinals: the low nibble of header byte V.
const (
	typeUndefined = 0
	typeEmpty     = 1
	typeExplicit  = 2
	typeSparse    = 3
	typeFull      = 4

	schemaVersion = 1
	headerLen     = 3
)

// MarshalBinary returns the sketch in postgresql-hll storage format v1; see
// the package documentation for the layout. It implements
// encoding.BinaryMarshaler.
func (h *HLL) MarshalBinary() ([]byte, error) {
	return h.AppendBinary(nil)
}

// AppendBinary appends the serialized sketch to dst and returns the extended
// slice. It implements encoding.BinaryAppender. The representation is chosen
// as the extension's multiset_pack chooses it: EMPTY and EXPLICIT as they
// are; a sketch with registers as SPARSE when sparse encoding is enabled and
// the SPARSE data bits are strictly fewer than the FULL data bits, else FULL.
func (h *HLL) AppendBinary(dst []byte) ([]byte, error) {
	if h.log2m == 0 {
		return dst, fmt.Errorf("sketch: marshal: uninitialized hll: %w", ErrInvalidParams)
	}
	switch h.kind {
	case kindUndefined:
		return h.appendHeader(dst, typeUndefined), nil
	case kindEmpty:
		return h.appendHeader(dst, typeEmpty), nil
	case kindExplicit:
		dst = slices.Grow(dst, headerLen+8*len(h.explicit))
		dst = h.appendHeader(dst, typeExplicit)
		for _, x := range h.explicit {
			dst = append(dst, byte(x>>56), byte(x>>48), byte(x>>40), byte(x>>32),
				byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
		}
		return dst, nil
	}
	nfilled := countNonZero(h.regs)
	chunk := int(h.log2m) + int(h.regwidth)
	sparseBits := nfilled * chunk
	fullBits := len(h.regs) * int(h.regwidth)
	if h.sparseOn && sparseBits < fullBits {
		size := (sparseBits + 7) / 8
		dst = slices.Grow(dst, headerLen+size)
		dst = h.appendHeader(dst, typeSparse)
		return appendSparse(dst, h.regs, uint(h.regwidth), uint(chunk)), nil
	}
	size := fullBits / 8 // 2^log2m is a multiple of 8: no padding
	dst = slices.Grow(dst, headerLen+size)
	dst = h.appendHeader(dst, typeFull)
	n := len(dst)
	dst = dst[:n+size]
	packFull(dst[n:], h.regs, uint(h.regwidth))
	return dst, nil
}

func (h *HLL) appendHeader(dst []byte, typ byte) []byte {
	c := h.cutoff
	if h.sparseOn {
		c |= 1 << 6
	}
	return append(dst, schemaVersion<<4|typ, (h.regwidth-1)<<5|h.log2m, c)
}

// countNonZero counts the non-zero registers. Registers are below 0x80, so
// adding 0x7f to a byte sets its high bit exactly when it is non-zero.
func countNonZero(regs []uint8) int {
	const lo7, hi = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080
	n := len(regs) &^ 7
	count := 0
	for i := 0; i < n; i += 8 {
		w := le64(regs[i:])
		count += bits.OnesCount64((w + lo7) & hi)
	}
	for _, r := range regs[n:] {
		if r != 0 {
			count++
		}
	}
	return count
}

// appendSparse appends (index<<regwidth | value) words of chunk bits for the
// non-zero registers in index order, packed MSB-first, with the last byte
// padded with zero bits.
func appendSparse(dst []byte, regs []uint8, regwidth, chunk uint) []byte {
	var acc uint64
	var nbits uint
	for i, v := range regs {
		if v == 0 {
			continue
		}
		acc = acc<<chunk | uint64(i)<<regwidth | uint64(v)
		nbits += chunk
		for nbits >= 8 {
			nbits -= 8
			dst = append(dst, byte(acc>>nbits))
		}
	}
	if nbits > 0 {
		dst = append(dst, byte(acc<<(8-nbits)))
	}
	return dst
}

// packFull writes regwidth-bit registers MSB-first into out, which holds
// exactly len(regs)*regwidth/8 bytes. Each group of 8 registers fills exactly
// regwidth bytes. The common widths get loops with constant shifts.
func packFull(out []byte, regs []uint8, w uint) {
	switch w {
	case 5:
		packFull5(out, regs)
	case 4:
		for i := range out {
			out[i] = regs[2*i]<<4 | regs[2*i+1]
		}
	default:
		packFullAny(out, regs, w)
	}
}

// packFull5 packs eight 5-bit registers (one per byte of a little-endian
// word) into 40 bits by merging neighbours pairwise: bytes to 10-bit pairs,
// pairs to 20-bit quads, quads to 40 bits, first register most significant.
func packFull5(out []byte, regs []uint8) {
	out = out[:len(regs)/8*5]
	for len(regs) >= 8 && len(out) >= 5 {
		r := le64(regs)
		t := (r&0x00ff00ff00ff00ff)<<5 | r>>8&0x00ff00ff00ff00ff
		u := (t&0x0000ffff0000ffff)<<10 | t>>16&0x0000ffff0000ffff
		x := (u&0xffffffff)<<20 | u>>32
		if len(out) >= 8 {
			putBE64(out, x<<24)
		} else {
			o := out[:5:5]
			o[0], o[1], o[2], o[3], o[4] = byte(x>>32), byte(x>>24), byte(x>>16), byte(x>>8), byte(x)
		}
		out = out[5:]
		regs = regs[8:]
	}
}

func packFullAny(out []byte, regs []uint8, w uint) {
	var acc uint64
	var nbits uint
	pos := 0
	for _, v := range regs {
		acc = acc<<(w&63) | uint64(v)
		nbits += w
		if nbits >= 8 {
			nbits -= 8
			out[pos] = byte(acc >> (nbits & 63))
			pos++
		}
	}
	if nbits > 0 {
		out[pos] = byte(acc << ((8 - nbits) & 63))
	}
}

// unpackFull is the inverse of packFull.
func unpackFull(regs []uint8, in []byte, w uint) {
	switch w {
	case 5:
		unpackFull5(regs, in)
	case 4:
		for i, b := range in[:len(regs)/2] {
			regs[2*i] = b >> 4
			regs[2*i+1] = b & 0x0f
		}
	default:
		unpackFullAny(regs, in, w)
	}
}

// unpackFull5 is the inverse of packFull5.
func unpackFull5(regs []uint8, in []byte) {
	in = in[:len(regs)/8*5]
	for len(in) >= 5 && len(regs) >= 8 {
		putLE64(regs, unpack5(in))
		in = in[5:]
		regs = regs[8:]
	}
}

// unpack5 returns the eight 5-bit registers packed in the first five bytes
// of in as the little-endian word of their bytes, as unpackFull5 stores
// them: it splits the 40 bits pairwise, 40 to 20-bit quads, quads to 10-bit
// pairs, pairs to bytes.
func unpack5(in []byte) uint64 {
	var x uint64
	if len(in) >= 8 {
		x = be64(in) >> 24
	} else {
		i := in[:5:5]
		x = uint64(i[0])<<32 | uint64(i[1])<<24 | uint64(i[2])<<16 | uint64(i[3])<<8 | uint64(i[4])
	}
	u := x>>20 | (x&0xfffff)<<32
	t := u>>10&0x000003ff000003ff | (u&0x000003ff000003ff)<<16
	return t>>5&0x001f001f001f001f | (t&0x001f001f001f001f)<<8
}

func unpackFullAny(regs []uint8, in []byte, w uint) {
	var acc uint64
	var nbits uint
	pos := 0
	mask := uint64(1)<<w - 1
	for i := range regs {
		for nbits < w {
			acc = acc<<8 | uint64(in[pos])
			pos++
			nbits += 8
		}
		nbits -= w
		regs[i] = uint8(acc >> (nbits & 63) & mask)
	}
}

// sparseReader reads chunk-bit words MSB-first.
type sparseReader struct {
	data  []byte
	pos   int
	acc   uint64
	nbits uint
	chunk uint
}

func (r *sparseReader) next() uint32 {
	for r.nbits < r.chunk {
		r.acc = r.acc<<8 | uint64(r.data[r.pos])
		r.pos++
		r.nbits += 8
	}
	r.nbits -= r.chunk
	return uint32(r.acc>>r.nbits) & (1<<r.chunk - 1)
}

// UnmarshalBinary replaces h with the sketch serialized in b (postgresql-hll
// storage format v1: UNDEFINED, EMPTY, EXPLICIT, SPARSE or FULL). It
// implements encoding.BinaryUnmarshaler. On error h is left unchanged and the
// error wraps ErrTruncated, ErrVersion, ErrType, ErrCorrupt or
// ErrInvalidParams.
//
// Decoding is stricter than the extension's: it also rejects a set top bit
// in byte C, log2m outside 4..17, regwidth above 5, an explicit cutoff above
// 2^13 values on an EMPTY or EXPLICIT sketch, trailing bytes, non-zero
// padding bits, and SPARSE words that are not strictly ascending by index or
// hold a zero value. Memory use is bounded by the parameters (at most 128 KiB
// of registers or 16383 EXPLICIT values), never by len(b).
func (h *HLL) UnmarshalBinary(b []byte) error {
	if err := h.unmarshal(b); err != nil {
		return fmt.Errorf("sketch: unmarshal: %w", err)
	}
	return nil
}

func (h *HLL) unmarshal(b []byte) error {
	n, typ, err := decodeHeader(b)
	if err != nil {
		return err
	}
	data := b[headerLen:]
	switch typ {
	case typeUndefined, typeEmpty:
		if len(data) != 0 {
			return fmt.Errorf("%d trailing bytes after %s header: %w", len(data), typeName(typ), ErrCorrupt)
		}
		if typ == typeUndefined {
			n.kind = kindUndefined
		}
	case typeExplicit:
		vals, err := h.decodeExplicit(data)
		if err != nil {
			return err
		}
		n.kind, n.explicit = kindExplicit, vals
	case typeSparse:
		regs, err := h.decodeSparse(data, int(n.log2m), int(n.regwidth))
		if err != nil {
			return err
		}
		n.kind, n.regs = kindDense, regs
	case typeFull:
		regs, err := h.decodeFull(data, int(n.log2m), int(n.regwidth))
		if err != nil {
			return err
		}
		n.kind, n.regs = kindDense, regs
	}
	*h = *n
	return nil
}

// decodeHeader checks the three header bytes V, W and C and returns an empty
// sketch of their parameters and the type they announce.
func decodeHeader(b []byte) (*HLL, byte, error) {
	if len(b) < headerLen {
		return nil, 0, fmt.Errorf("%d bytes, header needs %d: %w", len(b), headerLen, ErrTruncated)
	}
	if v := b[0] >> 4; v != schemaVersion {
		return nil, 0, fmt.Errorf("schema version %d: %w", v, ErrVersion)
	}
	typ := b[0] & 0x0f
	if typ > typeFull {
		return nil, 0, fmt.Errorf("type %d: %w", typ, ErrType)
	}
	if b[2]&0x80 != 0 {
		return nil, 0, fmt.Errorf("top bit of cutoff byte set: %w", ErrCorrupt)
	}
	regwidth := int(b[1]>>5) + 1
	log2m := int(b[1] & 0x1f)
	if err := checkParams(log2m, regwidth); err != nil {
		return nil, 0, err
	}
	cutoff := b[2] & 0x3f
	if (typ == typeEmpty || typ == typeExplicit) && cutoff > maxCutoffCode && cutoff != cutoffAuto {
		return nil, 0, fmt.Errorf("explicit cutoff code %d above %d: %w", cutoff, maxCutoffCode, ErrInvalidParams)
	}
	return newHLL(uint8(log2m), uint8(regwidth), cutoff, b[2]&0x40 != 0), typ, nil
}

// decodeExplicit decodes EXPLICIT data: big-endian 8-byte values, strictly
// ascending by signed comparison.
func (h *HLL) decodeExplicit(data []byte) ([]uint64, error) {
	if len(data)%8 != 0 {
		return nil, fmt.Errorf("explicit data of %d bytes is not a whole number of 8-byte values: %w", len(data), ErrTruncated)
	}
	count := len(data) / 8
	if count > maxExplicit {
		return nil, fmt.Errorf("%d explicit values, at most %d: %w", count, maxExplicit, ErrCorrupt)
	}
	for i := 1; i < count; i++ {
		if int64(be64(data[8*(i-1):])) >= int64(be64(data[8*i:])) {
			return nil, fmt.Errorf("explicit value %d not above value %d (signed order): %w", i, i-1, ErrCorrupt)
		}
	}
	vals := h.reusableExplicit(count)
	for i := range vals {
		vals[i] = be64(data[8*i:])
	}
	return vals, nil
}

// decodeSparse decodes SPARSE data (see checkSparse) into registers.
func (h *HLL) decodeSparse(data []byte, log2m, regwidth int) ([]uint8, error) {
	count, err := checkSparse(data, uint(log2m), uint(regwidth))
	if err != nil {
		return nil, err
	}
	regs := h.reusableRegs(1 << log2m)
	r := sparseReader{data: data, chunk: uint(log2m + regwidth)}
	vmask := uint32(1)<<regwidth - 1
	for range count {
		word := r.next()
		regs[word>>regwidth] = uint8(word & vmask)
	}
	return regs, nil
}

// decodeFull decodes FULL data: exactly 2^log2m registers of regwidth bits.
func (h *HLL) decodeFull(data []byte, log2m, regwidth int) ([]uint8, error) {
	want := regwidth << log2m / 8
	if len(data) < want {
		return nil, fmt.Errorf("full data of %d bytes, want %d: %w", len(data), want, ErrTruncated)
	}
	if len(data) > want {
		return nil, fmt.Errorf("full data of %d bytes, want %d: %w", len(data), want, ErrCorrupt)
	}
	regs := h.reusableRegs(1 << log2m)
	unpackFull(regs, data, uint(regwidth))
	return regs, nil
}

// checkSparse validates SPARSE data and returns the number of words it holds.
func checkSparse(data []byte, log2m, regwidth uint) (int, error) {
	chunk := log2m + regwidth
	totalBits := 8 * len(data)
	count := totalBits / int(chunk)
	if count > 1<<log2m+1 {
		return 0, fmt.Errorf("%d sparse words for %d registers: %w", count, 1<<log2m, ErrCorrupt)
	}
	pad := totalBits - count*int(chunk)
	r := sparseReader{data: data, chunk: chunk}
	vmask := uint32(1)<<regwidth - 1
	prev := -1
	for i := range count {
		word := r.next()
		if word == 0 && i == count-1 && pad+int(chunk) < 8 {
			// With words narrower than a byte, an all-zero word can lie
			// entirely in the final byte's padding: it is padding, not a
			// register (a real word never has value 0).
			count--
			pad += int(chunk)
			break
		}
		idx := int(word >> regwidth)
		if word&vmask == 0 {
			return 0, fmt.Errorf("sparse word %d (register %d) has value 0: %w", i, idx, ErrCorrupt)
		}
		if idx <= prev {
			return 0, fmt.Errorf("sparse word %d: register %d not above register %d: %w", i, idx, prev, ErrCorrupt)
		}
		prev = idx
	}
	if pad >= 8 {
		return 0, fmt.Errorf("%d padding bits: %w", pad, ErrCorrupt)
	}
	if pad > 0 && data[len(data)-1]&(1<<pad-1) != 0 {
		return 0, fmt.Errorf("non-zero padding bits: %w", ErrCorrupt)
	}
	return count, nil
}

// reusableRegs returns a zeroed register slice of length m, reusing h's
// buffer when it is large enough. Callers write it only after validation has
// succeeded, so h is unchanged on error.
func (h *HLL) reusableRegs(m int) []uint8 {
	if cap(h.regs) >= m {
		r := h.regs[:m]
		clear(r)
		return r
	}
	return make([]uint8, m)
}

func (h *HLL) reusableExplicit(count int) []uint64 {
	if cap(h.explicit) >= count {
		return h.explicit[:count]
	}
	return make([]uint64, count)
}

func typeName(typ byte) string {
	switch typ {
	case typeUndefined:
		return "undefined"
	case typeEmpty:
		return "empty"
	case typeExplicit:
		return "explicit"
	case typeSparse:
		return "sparse"
	case typeFull:
		return "full"
	}
	return fmt.Sprintf("type %d", typ)
}
