package conformance_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/transport/wire"
	"golang.org/x/sys/unix"
)

// fakeIUT is a deliberately small receiver written with the wire package
// alone: one connection at a time, one path, one-buffer receives. With
// wrongSack set it reports PSN cum+2 as received in every ACK, which the
// sack case must catch.
type fakeIUT struct {
	wrongSack bool
	sw        fakeSwitches
	tx        *fakeSender

	sock     *net.UDPConn
	comps    chan conformance.Completion
	accepted chan struct{}
	done     chan struct{}
	wg       sync.WaitGroup

	mu       sync.Mutex
	peer     *net.UDPAddr
	peerConn uint32
	peerTok  uint64
	seg      int
	conns    int // connections accepted so far
	txPSN    wire.PSN
	cum      wire.PSN
	got      map[wire.PSN]bool
	recvs    map[uint32]*fakeRecv
	nextMsg  map[uint32]uint32
	aborted  map[uint32]bool // flows the peer aborted
	ce       bool            // the datagram being handled carried CE
	ceCount  uint32          // CE-marked DATA received on the tester's path 0
	// afterNack is a failed receive's completion held back until the
	// tester acknowledges PSN nackPSN, the NACK that answered it
	// (oversizeNackFirst); lateNack is a NACK held back until the tester
	// has taken every completion (oversizeNackLast), and, when lateFor
	// is set, until that receive has completed too (placementNackLast).
	afterNack *conformance.Completion
	nackPSN   wire.PSN
	lateNack  []byte
	lateFor   *fakeRecv
}

// fakeRecv is one posted receive of the fake. Its message is started by
// the first DATA placed, which sets msgLen (spec §3.4).
type fakeRecv struct {
	msg     uint32
	buf     []byte
	chunks  map[uint64]bool // offsets of the segments placed
	started bool
	msgLen  uint64
}

const (
	fakeConn = 0x1234
	fakeTok  = 0x0badc0ffee
)

func newFakeIUT(wrongSack bool) (*fakeIUT, error) { return newFakeWith(wrongSack, fakeSwitches{}) }

func newFakeWith(wrongSack bool, sw fakeSwitches) (*fakeIUT, error) {
	s, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	if rc, err := s.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1) })
	}
	// Room for the ACKs of a whole restart window: one lost would make
	// the tail-loss timer resend data the tester already has.
	s.SetReadBuffer(4 << 20)
	f := &fakeIUT{wrongSack: wrongSack, sw: sw, sock: s, comps: make(chan conformance.Completion, 16),
		accepted: make(chan struct{}, 16), done: make(chan struct{})}
	f.wg.Add(1)
	go f.loop()
	return f, nil
}

func (f *fakeIUT) Close() {
	close(f.done)
	f.sock.Close()
	f.wg.Wait()
	if f.tx != nil {
		f.tx.close()
	}
}

func (f *fakeIUT) ListenAddr() netip.AddrPort {
	return netip.MustParseAddrPort(f.sock.LocalAddr().String())
}

