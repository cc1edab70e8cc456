package wire_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// sentinels are the errors a parser may return (wrapped in *ParseError).
var sentinels = []error{wire.ErrShort, wire.ErrVersion, wire.ErrOpcode, wire.ErrLength, wire.ErrRange, wire.ErrReserved}

// checkParseError fails unless err is a *ParseError wrapping exactly the
// sentinel want (nil: err must be nil).
func checkParseError(t *testing.T, name string, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: unexpected error %v", name, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", name, err, want)
		return
	}
	var pe *wire.ParseError
	if !errors.As(err, &pe) {
		t.Errorf("%s: error %T is not a *wire.ParseError", name, err)
		return
	}
	if pe.Field == "" || pe.Error() == "" {
		t.Errorf("%s: ParseError %+v names no field", name, pe)
	}
	for _, s := range sentinels {
		if s != want && errors.Is(err, s) {
			t.Errorf("%s: error %v also matches %v", name, err, s)
		}
	}
}

// headerMutations break the common header; every body parser must report
// them the way ParseHeader does (docs/spec.md §2.1).
var headerMutations = []struct {
	name string
	f    func([]byte) []byte
	want error
}{
	{"empty", func(b []byte) []byte { return b[:0] }, wire.ErrShort},
	{"one byte", func(b []byte) []byte { return b[:1] }, wire.ErrShort},
	{"header minus one", func(b []byte) []byte { return b[:wire.HeaderLen-1] }, wire.ErrShort},
	{"version 0", func(b []byte) []byte { return with(b, put8(0, 0)) }, wire.ErrVersion},
	{"version 2", func(b []byte) []byte { return with(b, put8(0, 2)) }, wire.ErrVersion},
	{"version 255", func(b []byte) []byte { return with(b, put8(0, 255)) }, wire.ErrVersion},
	{"opcode 0", func(b []byte) []byte { return with(b, put8(1, 0)) }, wire.ErrOpcode},
	{"opcode 9", func(b []byte) []byte { return with(b, put8(1, 9)) }, wire.ErrOpcode},
	{"opcode 15", func(b []byte) []byte { return with(b, put8(1, 15)) }, wire.ErrOpcode},
	{"opcode 17", func(b []byte) []byte { return with(b, put8(1, 17)) }, wire.ErrOpcode},
	{"opcode 255", func(b []byte) []byte { return with(b, put8(1, 255)) }, wire.ErrOpcode},
	{"flag bit 6", func(b []byte) []byte { return with(b, put16(2, 1<<6)) }, wire.ErrReserved},
	{"flag bit 15", func(b []byte) []byte { return with(b, put16(2, 1<<15)) }, wire.ErrReserved},
	{"reserved byte 18", func(b []byte) []byte { return with(b, put8(18, 1)) }, wire.ErrReserved},
	{"reserved byte 19", func(b []byte) []byte { return with(b, put8(19, 0x80)) }, wire.ErrReserved},
}

func TestHeaderErrors(t *testing.T) {
	for name, p := range allPackets() {
		valid := p.Append(nil)
		var h wire.Header
		if n, err := wire.ParseHeader(&h, valid); err != nil || n != wire.HeaderLen {
			t.Fatalf("%s: ParseHeader = %d, %v", name, n, err)
		}
		for _, m := range headerMutations {
			in := m.f(valid)
			_, err := wire.ParseHeader(&h, in)
			checkParseError(t, fmt.Sprintf("ParseHeader(%s, %s)", name, m.name), err, m.want)
			// The body parser of this type must report the same error.
			_, err = bodyParser(p)(in)
			checkParseError(t, fmt.Sprintf("body parser(%s, %s)", name, m.name), err, m.want)
		}
	}
}

// bodyParser returns the parser of p's type.
func bodyParser(p packet) func([]byte) (packet, error) {
	switch p.(type) {
	case *wire.Data:
		return func(b []byte) (packet, error) { var x wire.Data; _, err := wire.ParseData(&x, b); return &x, err }
	case *wire.Ack:
		return func(b []byte) (packet, error) { var x wire.Ack; _, err := wire.ParseAck(&x, b); return &x, err }
	case *wire.RecvReady:
		return func(b []byte) (packet, error) {
			var x wire.RecvReady
			_, err := wire.ParseRecvReady(&x, b)
			return &x, err
		}
	case *wire.Nack:
		return func(b []byte) (packet, error) { var x wire.Nack; _, err := wire.ParseNack(&x, b); return &x, err }
	case *wire.Hello:
		return func(b []byte) (packet, error) { var x wire.Hello; _, err := wire.ParseHello(&x, b); return &x, err }
	case *wire.Probe:
		return func(b []byte) (packet, error) { var x wire.Probe; _, err := wire.ParseProbe(&x, b); return &x, err }
	case *wire.Close:
		return func(b []byte) (packet, error) { var x wire.Close; _, err := wire.ParseClose(&x, b); return &x, err }
	}
	panic(fmt.Sprintf("bodyParser: %T", p))
}

