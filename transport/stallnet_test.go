package transport_test

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/metaroce/metaroce/transport"
)

// stallNet drives two endpoints over a lossless network in virtual time
// whose node 1 (the receiver) stalls now and then: what it sends during a
// stall leaves only when the stall ends, in order, the way a receiver whose
// event loop is descheduled answers late. Nothing is ever dropped, so every
// timeout the sender takes in it is spurious.
type stallNet struct {
	eps    [2]*transport.Endpoint
	now    transport.Time
	delay  transport.Time // one way
	rate   float64        // bytes per second on each egress link
	txFree [2]transport.Time
	q      []flight
	stalls [][2]transport.Time // node 1's stalls, [from, until)
	buf    []byte
	events [2][]transport.Event
	steps  int
}

type flight struct {
	at   transport.Time
	seq  int
	to   int
	data transport.Datagram
}

func newStallNet(cfg transport.Config, seed uint64) *stallNet {
	n := &stallNet{delay: 4 * transport.Microsecond, rate: 10e9 / 8, buf: make([]byte, 1<<16)}
	n.eps[0] = transport.NewEndpoint(cfg, rand.New(rand.NewPCG(seed, 1)))
	cfg.Listen = true
	n.eps[1] = transport.NewEndpoint(cfg, rand.New(rand.NewPCG(seed, 2)))
	return n
}

// release is when a datagram node from sends at t enters the network.
func (n *stallNet) release(from int, t transport.Time) transport.Time {
	if from == 1 {
		for _, s := range n.stalls {
			if t >= s[0] && t < s[1] {
				return s[1]
			}
		}
	}
	return t
}

func (n *stallNet) service(i int) {
	ep := n.eps[i]
	for n.txFree[i] <= n.now {
		tx, ok := ep.PollTransmit(n.now, n.buf)
		if !ok {
			break
		}
		data := make([]byte, tx.N+tx.Payload.Len)
		copy(data, n.buf[:tx.N])
		n.txFree[i] = n.now + transport.Time(float64(len(data)+42)/n.rate*1e9)
		at := max(n.release(i, n.now), n.txFree[i]) + n.delay
		n.steps++
		n.q = append(n.q, flight{at: at, seq: n.steps, to: 1 - i, data: transport.Datagram{
			From: transport.RemoteID(i), Plane: tx.Route.Plane, ECN: transport.ECT0, Data: data}})
	}
	for {
		ev, ok := ep.PollEvent()
		if !ok {
			break
		}
		n.events[i] = append(n.events[i], ev)
	}
}

// run advances virtual time to until.
func (n *stallNet) run(until transport.Time) error {
	for limit := n.steps + 5_000_000; ; {
		n.service(0)
		n.service(1)
		sort.Slice(n.q, func(a, b int) bool {
			if n.q[a].at != n.q[b].at {
				return n.q[a].at < n.q[b].at
			}
			return n.q[a].seq < n.q[b].seq
		})
		t := transport.Never
		if len(n.q) > 0 {
			t = n.q[0].at
		}
		for i, ep := range n.eps {
			nt := ep.NextTimeout()
			if nt <= n.now {
				nt = max(nt, n.txFree[i])
			}
			t = min(t, nt)
		}
		if t > until {
			n.now = until
			return nil
		}
		n.now = max(n.now, t)
		for len(n.q) > 0 && n.q[0].at <= n.now {
			f := n.q[0]
			n.q = n.q[1:]
			n.eps[f.to].HandleDatagram(n.now, f.data)
		}
		for _, ep := range n.eps {
			if ep.NextTimeout() <= n.now {
				ep.HandleTimeout(n.now)
			}
		}
		n.steps++
		if n.steps > limit {
			return fmt.Errorf("stallNet: no progress at %v", n.now)
		}
	}
}

// connect dials node 1 from node 0 and returns both connection ids.
func (n *stallNet) connect() (a, b transport.ConnID, err error) {
	a, err = n.eps[0].Dial(n.now, 1)
	if err != nil {
		return 0, 0, err
	}
	if err := n.run(n.now + transport.Millisecond); err != nil {
		return 0, 0, err
	}
	for _, ev := range n.events[1] {
		if ev.Kind == transport.EvAccepted {
			b = ev.Conn
		}
	}
	if b == 0 {
		return 0, 0, fmt.Errorf("stallNet: no connection accepted")
	}
	return a, b, nil
}
