package agents

import (
	"math/rand/v2"

	"github.com/metaroce/metaroce/fabric/sim"
	"github.com/metaroce/metaroce/transport"
)

// MetaRoCE runs a transport.Endpoint on a simulated host.
type MetaRoCE struct {
	EP    *transport.Endpoint
	one   [1]transport.RecvBuf
	bound int // the configured ConcurrentSenders (0: none)
}

// NewMetaRoCE returns the adapter around a new endpoint, or transport.New's
// *transport.ConfigError, naming the field, when cfg is out of range: an
// endpoint built from it would connect to nobody, and the run would only
// show stalled or failed dials.
func NewMetaRoCE(cfg transport.Config, rng *rand.Rand) (*MetaRoCE, error) {
	ep, err := transport.New(cfg, rng)
	if err != nil {
		return nil, err
	}
	return &MetaRoCE{EP: ep, bound: cfg.ConcurrentSenders}, nil
}

// Receive implements sim.Transport. Only the placement's length is kept:
// the simulator moves no payload bytes.
func (m *MetaRoCE) Receive(now int64, from, plane int, ecn sim.ECN, data []byte) int {
	pl := m.EP.HandleDatagram(transport.Time(now), transport.Datagram{
		From: transport.RemoteID(from), Plane: uint8(plane), ECN: transport.ECN(ecn), Data: data})
	if !pl.OK {
		return 0
	}
	return len(pl.Payload)
}

// PollTransmit implements sim.Transport.
func (m *MetaRoCE) PollTransmit(now int64, buf []byte) (sim.Tx, bool) {
	tx, ok := m.EP.PollTransmit(transport.Time(now), buf)
	if !ok {
		return sim.Tx{}, false
	}
	return sim.Tx{To: int(tx.Route.Remote), Plane: int(tx.Route.Plane), Entropy: tx.Route.Entropy,
		N: tx.N, PayloadLen: tx.Payload.Len}, true
}

// ExpectSenders declares that at most k peers send to the host at once
// from now on, as the collectives' executor does before each plan over the
// UDP endpoint (collectives.metaroceLink): at most the ConcurrentSenders the
// endpoint was configured with, and at least 1.
func (m *MetaRoCE) ExpectSenders(k int) {
	if m.bound > 0 {
		k = min(k, m.bound)
	}
	m.EP.SetConcurrentSenders(max(k, 1))
}

// HandleTimeout implements sim.Transport.
func (m *MetaRoCE) HandleTimeout(now int64) { m.EP.HandleTimeout(transport.Time(now)) }

// NextTimeout implements sim.Transport.
func (m *MetaRoCE) NextTimeout() int64 { return int64(m.EP.NextTimeout()) }

// Dial implements sim.Transport.
func (m *MetaRoCE) Dial(now int64, remote int) (uint32, error) {
	id, err := m.EP.Dial(transport.Time(now), transport.RemoteID(remote))
	return uint32(id), err
}

// Send implements sim.Transport.
func (m *MetaRoCE) Send(now int64, conn, flow uint32, length uint64, tag uint32, cookie uint64) error {
	return m.EP.Send(transport.Time(now), transport.ConnID(conn), flow, length, tag, cookie)
}

// PostRecv implements sim.Transport with a one-buffer receive group.
func (m *MetaRoCE) PostRecv(now int64, conn, flow uint32, capacity uint64, tag uint32, cookie uint64) error {
	m.one[0] = transport.RecvBuf{Cap: capacity, Tag: tag, Cookie: cookie}
	return m.EP.PostRecv(transport.Time(now), transport.ConnID(conn), flow, m.one[:])
}

// PollEvent implements sim.Transport.
func (m *MetaRoCE) PollEvent() (sim.Event, bool) {
	ev, ok := m.EP.PollEvent()
	if !ok {
		return sim.Event{}, false
	}
	return sim.Event{Kind: sim.EventKind(ev.Kind), Conn: uint32(ev.Conn), Remote: int(ev.Remote),
		Flow: ev.Flow, Cookie: ev.Cookie, Len: ev.Len, Err: ev.Err}, true
}
