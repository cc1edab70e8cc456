package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/transport/wire"
)

// testerMaxDgram is the max_dgram the tester announces, bytes. It is small so
// that a message of a few kilobytes spans several segments.
const testerMaxDgram = 1200

// pollInterval bounds one socket read, so waits can also watch the IUT's
// completions and their own deadline.
const pollInterval = 10 * time.Millisecond

// holdIdle is how long the socket may stay quiet before held datagrams are
// released: reordering must stay well below any retransmission timeout.
const holdIdle = 200 * time.Microsecond

// action is a filter's decision about one datagram from the IUT.
type action int

const (
	deliver action = iota // process it now
	drop                  // never process it: lost in the network
	hold                  // process it later, behind what arrives meanwhile
)

// rxPacket is one datagram from the IUT with where and when it came from:
// at is the kernel's arrival time where the platform provides it.
type rxPacket struct {
	at  time.Time
	src netip.AddrPort
	h   wire.Header
	b   []byte // valid during the filter call unless held
}

// rxData is one DATA packet of the IUT that the tester processed.
type rxData struct {
	at        time.Time
	src       netip.AddrPort
	path      uint16
	psn       wire.PSN
	flags     wire.Flags
	flow, msg uint32
	off       uint64
	msgLen    uint64
	ts        uint32 // the DATA timestamp: the IUT's clock when it sent the packet, ns mod 2^32
	payload   []byte
}

// dgramSizes sums up the lengths of the datagrams the IUT sent one tester
// connection, every opcode, dropped and held ones included.
type dgramSizes struct {
	count     int
	largest   int
	largestOp wire.Opcode
	over      []oversized // longer than testerMaxDgram, in arrival order
}

// oversized is one datagram of the IUT longer than the tester announced.
type oversized struct {
	h    wire.Header
	size int
}

func (d *dgramSizes) note(pk *rxPacket) {
	d.count++
	if len(pk.b) > d.largest {
		d.largest, d.largestOp = len(pk.b), pk.h.Op
	}
	if len(pk.b) > testerMaxDgram {
		d.over = append(d.over, oversized{h: pk.h, size: len(pk.b)})
	}
}

// rxPath is what the tester received on one of the IUT's paths: cumulative
// PSN and SACK bitmap, exactly what it must acknowledge.
type rxPath struct {
	cum    wire.PSN
	sack   wire.SackBitmap
	echoTS uint32    // timestamp of the latest DATA on the path, echoed in ACKs
	seenAt time.Time // arrival of that DATA, for the ACK's delay field
}

// receive records psn and reports whether it was new.
func (r *rxPath) receive(psn wire.PSN) bool {
	d := psn.Diff(r.cum)
	if d < 0 || d > wire.SackBits || (d > 0 && r.sack.Has(int(d)-1)) {
		return false
	}
	if d > 0 {
		r.sack.Set(int(d) - 1)
		return true
	}
	n := 1 + r.sack.TrailingOnes()
	r.cum = r.cum.Add(uint32(n))
	r.sack.Shift(n)
	return true
}

// peer is the tester's side of one connection to the IUT. It is driven by
// one goroutine: every wait reads the socket, acknowledges the IUT's
// sequenced packets and records what it saw.
type peer struct {
	sock       *net.UDPConn
	iut        IUT
	dst        *net.UDPAddr
	localConn  uint32
	localTok   uint64
	remoteConn uint32
	remoteTok  uint64
	seg        int      // payload bytes per DATA segment
	psn        wire.PSN // next PSN on the tester's path 0

	// filter, when set, sees every datagram before it is processed and may
	// drop it (as if the network lost it) or hold it for a later release.
	filter func(pk *rxPacket) action
	// releaseNow, set by a filter, releases the held datagrams right after
	// the current one is processed.
	releaseNow bool
	held       []*rxPacket
	rateHint   uint32 // kbit/s, put in every ACK the tester sends
	rxData     []rxData
	probes     []rxPacket

	// sizes is what the tester saw of the lengths of the IUT's datagrams
	// on this connection, for the max-dgram case.
	sizes dgramSizes

	rx    map[uint16]*rxPath
	ready map[[2]uint32]wire.RecvReady // RECV_READY by (flow, msg)
	acks  []wire.AckRecord             // records for the tester's path 0, arrival order
	// ackOps says which packet carried each record of acks: OpAck, or the
	// sequenced packet it was piggybacked on (docs/spec.md §2.11).
	ackOps []wire.Opcode
	nacks  []wire.Nack
	close  []wire.Close
	comps  []Completion
	// heard counts the datagrams read on the tester's socket, whatever
	// they hold: none at all after the handshake's HELLOs points at the
	// address, not at how the IUT answers (see silentHint).
	heard int
	buf   []byte
	oob   []byte // control messages of one receive: the kernel timestamp
}

