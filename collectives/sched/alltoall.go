package sched

// buildPairwiseAllToAll schedules all-to-all as n-1 shifted rounds: in round s
// rank r sends its block for rank (r+s)%n and receives the block from rank
// (r-s+n)%n. Every rank has exactly one destination per round and every rank
// is the destination of exactly one sender, so no receiver sees incast while
// the rounds stay in step. Each round of a given piece lane (channel × chunk)
// waits for the send and receive of the round w rounds earlier on that lane,
// where w = inFlight / lanes (at least 1): with w = 1 the rounds run in
// lockstep; a wider window lets w rounds overlap, so a receiver may take up to
// w senders at once, and a rank's transfers complete in batches that one
// wake-up handles. Blocks of many lanes already keep that many messages in
// flight per round and stay in lockstep. Out of place, blocks land directly in
// BufRecv; in place they land in scratch and are copied home once the rank's
// own block for that peer has been sent.
func buildPairwiseAllToAll(b *builder, chunk int64, inFlight int) {
	p := b.p
	n, r, cnt := p.NRanks, p.Rank, p.Count
	pcs := pieces(cnt, p.Channels, chunk)
	in := b.input()
	blk := func(buf BufferID, peer int, pc piece) Range { return b.rng(buf, int64(peer)*cnt+pc.off, pc.len) }
	if !p.InPlace {
		b.copy(b.rng(BufRecv, int64(r)*cnt, cnt), b.rng(BufSend, int64(r)*cnt, cnt))
	} else if n > 1 {
		p.ScratchBytes = int64(n) * cnt * b.esize
	}
	window := max(inFlight/max(len(pcs), 1), 1)
	// A receiver has the receives of window rounds posted at once, each
	// round's from one sender: that many peers can send to it together.
	p.recvConcurrency = window
	// sent[s][i] and got[s][i] are the step indices of round s's send and
	// receive on lane i (-1 where none was emitted).
	sent, got := make([][]int, n), make([][]int, n)
	for s := 1; s < n; s++ {
		b.round = s
		to, from := mod(r+s, n), mod(r-s, n)
		sent[s], got[s] = make([]int, len(pcs)), make([]int, len(pcs))
		for i, pc := range pcs {
			ps, pr := -1, -1
			if w := s - window; w >= 1 {
				ps, pr = sent[w][i], got[w][i]
			}
			sent[s][i] = b.send(to, pc.ch, blk(in, to, pc), ps, pr)
			land := blk(BufRecv, from, pc)
			if p.InPlace {
				land = blk(BufScratch, from, pc)
			}
			got[s][i] = b.recv(from, pc.ch, land, ps, pr)
		}
	}
	if p.InPlace {
		b.round = n
		for s := 1; s < n; s++ {
			from := mod(r-s, n)
			for _, pc := range pcs {
				b.copy(blk(BufRecv, from, pc), blk(BufScratch, from, pc))
			}
		}
	}
}