// TestWrongOpcode feeds every valid packet to every other type's parser: each
// must refuse it with ErrOpcode (HELLO and HELLO_ACK share a parser).
func TestWrongOpcode(t *testing.T) {
	pk := allPackets()
	for pn, p := range pk {
		parse := bodyParser(p)
		for qn, q := range pk {
			_, err := parse(q.Append(nil))
			same := fmt.Sprintf("%T", p) == fmt.Sprintf("%T", q)
			if same {
				checkParseError(t, fmt.Sprintf("parser of %s on %s", pn, qn), err, nil)
			} else {
				checkParseError(t, fmt.Sprintf("parser of %s on %s", pn, qn), err, wire.ErrOpcode)
			}
		}
		// A header with the reserved WRITE opcode parses, but no body parser
		// takes it (docs/spec.md §2.2, §5.1).
		w := with(p.Append(nil), put8(1, byte(wire.OpWrite)))
		var h wire.Header
		if _, err := wire.ParseHeader(&h, w); err != nil || h.Op != wire.OpWrite {
			t.Errorf("ParseHeader(WRITE) = %v, %v", h.Op, err)
		}
		_, err := parse(w)
		checkParseError(t, "parser of "+pn+" on WRITE", err, wire.ErrOpcode)
	}
}

func TestHeaderFields(t *testing.T) {
	// Every flag combination of the known bits parses; the header round-trips.
	for fl := wire.Flags(0); fl < 16; fl++ {
		h := testHeader()
		h.Op = wire.OpProbe
		h.Flags = fl
		b := h.Append(nil)
		var g wire.Header
		if n, err := wire.ParseHeader(&g, b); err != nil || n != wire.HeaderLen || g != h {
			t.Errorf("flags %#x: got %+v, %d, %v; want %+v", fl, g, n, err, h)
		}
	}
	if wire.PeekOpcode(nil) != wire.OpInvalid || wire.PeekOpcode([]byte{1}) != wire.OpInvalid ||
		wire.PeekOpcode([]byte{9, 3}) != wire.OpData {
		t.Error("PeekOpcode")
	}
	h := testHeader()
	if b := h.Append(nil); wire.PeekDstConn(b) != h.DstConn || wire.PeekDstConn(b[:7]) != 0 {
		t.Error("PeekDstConn")
	}
}

type bodyCase struct {
	name string
	in   []byte
	want error
}

func runBodyCases(t *testing.T, p packet, cases []bodyCase) {
	t.Helper()
	parse := bodyParser(p)
	for _, c := range cases {
		q, err := parse(c.in)
		checkParseError(t, c.name, err, c.want)
		if err == nil {
			if got := q.Append(nil); string(got) != string(c.in) || q.Length() != len(c.in) {
				t.Errorf("%s: accepted but does not round-trip", c.name)
			}
		}
	}
}

