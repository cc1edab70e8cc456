package collectives

import (
	"context"
	"fmt"

	"github.com/metaroce/metaroce/collectives/sched"
)

// streamKey names one ordered message stream: direction, peer, channel.
type streamKey struct {
	send bool
	peer int
	ch   int
}

// execute runs plan p over the link (docs of collectives/sched: a step
// starts once its Deps completed; messages of one stream are posted in Seq
// order, which is the order in which both sides match them). Local steps run
// inline; transfers complete asynchronously and wake the loop.
func (c *Comm) execute(ctx context.Context, p *sched.Plan, bufs [3][]byte) error {
	n := len(p.Steps)
	if n == 0 {
		return nil
	}
	waiting := make([]int, n) // unfinished dependencies per step
	after := make([][]int, n) // dependents per step
	for i := range p.Steps {
		waiting[i] = len(p.Steps[i].Deps)
		for _, d := range p.Steps[i].Deps {
			after[d] = append(after[d], i)
		}
	}
	nextSeq := map[streamKey]int{}
	parked := map[streamKey]map[int]int{} // ready but out of Seq order: seq → step
	var ready []int
	for i := range p.Steps {
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	// The endpoint's starting rate hints divide its inbound capacity by the
	// peers that may send at once: for a ring, the one before this rank.
	c.link.expectSenders(p.RecvPeers())
	completions := make(chan int, n)
	inflight := map[int]pending{}
	// completed is what the wait below drives the datapath for; built once,
	// not per completion.
	completed := func() bool { return len(completions) > 0 || ctx.Err() != nil }
	remaining := n

	finish := func(i int) {
		remaining--
		for _, j := range after[i] {
			waiting[j]--
			if waiting[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	post := func(i int) error {
		s := &p.Steps[i]
		buf := rangeOf(bufs, s.Src)
		var pd pending
		var err error
		// The link reports completion straight into the buffered channel
		// (each step completes once, so it never fills): no goroutine per
		// transfer, and one wake-up of this loop instead of two.
		done := func() { completions <- i }
		if s.Kind == sched.KindSend {
			pd, err = c.link.send(s.Peer, s.Channel, buf, done)
		} else {
			pd, err = c.link.recv(s.Peer, s.Channel, rangeOf(bufs, s.Dst), done)
		}
		if err != nil {
			return c.stepErr(p, s, err)
		}
		inflight[i] = pd
		return nil
	}
	for remaining > 0 {
		for len(ready) > 0 {
			i := ready[len(ready)-1]
			ready = ready[:len(ready)-1]
			s := &p.Steps[i]
			switch s.Kind {
			case sched.KindSend, sched.KindRecv:
				k := streamKey{s.Kind == sched.KindSend, s.Peer, s.Channel}
				if s.Seq != nextSeq[k] {
					if parked[k] == nil {
						parked[k] = map[int]int{}
					}
					parked[k][s.Seq] = i
					continue
				}
				for {
					if err := post(i); err != nil {
						return err
					}
					nextSeq[k]++
					j, ok := parked[k][nextSeq[k]]
					if !ok {
						break
					}
					delete(parked[k], nextSeq[k])
					i = j
				}
			default:
				if err := sched.RunLocal(p, s, bufs); err != nil {
					return err
				}
				finish(i)
			}
		}
		if remaining == 0 {
			break
		}
		if len(inflight) == 0 {
			return fmt.Errorf("collectives: %v rank %d: schedule stalled with %d steps left (a bug in the plan)", p.Collective, p.Rank, remaining)
		}
		// Drive the datapath from this goroutine while transfers move: a
		// completion then costs no wake-up of this goroutine, and the
		// event loop parks instead of handing every datagram over.
		c.link.progress(completed)
		select {
		case i := <-completions:
			_, err := inflight[i].Test()
			delete(inflight, i)
			if err != nil {
				return c.stepErr(p, &p.Steps[i], err)
			}
			finish(i)
		case <-ctx.Done():
			return c.stuckErr(ctx, p, inflight)
		}
	}
	return nil
}

// rangeOf returns the bytes of r.
func rangeOf(bufs [3][]byte, r sched.Range) []byte {
	return bufs[r.Buf][r.Off:r.End()]
}

func (c *Comm) stepErr(p *sched.Plan, s *sched.Step, err error) error {
	dir := "sending to"
	if s.Kind == sched.KindRecv {
		dir = "receiving from"
	}
	e := fmt.Errorf("collectives: %v on rank %d: %s rank %d (channel %d, message %d): %w", p.Collective, p.Rank, dir, s.Peer, s.Channel, s.Seq, err)
	c.broken = e
	return e
}

// stuckErr explains a deadline: which peers this rank still waits for.
func (c *Comm) stuckErr(ctx context.Context, p *sched.Plan, inflight map[int]pending) error {
	peers := map[int]bool{}
	for i := range inflight {
		peers[p.Steps[i].Peer] = true
	}
	var list []int
	for r := range peers {
		list = append(list, r)
	}
	sortInts(list)
	e := fmt.Errorf("collectives: %v on rank %d did not finish within %v: still waiting on ranks %v (%d transfers outstanding); a peer may have died or stopped calling the collective: %w",
		p.Collective, p.Rank, c.cfg.Timeout, list, len(inflight), ctx.Err())
	c.broken = e
	return e
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
