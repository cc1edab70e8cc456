package scenarios

import (
	"fmt"

	"github.com/metaroce/metaroce/fabric/sim"
)

// mesh is the connection phase every workload starts with: each host
// connects to the peers it exchanges messages with (the lower host id
// dials), and one base RTT after every host is connected all of them begin
// at one instant, the mesh's Start. The base RTT stands for the barrier a
// real job passes between connecting and its first collective: by then
// both ends of every connection have finished the handshake (the
// responder has the initiator's acknowledgement of its HELLO_ACK, and with
// it an RTT sample), which starting when the last HELLO_ACK landed cut
// short.
type mesh struct {
	s       *sim.Sim
	members []*meshHost
	ready   int   // hosts whose connections are all up
	Start   int64 // when the hosts began, ns (-1 before)
	Err     error // first transport error seen
	// Refused is the first call a transport refused (a dial, send or
	// receive the workload got wrong, such as more queued than the
	// transport takes): the workload no longer runs as described, so a
	// scenario reports it instead of its figures. Connections that close
	// with an error are counted in errs and are a result, not this.
	Refused error
	errs    int // connections closed with an error
}

// meshHost is one host's side of the connection phase. begin is called at
// the mesh's Start.
type meshHost struct {
	m       *mesh
	id      int
	peers   []int          // the hosts it exchanges messages with, ascending
	conns   map[int]uint32 // peer → connection
	byConn  map[uint32]int // connection → peer
	up      int            // connections established
	started bool
	begin   func(t int64)
}

// add registers host id with its peers; begin starts its work.
func (m *mesh) add(id int, peers []int, begin func(t int64)) *meshHost {
	mh := &meshHost{m: m, id: id, peers: peers, conns: map[int]uint32{}, byConn: map[uint32]int{}, begin: begin}
	m.members = append(m.members, mh)
	return mh
}

func (m *mesh) fail(err error) {
	if m.Err == nil {
		m.Err = err
	}
}

// refuse records a call the transport refused (see Refused).
func (m *mesh) refuse(err error) {
	m.fail(err)
	if m.Refused == nil {
		m.Refused = err
	}
}

// dial connects to the higher-numbered peers (sim.App's Start).
func (mh *meshHost) dial(now int64, h *sim.Host) {
	for _, p := range mh.peers {
		if p > mh.id {
			c, err := h.Dial(p)
			if err != nil {
				mh.m.refuse(fmt.Errorf("host %d: dial host %d: %w", mh.id, p, err))
				continue
			}
			mh.conns[p], mh.byConn[c] = c, p
		}
	}
	mh.checkReady(now)
}

// connEvent applies a connection event and reports whether ev was one.
func (mh *meshHost) connEvent(now int64, ev sim.Event) bool {
	switch ev.Kind {
	case sim.EvConnected:
	case sim.EvAccepted:
		mh.conns[ev.Remote], mh.byConn[ev.Conn] = ev.Conn, ev.Remote
	case sim.EvClosed:
		if ev.Err != nil {
			mh.m.errs++
			mh.m.fail(fmt.Errorf("host %d: %w", mh.id, ev.Err))
		}
		return true
	default:
		return false
	}
	mh.up++
	mh.checkReady(now)
	return true
}

func (mh *meshHost) checkReady(now int64) {
	if mh.up < len(mh.peers) || mh.started {
		return
	}
	mh.started = true
	m := mh.m
	m.ready++
	if m.ready == len(m.members) {
		m.s.At(now+m.s.Config().BaseRTT(64, 64), func(t int64) {
			m.Start = t
			for _, x := range m.members {
				x.begin(t)
			}
		})
	}
}
