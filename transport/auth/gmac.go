package auth

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
)

// gmac computes AES-GCM tags of packets that are authenticated but not
// encrypted: the tag of GCM with the packet as associated data and an
// empty plaintext (NIST SP 800-38D, §6.4 and §7.1), bit for bit what
// cipher.AEAD.Seal(nil, nonce, nil, packet) appends. It exists because that
// is the whole per-byte cost of authentication-only mode, and GHASH can
// multiply four blocks per instruction on CPUs with VPCLMULQDQ and reduce
// once per 32 blocks (ghashBlocks), about three times the speed of the
// standard library's GCM on associated data.
//
// Field elements are kept as the GCM block byte-reversed and read as a
// little-endian 128-bit integer (lo, hi), the representation in which a
// carry-less multiply of two elements is their product shifted by one bit;
// the hash key is stored pre-multiplied by x to cancel that shift, so that
// mul(a, key) is a·H in GCM's field.
type gmac struct {
	blk cipher.Block
	// pow holds key^32 … key^1 (pow[i] = key^(32-i)), in the layout the
	// 32-block loop loads into eight 512-bit registers.
	pow [32][2]uint64
	j0  [16]byte // scratch: the pre-counter block nonce ‖ 0x00000001
	ek  [16]byte // scratch: E_K(J0)
	pad [16]byte // scratch: a zero-padded final block, or the length block
}

// gcmNonceLen is the nonce length this construction takes, bytes (the
// 96-bit nonce of SP 800-38D §8.2.1, J0 = nonce ‖ 0^31 ‖ 1).
const gcmNonceLen = 12

// newGMAC derives the hash key E_K(0^128) of blk and its powers.
func newGMAC(blk cipher.Block) *gmac {
	g := &gmac{blk: blk}
	var h [16]byte
	blk.Encrypt(h[:], h[:])
	key := elem{lo: binary.BigEndian.Uint64(h[8:]), hi: binary.BigEndian.Uint64(h[:8])}
	// key·x in the reflected representation: a one-bit left shift, folded
	// back with the field polynomial when the top bit falls off.
	top := key.hi >> 63
	key.hi = key.hi<<1 | key.lo>>63
	key.lo <<= 1
	key.hi ^= top * polyHi
	key.lo ^= top
	p := key
	for i := len(g.pow) - 1; i >= 0; i-- {
		g.pow[i] = [2]uint64{p.lo, p.hi}
		p = mulElem(p, key)
	}
	return g
}

// tag writes the 16-byte GCM tag of data under nonce (12 bytes) to dst.
func (g *gmac) tag(dst *[16]byte, nonce []byte, data []byte) {
	var acc [2]uint64
	full := len(data) &^ 15
	if full > 0 {
		ghashBlocks(&acc, &g.pow, data[:full])
	}
	if rest := data[full:]; len(rest) > 0 {
		g.pad = [16]byte{}
		copy(g.pad[:], rest)
		ghashBlocks(&acc, &g.pow, g.pad[:])
	}
	// The length block: bit lengths of the associated data and of the
	// (empty) ciphertext, big-endian, reversed like every block.
	binary.BigEndian.PutUint64(g.pad[:8], uint64(len(data))*8)
	binary.BigEndian.PutUint64(g.pad[8:], 0)
	ghashBlocks(&acc, &g.pow, g.pad[:])
	copy(g.j0[:], nonce[:gcmNonceLen])
	binary.BigEndian.PutUint32(g.j0[12:], 1)
	g.blk.Encrypt(g.ek[:], g.j0[:])
	binary.BigEndian.PutUint64(dst[:8], acc[1]^binary.BigEndian.Uint64(g.ek[:8]))
	binary.BigEndian.PutUint64(dst[8:], acc[0]^binary.BigEndian.Uint64(g.ek[8:]))
}

// verify reports, in constant time, whether want is the tag of data under
// nonce.
func (g *gmac) verify(want []byte, nonce []byte, data []byte) bool {
	var got [16]byte
	g.tag(&got, nonce, data)
	return len(want) == tagLen && subtle.ConstantTimeCompare(got[:], want) == 1
}

// elem is a GF(2^128) element in the reflected representation (see gmac).
type elem struct{ lo, hi uint64 }

// polyHi is the high half of the reduction constant of the reflected
// representation; its low half is 1.
const polyHi = 0xc200000000000000

// clmul is the 128-bit carry-less product of a and b, as (hi, lo).
func clmul(a, b uint64) (hi, lo uint64) {
	for i := 0; i < 64; i++ {
		if b>>i&1 != 0 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return hi, lo
}

// mulElem is the field product of a and b, one of them pre-multiplied by x
// (see gmac): the portable form of what ghashBlocks does per block, used
// to derive the key's powers and as the reference the fast path is
// tested against.
func mulElem(a, b elem) elem {
	h1, h0 := clmul(a.hi, b.hi)
	l1, l0 := clmul(a.lo, b.lo)
	m1, m0 := clmul(a.lo, b.hi)
	n1, n0 := clmul(a.hi, b.lo)
	m1 ^= n1
	m0 ^= n0
	// The 256-bit product is h1:h0:l1:l0 with the middle term added at
	// bit 64.
	l1 ^= m0
	h0 ^= m1
	// Two folding rounds reduce the low 128 bits into the high ones.
	for r := 0; r < 2; r++ {
		th, tl := clmul(l0, polyHi)
		l0, l1 = l1^tl, l0^th
	}
	return elem{lo: l0 ^ h0, hi: l1 ^ h1}
}

// ghashGeneric is ghashBlocks without vector instructions: for each
// 16-byte block of p, acc = (acc ⊕ block)·H.
func ghashGeneric(acc *[2]uint64, pow *[32][2]uint64, p []byte) {
	key := elem{lo: pow[31][0], hi: pow[31][1]}
	a := elem{lo: acc[0], hi: acc[1]}
	for ; len(p) >= 16; p = p[16:] {
		a.hi ^= binary.BigEndian.Uint64(p[:8])
		a.lo ^= binary.BigEndian.Uint64(p[8:16])
		a = mulElem(a, key)
	}
	acc[0], acc[1] = a.lo, a.hi
}
