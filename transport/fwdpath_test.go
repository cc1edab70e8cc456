package transport_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestFwdDelayOneWay runs a transfer over a network without queues of its
// own and scripts two: 3 µs on the way of the DATA for a while, and later
// 20 µs on the way of everything the receiver sends back. The ACK records
// the sender gets (docs/spec.md §2.5) must report the first in the forward
// delay of the DATA that met it, and nothing for the second, although the
// sender's RTT grows by it.
func TestFwdDelayOneWay(t *testing.T) {
	cfg := baseCfg()
	cfg.CC.LineRate = linkRate // paced, so that the transfer spans both queues
	n, ca, cb := pair(t, transporttest.NetConfig{Seed: 11, BaseDelay: oneWay}, cfg)
	t0 := n.Now()
	fwdFrom, fwdUntil := t0+100*transport.Microsecond, t0+200*transport.Microsecond
	revFrom, revUntil := t0+300*transport.Microsecond, t0+400*transport.Microsecond
	const fwdQ, revQ = 3 * transport.Microsecond, 20 * transport.Microsecond
	n.ExtraDelay = func(p *transporttest.Packet, departs transport.Time) transport.Time {
		switch {
		case p.Src == 0 && p.Op == wire.OpData && departs >= fwdFrom && departs < fwdUntil:
			return fwdQ
		case p.Src == 1 && departs >= revFrom && departs < revUntil:
			return revQ
		}
		return 0
	}
	type seen struct {
		sent transport.Time // when the echoed DATA left the sender
		fwd  transport.Time
	}
	var recs []seen
	var rttRev transport.Time
	note := func(r *wire.AckRecord) {
		if r.EchoTS != 0 {
			recs = append(recs, seen{transport.Time(r.EchoTS), transport.Time(r.FwdDelay) * wire.FwdDelayUnit})
		}
	}
	var ack wire.Ack
	var pg wire.Piggyback
	n.OnArrive = func(p *transporttest.Packet, now transport.Time, _ int) {
		if p.Dst != 0 {
			return
		}
		if p.Op == wire.OpAck {
			if _, err := wire.ParseAck(&ack, p.Data); err == nil {
				for i := 0; i < ack.N; i++ {
					note(&ack.Records[i])
				}
			}
		} else if wire.ParsePiggy(&pg, p.Data) == nil && pg.HasPiggy {
			note(&pg.Piggy)
		}
		if now > revFrom+2*revQ && now < revUntil {
			st, _ := n.Node(0).EP.Stats(ca)
			rttRev = max(rttRev, st.RTT)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const size = 8 << 20
	_, err := n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: size})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 1, fill(rng, size), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(func() bool { return n.Now() > revUntil+50*transport.Microsecond }, transport.Second))
	require.Less(t, t0, revFrom)
	require.Greater(t, rttRev, revQ, "the reverse queue shows in the RTT")

	var inFwd, elsewhere int
	for _, r := range recs {
		switch {
		case r.sent >= fwdFrom && r.sent < fwdUntil:
			inFwd++
			require.InDelta(t, float64(fwdQ), float64(r.fwd), wire.FwdDelayUnit, "DATA sent at %v", r.sent)
		case r.sent < fwdFrom || r.sent >= fwdUntil+fwdQ:
			// (Those sent within fwdQ after the queue ended wait
			// behind the last ones that met it.)
			elsewhere++
			require.Zero(t, r.fwd, "DATA sent at %v", r.sent)
		}
	}
	require.Greater(t, inFwd, 20)
	require.Greater(t, elsewhere, 60)
}
