package sched

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/collectives/reduce"
)

// ErrPlan is wrapped by every structural error Validate reports.
var ErrPlan = errors.New("sched: malformed plan")

// msgKey identifies one message: the Seq-th message from Src to Dst on Channel.
type msgKey struct {
	src, dst, channel, seq int
}

// Validate checks the structural invariants of a set of plans, one per rank,
// that executors rely on:
//   - plans[i].Rank == i, and all plans agree on NRanks, Collective, DType,
//     Op, Channels and InPlace;
//   - every range lies inside its buffer, is element-aligned, and in-place
//     plans never address BufSend;
//   - dependencies point to earlier steps only;
//   - reduce and pre-multiply operands either equal the destination or do
//     not overlap it, and a copy's source does not overlap its destination;
//   - peers are other ranks, channels exist, and the sequence numbers on each
//     (peer, channel, direction) count 0, 1, 2, ... in step order;
//   - every send has exactly one receive with the same (src, dst, channel,
//     seq), of the same length, and every receive has its send.
func Validate(plans []*Plan) error {
	if len(plans) == 0 {
		return fmt.Errorf("%w: no plans", ErrPlan)
	}
	first := plans[0]
	sends := make(map[msgKey]int64)
	recvs := make(map[msgKey]int64)
	for r, p := range plans {
		if p == nil {
			return fmt.Errorf("%w: rank %d has no plan", ErrPlan, r)
		}
		if p.Rank != r || p.NRanks != len(plans) {
			return fmt.Errorf("%w: plan %d says rank %d of %d, want rank %d of %d", ErrPlan, r, p.Rank, p.NRanks, r, len(plans))
		}
		if p.Collective != first.Collective || p.DType != first.DType || p.Op != first.Op ||
			p.Channels != first.Channels || p.InPlace != first.InPlace {
			return fmt.Errorf("%w: rank %d disagrees with rank 0 on the collective's parameters", ErrPlan, r)
		}
		if err := validatePlan(p, sends, recvs); err != nil {
			return err
		}
	}
	for k, n := range sends {
		m, ok := recvs[k]
		if !ok {
			return fmt.Errorf("%w: send %d->%d ch %d seq %d has no matching receive", ErrPlan, k.src, k.dst, k.channel, k.seq)
		}
		if m != n {
			return fmt.Errorf("%w: send %d->%d ch %d seq %d is %d bytes but its receive is %d", ErrPlan, k.src, k.dst, k.channel, k.seq, n, m)
		}
	}
	for k := range recvs {
		if _, ok := sends[k]; !ok {
			return fmt.Errorf("%w: receive %d<-%d ch %d seq %d has no matching send", ErrPlan, k.dst, k.src, k.channel, k.seq)
		}
	}
	return nil
}

// validatePlan checks one rank's plan and records its messages.
func validatePlan(p *Plan, sends, recvs map[msgKey]int64) error {
	if p.Channels < 1 || !p.DType.Valid() || !p.Op.Valid() {
		return fmt.Errorf("%w: rank %d: bad channels, data type or op", ErrPlan, p.Rank)
	}
	esize := p.ElemSize()
	next := make(map[seqKey]int)
	for i := range p.Steps {
		s := &p.Steps[i]
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%w: rank %d step %d (%s): %s", ErrPlan, p.Rank, i, s, fmt.Sprintf(format, args...))
		}
		if s.Kind >= numKinds {
			return fail("unknown kind")
		}
		for j, d := range s.Deps {
			if d < 0 || d >= i || (j > 0 && d <= s.Deps[j-1]) {
				return fail("dependency %d is not an earlier step in ascending order", d)
			}
		}
		ranges := s.Reads()
		if w, ok := s.Writes(); ok {
			ranges = append(ranges, w)
		}
		for _, r := range ranges {
			if r.Buf >= numBuffers || r.Off < 0 || r.Len < 0 || r.End() > p.BufferBytes(r.Buf) {
				return fail("range %s outside its %d-byte buffer", r, p.BufferBytes(r.Buf))
			}
			if r.Off%esize != 0 || r.Len%esize != 0 {
				return fail("range %s splits a %d-byte element", r, esize)
			}
			if p.InPlace && r.Buf == BufSend {
				return fail("in-place plan addresses the send buffer")
			}
		}
		switch s.Kind {
		case KindSend, KindRecv:
			if s.Peer < 0 || s.Peer >= p.NRanks || s.Peer == p.Rank {
				return fail("peer %d is not another rank", s.Peer)
			}
			if s.Channel < 0 || s.Channel >= p.Channels {
				return fail("channel %d outside 0..%d", s.Channel, p.Channels-1)
			}
			k := seqKey{s.Peer, s.Channel, s.Kind == KindSend}
			if s.Seq != next[k] {
				return fail("sequence %d, want %d", s.Seq, next[k])
			}
			next[k]++
			if s.Kind == KindSend {
				sends[msgKey{p.Rank, s.Peer, s.Channel, s.Seq}] = s.Src.Len
			} else {
				recvs[msgKey{s.Peer, p.Rank, s.Channel, s.Seq}] = s.Dst.Len
			}
		case KindReduce:
			if s.Src.Len != s.Dst.Len || s.Src2.Len != s.Dst.Len {
				return fail("operand lengths differ")
			}
			for _, src := range []Range{s.Src, s.Src2} {
				if src != s.Dst && src.Overlaps(s.Dst) {
					return fail("operand %s partially overlaps the destination", src)
				}
			}
			if s.Src == s.Dst && s.Src2 == s.Dst {
				return fail("both operands are the destination")
			}
		case KindCopy:
			if s.Src.Len != s.Dst.Len || s.Src.Overlaps(s.Dst) {
				return fail("copy lengths differ or ranges overlap")
			}
		case KindScale:
			if s.Divisor < 1 {
				return fail("divisor %d", s.Divisor)
			}
		case KindPreMul:
			if s.Divisor < 1 {
				return fail("divisor %d", s.Divisor)
			}
			if s.Src.Len != s.Dst.Len || (s.Src != s.Dst && s.Src.Overlaps(s.Dst)) {
				return fail("lengths differ or ranges partially overlap")
			}
			if !reduce.PreMultiplies(p.DType, p.Op) {
				return fail("pre-multiply in a %s %s plan", p.DType, p.Op)
			}
		}
	}
	return nil
}
