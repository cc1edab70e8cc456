package udp

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"syscall"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/auth"
	"github.com/metaroce/metaroce/transport/udp/sockio"
	"github.com/metaroce/metaroce/transport/wire"
)

const (
	// txSlots is the number of 64 KiB send buffers: datagrams (or GSO runs
	// of datagrams) queued before the batch is flushed to the kernel.
	txSlots = 64
	// txBudget bounds the datagrams produced per loop iteration, so that
	// received ACKs are processed between bursts.
	txBudget = 256
	// gsoLimit is the most bytes one GSO send may carry (an IPv4 datagram's
	// 65535 bytes less the IP and UDP headers).
	gsoLimit = 65535 - 20 - 8
	// blockedRetries bounds how often a flush waits (1 ms each) for a
	// socket that refuses data with EAGAIN before dropping the rest.
	blockedRetries = 100
)

// txQueue is the pending batch of one socket.
type txQueue struct {
	msgs []sockio.Msg
}

// txState holds the send buffers and the per-socket batches.
type txState struct {
	scratch []byte // PollTransmit writes here
	slots   [][]byte
	used    int
	queues  []txQueue
	dirty   []int32
	now     transport.Time // the time transmit asked the core at
	// noGSO holds the destinations whose route refused a GSO send for its
	// segment size (a route MTU below the interface's): their datagrams
	// leave one by one, which the kernel fragments where it must. It is
	// cleared when it reaches maxNoGSO entries.
	noGSO map[netip.AddrPort]struct{}
	// sendErrs counts refused sends, one per event (not per segment), to
	// throttle their log lines; sealErrs counts datagrams that could not be
	// sealed, likewise.
	sendErrs, sealErrs uint64
}

// maxNoGSO bounds txState.noGSO.
const maxNoGSO = 4096

func (t *txState) init(nsocks, maxDatagram int) {
	const slot = 1 << 16
	t.scratch = make([]byte, max(maxDatagram, 1<<16))
	back := make([]byte, txSlots*slot)
	t.slots = make([][]byte, txSlots)
	for i := range t.slots {
		t.slots[i] = back[i*slot : (i+1)*slot : (i+1)*slot]
	}
	t.queues = make([]txQueue, nsocks)
	for i := range t.queues {
		t.queues[i].msgs = make([]sockio.Msg, 0, txSlots)
	}
	t.dirty = make([]int32, 0, nsocks)
	t.noGSO = make(map[netip.AddrPort]struct{})
}

// transmit moves the core's datagrams to the sockets. It returns how many it
// produced and whether the budget ran out (more may be waiting).
//
// It asks the core at the time of the pass, not at now, the time its caller
// took earlier in the turn: what ran since may have called the core with a
// later time (a refusal's Close, made while the turn drains the events of
// its reads), and a poll at an earlier time than that found the CLOSE not
// yet due, so the refusal waited for another turn. The DATA it releases are
// stamped with that time too, which is then no older than the pass.
func (e *Endpoint) transmit(now transport.Time) (int, bool) {
	now = max(now, e.now())
	e.tx.now = now
	n := 0
	for n < txBudget {
		tx, ok := e.core.PollTransmit(now, e.tx.scratch)
		if !ok {
			break
		}
		n++
		if len(e.laterRefuse) > 0 && e.holdRefusedAck(&tx) {
			continue
		}
		e.queue(&tx)
	}
	e.flush()
	return n, n == txBudget
}

// heldDatagram is a sealed datagram kept back from a transmit pass: the
// HELLO_ACK of a connection being refused, which must leave after the
// CLOSE (see refuse).
type heldDatagram struct {
	conn transport.ConnID
	tag  int            // the socket it leaves from
	dst  netip.AddrPort // zero when it could not be routed (dropped)
	data []byte
}

