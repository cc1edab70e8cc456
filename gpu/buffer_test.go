package gpu

import (
	"bytes"
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/metaroce/metaroce/gpu/internal/ctest"
	"github.com/metaroce/metaroce/gpu/internal/dl"
)

func TestHostBuffer(t *testing.T) {
	b, err := AllocHost(10000, -1)
	mustNoErr(t, err)
	if b.Addr()%uintptr(os.Getpagesize()) != 0 {
		t.Errorf("address %#x is not page-aligned", b.Addr())
	}
	mustEqual(t, KindHost, b.Kind(), "kind")
	mustEqual(t, 10000, b.Len(), "length")
	mustEqual(t, -1, b.NUMANode(), "node")
	b.Host()[9999] = 7
	mustNoErr(t, b.Free())
	if b.Host() != nil || b.Addr() != 0 {
		t.Error("memory still visible after Free")
	}
	mustErrContains(t, b.Free(), "freed twice")

	_, err = AllocHost(0, -1)
	mustErrContains(t, err, "size must be positive")
	_, err = AllocHost(4096, maxNUMANodes)
	mustErrContains(t, err, "node numbers stop at")
}

func TestHostBufferNUMA(t *testing.T) {
	b, err := AllocHost(1<<20, 0)
	if errors.Is(err, syscall.ENOSYS) {
		t.Skip("kernel without NUMA support: mbind is not implemented")
	}
	mustNoErr(t, err, "node 0 exists on every NUMA kernel")
	mustEqual(t, 0, b.NUMANode(), "node")
	b.Host()[0] = 1
	mustNoErr(t, b.Free())

	// A node that is not online is refused by the kernel with EINVAL.
	_, err = AllocHost(1<<20, maxNUMANodes-1)
	mustErrContains(t, err, "NUMA node 1023", "pass -1")
}

func TestCopyHost(t *testing.T) {
	a, err := AllocHost(100, -1)
	mustNoErr(t, err)
	b, err := AllocHost(50, -1)
	mustNoErr(t, err)
	copy(a.Host(), bytes.Repeat([]byte{9}, 100))
	mustNoErr(t, Copy(b, a, 50))
	mustEqual(t, bytes.Repeat([]byte{9}, 50), b.Host(), "copied bytes")
	mustErrContains(t, Copy(b, a, 51), "out of range")
	mustErrContains(t, Copy(b, a, -1), "out of range")
	mustNoErr(t, a.Free())
	mustErrContains(t, Copy(b, a, 1), "already freed")
	mustNoErr(t, b.Free())
}

// fakeRuntime builds the fake runtime library; hip selects HIP symbol names.
func fakeRuntime(t *testing.T, api API) *Runtime {
	t.Helper()
	var lib string
	if api == HIP {
		lib = ctest.SharedLib(t, "libamdhip64.so", []string{"testdata/fakecudart.c"}, "-DFAKE_HIP")
	} else {
		lib = ctest.SharedLib(t, "libcudart.so", []string{"testdata/fakecudart.c"})
	}
	rt, err := OpenRuntime(api, lib)
	mustNoErr(t, err, "open the fake runtime")
	return rt
}

func TestRuntimeFakeRoundTrip(t *testing.T) {
	for _, api := range []API{CUDA, HIP} {
		t.Run(api.String(), func(t *testing.T) {
			rt := fakeRuntime(t, api)
			mustEqual(t, api, rt.API(), "API")
			n, err := rt.DeviceCount()
			mustNoErr(t, err)
			mustEqual(t, 1, n, "device count")
			mustNoErr(t, rt.SetDevice(0))
			mustErrContains(t, rt.SetDevice(3), "SetDevice failed with error 101: fake: invalid device ordinal")

			host, err := AllocHost(4096, -1)
			mustNoErr(t, err)
			for i := range host.Host() {
				host.Host()[i] = byte(i * 7)
			}
			d1, err := rt.AllocDevice(4096)
			mustNoErr(t, err)
			d2, err := rt.AllocDevice(4096)
			mustNoErr(t, err)
			pinned, err := rt.AllocPinned(4096)
			mustNoErr(t, err)
			mustEqual(t, []Kind{KindDevice, KindPinned}, []Kind{d1.Kind(), pinned.Kind()}, "kinds")
			if d1.Host() != nil {
				t.Error("device memory must not be visible as a slice")
			}
			mustNoErr(t, Copy(d1, host, 4096), "host to device")
			mustNoErr(t, Copy(d2, d1, 4096), "device to device")
			mustNoErr(t, Copy(pinned, d2, 4096), "device to pinned")
			mustEqual(t, host.Host(), pinned.Host(), "bytes after three copies")

			for _, b := range []Buffer{d1, d2, pinned, host} {
				mustNoErr(t, b.Free())
				mustErrContains(t, b.Free(), "freed twice")
			}
		})
	}
}

