package reduce

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSumVsCopy measures the sum bandwidth of the four float types next
// to Go's copy on the same buffers in the same run (the machines are noisy,
// so only the ratio is comparable across runs). Bandwidth counts the bytes
// of dst per second. Metrics: sum-GB/s, copy-GB/s and sum/copy (the goal
// for float32 is ≥ 0.7).
func BenchmarkSumVsCopy(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
			b.Run(fmt.Sprintf("%dMiB/%s/kernels=%s", size>>20, dt, KernelSet()), func(b *testing.B) {
				dst, src := make([]byte, size), make([]byte, size)
				for i := range src { // fault the pages in before timing
					src[i] = 0x3f // 0x3f3f... is normal in every float type
				}
				copy(dst, src)
				var tSum, tCopy time.Duration
				b.ResetTimer()
				for b.Loop() {
					t0 := time.Now()
					if err := Reduce(dst, src, dt, OpSum); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					copy(dst, src)
					tSum += t1.Sub(t0)
					tCopy += time.Since(t1)
				}
				sum := float64(size) * float64(b.N) / tSum.Seconds() / 1e9
				cp := float64(size) * float64(b.N) / tCopy.Seconds() / 1e9
				b.ReportMetric(sum, "sum-GB/s")
				b.ReportMetric(cp, "copy-GB/s")
				b.ReportMetric(sum/cp, "sum/copy")
			})
		}
	}
}

// BenchmarkPreMultiply reports the bandwidth (MB/s of dst) of the first
// pass of a floating-point average at 1 MiB, in place.
func BenchmarkPreMultiply(b *testing.B) {
	const size = 1 << 20
	buf := make([]byte, size)
	for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if err := PreMultiply(buf, buf, dt, 3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReduce reports bandwidth (MB/s of dst) for every dtype with sum and
// max at 1 MiB, on the kernels selected for this machine.
func BenchmarkReduce(b *testing.B) {
	const size = 1 << 20
	dst, src := make([]byte, size), make([]byte, size)
	for _, dt := range AllDTypes() {
		for _, op := range []Op{OpSum, OpMax} {
			b.Run(dt.String()+"/"+op.String(), func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					if err := Reduce(dst, src, dt, op); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSumGo measures the portable unrolled float32 sum (no assembly) for
// comparison with the AVX2 kernel.
func BenchmarkSumGo(b *testing.B) {
	const size = 1 << 20
	dst, src := make([]byte, size), make([]byte, size)
	saved := useAVX2
	useAVX2 = false
	defer func() { useAVX2 = saved }()
	b.SetBytes(size)
	for b.Loop() {
		_ = Reduce(dst, src, Float32, OpSum)
	}
}
