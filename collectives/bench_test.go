package collectives

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// benchSizes are the buffer sizes of the bus-bandwidth benchmarks, bytes of
// one rank's buffer as nccl-tests counts them (for all-to-all, all blocks).
var benchSizes = []int64{1 << 20, 16 << 20, 64 << 20}

// BenchmarkBusBW measures all-reduce (float32 sum) and all-to-all (float32)
// over 2 and 4 in-process ranks at 1, 16 and 64 MiB, MetaRoCE and the kernel
// TCP baseline side by side (the transport is the innermost sub-benchmark,
// so the two run back to back on the same noisy machine). It reports
// "busbw_GB/s", the nccl-tests bus bandwidth of rank 0's mean time per call:
// size/time × 2(n-1)/n for all-reduce and size/time × (n-1)/n for
// all-to-all, and b.SetBytes(size) makes the MB/s column the algorithm
// bandwidth.
func BenchmarkBusBW(b *testing.B) {
	for _, coll := range []sched.Collective{sched.AllReduce, sched.AllToAll} {
		for _, n := range []int{2, 4} {
			for _, size := range benchSizes {
				for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
					name := fmt.Sprintf("%v/np%d/%dMiB/%s", coll, n, size>>20, tr)
					b.Run(name, func(b *testing.B) { benchBusBW(b, coll, n, size, tr) })
				}
			}
		}
	}
}

// benchWarmup is the number of untimed calls before the timed ones: the
// first call builds the plan and grows the scratch buffer.
const benchWarmup = 2

// benchBusBW runs b.N out-of-place calls of coll on every one of n ranks.
// Rank 0 owns the timer: it starts after a barrier that follows the warm-up
// and stops when rank 0's last call returns.
func benchBusBW(b *testing.B, coll sched.Collective, n int, size int64, transport string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.SetBytes(size)
	b.StopTimer()
	var elapsed, cpu0, cpu1 time.Duration
	cfg := Config{Transport: transport, Timeout: 2 * time.Minute}
	err := LaunchLocal(ctx, n, cfg, func(c *Comm) error {
		send, recv := make([]byte, size), make([]byte, size)
		for i := range send {
			send[i] = byte(i % 7) // small exponents: float sums stay finite
		}
		call := func() error {
			if coll == sched.AllReduce {
				return c.AllReduce(ctx, send, recv, reduce.Float32, reduce.OpSum)
			}
			return c.AllToAll(ctx, send, recv, reduce.Float32)
		}
		for i := 0; i < benchWarmup; i++ {
			if err := call(); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if c.Rank() == 0 {
			b.StartTimer()
			cpu0 = processCPU()
		}
		t0 := time.Now()
		for i := 0; i < b.N; i++ {
			if err := call(); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			elapsed = time.Since(t0)
			cpu1 = processCPU()
			b.StopTimer()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	perCall := elapsed.Seconds() / float64(b.N)
	if perCall > 0 {
		b.ReportMetric(float64(size)/perCall/1e9*sched.BusBWFactor(coll, n), "busbw_GB/s")
		// CPU time of the whole process (every rank) per byte moved: on a
		// shared, oversubscribed host this varies less than wall time.
		b.ReportMetric((cpu1-cpu0).Seconds()*1e9/float64(b.N)/float64(size), "cpu-ns/B")
	}
}

// processCPU is the user plus system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
