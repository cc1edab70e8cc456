package sched

// buildHalvingDoubling schedules Rabenseifner's all-reduce (Thakur,
// Rabenseifner, Gropp 2005, §4.2): a reduce-scatter by recursive halving
// followed by an all-gather by recursive doubling. With p the largest power
// of two ≤ n, each rank sends and receives 2(p-1)/p of the vector, as in the
// ring, but in 2·log2(p) messages per channel instead of 2(n-1): four instead
// of six at 4 ranks, twelve instead of 126 at 64. Every message costs a
// software datapath a fixed amount of CPU (control datagrams, system calls,
// wake-ups), and each is one more latency on the critical path.
//
// Ranks beyond p fold in and out as in buildRecursiveDoubling: the first
// 2·rem ranks pair up, the even one hands its whole vector to the odd one
// and gets the result back at the end. That costs a whole-vector transfer
// each way, so ChooseAlgorithm takes this algorithm only for powers of two.
//
// Within the p ranks (new rank q), a channel's share of the vector is cut
// into p blocks; in round k of the reduce-scatter (k = 1..log2 p) rank q
// keeps the half of its current block range on q's side of bit log2(p)-k,
// sends the other half to partner q ^ 2^(log2(p)-k) and reduces the
// partner's copy of the kept half into its own. Afterwards q owns block q,
// fully reduced by q alone, so every rank ends with the same bits. The
// all-gather then doubles the owned range each round with the partner at
// distance 1, 2, 4, ... Every round's halves are cut into chunks, so the
// reduction of one chunk overlaps the transfer of the next and the next
// round starts on the chunks already reduced.
func buildHalvingDoubling(b *builder, chunk int64) {
	p := b.p
	n, r := p.NRanks, p.Rank
	pow, rem, logp := foldShape(n)
	offs, lens := splitEven(p.Count, p.Channels)
	in := b.input()
	if n > 1 {
		// Two landing slots (see land below).
		p.ScratchBytes = 2 * p.Count * b.esize
	}
	// One partner per round; a round's receives are posted while the
	// previous round's last chunks may still be arriving.
	p.recvConcurrency = 2
	for c := range p.Channels {
		if lens[c] == 0 {
			continue
		}
		base := offs[c]
		// span returns the elements of blocks [lo, hi) of this channel's
		// share, relative to the share.
		bOffs, bLens := splitEven(lens[c], pow)
		span := func(lo, hi int) (int64, int64) {
			return bOffs[lo], bOffs[hi-1] + bLens[hi-1] - bOffs[lo]
		}
		input := func(off, k int64) Range { return b.rng(in, base+off, k) }
		acc := func(off, k int64) Range { return b.rng(BufRecv, base+off, k) }
		// The reduce-scatter's rounds land in two slots by turns, so a
		// round's receives are posted once the round before last was
		// reduced, a round before their data can come. In one slot each
		// round's receives waited for the last round's reductions, and
		// then for their announcement to reach the partner: over 64
		// simulated hosts a 256 KiB all-reduce took 85.4 µs instead of
		// 72.8, a 1 MiB one 145.5 instead of 139.6.
		land := func(off, k int64) Range { return b.rng(BufScratch, int64(b.round%2)*p.Count+base+off, k) }
		haveAcc := false
		newRank := r - rem
		b.round = 0
		if r < 2*rem {
			if r%2 == 0 {
				b.send(r+1, c, input(0, lens[c]))
				b.round = 2*logp + 1
				b.recv(r+1, c, acc(0, lens[c]))
				continue
			}
			b.recv(r-1, c, land(0, lens[c]))
			b.reduce(acc(0, lens[c]), input(0, lens[c]), land(0, lens[c]))
			haveAcc, newRank = true, r/2
		}
		// src returns where the current partial sums of a range live.
		src := func(off, k int64) Range {
			if haveAcc {
				return acc(off, k)
			}
			return input(off, k)
		}
		lo, hi := 0, pow
		round := 1
		for mask := pow >> 1; mask > 0; mask >>= 1 {
			b.round = round
			round++
			partner := foldedRank(newRank^mask, rem)
			mid := (lo + hi) / 2
			keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
			if newRank&mask != 0 {
				keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
			}
			so, sn := span(sendLo, sendHi)
			for _, pc := range pieces(sn, 1, chunk) {
				b.send(partner, c, src(so+pc.off, pc.len))
			}
			ko, kn := span(keepLo, keepHi)
			for _, pc := range pieces(kn, 1, chunk) {
				o := ko + pc.off
				b.recv(partner, c, land(o, pc.len))
				b.reduce(acc(o, pc.len), src(o, pc.len), land(o, pc.len))
			}
			haveAcc = true
			lo, hi = keepLo, keepHi
		}
		if !haveAcc {
			// One rank (n = 1): nothing was exchanged.
			b.copy(acc(0, lens[c]), input(0, lens[c]))
		}
		if p.Op.Elementwise() != p.Op {
			b.round = round
			o, k := span(lo, hi)
			b.scale(acc(o, k), n)
		}
		for mask := 1; mask < pow; mask <<= 1 {
			b.round = round
			round++
			partner := foldedRank(newRank^mask, rem)
			// The partner owns the same-sized range on the other side of
			// this bit.
			size := hi - lo
			plo := lo + size
			if newRank&mask != 0 {
				plo = lo - size
			}
			so, sn := span(lo, hi)
			for _, pc := range pieces(sn, 1, chunk) {
				b.send(partner, c, acc(so+pc.off, pc.len))
			}
			ro, rn := span(plo, plo+size)
			for _, pc := range pieces(rn, 1, chunk) {
				b.recv(partner, c, acc(ro+pc.off, pc.len))
			}
			lo, hi = min(lo, plo), max(hi, plo+size)
		}
		if r < 2*rem {
			b.round = round
			b.send(r-1, c, acc(0, lens[c]))
		}
	}
}
