package rccl

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/metaroce/metaroce/gpu"
)

// Comm is one rank's communicator. Its collectives enqueue work on a stream
// and return; the caller waits for the stream (gpu.Runtime.StreamWait). A
// Comm's calls must not run concurrently with each other, as in NCCL.
type Comm struct {
	lib    *Lib
	h      uintptr // ncclComm_t
	nranks int
	rank   int

	closeOnce sync.Once
}

// InitRank joins rank (0 <= rank < nranks) to the communicator named by id,
// on GPU dev. The library binds a communicator to the device current on the
// OS thread that creates it, and InitRank creates it on a thread of its
// own, so it selects dev there first through the library's runtime
// (Lib.Runtime); dev < 0 leaves that thread's device as it is (device 0,
// unless the runtime says otherwise), which is what a process with one GPU
// wants. The library blocks until all nranks ranks have joined; when ctx
// ends first, InitRank returns ctx's error at once and a background
// goroutine aborts the communicator if the library ever returns one. That
// goroutine holds its OS thread until then, so a process that times out
// here should exit rather than try again many times.
func (l *Lib) InitRank(ctx context.Context, nranks int, id UniqueID, rank, dev int) (*Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, argError("ncclCommInitRank", "rank %d of %d ranks: want 0 <= rank < nranks", rank, nranks)
	}
	var rt *gpu.Runtime
	if dev >= 0 {
		var err error
		if rt, err = l.Runtime(); err != nil {
			return nil, fmt.Errorf("rccl: ncclCommInitRank on device %d: selecting the device: %w", dev, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rccl: ncclCommInitRank: %w", err)
	}
	type result struct {
		h   uintptr
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread keeps the device: it ends with the goroutine
		// instead of going back to the scheduler with it.
		runtime.LockOSThread()
		if rt != nil {
			if err := rt.SetDevice(dev); err != nil {
				done <- result{err: fmt.Errorf("rccl: ncclCommInitRank on device %d: %w", dev, err)}
				return
			}
		}
		var h uintptr
		rc := callInit(l.commInitRank, &h, nranks, &id, rank)
		done <- result{h, l.fail("ncclCommInitRank", rc, 0)}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		return &Comm{lib: l, h: r.h, nranks: nranks, rank: rank}, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil {
				callH(l.commAbort, r.h)
			}
		}()
		return nil, fmt.Errorf("rccl: ncclCommInitRank (rank %d of %d) did not complete: %w; "+
			"check that every rank started and received the same unique id, and that NCCL_SOCKET_IFNAME names a reachable interface",
			rank, nranks, ctx.Err())
	}
}

// Ranks is the number of ranks, as given to InitRank.
func (c *Comm) Ranks() int { return c.nranks }

// Rank is this rank's index.
func (c *Comm) Rank() int { return c.rank }

// Device asks the library for the GPU the communicator is bound to
// (ncclCommCuDevice).
func (c *Comm) Device() (int, error) {
	if c.lib.commDevice == nil {
		return 0, fmt.Errorf("rccl: %s has no ncclCommCuDevice", c.lib.Path())
	}
	var d int32
	err := c.lib.fail("ncclCommCuDevice", callHP(c.lib.commDevice, c.h, unsafe.Pointer(&d)), c.h)
	return int(d), err
}

// Handle is the ncclComm_t, for code that calls the library directly.
func (c *Comm) Handle() uintptr { return c.h }

// Count asks the library for the number of ranks (ncclCommCount).
func (c *Comm) Count() (int, error) {
	var n int32
	err := c.lib.fail("ncclCommCount", callHP(c.lib.commCount, c.h, unsafe.Pointer(&n)), c.h)
	return int(n), err
}

// UserRank asks the library for this rank's index (ncclCommUserRank).
func (c *Comm) UserRank() (int, error) {
	var r int32
	err := c.lib.fail("ncclCommUserRank", callHP(c.lib.commUserRank, c.h, unsafe.Pointer(&r)), c.h)
	return int(r), err
}

// check validates what every collective shares, before the library sees it.
func (c *Comm) check(fn string, count int, dt DataType) error {
	if c.h == 0 {
		return argError(fn, "communicator already destroyed")
	}
	if count < 0 {
		return argError(fn, "negative count %d", count)
	}
	if !dt.valid() {
		return argError(fn, "unknown data type %d", int(dt))
	}
	return nil
}

// AllReduce reduces count elements of send over all ranks with op and leaves
// the result in recv on every rank. send may equal recv.
func (c *Comm) AllReduce(send, recv uintptr, count int, dt DataType, op RedOp, stream gpu.Stream) error {
	if err := c.check("ncclAllReduce", count, dt); err != nil {
		return err
	}
	if !op.valid() {
		return argError("ncclAllReduce", "unknown reduction %d", int(op))
	}
	return c.lib.fail("ncclAllReduce", callRed(c.lib.allReduce, send, recv, count, dt, int(op), c.h, uintptr(stream)), c.h)
}

