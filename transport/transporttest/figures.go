package transporttest

import (
	"fmt"

	"github.com/metaroce/metaroce/internal/settle"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/wire"
)

// Parameters of the measured figures: 4 KiB payloads, 8 paths, about 10 µs
// base RTT (4 µs each way plus serialisation and ACK coalescing).
const (
	FigOneWay = 4 * transport.Microsecond
	FigRTT    = 10 * transport.Microsecond
	FigPaths  = 8
)

// FigConfig is the endpoint configuration of the figures: 8 paths on one
// plane, MinRTO a few RTTs, hints on (InboundRate = link rate).
// figDatagram is the largest datagram of the figures' endpoints, bytes
// (the core's default MaxDatagram: 4 KiB payloads).
const figDatagram = 4152

func FigConfig(linkRate uint64) transport.Config {
	return transport.Config{
		Planes:        1,
		PathsPerPlane: FigPaths,
		MinRTO:        4 * FigRTT,
		InitialRTT:    FigRTT,
		// ACK coalescing must stay well below the RTT: with the default
		// 20 µs, a sender paced at a 1/32 share sees one packet per path
		// per 20 µs, each ACK is held for the full delay, and the hinted
		// window (2 × share × RTT) starves it.
		AckDelay: 2 * transport.Microsecond,
		// The core counts datagram bytes, the links carry 42 more per
		// packet (NetConfig.WireOverhead): hints that add up to the link
		// rate itself overfill it by 1%, and the receiver's queue crept
		// up to the marking threshold every few hundred RTTs.
		InboundRate: linkRate * figDatagram / (figDatagram + 42),
		IdleTimeout: 100 * transport.Millisecond,
	}
}

// GoodputResult is one run of MeasureGoodput.
type GoodputResult struct {
	Loss        float64
	Goodput     float64 // payload bytes delivered per second over the link rate
	Retransmits uint64
	Spurious    uint64 // content delivered twice (network duplicates excluded)
	Timeouts    uint64
}

