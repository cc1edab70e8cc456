package wire_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// TestPiggyRoundTrip checks, for every packet type that may carry one, that a
// piggybacked acknowledgement adds exactly PiggyLen bytes after the fixed
// part, sets FlagPiggyAck, parses back to the same record and hint, and that
// ParsePiggy finds the same values without the body parser.
func TestPiggyRoundTrip(t *testing.T) {
	want := testPiggy()
	for _, tc := range []struct {
		name  string
		plain packet
		fixed int // bytes before the piggybacked part
	}{
		{"data", dataPacket(64), wire.DataHeaderLen},
		{"recv-ready", recvReadyPacket(3), wire.HeaderLen + 12 + 3*16},
		{"nack", nackPacket(), wire.NackLen},
		{"probe", probePacket(), wire.HeaderLen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := tc.plain.Append(nil)
			var p packet
			switch x := tc.plain.(type) {
			case *wire.Data:
				p = withPiggy(x)
			case *wire.RecvReady:
				p = withPiggy(x)
			case *wire.Nack:
				p = withPiggy(x)
			case *wire.Probe:
				p = withPiggy(x)
			}
			b := p.Append(nil)
			if len(b) != len(plain)+wire.PiggyLen || p.Length() != len(b) {
				t.Fatalf("encoded %d bytes (Length %d), plain %d", len(b), p.Length(), len(plain))
			}
			if wire.Flags(b[3])&wire.FlagPiggyAck == 0 {
				t.Fatalf("flags %#x lack FlagPiggyAck", b[2:4])
			}
			// The fixed part is unchanged but for the flag; what followed
			// it (DATA's payload) moved by PiggyLen.
			if !bytes.Equal(b[4:tc.fixed], plain[4:tc.fixed]) || !bytes.Equal(b[tc.fixed+wire.PiggyLen:], plain[tc.fixed:]) {
				t.Fatalf("piggybacked part not at offset %d:\n%x\n%x", tc.fixed, b, plain)
			}
			q, _, err, _ := parseAny(b)
			if err != nil {
				t.Fatal(err)
			}
			if got := piggyOf(q); *got != want {
				t.Fatalf("parsed %+v, want %+v", *got, want)
			}
			var pg wire.Piggyback
			if err := wire.ParsePiggy(&pg, b); err != nil || pg != want {
				t.Fatalf("ParsePiggy = %+v, %v", pg, err)
			}
			if err := wire.ParsePiggy(&pg, plain); err != nil || pg.HasPiggy {
				t.Fatalf("ParsePiggy of the plain packet = %+v, %v", pg, err)
			}
			// Clearing HasPiggy clears the flag and the bytes again.
			piggyOf(q).HasPiggy = false
			if out := q.Append(nil); !bytes.Equal(out, plain) {
				t.Fatalf("without the piggyback:\n got %x\nwant %x", out, plain)
			}
		})
	}
}

// piggyOf returns the Piggyback embedded in p.
func piggyOf(p packet) *wire.Piggyback {
	switch x := p.(type) {
	case *wire.Data:
		return &x.Piggyback
	case *wire.RecvReady:
		return &x.Piggyback
	case *wire.Nack:
		return &x.Piggyback
	case *wire.Probe:
		return &x.Piggyback
	}
	panic(fmt.Sprintf("%T carries no piggyback", p))
}

// TestPiggyErrors covers the rules of docs/spec.md §2.11: the flag only on
// the packet types that may carry it, the bytes present when it is set, the
// record's forward delay free to take any value.
func TestPiggyErrors(t *testing.T) {
	setFlag := func(b []byte) []byte { return with(b, put16(2, uint16(wire.FlagAckReq|wire.FlagPiggyAck))) }
	unknown := nackPacket()
	unknown.Reason = wire.NackUnknownConn
	unknownPiggy := withPiggy(unknown).Append(nil)
	recv := withPiggy(recvReadyPacket(3)).Append(nil)
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"ack with flag", setFlag(ackPacket(1).Append(nil)), wire.ErrReserved},
		{"hello with flag", setFlag(helloPacket(wire.OpHello, 4).Append(nil)), wire.ErrReserved},
		{"close with flag", setFlag(closePacket().Append(nil)), wire.ErrReserved},
		{"unknown-conn nack with piggyback", unknownPiggy, wire.ErrReserved},
		{"data flag without bytes", setFlag(dataPacket(0).Append(nil)), wire.ErrShort},
		{"recv-ready flag without bytes", setFlag(recvReadyPacket(3).Append(nil)), wire.ErrShort},
		{"nack flag without bytes", setFlag(nackPacket().Append(nil)), wire.ErrShort},
		{"probe flag without bytes", setFlag(probePacket().Append(nil)), wire.ErrLength},
		{"recv-ready piggyback cut", recv[:len(recv)-1], wire.ErrShort},
		{"recv-ready piggyback plus a byte", append(append([]byte(nil), recv...), 0), wire.ErrLength},
		// ParsePiggy finds the piggyback from the entry count, so a count
		// the body parser refuses must not place it anywhere.
		{"recv-ready piggyback count 0", with(recv, put8(32, 0)), wire.ErrRange},
		{"recv-ready piggyback count 9", with(recv, put8(32, wire.MaxRecvEntries+1)), wire.ErrRange},
		{"record forward delay 0xff01", with(recv, put16(len(recv)-wire.PiggyLen+4+2, 0xff01)), nil},
	} {
		_, _, err, _ := parseAny(tc.b)
		checkParseError(t, tc.name, err, tc.want)
		if tc.want != wire.ErrShort && tc.want != wire.ErrLength {
			var pg wire.Piggyback
			checkParseError(t, "ParsePiggy "+tc.name, wire.ParsePiggy(&pg, tc.b), tc.want)
		}
	}
}

// TestRecordFwdDelay checks where the forward delay of docs/spec.md §2.5
// sits in an ACK record, in an ACK and in a piggyback alike, and that every
// value survives a round trip.
func TestRecordFwdDelay(t *testing.T) {
	for _, v := range []uint16{0, 1, 0x2f, 0xbeef, wire.MaxFwdDelay} {
		a := ackPacket(2)
		a.Records[1].FwdDelay = v
		b := a.Append(nil)
		if got := uint16(b[32+52+2])<<8 | uint16(b[32+52+3]); got != v {
			t.Fatalf("ACK record 1 carries forward delay %#x at offset 2, want %#x", got, v)
		}
		var back wire.Ack
		if _, err := wire.ParseAck(&back, b); err != nil || back.Records[1].FwdDelay != v || back.Records[0].FwdDelay != a.Records[0].FwdDelay {
			t.Fatalf("forward delay %#x: parsed %#x (err %v)", v, back.Records[1].FwdDelay, err)
		}
		d := dataPacket(8)
		d.Piggyback = testPiggy()
		d.Piggy.FwdDelay = v
		b = d.Append(nil)
		off := wire.DataHeaderLen + 4 + 2
		if got := uint16(b[off])<<8 | uint16(b[off+1]); got != v {
			t.Fatalf("piggyback carries forward delay %#x, want %#x", got, v)
		}
		var pg wire.Piggyback
		if err := wire.ParsePiggy(&pg, b); err != nil || pg.Piggy.FwdDelay != v {
			t.Fatalf("piggybacked forward delay %#x: parsed %#x (err %v)", v, pg.Piggy.FwdDelay, err)
		}
	}
}
