package sketch

import "math/bits"

// MurmurHash3 x64 128 (Austin Appleby's public-domain hash), as used by
// Apache DataSketches to turn values into Theta hashes.
//
// The input is consumed in 16-byte blocks, each read as two little-endian
// 64-bit words k1, k2 that are scrambled (multiply, rotate, multiply) and
// mixed into the two lanes h1, h2, which start at the seed. The 1..15 bytes
// left over are packed little-endian into k1 (bytes 0..7) and k2 (bytes
// 8..15) and scrambled the same way, without the lane mixing step. Finally
// the length is xored into both lanes, the lanes are added to each other,
// each goes through the fmix64 avalanche and they are added again. The result
// is the pair (h1, h2); DataSketches uses h1.
const (
	murmurC1 = 0x87c37b91114253d5
	murmurC2 = 0x4cf5ad432745937f
)

// murmur3 returns the two 64-bit halves of MurmurHash3_x64_128(data, seed).
// The seed fills both lanes, as in the DataSketches implementations (the
// reference C code takes a 32-bit seed, which gives the same result for
// seeds below 2^32).
func murmur3[T ~string | ~[]byte](data T, seed uint64) (h1, h2 uint64) {
	h1, h2 = seed, seed
	n := len(data)
	i := 0
	for ; i+16 <= n; i += 16 {
		k1 := load64(data, i)
		k2 := load64(data, i+8)
		h1 ^= mixK1(k1)
		h1 = bits.RotateLeft64(h1, 27) + h2
		h1 = h1*5 + 0x52dce729
		h2 ^= mixK2(k2)
		h2 = bits.RotateLeft64(h2, 31) + h1
		h2 = h2*5 + 0x38495ab5
	}
	if rest := n - i; rest > 8 {
		h2 ^= mixK2(loadTail(data[i+8:], rest-8))
		h1 ^= mixK1(load64(data, i))
	} else if rest > 0 {
		h1 ^= mixK1(loadTail(data[i:], rest))
	}
	return murmurFinish(h1, h2, uint64(n))
}

// murmur3Uint64 is murmur3 of the 8 little-endian bytes of v: a single
// partial block, so only k1 is mixed.
func murmur3Uint64(v, seed uint64) (h1, h2 uint64) {
	return murmurFinish(seed^mixK1(v), seed, 8)
}

func murmurFinish(h1, h2, n uint64) (uint64, uint64) {
	h1 ^= n
	h2 ^= n
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}

func mixK1(k uint64) uint64 { return bits.RotateLeft64(k*murmurC1, 31) * murmurC2 }
func mixK2(k uint64) uint64 { return bits.RotateLeft64(k*murmurC2, 33) * murmurC1 }

// fmix64 is the MurmurHash3 finalizer: every input bit affects every output
// bit.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// loadTail reads the first n bytes of data, 1 <= n <= 8, as a
// little-endian word whose high bytes are zero.
func loadTail[T ~string | ~[]byte](data T, n int) uint64 {
	if n == 8 {
		return load64(data, 0)
	}
	var k uint64
	if n >= 4 {
		k = uint64(load32(data, 0)) | uint64(load32(data, n-4))<<(8*(n-4))
		return k
	}
	k = uint64(data[0])
	if n >= 2 {
		k |= uint64(data[1]) << 8
	}
	if n == 3 {
		k |= uint64(data[2]) << 16
	}
	return k
}

func load32[T ~string | ~[]byte](data T, i int) uint32 {
	_ = data[i+3]
	return uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
}

// load64 reads data[i:i+8] as a little-endian word. The compiler merges the
// byte loads into one 64-bit load.
func load64[T ~string | ~[]byte](data T, i int) uint64 {
	_ = data[i+7]
	return uint64(data[i]) | uint64(data[i+1])<<8 | uint64(data[i+2])<<16 |
		uint64(data[i+3])<<24 | uint64(data[i+4])<<32 | uint64(data[i+5])<<40 |
		uint64(data[i+6])<<48 | uint64(data[i+7])<<56
}
