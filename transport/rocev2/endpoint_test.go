package rocev2

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type pkt struct {
	at   int64
	to   int
	ecn  uint8
	data []byte
}

// pair is two endpoints joined by a wire with a fixed delay, a drop
// predicate and a mark predicate, on virtual time.
type pair struct {
	ep    [2]*Endpoint
	q     []pkt
	now   int64
	drop  func(from int, h *Header) bool
	mark  func(from int, h *Header) bool
	evs   [2][]Event
	evAt  [2][]int64 // virtual time each of evs was polled, ns
	delay int64
	gap   int64 // serialisation per packet
}

func newPair(t *testing.T, cfg Config) *pair {
	p := &pair{delay: 1000, gap: 100}
	var err error
	for i := range p.ep {
		c := cfg
		c.Listen = i == 1
		p.ep[i], err = NewEndpoint(c, rand.New(rand.NewPCG(uint64(i), 1)))
		require.NoError(t, err)
	}
	return p
}

func (p *pair) run(until int64) {
	buf := make([]byte, 256)
	for p.now < until {
		for i, e := range p.ep {
			if e.NextTimeout() <= p.now {
				e.HandleTimeout(p.now)
			}
			if tx, ok := e.PollTransmit(p.now, buf); ok {
				d := append([]byte(nil), buf[:tx.N]...)
				d = append(d, make([]byte, tx.PayloadLen)...)
				var h Header
				_, _ = Parse(&h, d)
				if p.drop == nil || !p.drop(i, &h) {
					var ecn uint8
					if p.mark != nil && p.mark(i, &h) {
						ecn = 3
					}
					p.q = append(p.q, pkt{at: p.now + p.delay, to: int(tx.Route.Remote), ecn: ecn, data: d})
				}
			}
			for {
				ev, ok := e.PollEvent()
				if !ok {
					break
				}
				p.evs[i] = append(p.evs[i], ev)
				p.evAt[i] = append(p.evAt[i], p.now)
			}
		}
		for len(p.q) > 0 && p.q[0].at <= p.now {
			k := p.q[0]
			p.q = p.q[1:]
			p.ep[k.to].HandleDatagram(p.now, uint32(1-k.to), 0, k.ecn, k.data)
		}
		p.now += p.gap
	}
}

func (p *pair) connect(t *testing.T) (uint32, uint32) {
	a, err := p.ep[0].Dial(0, 1)
	require.NoError(t, err)
	p.run(10_000)
	require.NotEmpty(t, p.evs[0])
	require.Equal(t, EvConnected, p.evs[0][0].Kind)
	require.Equal(t, EvAccepted, p.evs[1][0].Kind)
	b := p.evs[1][0].Conn
	p.evs, p.evAt = [2][]Event{}, [2][]int64{}
	return a, b
}

func kinds(evs []Event, k EventKind) (n int, bytes uint64, err error) {
	for _, e := range evs {
		if e.Kind == k {
			n++
			bytes += e.Len
			if e.Err != nil {
				err = e.Err
			}
		}
	}
	return
}

func TestTransferStripedAndInOrder(t *testing.T) {
	for _, cfg := range []Config{{QPsPerConn: 1}, {QPsPerConn: 3}, {QPsPerConn: 1, Rendezvous: true}, {QPsPerConn: 3, Rendezvous: true}} {
		p := newPair(t, cfg)
		a, b := p.connect(t)
		for i := 0; i < 4; i++ {
			require.NoError(t, p.ep[1].PostRecv(p.now, b, 7, 1<<20, 0, uint64(i)))
			require.NoError(t, p.ep[0].Send(p.now, a, 7, 100_000+uint64(i), 9, uint64(i)))
		}
		p.run(p.now + 2_000_000)
		n, bytes, err := kinds(p.evs[0], EvSendDone)
		assert.Equal(t, 4, n)
		require.NoError(t, err)
		n, rb, err := kinds(p.evs[1], EvRecvDone)
		assert.Equal(t, 4, n)
		require.NoError(t, err)
		assert.Equal(t, bytes, rb)
		for i, ev := range p.evs[1] {
			assert.EqualValues(t, i, ev.Cookie, "completions in posting order")
			assert.EqualValues(t, 9, ev.Tag)
		}
		assert.Zero(t, p.ep[0].Stats().Retransmits)
	}
}

