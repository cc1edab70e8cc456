package transporttest

import "github.com/metaroce/metaroce/transport"

// NetConfig describes the scripted network. The zero value is a perfect
// network: no loss, no jitter, infinitely fast links, 2 µs one-way delay.
type NetConfig struct {
	// Seed seeds every random choice of the network and of the endpoints
	// (each endpoint gets its own stream derived from it).
	Seed uint64
	// BaseDelay is the one-way propagation delay of every path. Default 2 µs.
	BaseDelay transport.Time
	// PathSpread adds to each path (sender, receiver, plane, entropy) a
	// fixed extra delay drawn uniformly from [0, PathSpread), so packets on
	// different paths overtake each other.
	PathSpread transport.Time
	// Jitter adds to each packet an extra delay drawn uniformly from
	// [0, Jitter). It never reorders packets of one path unless ReorderInPath.
	Jitter transport.Time
	// ReorderInPath lets jitter reorder packets of one path (a fabric that
	// breaks the core's assumption; used to show the cost).
	ReorderInPath bool
	// Loss is the probability that a packet is dropped at random.
	Loss float64
	// LossOn selects the packets that Loss and Burst apply to; nil means
	// every packet.
	LossOn func(p *Packet) bool
	// Burst is a Gilbert-Elliott bursty-loss channel per ordered node pair;
	// the zero value is off.
	Burst GilbertElliott
	// Dup is the probability that a delivered packet arrives twice.
	Dup float64
	// LinkRate is each node's egress and ingress link rate in bytes per
	// second; 0 means infinitely fast links (no queues).
	LinkRate uint64
	// IngressRate overrides LinkRate for the ingress links (the last switch
	// port before each node), so that a single sender can build a queue;
	// 0 means LinkRate.
	IngressRate uint64
	// WireOverhead is added to each datagram's length on the links, bytes
	// (Ethernet, IP and UDP headers). Default 42.
	WireOverhead int
	// MarkThreshold: a packet that finds more than this many bytes in the
	// receiver's ingress queue is marked CE. 0 disables marking.
	MarkThreshold int
	// QueueLimit: a packet that would make the ingress queue exceed this many
	// bytes is dropped. 0 means unbounded.
	QueueLimit int
	// MaxSteps bounds the work of one Run call, so that a core that never
	// stops scheduling work fails the test instead of hanging. Default 50e6.
	MaxSteps int
}

// GilbertElliott is a two-state bursty-loss channel: in the good state a
// packet is lost with probability LossGood, in the bad state with LossBad;
// before each packet the channel moves good→bad with probability PGoodBad and
// bad→good with probability PBadGood. Mean loss is
// (PBadGood·LossGood + PGoodBad·LossBad)/(PGoodBad+PBadGood) and the mean
// burst length in the bad state 1/PBadGood packets.
type GilbertElliott struct {
	PGoodBad, PBadGood float64
	LossGood, LossBad  float64
}

func (g GilbertElliott) on() bool { return g.PGoodBad > 0 }

// Rule is a scripted fault: every packet that matches it while it is in
// force is dropped. Negative fields match anything.
type Rule struct {
	Src, Dst int // node indices
	Plane    int
	Entropy  int
	// From and Until bound when the rule is in force; Until 0 means forever.
	From, Until transport.Time
}

// AnyRule returns a Rule that matches every packet from time from on; set
// fields to narrow it.
func AnyRule(from transport.Time) Rule {
	return Rule{Src: -1, Dst: -1, Plane: -1, Entropy: -1, From: from}
}

func (r *Rule) match(p *Packet, now transport.Time) bool {
	if now < r.From || (r.Until != 0 && now >= r.Until) {
		return false
	}
	return (r.Src < 0 || r.Src == p.Src) && (r.Dst < 0 || r.Dst == p.Dst) &&
		(r.Plane < 0 || r.Plane == int(p.Route.Plane)) && (r.Entropy < 0 || r.Entropy == int(p.Route.Entropy))
}

func (c NetConfig) withDefaults() NetConfig {
	if c.BaseDelay <= 0 {
		c.BaseDelay = 2 * transport.Microsecond
	}
	if c.WireOverhead <= 0 {
		c.WireOverhead = 42
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = 50_000_000
	}
	return c
}
