package transporttest

import (
	"fmt"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/wire"
)

// guardLen is the number of guard bytes before and after each receive
// buffer; guardByte their value.
const (
	guardLen  = 64
	guardByte = 0xA5
)

// Node is one endpoint of the network with its driver state: registered
// send buffers, posted receive buffers and the events it produced.
type Node struct {
	Index int
	EP    *transport.Endpoint
	net   *Net

	txFree    transport.Time // the egress link is free from then
	txMore    bool           // the core produced a datagram at the last poll
	ingQueued int            // bytes in the ingress FIFO
	ingBusy   transport.Time // when the ingress FIFO is empty

	sendBufs   map[uint64][]byte
	recvBufs   map[uint64]*RecvBuffer
	nextCookie uint64
	flows      map[flowKey]*flowLog

	// Events holds every event the endpoint produced, in order.
	Events []transport.Event
	// Placed counts DATA payload bytes copied into receive buffers.
	Placed uint64
	// countOnly, when set, replaces copying: measurements with messages of
	// gigabytes count placed bytes per cookie and move none.
	countOnly func(cookie uint64, bytes int)
}

// RecvBuffer is a posted receive buffer with guard bytes on both sides.
type RecvBuffer struct {
	Cookie  uint64
	Conn    transport.ConnID
	Flow    uint32
	Cap     uint64
	Tag     uint32
	mem     []byte // guard, Cap bytes, guard
	placed  uint64
	Done    bool
	Len     uint64
	Err     error
	SendTag uint32
}

// Bytes returns the buffer's contents (Cap bytes).
func (b *RecvBuffer) Bytes() []byte { return b.mem[guardLen : guardLen+int(b.Cap)] }

func (b *RecvBuffer) guardsIntact() bool {
	for _, x := range b.mem[:guardLen] {
		if x != guardByte {
			return false
		}
	}
	for _, x := range b.mem[guardLen+int(b.Cap):] {
		if x != guardByte {
			return false
		}
	}
	return true
}

// QueueBytes returns the bytes waiting in the node's ingress queue.
func (nd *Node) QueueBytes() int { return nd.ingQueued }

// RecvBuf returns the posted receive buffer with cookie.
func (nd *Node) RecvBuf(cookie uint64) *RecvBuffer { return nd.recvBufs[cookie] }

// service polls the node's endpoint for datagrams while its egress link is
// free (at most one datagram waits on the link, like a NIC's short ring),
// then collects its events.
func (nd *Node) service() {
	n := nd.net
	ep := nd.EP
	for nd.txFree <= n.now {
		tx, ok := ep.PollTransmit(n.now, n.buf)
		nd.txMore = ok
		if !ok {
			break
		}
		if tx.N < wire.HeaderLen || tx.N > len(n.buf) {
			n.violate("node %d: PollTransmit wrote %d header bytes", nd.Index, tx.N)
			continue
		}
		data := make([]byte, tx.N, tx.N+tx.Payload.Len)
		copy(data, n.buf[:tx.N])
		if tx.Payload.Len > 0 {
			sb, ok := nd.sendBufs[tx.Payload.Cookie]
			end := tx.Payload.Offset + uint64(tx.Payload.Len)
			if nd.countOnly != nil {
				data = data[:tx.N+tx.Payload.Len] // content does not matter
				sb, ok = nil, true
			} else if !ok || end > uint64(len(sb)) || end < tx.Payload.Offset {
				n.violate("node %d: payload %d bytes at %d of send buffer %d (len %d, registered %v)",
					nd.Index, tx.Payload.Len, tx.Payload.Offset, tx.Payload.Cookie, len(sb), ok)
				continue
			}
			if sb != nil {
				data = append(data, sb[tx.Payload.Offset:end]...)
			}
		}
		if max := ep.Config().MaxDatagram; len(data) > max {
			n.violate("node %d: datagram of %d bytes exceeds MaxDatagram %d", nd.Index, len(data), max)
		}
		op := wire.PeekOpcode(data)
		p := &Packet{Src: nd.Index, Dst: int(tx.Route.Remote), Route: tx.Route, Op: op,
			Sequenced: op.Sequenced(), ECN: transport.ECT0, Data: data, Sent: n.now,
			wireLen: len(data) + n.cfg.WireOverhead}
		if p.Dst < 0 || p.Dst >= len(n.nodes) {
			n.violate("node %d: datagram to unknown remote %d", nd.Index, p.Dst)
			continue
		}
		departs := max(nd.txFree, n.now) + n.wireTime(p.wireLen)
		nd.txFree = departs
		n.launch(p, departs)
	}
	nd.collect()
}