// TestGoBackN: one lost packet costs one NAK and a resend of everything
// after it (IB spec, C9-110 style sequence error handling).
func TestGoBackN(t *testing.T) {
	p := newPair(t, Config{})
	a, b := p.connect(t)
	dropped := false
	p.drop = func(from int, h *Header) bool {
		if from == 0 && h.Op == OpData && h.PSN == 5 && !dropped {
			dropped = true
			return true
		}
		return false
	}
	require.NoError(t, p.ep[1].PostRecv(p.now, b, 0, 1<<20, 0, 1))
	require.NoError(t, p.ep[0].Send(p.now, a, 0, 40*4096, 0, 1))
	p.run(p.now + 1_000_000)
	n, _, err := kinds(p.evs[1], EvRecvDone)
	require.Equal(t, 1, n)
	require.NoError(t, err)
	st := p.ep[1].Stats()
	assert.EqualValues(t, 1, st.NaksSent, "one NAK per gap")
	assert.Positive(t, st.OutOfOrder)
	s0 := p.ep[0].Stats()
	assert.EqualValues(t, 1, s0.NaksReceived)
	assert.GreaterOrEqual(t, s0.Retransmits, uint64(1)+st.OutOfOrder-1)
}

func TestTailLossTimeoutAndRetryLimit(t *testing.T) {
	p := newPair(t, Config{TimeoutExp: 4, RetryLimit: 3}) // RTO 65.5 µs
	a, b := p.connect(t)
	var drops int
	p.drop = func(from int, h *Header) bool {
		if from == 0 && h.Op == OpData && h.PSN == 3 && drops < 2 {
			drops++
			return true
		}
		return false
	}
	require.NoError(t, p.ep[1].PostRecv(p.now, b, 0, 1<<20, 0, 1))
	require.NoError(t, p.ep[0].Send(p.now, a, 0, 4*4096, 0, 1)) // PSN 3 is the tail
	p.run(p.now + 1_000_000)
	n, _, err := kinds(p.evs[1], EvRecvDone)
	require.Equal(t, 1, n)
	require.NoError(t, err)
	assert.EqualValues(t, 2, p.ep[0].Stats().Timeouts)

	// A black hole: the connection fails after RetryLimit timeouts.
	p.evs = [2][]Event{}
	p.drop = func(from int, h *Header) bool { return from == 0 }
	require.NoError(t, p.ep[0].Send(p.now, a, 0, 4096, 0, 2))
	p.run(p.now + 1_000_000)
	_, _, err = kinds(p.evs[0], EvClosed)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrRetryExceeded), "%v", err)
	assert.EqualValues(t, 2+4, p.ep[0].Stats().Timeouts)
}

func TestRNRThenDelivery(t *testing.T) {
	p := newPair(t, Config{})
	a, b := p.connect(t)
	require.NoError(t, p.ep[0].Send(p.now, a, 0, 8192, 0, 1))
	p.run(p.now + 5_000)
	require.NoError(t, p.ep[1].PostRecv(p.now, b, 0, 8192, 0, 1))
	p.run(p.now + 200_000)
	n, _, err := kinds(p.evs[1], EvRecvDone)
	require.Equal(t, 1, n)
	require.NoError(t, err)
	assert.Positive(t, p.ep[0].Stats().RNRs)
}

