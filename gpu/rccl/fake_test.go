package rccl

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/metaroce/metaroce/gpu"
	"github.com/metaroce/metaroce/gpu/internal/ctest"
	"github.com/stretchr/testify/require"
)

// fakeSources builds the fake library: RCCL/NCCL entry points plus a CUDA
// runtime, all over host memory.
var fakeSources = []string{"testdata/fakenccl.c", "../testdata/fakecudart.c"}

func openFake(t *testing.T, name string, flags ...string) *Lib {
	t.Helper()
	path := ctest.SharedLib(t, name, fakeSources, flags...)
	l, err := Open(path)
	require.NoError(t, err, "open the fake library")
	return l
}

// initFake makes a communicator of nranks on the fake library.
func initFake(t *testing.T, l *Lib, nranks, rank int) *Comm {
	t.Helper()
	id, err := l.UniqueID()
	require.NoError(t, err)
	c, err := l.InitRank(context.Background(), nranks, id, rank, -1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

type number interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// refReduce is the dumb reference: op folded over n copies of each element,
// as every rank of the fake holds the caller's data.
func refReduce[T number](x []T, op RedOp, n int) []T {
	out := make([]T, len(x))
	for i, v := range x {
		acc := v
		for k := 1; k < n; k++ {
			switch op {
			case Sum:
				acc += v
			case Prod:
				acc *= v
			}
		}
		out[i] = acc
	}
	return out
}

// hostSlice allocates count elements of T in page-aligned host memory outside
// the Go heap, filled from rng.
func hostSlice[T number](t *testing.T, rng *rand.Rand, count int) (*gpu.HostBuffer, []T) {
	t.Helper()
	var zero T
	b, err := gpu.AllocHost(count*int(unsafe.Sizeof(zero))+1, -1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Free() })
	s := unsafe.Slice((*T)(unsafe.Pointer(&b.Host()[0])), count)
	for i := range s {
		s[i] = T(rng.IntN(7) - 2)
	}
	return b, s
}

func checkAllReduce[T number](t *testing.T, c *Comm, dt DataType, rng *rand.Rand) {
	const count = 1000
	for _, op := range []RedOp{Sum, Prod, Max, Min, Avg} {
		sb, send := hostSlice[T](t, rng, count)
		rb, recv := hostSlice[T](t, rng, count)
		require.NoError(t, c.AllReduce(sb.Addr(), rb.Addr(), count, dt, op, 0), dt, op)
		require.Equal(t, refReduce(send, op, c.Ranks()), recv, dt, op)
		// In place.
		want := refReduce(send, op, c.Ranks())
		require.NoError(t, c.AllReduce(sb.Addr(), sb.Addr(), count, dt, op, 0))
		require.Equal(t, want, send, dt, op, "in place")
	}
}

func TestFakeAllReduceDataTypes(t *testing.T) {
	l := openFake(t, "libnccl-fake.so")
	c := initFake(t, l, 4, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	checkAllReduce[int8](t, c, Int8, rng)
	checkAllReduce[uint8](t, c, Uint8, rng)
	checkAllReduce[int32](t, c, Int32, rng)
	checkAllReduce[uint32](t, c, Uint32, rng)
	checkAllReduce[int64](t, c, Int64, rng)
	checkAllReduce[uint64](t, c, Uint64, rng)
	checkAllReduce[float32](t, c, Float32, rng)
	checkAllReduce[float64](t, c, Float64, rng)

	// The fake has no half-precision arithmetic: the library's refusal
	// comes back with its code and its recorded detail.
	b, err := gpu.AllocHost(64, -1)
	require.NoError(t, err)
	defer b.Free()
	err = c.AllReduce(b.Addr(), b.Addr(), 8, Float16, Sum, 0)
	require.ErrorContains(t, err, "ncclAllReduce failed: fake: invalid argument (ncclResult 4): fake: no arithmetic for data type 6")
	if !errors.Is(err, InvalidArgument) {
		t.Errorf("%v is not InvalidArgument", err)
	}
}

func TestFakeCollectives(t *testing.T) {
	const nranks, rank, count = 3, 2, 256
	rng := rand.New(rand.NewPCG(3, 4))
	for _, native := range []bool{true, false} {
		name, flags := "librccl-fake.so", []string(nil)
		if !native {
			name, flags = "libnccl-fake.so", []string{"-DNO_ALLTOALL"}
		}
		l := openFake(t, name, flags...)
		require.Equal(t, native, l.HasAllToAll(), "native all-to-all")
		c := initFake(t, l, nranks, rank)
		n, err := c.Count()
		require.NoError(t, err)
		r, err := c.UserRank()
		require.NoError(t, err)
		require.Equal(t, []int{nranks, rank}, []int{n, r}, "count and rank from the library")

		sb, send := hostSlice[float32](t, rng, nranks*count)
		rb, recv := hostSlice[float32](t, rng, nranks*count)

		require.NoError(t, c.ReduceScatter(sb.Addr(), rb.Addr(), count, Float32, Sum, 0))
		require.Equal(t, refReduce(send[rank*count:(rank+1)*count], Sum, nranks), recv[:count], "reduce-scatter")

		require.NoError(t, c.AllGather(sb.Addr(), rb.Addr(), count, Float32, 0))
		for p := 0; p < nranks; p++ {
			require.Equal(t, send[:count], recv[p*count:(p+1)*count], "all-gather block", p)
		}

		require.NoError(t, c.Broadcast(sb.Addr(), rb.Addr(), count, Float32, 1, 0))
		require.Equal(t, send[:count], recv[:count], "broadcast")

		clear(recv)
		require.NoError(t, c.AllToAll(sb.Addr(), rb.Addr(), count, Float32, 0), "native", native)
		for p := 0; p < nranks; p++ {
			require.Equal(t, send[rank*count:(rank+1)*count], recv[p*count:(p+1)*count], "all-to-all block", p, "native", native)
		}
	}
}

// pairWithoutAllToAll makes rank 0 of 2 on a fake built without
// ncclAllToAll (as NCCL is) and returns it with 4 KiB of host memory.
func pairWithoutAllToAll(t *testing.T, name string) (*Comm, uintptr) {
	t.Helper()
	c := initFake(t, openFake(t, name, "-DNO_ALLTOALL"), 2, 0)
	b, err := gpu.AllocHost(4096, -1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Free() })
	return c, b.Addr()
}

func TestFakeErrorCodes(t *testing.T) {
	c, p := pairWithoutAllToAll(t, "libnccl-fake.so")
	l := c.lib

	cases := []struct {
		sym  string
		code string
		want Result
		call func() error
	}{
		{"ncclAllReduce", "6", RemoteError, func() error { return c.AllReduce(p, p, 4, Int32, Sum, 0) }},
		{"ncclReduceScatter", "3", InternalError, func() error { return c.ReduceScatter(p, p, 4, Int32, Max, 0) }},
		{"ncclAllGather", "2", SystemError, func() error { return c.AllGather(p, p+64, 4, Int32, 0) }},
		{"ncclBroadcast", "1", UnhandledCudaError, func() error { return c.Broadcast(p, p, 4, Int32, 0, 0) }},
		{"ncclSend", "5", InvalidUsage, func() error { return c.AllToAll(p, p+64, 4, Int32, 0) }},
		{"ncclGroupEnd", "6", RemoteError, func() error { return c.AllToAll(p, p+64, 4, Int32, 0) }},
		{"ncclGetUniqueId", "2", SystemError, func() error { _, err := l.UniqueID(); return err }},
		{"ncclGetVersion", "3", InternalError, func() error { _, err := l.Version(); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.sym, func(t *testing.T) {
			t.Setenv("FAKENCCL_FAIL", tc.sym)
			t.Setenv("FAKENCCL_CODE", tc.code)
			err := tc.call()
			require.Error(t, err)
			require.ErrorContains(t, err, "rccl: "+tc.sym+" failed: fake: ")
			require.ErrorContains(t, err, "(ncclResult "+tc.code+")")
			require.ErrorContains(t, err, tc.sym+" failed as asked")
			if !errors.Is(err, tc.want) {
				t.Errorf("%v is not %v", err, tc.want)
			}
		})
	}
	// The group is closed after a failed send, so the next all-to-all works.
	require.NoError(t, c.AllToAll(p, p+64, 4, Int32, 0), "all-to-all after failures")
}

func TestArgumentChecks(t *testing.T) {
	l := openFake(t, "libnccl-fake.so")
	c := initFake(t, l, 2, 1)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"dtype", c.AllReduce(0, 0, 1, DataType(42), Sum, 0), "unknown data type 42"},
		{"op", c.AllReduce(0, 0, 1, Float32, RedOp(5), 0), "unknown reduction 5"},
		{"scatter op", c.ReduceScatter(0, 0, 1, Float32, RedOp(-1), 0), "unknown reduction -1"},
		{"count", c.AllGather(0, 0, -1, Float32, 0), "negative count -1"},
		{"root", c.Broadcast(0, 0, 1, Float32, 2, 0), "root 2 of 2 ranks"},
		{"peer", c.Send(0, 1, Float32, -1, 0), "peer -1 of 2 ranks"},
		{"recv peer", c.Recv(0, 1, Float32, 2, 0), "peer 2 of 2 ranks"},
		{"alltoall dtype", c.AllToAll(0, 0, 1, DataType(10), 0), "unknown data type 10"},
	}
	for _, tc := range cases {
		require.ErrorContains(t, tc.err, tc.want)
		if !errors.Is(tc.err, InvalidArgument) {
			t.Errorf("%s: %v is not InvalidArgument", tc.name, tc.err)
		}
	}
	id, err := l.UniqueID()
	require.NoError(t, err)
	_, err = l.InitRank(context.Background(), 2, id, 2, -1)
	require.ErrorContains(t, err, "rank 2 of 2 ranks")
	_, err = l.InitRank(context.Background(), 0, id, 0, -1)
	require.ErrorContains(t, err, "rank 0 of 0 ranks")
	require.NoError(t, c.Destroy())
	require.NoError(t, c.Destroy(), "second Destroy")
	require.NoError(t, c.Abort(), "Abort after Destroy")
	require.ErrorContains(t, c.AllReduce(0, 0, 1, Float32, Sum, 0), "communicator already destroyed")
}

