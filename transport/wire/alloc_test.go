package wire_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// The hot path parses and encodes DATA and ACK for every packet; neither may
// allocate (the parse struct and the buffer belong to the caller).

func TestAllocsDataAck(t *testing.T) {
	data := dataPacket(4096)
	ack := ackPacket(wire.MaxAckRecords)
	db, ab := data.Append(nil), ack.Append(nil)
	piggy := withPiggy(dataPacket(4096)).(*wire.Data)
	pb := piggy.Append(nil)
	buf := make([]byte, 0, 8192)
	var d wire.Data
	var a wire.Ack
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"ParseData", func() {
			if _, err := wire.ParseData(&d, db); err != nil {
				t.Fatal(err)
			}
		}},
		{"Data.Append", func() { buf = data.Append(buf[:0]) }},
		{"Data.AppendHeader", func() { buf = data.AppendHeader(buf[:0]) }},
		{"ParseData piggybacked", func() {
			if _, err := wire.ParseData(&d, pb); err != nil || !d.HasPiggy {
				t.Fatal(err)
			}
		}},
		{"Data.AppendHeader piggybacked", func() { buf = piggy.AppendHeader(buf[:0]) }},
		{"ParseAck", func() {
			if _, err := wire.ParseAck(&a, ab); err != nil {
				t.Fatal(err)
			}
		}},
		{"Ack.Append", func() { buf = ack.Append(buf[:0]) }},
	} {
		if n := testing.AllocsPerRun(200, c.f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, n)
		}
	}
}