func (f *fakeIUT) Accept(ctx context.Context) error {
	select {
	case <-f.accepted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeIUT) PostRecv(_ context.Context, flow uint32, caps []uint64, tags []uint32) error {
	if len(caps) != 1 {
		return errors.New("fake IUT takes one buffer per receive")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.peer == nil {
		return errors.New("fake IUT: no connection")
	}
	buf := make([]byte, caps[0])
	for i := range buf {
		buf[i] = conformance.GuardByte
	}
	r := &fakeRecv{msg: f.nextMsg[flow], buf: buf, chunks: map[uint64]bool{}}
	f.nextMsg[flow]++
	f.recvs[flow] = r
	rr := wire.RecvReady{Header: f.hdr(wire.OpRecvReady), Flow: flow, Msg: r.msg, N: 1}
	rr.PSN = f.txPSN
	f.txPSN++
	rr.Entries[0] = wire.RecvEntry{Capacity: caps[0], Tag: tags[0]}
	_, err := f.sock.WriteToUDP(rr.Append(nil), f.peer)
	return err
}

func (f *fakeIUT) Send(_ context.Context, flow uint32, data []byte, tag uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tx == nil {
		return errors.New("fake IUT: no connection")
	}
	f.tx.queueSend(flow, data, tag)
	return nil
}

func (f *fakeIUT) Completions() <-chan conformance.Completion { return f.comps }

func (f *fakeIUT) hdr(op wire.Opcode) wire.Header {
	return wire.Header{Op: op, DstConn: f.peerConn, Token: f.peerTok}
}

func (f *fakeIUT) loop() {
	defer f.wg.Done()
	b := make([]byte, 65536)
	oob := make([]byte, 256)
	for {
		select {
		case <-f.done:
			return
		default:
		}
		f.sock.SetReadDeadline(time.Now().Add(500 * time.Microsecond))
		n, oobn, _, from, err := f.sock.ReadMsgUDP(b, oob)
		f.mu.Lock()
		if err == nil {
			f.ce = ceOf(oob[:oobn])
			f.handle(b[:n], from)
		}
		if f.tx != nil {
			f.tx.tick(time.Now())
		}
		// Empty, the channel has handed every completion to the
		// tester, which records it before it reads the socket again.
		if f.lateNack != nil && len(f.comps) == 0 && !f.posted(f.lateFor) {
			f.sock.WriteToUDP(f.lateNack, f.peer)
			f.lateNack, f.lateFor = nil, nil
		}
		f.mu.Unlock()
	}
}

func (f *fakeIUT) handle(b []byte, from *net.UDPAddr) {
	var h wire.Header
	if _, err := wire.ParseHeader(&h, b); err != nil {
		return
	}
	if h.Op == wire.OpHello {
		var hl wire.Hello
		if _, err := wire.ParseHello(&hl, b); err != nil {
			return
		}
		fresh := f.peer == nil || f.peerConn != hl.SrcConn
		f.peer, f.peerConn, f.peerTok = from, hl.SrcConn, hl.SrcTok
		f.seg = int(min(1200, hl.MaxDgram)) - wire.DataHeaderLen
		if fresh {
			if f.tx != nil {
				f.tx.close()
			}
			f.conns++
			f.tx = newFakeSender(f, f.sw, f.conns)
			f.txPSN, f.cum, f.got, f.ceCount = 0, 0, map[wire.PSN]bool{}, 0
			f.recvs, f.nextMsg, f.aborted = map[uint32]*fakeRecv{}, map[uint32]uint32{}, map[uint32]bool{}
			f.afterNack, f.lateNack, f.lateFor = nil, nil, nil
			f.accepted <- struct{}{}
		}
		ack := wire.Hello{Header: f.hdr(wire.OpHelloAck), SrcConn: fakeConn, SrcTok: fakeTok, Planes: 1, Paths: 1, MaxDgram: 1200}
		f.sock.WriteToUDP(ack.Append(nil), from)
		return
	}
	if h.DstConn != fakeConn {
		if h.Op.Sequenced() {
			nk := wire.Nack{Header: wire.Header{Token: h.Token}, Reason: wire.NackUnknownConn, Value: uint64(h.DstConn)}
			if f.sw.unknownConnNotReady {
				nk.Reason = wire.NackNotReady
			}
			f.sock.WriteToUDP(nk.Append(nil), from)
		}
		return
	}
	if (h.Token != fakeTok && !f.sw.acceptBadToken) || f.peer == nil {
		if f.sw.nackBadToken && h.Op.Sequenced() {
			nk := wire.Nack{Header: wire.Header{Token: h.Token}, Reason: wire.NackUnknownConn, Value: uint64(h.DstConn)}
			f.sock.WriteToUDP(nk.Append(nil), from)
		}
		return
	}
	switch h.Op {
	case wire.OpClose:
		c := wire.Close{Header: f.hdr(wire.OpClose)}
		c.Flags = wire.FlagReply
		f.sock.WriteToUDP(c.Append(nil), f.peer)
	case wire.OpAck:
		var a wire.Ack
		if _, err := wire.ParseAck(&a, b); err == nil {
			f.tx.onAck(&a, time.Now())
			for _, r := range a.Records[:a.N] {
				if f.afterNack != nil && r.Path == 0 && f.nackPSN.Less(r.Cum) {
					f.comps <- *f.afterNack
					f.afterNack = nil
				}
			}
		}
	case wire.OpRecvReady:
		var r wire.RecvReady
		if _, err := wire.ParseRecvReady(&r, b); err == nil {
			f.got[r.PSN] = true
			for f.got[f.cum] {
				f.cum++
			}
			f.ack()
			f.tx.onRecvReady(&r)
		}
	case wire.OpNack:
		var n wire.Nack
		if _, err := wire.ParseNack(&n, b); err != nil {
			return
		}
		f.got[n.PSN] = true
		for f.got[f.cum] {
			f.cum++
		}
		f.ack()
		if n.Reason == wire.NackFlowAborted && !f.aborted[n.Flow] && !f.sw.ignoreAbort {
			f.aborted[n.Flow] = !f.sw.placeAfterAbort
			if r := f.recvs[n.Flow]; r != nil {
				if !f.sw.placeAfterAbort {
					delete(f.recvs, n.Flow)
				}
				f.comps <- conformance.Completion{Flow: n.Flow, Bufs: [][]byte{snapshot(r.buf)}, Err: "the peer aborted the flow"}
			}
		}
	case wire.OpData:
		var d wire.Data
		if _, err := wire.ParseData(&d, b); err != nil {
			return
		}
		if f.ce && !f.sw.ignoreCE {
			f.ceCount++
		}
		if f.sw.silentDuplicate && (f.got[d.PSN] || d.PSN.Less(f.cum)) {
			return
		}
		f.got[d.PSN] = true
		for f.got[f.cum] {
			f.cum++
		}
		f.place(&d)
		f.ack()
	}
}

// place writes d into its receive, once per segment, after the checks of
// spec §3.4 in the reference datapath's order: the buffer index, the DATA's
// form against its own length where it would start the message (a
// malformed one starts nothing), the first DATA's length against the
// capacity, the DATA's agreement with its message, then duplicates.
func (f *fakeIUT) place(d *wire.Data) {
	if f.aborted[d.Flow] {
		return
	}
	r := f.recvs[d.Flow]
	if r == nil && f.nextMsg[d.Flow] <= d.Msg {
		nk := wire.Nack{Header: f.hdr(wire.OpNack), Reason: wire.NackNotReady, Flow: d.Flow, Msg: d.Msg, Value: d.Offset}
		nk.PSN = f.txPSN
		if f.sw.notReadyBadToken {
			nk.Token ^= 1
		}
		f.txPSN++
		f.sock.WriteToUDP(nk.Append(nil), f.peer)
		return
	}
	if r == nil || r.msg != d.Msg {
		return
	}
	if d.Index != 0 { // the fake posts one buffer per receive
		f.badPlacement(d, r)
		return
	}
	if !r.started {
		if f.sw.boundsByOffset && d.Offset < uint64(len(r.buf)) {
			copy(r.buf[d.Offset:], d.Payload)
		}
		oversize := d.MsgLen > uint64(len(r.buf))
		if oversize && f.sw.firstData == firstDataLengthFirst {
			f.failOversizeRecv(d, r)
			return
		}
		if !f.wellFormed(d, d.MsgLen) {
			if f.sw.firstData == firstDataStarts {
				r.started, r.msgLen = true, d.MsgLen
			}
			f.badPlacement(d, r)
			return
		}
		if oversize {
			f.failOversizeRecv(d, r)
			return
		}
		r.started, r.msgLen = true, d.MsgLen
	}
	if !f.agrees(r, d) {
		f.badPlacement(d, r)
		return
	}
	if r.chunks[d.Offset] {
		return
	}
	f.placeSegment(r, d)
}

// agrees reports whether d fits the message r has started (spec §3.4): the
// same length, an offset on a segment boundary inside the message, exactly
// that segment's payload, and nothing past the capacity.
func (f *fakeIUT) agrees(r *fakeRecv, d *wire.Data) bool {
	return d.MsgLen == r.msgLen && f.wellFormed(d, r.msgLen) && d.Offset+uint64(len(d.Payload)) <= uint64(len(r.buf))
}

// wellFormed reports whether d is a segment of a message of length l: an
// offset on a segment boundary inside the message and exactly that
// segment's payload.
func (f *fakeIUT) wellFormed(d *wire.Data, l uint64) bool {
	seg := uint64(f.seg)
	if d.Offset%seg != 0 || (d.Offset >= l && l != 0) {
		return false
	}
	return uint64(len(d.Payload)) == min(seg, l-d.Offset)
}

// placeSegment writes what fits of d's payload into r, counts its segment,
// and completes r when every segment of its message is in.
func (f *fakeIUT) placeSegment(r *fakeRecv, d *wire.Data) {
	r.chunks[d.Offset] = true
	if d.Offset < uint64(len(r.buf)) {
		copy(r.buf[d.Offset:], d.Payload)
		if f.sw.overCopy {
			clear(r.buf[min(uint64(len(r.buf)), d.Offset+uint64(len(d.Payload))):min(uint64(len(r.buf)), d.Offset+uint64(f.seg))])
		}
	}
	segs := max(1, (r.msgLen+uint64(f.seg)-1)/uint64(f.seg)) // a zero-byte message is one empty DATA
	if uint64(len(r.chunks)) == segs {
		delete(f.recvs, d.Flow)
		f.comps <- conformance.Completion{Flow: d.Flow, Sizes: []int{int(r.msgLen)}, Bufs: [][]byte{snapshot(r.buf)}}
	}
}

// badPlacement answers DATA d that spec §3.4 drops as a bad placement in
// receive r: a NACK BAD_OFFSET with d's offset, r left posted, as the
// switch placement orders or breaks it.
func (f *fakeIUT) badPlacement(d *wire.Data, r *fakeRecv) {
	if f.sw.placement == placementFails {
		// The failed completion is queued before the NACK leaves, so
		// that the tester, which looks for a completion before a NACK,
		// sees it with the DATA that caused it, whatever the timing.
		delete(f.recvs, d.Flow)
		f.comps <- conformance.Completion{Flow: d.Flow, Bufs: [][]byte{snapshot(r.buf)}, Err: "DATA disagrees with its message"}
	}
	if f.sw.placement != placementNone {
		nk := wire.Nack{Header: f.hdr(wire.OpNack), Reason: wire.NackBadOffset, Flow: d.Flow, Msg: d.Msg, Index: d.Index, Value: d.Offset}
		if f.sw.placement == placementValueLen {
			nk.Value = d.MsgLen
		}
		nk.PSN = f.txPSN
		f.txPSN++
		if f.sw.placement == placementNackLast {
			f.lateNack, f.lateFor = nk.Append(nil), r
		} else {
			f.sock.WriteToUDP(nk.Append(nil), f.peer)
		}
	}
	switch f.sw.placement {
	case placementWrites:
		if !r.chunks[d.Offset] {
			f.placeSegment(r, d)
		}
	}
}

// posted reports whether r is one of the fake's posted receives (false for
// nil).
func (f *fakeIUT) posted(r *fakeRecv) bool {
	if r == nil {
		return false
	}
	for _, x := range f.recvs {
		if x == r {
			return true
		}
	}
	return false
}

// failOversizeRecv fails receive r, whose first DATA d names a message
// longer than its buffer: r is no longer posted, and its completion carries
// the buffer as it is.
func (f *fakeIUT) failOversizeRecv(d *wire.Data, r *fakeRecv) {
	delete(f.recvs, d.Flow)
	f.failOversize(d, conformance.Completion{Flow: d.Flow, Bufs: [][]byte{snapshot(r.buf)}, Err: "message larger than the posted buffer"})
}

// failOversize fails the receive that DATA d of a message longer than its
// buffer reached, with completion c, and answers d with a NACK BAD_OFFSET
// whose value is the message's length (spec §3.4), as the switch
// oversizeNack orders or breaks it.
func (f *fakeIUT) failOversize(d *wire.Data, c conformance.Completion) {
	if f.sw.oversizeNack == oversizeNone {
		f.comps <- c
		return
	}
	nk := wire.Nack{Header: f.hdr(wire.OpNack), Reason: wire.NackBadOffset, Flow: d.Flow, Msg: d.Msg, Index: d.Index, Value: d.MsgLen}
	nk.PSN = f.txPSN
	f.txPSN++
	switch f.sw.oversizeNack {
	case oversizeTooLarge:
		nk.Reason = wire.NackTooLarge
	case oversizeOffset:
		nk.Value = d.Offset
	}
	switch f.sw.oversizeNack {
	case oversizeNackFirst:
		f.afterNack, f.nackPSN = &c, nk.PSN
	case oversizeNackLast:
		f.comps <- c
		f.lateNack = nk.Append(nil)
		return
	default:
		f.comps <- c
	}
	f.sock.WriteToUDP(nk.Append(nil), f.peer)
}

// ack sends the path-0 record: cum and the SACK bitmap of what lies beyond.
func (f *fakeIUT) ack() {
	a := wire.Ack{Header: f.hdr(wire.OpAck), N: 1}
	rec := &a.Records[0]
	rec.Cum = f.cum
	rec.CE = f.ceCount
	for p := range f.got {
		if d := p.Diff(f.cum); d > 0 {
			rec.Sack.Set(int(d) - 1)
		}
	}
	if f.wrongSack && rec.Sack.Count() > 0 {
		rec.Sack.Set(1)
	}
	f.sock.WriteToUDP(a.Append(nil), f.peer)
}

// ceOf reports whether the control messages of a received datagram carry
// the ECN codepoint CE.
func ceOf(oob []byte) bool {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) > 0 {
			return m.Data[0]&3 == 3
		}
	}
	return false
}

// snapshot is a completed receive's buffer as the tester gets it: a copy
// taken at completion, as a process IUT's completions carry its bytes. The
// fake's loop goroutine may go on writing into its own buffer (a switch
// that places after an abort does), and only the sockets order those
// writes after the tester's reads, which the race detector does not see.
func snapshot(buf []byte) []byte { return append([]byte(nil), buf...) }
