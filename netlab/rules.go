package netlab

import (
	"fmt"
	"sort"
	"strings"
)

// AllLinks as a Link's Index selects every spine link of the plane (for SetLoss).
const AllLinks = -1

// Link names one spine link: Index (0..Links-1) of Plane.
type Link struct {
	Plane, Index int
}

// planeRules is the fault state of one plane's s1; it is rendered whole into
// one nftables transaction, so rules never half-apply.
type planeRules struct {
	lossAll   float64         // percent, every link
	loss      map[int]float64 // percent per link
	blackhole map[int]bool
	ce        map[int]bool
	ceOver    map[int]int  // MB/s above which traffic is CE-marked
	rate      map[int]int  // MB/s above which traffic is dropped
	down      map[int]bool // links SetLinkDown took down (not a rule)
}

// render returns the nft script for the plane: a fresh table with one chain
// on the forward hook. Rule order: black holes, then loss, then rate caps, then
// CE marking, so a dropped packet is never counted as marked.
func (r *planeRules) render() string {
	var b strings.Builder
	b.WriteString("flush ruleset\ntable inet metaroce {\n\tchain faults {\n\t\ttype filter hook forward priority 0; policy accept;\n")
	rule := func(format string, args ...any) {
		b.WriteString("\t\t")
		fmt.Fprintf(&b, format, args...)
		b.WriteString("\n")
	}
	for _, i := range keys(r.blackhole) {
		rule(`oifname "a%d" drop`, i)
	}
	if r.lossAll > 0 {
		// s1 also forwards the h2→h1 direction (out of its host port
		// "h"); matching the spine ports "a0", "a1", … keeps the loss on
		// h1→h2 as on a single link, so acknowledgements are not lost.
		rule(`oifname "a*" numgen random mod 10000 < %d drop`, basisPoints(r.lossAll))
	}
	for _, i := range keys(r.loss) {
		rule(`oifname "a%d" numgen random mod 10000 < %d drop`, i, basisPoints(r.loss[i]))
	}
	for _, i := range keys(r.rate) {
		rule(`oifname "a%d" limit rate over %d mbytes/second drop`, i, r.rate[i])
	}
	for _, i := range keys(r.ce) {
		rule(`oifname "a%d" ip ecn != not-ect ip ecn set ce`, i)
	}
	for _, i := range keys(r.ceOver) {
		rule(`oifname "a%d" ip ecn != not-ect limit rate over %d mbytes/second ip ecn set ce`, i, r.ceOver[i])
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// basisPoints converts a percentage to hundredths of a percent, the
// resolution of the loss rules.
func basisPoints(pct float64) int { return int(pct*100 + 0.5) }

// keys returns the map's keys in increasing order, for a stable rendering.
func keys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// setKey stores v under k in *m (allocating it), or deletes k when del is set.
func setKey[V any](m *map[int]V, k int, v V, del bool) {
	if del {
		delete(*m, k)
		return
	}
	if *m == nil {
		*m = make(map[int]V)
	}
	(*m)[k] = v
}

// change validates link, applies edit to its plane's rules and reloads them.
func (l *Lab) change(link Link, allowAll bool, edit func(r *planeRules)) error {
	if err := l.checkLink(link, allowAll); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("netlab: lab %s is closed", l.id)
	}
	edit(&l.rules[link.Plane])
	return l.applyRulesLocked(link.Plane)
}

// checkLink validates a link name against the lab's shape.
func (l *Lab) checkLink(link Link, allowAll bool) error {
	if link.Plane < 0 || link.Plane >= l.planes {
		return fmt.Errorf("netlab: plane %d out of range 0..%d", link.Plane, l.planes-1)
	}
	if !(allowAll && link.Index == AllLinks) && (link.Index < 0 || link.Index >= l.links) {
		return fmt.Errorf("netlab: link %d out of range 0..%d", link.Index, l.links-1)
	}
	return nil
}

func (l *Lab) applyRules(p int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applyRulesLocked(p)
}

func (l *Lab) applyRulesLocked(p int) error {
	_, err := run(l.rules[p].render(), "ip", "netns", "exec", l.switchNS(p, 1), "nft", "-f", "-")
	return err
}

// Rules returns the nftables script currently loaded on plane's s1.
func (l *Lab) Rules(plane int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rules[plane].render()
}

// SetLoss drops pct percent (0..100, resolution 0.01) of the packets that s1
// forwards onto link, chosen at random by the kernel; link.Index AllLinks
// applies it to every spine link of the plane. Like every fault rule it acts
// on the h1→h2 direction only. 0 removes the rule.
func (l *Lab) SetLoss(link Link, pct float64) error {
	if pct < 0 || pct > 100 {
		return fmt.Errorf("netlab: loss %v%% out of range 0..100", pct)
	}
	return l.change(link, true, func(r *planeRules) {
		if link.Index == AllLinks {
			r.lossAll = pct
			return
		}
		setKey(&r.loss, link.Index, pct, pct == 0)
	})
}

// Blackhole silently drops (on) or passes again (off) everything s1 forwards
// onto link. The ECMP route keeps hashing flows onto the link: a silent
// failure, which only end-to-end path health can detect.
func (l *Lab) Blackhole(link Link, on bool) error {
	return l.change(link, false, func(r *planeRules) { setKey(&r.blackhole, link.Index, true, !on) })
}

// MarkCE sets CE on every ECN-capable packet s1 forwards onto link (on), or
// stops marking (off).
func (l *Lab) MarkCE(link Link, on bool) error {
	return l.change(link, false, func(r *planeRules) { setKey(&r.ce, link.Index, true, !on) })
}

// MarkCEOver marks CE on the ECN-capable traffic onto link above mbytesPerSec
// megabytes per second, a crude congested queue; 0 removes the rule.
func (l *Lab) MarkCEOver(link Link, mbytesPerSec int) error {
	if mbytesPerSec < 0 {
		return fmt.Errorf("netlab: negative rate %d", mbytesPerSec)
	}
	return l.change(link, false, func(r *planeRules) { setKey(&r.ceOver, link.Index, mbytesPerSec, mbytesPerSec == 0) })
}

// RateCap drops the traffic onto link above mbytesPerSec megabytes per second;
// 0 removes the cap.
func (l *Lab) RateCap(link Link, mbytesPerSec int) error {
	if mbytesPerSec < 0 {
		return fmt.Errorf("netlab: negative rate %d", mbytesPerSec)
	}
	return l.change(link, false, func(r *planeRules) { setKey(&r.rate, link.Index, mbytesPerSec, mbytesPerSec == 0) })
}

// SetLinkDown takes both ends of link administratively down (down) or up
// again, as a link flap does. Unlike Blackhole, the switches see it: the
// ECMP routes stop using the link and its flows move to the other links.
// When every spine link of a plane is down the plane has no route (the
// kernel deletes a multipath route whose every nexthop died); the first
// link to come back brings it back, as a routing protocol would.
func (l *Lab) SetLinkDown(link Link, down bool) error {
	if err := l.checkLink(link, false); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("netlab: lab %s is closed", l.id)
	}
	state := "up"
	if down {
		state = "down"
	}
	if _, err := run("", "ip", "-n", l.switchNS(link.Plane, 1), "link", "set", fmt.Sprintf("a%d", link.Index), state); err != nil {
		return err
	}
	if _, err := run("", "ip", "-n", l.switchNS(link.Plane, 2), "link", "set", fmt.Sprintf("b%d", link.Index), state); err != nil {
		return err
	}
	r := &l.rules[link.Plane]
	setKey(&r.down, link.Index, true, !down)
	if down {
		return nil
	}
	// The kernel revives the nexthops of a route that survived, but a
	// route whose every link went down is gone: put it back, over the
	// links that are up.
	for side := 1; side <= 2; side++ {
		if err := ipBatch(l.switchNS(link.Plane, side), []string{l.spineRoute(link.Plane, side, r.down)}); err != nil {
			return err
		}
	}
	return nil
}
