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
	"github.com/stretchr/testify/require"
)

func TestHostBuffer(t *testing.T) {
	b, err := AllocHost(10000, -1)
	require.NoError(t, err)
	if b.Addr()%uintptr(os.Getpagesize()) != 0 {
		t.Errorf("address %#x is not page-aligned", b.Addr())
	}
	require.Equal(t, KindHost, b.Kind(), "kind")
	require.Equal(t, 10000, b.Len(), "length")
	require.Equal(t, -1, b.NUMANode(), "node")
	b.Host()[9999] = 7
	require.NoError(t, b.Free())
	if b.Host() != nil || b.Addr() != 0 {
		t.Error("memory still visible after Free")
	}
	require.ErrorContains(t, b.Free(), "freed twice")
	_, err = AllocHost(0, -1)
	require.ErrorContains(t, err, "size must be positive")
	_, err = AllocHost(4096, maxNUMANodes)
	require.ErrorContains(t, err, "node numbers stop at")
}

func TestHostBufferNUMA(t *testing.T) {
	b, err := AllocHost(1<<20, 0)
	if errors.Is(err, syscall.ENOSYS) {
		t.Skip("kernel without NUMA support: mbind is not implemented")
	}
	require.NoError(t, err, "node 0 exists on every NUMA kernel")
	require.Equal(t, 0, b.NUMANode(), "node")
	b.Host()[0] = 1
	require.NoError(t, b.Free())

	// A node that is not online is refused by the kernel with EINVAL.
	_, err = AllocHost(1<<20, maxNUMANodes-1)
	if err := err; true {
		require.ErrorContains(t, err, "NUMA node 1023")
		require.ErrorContains(t, err, "pass -1")
	}
}

func TestCopyHost(t *testing.T) {
	a, err := AllocHost(100, -1)
	require.NoError(t, err)
	b, err := AllocHost(50, -1)
	require.NoError(t, err)
	copy(a.Host(), bytes.Repeat([]byte{9}, 100))
	require.NoError(t, Copy(b, a, 50))
	require.Equal(t, bytes.Repeat([]byte{9}, 50), b.Host(), "copied bytes")
	require.ErrorContains(t, Copy(b, a, 51), "out of range")
	require.ErrorContains(t, Copy(b, a, -1), "out of range")
	require.NoError(t, a.Free())
	require.ErrorContains(t, Copy(b, a, 1), "already freed")
	require.NoError(t, b.Free())
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
	require.NoError(t, err, "open the fake runtime")
	return rt
}

func TestRuntimeFakeRoundTrip(t *testing.T) {
	for _, api := range []API{CUDA, HIP} {
		t.Run(api.String(), func(t *testing.T) {
			rt := fakeRuntime(t, api)
			require.Equal(t, api, rt.API(), "API")
			n, err := rt.DeviceCount()
			require.NoError(t, err)
			require.Equal(t, 1, n, "device count")
			require.NoError(t, rt.SetDevice(0))
			require.ErrorContains(t, rt.SetDevice(3), "SetDevice failed with error 101: fake: invalid device ordinal")
			host, err := AllocHost(4096, -1)
			require.NoError(t, err)
			for i := range host.Host() {
				host.Host()[i] = byte(i * 7)
			}
			d1, err := rt.AllocDevice(4096)
			require.NoError(t, err)
			d2, err := rt.AllocDevice(4096)
			require.NoError(t, err)
			pinned, err := rt.AllocPinned(4096)
			require.NoError(t, err)
			require.Equal(t, []Kind{KindDevice, KindPinned}, []Kind{d1.Kind(), pinned.Kind()}, "kinds")
			if d1.Host() != nil {
				t.Error("device memory must not be visible as a slice")
			}
			require.NoError(t, Copy(d1, host, 4096), "host to device")
			require.NoError(t, Copy(d2, d1, 4096), "device to device")
			require.NoError(t, Copy(pinned, d2, 4096), "device to pinned")
			require.Equal(t, host.Host(), pinned.Host(), "bytes after three copies")

			for _, b := range []Buffer{d1, d2, pinned, host} {
				require.NoError(t, b.Free())
				require.ErrorContains(t, b.Free(), "freed twice")
			}
		})
	}
}

// TestRuntimeNoDevice: with no GPU, or all hidden (CUDA_VISIBLE_DEVICES=""),
// the runtimes' device count fails with "no device"; DeviceCount says 0, so
// that callers report no GPU rather than a failing driver.
func TestRuntimeNoDevice(t *testing.T) {
	for _, api := range []API{CUDA, HIP} {
		t.Run(api.String(), func(t *testing.T) {
			rt := fakeRuntime(t, api)
			t.Setenv("FAKE_DEVICES", "0")
			n, err := rt.DeviceCount()
			require.NoError(t, err)
			require.Equal(t, 0, n, "device count")
			t.Setenv("FAKE_FAIL", rt.symbol("GetDeviceCount"))
			_, err = rt.DeviceCount()
			require.ErrorContains(t, err, "GetDeviceCount failed with error 2", "other failures stay errors")
		})
	}
}

