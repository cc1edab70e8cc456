package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sync/errgroup"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/gpu"
	"github.com/metaroce/metaroce/gpu/rccl"
)

// The rccl backend runs the same sweep through RCCL or NCCL on GPU buffers.
//
// NCCL_NET_PLUGIN is forced to "none" in this process: the metaroce net
// plugin is a Go c-shared library, and a second Go runtime cannot be loaded
// into a Go program, so NCCL uses its built-in transports here. Measure the
// plugin from a C or Python program (nccl-tests, PyTorch) instead.

// rcclLauncher holds the opened library and runtime.
type rcclLauncher struct {
	o    *options
	lib  *rccl.Lib
	rt   *gpu.Runtime
	ndev int
	boot *collectives.Bootstrap
}

func newRCCLLauncher(o *options, stderr io.Writer) (launcher, error) {
	if prev, ok := os.LookupEnv("NCCL_NET_PLUGIN"); ok && prev != "none" {
		fmt.Fprintf(stderr, "mrbench: NCCL_NET_PLUGIN=%s ignored: a Go net plugin cannot be loaded into mrbench (a Go program); using none\n", prev)
	}
	os.Setenv("NCCL_NET_PLUGIN", "none")
	// A library or runtime that is not installed, no GPU, too few GPUs
	// for -np and a launcher's bad variables are the machine's
	// configuration, found before anything runs: usage errors (exit 2),
	// like the flags. A driver that fails to count its GPUs is not.
	lib, err := rccl.Open("")
	if err != nil {
		return nil, configError{fmt.Errorf("--backend rccl: %w", err)}
	}
	rt, err := lib.Runtime()
	if err != nil {
		return nil, configError{fmt.Errorf("--backend rccl: %w", err)}
	}
	ndev, err := rt.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("--backend rccl: counting GPUs: %w", err)
	}
	if ndev < 1 {
		return nil, configError{fmt.Errorf("--backend rccl: the %s runtime sees no GPU", rt.API())}
	}
	l := &rcclLauncher{o: o, lib: lib, rt: rt, ndev: ndev}
	b, ok, err := collectives.BootstrapFromEnv()
	if err != nil {
		return nil, configError{fmt.Errorf("launcher environment: %w", err)}
	}
	if ok {
		l.boot = &b
	} else if o.Ranks > ndev {
		return nil, configError{fmt.Errorf("--backend rccl: -np %d but %d GPU(s): NCCL needs one GPU per rank of a process; use -np %d or run one process per rank under mpirun", o.Ranks, ndev, ndev)}
	}
	return l, nil
}

func (l *rcclLauncher) source() string {
	if l.boot != nil {
		return l.boot.Source
	}
	return launcherLocal
}

func (l *rcclLauncher) describe() string {
	v, _ := l.lib.Version()
	return fmt.Sprintf("rccl: %s %s (%s) on %d GPU(s) through %s, NCCL_NET_PLUGIN=none", map[bool]string{true: "RCCL", false: "NCCL"}[l.lib.IsRCCL()],
		rccl.VersionString(v), l.lib.Path(), l.ndev, l.rt.Path())
}

func (l *rcclLauncher) launch(ctx context.Context, _ string, fn func(r rankEnv) error) error {
	if l.boot == nil {
		id, err := l.lib.UniqueID()
		if err != nil {
			return err
		}
		g, gctx := errgroup.WithContext(ctx)
		for r := 0; r < l.o.Ranks; r++ {
			g.Go(func() error { return l.rank(gctx, l.o.Ranks, r, r%l.ndev, id, fn) })
		}
		return g.Wait()
	}
	// A launched job: rank 0's unique id travels over the communicator
	// on which the ranks compared their settings.
	hc, err := agreedComm(ctx, *l.boot, l.o)
	if err != nil {
		return err
	}
	defer hc.Close()
	var id rccl.UniqueID
	if hc.Rank() == 0 {
		if id, err = l.lib.UniqueID(); err != nil {
			return err
		}
	}
	if err := hc.Broadcast(ctx, id[:], id[:], reduce.Uint8, 0); err != nil {
		return fmt.Errorf("broadcasting the unique id: %w", err)
	}
	return l.rank(ctx, hc.Size(), hc.Rank(), l.boot.LocalRank%l.ndev, id, fn)
}

