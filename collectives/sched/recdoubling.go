package sched

import "math/bits"

// buildRecursiveDoubling schedules the latency-optimal all-reduce: with p the
// largest power of two ≤ n and rem = n-p, the first 2·rem ranks pair up (even
// rank r sends its vector to r+1 and waits for the result), the remaining p
// ranks exchange and reduce whole vectors with the partner at distance 1, 2, 4,
// ... in log2(p) rounds, and finally each odd rank below 2·rem returns the result
// to its even partner (Thakur, Rabenseifner, Gropp 2005, §4.1). Each channel
// carries an equal share of the vector; shares are not chunked, since this
// algorithm is for buffers below AutoRecursiveDoublingMaxBytes. Partners always
// reduce "own op other", so every rank computes bit-identical results.
func buildRecursiveDoubling(b *builder) {
	p := b.p
	n, r := p.NRanks, p.Rank
	pow := 1 << (bits.Len(uint(n)) - 1)
	rem := n - pow
	offs, lens := splitEven(p.Count, p.Channels)
	in := b.input()
	if n > 1 {
		p.ScratchBytes = p.Count * b.esize
	}
	for c := range p.Channels {
		if lens[c] == 0 {
			continue
		}
		input := b.rng(in, offs[c], lens[c])
		acc := b.rng(BufRecv, offs[c], lens[c])
		land := b.rng(BufScratch, offs[c], lens[c])
		haveAcc := false
		newRank := r - rem
		b.round = 0
		if r < 2*rem {
			if r%2 == 0 {
				b.send(r+1, c, input)
				b.round = bits.Len(uint(pow)) + 1
				b.recv(r+1, c, acc)
				continue
			}
			b.recv(r-1, c, land)
			b.reduce(acc, input, land)
			haveAcc, newRank = true, r/2
		}
		for mask, round := 1, 1; mask < pow; mask, round = mask<<1, round+1 {
			b.round = round
			partner := foldedRank(newRank^mask, rem)
			src := input
			if haveAcc {
				src = acc
			}
			b.send(partner, c, src)
			b.recv(partner, c, land)
			b.reduce(acc, src, land)
			haveAcc = true
		}
		if !haveAcc {
			b.copy(acc, input)
		}
		b.round = bits.Len(uint(pow))
		if p.Op.Elementwise() != p.Op {
			b.scale(acc, n)
		}
		if r < 2*rem {
			b.round++
			b.send(r-1, c, acc)
		}
	}
}

// foldedRank maps new rank q of the power-of-two core of a folded
// algorithm (rem ranks folded in) back to its rank: the first rem new ranks
// are the odd ranks of the folded pairs, the rest follow them in order.
func foldedRank(q, rem int) int {
	if q < rem {
		return 2*q + 1
	}
	return q + rem
}
