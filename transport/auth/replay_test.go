package auth

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWindowMatchesReference drives the ring window and a dumb model (a set
// of everything seen, and the highest) with the same random sequence
// numbers, mostly near the top, sometimes far behind or far ahead.
func TestWindowMatchesReference(t *testing.T) {
	const size = 128
	rng := rand.New(rand.NewPCG(1, 2))
	w := newWindow(size)
	seen := map[uint64]bool{}
	var top uint64
	started := false
	base := uint64(1 << 40)
	for i := 0; i < 200000; i++ {
		var s uint64
		switch rng.IntN(10) {
		case 0:
			s = base + rng.Uint64N(1<<20) // far ahead sometimes
		case 1:
			s = top - min(top, rng.Uint64N(3*size))
		default:
			s = top + rng.Uint64N(8) - 4
		}
		want := !started || s > top || (top-s < size && !seen[s])
		require.Equal(t, want, w.fresh(s), "step %d seq %d top %d", i, s, top)
		if want && rng.IntN(4) != 0 { // a quarter fail their tag: not marked
			w.mark(s)
			seen[s] = true
			if !started || s > top {
				top = s
			}
			started = true
		}
		if rng.IntN(50000) == 0 {
			base += 1 << 30
		}
	}
}