func TestFakeVersionAndID(t *testing.T) {
	l := openFake(t, "librccl-fake.so")
	if !l.IsRCCL() {
		t.Errorf("%s not recognised as RCCL", l.Path())
	}
	v, err := l.Version()
	require.NoError(t, err)
	require.Equal(t, "2.23.4", VersionString(v), "version")
	id, err := l.UniqueID()
	require.NoError(t, err)
	for i, b := range id {
		if b != byte(i*3+1) {
			t.Fatalf("unique id byte %d = %d, want %d", i, b, byte(i*3+1))
		}
	}
	// A damaged id reaches the library whole (it is passed by value) and is
	// refused there, with the library's detail.
	id[0]++
	_, err = l.InitRank(context.Background(), 1, id, 0, -1)
	if err := err; true {
		require.ErrorContains(t, err, "ncclCommInitRank failed")
		require.ErrorContains(t, err, "unique id byte 0 is wrong")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id[0]--
	_, err = l.InitRank(ctx, 1, id, 0, -1)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("InitRank with a cancelled context: %v", err)
	}
	require.Equal(t, "nccl remote error", RemoteError.Error(), "result text")
	require.Equal(t, "fake: invalid usage", l.ErrorString(InvalidUsage), "library text")
}

// TestFakeDeviceMemoryAndStream runs the path mrbench takes on a GPU: device
// buffers from the runtime, a stream, a collective, a bounded wait, and the
// result copied back; the fake runtime's "device" is host memory.
func TestFakeDeviceMemoryAndStream(t *testing.T) {
	path := ctest.SharedLib(t, "libnccl-fake.so", fakeSources)
	l, err := Open(path)
	require.NoError(t, err)
	t.Setenv(gpu.EnvCUDARTLib, path)
	rt, err := l.Runtime()
	require.NoError(t, err)
	require.Equal(t, gpu.CUDA, rt.API(), "NCCL uses the CUDA runtime")

	const count = 4096
	c := initFake(t, l, 8, 3)
	rng := rand.New(rand.NewPCG(5, 6))
	hb, host := hostSlice[float32](t, rng, count)
	dev, err := rt.AllocDevice(count * 4)
	require.NoError(t, err)
	defer dev.Free()
	require.NoError(t, gpu.Copy(dev, hb, count*4))
	t.Setenv("FAKE_STREAM_PENDING", "2")
	s, err := rt.StreamCreate()
	require.NoError(t, err)
	defer rt.StreamDestroy(s)
	require.NoError(t, c.AllReduce(dev.Addr(), dev.Addr(), count, Float32, Sum, s))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, rt.StreamWait(ctx, s))
	want := refReduce(host, Sum, 8)
	require.NoError(t, gpu.Copy(hb, dev, count*4))
	require.Equal(t, want, host, "all-reduce through device memory")

	// An RCCL-named library asks for HIP, and says how to point at it.
	rcclPath := filepath.Join(t.TempDir(), "librccl.so")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(rcclPath, raw, 0o755))
	r, err := Open(rcclPath)
	require.NoError(t, err)
	t.Setenv(gpu.EnvHIPLib, "/nonexistent/libamdhip64.so")
	_, err = r.Runtime()
	require.Error(t, err)
	require.ErrorContains(t, err, "HIP runtime")
	require.ErrorContains(t, err, gpu.EnvHIPLib)
}

