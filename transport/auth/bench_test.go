package auth

import (
	"fmt"
	"testing"
)

// BenchmarkSealOpen measures sealing and opening one packet in place (the
// work of both ends of one datagram) against copying it once, for a 4 KiB
// and a 64 KiB payload. "x-copy" is the crypto time over the copy time;
// bytes/s counts the plain packet.
func BenchmarkSealOpen(b *testing.B) {
	for _, size := range []int{4096, 65000 - 56 - Overhead} {
		p := dataPkt(bConn, bTok, 0, size)
		n := len(p)
		dst := make([]byte, n)
		var copyNs float64
		b.Run(fmt.Sprintf("copy/%d", size), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(dst, p)
			}
			copyNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		for _, enc := range []bool{false, true} {
			name := "auth"
			if enc {
				name = "encrypt"
			}
			b.Run(fmt.Sprintf("%s/%d", name, size), func(b *testing.B) {
				x, y := newPair(b, Config{Encrypt: enc})
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					s, err := x.Seal(p[:0], p[:n])
					if err != nil {
						b.Fatal(err)
					}
					if _, err := y.Open(s); err != nil {
						b.Fatal(err)
					}
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(ns/float64(n), "ns/byte")
				if copyNs > 0 {
					b.ReportMetric(ns/copyNs, "x-copy")
				}
			})
			b.Run(fmt.Sprintf("seal-only-%s/%d", name, size), func(b *testing.B) {
				x, _ := newPair(b, Config{Encrypt: enc})
				q := append(make([]byte, 0, n+Overhead), p[:n]...)
				b.SetBytes(int64(n))
				for b.Loop() {
					if _, err := x.Seal(q[:0], q[:n]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/byte")
			})
		}
	}
}
