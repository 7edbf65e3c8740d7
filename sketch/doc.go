// Package sketch holds the probabilistic data structures behind pgsketch's
// approximate answers. Today that is HLL, a HyperLogLog sketch that counts
// distinct values. The package knows nothing of PostgreSQL, SQL or the wire
// protocol: callers hash a value's canonical text (see Add) or pass their own
// 64-bit hash (AddHash), merge sketches (Union, Fold), estimate (Estimate,
// StdError) and store them as bytes (MarshalBinary, UnmarshalBinary).
//
// # Compatibility
//
// The bytes are the postgresql-hll storage specification, schema version 1:
// the format of the PostgreSQL "hll" extension (also used by Citus, java-hll
// and js-hll). A sketch column written by pgsketch can be cast to hll and
// used by the extension, and for the same hash values pgsketch writes the
// same bytes as the extension's hll_add_agg(h::hll_hashval, log2m,
// regwidth), and the same union as hll_union_agg. To get there the package
// follows the extension's behaviour (src/hll.c), not only the written
// specification:
//
//   - Register index and value. For a 64-bit hash x and m = 2^log2m
//     registers, the register index is the low log2m bits of x and the value
//     is 1 + the number of trailing zero bits of x >> log2m, capped at
//     2^regwidth − 1. When x >> log2m is zero the value is 0 (the hash leaves
//     no trace). A register keeps the maximum value it has seen.
//   - Promotion. A new sketch is EMPTY. The first value makes it EXPLICIT
//     (a set of hash values). When a further distinct value arrives while the
//     set already holds the explicit threshold, it becomes a register sketch.
//     With the automatic cutoff the threshold is the number of 8-byte values
//     that fit in the FULL encoding: floor(ceil(m·regwidth/8) / 8), e.g. 80
//     at log2m 10 and 1280 at log2m 14 (regwidth 5); with cutoff code c in
//     1..14 it is 2^(c−1); with c = 0 there is no EXPLICIT stage.
//   - Representation on output. A register sketch is written SPARSE when
//     sparse encoding is enabled and the SPARSE data bits (filled registers ×
//     (log2m + regwidth)) are strictly fewer than the FULL data bits
//     (m × regwidth); otherwise FULL. This is decided at every
//     serialization from the number of non-zero registers at that moment. A
//     register sketch never returns to EXPLICIT.
//   - Union. Undefined absorbs everything; EMPTY is the identity; two
//     EXPLICIT sets stay EXPLICIT while their union gains no values or stays
//     within the threshold, else they become registers; EXPLICIT with
//     registers adds the values to the registers; registers take the
//     per-register maximum. The extension refuses to merge sketches whose
//     log2m, regwidth, cutoff or sparse flag differ, and so does Union.
//
// NewHLL writes the header of hll_empty(log2m, regwidth) and of
// hll_add_agg(h, log2m, regwidth): automatic explicit cutoff and sparse
// encoding enabled, so byte C is 0x7f. Note that hll_add_agg over zero rows
// returns NULL, not an EMPTY sketch.
//
// # Byte layout (schema version 1)
//
// Every sketch starts with a three-byte header V P C, followed by data bytes
// whose layout depends on the type.
//
//	byte 0  V  bits 7..4  schema version, always 1
//	           bits 3..0  type: 0 UNDEFINED, 1 EMPTY, 2 EXPLICIT, 3 SPARSE, 4 FULL
//	byte 1  P  bits 7..5  regwidth − 1   (regwidth 1..5 here; the spec allows 1..8)
//	           bits 4..0  log2m          (4..17 here; the extension stops at 17)
//	byte 2  C  bit  7     padding, always 0
//	           bit  6     sparse encoding enabled
//	           bits 5..0  explicit cutoff code: 63 = automatic, 0 = no EXPLICIT
//	                      stage, c in 1..62 = at most 2^(c−1) EXPLICIT values
//
// For example 0x14 0x8e 0x7f starts a FULL sketch with regwidth 5
// ((0x8e >> 5) + 1), log2m 14 (0x8e & 0x1f), sparse enabled and automatic
// cutoff.
//
// UNDEFINED (type 0) and EMPTY (type 1) have no data bytes: the whole sketch
// is the three header bytes. UNDEFINED is the result of operations on
// invalid input in the extension; its cardinality is NULL there and NaN here.
//
// EXPLICIT (type 2): data is zero or more 8-byte big-endian 64-bit hash
// values, without duplicates, in ascending order of their *signed* (two's
// complement) value, so 0xcba79700677cdeaa (negative) precedes
// 0x0000000000000001:
//
//	bytes 3..10   first value, most significant byte first
//	bytes 11..18  second value
//	...
//
// SPARSE (type 3): data is one word of log2m + regwidth bits for each
// non-zero register, in ascending register index order. A word holds the
// register index in its high log2m bits and the register value in its low
// regwidth bits. Words are packed MSB-first: the first word starts at the
// most significant bit of byte 3, each word continues where the previous one
// ended, crossing byte boundaries, and the last byte is filled with zero
// padding bits at its least significant end (fewer than 8). For example with
// log2m 11 and regwidth 6 the registers (11, 6) and (1099, 19) are the 17-bit
// words 00000001011 000110 and 10001001011 010011 followed by 6 padding bits:
//
//	00000001 01100011 01000100 10110100 11000000 = 0x01 0x63 0x44 0xb4 0xc0
//
// FULL (type 4): data is every register, index 0 first, each regwidth bits
// wide, packed MSB-first in the same way, padded with zero bits at the end of
// the last byte. As m is a power of two of at least 16, m·regwidth is a
// multiple of 8 and FULL data is exactly m·regwidth/8 bytes with no padding;
// eight registers fill exactly regwidth bytes. For example with regwidth 5
// the registers 0, 1, 2, 3 begin
//
//	00000 00001 00010 00011 ... = 0x00 0x44 0x3. ...
//
// # Decoding untrusted bytes
//
// UnmarshalBinary accepts everything the extension writes and rejects, with
// an error wrapping an exported sentinel and the receiver unchanged, bytes
// that are truncated, of another version or type, carry parameters out of
// range, have trailing bytes or non-zero padding, hold unsorted or duplicate
// EXPLICIT values, or SPARSE words that are out of order or zero-valued.
// When a SPARSE word is narrower than a byte (log2m + regwidth < 8), an
// all-zero word that fits in the final byte's padding is read as padding;
// the extension reads it as a write of 0 to register 0.
//
// # Estimation
//
// Estimate is exact while the sketch is EMPTY or EXPLICIT. With registers it
// uses Otmar Ertl's improved raw estimator (2017), which needs neither the
// empirical bias tables of HyperLogLog++ nor the switch to linear counting
// of classic HyperLogLog (the extension's hll_cardinality uses the classic
// one, so the two differ slightly). StdError reports the relative standard
// error 1.04/√m that goes with every approximate answer.
package sketch
