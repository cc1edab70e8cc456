package udp

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/auth"
	"github.com/metaroce/metaroce/transport/udp/sockio"
	"github.com/metaroce/metaroce/transport/wire"
)

// rxBatch is the number of receive buffers, each sockio.MaxDatagram bytes
// (the size GRO needs): one recvmmsg call fills at most this many.
const rxBatch = 64

// rxRounds bounds the recvmmsg calls per socket per turn, so that a flood on
// one socket does not delay timers and the other sockets.
const rxRounds = 16

// rxRoundBytes is about how many bytes one recvmmsg call may return before
// the turn transmits what they made due (acknowledgements above all): a
// receiver that read a whole window before acknowledging any of it would
// leave the sender idle for as long as it takes to copy the window out.
const rxRoundBytes = 512 << 10

// rxRoundSlots is how many datagrams of at most per bytes one recvmmsg call
// takes: as many as a message of rxRoundBytes spans, DATA headers included
// (not a secret's seal, which only a few more datagrams would cover). A
// collective's 512 KiB message over loopback is eight full 65,000-byte
// datagrams and a short ninth; with eight slots the ninth waited for the
// next call, behind the copy of the first eight out of the ring (about
// 12 µs), and so did the acknowledgement that completes the send.
func rxRoundSlots(per int) int {
	payload := max(per-wire.DataHeaderLen, 1)
	return (rxRoundBytes + payload - 1) / payload
}

// rxState holds the preallocated receive buffers.
type rxState struct {
	msgs  []sockio.Msg
	hello wire.Hello
}

func (r *rxState) init() {
	const slot = 1 << 16
	back := make([]byte, rxBatch*slot)
	r.msgs = make([]sockio.Msg, rxBatch)
	for i := range r.msgs {
		r.msgs[i].Buf = back[i*slot : (i+1)*slot : (i+1)*slot]
	}
}

// readSocket reads what socket tag holds and feeds every datagram to the
// core; it returns the number of datagrams.
func (e *Endpoint) readSocket(tag int32, now transport.Time) int {
	s := e.socks[tag]
	plane := uint8(int(tag) / e.cfg.PortsPerPlane)
	total := 0
	per := e.cfg.MaxDatagram
	if s.GRO() {
		per = sockio.MaxDatagram // a coalesced batch fills its buffer
	}
	msgs := e.rx.msgs[:min(max(rxRoundSlots(per), 4), len(e.rx.msgs))]
	for round := 0; round < rxRounds; round++ {
		if round > 0 {
			// Later rounds start later: hand the core the time they
			// arrived by, never an older one than it has seen.
			now = e.now()
			// The events of the rounds read so far first: a HELLO
			// among them has made the core owe its HELLO_ACK, and only
			// handling its EvAccepted says whether the connection is
			// refused, which must come before the HELLO_ACK is polled
			// (see refuse). Sent ahead of that, it reached the dialer
			// before the CLOSE, whose Dial then succeeded and the
			// connection closed at once.
			e.drainEvents()
			e.transmit(now)
		}
		got, err := s.ReadBatch(msgs)
		if err != nil {
			if !errors.Is(err, sockio.ErrWouldBlock) {
				e.logf("udp: read from %v: %v", s.LocalAddr(), err)
			}
			break
		}
		// The core takes now as the datagrams' arrival time: a time
		// taken before the read would predate those that arrived while
		// the turn ran, and shorten the peer's RTT samples by as much
		// (HandleDatagram; TestArrivalTimeIsTheRead).
		now = max(now, e.now())
		for i := 0; i < got; i++ {
			m := &e.rx.msgs[i]
			if m.Trunc {
				continue
			}
			segs := m.Segments()
			for k := 0; k < segs; k++ {
				e.handle(now, m.Addr, plane, transport.ECN(m.ECN), m.Segment(k))
			}
			total += segs
		}
		if got < len(msgs) {
			break
		}
	}
	e.counters.rxDatagrams.Add(uint64(total))
	return total
}

// handle passes one datagram to the core and copies a placed payload into
// its posted buffer.
func (e *Endpoint) handle(now transport.Time, src netip.AddrPort, plane uint8, ecn transport.ECN, data []byte) {
	e.handleDatagram(now, src, plane, ecn, data, false)
}

