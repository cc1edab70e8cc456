package sched

import (
	"errors"
	"fmt"
	"strings"

	"github.com/metaroce/metaroce/collectives/reduce"
)

// ErrDeadlock is wrapped by the error Execute returns when no step of any rank
// can run but some have not completed.
var ErrDeadlock = errors.New("sched: deadlock")

// Buffers are one rank's caller buffers for Execute. In place, Send is unused.
type Buffers struct {
	Send, Recv []byte
}

// ExecOptions selects the message semantics of Execute.
type ExecOptions struct {
	// Rendezvous makes a send complete only together with its matching receive,
	// once both are ready to run, as over a transport whose sends need a posted
	// receive (the NCCL net plugin contract). Without it sends are eager: they
	// complete at once into an unbounded mailbox. A correct plan completes under
	// both.
	Rendezvous bool
}

// Execute is the reference executor: it runs the plans of all ranks in one
// deterministic, goroutine-free loop over in-memory mailboxes, matching each
// send with the receive of the same (src, dst, channel, seq), and reducing with
// package reduce. Each pass runs, rank by rank and in step order, every step
// whose dependencies have completed; a pass that runs nothing while steps remain
// is a deadlock, reported with the first blocked steps of each rank.
func Execute(plans []*Plan, bufs []Buffers, opt ExecOptions) error {
	if err := Validate(plans); err != nil {
		return err
	}
	if len(bufs) != len(plans) {
		return fmt.Errorf("sched: %d buffer pairs for %d ranks", len(bufs), len(plans))
	}
	e := &executor{opt: opt, ranks: make([]rankState, len(plans)), mail: make(map[msgKey][]byte), recvAt: make(map[msgKey]int)}
	remaining := 0
	for r, p := range plans {
		if int64(len(bufs[r].Recv)) < p.RecvBytes || (!p.InPlace && int64(len(bufs[r].Send)) < p.SendBytes) {
			return fmt.Errorf("sched: rank %d: buffers of %d/%d bytes, plan needs send %d recv %d",
				r, len(bufs[r].Send), len(bufs[r].Recv), p.SendBytes, p.RecvBytes)
		}
		st := &e.ranks[r]
		st.p = p
		st.bufs = [numBuffers][]byte{bufs[r].Send, bufs[r].Recv, make([]byte, p.ScratchBytes)}
		st.done = make([]bool, len(p.Steps))
		remaining += len(p.Steps)
		for i := range p.Steps {
			if s := &p.Steps[i]; s.Kind == KindRecv {
				e.recvAt[msgKey{s.Peer, r, s.Channel, s.Seq}] = i
			}
		}
	}
	for remaining > 0 {
		ran := 0
		for r := range e.ranks {
			st := &e.ranks[r]
			for i := st.front; i < len(st.done); i++ {
				if st.done[i] || !st.ready(i) {
					continue
				}
				n, err := e.run(r, i)
				if err != nil {
					return err
				}
				ran += n
			}
			for st.front < len(st.done) && st.done[st.front] {
				st.front++
			}
		}
		if ran == 0 {
			return e.deadlock()
		}
		remaining -= ran
	}
	return nil
}

type executor struct {
	opt    ExecOptions
	ranks  []rankState
	mail   map[msgKey][]byte // eager mode: sent, not yet received
	recvAt map[msgKey]int    // step index of each message's receive on its destination
}

type rankState struct {
	p     *Plan
	bufs  [numBuffers][]byte
	done  []bool
	front int // every step before front is done
}

func (st *rankState) ready(i int) bool {
	for _, d := range st.p.Steps[i].Deps {
		if !st.done[d] {
			return false
		}
	}
	return true
}

func (st *rankState) bytes(r Range) []byte { return st.bufs[r.Buf][r.Off:r.End()] }

// run tries to complete step i of rank r and returns how many steps completed
// (0, 1, or 2 for a rendezvous).
func (e *executor) run(r, i int) (int, error) {
	st := &e.ranks[r]
	s := &st.p.Steps[i]
	switch s.Kind {
	case KindSend:
		key := msgKey{r, s.Peer, s.Channel, s.Seq}
		if !e.opt.Rendezvous {
			e.mail[key] = append([]byte(nil), st.bytes(s.Src)...)
			st.done[i] = true
			return 1, nil
		}
		peer := &e.ranks[s.Peer]
		j := e.recvAt[key]
		if peer.done[j] || !peer.ready(j) {
			return 0, nil
		}
		copy(peer.bytes(peer.p.Steps[j].Dst), st.bytes(s.Src))
		st.done[i], peer.done[j] = true, true
		return 2, nil
	case KindRecv:
		if e.opt.Rendezvous {
			return 0, nil // completed by its send
		}
		key := msgKey{s.Peer, r, s.Channel, s.Seq}
		data, ok := e.mail[key]
		if !ok {
			return 0, nil
		}
		delete(e.mail, key)
		copy(st.bytes(s.Dst), data)
	default:
		if err := RunLocal(st.p, s, st.bufs); err != nil {
			return 0, fmt.Errorf("sched: rank %d step %d: %w", r, i, err)
		}
	}
	st.done[i] = true
	return 1, nil
}

// deadlock describes, per rank, the first few steps that could not run.
func (e *executor) deadlock() error {
	var b strings.Builder
	for r := range e.ranks {
		st := &e.ranks[r]
		shown := 0
		for i := st.front; i < len(st.done) && shown < 3; i++ {
			if st.done[i] {
				continue
			}
			state := "waiting for dependencies"
			if st.ready(i) {
				state = "waiting for its peer"
			}
			fmt.Fprintf(&b, "; rank %d step %d (%s): %s", r, i, &st.p.Steps[i], state)
			shown++
		}
	}
	return fmt.Errorf("%w: no step can run%s", ErrDeadlock, b.String())
}

// RunLocal executes a step that needs no peer (reduce, copy, scale or premul) on a
// rank's buffers, indexed by BufferID. Every executor shares it, so that the
// in-memory reference and the transport executors compute alike. Send and
// recv steps are not local; RunLocal rejects them.
func RunLocal(p *Plan, s *Step, bufs [3][]byte) error {
	bytes := func(r Range) []byte { return bufs[r.Buf][r.Off:r.End()] }
	switch s.Kind {
	case KindReduce:
		dst := bytes(s.Dst)
		other := s.Src2
		switch {
		case s.Dst == s.Src:
		case s.Dst == s.Src2:
			other = s.Src // every op is commutative
		default:
			copy(dst, bytes(s.Src))
		}
		return reduce.Reduce(dst, bytes(other), p.DType, p.Op)
	case KindCopy:
		copy(bytes(s.Dst), bytes(s.Src))
		return nil
	case KindScale:
		return reduce.DivideBy(bytes(s.Dst), p.DType, s.Divisor)
	case KindPreMul:
		return reduce.PreMultiply(bytes(s.Dst), bytes(s.Src), p.DType, s.Divisor)
	}
	return fmt.Errorf("sched: %v is not a local step", s.Kind)
}