// collect takes the endpoint's pending events.
func (nd *Node) collect() {
	ep := nd.EP
	for {
		ev, ok := ep.PollEvent()
		if !ok {
			break
		}
		nd.onEvent(ev)
	}
}

// place copies a placement into its receive buffer the way a plain driver
// would (copy at guard+Offset), after recording any bounds violation, so a
// core that placed outside the buffer is caught twice: by the bounds check
// and by the guards.
func (nd *Node) place(pl transport.Placement) {
	n := nd.net
	if nd.countOnly != nil {
		nd.Placed += uint64(len(pl.Payload))
		nd.countOnly(pl.Cookie, len(pl.Payload))
		if n.OnPlace != nil {
			n.OnPlace(nd.Index, n.now, len(pl.Payload))
		}
		return
	}
	b := nd.recvBufs[pl.Cookie]
	if b == nil {
		n.violate("node %d: placement into unknown receive cookie %d", nd.Index, pl.Cookie)
		return
	}
	if b.Done {
		n.violate("node %d: placement into completed receive %d", nd.Index, pl.Cookie)
	}
	end := pl.Offset + uint64(len(pl.Payload))
	if end > b.Cap || end < pl.Offset {
		n.violate("node %d: placement [%d,%d) outside receive %d of capacity %d", nd.Index, pl.Offset, end, pl.Cookie, b.Cap)
	}
	if pl.Offset+guardLen < uint64(len(b.mem)) {
		copy(b.mem[guardLen+pl.Offset:], pl.Payload)
	}
	b.placed += uint64(len(pl.Payload))
	nd.Placed += uint64(len(pl.Payload))
	if n.OnPlace != nil {
		n.OnPlace(nd.Index, n.now, len(pl.Payload))
	}
}

func (nd *Node) onEvent(ev transport.Event) {
	n := nd.net
	nd.Events = append(nd.Events, ev)
	switch ev.Kind {
	case transport.EvRecvDone:
		b := nd.recvBufs[ev.Cookie]
		if b == nil {
			n.violate("node %d: recv-done for unknown cookie %d", nd.Index, ev.Cookie)
			return
		}
		if b.Done {
			n.violate("node %d: second recv-done for cookie %d", nd.Index, ev.Cookie)
		}
		if !b.guardsIntact() {
			n.violate("node %d: guard bytes of receive %d overwritten", nd.Index, ev.Cookie)
		}
		if ev.Err == nil && b.placed > ev.Len {
			n.violate("node %d: receive %d placed %d bytes for a %d-byte message", nd.Index, ev.Cookie, b.placed, ev.Len)
		}
		b.Done, b.Len, b.Err, b.SendTag = true, ev.Len, ev.Err, ev.Tag
		nd.flow(ev.Conn, ev.Flow).recvDone = append(nd.flow(ev.Conn, ev.Flow).recvDone, ev.Cookie)
	case transport.EvSendDone:
		fl := nd.flow(ev.Conn, ev.Flow)
		fl.sendDone = append(fl.sendDone, ev.Cookie)
		fl.sendErr = append(fl.sendErr, ev.Err)
	}
}

func (nd *Node) flow(c transport.ConnID, f uint32) *flowLog {
	k := flowKey{c, f}
	fl := nd.flows[k]
	if fl == nil {
		fl = &flowLog{}
		nd.flows[k] = fl
	}
	return fl
}

