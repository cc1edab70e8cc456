package baseline

import (
	"fmt"
	"time"
)

// Throughput is the outcome of one bulk transfer.
type Throughput struct {
	SentBytes int64         // payload bytes handed to the kernel
	RecvBytes int64         // payload bytes the receiver got
	Elapsed   time.Duration // from the first send to the last byte received
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
	Rounds   int
	Mean     time.Duration
	P50, P99 time.Duration
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
	at := func(q float64) time.Duration { return rtts[min(int(q*float64(len(rtts))), len(rtts)-1)] }
	return Latency{
		Rounds: len(rtts), Mean: sum / time.Duration(len(rtts)),
		P50: at(0.50), P99: at(0.99), Min: rtts[0], Max: rtts[len(rtts)-1],
	}
}

func (l Latency) String() string {
	return fmt.Sprintf("%d rounds: mean %v p50 %v p99 %v min %v max %v", l.Rounds, l.Mean, l.P50, l.P99, l.Min, l.Max)
}
