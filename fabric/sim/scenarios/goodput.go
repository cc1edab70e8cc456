package scenarios

import "github.com/metaroce/metaroce/fabric/sim"

// goodputMeter measures goodput: the payload the hosts' transports placed
// into posted receives, of the packets that the receivers' links
// serialised within a window of a job's run, as a fraction of the payload
// those links can carry in the window (payloadRate each).
//
// The fraction is at most 1 by construction. A packet counts when its
// serialisation onto the receiver's link (sim.Packet.TxStart to TxEnd)
// began at or after the window's start and ended before its end. A link
// sends one packet at a time, so on each link the packets counted took
// less than the window, rounding included (a port's run of packets ends
// within 1 ns of its exact time: the ns left out of the window's last
// absorbs it); and no packet carries more payload per wire byte than a
// full DATA packet of the protocol, which payloadRate assumes. Placed
// payload counts each message byte once: duplicates, packets go-back-N
// drops out of order and spurious retransmissions place nothing. The
// fraction reaches 1 only when the links carry full DATA packets, every
// one placed, back to back through the window.
//
// Counting completed messages instead, as the loss scenario did, let a
// message whose bytes mostly arrived before the window count whole within
// it: up to a message per flow too many or too few, 1.2% of the 450 µs
// smoke window at 256 KiB. With that, and RoCEv2's payload divided by
// MetaRoCE's rate (payloadRate), RoCEv2 without loss read 1.0078.
// With 63 flows into one host, as in the incast scenario, the message each
// flow has under way at the end went uncounted: 4% too little.
type goodputMeter struct {
	j          *job
	start, end int64   // window [j.Start+start, j.Start+end), ns
	placed     float64 // payload counted, bytes
}

// newGoodputMeter measures from start to end ns after j's start. The
// window ends a link delay before the run does (s's LinkDelay, the last
// hop's wire) so that every packet serialised within it has arrived when
// a run that stops end ns after the start ends.
func newGoodputMeter(s *sim.Sim, j *job, start, end int64) *goodputMeter {
	return &goodputMeter{j: j, start: start, end: end - s.Config().LinkDelay}
}

// observe counts a packet delivered to a host (sim.Sim.OnRx).
func (g *goodputMeter) observe(pk *sim.Packet) {
	if g.j.Start < 0 {
		return
	}
	if pk.TxStart >= g.j.Start+g.start && pk.TxEnd < g.j.Start+g.end {
		g.placed += float64(pk.Placed)
	}
}

// window is the window's length, ns.
func (g *goodputMeter) window() int64 { return g.end - g.start }

// gbps is the payload counted per link, Gb/s, over links host links.
func (g *goodputMeter) gbps(links int) float64 {
	if g.window() <= 0 {
		return 0 // a link delay as long as the run leaves no window
	}
	return g.placed * 8 / float64(g.window()) / float64(links)
}

// frac is the payload counted as a fraction of what links host links
// carry at rate payload bytes per second each in the window.
func (g *goodputMeter) frac(links int, rate float64) float64 {
	if g.window() <= 0 {
		return 0
	}
	return g.placed / (float64(g.window()) / 1e9) / float64(links) / rate
}