// rank runs one rank on device dev. The goroutine keeps its OS thread, which
// owns the current device.
func (l *rcclLauncher) rank(ctx context.Context, n, r, dev int, id rccl.UniqueID, fn func(r rankEnv) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := l.rt.SetDevice(dev); err != nil {
		return err
	}
	c, err := l.lib.InitRank(ctx, n, id, r, dev)
	if err != nil {
		return err
	}
	s, err := l.rt.StreamCreate()
	if err != nil {
		c.Abort()
		return err
	}
	rc := &rcclComm{l: l, c: c, s: s, blocking: l.o.Blocking == 1}
	err = fn(rankEnv{comm: rc, describe: l.describe()})
	rc.free()
	l.rt.StreamDestroy(s)
	if err != nil {
		c.Abort()
		return err
	}
	return c.Destroy()
}

// rcclComm adapts an RCCL communicator to the sweep. The sweep's two host
// buffers have device twins (Bind); calls on slices of the host buffers run
// on the twins at the same offsets, other slices (the small result
// exchanges) are staged through a scratch device buffer.
type rcclComm struct {
	l        *rcclLauncher
	c        *rccl.Comm
	s        gpu.Stream
	blocking bool
	host     [2][]byte
	dev      [2]*gpu.DeviceBuffer
	scratch  *gpu.DeviceBuffer
	pending  int // collectives queued since the last wait
}

func (c *rcclComm) Rank() int { return c.c.Rank() }
func (c *rcclComm) Size() int { return c.c.Ranks() }

func (c *rcclComm) Bind(b rankBuffers) error {
	c.free()
	c.host = [2][]byte{b.a, b.b}
	for i, h := range c.host {
		d, err := c.l.rt.AllocDevice(len(h))
		if err != nil {
			return fmt.Errorf("device buffer of %d bytes: %w", len(h), err)
		}
		c.dev[i] = d
	}
	return nil
}

func (c *rcclComm) free() {
	for i, d := range c.dev {
		if d != nil {
			d.Free()
			c.dev[i] = nil
		}
	}
	if c.scratch != nil {
		c.scratch.Free()
		c.scratch = nil
	}
}