// newPeer opens a UDP socket next to the IUT's address family.
func newPeer(iut IUT, rng *rand.Rand) (*peer, error) {
	la := netip.IPv4Unspecified()
	ia := iut.ListenAddr()
	if ia.Addr().Is4() || ia.Addr().Is4In6() {
		la = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		if !ia.Addr().Unmap().IsLoopback() {
			la = netip.IPv4Unspecified()
		}
	} else if ia.Addr().IsLoopback() {
		la = netip.IPv6Loopback()
	}
	s, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(la, 0)))
	if err != nil {
		return nil, fmt.Errorf("conformance: tester socket: %w", err)
	}
	// Without kernel timestamps packets are timed when read, which is
	// less exact on a loaded host but still meaningful.
	enableRxStamps(s)
	// Room for a sender's whole initial window at once (the kernel caps
	// the request at its limit): a burst the spec permits must not be
	// lost in the tester's own socket.
	s.SetReadBuffer(4 << 20)
	return &peer{
		sock: s, iut: iut, dst: net.UDPAddrFromAddrPort(ia),
		localConn: rng.Uint32() | 1, localTok: rng.Uint64() | 1,
		rx: map[uint16]*rxPath{}, ready: map[[2]uint32]wire.RecvReady{},
		buf: make([]byte, 65536), oob: make([]byte, rxStampOOB),
	}, nil
}

func (p *peer) closeSock() { p.sock.Close() }

// send writes one datagram to the IUT.
func (p *peer) send(b []byte) error {
	_, err := p.sock.WriteToUDP(b, p.dst)
	return err
}

// silentHint is the note that goes after what the tester missed when not
// one datagram came back to its socket: an IUT that answers wrongly still
// sends something, so the likelier cause is that nothing listens at the
// address given (a wrong --addr, an IUT not started or bound elsewhere).
// It is "" once anything was heard.
func (p *peer) silentHint() string {
	if p.heard > 0 {
		return ""
	}
	return fmt.Sprintf(" (not one datagram came back from %v: check that the IUT is listening at that address)", p.dst)
}

// hdr returns a header addressed to the IUT's connection.
func (p *peer) hdr(op wire.Opcode) wire.Header {
	return wire.Header{Op: op, DstConn: p.remoteConn, Token: p.remoteTok}
}

// handshake sends HELLO until the matching HELLO_ACK arrives and returns it.
func (p *peer) handshake(ctx context.Context) (wire.Hello, error) {
	var ack wire.Hello
	local := netip.MustParseAddrPort(p.sock.LocalAddr().String())
	if local.Addr().IsUnspecified() {
		local = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), local.Port())
	}
	h := wire.Hello{Header: wire.Header{Op: wire.OpHello}, SrcConn: p.localConn, SrcTok: p.localTok,
		Planes: 1, Paths: 1, MaxDgram: testerMaxDgram, Addr: udpAddrBlob(local)}
	pkt := h.Append(nil)
	got := false
	for try := 0; try < 10 && !got; try++ {
		if err := p.send(pkt); err != nil {
			return ack, err
		}
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		p.wait(wctx, func(b []byte) {
			var x wire.Hello
			if wire.PeekOpcode(b) == wire.OpHelloAck {
				if _, err := wire.ParseHello(&x, b); err == nil && !got {
					ack, got = x, true
					ack.Addr = append([]byte(nil), x.Addr...)
				}
			}
		}, func() bool { return got })
		cancel()
		if ctx.Err() != nil {
			break
		}
	}
	if !got {
		return ack, errors.New("no HELLO_ACK" + p.silentHint())
	}
	p.remoteConn, p.remoteTok = ack.SrcConn, ack.SrcTok
	p.seg = int(min(testerMaxDgram, ack.MaxDgram)) - wire.DataHeaderLen
	return ack, nil
}