func TestDataErrors(t *testing.T) {
	v := dataPacket(100).Append(nil)
	const maxLen = uint64(wire.MaxMessageLen)
	runBodyCases(t, &wire.Data{}, []bodyCase{
		{"valid", v, nil},
		{"short body", v[:wire.DataHeaderLen-1], wire.ErrShort},
		{"empty payload", v[:wire.DataHeaderLen], nil},
		{"reserved 33", with(v, put8(33, 1)), wire.ErrReserved},
		{"reserved 34", with(v, put8(34, 1)), wire.ErrReserved},
		{"reserved 35", with(v, put8(35, 1)), wire.ErrReserved},
		{"index 7", with(v, put8(32, 7)), nil},
		{"index 8", with(v, put8(32, 8)), wire.ErrRange},
		{"index 255", with(v, put8(32, 255)), wire.ErrRange},
		{"msg_len 2^48", with(v, put64(48, maxLen)), nil},
		{"msg_len 2^48+1", with(v, put64(48, maxLen+1)), wire.ErrRange},
		{"msg_len 2^64-1", with(v, put64(48, ^uint64(0))), wire.ErrRange},
		{"payload ends at msg_len", with(v, put64(48, 1<<20+100)), nil},
		{"payload beyond msg_len", with(v, put64(48, 1<<20+99)), wire.ErrLength},
		{"offset beyond msg_len", with(v, put64(40, 1<<20+4097)), wire.ErrLength},
		{"offset 2^64-1", with(v, put64(40, ^uint64(0))), wire.ErrLength},
		{"offset = msg_len, empty", with(v[:wire.DataHeaderLen], put64(40, 1<<20+4096)), nil},
		{"offset = msg_len, one byte", with(v[:wire.DataHeaderLen+1], put64(40, 1<<20+4096)), wire.ErrLength},
		{"empty message, empty payload", with(with(v[:wire.DataHeaderLen], put64(40, 0)), put64(48, 0)), nil},
		{"empty message with payload", with(with(v, put64(40, 0)), put64(48, 0)), wire.ErrLength},
		{"msg_len 2^48, payload at its end", with(with(v, put64(48, maxLen)), put64(40, maxLen-100)), nil},
		{"msg_len 2^48, payload across its end", with(with(v, put64(48, maxLen)), put64(40, maxLen-99)), wire.ErrLength},
	})
}

func TestAckErrors(t *testing.T) {
	v := ackPacket(2).Append(nil)
	full := ackPacket(wire.MaxAckRecords).Append(nil)
	runBodyCases(t, &wire.Ack{}, []bodyCase{
		{"valid", v, nil},
		{"valid 16", full, nil},
		{"short fixed part", v[:wire.HeaderLen+7], wire.ErrShort},
		{"count 0", with(v, put8(28, 0)), wire.ErrRange},
		{"count 17", with(full, put8(28, 17)), wire.ErrRange},
		{"count 255", with(v, put8(28, 255)), wire.ErrRange},
		{"reserved 29", with(v, put8(29, 1)), wire.ErrReserved},
		{"reserved 31", with(v, put8(31, 1)), wire.ErrReserved},
		{"records cut", v[:len(v)-1], wire.ErrShort},
		{"count 3, two records", with(v, put8(28, 3)), wire.ErrShort},
		{"count 1, two records", with(v, put8(28, 1)), wire.ErrLength},
		{"trailing byte", append(append([]byte(nil), v...), 0), wire.ErrLength},
		{"no records", v[:32], wire.ErrShort},
		{"record 0 forward delay 0", with(v, put16(32+2, 0)), nil},
		{"record 1 forward delay max", with(v, put16(32+52+2, wire.MaxFwdDelay)), nil},
		{"record 15 forward delay 1", with(full, put16(32+15*52+2, 1)), nil},
	})
}

func TestRecvReadyErrors(t *testing.T) {
	v := recvReadyPacket(2).Append(nil)
	full := recvReadyPacket(wire.MaxRecvEntries).Append(nil)
	runBodyCases(t, &wire.RecvReady{}, []bodyCase{
		{"valid", v, nil},
		{"valid 8", full, nil},
		{"short fixed part", v[:wire.HeaderLen+11], wire.ErrShort},
		{"count 0", with(v, put8(32, 0)), wire.ErrRange},
		{"count 9", with(full, put8(32, 9)), wire.ErrRange},
		{"reserved 33", with(v, put8(33, 1)), wire.ErrReserved},
		{"reserved 35", with(v, put8(35, 1)), wire.ErrReserved},
		{"entries cut", v[:len(v)-1], wire.ErrShort},
		{"count 3, two entries", with(v, put8(32, 3)), wire.ErrShort},
		{"count 1, two entries", with(v, put8(32, 1)), wire.ErrLength},
		{"trailing byte", append(append([]byte(nil), v...), 0), wire.ErrLength},
		{"capacity 2^48", with(v, put64(36+16, wire.MaxMessageLen)), nil},
		{"capacity 0", with(v, put64(36, 0)), nil},
		{"capacity 2^48+1", with(v, put64(36+16, wire.MaxMessageLen+1)), wire.ErrRange},
		{"entry 0 reserved", with(v, put32(36+12, 1)), wire.ErrReserved},
		{"entry 7 reserved", with(full, put32(36+7*16+12, 1)), wire.ErrReserved},
	})
}

