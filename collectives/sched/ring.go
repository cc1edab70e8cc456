package sched

// ringLayout describes where the blocks of a ring collective live on one rank.
// Block b holds elements [start[b], start[b]+size of b) of the logical vector,
// and is carried as the messages pieces[b].
type ringLayout struct {
	start  []int64
	pieces [][]piece
}

// newRingLayout cuts total elements, starting at element base, into parts
// nearly equal blocks, each over the channels and into chunks, and returns
// the layout and the largest block.
func newRingLayout(base, total int64, parts, channels int, chunk int64) (*ringLayout, int64) {
	starts, lens := splitEven(total, parts)
	l := &ringLayout{start: starts, pieces: make([][]piece, parts)}
	var maxBlock int64
	for i := range parts {
		l.start[i] += base
		l.pieces[i] = pieces(lens[i], channels, chunk)
		maxBlock = max(maxBlock, lens[i])
	}
	return l, maxBlock
}

// elems returns the element range of piece pc of block blk.
func (l *ringLayout) at(blk int, pc piece) (off, n int64) { return l.start[blk] + pc.off, pc.len }

// ringMembers is a ring of ranks: the ranks in ring order and this rank's
// position among them. Block b of a ring collective belongs to position b.
type ringMembers struct {
	ranks []int
	pos   int
}

// wholeRing is the ring of all ranks of b's plan in rank order.
func wholeRing(b *builder) ringMembers {
	ranks := make([]int, b.p.NRanks)
	for i := range ranks {
		ranks[i] = i
	}
	return ringMembers{ranks: ranks, pos: b.p.Rank}
}

// neighbours returns the ranks this position sends to and receives from.
func (m ringMembers) neighbours() (right, left int) {
	n := len(m.ranks)
	return m.ranks[mod(m.pos+1, n)], m.ranks[mod(m.pos-1, n)]
}

// ringReduceScatter emits the reduce-scatter phase of a ring of n members,
// its rounds numbered from roundBase: n-1 steps; at step s position r sends
// block r-s-1 to r+1 and receives block r-s-2 from r-1, which it reduces with
// its own contribution. After the last step position r holds the fully
// reduced block r at result(n-2, r, pc).
//
//	input(blk, pc):      this rank's contribution to the piece, asked for
//	                     once per piece, right before its first use
//	landing(s, blk, pc): where the piece received at step s lands
//	result(s, blk, pc):  where the reduction of step s is stored (and sent from
//	                     at step s+1)
func ringReduceScatter(b *builder, m ringMembers, roundBase int, l *ringLayout, input func(blk int, pc piece) Range,
	landing, result func(s, blk int, pc piece) Range) {
	n, r := len(m.ranks), m.pos
	right, left := m.neighbours()
	for s := 0; s < n-1; s++ {
		b.round = roundBase + s
		sb, rb := mod(r-s-1, n), mod(r-s-2, n)
		for _, pc := range l.pieces[sb] {
			var src Range
			if s == 0 {
				src = input(sb, pc)
			} else {
				src = result(s-1, sb, pc)
			}
			b.send(right, pc.ch, src)
		}
		for _, pc := range l.pieces[rb] {
			land := landing(s, rb, pc)
			b.recv(left, pc.ch, land)
			b.reduce(result(s, rb, pc), land, input(rb, pc))
		}
	}
}

// ringAllGather emits the all-gather phase of a ring of n members: n-1
// steps; at step s position r sends block r-s to r+1 (its own block first,
// from own) and receives block r-s-1 from r-1 into out.
func ringAllGather(b *builder, m ringMembers, roundBase int, l *ringLayout, own, out func(blk int, pc piece) Range) {
	n, r := len(m.ranks), m.pos
	right, left := m.neighbours()
	for s := 0; s < n-1; s++ {
		b.round = roundBase + s
		sb, rb := mod(r-s, n), mod(r-s-1, n)
		for _, pc := range l.pieces[sb] {
			src := out(sb, pc)
			if s == 0 {
				src = own(sb, pc)
			}
			b.send(right, pc.ch, src)
		}
		for _, pc := range l.pieces[rb] {
			b.recv(left, pc.ch, out(rb, pc))
		}
	}
}

// input returns the buffer that holds the caller's input.
func (b *builder) input() BufferID {
	if b.p.InPlace {
		return BufRecv
	}
	return BufSend
}