// wait reads packets until done reports true or ctx ends; each datagram is
// processed (acknowledged, recorded) and then offered to raw when non-nil.
// It returns whether done became true.
func (p *peer) wait(ctx context.Context, raw func([]byte), done func() bool) bool {
	for {
		p.drainCompletions()
		if done() {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		dl := time.Now().Add(pollInterval)
		if len(p.held) > 0 {
			dl = time.Now().Add(holdIdle)
		}
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		p.sock.SetReadDeadline(dl)
		n, oobn, _, src, err := p.sock.ReadMsgUDPAddrPort(p.buf, p.oob)
		if err != nil {
			p.release(raw) // the link went idle: what was held arrives now
			continue
		}
		p.heard++
		at, ok := rxStamp(p.oob[:oobn])
		if !ok {
			at = time.Now()
		}
		pk := &rxPacket{at: at, src: src, b: p.buf[:n]}
		if _, err := wire.ParseHeader(&pk.h, pk.b); err != nil {
			continue
		}
		// Before the filter: a datagram the network is made to lose was
		// still sent, and its length counts.
		p.sizes.note(pk)
		act := deliver
		if p.filter != nil {
			act = p.filter(pk)
		}
		switch act {
		case hold:
			pk.b = append([]byte(nil), pk.b...)
			p.held = append(p.held, pk)
		case deliver:
			p.deliver(pk, raw)
		}
		if p.releaseNow {
			p.releaseNow = false
			p.release(raw)
		}
	}
}

// deliver processes one datagram and offers it to raw.
func (p *peer) deliver(pk *rxPacket, raw func([]byte)) {
	p.processAt(pk)
	if raw != nil {
		raw(pk.b)
	}
}

// release delivers every held datagram in arrival order.
func (p *peer) release(raw func([]byte)) {
	held := p.held
	p.held = nil
	for _, pk := range held {
		p.deliver(pk, raw)
	}
}

// quiet waits for d, still processing packets, and returns.
func (p *peer) quiet(ctx context.Context, d time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	p.wait(wctx, nil, func() bool { return false })
}

func (p *peer) drainCompletions() {
	ch := p.iut.Completions()
	if ch == nil {
		return
	}
	for {
		select {
		case c := <-ch:
			p.comps = append(p.comps, c)
		default:
			return
		}
	}
}

// processAt records one datagram from the IUT and acknowledges it when it
// is sequenced and addressed to this connection.
func (p *peer) processAt(pk *rxPacket) {
	b, h := pk.b, pk.h
	if h.Op == wire.OpNack {
		var n wire.Nack
		if _, err := wire.ParseNack(&n, b); err == nil {
			p.nacks = append(p.nacks, n)
		}
	}
	if h.Op == wire.OpClose {
		var c wire.Close
		if _, err := wire.ParseClose(&c, b); err == nil {
			p.close = append(p.close, c)
		}
	}
	if h.DstConn != p.localConn || h.Token != p.localTok {
		return
	}
	switch h.Op {
	case wire.OpAck:
		var a wire.Ack
		if _, err := wire.ParseAck(&a, b); err == nil {
			for i := 0; i < a.N; i++ {
				if a.Records[i].Path == 0 {
					p.acks = append(p.acks, a.Records[i])
					p.ackOps = append(p.ackOps, wire.OpAck)
				}
			}
		}
	case wire.OpRecvReady:
		var r wire.RecvReady
		if _, err := wire.ParseRecvReady(&r, b); err == nil {
			p.ready[[2]uint32{r.Flow, r.Msg}] = r
		}
	case wire.OpProbe:
		p.probes = append(p.probes, rxPacket{at: pk.at, src: pk.src, h: pk.h})
	}
	if h.Op.Sequenced() {
		// An acknowledgement may ride on any sequenced packet
		// (docs/spec.md §2.11, §3.1); it counts like an ACK's record.
		var pg wire.Piggyback
		if err := wire.ParsePiggy(&pg, b); err == nil && pg.HasPiggy && pg.Piggy.Path == 0 {
			p.acks = append(p.acks, pg.Piggy)
			p.ackOps = append(p.ackOps, h.Op)
		}
		r := p.pathState(h.Path)
		if h.Op == wire.OpData {
			var d wire.Data
			if _, err := wire.ParseData(&d, b); err != nil {
				return
			}
			r.echoTS, r.seenAt = d.Timestamp, pk.at
			p.rxData = append(p.rxData, rxData{at: pk.at, src: pk.src, path: h.Path, psn: h.PSN, flags: h.Flags,
				flow: d.Flow, msg: d.Msg, off: d.Offset, msgLen: d.MsgLen, ts: d.Timestamp, payload: append([]byte(nil), d.Payload...)})
		}
		r.receive(h.PSN)
		p.ackPath(h.Path)
	}
}

func (p *peer) pathState(path uint16) *rxPath {
	r := p.rx[path]
	if r == nil {
		r = &rxPath{}
		p.rx[path] = r
	}
	return r
}

// ackVia names the packet that carried acks[i], for evidence text.
func (p *peer) ackVia(i int) string {
	if i < 0 || i >= len(p.ackOps) || p.ackOps[i] == wire.OpAck {
		return "in an ACK"
	}
	return "piggybacked on " + p.ackOps[i].String() + " (§2.11)"
}

// ackPath sends an ACK with the record of the IUT's path and the tester's
// rate hint.
func (p *peer) ackPath(path uint16) {
	r := p.pathState(path)
	a := wire.Ack{Header: p.hdr(wire.OpAck), RateHint: p.rateHint, N: 1}
	a.Records[0] = wire.AckRecord{Path: path, Cum: r.cum, Sack: r.sack, EchoTS: r.echoTS}
	if !r.seenAt.IsZero() {
		a.Records[0].Delay = uint32(min(time.Since(r.seenAt), time.Second))
	}
	p.send(a.Append(nil))
}

// awaitReady waits for the IUT's RECV_READY of (flow, msg).
func (p *peer) awaitReady(ctx context.Context, flow, msg uint32) (wire.RecvReady, bool) {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	k := [2]uint32{flow, msg}
	ok := p.wait(wctx, nil, func() bool { _, ok := p.ready[k]; return ok })
	return p.ready[k], ok
}

// awaitCompletion waits up to d for a receive completion on flow and
// removes it.
func (p *peer) awaitCompletion(ctx context.Context, flow uint32, d time.Duration) (Completion, bool) {
	return p.awaitOp(ctx, flow, false, d)
}

// awaitOp waits up to d for a completion on flow of a send (send true) or
// receive and removes it.
func (p *peer) awaitOp(ctx context.Context, flow uint32, send bool, d time.Duration) (Completion, bool) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var c Completion
	ok := false
	p.wait(wctx, nil, func() bool {
		c, ok = p.takeOp(flow, send)
		return ok
	})
	return c, ok
}