// TestDCQCNNotificationPoint: CE marks produce at most one CNP per QP per
// 50 µs and the sender's rate drops.
func TestDCQCNNotificationPoint(t *testing.T) {
	p := newPair(t, Config{DCQCN: true})
	a, b := p.connect(t)
	p.mark = func(from int, h *Header) bool { return from == 0 && h.Op == OpData }
	require.NoError(t, p.ep[1].PostRecv(p.now, b, 0, 1<<30, 0, 1))
	require.NoError(t, p.ep[0].Send(p.now, a, 0, 1<<30, 0, 1))
	start := p.now
	p.run(p.now + 500_000)
	st := p.ep[1].Stats()
	assert.LessOrEqual(t, st.CNPsSent, uint64((p.now-start)/50_000+1))
	assert.GreaterOrEqual(t, st.CNPsSent, uint64(8))
	r := p.ep[0].conns[a].qps[0].rate
	assert.Less(t, r.Rate(p.now), r.Config().LineRate/10)
}

func TestBadInput(t *testing.T) {
	p := newPair(t, Config{})
	assert.ErrorIs(t, p.ep[0].Send(0, 99, 0, 1, 0, 0), ErrUnknownConn)
	assert.ErrorIs(t, p.ep[0].PostRecv(0, 99, 0, 1, 0, 0), ErrUnknownConn)
	p.ep[0].HandleDatagram(0, 1, 0, 0, []byte{1, 2})
	assert.EqualValues(t, 1, p.ep[0].Stats().Malformed)
	_, err := NewEndpoint(Config{QPsPerConn: 1000}, rand.New(rand.NewPCG(1, 1)))
	assert.ErrorIs(t, err, ErrInvalid)
	// A Dial nobody answers fails with ErrHandshake, it does not hang.
	p.drop = func(int, *Header) bool { return true }
	_, err = p.ep[0].Dial(0, 1)
	require.NoError(t, err)
	p.run(20_000_000)
	_, _, err = kinds(p.evs[0], EvClosed)
	assert.ErrorIs(t, err, ErrHandshake)
}

// TestRendezvousWaitsForCTS: with Config.Rendezvous a send posted before its
// receive sends nothing (no DATA, so no RNR) until the receiver's CTS has
// arrived, and the first DATA leaves no sooner than one wire delay after
// the receive is posted.
func TestRendezvousWaitsForCTS(t *testing.T) {
	p := newPair(t, Config{Rendezvous: true})
	a, b := p.connect(t)
	var firstData, ctsAt int64 = -1, -1
	p.drop = func(from int, h *Header) bool {
		switch {
		case from == 0 && h.Op == OpData && firstData < 0:
			firstData = p.now
		case from == 1 && h.Op == OpCTS && ctsAt < 0:
			ctsAt = p.now
		}
		return false
	}
	require.NoError(t, p.ep[0].Send(p.now, a, 3, 3*4096, 0, 1))
	p.run(p.now + 50_000)
	assert.Zero(t, p.ep[0].Stats().DataSent, "no DATA before the receive is announced")
	assert.Zero(t, p.ep[0].Stats().RNRs)
	posted := p.now
	require.NoError(t, p.ep[1].PostRecv(p.now, b, 3, 1<<20, 0, 7))
	p.run(p.now + 100_000)
	n, got, err := kinds(p.evs[1], EvRecvDone)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.EqualValues(t, 3*4096, got)
	n, _, err = kinds(p.evs[0], EvSendDone)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a CTS completes no send of its own")
	assert.Zero(t, p.ep[1].Stats().DataSent, "a CTS is not DATA")
	assert.EqualValues(t, 1, p.ep[1].Stats().CTSSent)
	require.GreaterOrEqual(t, ctsAt, posted)
	assert.GreaterOrEqual(t, firstData, ctsAt+p.delay)
}

