package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// memGroup is a dumb in-memory reference communicator: every call deposits a
// copy of each rank's input, waits for all ranks, and computes the rank's
// output straight from the definition of the collective.
type memGroup struct {
	n     int
	mu    sync.Mutex
	slots [][]byte
	bar   *memBarrier
	// corrupt, when set, may damage a rank's output after a call (tests of
	// the checker).
	corrupt func(rank int, k call, recv []byte)
}

func newMemGroup(n int) *memGroup {
	return &memGroup{n: n, slots: make([][]byte, n), bar: &memBarrier{n: n, ch: make(chan struct{})}}
}

// run calls fn on every rank concurrently and returns the first error.
func (g *memGroup) run(fn func(c comm) error) error {
	errs := make([]error, g.n)
	var wg sync.WaitGroup
	for r := 0; r < g.n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(&memComm{g: g, rank: r})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// memBarrier is a reusable barrier whose waits end with their context.
type memBarrier struct {
	mu    sync.Mutex
	n     int
	count int
	ch    chan struct{}
}

func (b *memBarrier) wait(ctx context.Context) error {
	b.mu.Lock()
	ch := b.ch
	b.count++
	if b.count == b.n {
		b.count = 0
		b.ch = make(chan struct{})
		close(ch)
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type memComm struct {
	g    *memGroup
	rank int
}

func (c *memComm) Rank() int                         { return c.rank }
func (c *memComm) Size() int                         { return c.g.n }
func (c *memComm) Barrier(ctx context.Context) error { return c.g.bar.wait(ctx) }

func (c *memComm) Collective(ctx context.Context, k call, send, recv []byte) error {
	n, me := c.g.n, c.rank
	es := int64(k.DType.Size())
	blk := k.Count * es
	// The input, per NCCL's layouts.
	var in []byte
	switch {
	case !k.InPlace:
		in = send
	case k.Coll == sched.ReduceScatter || k.Coll == sched.AllToAll:
		in = recv[:int64(n)*blk]
	case k.Coll == sched.AllGather:
		in = recv[int64(me)*blk : int64(me+1)*blk]
	default:
		in = recv[:blk]
	}
	c.g.mu.Lock()
	c.g.slots[me] = append([]byte(nil), in...)
	c.g.mu.Unlock()
	if err := c.g.bar.wait(ctx); err != nil {
		return err
	}
	c.g.mu.Lock()
	slots := append([][]byte(nil), c.g.slots...)
	c.g.mu.Unlock()
	reduceAll := func() ([]byte, error) {
		// As NCCL: a float average scales each input by 1/n first, an
		// integer one divides the sum.
		premul := reduce.PreMultiplies(k.DType, k.Op)
		term := func(r int) ([]byte, error) {
			if !premul {
				return slots[r], nil
			}
			t := make([]byte, len(slots[r]))
			return t, reduce.PreMultiply(t, slots[r], k.DType, n)
		}
		acc, err := term(0)
		if err != nil {
			return nil, err
		}
		acc = append([]byte(nil), acc...)
		for r := 1; r < n; r++ {
			t, err := term(r)
			if err != nil {
				return nil, err
			}
			if err := reduce.Reduce(acc, t, k.DType, k.Op); err != nil {
				return nil, err
			}
		}
		if k.Op == reduce.OpAvg && !premul {
			return acc, reduce.DivideBy(acc, k.DType, n)
		}
		return acc, nil
	}
	switch k.Coll {
	case sched.AllReduce:
		acc, err := reduceAll()
		if err != nil {
			return err
		}
		copy(recv, acc)
	case sched.ReduceScatter:
		acc, err := reduceAll()
		if err != nil {
			return err
		}
		out := recv
		if k.InPlace {
			out = recv[int64(me)*blk:]
		}
		copy(out[:blk], acc[int64(me)*blk:int64(me+1)*blk])
	case sched.AllGather:
		for p := 0; p < n; p++ {
			copy(recv[int64(p)*blk:], slots[p])
		}
	case sched.AllToAll:
		for p := 0; p < n; p++ {
			copy(recv[int64(p)*blk:int64(p+1)*blk], slots[p][int64(me)*blk:])
		}
	case sched.Broadcast:
		copy(recv, slots[k.Root])
	case sched.SendRecv:
		copy(recv, slots[(me-1+n)%n])
	default:
		return fmt.Errorf("memComm: %v not supported", k.Coll)
	}
	if c.g.corrupt != nil {
		c.g.corrupt(me, k, recv)
	}
	return c.g.bar.wait(ctx)
}
