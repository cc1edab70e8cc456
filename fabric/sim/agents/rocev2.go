package agents

import (
	"github.com/metaroce/metaroce/fabric/sim"
	"github.com/metaroce/metaroce/transport/rocev2"
)

// RoCEv2 runs a rocev2.Endpoint on a simulated host.
type RoCEv2 struct {
	EP *rocev2.Endpoint
}

// Receive implements sim.Transport: the payload placed is the length of
// the endpoint's placement.
func (r *RoCEv2) Receive(now int64, from, plane int, ecn sim.ECN, data []byte) int {
	pl := r.EP.HandleDatagram(now, uint32(from), uint8(plane), uint8(ecn), data)
	if !pl.OK {
		return 0
	}
	return pl.Len
}

// PollTransmit implements sim.Transport.
func (r *RoCEv2) PollTransmit(now int64, buf []byte) (sim.Tx, bool) {
	tx, ok := r.EP.PollTransmit(now, buf)
	if !ok {
		return sim.Tx{}, false
	}
	return sim.Tx{To: int(tx.Route.Remote), Plane: int(tx.Route.Plane), Entropy: tx.Route.Entropy,
		N: tx.N, PayloadLen: tx.PayloadLen}, true
}

// HandleTimeout implements sim.Transport.
func (r *RoCEv2) HandleTimeout(now int64) { r.EP.HandleTimeout(now) }

// NextTimeout implements sim.Transport.
func (r *RoCEv2) NextTimeout() int64 { return r.EP.NextTimeout() }

// Dial implements sim.Transport.
func (r *RoCEv2) Dial(now int64, remote int) (uint32, error) { return r.EP.Dial(now, uint32(remote)) }

// Send implements sim.Transport.
func (r *RoCEv2) Send(now int64, conn, flow uint32, length uint64, tag uint32, cookie uint64) error {
	return r.EP.Send(now, conn, flow, length, tag, cookie)
}

// PostRecv implements sim.Transport.
func (r *RoCEv2) PostRecv(now int64, conn, flow uint32, capacity uint64, tag uint32, cookie uint64) error {
	return r.EP.PostRecv(now, conn, flow, capacity, tag, cookie)
}

// PollEvent implements sim.Transport.
func (r *RoCEv2) PollEvent() (sim.Event, bool) {
	ev, ok := r.EP.PollEvent()
	if !ok {
		return sim.Event{}, false
	}
	return sim.Event{Kind: sim.EventKind(ev.Kind), Conn: ev.Conn, Remote: int(ev.Remote),
		Flow: ev.Flow, Cookie: ev.Cookie, Len: ev.Len, Err: ev.Err}, true
}
