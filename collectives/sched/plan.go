package sched

import (
	"fmt"

	"github.com/metaroce/metaroce/collectives/reduce"
)

// BufferID names one of the three byte buffers a rank's plan addresses.
type BufferID uint8

const (
	// BufSend is the caller's input buffer. In-place plans never reference it.
	BufSend BufferID = iota
	// BufRecv is the caller's output buffer (and the input too, in place).
	BufRecv
	// BufScratch is executor-owned memory of Plan.ScratchBytes bytes, used to
	// land data that must not overwrite the caller's buffers yet.
	BufScratch
	numBuffers
)

var bufferNames = [numBuffers]string{"send", "recv", "scratch"}

func (b BufferID) String() string {
	if b >= numBuffers {
		return fmt.Sprintf("buffer(%d)", uint8(b))
	}
	return bufferNames[b]
}

// Range is a byte range [Off, Off+Len) of one buffer. Off and Len are always
// multiples of the plan's element size: a range never splits an element.
type Range struct {
	Buf BufferID
	Off int64 // bytes from the start of Buf
	Len int64 // bytes
}

// End returns the first byte past the range.
func (r Range) End() int64 { return r.Off + r.Len }

// Overlaps reports whether r and o share at least one byte.
func (r Range) Overlaps(o Range) bool {
	return r.Buf == o.Buf && r.Len > 0 && o.Len > 0 && r.Off < o.End() && o.Off < r.End()
}

// Covers reports whether every byte of o lies in r.
func (r Range) Covers(o Range) bool {
	return r.Buf == o.Buf && r.Off <= o.Off && o.End() <= r.End()
}

func (r Range) String() string { return fmt.Sprintf("%s[%d:%d]", r.Buf, r.Off, r.End()) }

// Kind is the operation of a step.
type Kind uint8

const (
	// KindSend sends Src to Peer on Channel as message number Seq.
	KindSend Kind = iota
	// KindRecv receives message number Seq from Peer on Channel into Dst; the
	// message length equals Dst.Len.
	KindRecv
	// KindReduce computes Dst = Src op Src2 elementwise with the plan's DType and
	// Op (OpAvg combines as sum). Dst equals Src, equals Src2, or overlaps neither.
	KindReduce
	// KindCopy copies Src to Dst (same length, no overlap).
	KindCopy
	// KindScale divides every element of Dst by Divisor (the end of an
	// integer average).
	KindScale
	// KindPreMul sets Dst = Src × 1/Divisor elementwise, the factor and each
	// product rounded to the plan's DType (reduce.PreMultiply): the start of a
	// floating-point average, which then sums, as NCCL's does. Src equals Dst
	// or does not overlap it.
	KindPreMul
	numKinds
)

var kindNames = [numKinds]string{"send", "recv", "reduce", "copy", "scale", "premul"}

func (k Kind) String() string {
	if k >= numKinds {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return kindNames[k]
}

// Step is one operation of a rank's plan. Which fields matter depends on Kind;
// the others are zero. A step may start once every step listed in Deps has
// completed; steps with no path of dependencies between them may run
// concurrently.
type Step struct {
	Kind    Kind
	Peer    int   // send, recv: the other rank
	Channel int   // send, recv: 0 ≤ Channel < Plan.Channels
	Seq     int   // send, recv: index of this message among those between the two ranks on Channel in this direction
	Round   int   // the algorithm's step number (ring step, doubling round, all-to-all shift, chunk); informational
	Dst     Range // recv, reduce, copy, scale: the bytes written
	Src     Range // send, copy: the bytes read; reduce: first operand
	Src2    Range // reduce: second operand
	Divisor int   // scale, premul: the divisor (the rank count of an average)
	Deps    []int // indices of earlier steps of the same plan, ascending
}

// Reads returns the ranges the step reads.
func (s *Step) Reads() []Range {
	switch s.Kind {
	case KindSend, KindCopy, KindPreMul:
		return []Range{s.Src}
	case KindReduce:
		return []Range{s.Src, s.Src2}
	case KindScale:
		return []Range{s.Dst}
	}
	return nil
}

// Writes returns the range the step writes, if any.
func (s *Step) Writes() (Range, bool) {
	switch s.Kind {
	case KindRecv, KindReduce, KindCopy, KindScale, KindPreMul:
		return s.Dst, true
	}
	return Range{}, false
}

func (s *Step) String() string {
	switch s.Kind {
	case KindSend:
		return fmt.Sprintf("send %s -> rank %d ch %d seq %d", s.Src, s.Peer, s.Channel, s.Seq)
	case KindRecv:
		return fmt.Sprintf("recv %s <- rank %d ch %d seq %d", s.Dst, s.Peer, s.Channel, s.Seq)
	case KindReduce:
		return fmt.Sprintf("reduce %s = %s op %s", s.Dst, s.Src, s.Src2)
	case KindCopy:
		return fmt.Sprintf("copy %s = %s", s.Dst, s.Src)
	case KindScale:
		return fmt.Sprintf("scale %s /= %d", s.Dst, s.Divisor)
	case KindPreMul:
		return fmt.Sprintf("premul %s = %s / %d", s.Dst, s.Src, s.Divisor)
	}
	return s.Kind.String()
}

// Plan is the schedule of one rank for one collective call: plain data, built
// once and executed by any executor (in-memory, transport, simulator).
type Plan struct {
	Collective Collective
	Algorithm  Algorithm
	Rank       int
	NRanks     int
	Root       int // broadcast and p2p: the source rank
	Peer       int // p2p: the destination rank
	DType      reduce.DType
	Op         reduce.Op
	Count      int64 // elements, with the meaning Config.Count documents
	InPlace    bool
	Channels   int // ≥ 1

	SendBytes    int64 // size BufSend must have (0 in place)
	RecvBytes    int64 // size BufRecv must have
	ScratchBytes int64 // size of BufScratch the executor provides

	Steps []Step

	// recvConcurrency, when positive, is the most peers the algorithm can
	// have sending to this rank at once, where that is fewer than the
	// distinct peers it receives from over the whole plan (RecvPeers).
	recvConcurrency int
}

// RecvPeers returns the most peers that can be sending to this rank at once
// while the plan runs: the distinct ranks it receives from, or fewer where
// the algorithm talks to them one round at a time (AlgoHalvingDoubling: the
// partner of this round and the previous one's, whose last chunks may still
// be arriving). Transports divide their starting rate hints by it.
func (p *Plan) RecvPeers() int {
	seen := map[int]bool{}
	for i := range p.Steps {
		if st := &p.Steps[i]; st.Kind == KindRecv {
			seen[st.Peer] = true
		}
	}
	if p.recvConcurrency > 0 {
		return min(len(seen), p.recvConcurrency)
	}
	return len(seen)
}

// BufferBytes returns the size of buffer b in bytes.
func (p *Plan) BufferBytes(b BufferID) int64 {
	switch b {
	case BufSend:
		return p.SendBytes
	case BufRecv:
		return p.RecvBytes
	case BufScratch:
		return p.ScratchBytes
	}
	return 0
}

// ElemSize returns the element size of the plan's data type in bytes.
func (p *Plan) ElemSize() int64 { return int64(p.DType.Size()) }
