// Package sketch holds the probabilistic data structures behind pgsketch's
// approximate answers: HLL, a HyperLogLog sketch that counts distinct
// values, and Theta (with CompactTheta), a KMV sketch whose union,
// intersection and difference count overlaps of sets. The package knows
// nothing of PostgreSQL, SQL or the wire protocol: callers hash a value's
// canonical text (see Add) or pass their own 64-bit hash (AddHash), merge
// sketches (Union, Fold; ThetaUnion, ThetaIntersect, ThetaANotB), estimate
// (Estimate, StdError; LowerBound, UpperBound) and store them as bytes
// (MarshalBinary, UnmarshalBinary). Freq and CountMin count how often
// items occur, for top-k answers; Bloom answers "seen before?" with
// one-sided error. The sections below describe HLL first, then Theta,
// then Freq, CountMin and Bloom.
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
//
// # Theta sketches (Apache DataSketches)
//
// Theta, CompactTheta and the functions ThetaUnion, ThetaIntersect and
// ThetaANotB implement the Theta sketch of Apache DataSketches, with its
// default seed 9001 (ThetaSeed). A value is hashed with MurmurHash3 x64 128
// and the first 64-bit half of the result shifted right by one bit is its
// hash, in [0, 2^63-1]: a Java long or a Go int64 is hashed as its 8
// little-endian bytes, a string as its UTF-8 bytes (empty strings and byte
// arrays are ignored). A sketch keeps the distinct hashes below a threshold
// theta; theta starts at 2^63-1 (1.0) and is lowered so that about k =
// 2^lgK hashes are kept. The estimate is the number of hashes kept divided
// by theta as a fraction. The update sketch (Theta) follows the library's
// QuickSelect sketch to the letter (table sizes, the counts at which it
// grows and at which it lowers theta), so for the same values it keeps
// exactly the hashes the Java and C++ libraries keep; the set operations
// give the libraries' results. The confidence bounds are the libraries'
// except for sketches retaining at most 120 hashes with a small theta,
// where we compute exact binomial bounds and they use an approximation
// (theta_bounds.go has the details).
//
// # Theta sketch byte layout
//
// A CompactTheta is written in the compact format of DataSketches, serial
// version 3: a preamble of 1 to 3 little-endian 64-bit words ("longs"),
// followed by the retained hashes as little-endian 64-bit words in
// ascending order.
//
//	byte 0       number of preamble longs: 1, 2 or 3
//	byte 1       serial version, 3
//	byte 2       family, 3 (compact Theta sketch)
//	bytes 3, 4   unused in compact sketches, written as 0
//	byte 5       flags: bit 0 big-endian (never set), bit 1 read-only,
//	             bit 2 empty, bit 3 compact, bit 4 ordered,
//	             bit 5 single item; bits 6 and 7 are 0
//	bytes 6, 7   seed hash: the low 16 bits of the first half of
//	             MurmurHash3 x64 128 (seed 0) of the seed's 8 bytes,
//	             0x93cc for seed 9001
//	bytes 8..11  (2 or 3 preamble longs) number of hashes, uint32
//	bytes 12..15 (2 or 3 preamble longs) unused, written as 0 (the
//	             sampling probability p of an update sketch)
//	bytes 16..23 (3 preamble longs) theta, as an integer below 2^63
//	then         the hashes, 8 bytes each
//
// The preamble length depends on the state. An empty sketch (no value was
// ever added; theta 1.0) is the first word alone, flags 0x1e. In exact mode
// (theta 1.0) a single hash follows the first word directly (1 preamble
// long, flags 0x3a), and more hashes come after the count word (2
// preamble longs, flags 0x1a). In estimation mode (theta below 1.0) the
// preamble has all 3 longs, whatever the number of hashes, even 0. So the
// default sketch of the integers 0 to 8191 (4342 hashes, theta
// 0x440ec2999509db88) starts
//
//	03 03 03 00 00 1a cc 93  f6 10 00 00 00 00 00 00  88 db 09 95 99 c2 0e 44 ...
//
// The Java and C++ libraries read this format; so do the Python and other
// bindings of the C++ library. Serial version 4, the libraries' compressed
// form (deltas of the sorted hashes bit-packed), is not written, and it is
// refused when read: have the writer use its uncompressed serialization.
//
// UnmarshalBinary also reads the older serial versions. Version 2 has the
// same first word and the same preamble layout, but its flags are not
// trusted (only a set big-endian bit is refused) and an empty sketch is
// recognized as one with no hashes and theta 1.0 (1 preamble long, or a
// count of 0). Version 1 always has 3 preamble longs, no seed hash (seed
// 9001 is assumed), and its hashes may be in any order. Whatever the
// version, the result is canonical: hashes sorted, and a sketch with no
// hashes and theta 1.0 is empty. Re-marshaling writes version 3.
//
// Decoding untrusted bytes never panics. Input is rejected, with an error
// wrapping an exported sentinel and the receiver unchanged, when it is
// shorter than its preamble and hashes (ErrTruncated) or has bytes after
// them (ErrCorrupt); has a serial version other than 1, 2 or 3
// (ErrVersion) or a family other than 3 (ErrType); has a preamble length
// outside 1..3, the big-endian flag, no compact flag (version 3), the
// single-item flag with more than one preamble long or on an empty sketch,
// or the empty flag with a non-zero count (ErrCorrupt); holds a non-empty
// sketch whose seed hash is not 9001's (ErrIncompatible; the seed hash of
// an empty sketch is not checked, as in the libraries); or has theta 0 or
// at least 2^63, a hash that is 0 or not below theta, a duplicate hash, or
// hashes out of order although flagged ordered (ErrCorrupt). The count is
// checked against the length before anything is allocated.
//
// # Frequent items
//
// Freq is a mergeable Misra–Gries summary of item counts that also keeps
// each item's error, as Space-Saving does; the type's documentation has
// the algorithm and the proofs. Items are byte strings (an int64 as its 8
// big-endian bytes, a text as its bytes) or NULL, an item of its own.
// With capacity m, after any sequence of Add and Merge:
//
//   - every item's true count lies in [lower, upper] (Bounds, NullBounds,
//     Items), with upper − lower <= MaxError();
//   - an untracked item's true count is at most MaxError();
//   - sum of counters + (m+1)·MaxError() <= N, so MaxError() <= N/(m+1),
//     for a merge of any number of summaries as for one (merging into a
//     summary of larger capacity is refused);
//   - Candidates(k) holds every item of the true top k (ties included)
//     when it reports itself complete, and only items the bounds cannot
//     rule out.
//
// # Frequent items byte layout
//
// A Freq is written as three bytes, then unsigned LEB128 varints
// (encoding/binary's Uvarint, each in its shortest form) and item bytes:
//
//	byte 0   tag 'F' (0x46)
//	byte 1   version, 1
//	byte 2   flags: bit 0 the NULL item is tracked; bits 1..7 are 0
//	varint   capacity m, 1..2^20
//	varint   N, the total count, at most 2^63−1
//	varint   Δ, the error offset (MaxError), at most N
//	varint   number of tracked items other than NULL: at most m, or m−1
//	         with the NULL item
//	         if the NULL item is tracked: its counter, its error (varints)
//	then     for each item, in ascending order of its bytes (bytes.Compare):
//	         varint length (at most 2^20), the bytes, varint counter,
//	         varint error
//
// An item's counter c >= 1 and error e <= Δ give its bounds: upper = c + Δ
// and lower = c + Δ − e. MarshalBinary writes the summary reduced to at
// most m counters. For example capacity 3, N 309, Δ 1, the int64 7 with
// counter 299, the text "b" with counter 1 and the NULL item with counter
// 4, all with error 0 (bounds [300, 300], [2, 2] and [5, 5]):
//
//	46 01 01 03 b5 02 01 02 04 00  08 00 00 00 00 00 00 00 07 ab 02 00  01 62 01 00
//
// Decoding untrusted bytes never panics. Input is rejected, with an error
// wrapping an exported sentinel and the receiver unchanged, when it ends
// early, inside a varint or an item, or announces more items than the
// bytes left can hold (ErrTruncated); has another tag (ErrType) or
// version (ErrVersion); a capacity outside [1, 2^20] (ErrInvalidParams);
// or (ErrCorrupt) unknown flag bits, a varint longer than its shortest
// form or past 64 bits, N past 2^63−1, Δ above N, more items than the
// capacity, an item longer than 2^20 bytes, items not in strictly
// ascending order (so no duplicates), a counter of 0 or above N, an error
// above Δ, counters summing with (m+1)·Δ past N, or trailing bytes. The
// item count is checked against the length before anything is allocated.
//
// # Count-Min sketch
//
// CountMin is a Count-Min sketch with conservative update. Its estimate
// of an item's count is never below the true count, whatever the hashes,
// also after merges; with width ceil(e/ε) and depth ceil(ln(1/δ)) it
// exceeds the true count by more than ε·N with probability at most δ.
// Merging (adding the cells) keeps both properties, though the merged
// sketch is not the one conservative update would build from the combined
// input. It cannot list items, only bound the count of an item it is
// given; the type's documentation has the details.
//
// # Count-Min byte layout
//
//	byte 0   tag 'C' (0x43)
//	byte 1   version, 1
//	varint   width w >= 1
//	varint   depth d, 1..32, with w·d at most 2^22
//	varint   N, the total count, at most 2^63−1
//	varints  the w·d cells, row 0 first, each row from cell 0
//
// The varints are those of the Freq layout. Version 1 also fixes the
// hashing: MurmurHash3 x64 128 of the item's bytes with seed 0x434d (the
// NULL item: no bytes, seed 0x434e) gives (h1, h2), and the cell of row i
// is the high 64 bits of fmix64(h1 + i·h2)·w. For example w 4, d 2 and N
// 201 start 43 01 04 02 c9 01.
//
// Decoding untrusted bytes never panics. Input is rejected, with an error
// wrapping an exported sentinel and the receiver unchanged, when it ends
// early or has fewer bytes left than cells (ErrTruncated); has another
// tag (ErrType) or version (ErrVersion); a width or depth out of range
// (ErrInvalidParams); or (ErrCorrupt) a varint longer than its shortest
// form or past 64 bits, N past 2^63−1, a row whose cells sum past N
// (an Add raises each row by at most its count), or trailing bytes.
//
// # Bloom byte layout
//
//	byte 0   tag 'B' (0x42)
//	byte 1   version, 1
//	varint   m, the bits: a multiple of 64, 64 to 2^33
//	varint   k, the bits set per item, 1 to 32
//	varint   N, the items added (repeats included), at most 2^63−1
//	m/8      the bits, as m/64 64-bit words, little-endian: bit j of the
//	         filter is bit j mod 64 of word j/64
//
// The varints are those of the Freq layout. Version 1 also fixes the
// hashing: MurmurHash3 x64 128 of the item's bytes with seed 0x4246 gives
// (h1, h2), and the item's i-th bit (i < k) is the high 64 bits of
// fmix64(h1 + i·h2)·m. For example an empty filter of 64 bits and 3
// hashes is 42 01 40 03 00 followed by eight zero bytes.
//
// Decoding untrusted bytes never panics. Input is rejected, with an error
// wrapping an exported sentinel and the receiver unchanged, when it ends
// early (ErrTruncated); has another tag (ErrType) or version (ErrVersion);
// an m or k out of range (ErrInvalidParams); or (ErrCorrupt) a varint
// longer than its shortest form or past 64 bits, N past 2^63−1, more bits
// set than N items of k hashes can set, or trailing bytes.
package sketch
