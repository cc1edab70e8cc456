package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// addSeeds seeds a fuzz target with the worked examples of docs/spec.md, one
// built packet of every type, and a few near misses of each.
func addSeeds(f *testing.F) {
	for _, e := range specExamples(f) {
		f.Add(e.Bytes)
	}
	for _, p := range allPackets() {
		b := p.Append(nil)
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(append([]byte(nil), b...), 0))
		f.Add(with(b, put8(len(b)-1, 0xff)))
	}
}

// checkErr fails unless err is a *ParseError that wraps one sentinel.
func checkErr(t *testing.T, err error) {
	t.Helper()
	var pe *wire.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *wire.ParseError", err, err)
	}
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %v wraps %d sentinels", err, n)
	}
}

// roundTrip is the body of every per-type fuzz target (docs/spec.md §2): a
// packet that parses must consume all of b, report Length() == len(b),
// re-encode to exactly b (so no two encodings mean the same packet), and
// reparse to an identical value.
func roundTrip[P any, T interface {
	*P
	packet
}](t *testing.T, b []byte, parse func(T, []byte) (int, error)) {
	in := append([]byte(nil), b...)
	var x P
	n, err := parse(&x, b)
	if err != nil {
		checkErr(t, err)
		return
	}
	if !bytes.Equal(b, in) {
		t.Fatal("parsing modified its input")
	}
	if n != len(b) {
		t.Fatalf("parsed %d of %d bytes", n, len(b))
	}
	if l := T(&x).Length(); l != len(b) {
		t.Fatalf("Length() = %d, input %d bytes", l, len(b))
	}
	out := T(&x).Append(make([]byte, 0, 8))
	if !bytes.Equal(out, b) {
		t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, out)
	}
	var y P
	if _, err := parse(&y, out); err != nil {
		t.Fatalf("re-encoded packet does not parse: %v", err)
	}
	if !reflect.DeepEqual(x, y) {
		t.Fatalf("reparse differs:\n %+v\n %+v", x, y)
	}
}

func FuzzHeader(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h wire.Header
		n, err := wire.ParseHeader(&h, b)
		if err != nil {
			checkErr(t, err)
			return
		}
		if n != wire.HeaderLen || !h.Op.Known() {
			t.Fatalf("n = %d, op %v", n, h.Op)
		}
		if out := h.Append(nil); !bytes.Equal(out, b[:wire.HeaderLen]) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b[:wire.HeaderLen], out)
		}
	})
}

func FuzzData(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, wire.ParseData)
		var d wire.Data
		if _, err := wire.ParseData(&d, b); err == nil {
			// The placement invariant the parser promises (docs/spec.md §2.4).
			if d.MsgLen > wire.MaxMessageLen || d.Offset+uint64(len(d.Payload)) > d.MsgLen || d.Index >= wire.MaxRecvEntries {
				t.Fatalf("accepted out-of-range DATA %+v", d.Header)
			}
			if hdr := d.AppendHeader(nil); len(hdr) != d.HeaderLength() || !bytes.Equal(hdr, b[:len(b)-len(d.Payload)]) {
				t.Fatal("AppendHeader differs from the input header")
			}
		}
	})
}

func FuzzAck(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, wire.ParseAck)
		var a wire.Ack
		if _, err := wire.ParseAck(&a, b); err == nil && (a.N < 1 || a.N > wire.MaxAckRecords) {
			t.Fatalf("accepted %d records", a.N)
		}
	})
}

func FuzzRecvReady(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, wire.ParseRecvReady)
		var r wire.RecvReady
		if _, err := wire.ParseRecvReady(&r, b); err == nil {
			if r.N < 1 || r.N > wire.MaxRecvEntries {
				t.Fatalf("accepted %d entries", r.N)
			}
			for _, e := range r.Entries[:r.N] {
				if e.Capacity > wire.MaxMessageLen {
					t.Fatalf("accepted capacity %d", e.Capacity)
				}
			}
		}
	})
}

func FuzzNack(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, b, wire.ParseNack) })
}

func FuzzHello(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, wire.ParseHello)
		var h wire.Hello
		if _, err := wire.ParseHello(&h, b); err == nil {
			if h.Planes < 1 || h.Planes > wire.MaxPlanes || h.Paths < 1 || h.Paths > wire.MaxPathsPerPlane ||
				h.MaxDgram < wire.MinDatagram || len(h.Addr) > wire.MaxAddrBlob {
				t.Fatalf("accepted out-of-range HELLO")
			}
		}
	})
}

func FuzzProbe(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, b, wire.ParseProbe) })
}

func FuzzClose(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, b, wire.ParseClose) })
}

// FuzzAnyPacket dispatches on the opcode the way a receiver does; whatever
// parses must round-trip, and whatever has no parser must be refused by
// ParseHeader or be the reserved WRITE opcode.
func FuzzAnyPacket(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, n, err, ok := parseAny(b)
		if !ok {
			var h wire.Header
			if _, err := wire.ParseHeader(&h, b); err == nil && h.Op != wire.OpWrite {
				t.Fatalf("opcode %v parses in the header but has no body parser", h.Op)
			}
			return
		}
		if err != nil {
			checkErr(t, err)
			return
		}
		if n != len(b) || p.Length() != len(b) {
			t.Fatalf("%T: n = %d, Length = %d, input %d", p, n, p.Length(), len(b))
		}
		if out := p.Append(nil); !bytes.Equal(out, b) {
			t.Fatalf("%T: re-encoding differs", p)
		}
		q, _, err, _ := parseAny(p.Append(nil))
		if err != nil || fmt.Sprint(fieldMap(p)) != fmt.Sprint(fieldMap(q)) {
			t.Fatalf("%T: reparse differs: %v", p, err)
		}
	})
}

// FuzzPiggy checks ParsePiggy, the one parser an observer runs on packets it
// does not otherwise decode: it never panics, its errors are ParseErrors, and
// wherever the body parser accepts a packet ParsePiggy agrees with it on the
// piggybacked acknowledgement (docs/spec.md §2.11), so an observer never reads
// a different record from the one the receiver acts on.
func FuzzPiggy(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		var pg wire.Piggyback
		err := wire.ParsePiggy(&pg, b)
		if err != nil {
			checkErr(t, err)
		}
		if !bytes.Equal(b, in) {
			t.Fatal("parsing modified its input")
		}
		p, _, perr, ok := parseAny(b)
		if !ok || perr != nil {
			return
		}
		var want wire.Piggyback
		switch x := p.(type) {
		case *wire.Data:
			want = x.Piggyback
		case *wire.RecvReady:
			want = x.Piggyback
		case *wire.Nack:
			want = x.Piggyback
		case *wire.Probe:
			want = x.Piggyback
		}
		if err != nil {
			t.Fatalf("%T parses but ParsePiggy refuses it: %v", p, err)
		}
		if pg != want {
			t.Fatalf("%T: ParsePiggy = %+v, body parser %+v", p, pg, want)
		}
	})
}
