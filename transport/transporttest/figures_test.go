package transporttest_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/transport/transporttest"
)

// Link rates of the figures, bytes per second.
const (
	rate100G = 100e9 / 8
	rate400G = 400e9 / 8
)

// figuresEnv names the environment variable that turns TestReportFigures on.
const figuresEnv = "METAROCE_FIGURES"

// TestReportFigures prints the core's figures as a markdown table. It is a
// generator, not a test: it runs only with METAROCE_FIGURES=1, e.g.
//
//	METAROCE_FIGURES=1 go test -run TestReportFigures -v ./transport/transporttest/
func TestReportFigures(t *testing.T) {
	if os.Getenv(figuresEnv) == "" {
		t.Skip("set " + figuresEnv + "=1 to print the figures")
	}
	var b strings.Builder
	seeds := []uint64{1, 2, 3}
	fmt.Fprintf(&b, "| loss (every packet, both directions) | goodput / link rate (100 Gb/s, 8 paths, 32 MiB) | retransmits | timeouts |\n|---|---|---|---|\n")
	for _, loss := range []float64{0, 0.001, 0.01, 0.05, 0.10} {
		var g float64
		var rt, to uint64
		for _, s := range seeds {
			r, err := transporttest.MeasureGoodput(rate100G, loss, 32<<20, s)
			if err != nil {
				t.Fatal(err)
			}
			g += r.Goodput / float64(len(seeds))
			rt += r.Retransmits
			to += r.Timeouts
		}
		fmt.Fprintf(&b, "| %.1f%% | %.3f | %d | %d |\n", loss*100, g, rt/uint64(len(seeds)), to/uint64(len(seeds)))
	}
	fmt.Fprintf(&b, "\n| blackholed path (1 of 8, 100 Gb/s) | goodput before | lowest per RTT | RTTs to ≥ 90%% again | timeouts | path moves |\n|---|---|---|---|---|---|\n")
	for _, s := range seeds {
		r, err := transporttest.MeasureBlackhole(rate100G, s)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "| seed %d | %.3f | %.3f | %.1f | %d | %d |\n", s, r.Before, r.Dip, r.Restore, r.Timeouts, r.PathMoves)
	}
	const mark = 100_000
	fmt.Fprintf(&b, "\n| incast N→1 (400 Gb/s, CE above %d B) | RTTs from the first ACK of DATA to Jain ≥ 0.95 (every 4-RTT window on) and queue ≤ mark | Jain (last 20 RTTs) | queue peak, B | queue last 20 RTTs, B | utilisation |\n|---|---|---|---|---|---|\n", mark)
	for _, nSend := range []int{8, 32, 63} {
		for _, s := range seeds[:2] {
			r, err := transporttest.MeasureIncast(rate400G, nSend, mark, s)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "| N=%d seed %d | %.1f | %.3f | %d | %d | %.3f |\n", nSend, s, r.Converge, r.JainFinal, r.QueuePeak, r.QueueFinal, r.Util)
		}
	}
	t.Log("\n" + b.String())
}

func BenchmarkGoodputLoss(b *testing.B) {
	for _, loss := range []float64{0, 0.001, 0.01, 0.05, 0.10} {
		b.Run(fmt.Sprintf("loss=%g%%", loss*100), func(b *testing.B) {
			var g float64
			for i := 0; i < b.N; i++ {
				r, err := transporttest.MeasureGoodput(rate100G, loss, 8<<20, uint64(i+1))
				if err != nil {
					b.Fatal(err)
				}
				g += r.Goodput
			}
			b.ReportMetric(g/float64(b.N), "goodput/link")
		})
	}
}

func BenchmarkBlackholeRestore(b *testing.B) {
	var rtts float64
	for i := 0; i < b.N; i++ {
		r, err := transporttest.MeasureBlackhole(rate100G, uint64(i+1))
		if err != nil {
			b.Fatal(err)
		}
		rtts += r.Restore
	}
	b.ReportMetric(rtts/float64(b.N), "RTTs-to-90%")
}

func BenchmarkIncast(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var conv, jain float64
			for i := 0; i < b.N; i++ {
				r, err := transporttest.MeasureIncast(rate400G, n, 100_000, uint64(i+1))
				if err != nil {
					b.Fatal(err)
				}
				conv += r.Converge
				jain += r.JainFinal
			}
			b.ReportMetric(conv/float64(b.N), "RTTs-to-converge")
			b.ReportMetric(jain/float64(b.N), "jain")
		})
	}
}

// TestIncastConvergesWithin2RTTs holds the incast goal: from the first
// acknowledgement of DATA a sender gets, the shares are fair and the
// receiver's queue at or under the marking threshold within 2 RTTs, for
// good, with the link kept busy.
func TestIncastConvergesWithin2RTTs(t *testing.T) {
	for _, n := range []int{8, 32} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			r, err := transporttest.MeasureIncast(rate400G, n, 100_000, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.Converge < 0 || r.Converge > 2 {
				t.Fatalf("converged after %.1f RTTs (-1: never), goal ≤ 2; %+v", r.Converge, r)
			}
			if r.Util < 0.95 {
				t.Fatalf("utilisation %.3f", r.Util)
			}
		})
	}
}