// holdRefusedAck keeps back the HELLO_ACK in e.tx.scratch when it belongs
// to a connection in laterRefuse, and reports whether it did. It is sealed
// at once, since sealing it gives this side the keys that the CLOSE
// refusing the connection is sealed with; sendHeld sends it after that
// CLOSE. One that cannot be routed is counted as queue counts it and held
// empty, so that the refusal still goes ahead.
func (e *Endpoint) holdRefusedAck(tx *transport.Transmit) bool {
	b := e.tx.scratch[:tx.N]
	if e.auth == nil || len(b) < wire.HeaderLen+4 || wire.PeekOpcode(b) != wire.OpHelloAck {
		return false
	}
	// src_conn, right after the header, is the connection's id here.
	id := transport.ConnID(binary.BigEndian.Uint32(b[wire.HeaderLen:]))
	if !slices.Contains(e.laterRefuse, id) {
		return false
	}
	h := heldDatagram{conn: id}
	if tag, dst, ok := e.route(tx); ok {
		s, err := e.auth.Seal(make([]byte, 0, len(b)+auth.Overhead), b)
		if err != nil {
			e.counters.txDrops.Add(1)
			e.tx.sealErrs++
			e.authErrorf(e.tx.sealErrs, err, "sealing: %v", err)
		} else {
			h.tag, h.dst, h.data = tag, dst, s
		}
	}
	e.heldAcks = append(e.heldAcks, h)
	return true
}

// sendHeld sends the datagrams holdRefusedAck kept back for connections
// no longer in laterRefuse (those whose CLOSE has left) and forgets them.
func (e *Endpoint) sendHeld() {
	keep := e.heldAcks[:0]
	for _, h := range e.heldAcks {
		if slices.Contains(e.laterRefuse, h.conn) {
			keep = append(keep, h)
			continue
		}
		if h.data == nil {
			continue
		}
		m := e.newMsg(h.tag, h.dst)
		m.N = copy(m.Buf, h.data)
	}
	clear(e.heldAcks[len(keep):])
	e.heldAcks = keep
	e.flush()
}

// newMsg appends an empty datagram to dst on the socket tag to this turn's
// queue, in the next free send slot (flushing first when none is left),
// and returns it.
func (e *Endpoint) newMsg(tag int, dst netip.AddrPort) *sockio.Msg {
	if e.tx.used == len(e.tx.slots) {
		e.flush()
	}
	q := &e.tx.queues[tag]
	if len(q.msgs) == 0 {
		e.tx.dirty = append(e.tx.dirty, int32(tag))
	}
	q.msgs = append(q.msgs, sockio.Msg{Buf: e.tx.slots[e.tx.used], Addr: dst})
	e.tx.used++
	return &q.msgs[len(q.msgs)-1]
}

// heldAck reports whether the HELLO_ACK of connection id is held.
func (e *Endpoint) heldAck(id transport.ConnID) bool {
	for _, h := range e.heldAcks {
		if h.conn == id {
			return true
		}
	}
	return false
}

// route picks the socket and destination of tx, or counts it dropped:
// for a route outside this endpoint's planes and ports, a fault the
// configuration injects, or a peer with no address the plane's socket
// can send to.
func (e *Endpoint) route(tx *transport.Transmit) (tag int, dst netip.AddrPort, ok bool) {
	ports := e.cfg.PortsPerPlane
	plane, ent := int(tx.Route.Plane), int(tx.Route.Entropy)
	if plane >= len(e.addrs) || ent >= ports {
		e.counters.txDrops.Add(1)
		return 0, dst, false
	}
	if e.black[ent] || (e.cfg.DropProb > 0 && e.dropRng.Float64() < e.cfg.DropProb) {
		e.counters.faultDrops.Add(1)
		return 0, dst, false
	}
	dst, ok = e.peers.dest(tx.Route.Remote, plane)
	if !ok || dst.Addr().Is6() != e.addrs[plane].Addr().Is6() {
		// No address, or one the plane's socket cannot send to (a
		// source address of the other family): dropped like a loss.
		e.counters.txDrops.Add(1)
		return 0, dst, false
	}
	return plane*ports + ent, dst, true
}