// ReduceScatter reduces nranks*recvCount elements of send with op and leaves
// block rank of the result (recvCount elements) in recv.
func (c *Comm) ReduceScatter(send, recv uintptr, recvCount int, dt DataType, op RedOp, stream gpu.Stream) error {
	if err := c.check("ncclReduceScatter", recvCount, dt); err != nil {
		return err
	}
	if !op.valid() {
		return argError("ncclReduceScatter", "unknown reduction %d", int(op))
	}
	return c.lib.fail("ncclReduceScatter", callRed(c.lib.reduceScatter, send, recv, recvCount, dt, int(op), c.h, uintptr(stream)), c.h)
}

// AllGather concatenates every rank's sendCount elements, in rank order,
// into recv (nranks*sendCount elements) on every rank.
func (c *Comm) AllGather(send, recv uintptr, sendCount int, dt DataType, stream gpu.Stream) error {
	if err := c.check("ncclAllGather", sendCount, dt); err != nil {
		return err
	}
	return c.lib.fail("ncclAllGather", callGather(c.lib.allGather, send, recv, sendCount, dt, c.h, uintptr(stream)), c.h)
}

// Broadcast copies count elements of root's send into recv on every rank.
func (c *Comm) Broadcast(send, recv uintptr, count int, dt DataType, root int, stream gpu.Stream) error {
	if err := c.check("ncclBroadcast", count, dt); err != nil {
		return err
	}
	if root < 0 || root >= c.nranks {
		return argError("ncclBroadcast", "root %d of %d ranks", root, c.nranks)
	}
	return c.lib.fail("ncclBroadcast", callRed(c.lib.broadcast, send, recv, count, dt, root, c.h, uintptr(stream)), c.h)
}

// Send posts count elements of buf to peer; it pairs with the peer's Recv.
func (c *Comm) Send(buf uintptr, count int, dt DataType, peer int, stream gpu.Stream) error {
	if err := c.checkP2P("ncclSend", count, dt, peer); err != nil {
		return err
	}
	return c.lib.fail("ncclSend", callP2P(c.lib.send, buf, count, dt, peer, c.h, uintptr(stream)), c.h)
}

// Recv posts a receive of count elements from peer into buf.
func (c *Comm) Recv(buf uintptr, count int, dt DataType, peer int, stream gpu.Stream) error {
	if err := c.checkP2P("ncclRecv", count, dt, peer); err != nil {
		return err
	}
	return c.lib.fail("ncclRecv", callP2P(c.lib.recv, buf, count, dt, peer, c.h, uintptr(stream)), c.h)
}

func (c *Comm) checkP2P(fn string, count int, dt DataType, peer int) error {
	if err := c.check(fn, count, dt); err != nil {
		return err
	}
	if peer < 0 || peer >= c.nranks {
		return argError(fn, "peer %d of %d ranks", peer, c.nranks)
	}
	return nil
}

// AllToAll sends block p (count elements) of send to rank p and receives
// rank p's block into block p of recv. It uses the library's ncclAllToAll
// where there is one (RCCL), else one group of nranks sends and receives,
// which is what NCCL's documentation prescribes.
func (c *Comm) AllToAll(send, recv uintptr, count int, dt DataType, stream gpu.Stream) error {
	if err := c.check("ncclAllToAll", count, dt); err != nil {
		return err
	}
	if c.lib.allToAll != nil {
		return c.lib.fail("ncclAllToAll", callGather(c.lib.allToAll, send, recv, count, dt, c.h, uintptr(stream)), c.h)
	}
	block := uintptr(count) * uintptr(dt.Size())
	// The group belongs to the OS thread (GroupStart).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.lib.GroupStart(); err != nil {
		return err
	}
	var first error
	for p := 0; p < c.nranks && first == nil; p++ {
		off := uintptr(p) * block
		if err := c.Send(send+off, count, dt, p, stream); err != nil {
			first = err
		} else if err := c.Recv(recv+off, count, dt, p, stream); err != nil {
			first = err
		}
	}
	// The group is closed even after a failed post, or the thread's group
	// depth would leak into the next call.
	if err := c.lib.GroupEnd(); first == nil {
		first = err
	}
	return first
}

// Destroy finalizes the communicator (ncclCommFinalize, where the library
// has it, flushes outstanding work) and frees it. A second call is a no-op.
func (c *Comm) Destroy() error {
	var err error
	c.closeOnce.Do(func() {
		if c.lib.commFinalize != nil {
			err = c.lib.fail("ncclCommFinalize", callH(c.lib.commFinalize, c.h), c.h)
		}
		if e := c.lib.fail("ncclCommDestroy", callH(c.lib.commDestroy, c.h), 0); err == nil {
			err = e
		}
		c.h = 0
	})
	return err
}

// Abort frees the communicator without waiting for outstanding work, the
// way out when a peer died or a stream wait timed out. A no-op after Destroy.
func (c *Comm) Abort() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.lib.fail("ncclCommAbort", callH(c.lib.commAbort, c.h), 0)
		c.h = 0
	})
	return err
}