func TestRuntimeFakeErrors(t *testing.T) {
	rt := fakeRuntime(t, CUDA)
	t.Setenv("FAKE_FAIL", "cudaMalloc")
	_, err := rt.AllocDevice(64)
	require.ErrorContains(t, err, "cudaMalloc failed with error 2: fake: out of memory")
	var ce *CUDAError
	if !errors.As(err, &ce) || ce.Code != 2 {
		t.Errorf("error %v does not unwrap to CUDAError code 2", err)
	}
	_, err = rt.AllocDevice(0)
	require.ErrorContains(t, err, "size must be positive")
	t.Setenv("FAKE_FAIL", "")
	d, err := rt.AllocDevice(64)
	require.NoError(t, err)
	h, err := AllocHost(64, -1)
	require.NoError(t, err)
	t.Setenv("FAKE_FAIL", "cudaMemcpy")
	t.Setenv("FAKE_CODE", "1")
	require.ErrorContains(t, Copy(h, d, 64), "cudaMemcpy failed with error 1: fake: invalid argument")
	t.Setenv("FAKE_FAIL", "")
	require.ErrorContains(t, rt.Memcpy(h.Addr(), d.Addr(), 64, MemcpyKind(9)), "cudaMemcpy failed with error 1")
	other := fakeRuntime(t, CUDA)
	d2, err := other.AllocDevice(64)
	require.NoError(t, err)
	require.ErrorContains(t, Copy(d2, d, 64), "two runtimes")
}

func TestRuntimeStreams(t *testing.T) {
	rt := fakeRuntime(t, CUDA)
	t.Setenv("FAKE_STREAM_PENDING", "3")
	s, err := rt.StreamCreate()
	require.NoError(t, err)
	require.NoError(t, rt.StreamWait(context.Background(), s), "a stream that drains after three polls")
	require.NoError(t, rt.StreamSynchronize(s))
	require.NoError(t, rt.StreamDestroy(s))
	require.NoError(t, rt.StreamSynchronize(0), "default stream")
	require.NoError(t, rt.DeviceSynchronize())

	t.Setenv("FAKE_STREAM_PENDING", "-1")
	stuck, err := rt.StreamCreate()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = rt.StreamWait(ctx, stuck)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("StreamWait on a stuck stream with a cancelled context: %v, want context.Canceled", err)
	}
	require.ErrorContains(t, err, "waiting for CUDA stream")
	require.ErrorContains(t, rt.StreamSynchronize(stuck), "cudaStreamSynchronize failed with error 600")
	t.Setenv("FAKE_FAIL", "cudaStreamQuery")
	require.ErrorContains(t, rt.StreamWait(context.Background(), stuck), "cudaStreamQuery failed")
}

func TestOpenRuntimeErrors(t *testing.T) {
	ctest.NeedDlopen(t)
	// An explicit path that does not exist names the path and the variable.
	_, err := OpenRuntime(CUDA, "/nonexistent/libcudart.so")
	require.Error(t, err)
	require.ErrorContains(t, err, "CUDA runtime")
	require.ErrorContains(t, err, "/nonexistent/libcudart.so")
	require.ErrorContains(t, err, "No such file")
	require.ErrorContains(t, err, EnvCUDARTLib)
	var le *dl.LoadError
	if !errors.As(err, &le) {
		t.Errorf("%v is not a *dl.LoadError", err)
	}

	// The variable is honoured and named.
	t.Setenv(EnvHIPLib, "/nonexistent/libamdhip64.so")
	_, err = OpenRuntime(HIP, "")
	require.Error(t, err)
	require.ErrorContains(t, err, "HIP runtime")
	require.ErrorContains(t, err, "/nonexistent/libamdhip64.so")
	require.ErrorContains(t, err, EnvHIPLib)

	// A library without the entry points: the C library itself.
	_, err = OpenRuntime(CUDA, "libc.so.6")
	require.Error(t, err)
	require.ErrorContains(t, err, "libc.so.6 has no symbol cudaMalloc")
	require.ErrorContains(t, err, "set "+EnvCUDARTLib)
	var se *dl.SymbolError
	if !errors.As(err, &se) || se.Symbol != "cudaMalloc" {
		t.Errorf("%v is not a *dl.SymbolError for cudaMalloc", err)
	}

	_, err = OpenRuntime(API(9), "")
	require.ErrorContains(t, err, "unknown runtime API")
}

// TestOpenRuntimeSearch checks the search without a path or variable: on a
// machine without a GPU stack it fails, listing what it tried and the remedy.
func TestOpenRuntimeSearch(t *testing.T) {
	ctest.NeedDlopen(t)
	t.Setenv(EnvCUDARTLib, "")
	rt, err := OpenRuntime(CUDA, "")
	if err == nil {
		t.Skipf("a CUDA runtime is installed here (%s)", rt.Path())
	}
	require.Error(t, err)
	require.ErrorContains(t, err, "cannot load the CUDA runtime library")
	require.ErrorContains(t, err, "libcudart.so.12")
	require.ErrorContains(t, err, "install the CUDA runtime")
	require.ErrorContains(t, err, "or set "+EnvCUDARTLib)
}

// foreignDevice is device memory that Copy knows no runtime for, as a
// caller's own Buffer implementation would be.
type foreignDevice struct{}

func (foreignDevice) Kind() Kind    { return KindDevice }
func (foreignDevice) Len() int      { return 64 }
func (foreignDevice) Host() []byte  { return nil }
func (foreignDevice) Addr() uintptr { return 0x1000 }
func (foreignDevice) Free() error   { return nil }

// TestCopyDeviceWithoutRuntime: a device buffer without a runtime on either
// side of a device-to-device copy is an error, not a nil dereference.
func TestCopyDeviceWithoutRuntime(t *testing.T) {
	rt := fakeRuntime(t, CUDA)
	d, err := rt.AllocDevice(64)
	require.NoError(t, err)
	defer d.Free()
	require.ErrorContains(t, Copy(d, foreignDevice{}, 64), "without a runtime")
	require.ErrorContains(t, Copy(foreignDevice{}, d, 64), "without a runtime")
	require.ErrorContains(t, Copy(foreignDevice{}, foreignDevice{}, 64), "without a runtime")
}