func TestNackErrors(t *testing.T) {
	v := nackPacket().Append(nil)
	cases := []bodyCase{
		{"valid", v, nil},
		{"short", v[:wire.NackLen-1], wire.ErrShort},
		{"trailing byte", append(append([]byte(nil), v...), 0), wire.ErrLength},
		{"reason 0", with(v, put8(24, 0)), wire.ErrRange},
		{"reason 7", with(v, put8(24, 7)), wire.ErrRange},
		{"reason 255", with(v, put8(24, 255)), wire.ErrRange},
		{"index 8", with(v, put8(25, 8)), wire.ErrRange},
		{"reserved 26", with(v, put8(26, 1)), wire.ErrReserved},
		{"reserved 27", with(v, put8(27, 1)), wire.ErrReserved},
	}
	for r := wire.NackNotReady; r <= wire.NackFlowAborted; r++ {
		cases = append(cases, bodyCase{fmt.Sprintf("reason %d (%v)", r, r), with(v, put8(24, byte(r))), nil})
	}
	runBodyCases(t, &wire.Nack{}, cases)
}

func TestHelloErrors(t *testing.T) {
	v := helloPacket(wire.OpHello, 12).Append(nil)
	big := helloPacket(wire.OpHelloAck, wire.MaxAddrBlob).Append(nil)
	runBodyCases(t, &wire.Hello{}, []bodyCase{
		{"valid", v, nil},
		{"valid HELLO_ACK, 512-byte blob", big, nil},
		{"no blob", with(v[:48], put16(44, 0)), nil},
		{"short fixed part", v[:47], wire.ErrShort},
		{"planes 0", with(v, put8(40, 0)), wire.ErrRange},
		{"planes 16", with(v, put8(40, 16)), nil},
		{"planes 17", with(v, put8(40, 17)), wire.ErrRange},
		{"paths 0", with(v, put8(41, 0)), wire.ErrRange},
		{"paths 64", with(v, put8(41, 64)), nil},
		{"paths 65", with(v, put8(41, 65)), wire.ErrRange},
		{"max_dgram 575", with(v, put16(42, 575)), wire.ErrRange},
		{"max_dgram 576", with(v, put16(42, 576)), nil},
		{"max_dgram 0", with(v, put16(42, 0)), wire.ErrRange},
		{"max_dgram 65535", with(v, put16(42, 65535)), nil},
		{"addr_len 513", with(big, put16(44, 513)), wire.ErrRange},
		{"addr_len 65535", with(v, put16(44, 65535)), wire.ErrRange},
		{"reserved 46", with(v, put8(46, 1)), wire.ErrReserved},
		{"reserved 47", with(v, put8(47, 1)), wire.ErrReserved},
		{"blob cut", v[:len(v)-1], wire.ErrShort},
		{"addr_len 13, 12 bytes", with(v, put16(44, 13)), wire.ErrShort},
		{"addr_len 11, 12 bytes", with(v, put16(44, 11)), wire.ErrLength},
		{"trailing byte", append(append([]byte(nil), v...), 0), wire.ErrLength},
		{"unknown caps bits", with(v, put32(36, 0xffffffff)), nil},
	})
}

func TestProbeErrors(t *testing.T) {
	v := probePacket().Append(nil)
	runBodyCases(t, &wire.Probe{}, []bodyCase{
		{"valid", v, nil},
		{"trailing byte", append(append([]byte(nil), v...), 0), wire.ErrLength},
		{"trailing 32 bytes", append(append([]byte(nil), v...), make([]byte, 32)...), wire.ErrLength},
		{"short", v[:wire.HeaderLen-1], wire.ErrShort},
	})
}

func TestCloseErrors(t *testing.T) {
	v := closePacket().Append(nil)
	cases := []bodyCase{
		{"valid", v, nil},
		{"short", v[:wire.CloseLen-1], wire.ErrShort},
		{"trailing byte", append(append([]byte(nil), v...), 0), wire.ErrLength},
		{"reason 4", with(v, put32(24, 4)), wire.ErrRange},
		{"reason 2^32-1", with(v, put32(24, 0xffffffff)), wire.ErrRange},
		{"reserved 28", with(v, put8(28, 1)), wire.ErrReserved},
		{"reserved 31", with(v, put8(31, 1)), wire.ErrReserved},
	}
	for r := wire.CloseNormal; r <= wire.CloseShutdown; r++ {
		cases = append(cases, bodyCase{fmt.Sprintf("reason %d (%v)", r, r), with(v, put32(24, uint32(r))), nil})
	}
	runBodyCases(t, &wire.Close{}, cases)
}