// TestInitRankDeadline covers the peer that never comes: the library blocks
// in ncclCommInitRank, InitRank returns at the deadline, and once the library
// returns after all, the orphaned communicator is aborted.
func TestInitRankDeadline(t *testing.T) {
	l := openFake(t, "libnccl-fake.so")
	id, err := l.UniqueID()
	require.NoError(t, err)
	gate := filepath.Join(t.TempDir(), "release")
	t.Setenv("FAKENCCL_INIT_WAIT", gate)

	// The fake cannot return before the gate file exists, and the test
	// creates it only after InitRank has returned: the order is fixed.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = l.InitRank(ctx, 2, id, 0, -1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("InitRank with missing peers: %v, want a deadline error", err)
	}
	if err := err; true {
		require.ErrorContains(t, err, "rank 0 of 2")
		require.ErrorContains(t, err, "did not complete")
		require.ErrorContains(t, err, "same unique id")
	}
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	// The background abort writes into the gate file; wait for it with a
	// deadline, polling the file (the only signal a C library can give here).
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(gate)
		require.NoError(t, err)
		if string(b) == "aborted" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphaned communicator was not aborted within 10 s")
		}
		runtime.Gosched()
	}
}

// TestInitRankSelectsDevice: the library binds a communicator to the device
// current on the thread that creates it, which is InitRank's own thread,
// not the caller's. InitRank selects the device it is given there.
func TestInitRankSelectsDevice(t *testing.T) {
	path := ctest.SharedLib(t, "libnccl-dev.so", fakeSources)
	l, err := Open(path)
	require.NoError(t, err)
	t.Setenv(gpu.EnvCUDARTLib, path) // the fake holds its runtime too
	t.Setenv("FAKE_DEVICES", "4")
	id, err := l.UniqueID()
	require.NoError(t, err)
	for _, dev := range []int{2, 3, -1} {
		c, err := l.InitRank(context.Background(), 1, id, 0, dev)
		require.NoError(t, err)
		got, err := c.Device()
		require.NoError(t, err)
		require.Equal(t, max(dev, 0), got, "InitRank on device %d", dev)
		require.NoError(t, c.Destroy())
	}
	_, err = l.InitRank(context.Background(), 1, id, 0, 7)
	require.ErrorContains(t, err, "ncclCommInitRank on device 7")
	require.ErrorContains(t, err, "invalid device ordinal")
}

// TestAllToAllGroupStaysOnOneThread: without a native ncclAllToAll,
// AllToAll is a group of sends and receives, and a group belongs to the
// OS thread. A slow ncclSend and a goroutine that wants the only P make
// the scheduler move AllToAll's goroutine to another thread in the middle
// of the group unless it is locked to its thread; its receives would then
// land outside the group.
func TestAllToAllGroupStaysOnOneThread(t *testing.T) {
	c, p := pairWithoutAllToAll(t, "libnccl-a2a-thread.so")
	t.Setenv("FAKENCCL_SEND_SLEEP_US", "20000")
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	stop := make(chan struct{})
	spun := make(chan struct{})
	go func() { // wants the only P whenever AllToAll's thread sleeps in C
		defer close(spun)
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	defer func() { close(stop); <-spun }()
	for i := range 5 {
		require.NoError(t, c.AllToAll(p, p+64, 4, Int32, 0), "call %d", i)
	}
}