// buildRingAllReduce schedules a ring all-reduce: the vector is cut into n
// nearly equal blocks, each block over the channels and into chunks; a
// reduce-scatter leaves block r reduced on rank r (divided by n for avg), and an
// all-gather circulates the reduced blocks. Out of place, pieces land directly
// in BufRecv (no scratch); in place they land in two alternating scratch
// halves of one block each.
func buildRingAllReduce(b *builder, chunk int64) {
	p := b.p
	n := p.NRanks
	l, maxBlock := newRingLayout(0, p.Count, n, p.Channels, chunk)
	in := b.input()
	at := func(buf BufferID) func(int, piece) Range {
		return func(blk int, pc piece) Range { off, k := l.at(blk, pc); return b.rng(buf, off, k) }
	}
	input, out := at(in), at(BufRecv)
	result := func(_ int, blk int, pc piece) Range { return out(blk, pc) }
	landing := result
	if p.InPlace {
		p.ScratchBytes = 2 * maxBlock * b.esize
		landing = func(s, _ int, pc piece) Range { return b.rng(BufScratch, int64(s%2)*maxBlock+pc.off, pc.len) }
	}
	if n == 1 {
		b.copyInput()
		return
	}
	ring := wholeRing(b)
	ringReduceScatter(b, ring, 0, l, input, landing, result)
	if p.Op.Elementwise() != p.Op {
		b.round = n - 1
		for _, pc := range l.pieces[p.Rank] {
			b.scale(out(p.Rank, pc), n)
		}
	}
	ringAllGather(b, ring, n-1, l, out, out)
}

// buildRingReduceScatter schedules a ring reduce-scatter of n blocks of Count
// elements. Partial sums travel through two alternating scratch blocks, in
// place as out of place, so that the input is only read: in place, the blocks
// of BufRecv other than this rank's keep the caller's data, as NCCL's const
// send buffer does; the last step writes the result block straight into
// place.
func buildRingReduceScatter(b *builder, chunk int64) {
	p := b.p
	n, cnt := p.NRanks, p.Count
	l := &ringLayout{start: make([]int64, n), pieces: make([][]piece, n)}
	pcs := pieces(cnt, p.Channels, chunk)
	for i := range n {
		l.start[i], l.pieces[i] = int64(i)*cnt, pcs
	}
	in := b.input()
	input := func(blk int, pc piece) Range { off, k := l.at(blk, pc); return b.rng(in, off, k) }
	p.ScratchBytes = 2 * cnt * b.esize
	if b.preMul {
		// A floating-point average: each piece of the input
		// is scaled by 1/n right before its one use (the first send, or
		// the reduction into a received partial sum) into one of two
		// block-sized slots after the partial sums, the blocks taking
		// the slots in turn, so that scaling the next block overlaps
		// with the reduction of this one.
		p.ScratchBytes += 2 * cnt * b.esize
		slot, next := map[int]int64{}, int64(0)
		input = func(blk int, pc piece) Range {
			at, ok := slot[blk]
			if !ok {
				at, next = next, 1-next
				slot[blk] = at
			}
			off, k := l.at(blk, pc)
			dst := b.rng(BufScratch, (2+at)*cnt+pc.off, k)
			b.preMultiply(dst, b.rng(in, off, k), k)
			return dst
		}
	}
	outOff := int64(0)
	if p.InPlace {
		outOff = int64(p.Rank) * cnt
	}
	final := func(pc piece) Range { return b.rng(BufRecv, outOff+pc.off, pc.len) }
	landing := func(s, _ int, pc piece) Range { return b.rng(BufScratch, int64(s%2)*cnt+pc.off, pc.len) }
	result := func(s, blk int, pc piece) Range {
		if s == n-2 {
			return final(pc)
		}
		return landing(s, blk, pc)
	}
	if n == 1 {
		p.ScratchBytes = 0
		b.copy(b.rng(BufRecv, 0, cnt), b.rng(in, 0, cnt))
		return
	}
	ringReduceScatter(b, wholeRing(b), 0, l, input, landing, result)
	if p.Op.Elementwise() != p.Op {
		b.round = n - 1
		for _, pc := range pcs {
			b.scale(final(pc), n)
		}
	}
}

// buildRingAllGather schedules a ring all-gather of n blocks of Count elements
// into BufRecv; out of place, the own block is first copied into place.
func buildRingAllGather(b *builder, chunk int64) {
	p := b.p
	n, cnt := p.NRanks, p.Count
	l := &ringLayout{start: make([]int64, n), pieces: make([][]piece, n)}
	pcs := pieces(cnt, p.Channels, chunk)
	for i := range n {
		l.start[i], l.pieces[i] = int64(i)*cnt, pcs
	}
	out := func(blk int, pc piece) Range { off, k := l.at(blk, pc); return b.rng(BufRecv, off, k) }
	own := out
	if !p.InPlace {
		own = func(_ int, pc piece) Range { return b.rng(BufSend, pc.off, pc.len) }
		b.copy(b.rng(BufRecv, int64(p.Rank)*cnt, cnt), b.rng(BufSend, 0, cnt))
	}
	ringAllGather(b, wholeRing(b), 0, l, own, out)
}
