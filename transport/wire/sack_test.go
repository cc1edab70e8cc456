package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// refSack is the dumb model of a SACK bitmap: one bool per bit.
type refSack [wire.SackBits]bool

func (r *refSack) set(i int) {
	if i >= 0 && i < wire.SackBits {
		r[i] = true
	}
}

func (r *refSack) has(i int) bool { return i >= 0 && i < wire.SackBits && r[i] }

func (r *refSack) shift(n int) {
	if n <= 0 {
		return
	}
	var out refSack
	for i := range out {
		if i+n < wire.SackBits {
			out[i] = r[i+n]
		}
	}
	*r = out
}

func (r *refSack) trailingOnes() int {
	n := 0
	for n < wire.SackBits && r[n] {
		n++
	}
	return n
}

func (r *refSack) highest() int {
	for i := wire.SackBits - 1; i >= 0; i-- {
		if r[i] {
			return i
		}
	}
	return -1
}

func (r *refSack) count() int {
	n := 0
	for _, b := range r {
		if b {
			n++
		}
	}
	return n
}

// compareSack fails unless s and r agree on every query.
func compareSack(t *testing.T, step string, s *wire.SackBitmap, r *refSack) {
	t.Helper()
	for i := -3; i < wire.SackBits+3; i++ {
		if s.Has(i) != r.has(i) {
			t.Fatalf("%s: Has(%d) = %v", step, i, s.Has(i))
		}
	}
	if s.Count() != r.count() || s.Highest() != r.highest() || s.TrailingOnes() != r.trailingOnes() {
		t.Fatalf("%s: Count/Highest/TrailingOnes = %d/%d/%d, want %d/%d/%d", step,
			s.Count(), s.Highest(), s.TrailingOnes(), r.count(), r.highest(), r.trailingOnes())
	}
}

// applySackOps runs a sequence of operations, coded as bytes, on both the
// bitmap and the model and compares them after each one. It serves the
// seeded test and the fuzz target.
func applySackOps(t *testing.T, ops []byte) {
	var s wire.SackBitmap
	var r refSack
	for i := 0; i+1 < len(ops); i += 2 {
		arg := int(ops[i+1])
		switch ops[i] % 8 {
		case 0, 1, 2: // the common case: set a bit, sometimes out of range
			j := arg
			if ops[i]%8 == 2 { // -8..247, or 248..503 when the high bit is set
				j = arg - 8
				if ops[i]&0x80 != 0 {
					j += wire.SackBits
				}
			}
			s.Set(j)
			r.set(j)
		case 3: // set a run from the bottom, so TrailingOnes crosses words
			for j := 0; j < arg; j++ {
				s.Set(j)
				r.set(j)
			}
		case 4: // small shifts, as an advancing cumulative PSN does
			s.Shift(arg % 70)
			r.shift(arg % 70)
		case 5: // any shift, including ≥ 256 and ≤ 0
			n := arg*2 - 20
			s.Shift(n)
			r.shift(n)
		case 6: // shift by multiples of 64 (whole words)
			n := 64 * (arg % 5)
			s.Shift(n)
			r.shift(n)
		case 7:
			if arg == 0 {
				s.Clear()
				r = refSack{}
			} else {
				s.Set(wire.SackBits - 1 - arg%64)
				r.set(wire.SackBits - 1 - arg%64)
			}
		}
		compareSack(t, "op "+string(rune('0'+ops[i]%8)), &s, &r)
	}
}

func TestSackBitmapAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for round := 0; round < 300; round++ {
		ops := make([]byte, 2*(1+rng.IntN(200)))
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		applySackOps(t, ops)
	}
}

// TestSackBitmapEdges pins the word boundaries and the wire bit order of
// docs/spec.md §2.5 (bit i in word i/64, least significant bit first).
func TestSackBitmapEdges(t *testing.T) {
	var s wire.SackBitmap
	for _, i := range []int{0, 63, 64, 127, 128, 191, 192, 255} {
		s.Set(i)
	}
	want := wire.SackBitmap{1 | 1<<63, 1 | 1<<63, 1 | 1<<63, 1 | 1<<63}
	if s != want {
		t.Fatalf("words %x, want %x", s, want)
	}
	s.Shift(1)
	if want := (wire.SackBitmap{1<<62 | 1<<63, 1<<62 | 1<<63, 1<<62 | 1<<63, 1 << 62}); s != want {
		t.Fatalf("after Shift(1): %x, want %x", s, want)
	}
	// TrailingOnes at every word boundary: a run of n ones, a hole, then
	// more ones above the hole that must not count.
	for n := 0; n < wire.SackBits; n++ {
		var r wire.SackBitmap
		for i := 0; i < n; i++ {
			r.Set(i)
		}
		for i := n + 1; i < wire.SackBits; i += 3 {
			r.Set(i)
		}
		if got := r.TrailingOnes(); got != n {
			t.Fatalf("run of %d ones then a hole: TrailingOnes = %d", n, got)
		}
	}
	var full wire.SackBitmap
	for i := 0; i < wire.SackBits; i++ {
		full.Set(i)
	}
	if full.TrailingOnes() != 256 || full.Count() != 256 || full.Highest() != 255 {
		t.Fatalf("full bitmap: %d %d %d", full.TrailingOnes(), full.Count(), full.Highest())
	}
	full.Shift(256)
	if full != (wire.SackBitmap{}) || full.Highest() != -1 || full.TrailingOnes() != 0 {
		t.Fatal("Shift(256) does not empty the bitmap")
	}
	full.Set(-1)
	full.Set(256)
	full.Set(1 << 40)
	if full.Count() != 0 {
		t.Fatal("out-of-range Set changed the bitmap")
	}
}

func FuzzSackBitmap(f *testing.F) {
	f.Add([]byte{0, 5, 0, 6, 3, 70, 4, 3})
	f.Add([]byte{3, 255, 5, 10, 6, 1, 7, 0, 7, 1})
	f.Add([]byte{0x82, 250, 0x82, 3, 5, 200, 4, 65})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 512 { // each step checks all 256 bits; keep runs short
			ops = ops[:512]
		}
		applySackOps(t, ops)
	})
}
