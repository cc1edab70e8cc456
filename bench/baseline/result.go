package baseline

import (
	"fmt"
	"time"
)

// Throughput is the outcome of one bulk transfer.
type Throughput struct {
	// SentBytes is the payload, in bytes, handed to the kernel.
	SentBytes int64
	// RecvBytes is the payload, in bytes, the receiver got.
	RecvBytes int64
	// Elapsed is the time the payload took to arrive, read on the
	// receiver's clock. For TCP (MeasureTCP, SinkTCP) it runs from the
	// first read that returned data to the last one, so that connection
	// set-up is never part of the figure; for UDP (MeasureUDP) from just
	// before the sender opens its socket to the last datagram received.
	Elapsed time.Duration
}

// Gbps is received payload in gigabits (1e9 bits) per second.
func (t Throughput) Gbps() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.RecvBytes) * 8 / t.Elapsed.Seconds() / 1e9
}

// LossFraction is the share of sent bytes that never arrived (0..1).
func (t Throughput) LossFraction() float64 {
	if t.SentBytes <= 0 {
		return 0
	}
	return 1 - float64(t.RecvBytes)/float64(t.SentBytes)
}

func (t Throughput) String() string {
	return fmt.Sprintf("%.2f Gb/s (%d of %d bytes in %v, loss %.1f%%)",
		t.Gbps(), t.RecvBytes, t.SentBytes, t.Elapsed, 100*t.LossFraction())
}

// Latency summarises round-trip times.
type Latency struct {
	// Rounds is the number of round trips summarised.
	Rounds int
	// Mean is their arithmetic mean, truncated to the nanosecond.
	Mean time.Duration
	// P50 and P99 are nearest-rank percentiles: the smallest round trip
	// that at least 50 (99) percent of the rounds do not exceed. With
	// fewer than 100 rounds P99 is the maximum.
	P50, P99 time.Duration
	// Min and Max are the fastest and the slowest round trip.
	Min, Max time.Duration
}

// summarize sorts rtts in place and returns their summary.
func summarize(rtts []time.Duration) Latency {
	if len(rtts) == 0 {
		return Latency{}
	}
	sortDurations(rtts)
	var sum time.Duration
	for _, d := range rtts {
		sum += d
	}
	n := len(rtts)
	return Latency{
		Rounds: n, Mean: sum / time.Duration(n),
		P50: rtts[nearestRank(50, n)-1], P99: rtts[nearestRank(99, n)-1],
		Min: rtts[0], Max: rtts[n-1],
	}
}

// nearestRank is the 1-based rank of the p-th percentile (0 < p <= 100) of n
// sorted samples by the nearest-rank method, ceil(p/100 * n), at least 1. It
// computes in integers: in floating point 0.07*100 is 7.000000000000001,
// whose ceiling would be one rank too high.
func nearestRank(p, n int) int {
	return max((p*n+99)/100, 1)
}

func (l Latency) String() string {
	return fmt.Sprintf("%d rounds: mean %v p50 %v p99 %v min %v max %v", l.Rounds, l.Mean, l.P50, l.P99, l.Min, l.Max)
}