// queue copies one datagram (header and payload) into a send buffer of the
// socket its route names, appending it to the previous datagram of that
// socket as a GSO segment where possible.
func (e *Endpoint) queue(tx *transport.Transmit) {
	tag, dst, ok := e.route(tx)
	if !ok {
		return
	}
	var payload []byte
	if pr := tx.Payload; pr.Len > 0 {
		r := e.sendOps[pr.Cookie]
		if r == nil || pr.Offset+uint64(pr.Len) > uint64(len(r.send)) {
			e.counters.txDrops.Add(1) // cannot happen: the core sends only live messages
			return
		}
		payload = r.send[pr.Offset : pr.Offset+uint64(pr.Len)]
	}
	size := tx.N + len(payload)
	if e.auth != nil {
		size += auth.Overhead
	}
	q := &e.tx.queues[tag]
	gso := e.socks[tag].GSO()
	if gso && len(e.tx.noGSO) > 0 {
		_, refused := e.tx.noGSO[dst]
		gso = !refused
	}
	if k := len(q.msgs); k > 0 && gso {
		m := &q.msgs[k-1]
		if m.Addr == dst && canAppend(m, size) {
			if m.Seg == 0 {
				m.Seg = m.N
			}
			e.put(m, tx.N, payload)
			return
		}
	}
	m := e.newMsg(tag, dst)
	defer func() {
		if m.N == 0 && m.Tail == nil && size > 0 {
			// put refused to seal it: send no empty datagram.
			q.msgs = q.msgs[:len(q.msgs)-1]
			e.tx.used--
		}
	}()
	if len(payload) > 0 && e.auth == nil && (2*size > gsoLimit || !gso) {
		// No second segment could join this datagram: let the kernel
		// gather the payload from the message itself instead of copying
		// it next to the header. The message stays lent until its send
		// completes, which is after this turn's flush.
		e.put(m, tx.N, nil)
		m.Tail = payload
		return
	}
	e.put(m, tx.N, payload)
}

// canAppend reports whether a datagram of size bytes may extend m as one more
// GSO segment: every segment but the last has m's segment size, and the run
// stays within the kernel's limits.
func canAppend(m *sockio.Msg, size int) bool {
	if len(m.Tail) > 0 {
		return false
	}
	seg := m.Seg
	if seg == 0 {
		seg = m.N
	}
	return m.N%seg == 0 && size <= seg && m.N/seg < sockio.MaxSegments && m.N+size <= gsoLimit
}

// put appends header scratch[:hdr] and payload to m's buffer, sealed when
// the endpoint authenticates (a sealed datagram cannot leave as a gathered
// tail, so queue never lends payloads then).
func (e *Endpoint) put(m *sockio.Msg, hdr int, payload []byte) {
	n := copy(m.Buf[m.N:], e.tx.scratch[:hdr])
	n += copy(m.Buf[m.N+n:], payload)
	if e.auth != nil {
		s, err := e.auth.Seal(m.Buf[m.N:m.N], m.Buf[m.N:m.N+n])
		if err != nil {
			// Dropped like a loss on the wire; the core recovers it.
			e.counters.txDrops.Add(1)
			e.tx.sealErrs++
			e.authErrorf(e.tx.sealErrs, err, "sealing: %v", err)
			return
		}
		n = len(s)
	}
	m.N += n
}

// authErrorf logs an authentication failure, the n-th of its kind: the
// first few and then one in 1024, so that a misconfigured peer cannot flood
// the log. Only the failures a different secret causes carry the hint
// about METAROCE_SECRET; a missing key or a replay is what late packets of
// a closed connection meet.
func (e *Endpoint) authErrorf(n uint64, err error, format string, args ...any) {
	if n > 8 && n%1024 != 0 {
		return
	}
	hint := ""
	if err == nil || errors.Is(err, auth.ErrTag) || errors.Is(err, auth.ErrUnsealed) {
		hint = " (every rank needs the same METAROCE_SECRET)"
	}
	e.logf("udp: authentication: "+format+hint, args...)
}

