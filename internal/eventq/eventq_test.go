package eventq

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOrderMatchesSort: popping returns every value ordered by time, ties in
// insertion order, exactly as a stable sort of the pushes would, also with
// pops interleaved with pushes.
func TestOrderMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var q Queue[int]
		type ev struct {
			at int64
			id int
		}
		var pending []ev
		var got, want []ev
		id := 0
		for step := 0; step < 300; step++ {
			if rng.IntN(3) > 0 || q.Len() == 0 {
				at := int64(rng.IntN(20)) // many ties
				if len(got) > 0 {
					at += got[len(got)-1].at // never schedule into the past
				}
				q.Push(at, id)
				pending = append(pending, ev{at, id})
				id++
				continue
			}
			sort.SliceStable(pending, func(i, j int) bool { return pending[i].at < pending[j].at })
			want = append(want, pending[0])
			pending = pending[1:]
			at, v := q.Pop()
			got = append(got, ev{at, v})
		}
		require.Equal(t, want, got, "round %d", round)
	}
}

func TestNextAndLen(t *testing.T) {
	var q Queue[string]
	_, ok := q.Next()
	require.False(t, ok)
	q.Push(5, "b")
	q.Push(3, "a")
	at, ok := q.Next()
	require.True(t, ok)
	require.Equal(t, int64(3), at)
	require.Equal(t, 2, q.Len())
}

func TestPushPopAllocatesNothingOnceGrown(t *testing.T) {
	var q Queue[[4]int64]
	for i := 0; i < 64; i++ {
		q.Push(int64(i), [4]int64{})
	}
	for q.Len() > 0 {
		q.Pop()
	}
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 32; i++ {
			q.Push(int64(i%7), [4]int64{int64(i)})
		}
		for q.Len() > 0 {
			q.Pop()
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkPushPop(b *testing.B) {
	var q Queue[[6]int64]
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 1024; i++ {
		q.Push(int64(rng.IntN(1<<20)), [6]int64{})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		at, v := q.Pop()
		q.Push(at+int64(rng.IntN(1<<10)), v)
	}
}