// TestRoundTripBuilt encodes packets built field by field, parses them back
// and compares every field: the opposite direction of the fuzz targets.
func TestRoundTripBuilt(t *testing.T) {
	for name, p := range allPackets() {
		b := p.Append(nil)
		if len(b) != p.Length() {
			t.Errorf("%s: Append wrote %d bytes, Length says %d", name, len(b), p.Length())
		}
		q, n, err, ok := parseAny(b)
		if !ok || err != nil || n != len(b) {
			t.Errorf("%s: parse = %d, %v, %v", name, n, err, ok)
			continue
		}
		if fmt.Sprint(fieldMap(p)) != fmt.Sprint(fieldMap(q)) {
			t.Errorf("%s: fields differ:\n sent %v\n got  %v", name, fieldMap(p), fieldMap(q))
		}
		// Appending after existing bytes leaves them alone.
		pre := []byte{0xee, 0xff}
		if got := p.Append(pre); string(got[:2]) != "\xee\xff" || string(got[2:]) != string(b) {
			t.Errorf("%s: Append to a non-empty buffer", name)
		}
	}
}

// TestEncoderForcesOpcode checks that each Append writes its own opcode
// whatever the caller left in Header.Op.
func TestEncoderForcesOpcode(t *testing.T) {
	cases := []struct {
		p  packet
		op wire.Opcode
	}{
		{&wire.Data{}, wire.OpData},
		{&wire.Ack{N: 1}, wire.OpAck},
		{&wire.RecvReady{N: 1}, wire.OpRecvReady},
		{&wire.Nack{}, wire.OpNack},
		{&wire.Hello{}, wire.OpHello},
		{&wire.Hello{Header: wire.Header{Op: wire.OpData}}, wire.OpHello},
		{&wire.Hello{Header: wire.Header{Op: wire.OpHelloAck}}, wire.OpHelloAck},
		{&wire.Probe{}, wire.OpProbe},
		{&wire.Close{}, wire.OpClose},
	}
	for _, c := range cases {
		if got := wire.PeekOpcode(c.p.Append(nil)); got != c.op {
			t.Errorf("%T.Append wrote opcode %v, want %v", c.p, got, c.op)
		}
	}
	d := wire.Data{Header: wire.Header{Op: wire.OpAck}}
	if got := wire.PeekOpcode(d.AppendHeader(nil)); got != wire.OpData {
		t.Errorf("Data.AppendHeader wrote opcode %v", got)
	}
	if got := d.AppendHeader(nil); len(got) != wire.DataHeaderLen {
		t.Errorf("Data.AppendHeader wrote %d bytes", len(got))
	}
}

// TestHelloTruncatesBlob checks that an oversize address blob is cut to
// MaxAddrBlob on encoding and that the result parses.
func TestHelloTruncatesBlob(t *testing.T) {
	h := helloPacket(wire.OpHello, wire.MaxAddrBlob+10)
	b := h.Append(nil)
	if len(b) != h.Length() || len(b) != 48+wire.MaxAddrBlob {
		t.Fatalf("encoded %d bytes, Length %d", len(b), h.Length())
	}
	var g wire.Hello
	if _, err := wire.ParseHello(&g, b); err != nil || string(g.Addr) != string(h.Addr[:wire.MaxAddrBlob]) {
		t.Fatalf("reparse: %v", err)
	}
}

func TestStrings(t *testing.T) {
	for op := 0; op < 256; op++ {
		o := wire.Opcode(op)
		if o.String() == "" {
			t.Errorf("opcode %d has no name", op)
		}
		if o.Known() != (op >= 1 && op <= 8 || op == 16) {
			t.Errorf("opcode %d: Known = %v", op, o.Known())
		}
	}
	for _, s := range []fmt.Stringer{wire.NackReason(0), wire.NackReason(9), wire.CloseReason(9)} {
		if s.String() == "" {
			t.Errorf("%#v has no name", s)
		}
	}
	seq := map[wire.Opcode]bool{wire.OpData: true, wire.OpRecvReady: true, wire.OpNack: true, wire.OpProbe: true, wire.OpWrite: true}
	for op := 0; op < 256; op++ {
		if wire.Opcode(op).Sequenced() != seq[wire.Opcode(op)] {
			t.Errorf("opcode %d: Sequenced = %v (docs/spec.md §2.2)", op, wire.Opcode(op).Sequenced())
		}
	}
}
