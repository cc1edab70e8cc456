package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// stdTag is the reference: the tag the standard library's AES-GCM appends
// when data is associated data and the plaintext is empty.
func stdTag(t testing.TB, key, nonce, data []byte) []byte {
	blk, err := aes.NewCipher(key)
	require.NoError(t, err)
	g, err := cipher.NewGCM(blk)
	require.NoError(t, err)
	return g.Seal(nil, nonce, nil, data)
}

// TestGMACMatchesGCM compares the tag of every length from 0 to 600 bytes
// and a few packet sizes, at several offsets into the buffer, with the
// standard library's, on the vector path (where the CPU has it) and on the
// portable one.
func TestGMACMatchesGCM(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	lengths := []int{4096, 4096 + 24, 8192 + 56, 9000, 65000, 65536}
	for n := 0; n <= 600; n++ {
		lengths = append(lengths, n)
	}
	buf := make([]byte, 65536+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for trial, n := range lengths {
		key := make([]byte, 16)
		nonce := make([]byte, 12)
		for i := range key {
			key[i] = byte(rng.Uint32())
		}
		for i := range nonce {
			nonce[i] = byte(rng.Uint32())
		}
		off := trial % 13
		data := buf[off : off+n]
		want := stdTag(t, key, nonce, data)
		blk, err := aes.NewCipher(key)
		require.NoError(t, err)
		g := newGMAC(blk)
		var got [16]byte
		g.tag(&got, nonce, data)
		require.Equal(t, want, got[:], "length %d offset %d", n, off)
		require.True(t, g.verify(want, nonce, data))

		if n%16 == 0 && n <= 4096 {
			var a, b [2]uint64
			ghashBlocks(&a, &g.pow, data)
			ghashGeneric(&b, &g.pow, data)
			require.Equal(t, b, a, "blocks of %d bytes", n)
		}
	}
}

// TestGMACRejectsChanges flips every bit of a short packet and of its tag
// and expects verify to fail each time.
func TestGMACRejectsChanges(t *testing.T) {
	blk, err := aes.NewCipher([]byte("0123456789abcdef"))
	require.NoError(t, err)
	g := newGMAC(blk)
	nonce := make([]byte, 12)
	data := []byte("a short packet of forty-one bytes or so!!")
	var tag [16]byte
	g.tag(&tag, nonce, data)
	for i := 0; i < len(data)*8; i++ {
		data[i/8] ^= 1 << (i % 8)
		require.False(t, g.verify(tag[:], nonce, data), "data bit %d", i)
		data[i/8] ^= 1 << (i % 8)
	}
	for i := 0; i < 128; i++ {
		tag[i/8] ^= 1 << (i % 8)
		require.False(t, g.verify(tag[:], nonce, data), "tag bit %d", i)
		tag[i/8] ^= 1 << (i % 8)
	}
	require.True(t, g.verify(tag[:], nonce, data))
	require.False(t, g.verify(tag[:15], nonce, data), "short tag")
}

// TestGMACAllocs: tagging a packet allocates nothing.
func TestGMACAllocs(t *testing.T) {
	blk, err := aes.NewCipher(make([]byte, 16))
	require.NoError(t, err)
	g := newGMAC(blk)
	data := make([]byte, 9000)
	nonce := make([]byte, 12)
	var tag [16]byte
	require.Zero(t, testing.AllocsPerRun(100, func() { g.tag(&tag, nonce, data) }))
}

// FuzzGMAC checks the tag of arbitrary data, key and nonce against the
// standard library's.
func FuzzGMAC(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), []byte("nonce-twelve"), []byte("hello"))
	f.Add(make([]byte, 16), make([]byte, 12), make([]byte, 300))
	f.Fuzz(func(t *testing.T, key, nonce, data []byte) {
		if len(key) != 16 || len(nonce) != 12 {
			return
		}
		blk, err := aes.NewCipher(key)
		require.NoError(t, err)
		var got [16]byte
		newGMAC(blk).tag(&got, nonce, data)
		require.Equal(t, stdTag(t, key, nonce, data), got[:])
	})
}

// BenchmarkGMAC compares the tag of one packet with the standard
// library's GCM over the same bytes as associated data.
func BenchmarkGMAC(b *testing.B) {
	for _, n := range []int{4096, 9000, 65536} {
		data := make([]byte, n)
		nonce := make([]byte, 12)
		blk, _ := aes.NewCipher(make([]byte, 16))
		b.Run("ours/"+strconv.Itoa(n), func(b *testing.B) {
			g := newGMAC(blk)
			var tag [16]byte
			b.SetBytes(int64(n))
			for b.Loop() {
				g.tag(&tag, nonce, data)
			}
		})
		b.Run("stdlib/"+strconv.Itoa(n), func(b *testing.B) {
			a, _ := cipher.NewGCM(blk)
			out := make([]byte, 0, 16)
			b.SetBytes(int64(n))
			for b.Loop() {
				out = a.Seal(out[:0], nonce, nil, data)
			}
		})
	}
}
