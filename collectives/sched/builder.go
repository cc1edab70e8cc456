package sched

import (
	"slices"
)

// builder appends steps to a plan and derives their dependencies from the bytes
// they touch: a step depends on the last earlier writer of any byte it reads or
// writes (read-after-write, write-after-write) and on every earlier reader of
// any byte it writes since that byte's last write (write-after-read). Algorithms
// therefore only list steps in a valid sequential order; the dependency graph
// then allows exactly the reorderings that cannot change the result.
type builder struct {
	p     *Plan
	esize int64
	live  []access // accesses not yet superseded by a covering write
	seq   map[seqKey]int
	round int
	// recvGate, when ≥ 0, is a step every receive added waits for.
	recvGate int
	// preMul is set for a floating-point average: the input is scaled by
	// 1/NRanks before the algorithm sums it (Build adds those steps), so
	// the algorithms' final scale steps are left out.
	preMul bool
}

// access records one step's read or write of a range.
type access struct {
	r     Range
	step  int
	write bool
}

type seqKey struct {
	peer, channel int
	send          bool
}

func newBuilder(p *Plan) *builder {
	return &builder{p: p, esize: p.ElemSize(), seq: make(map[seqKey]int), recvGate: -1}
}

// add appends s with its derived dependencies plus extra, and returns its index,
// or -1 when s moves no bytes (zero-length ranges are dropped on both sides of a
// message alike, so matching is unaffected).
func (b *builder) add(s Step, extra ...int) int {
	if s.Kind != KindScale && b.length(&s) == 0 {
		return -1
	}
	if s.Kind == KindScale && s.Dst.Len == 0 {
		return -1
	}
	idx := len(b.p.Steps)
	s.Round = b.round
	var deps []int
	for _, e := range extra {
		if e >= 0 {
			deps = append(deps, e)
		}
	}
	for _, r := range s.Reads() {
		for _, a := range b.live {
			if a.write && a.r.Overlaps(r) {
				deps = append(deps, a.step)
			}
		}
	}
	w, writes := s.Writes()
	if writes {
		for _, a := range b.live {
			if a.r.Overlaps(w) {
				deps = append(deps, a.step)
			}
		}
	}
	slices.Sort(deps)
	s.Deps = slices.Compact(deps)
	if s.Kind == KindSend || s.Kind == KindRecv {
		k := seqKey{s.Peer, s.Channel, s.Kind == KindSend}
		s.Seq = b.seq[k]
		b.seq[k]++
	}
	b.p.Steps = append(b.p.Steps, s)

	// A covering write supersedes older accesses: anything later that touches
	// those bytes depends on this write, which already depends on them.
	if writes {
		b.live = slices.DeleteFunc(b.live, func(a access) bool { return w.Covers(a.r) })
	}
	for _, r := range s.Reads() {
		if !(writes && w == r) {
			b.live = append(b.live, access{r: r, step: idx})
		}
	}
	if writes {
		b.live = append(b.live, access{r: w, step: idx, write: true})
	}
	return idx
}

// length is the bytes a step moves.
func (b *builder) length(s *Step) int64 {
	if s.Kind == KindSend {
		return s.Src.Len
	}
	return s.Dst.Len
}

func (b *builder) send(peer, ch int, src Range, extra ...int) int {
	return b.add(Step{Kind: KindSend, Peer: peer, Channel: ch, Src: src}, extra...)
}

func (b *builder) recv(peer, ch int, dst Range, extra ...int) int {
	if b.recvGate >= 0 {
		extra = append(extra, b.recvGate)
	}
	return b.add(Step{Kind: KindRecv, Peer: peer, Channel: ch, Dst: dst}, extra...)
}

func (b *builder) reduce(dst, src, src2 Range) int {
	return b.add(Step{Kind: KindReduce, Dst: dst, Src: src, Src2: src2})
}

// copyInput copies the whole input into place (a collective of one rank).
func (b *builder) copyInput() int {
	return b.copy(b.rng(BufRecv, 0, b.p.Count), b.rng(b.input(), 0, b.p.Count))
}

// copy adds a copy unless src and dst are the same bytes.
func (b *builder) copy(dst, src Range) int {
	if dst == src {
		return -1
	}
	return b.add(Step{Kind: KindCopy, Dst: dst, Src: src})
}

func (b *builder) scale(dst Range, n int) int {
	if n <= 1 || b.preMul {
		return -1
	}
	return b.add(Step{Kind: KindScale, Dst: dst, Divisor: n})
}

// preMultiply adds the steps that set dst = src × 1/NRanks, in pieces of at
// most chunk elements: later steps then wait only for the pieces they read.
func (b *builder) preMultiply(dst, src Range, chunk int64) {
	step := chunk * b.esize
	for off := int64(0); off < dst.Len; off += step {
		l := min(step, dst.Len-off)
		b.add(Step{Kind: KindPreMul, Divisor: b.p.NRanks,
			Dst: Range{Buf: dst.Buf, Off: dst.Off + off, Len: l},
			Src: Range{Buf: src.Buf, Off: src.Off + off, Len: l}})
	}
}

// rng makes a byte range from an element offset and count.
func (b *builder) rng(buf BufferID, offElems, nElems int64) Range {
	return Range{Buf: buf, Off: offElems * b.esize, Len: nElems * b.esize}
}

// piece is a contiguous run of elements carried by one message: Off is relative
// to the start of the block it belongs to.
type piece struct {
	ch       int
	off, len int64 // elements
}

// splitEven divides total elements into parts nearly equal runs (the first
// total%parts runs get one more) and returns their starts and lengths.
func splitEven(total int64, parts int) (offs, lens []int64) {
	offs, lens = make([]int64, parts), make([]int64, parts)
	q, r := total/int64(parts), total%int64(parts)
	var off int64
	for i := range parts {
		l := q
		if int64(i) < r {
			l++
		}
		offs[i], lens[i] = off, l
		off += l
	}
	return offs, lens
}

// pieces splits a block of n elements over the channels (nearly equal shares)
// and each share into chunks of at most chunk elements.
func pieces(n int64, channels int, chunk int64) []piece {
	var out []piece
	offs, lens := splitEven(n, channels)
	for c := range channels {
		for o := int64(0); o < lens[c]; o += chunk {
			out = append(out, piece{ch: c, off: offs[c] + o, len: min(chunk, lens[c]-o)})
		}
	}
	return out
}

// roundRobinPieces splits n elements into chunks of at most chunk elements and
// deals them to the channels in turn, so that a pipeline keeps every channel
// busy from the first chunk on.
func roundRobinPieces(n int64, channels int, chunk int64) []piece {
	var out []piece
	for i, o := 0, int64(0); o < n; i, o = i+1, o+chunk {
		out = append(out, piece{ch: i % channels, off: o, len: min(chunk, n-o)})
	}
	return out
}

func mod(a, n int) int { return ((a % n) + n) % n }
