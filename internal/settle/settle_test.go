package settle

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// settledRef is the plain reading of From's definition: try every
// candidate bin from the first on and check every later bin and window.
func settledRef(placed [][]float64, queue []int, mark, from, win int) int {
	bins := len(queue)
	fair := func(k int) bool {
		var s, s2 float64
		for i := range placed {
			var x float64
			for j := k; j < k+win; j++ {
				x += placed[i][j]
			}
			s += x
			s2 += x * x
		}
		return win <= 0 || s2 > 0 && s*s/(float64(len(placed))*s2) >= FairJain
	}
	for k := max(from, 0); k < bins; k++ {
		ok := true
		for j := k; j < bins && ok; j++ {
			ok = queue[j] <= mark && (j+win > bins || fair(j))
		}
		if ok {
			return k
		}
	}
	return bins
}

// TestFrom checks the incast settling metric on made-up runs
// whose answer is known, then against the reference on seeded random ones.
func TestFrom(t *testing.T) {
	const bins, win, mark = 40, 4, 100
	even := func(n int) ([][]float64, []int) {
		p := make([][]float64, n)
		for i := range p {
			p[i] = make([]float64, bins)
			for k := range p[i] {
				p[i][k] = 10
			}
		}
		return p, make([]int, bins)
	}
	cases := []struct {
		name  string
		setup func(p [][]float64, q []int)
		from  int
		want  int
	}{
		{"fair from the start", func([][]float64, []int) {}, 3, 3},
		// Sender 0 alone for bins 0..9: the window starting at 9 holds one
		// such bin (shares 40:30:30:30, Jain 0.98), the one at 8 two
		// (40:20:20:20, Jain 0.89).
		{"one sender first", func(p [][]float64, _ []int) {
			for i := 1; i < len(p); i++ {
				for k := 0; k < 10; k++ {
					p[i][k] = 0
				}
			}
		}, 0, 9},
		{"queue above the mark once", func(_ [][]float64, q []int) { q[25] = mark + 1 }, 0, 26},
		{"queue at the mark", func(_ [][]float64, q []int) { q[25] = mark }, 0, 0},
		{"never fair", func(p [][]float64, _ []int) {
			for k := range p[0] {
				p[0][k] = 1000
			}
		}, 0, bins - win + 1},
		{"queue above the mark in the last bin", func(_ [][]float64, q []int) { q[bins-1] = mark + 1 }, 0, bins},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, q := even(4)
			tc.setup(p, q)
			require.Equal(t, tc.want, From(p, q, mark, tc.from, win))
			require.Equal(t, tc.want, settledRef(p, q, mark, tc.from, win))
		})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for r := 0; r < 500; r++ {
		p, q := even(1 + rng.IntN(5))
		for i := range p {
			for k := range p[i] {
				p[i][k] = float64(rng.IntN(3)) * float64(1+rng.IntN(2))
			}
		}
		for k := range q {
			q[k] = rng.IntN(mark + mark/10)
		}
		from := rng.IntN(bins)
		require.Equal(t, settledRef(p, q, mark, from, win), From(p, q, mark, from, win), "run %d", r)
		require.Equal(t, settledRef(nil, q, mark, from, 0), From(nil, q, mark, from, 0), "run %d, queue only", r)
	}
}
