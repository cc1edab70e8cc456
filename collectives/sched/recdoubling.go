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
//
// The rounds alternate between two landing slots and two accumulators (the
// output and a spare; scratch of three vectors), so that a round costs one
// message latency: its receive is announced a round ahead, and its
// reduction does not wait for the acknowledgement of the round's send,
// which reads the other accumulator. With one slot and one accumulator
// each round waited for that acknowledgement and then for its own
// announcement to reach the partner: over 64 simulated hosts a 64 KiB
// all-reduce took 74.6 µs instead of 43.4 (RoCEv2 with PFC on the same
// plans 66.4 and 38.8), an 8 KiB one 58.8 instead of 32.4.
func buildRecursiveDoubling(b *builder) {
	p := b.p
	n, r := p.NRanks, p.Rank
	pow, rem, logp := foldShape(n)
	offs, lens := splitEven(p.Count, p.Channels)
	in := b.input()
	if n > 1 {
		p.ScratchBytes = 3 * p.Count * b.esize
	}
	p.recvConcurrency = p.Channels
	for c := range p.Channels {
		if lens[c] == 0 {
			continue
		}
		input := b.rng(in, offs[c], lens[c])
		out := b.rng(BufRecv, offs[c], lens[c])
		// Two landing slots and two accumulators, alternating by round:
		// round k's receive is posted once round k-2's reduction read its
		// slot, a round before its data can come, and round k's reduction
		// does not wait for round k's send (of the other accumulator) to
		// be acknowledged. The last round's accumulator is the output.
		land := func(k int) Range { return b.rng(BufScratch, int64(k%2)*p.Count+offs[c], lens[c]) }
		spare := b.rng(BufScratch, 2*p.Count+offs[c], lens[c])
		acc := func(k int) Range {
			if (logp-k)%2 == 0 {
				return out
			}
			return spare
		}
		var cur Range // where the partial sums are, once there are any
		haveAcc := false
		newRank := r - rem
		b.round = 0
		if r < 2*rem {
			if r%2 == 0 {
				b.send(r+1, c, input)
				b.round = logp + 1
				b.recv(r+1, c, out)
				continue
			}
			b.recv(r-1, c, land(0))
			cur = acc(0)
			b.reduce(cur, input, land(0))
			haveAcc, newRank = true, r/2
		}
		for mask, round := 1, 1; mask < pow; mask, round = mask<<1, round+1 {
			b.round = round
			partner := foldedRank(newRank^mask, rem)
			src := input
			if haveAcc {
				src = cur
			}
			b.send(partner, c, src)
			b.recv(partner, c, land(round))
			cur = acc(round)
			b.reduce(cur, src, land(round))
			haveAcc = true
		}
		if !haveAcc {
			b.copy(out, input)
		}
		b.round = logp
		if p.Op.Elementwise() != p.Op {
			b.scale(out, n)
		}
		if r < 2*rem {
			b.round++
			b.send(r-1, c, out)
		}
	}
}

// foldShape returns, for n ranks, the largest power of two pow ≤ n, the
// rem = n - pow ranks folded into it, and log2(pow).
func foldShape(n int) (pow, rem, logp int) {
	pow = 1 << (bits.Len(uint(n)) - 1)
	return pow, n - pow, bits.Len(uint(pow)) - 1
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