// MeasureGoodput sends one message of size bytes over 8 paths of a link of
// linkRate bytes/s with random loss on every packet (both directions, ACKs
// included) and returns the goodput from posting to completion.
func MeasureGoodput(linkRate uint64, loss float64, size int, seed uint64) (GoodputResult, error) {
	n := New(NetConfig{Seed: seed, BaseDelay: FigOneWay, LinkRate: linkRate, Loss: loss})
	cfg := FigConfig(linkRate)
	n.AddNode(cfg)
	cfg.Listen = true
	n.AddNode(cfg)
	ca, cb, err := n.Connect(0, 1)
	if err != nil {
		return GoodputResult{}, err
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	start := n.Now()
	if _, err := n.PostRecv(1, cb, 0, RecvSpec{Cap: uint64(size)}); err != nil {
		return GoodputResult{}, err
	}
	if _, err := n.Send(0, ca, 0, data, 0); err != nil {
		return GoodputResult{}, err
	}
	if err := n.RunUntil(n.AllDone, start+transport.Second); err != nil {
		return GoodputResult{}, err
	}
	el := n.Now() - start
	r := GoodputResult{Loss: loss, Goodput: float64(size) / (float64(el) / 1e9) / float64(linkRate)}
	st, _ := n.Node(0).EP.Stats(ca)
	r.Retransmits, r.Timeouts, r.Spurious = st.Retransmits, st.Timeouts, n.Stats.Redelivered
	return r, n.Check(CheckOptions{Complete: true})
}

// BlackholeResult is one run of MeasureBlackhole.
type BlackholeResult struct {
	Before    float64 // goodput before the fault, fraction of the link rate
	Dip       float64 // lowest goodput over one RTT after the fault
	Restore   float64 // RTTs from the fault until goodput stays ≥ 90% of Before
	Timeouts  uint64
	PathMoves uint64
}

// MeasureBlackhole runs a long transfer over 8 paths, blackholes one path
// (its current entropy) after 30 RTTs and measures, in base RTTs, how long
// goodput (bytes placed per RTT) stays below 90% of its value before the
// fault: the time after which every one-RTT bin is back above it.
func MeasureBlackhole(linkRate uint64, seed uint64) (BlackholeResult, error) {
	n := New(NetConfig{Seed: seed, BaseDelay: FigOneWay, LinkRate: linkRate, Jitter: 500 * transport.Nanosecond})
	cfg := FigConfig(linkRate)
	n.AddNode(cfg)
	cfg.Listen = true
	n.AddNode(cfg)
	ca, cb, err := n.Connect(0, 1)
	if err != nil {
		return BlackholeResult{}, err
	}
	const bins = 100
	bin := FigRTT
	t0 := n.Now()
	fault := t0 + 30*bin
	placed := make([]float64, bins)
	n.OnPlace = func(node int, now transport.Time, b int) {
		if i := int((now - t0) / bin); i >= 0 && i < bins {
			placed[i] += float64(b)
		}
	}
	size := int(linkRate/uint64(transport.Second/bin)) * (bins + 20)
	if err := n.Node(1).EP.PostRecv(n.Now(), cb, 0, []transport.RecvBuf{{Cap: uint64(size), Cookie: 1 << 40}}); err != nil {
		return BlackholeResult{}, err
	}
	if err := n.Node(0).EP.Send(n.Now(), ca, 0, uint64(size), 0, 1<<40); err != nil {
		return BlackholeResult{}, err
	}
	n.nodes[0].countOnly = func(uint64, int) {}
	n.nodes[1].countOnly = func(uint64, int) {}
	if err := n.RunUntil(func() bool { return n.Now() >= fault }, fault+bin); err != nil {
		return BlackholeResult{}, err
	}
	ps, _ := n.Node(0).EP.PathStats(ca, 3)
	n.Blackhole(0, int(ps.Plane), int(ps.Entropy), n.Now())
	if err := n.RunFor(t0 + bins*bin - n.Now()); err != nil {
		return BlackholeResult{}, err
	}
	perRTT := float64(linkRate) * float64(bin) / 1e9
	var r BlackholeResult
	for i := 20; i < 30; i++ {
		r.Before += placed[i] / perRTT / 10
	}
	fb := int((fault - t0) / bin)
	r.Dip = 1
	for i := fb; i < bins; i++ {
		r.Dip = min(r.Dip, placed[i]/perRTT)
	}
	last := -1 // the last one-RTT bin below 90% of Before
	for i := fb; i < bins; i++ {
		if placed[i]/perRTT < 0.9*r.Before {
			last = i
		}
	}
	r.Restore = 0
	if last >= 0 {
		r.Restore = float64(last+1) - float64(fault-t0)/float64(bin)
	}
	st, _ := n.Node(0).EP.Stats(ca)
	r.Timeouts, r.PathMoves = st.Timeouts, st.PathChanges
	return r, nil
}

// IncastResult is one run of MeasureIncast.
type IncastResult struct {
	N          int
	Converge   float64 // RTTs from the first ACK of DATA until Jain ≥ 0.95 (every 4-RTT window from then on) and queue ≤ threshold hold for good
	JainFinal  float64 // Jain's index over the last 20 RTTs
	QueueFinal int     // largest ingress queue over the last 20 RTTs, bytes
	QueuePeak  int     // largest ingress queue of the run, bytes
	Util       float64 // receiver goodput over the last 20 RTTs / link rate
}

// incastJainWindow is the window, in RTTs, over which MeasureIncast takes
// Jain's index: at 400 Gb/s a 32-way share is under 5 packets per RTT, so
// one RTT cannot tell a fair sender from an unlucky packet boundary.
const incastJainWindow = 4

// MeasureIncast starts N senders at once towards one receiver whose
// ingress link (rate linkRate, CE marking above mark bytes) is the
// bottleneck, and measures in base RTTs, from the first acknowledgement
// of DATA any sender gets, how long until the senders' shares are fair
// (Jain ≥ 0.95 over every 4-RTT window from then on) and the queue stays
// at or under the marking threshold, for the rest of the run.
func MeasureIncast(linkRate uint64, senders int, mark int, seed uint64) (IncastResult, error) {
	n := New(NetConfig{Seed: seed, BaseDelay: FigOneWay, LinkRate: linkRate, MarkThreshold: mark, Jitter: 500 * transport.Nanosecond})
	cfg := FigConfig(linkRate)
	cfg.Listen = true
	recv := n.AddNode(cfg)
	cfg.Listen = false
	type pair struct{ s, r transport.ConnID }
	conns := make([]pair, senders)
	for i := 0; i < senders; i++ {
		n.AddNode(cfg)
	}
	for i := 0; i < senders; i++ {
		cs, cr, err := n.Connect(i+1, recv)
		if err != nil {
			return IncastResult{}, err
		}
		conns[i] = pair{cs, cr}
	}
	// Let the handshakes' effects settle before the burst.
	if err := n.RunFor(2 * transport.Millisecond); err != nil {
		return IncastResult{}, err
	}
	const bins = 120
	bin := FigRTT
	t0 := n.Now()
	placed := make([][]float64, senders)
	for i := range placed {
		placed[i] = make([]float64, bins)
	}
	queue := make([]int, bins)
	// The origin is the first acknowledgement of DATA to reach a sender:
	// the first feedback a sender has about the receiver's queue. The
	// receiver's rate-hint ACK answering a posted receive comes about an
	// RTT earlier, before any DATA left, and counting from it charged the
	// senders for an RTT in which nothing could be known.
	firstData, firstAck := transport.Never, transport.Never
	n.OnArrive = func(p *Packet, now transport.Time, q int) {
		if i := int((now - t0) / bin); i >= 0 && i < bins && p.Dst == recv {
			queue[i] = max(queue[i], q)
		}
		if p.Dst == recv && p.Op == wire.OpData && firstData == transport.Never && now > t0 {
			firstData = now
		}
		if p.Src == recv && p.Op == wire.OpAck && firstAck == transport.Never && p.Sent >= firstData {
			firstAck = now
		}
	}
	senderOf := map[transport.ConnID]int{}
	for i, c := range conns {
		senderOf[c.r] = i
	}
	size := uint64(linkRate) // one second's worth: never completes in the run
	for i, c := range conns {
		ck := uint64(1<<40) + uint64(i)
		if err := n.Node(recv).EP.PostRecv(n.Now(), c.r, 0, []transport.RecvBuf{{Cap: size, Cookie: ck}}); err != nil {
			return IncastResult{}, err
		}
		if err := n.Node(i+1).EP.Send(n.Now(), c.s, 0, size, 0, ck); err != nil {
			return IncastResult{}, err
		}
	}
	// Count placements per sender without moving bytes: the harness's
	// placement hook sees the cookie through a wrapper.
	n.nodes[recv].countOnly = func(cookie uint64, b int) {
		i := int(cookie - 1<<40)
		if k := int((n.now - t0) / bin); k >= 0 && k < bins && i >= 0 && i < senders {
			placed[i][k] += float64(b)
		}
	}
	for i := 0; i < senders; i++ {
		n.nodes[i+1].countOnly = func(uint64, int) {}
	}
	if err := n.RunFor(bins * bin); err != nil {
		return IncastResult{}, err
	}
	r := IncastResult{N: senders, JainFinal: 1}
	if firstAck == transport.Never {
		return r, fmt.Errorf("transporttest: no ACK in the incast run")
	}
	fa := int((firstAck - t0) / bin)
	good := settle.From(placed, queue, mark, fa, incastJainWindow)
	// The bin holding the origin counts whole: a result within it is 0.
	r.Converge = max(0, float64(good)-float64(firstAck-t0)/float64(bin))
	if good == bins {
		r.Converge = -1 // never
	}
	var tot float64
	var s, s2 float64
	for i := range placed {
		var x float64
		for k := bins - 20; k < bins; k++ {
			x += placed[i][k]
		}
		s += x
		s2 += x * x
		tot += x
	}
	r.JainFinal = s * s / (float64(senders) * s2)
	for k := range queue {
		r.QueuePeak = max(r.QueuePeak, queue[k])
		if k >= bins-20 {
			r.QueueFinal = max(r.QueueFinal, queue[k])
		}
	}
	r.Util = tot / (float64(linkRate) * float64(20*bin) / 1e9)
	return r, nil
}
