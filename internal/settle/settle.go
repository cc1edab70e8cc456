// Package settle measures when an incast has settled: the senders' shares
// are fair and the bottleneck queue is back under its marking threshold,
// for good. The core's test bed (transport/transporttest) and the fabric
// simulator's incast scenario both report this figure, so they share one
// definition: the goal it checks ("fair share and queue under threshold
// within 2 RTTs of the first ACK") is the same in both places.
package settle

// FairJain is the Jain's index at or above which a window counts as fair.
const FairJain = 0.95

// From returns the first bin k ≥ from such that, for the rest of the run,
// every bin's queue is at most mark and Jain's index of the senders' bytes
// over every window of win bins starting at k or later (and ending within
// the run) is at least FairJain; len(queue) if there is none.
//
// placed[i][k] is sender i's bytes in bin k; every placed[i] is at least
// len(queue) long. queue[k] is the largest queue seen in bin k, bytes.
//
// A window starts at the bin it vouches for: a window ending there would
// describe the win−1 bins before it and put a floor of about win−1.5 bins
// under every result, whatever the senders did.
func From(placed [][]float64, queue []int, mark, from, win int) int {
	bins := len(queue)
	good := bins
	for k := bins - 1; k >= max(from, 0); k-- {
		if queue[k] > mark || (win > 0 && k+win <= bins && Jain(placed, k, win) < FairJain) {
			break
		}
		good = k
	}
	return good
}

// Jain returns Jain's fairness index, (Σx)²/(n·Σx²), of the senders' bytes
// in bins [k, k+win); 0 when no sender placed anything (nothing to call
// fair).
func Jain(placed [][]float64, k, win int) float64 {
	var s, s2 float64
	for i := range placed {
		var x float64
		for _, v := range placed[i][k : k+win] {
			x += v
		}
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(placed)) * s2)
}
