package transport

import (
	"bytes"
	"container/heap"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// pktEv is a datagram in flight in the smoke network.
type pktEv struct {
	at   Time
	seq  int
	to   int
	d    Datagram
}

type pq []pktEv

func (q pq) Len() int { return len(q) }
func (q pq) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q pq) Swap(i, j int)       { q[i], q[j] = q[j], q[i] }
func (q *pq) Push(x any)         { *q = append(*q, x.(pktEv)) }
func (q *pq) Pop() any           { o := *q; x := o[len(o)-1]; *q = o[:len(o)-1]; return x }

// smokeNet joins two endpoints with a fixed delay and a loss probability.
type smokeNet struct {
	eps   [2]*Endpoint
	q     pq
	seq   int
	now   Time
	delay Time
	loss  float64
	rng   *rand.Rand
	sendBufs [2]map[uint64][]byte
	recvBufs [2]map[uint64][]byte
	events   [2][]Event
}

func newSmoke(t *testing.T, loss float64) *smokeNet {
	n := &smokeNet{delay: 5 * Microsecond, loss: loss, rng: rand.New(rand.NewPCG(1, 2))}
	cfg := Config{MinRTO: 50 * Microsecond, InitialRTT: 10 * Microsecond}
	n.eps[0] = NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)))
	cfg.Listen = true
	n.eps[1] = NewEndpoint(cfg, rand.New(rand.NewPCG(5, 6)))
	for i := range 2 {
		n.sendBufs[i] = map[uint64][]byte{}
		n.recvBufs[i] = map[uint64][]byte{}
	}
	return n
}

func (n *smokeNet) step() bool {
	buf := make([]byte, 70000)
	progressed := false
	for i, ep := range n.eps {
		for {
			tx, ok := ep.PollTransmit(n.now, buf)
			if !ok {
				break
			}
			progressed = true
			pkt := append([]byte(nil), buf[:tx.N]...)
			if tx.Payload.Len > 0 {
				sb := n.sendBufs[i][tx.Payload.Cookie]
				pkt = append(pkt, sb[tx.Payload.Offset:tx.Payload.Offset+uint64(tx.Payload.Len)]...)
			}
			if n.rng.Float64() < n.loss {
				continue
			}
			n.seq++
			heap.Push(&n.q, pktEv{at: n.now + n.delay, seq: n.seq, to: 1 - i, d: Datagram{From: RemoteID(i), Data: pkt}})
		}
		for {
			ev, ok := ep.PollEvent()
			if !ok {
				break
			}
			n.events[i] = append(n.events[i], ev)
		}
	}
	next := Never
	if len(n.q) > 0 {
		next = n.q[0].at
	}
	for _, ep := range n.eps {
		next = min(next, ep.NextTimeout())
	}
	if next == Never {
		return progressed
	}
	if next > n.now {
		n.now = next
	}
	for len(n.q) > 0 && n.q[0].at <= n.now {
		p := heap.Pop(&n.q).(pktEv)
		pl := n.eps[p.to].HandleDatagram(n.now, p.d)
		if pl.OK {
			copy(n.recvBufs[p.to][pl.Cookie][pl.Offset:], pl.Payload)
		}
	}
	for _, ep := range n.eps {
		if ep.NextTimeout() <= n.now {
			ep.HandleTimeout(n.now)
		}
	}
	return true
}

func TestSmokeTransfer(t *testing.T) {
	for _, loss := range []float64{0, 0.01, 0.1} {
		n := newSmoke(t, loss)
		id, err := n.eps[0].Dial(0, 1)
		require.NoError(t, err)
		var peer ConnID
		for i := 0; i < 10000 && peer == 0; i++ {
			n.step()
			for _, ev := range n.events[1] {
				if ev.Kind == EvAccepted {
					peer = ev.Conn
				}
			}
		}
		require.NotZero(t, peer)
		sizes := []int{0, 1, 4095, 4096, 4097, 100000, 1 << 20}
		for k, sz := range sizes {
			data := make([]byte, sz)
			for j := range data {
				data[j] = byte(j*7 + k)
			}
			n.sendBufs[0][uint64(k)] = data
			n.recvBufs[1][uint64(k)] = make([]byte, sz+10)
			require.NoError(t, n.eps[1].PostRecv(n.now, peer, 3, []RecvBuf{{Cap: uint64(sz + 10), Tag: 7, Cookie: uint64(k)}}))
			require.NoError(t, n.eps[0].Send(n.now, id, 3, uint64(sz), 7, uint64(k)))
		}
		for i := 0; i < 2000000; i++ {
			if !n.step() {
				break
			}
			done := 0
			for _, ev := range n.events[1] {
				if ev.Kind == EvRecvDone {
					done++
				}
			}
			if done == len(sizes) {
				break
			}
		}
		var got []uint64
		for _, ev := range n.events[1] {
			if ev.Kind == EvRecvDone {
				require.NoError(t, ev.Err)
				got = append(got, ev.Cookie)
				require.Equal(t, uint64(sizes[ev.Cookie]), ev.Len)
				require.True(t, bytes.Equal(n.sendBufs[0][ev.Cookie], n.recvBufs[1][ev.Cookie][:ev.Len]), "cookie %d", ev.Cookie)
			}
		}
		require.Equal(t, []uint64{0, 1, 2, 3, 4, 5, 6}, got, "loss %v", loss)
		st, _ := n.eps[0].Stats(id)
		t.Logf("loss %.2f: now %v sent %d retx %d lost %d spurious %d timeouts %d", loss, n.now, st.PacketsSent, st.Retransmits, st.Lost, st.Spurious, st.Timeouts)
	}
}