// handleDatagram is handle; replay says data comes from e.early, and is
// not to be kept there again.
func (e *Endpoint) handleDatagram(now transport.Time, src netip.AddrPort, plane uint8, ecn transport.ECN, data []byte, replay bool) {
	if e.auth != nil {
		var keep []byte
		if !replay && e.earlyClose(data) {
			// A failed Open leaves data unspecified: copy it first.
			keep = append([]byte(nil), data...)
		}
		plain, err := e.auth.Open(data)
		if err != nil && keep != nil && errors.Is(err, auth.ErrNoKey) {
			e.stashEarly(earlyDatagram{src: src, plane: plane, ecn: ecn, data: keep})
			return
		}
		if err != nil {
			e.authErrorf(e.counters.authDrops.Add(1), err, "dropped a datagram from %v: %v", src, err)
			return
		}
		data = plain
	} else if len(data) >= 4 && wire.Flags(binary.BigEndian.Uint16(data[2:]))&wire.FlagAuth != 0 {
		// A sealed packet on an endpoint without a secret: the spec says
		// drop it (docs/spec.md §5.2), and it would not parse anyway.
		e.authErrorf(e.counters.authDrops.Add(1), nil, "dropped an authenticated datagram from %v: this endpoint has no secret", src)
		return
	}
	var from transport.RemoteID
	switch {
	case len(data) >= 2 && wire.Opcode(data[1]) == wire.OpHello:
		from = e.helloPeer(now, src, data)
	case e.peers.lastSource(src):
		from = e.peers.fromSource(src, now)
	default:
		// The core needs the sender's address only to answer a HELLO or a
		// packet for a connection it does not know (docs/spec.md §3.3). A
		// packet for a live connection takes that connection's peer, so
		// that the transient table, which evicts by a scan, holds only
		// the sources of strays and not every port of every peer.
		if c := e.conns[transport.ConnID(wire.PeekDstConn(data))]; c != nil {
			from = c.rid
		} else {
			from = e.peers.fromSource(src, now)
		}
	}
	pl := e.core.HandleDatagram(now, transport.Datagram{From: from, Plane: plane, ECN: ecn, Data: data})
	if len(e.early) > 0 && wire.PeekOpcode(data) == wire.OpHelloAck {
		e.replayEarly(now, wire.PeekDstConn(data))
	}
	if !pl.OK {
		return
	}
	ref, ok := e.recvOps[pl.Cookie]
	if !ok {
		return // cannot happen: the core places only into posted buffers
	}
	copy(ref.req.recv[ref.idx][pl.Offset:], pl.Payload)
}

// helloPeer identifies the sender of a HELLO by the listening addresses in
// its address blob, so that the connection the core may accept routes to
// them; a HELLO without a usable blob (one address per plane, each of the
// family of this side's plane) is attributed to its source address, and
// its connection refused in onAccepted. Nothing may reach a socket with a
// destination of the other family.
func (e *Endpoint) helloPeer(now transport.Time, src netip.AddrPort, data []byte) transport.RemoteID {
	h := &e.rx.hello
	if _, err := wire.ParseHello(h, data); err != nil {
		return e.peers.fromSource(src, now)
	}
	addrs, err := DecodeAddrs(h.Addr)
	if err != nil || !e.sameFamilies(addrs) {
		return e.peers.fromSource(src, now)
	}
	return e.peers.known(addrs, h.Addr).id
}

// sameFamilies reports whether addrs has one address per plane, each of
// the address family of this side's plane.
func (e *Endpoint) sameFamilies(addrs []netip.AddrPort) bool {
	if len(addrs) != len(e.addrs) {
		return false
	}
	for i, a := range addrs {
		if a.Addr().Unmap().Is6() != e.addrs[i].Addr().Is6() {
			return false
		}
	}
	return true
}

// earlyDatagram is a sealed CLOSE kept until the HELLO_ACK whose keys open
// it has arrived (stashEarly).
type earlyDatagram struct {
	src   netip.AddrPort
	plane uint8
	ecn   transport.ECN
	data  []byte
}

// maxEarly bounds e.early. A refusal brings one CLOSE per refused dial
// and its retransmissions come after the HELLO_ACK, so a few suffice;
// the bound keeps a flood of forged CLOSEs naming a dialing connection
// (its id is all they need to be kept; opening checks the rest) from
// holding memory.
const maxEarly = 8

// earlyClose reports whether data is a sealed CLOSE for a connection this
// side is still dialing. Such a CLOSE is the peer refusing the connection
// (see refuse): it is sent just ahead of the HELLO_ACK, whose opening
// gives this side the keys to open it, and is kept until then.
func (e *Endpoint) earlyClose(data []byte) bool {
	if len(data) < wire.HeaderLen || wire.PeekOpcode(data) != wire.OpClose {
		return false
	}
	c := e.conns[transport.ConnID(wire.PeekDstConn(data))]
	return c != nil && c.dialing
}

// stashEarly keeps d for replayEarly, after forgetting the kept datagrams
// of connections no longer dialing, and dropping the oldest one when
// maxEarly are still kept. A datagram forgotten unopened goes uncounted:
// it failed no check yet.
func (e *Endpoint) stashEarly(d earlyDatagram) {
	e.early = slices.DeleteFunc(e.early, func(k earlyDatagram) bool {
		c := e.conns[transport.ConnID(wire.PeekDstConn(k.data))]
		return c == nil || !c.dialing
	})
	if len(e.early) == maxEarly {
		copy(e.early, e.early[1:])
		e.early = e.early[:maxEarly-1]
	}
	e.early = append(e.early, d)
}

// replayEarly hands the core, right after the HELLO_ACK of connection
// conn, the datagrams kept for it, now that they can be opened, and
// forgets those of connections no longer dialing.
func (e *Endpoint) replayEarly(now transport.Time, conn uint32) {
	var mine []earlyDatagram
	keep := e.early[:0]
	for _, d := range e.early {
		id := wire.PeekDstConn(d.data)
		switch c := e.conns[transport.ConnID(id)]; {
		case id == conn:
			mine = append(mine, d)
		case c != nil && c.dialing:
			keep = append(keep, d)
		}
	}
	clear(e.early[len(keep):])
	e.early = keep
	if c := e.conns[transport.ConnID(conn)]; c != nil && len(mine) > 0 {
		c.refusedEarly = true
	}
	for _, d := range mine {
		e.handleDatagram(now, d.src, d.plane, d.ecn, d.data, true)
	}
}