// Send registers data as a send buffer and queues it on flow of conn; it
// returns the buffer's cookie.
func (n *Net) Send(node int, conn transport.ConnID, flow uint32, data []byte, tag uint32) (uint64, error) {
	nd := n.nodes[node]
	nd.nextCookie++
	ck := nd.nextCookie
	if err := nd.EP.Send(n.now, conn, flow, uint64(len(data)), tag, ck); err != nil {
		return 0, err
	}
	nd.sendBufs[ck] = data
	fl := nd.flow(conn, flow)
	fl.sends = append(fl.sends, sendRec{cookie: ck, data: data, tag: tag})
	return ck, nil
}

// RecvSpec is one buffer of a grouped receive.
type RecvSpec struct {
	Cap uint64
	Tag uint32
}

// PostRecv allocates guarded receive buffers and posts them as one group on
// flow of conn; it returns their cookies.
func (n *Net) PostRecv(node int, conn transport.ConnID, flow uint32, specs ...RecvSpec) ([]uint64, error) {
	nd := n.nodes[node]
	bufs := make([]transport.RecvBuf, len(specs))
	rbs := make([]*RecvBuffer, len(specs))
	for i, s := range specs {
		nd.nextCookie++
		mem := make([]byte, 2*guardLen+int(s.Cap))
		for j := range mem {
			mem[j] = guardByte
		}
		rbs[i] = &RecvBuffer{Cookie: nd.nextCookie, Conn: conn, Flow: flow, Cap: s.Cap, Tag: s.Tag, mem: mem}
		bufs[i] = transport.RecvBuf{Cap: s.Cap, Tag: s.Tag, Cookie: nd.nextCookie}
	}
	if err := nd.EP.PostRecv(n.now, conn, flow, bufs); err != nil {
		return nil, err
	}
	fl := nd.flow(conn, flow)
	cks := make([]uint64, len(specs))
	for i, b := range rbs {
		nd.recvBufs[b.Cookie] = b
		cks[i] = b.Cookie
	}
	fl.groups = append(fl.groups, cks)
	return cks, nil
}

// Connect dials from node a to node b and runs the network until both sides
// hold the connection; it returns a's and b's connection ids.
func (n *Net) Connect(a, b int) (transport.ConnID, transport.ConnID, error) {
	ca, err := n.nodes[a].EP.Dial(n.now, transport.RemoteID(b))
	if err != nil {
		return 0, 0, err
	}
	nb := n.nodes[b]
	from := len(nb.Events)
	var cb transport.ConnID
	connected := func() bool {
		ok := false
		for _, ev := range n.nodes[a].Events {
			if ev.Conn == ca && ev.Kind == transport.EvConnected {
				ok = true
			}
			if ev.Conn == ca && ev.Kind == transport.EvClosed {
				return true
			}
		}
		if cb == 0 {
			for _, ev := range nb.Events[from:] {
				if ev.Kind == transport.EvAccepted && ev.Remote == transport.RemoteID(a) {
					if _, taken := n.conns[connKey{b, ev.Conn}]; !taken {
						cb = ev.Conn
						break
					}
				}
			}
		}
		return ok && cb != 0
	}
	if err := n.RunUntil(connected, n.now+10*transport.Second); err != nil {
		return 0, 0, err
	}
	if cb == 0 {
		return 0, 0, fmt.Errorf("transporttest: dial %d→%d failed: %v", a, b, n.closedErr(a, ca))
	}
	n.conns[connKey{a, ca}] = connKey{b, cb}
	n.conns[connKey{b, cb}] = connKey{a, ca}
	return ca, cb, nil
}

// closedErr returns the error of conn's EvClosed at node, if any.
func (n *Net) closedErr(node int, c transport.ConnID) error {
	for _, ev := range n.nodes[node].Events {
		if ev.Conn == c && ev.Kind == transport.EvClosed {
			return ev.Err
		}
	}
	return nil
}

// Closed reports whether conn at node produced EvClosed, and its error.
func (n *Net) Closed(node int, c transport.ConnID) (bool, error) {
	for _, ev := range n.nodes[node].Events {
		if ev.Conn == c && ev.Kind == transport.EvClosed {
			return true, ev.Err
		}
	}
	return false, nil
}