func TestRuntimeFakeErrors(t *testing.T) {
	rt := fakeRuntime(t, CUDA)
	t.Setenv("FAKE_FAIL", "cudaMalloc")
	_, err := rt.AllocDevice(64)
	mustErrContains(t, err, "cudaMalloc failed with error 2: fake: out of memory")
	var ce *CUDAError
	if !errors.As(err, &ce) || ce.Code != 2 {
		t.Errorf("error %v does not unwrap to CUDAError code 2", err)
	}
	_, err = rt.AllocDevice(0)
	mustErrContains(t, err, "size must be positive")

	t.Setenv("FAKE_FAIL", "")
	d, err := rt.AllocDevice(64)
	mustNoErr(t, err)
	h, err := AllocHost(64, -1)
	mustNoErr(t, err)
	t.Setenv("FAKE_FAIL", "cudaMemcpy")
	t.Setenv("FAKE_CODE", "1")
	mustErrContains(t, Copy(h, d, 64), "cudaMemcpy failed with error 1: fake: invalid argument")
	t.Setenv("FAKE_FAIL", "")
	mustErrContains(t, rt.Memcpy(h.Addr(), d.Addr(), 64, MemcpyKind(9)), "cudaMemcpy failed with error 1")

	other := fakeRuntime(t, CUDA)
	d2, err := other.AllocDevice(64)
	mustNoErr(t, err)
	mustErrContains(t, Copy(d2, d, 64), "two runtimes")
}

func TestRuntimeStreams(t *testing.T) {
	rt := fakeRuntime(t, CUDA)
	t.Setenv("FAKE_STREAM_PENDING", "3")
	s, err := rt.StreamCreate()
	mustNoErr(t, err)
	mustNoErr(t, rt.StreamWait(context.Background(), s), "a stream that drains after three polls")
	mustNoErr(t, rt.StreamSynchronize(s))
	mustNoErr(t, rt.StreamDestroy(s))
	mustNoErr(t, rt.StreamSynchronize(0), "default stream")
	mustNoErr(t, rt.DeviceSynchronize())

	t.Setenv("FAKE_STREAM_PENDING", "-1")
	stuck, err := rt.StreamCreate()
	mustNoErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = rt.StreamWait(ctx, stuck)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("StreamWait on a stuck stream with a cancelled context: %v, want context.Canceled", err)
	}
	mustErrContains(t, err, "waiting for CUDA stream")
	mustErrContains(t, rt.StreamSynchronize(stuck), "cudaStreamSynchronize failed with error 600")

	t.Setenv("FAKE_FAIL", "cudaStreamQuery")
	mustErrContains(t, rt.StreamWait(context.Background(), stuck), "cudaStreamQuery failed")
}

func TestOpenRuntimeErrors(t *testing.T) {
	// An explicit path that does not exist names the path and the variable.
	_, err := OpenRuntime(CUDA, "/nonexistent/libcudart.so")
	mustErrContains(t, err, "CUDA runtime", "/nonexistent/libcudart.so", "No such file", EnvCUDARTLib)
	var le *dl.LoadError
	if !errors.As(err, &le) {
		t.Errorf("%v is not a *dl.LoadError", err)
	}

	// The variable is honoured and named.
	t.Setenv(EnvHIPLib, "/nonexistent/libamdhip64.so")
	_, err = OpenRuntime(HIP, "")
	mustErrContains(t, err, "HIP runtime", "/nonexistent/libamdhip64.so", EnvHIPLib)

	// A library without the entry points: the C library itself.
	_, err = OpenRuntime(CUDA, "libc.so.6")
	mustErrContains(t, err, "libc.so.6 has no symbol cudaMalloc", "set "+EnvCUDARTLib)
	var se *dl.SymbolError
	if !errors.As(err, &se) || se.Symbol != "cudaMalloc" {
		t.Errorf("%v is not a *dl.SymbolError for cudaMalloc", err)
	}

	_, err = OpenRuntime(API(9), "")
	mustErrContains(t, err, "unknown runtime API")
}

// TestOpenRuntimeSearch checks the search without a path or variable: on a
// machine without a GPU stack it fails, listing what it tried and the remedy.
func TestOpenRuntimeSearch(t *testing.T) {
	t.Setenv(EnvCUDARTLib, "")
	rt, err := OpenRuntime(CUDA, "")
	if err == nil {
		t.Skipf("a CUDA runtime is installed here (%s)", rt.Path())
	}
	mustErrContains(t, err, "cannot load the CUDA runtime library", "libcudart.so.12", "install the CUDA runtime", "or set "+EnvCUDARTLib)
}
