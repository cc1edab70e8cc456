package sched

// buildHierarchicalAllReduce schedules a two-level ring all-reduce over
// groups of g consecutive ranks (the ranks under one leaf switch, or on one
// host), l = n/g groups:
//
//  1. a ring reduce-scatter inside each group over g blocks of the vector,
//     after which local position j holds block j reduced over its group;
//  2. a ring all-reduce of block j among the l ranks that hold it, one per
//     group (cut into l sub-blocks: reduce-scatter, then all-gather);
//  3. a ring all-gather of the g blocks inside each group.
//
// Each rank sends and receives 2(g-1)/g + 2(l-1)/(l·g) = 2(n-1)/n of the
// vector, as in the flat ring, in 2(g-1) + 2(l-1) steps instead of 2(n-1):
// 28 instead of 126 for 8 groups of 8. Only phase 2 leaves the group, with
// 1/g of the bytes, and all g of a group's cross rings run at once over
// different ranks, so the group's uplinks carry g parallel flows, where the
// flat ring crosses between groups with one flow per group boundary.
// This is the two-dimensional all-reduce of Mikami et al. (2018) with rings
// in both dimensions.
//
// The builder orders the phases per piece, so the cross-group ring starts
// on each piece as soon as its group reduction is done, and the final
// all-gather on each sub-block as soon as it has come back.
func buildHierarchicalAllReduce(b *builder, chunk int64, group int) {
	p := b.p
	n, r := p.NRanks, p.Rank
	if n == 1 {
		b.copyInput()
		return
	}
	in := b.input()
	g, gl := group, n/group
	// The phases follow one another: a phase's first message leaves as
	// the one before it delivers its last, so one peer sends at a time
	// but for that instant, and each phase starts at the whole link.
	p.recvConcurrency = 1
	mine, j := r/g, r%g
	local := ringMembers{ranks: make([]int, g), pos: j}
	for i := range local.ranks {
		local.ranks[i] = mine*g + i
	}
	cross := ringMembers{ranks: make([]int, gl), pos: mine}
	for i := range cross.ranks {
		cross.ranks[i] = i*g + j
	}

	// Phase 1 blocks, and phase 2 sub-blocks of this rank's block j.
	l1, maxBlock := newRingLayout(0, p.Count, g, p.Channels, chunk)
	_, lens := splitEven(p.Count, g)
	l2, maxSub := newRingLayout(l1.start[j], lens[j], gl, p.Channels, chunk)
	at := func(l *ringLayout, buf BufferID) func(int, piece) Range {
		return func(blk int, pc piece) Range { off, k := l.at(blk, pc); return b.rng(buf, off, k) }
	}
	out1, out2 := at(l1, BufRecv), at(l2, BufRecv)

	// Out of place, phase 1 lands pieces in the output as the flat ring
	// does; in place they land in two alternating scratch slots. Phase 2,
	// whose input is the output, lands each step in a slot of its own
	// (l-1 sub-blocks, about one block), so that all its receives can be
	// posted together once the gate below opens.
	var scratch1 int64
	land1 := func(_, blk int, pc piece) Range { return out1(blk, pc) }
	if p.InPlace {
		scratch1 = 2 * maxBlock
		land1 = func(s, _ int, pc piece) Range { return b.rng(BufScratch, int64(s%2)*maxBlock+pc.off, pc.len) }
	}
	land2 := func(s, _ int, pc piece) Range {
		return b.rng(BufScratch, scratch1+int64(s)*maxSub+pc.off, pc.len)
	}
	p.ScratchBytes = (scratch1 + int64(gl-1)*maxSub) * b.esize

	ringReduceScatter(b, local, 0, l1, at(l1, in), land1, func(_, blk int, pc piece) Range { return out1(blk, pc) })
	// With one rank per group phase 1 did nothing, and phase 2 reads the
	// input itself.
	input2 := out2
	if g == 1 {
		input2 = at(l2, in)
	}
	// The cross-group receives are posted one local step before phase 1
	// ends (at the first step when the group has two ranks), when the
	// cross sender is about to be ready: a MetaRoCE receiver counts a
	// peer whose receive was just posted as an active sender for about
	// two RTTs (docs/spec.md §3.5), so posting them with phase 1's halved
	// the local sender's share for the first 35 µs on the simulated 64-host
	// fabric (1 MiB: 146.1 µs against 137.4 with the gate), and posting
	// them at phase 1's very end delays each cross sender by the
	// announcement's one-way trip (141.4).
	b.recvGate = lastRecvOfRound(p, max(g-3, 0))
	ringReduceScatter(b, cross, g-1, l2, input2, land2, func(_, blk int, pc piece) Range { return out2(blk, pc) })
	round := g - 1 + gl - 1
	if p.Op.Elementwise() != p.Op {
		b.round = round
		for _, pc := range l2.pieces[mine] {
			b.scale(out2(mine, pc), n)
		}
	}
	ringAllGather(b, cross, round, l2, out2, out2)
	b.recvGate = -1
	ringAllGather(b, local, round+gl-1, l1, out1, out1)
}

// lastRecvOfRound returns the index of p's last receive in round k, or -1.
func lastRecvOfRound(p *Plan, k int) int {
	for i := len(p.Steps) - 1; i >= 0; i-- {
		if p.Steps[i].Kind == KindRecv && p.Steps[i].Round == k {
			return i
		}
	}
	return -1
}
