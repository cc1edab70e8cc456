package sched

import (
	"testing"

	"github.com/metaroce/metaroce/collectives/reduce"
)

// BenchmarkBuildRing64 builds rank 0's plan of a 64-rank, 64 MiB float32 ring
// all-reduce with default chunks and 4 channels: the simulator's largest case.
func BenchmarkBuildRing64(b *testing.B) {
	cfg := Config{Collective: AllReduce, Algorithm: AlgoRing, NRanks: 64, Count: 16 << 20, DType: reduce.Float32, Channels: 4}
	var steps int
	for b.Loop() {
		p, err := Build(cfg)
		if err != nil {
			b.Fatal(err)
		}
		steps = len(p.Steps)
	}
	b.ReportMetric(float64(steps), "steps")
}

// BenchmarkExecuteRing8 runs an 8-rank 1 MiB float32 ring all-reduce through the
// reference executor (all ranks on one core).
func BenchmarkExecuteRing8(b *testing.B) {
	cfg := Config{Collective: AllReduce, Algorithm: AlgoRing, NRanks: 8, Count: 1 << 18, DType: reduce.Float32, Channels: 2}
	plans, err := BuildAll(cfg)
	if err != nil {
		b.Fatal(err)
	}
	bufs := make([]Buffers, 8)
	for r := range bufs {
		bufs[r] = Buffers{Send: make([]byte, plans[r].SendBytes), Recv: make([]byte, plans[r].RecvBytes)}
	}
	b.SetBytes(1 << 20)
	for b.Loop() {
		if err := Execute(plans, bufs, ExecOptions{Rendezvous: true}); err != nil {
			b.Fatal(err)
		}
	}
}