func (c *rcclComm) copyAll(n int64, toDevice bool) error {
	for i, h := range c.host {
		m := int(min(n, int64(len(h))))
		if m == 0 || c.dev[i] == nil {
			continue
		}
		var err error
		if toDevice {
			err = c.l.rt.Memcpy(c.dev[i].Addr(), uintptr(unsafe.Pointer(&h[0])), m, gpu.HostToDevice)
		} else {
			err = c.l.rt.Memcpy(uintptr(unsafe.Pointer(&h[0])), c.dev[i].Addr(), m, gpu.DeviceToHost)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *rcclComm) Upload(n int64) error   { return c.copyAll(n, true) }
func (c *rcclComm) Download(n int64) error { return c.copyAll(n, false) }

// devAddr maps a slice of a bound host buffer to its device twin, or
// returns 0.
func (c *rcclComm) devAddr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	for i, h := range c.host {
		if len(h) == 0 || c.dev[i] == nil {
			continue
		}
		base := uintptr(unsafe.Pointer(&h[0]))
		if p >= base && p+uintptr(len(b)) <= base+uintptr(len(h)) {
			return c.dev[i].Addr() + (p - base)
		}
	}
	return 0
}

// Barrier waits for the queued work, then all-reduces one value.
func (c *rcclComm) Barrier(ctx context.Context) error {
	if err := c.Flush(ctx); err != nil {
		return err
	}
	b := make([]byte, 4)
	return c.Collective(ctx, call{Coll: sched.AllReduce, Count: 1, DType: reduce.Int32}, b, b)
}

// Flush waits until the queued collectives have completed or ctx ends.
func (c *rcclComm) Flush(ctx context.Context) error {
	if c.pending == 0 {
		return nil
	}
	c.pending = 0
	return c.l.rt.StreamWait(ctx, c.s)
}

func (c *rcclComm) Collective(ctx context.Context, k call, send, recv []byte) error {
	ds, dr := c.devAddr(send), c.devAddr(recv)
	staged := dr == 0
	if staged {
		// A small host exchange: stage both sides through scratch memory.
		need := len(send) + len(recv)
		if c.scratch == nil || c.scratch.Len() < need {
			if c.scratch != nil {
				c.scratch.Free()
			}
			var err error
			if c.scratch, err = c.l.rt.AllocDevice(max(need, 4096)); err != nil {
				return err
			}
		}
		ds, dr = c.scratch.Addr(), c.scratch.Addr()+uintptr(len(send))
		if len(send) > 0 {
			if err := c.l.rt.Memcpy(ds, uintptr(unsafe.Pointer(&send[0])), len(send), gpu.HostToDevice); err != nil {
				return err
			}
		}
		// In place, the input is in recv (send is empty): its scratch
		// twin must hold it before the call reads it there.
		if k.InPlace && len(recv) > 0 {
			if err := c.l.rt.Memcpy(dr, uintptr(unsafe.Pointer(&recv[0])), len(recv), gpu.HostToDevice); err != nil {
				return err
			}
		}
	}
	if k.InPlace {
		ds = dr // NCCL's in-place layouts, offsets below
	}
	dt, op, err := rcclTypes(k.DType, k.Op)
	if err != nil {
		return err
	}
	es := uintptr(k.DType.Size())
	cnt := int(k.Count)
	me := uintptr(c.Rank())
	switch k.Coll {
	case sched.AllReduce:
		err = c.c.AllReduce(ds, dr, cnt, dt, op, c.s)
	case sched.ReduceScatter:
		if k.InPlace {
			dr += me * uintptr(cnt) * es
		}
		err = c.c.ReduceScatter(ds, dr, cnt, dt, op, c.s)
	case sched.AllGather:
		if k.InPlace {
			ds += me * uintptr(cnt) * es
		}
		err = c.c.AllGather(ds, dr, cnt, dt, c.s)
	case sched.AllToAll:
		err = c.c.AllToAll(ds, dr, cnt, dt, c.s)
	case sched.Broadcast:
		err = c.c.Broadcast(ds, dr, cnt, dt, k.Root, c.s)
	case sched.SendRecv:
		n := c.Size()
		if err = c.l.lib.GroupStart(); err == nil {
			err = c.c.Send(ds, cnt, dt, (c.Rank()+1)%n, c.s)
			if err == nil {
				err = c.c.Recv(dr, cnt, dt, (c.Rank()-1+n)%n, c.s)
			}
			if gerr := c.l.lib.GroupEnd(); err == nil {
				err = gerr
			}
		}
	default:
		err = fmt.Errorf("rccl backend: %v not supported", k.Coll)
	}
	if err != nil {
		return err
	}
	c.pending++
	// Without -z 1, collectives queue on the stream and the sweep's Flush at
	// the end of each batch waits for them, as nccl-tests does.
	if c.blocking || staged {
		if err := c.Flush(ctx); err != nil {
			return err
		}
	}
	if staged && len(recv) > 0 {
		return c.l.rt.Memcpy(uintptr(unsafe.Pointer(&recv[0])), dr, len(recv), gpu.DeviceToHost)
	}
	return nil
}

// rcclTypes maps our data type and op to NCCL's.
func rcclTypes(dt reduce.DType, op reduce.Op) (rccl.DataType, rccl.RedOp, error) {
	types := map[reduce.DType]rccl.DataType{reduce.Int8: rccl.Int8, reduce.Uint8: rccl.Uint8, reduce.Int32: rccl.Int32,
		reduce.Uint32: rccl.Uint32, reduce.Int64: rccl.Int64, reduce.Uint64: rccl.Uint64, reduce.Float16: rccl.Float16,
		reduce.BFloat16: rccl.Bfloat16, reduce.Float32: rccl.Float32, reduce.Float64: rccl.Float64}
	ops := map[reduce.Op]rccl.RedOp{reduce.OpSum: rccl.Sum, reduce.OpProd: rccl.Prod, reduce.OpMax: rccl.Max,
		reduce.OpMin: rccl.Min, reduce.OpAvg: rccl.Avg}
	t, ok1 := types[dt]
	o, ok2 := ops[op]
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("rccl backend: no NCCL equivalent of %v/%v", dt, op)
	}
	return t, o, nil
}