// takeOp removes and returns the first completion on flow of a send (send
// true) or receive that the tester has drained from the IUT, without
// waiting; ok is false when there is none yet.
func (p *peer) takeOp(flow uint32, send bool) (c Completion, ok bool) {
	for i, c := range p.comps {
		if c.Flow == flow && c.Send == send {
			p.comps = append(p.comps[:i], p.comps[i+1:]...)
			return c, true
		}
	}
	return Completion{}, false
}

// connNack returns the first NACK the IUT addressed to this connection
// (dst_conn the tester's), whatever its reason, flow or token, so that a
// case judging the NACK its packet drew can name a wrong one rather than
// see none; ok is false while none has come.
func (p *peer) connNack() (n wire.Nack, ok bool) {
	for _, x := range p.nacks {
		if x.DstConn == p.localConn {
			return x, true
		}
	}
	return wire.Nack{}, false
}

// data builds one DATA segment of msg at offset, taking the next PSN unless
// psn is given (≥ 0).
func (p *peer) data(flow, msg uint32, msgLen uint64, off int, payload []byte, psn int64, fl wire.Flags) []byte {
	d := wire.Data{Header: p.hdr(wire.OpData), Flow: flow, Msg: msg, Offset: uint64(off), MsgLen: msgLen, Payload: payload}
	d.Flags = fl
	if psn >= 0 {
		d.PSN = wire.PSN(psn)
	} else {
		d.PSN = p.psn
		p.psn++
	}
	return d.Append(nil)
}
