package wire_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// reportPerPacket adds ns/packet (one packet per iteration). A non-zero size
// also makes -bench print MB/s of bytes written; parsing DATA does not touch
// its payload, so its MB/s would mean nothing and it passes 0.
func reportPerPacket(b *testing.B, size int) {
	if size > 0 {
		b.SetBytes(int64(size))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/packet")
}

func BenchmarkParseData(b *testing.B) {
	pkt := dataPacket(4096).Append(nil)
	var d wire.Data
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.ParseData(&d, pkt); err != nil {
			b.Fatal(err)
		}
	}
	reportPerPacket(b, 0)
}

func BenchmarkAppendDataHeader(b *testing.B) {
	d := dataPacket(4096)
	buf := make([]byte, 0, wire.DataHeaderLen)
	b.ReportAllocs()
	for b.Loop() {
		buf = d.AppendHeader(buf[:0])
	}
	reportPerPacket(b, wire.DataHeaderLen)
}

func BenchmarkAppendData(b *testing.B) {
	d := dataPacket(4096)
	buf := make([]byte, 0, d.Length())
	b.ReportAllocs()
	for b.Loop() {
		buf = d.Append(buf[:0])
	}
	reportPerPacket(b, d.Length())
}

func benchAck(b *testing.B, n int, parse bool) {
	a := ackPacket(n)
	pkt := a.Append(nil)
	buf := make([]byte, 0, len(pkt))
	var x wire.Ack
	b.ReportAllocs()
	for b.Loop() {
		if parse {
			if _, err := wire.ParseAck(&x, pkt); err != nil {
				b.Fatal(err)
			}
		} else {
			buf = a.Append(buf[:0])
		}
	}
	reportPerPacket(b, len(pkt))
}

func BenchmarkParseAck1(b *testing.B)   { benchAck(b, 1, true) }
func BenchmarkParseAck16(b *testing.B)  { benchAck(b, wire.MaxAckRecords, true) }
func BenchmarkAppendAck1(b *testing.B)  { benchAck(b, 1, false) }
func BenchmarkAppendAck16(b *testing.B) { benchAck(b, wire.MaxAckRecords, false) }
