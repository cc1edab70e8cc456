package wire_test

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/transport/wire"
)

// testHeader is a header with every field non-zero, so that a field written
// at the wrong offset shows up in a comparison.
func testHeader() wire.Header {
	return wire.Header{Flags: wire.FlagAckReq | wire.FlagRetransmit, DstConn: 0x0a0b0c0d,
		Token: 0x1122334455667788, Path: 0x0102, PSN: 0xfffffff0}
}

func dataPacket(payload int) *wire.Data {
	d := &wire.Data{Header: testHeader(), Flow: 0x01020304, Msg: 0x05060708, Index: 3,
		Timestamp: 0x99aabbcc, Offset: 1 << 20, MsgLen: 1<<20 + 4096}
	d.Payload = make([]byte, payload)
	for i := range d.Payload {
		d.Payload[i] = byte(i*7 + 1)
	}
	return d
}

func ackPacket(n int) *wire.Ack {
	a := &wire.Ack{Header: testHeader(), RateHint: 100_000_000, N: n}
	a.PSN = 0
	for i := 0; i < n; i++ {
		r := &a.Records[i]
		r.Path = uint16(i + 1)
		r.Cum = wire.PSN(0xffffff00 + uint32(i)*16)
		r.CE = uint32(i * 3)
		r.EchoTS = 0x10000000 + uint32(i)
		r.Delay = 1000 + uint32(i)
		r.FwdDelay = uint16(0xff00 + i)
		r.Sack.Set(i)
		r.Sack.Set(63 + i)
		r.Sack.Set(255 - i)
	}
	return a
}

func recvReadyPacket(n int) *wire.RecvReady {
	r := &wire.RecvReady{Header: testHeader(), Flow: 9, Msg: 0xfffffffe, N: n}
	for i := 0; i < n; i++ {
		r.Entries[i] = wire.RecvEntry{Capacity: uint64(i+1) << 30, Tag: 0xc0de0000 + uint32(i)}
	}
	return r
}

func nackPacket() *wire.Nack {
	return &wire.Nack{Header: testHeader(), Reason: wire.NackBadOffset, Index: 7, Flow: 11, Msg: 12,
		Value: 0x0102030405060708}
}

func helloPacket(op wire.Opcode, addr int) *wire.Hello {
	h := &wire.Hello{Header: wire.Header{Op: op}, SrcConn: 0xabcdef01, SrcTok: 0x0f0e0d0c0b0a0908,
		Caps: wire.CapAuth | wire.CapWrite | 1<<31, Planes: 8, Paths: 32, MaxDgram: 9000}
	h.Addr = make([]byte, addr)
	for i := range h.Addr {
		h.Addr[i] = byte(i ^ 0x5a)
	}
	return h
}

// idleAck is an ACK that answers a RECV_READY as idle (FlagIdle).
func idleAck() *wire.Ack {
	a := ackPacket(1)
	a.Flags = wire.FlagIdle
	return a
}

func probePacket() *wire.Probe { return &wire.Probe{Header: testHeader()} }

func closePacket() *wire.Close {
	c := &wire.Close{Header: testHeader(), Reason: wire.CloseShutdown}
	c.Flags = wire.FlagReply
	c.PSN = 0
	return c
}

// allPackets is one valid packet of every type, by name.
func allPackets() map[string]packet {
	return map[string]packet{
		"data":        dataPacket(100),
		"data-empty":  dataPacket(0),
		"ack-1":       ackPacket(1),
		"ack-16":      ackPacket(wire.MaxAckRecords),
		"ack-idle":    idleAck(),
		"recv-1":      recvReadyPacket(1),
		"recv-8":      recvReadyPacket(wire.MaxRecvEntries),
		"nack":        nackPacket(),
		"hello":       helloPacket(wire.OpHello, 18),
		"hello-ack":   helloPacket(wire.OpHelloAck, 0),
		"probe":       probePacket(),
		"close":       closePacket(),
		"data-piggy":  withPiggy(dataPacket(64)),
		"recv-piggy":  withPiggy(recvReadyPacket(3)),
		"nack-piggy":  withPiggy(nackPacket()),
		"probe-piggy": withPiggy(probePacket()),
	}
}

// testPiggy is a piggybacked acknowledgement with every field distinct.
func testPiggy() wire.Piggyback {
	pg := wire.Piggyback{HasPiggy: true, PiggyHint: 25_000_000}
	pg.Piggy = wire.AckRecord{Path: 3, Cum: 0xfffffffe, CE: 9, EchoTS: 0x31323334, Delay: 777, FwdDelay: 0x1234}
	pg.Piggy.Sack.Set(0)
	pg.Piggy.Sack.Set(64)
	pg.Piggy.Sack.Set(255)
	return pg
}

// withPiggy attaches testPiggy to one of the packet types that may carry it.
func withPiggy[P interface {
	*wire.Data | *wire.RecvReady | *wire.Nack | *wire.Probe
}](p P) packet {
	pg := testPiggy()
	switch x := any(p).(type) {
	case *wire.Data:
		x.Piggyback = pg
	case *wire.RecvReady:
		x.Piggyback = pg
	case *wire.Nack:
		x.Piggyback = pg
	case *wire.Probe:
		x.Piggyback = pg
	}
	return any(p).(packet)
}

// with returns a copy of b changed by f.
func with(b []byte, f func(b []byte)) []byte {
	c := append([]byte(nil), b...)
	f(c)
	return c
}

func put16(off int, v uint16) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint16(b[off:], v) }
}

func put32(off int, v uint32) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) }
}

func put64(off int, v uint64) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint64(b[off:], v) }
}

func put8(off int, v byte) func([]byte) { return func(b []byte) { b[off] = v } }
