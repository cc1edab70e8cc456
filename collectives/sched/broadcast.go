package sched

// buildChainBroadcast schedules broadcast as a chunked pipeline along the ring
// starting at the root: the root sends each chunk to root+1, every other rank
// receives it into BufRecv and forwards it to the next rank, except the last.
// Chunks are dealt to the channels in turn. A chunk's Round is its index, so
// chunk k leaves the root while chunk k-1 is one hop further on.
func buildChainBroadcast(b *builder, chunk int64) {
	p := b.p
	n, r := p.NRanks, p.Rank
	pos := mod(r-p.Root, n)
	next, prev := mod(r+1, n), mod(r-1, n)
	pcs := roundRobinPieces(p.Count, p.Channels, chunk)
	if pos == 0 {
		in := b.input()
		for k, pc := range pcs {
			b.round = k
			if n > 1 {
				b.send(next, pc.ch, b.rng(in, pc.off, pc.len))
			}
			b.copy(b.rng(BufRecv, pc.off, pc.len), b.rng(in, pc.off, pc.len))
		}
		return
	}
	for k, pc := range pcs {
		b.round = k
		dst := b.rng(BufRecv, pc.off, pc.len)
		b.recv(prev, pc.ch, dst)
		if pos < n-1 {
			b.send(next, pc.ch, dst)
		}
	}
}

// buildSendRecv schedules nccl-tests' sendrecv: rank r sends its buffer to r+1
// and receives rank r-1's into BufRecv, chunked over the channels. In place the
// incoming data lands in scratch and is copied home after the outgoing chunk
// has left.
func buildSendRecv(b *builder, chunk int64) {
	p := b.p
	n, r := p.NRanks, p.Rank
	in := b.input()
	if n == 1 {
		b.copyInput()
		return
	}
	pcs := roundRobinPieces(p.Count, p.Channels, chunk)
	land := BufRecv
	if p.InPlace {
		land = BufScratch
		p.ScratchBytes = p.Count * b.esize
	}
	for k, pc := range pcs {
		b.round = k
		b.send(mod(r+1, n), pc.ch, b.rng(in, pc.off, pc.len))
		b.recv(mod(r-1, n), pc.ch, b.rng(land, pc.off, pc.len))
	}
	if p.InPlace {
		for k, pc := range pcs {
			b.round = k
			b.copy(b.rng(BufRecv, pc.off, pc.len), b.rng(BufScratch, pc.off, pc.len))
		}
	}
}

// buildP2P schedules one transfer of Count elements from Root to Peer, chunked
// over the channels; a transfer to oneself is a copy, and other ranks idle.
func buildP2P(b *builder, chunk int64) {
	p := b.p
	in := b.input()
	if p.Root == p.Peer {
		if p.Rank == p.Root {
			b.copyInput()
		}
		return
	}
	for k, pc := range roundRobinPieces(p.Count, p.Channels, chunk) {
		b.round = k
		switch p.Rank {
		case p.Root:
			b.send(p.Peer, pc.ch, b.rng(in, pc.off, pc.len))
		case p.Peer:
			b.recv(p.Root, pc.ch, b.rng(BufRecv, pc.off, pc.len))
		}
	}
}