// TestRendezvousLostCTS: a CTS is sequenced, so a lost one is resent (here
// by the timeout, as it is the tail of its QP) and the held send goes.
func TestRendezvousLostCTS(t *testing.T) {
	p := newPair(t, Config{Rendezvous: true, TimeoutExp: 4})
	a, b := p.connect(t)
	lost := 0
	p.drop = func(from int, h *Header) bool {
		if from == 1 && h.Op == OpCTS && lost == 0 {
			lost++
			return true
		}
		return false
	}
	require.NoError(t, p.ep[1].PostRecv(p.now, b, 0, 8192, 0, 1))
	require.NoError(t, p.ep[1].PostRecv(p.now, b, 0, 8192, 0, 2))
	require.NoError(t, p.ep[0].Send(p.now, a, 0, 8192, 0, 1))
	require.NoError(t, p.ep[0].Send(p.now, a, 0, 100, 0, 2))
	p.run(p.now + 1_000_000)
	n, _, err := kinds(p.evs[1], EvRecvDone)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, 1, lost)
	assert.Positive(t, p.ep[1].Stats().Retransmits+p.ep[1].Stats().Timeouts)
}

// TestRendezvousCloseFailsHeldSends: a send still waiting for its CTS
// completes with an error when the connection closes; it does not hang.
func TestRendezvousCloseFailsHeldSends(t *testing.T) {
	p := newPair(t, Config{Rendezvous: true})
	a, _ := p.connect(t)
	require.NoError(t, p.ep[0].Send(p.now, a, 0, 4096, 0, 1))
	p.ep[0].Close(p.now, a)
	p.run(p.now + 1_000)
	n, _, err := kinds(p.evs[0], EvSendDone)
	assert.Equal(t, 1, n)
	assert.ErrorIs(t, err, ErrClosed)
}

// TestRendezvousCTSSkipsOwnBulk: a receiver's CTS does not wait behind the
// DATA the same host is sending to that peer. Host 0 streams 4 MiB to host
// 1 (1,024 packets, 102 µs on this wire); 10 µs in, host 0 posts a 4 KiB
// receive from host 1 and host 1 sends into it. On the CTS QP the CTS
// takes its round-robin turn and the 4 KiB lands about two one-way delays
// after the post; queued on QP 0 behind the bulk it landed 95.9 µs after.
func TestRendezvousCTSSkipsOwnBulk(t *testing.T) {
	p := newPair(t, Config{Rendezvous: true})
	a, b := p.connect(t)
	var ctsQP []uint16
	p.drop = func(from int, h *Header) bool {
		if from == 0 && h.Op == OpCTS {
			ctsQP = append(ctsQP, h.QP)
		}
		return false
	}
	require.NoError(t, p.ep[1].PostRecv(p.now, b, 1, 4<<20, 0, 1))
	require.NoError(t, p.ep[0].Send(p.now, a, 1, 4<<20, 0, 1))
	p.run(p.now + 10_000)
	require.Positive(t, p.ep[0].Stats().DataSent, "the bulk is under way")
	posted := p.now
	require.NoError(t, p.ep[0].PostRecv(p.now, a, 2, 4096, 0, 2))
	require.NoError(t, p.ep[1].Send(p.now, b, 2, 4096, 0, 2))
	p.run(p.now + 200_000)

	var smallAt int64 = -1
	for i, ev := range p.evs[0] {
		if ev.Kind == EvRecvDone && ev.Flow == 2 {
			require.NoError(t, ev.Err)
			smallAt = p.evAt[0][i]
		}
	}
	require.GreaterOrEqual(t, smallAt, posted, "the 4 KiB receive completed")
	t.Logf("4 KiB landed %d ns after its post", smallAt-posted)
	// CTS one way, DATA one way, and a few 100 ns turns of the wire.
	assert.Less(t, smallAt-posted, 2*p.delay+1_000, "4 KiB landed %d ns after its post", smallAt-posted)
	assert.Equal(t, []uint16{1}, ctsQP, "the CTS travels on the CTS QP, numbered after the data QP")
	n, got, err := kinds(p.evs[1], EvRecvDone)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.EqualValues(t, 4<<20, got, "the bulk completes too")
}