// flush hands every pending batch to the kernel and frees the send buffers.
// A socket that refuses data (EAGAIN) is waited for, up to blockedRetries
// milliseconds; a datagram the kernel rejects is counted and skipped, like a
// loss on the wire.
func (e *Endpoint) flush() {
	for _, tag := range e.tx.dirty {
		q := &e.tx.queues[tag]
		s := e.socks[tag]
		msgs := q.msgs
		sent := 0
		for tries := 0; len(msgs) > 0; {
			n, err := s.WriteBatch(msgs)
			for _, m := range msgs[:n] {
				sent += m.Segments()
			}
			if e.txTap != nil {
				e.tapSent(msgs[:n])
			}
			msgs = msgs[n:]
			if err == nil {
				break
			}
			if errors.Is(err, sockio.ErrWouldBlock) {
				if tries++; tries > blockedRetries {
					e.logf("udp: socket %v stayed full; dropping %d datagrams", s.LocalAddr(), len(msgs))
					e.counters.txDrops.Add(uint64(len(msgs)))
					break
				}
				s.WaitWritable(1)
				continue
			}
			if errors.Is(err, sockio.ErrGSORefused) {
				// The route's MTU is below this message's segments:
				// send them one by one (the kernel fragments a single
				// datagram where a GSO send is refused), and stop
				// coalescing for this destination.
				e.refuseGSO(msgs[0].Addr, err)
				msgs = append(splitSegments(&msgs[0]), msgs[1:]...)
				continue
			}
			e.counters.sendErrors.Add(uint64(msgs[0].Segments()))
			e.sendErrorf(msgs[0].Addr, err)
			msgs = msgs[1:]
		}
		e.counters.txDatagrams.Add(uint64(sent))
		clear(q.msgs)
		q.msgs = q.msgs[:0]
	}
	e.tx.dirty = e.tx.dirty[:0]
	e.tx.used = 0
}

// tapSent shows sent messages to txTap, with the time at which the core
// released them: a batch must hold only what the core released at that
// instant.
func (e *Endpoint) tapSent(msgs []sockio.Msg) {
	for i := range msgs {
		m := &msgs[i]
		e.txTap(e.tx.now, m.Buf[:m.N], m.Segments(), m.N+len(m.Tail))
	}
}

// sendErrorf logs a refused send: the first, then one in 1024.
func (e *Endpoint) sendErrorf(dst netip.AddrPort, err error) {
	e.tx.sendErrs++
	if e.tx.sendErrs%1024 == 1 {
		hint := ""
		if errors.Is(err, syscall.EMSGSIZE) {
			hint = " (a datagram larger than the path allows: lower the maximum datagram size)"
		}
		e.logf("udp: send to %v: %v%s (%d refused sends so far)", dst, err, hint, e.tx.sendErrs)
	}
}

// refuseGSO records that dst's route refused a GSO send, and says so once.
func (e *Endpoint) refuseGSO(dst netip.AddrPort, err error) {
	if _, ok := e.tx.noGSO[dst]; ok {
		return
	}
	if len(e.tx.noGSO) >= maxNoGSO {
		clear(e.tx.noGSO)
	}
	e.tx.noGSO[dst] = struct{}{}
	e.logf("udp: %v refused coalesced datagrams (%v); sending to it one datagram at a time", dst, err)
}

// splitSegments returns m's segments as single-datagram messages that share
// m's buffer. It allocates, on a path taken once per destination.
func splitSegments(m *sockio.Msg) []sockio.Msg {
	n := m.Segments()
	out := make([]sockio.Msg, n)
	for i := range n {
		seg := m.Segment(i)
		out[i] = sockio.Msg{Buf: seg, N: len(seg), Addr: m.Addr}
	}
	return out
}
