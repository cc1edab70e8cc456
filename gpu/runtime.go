package gpu

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/metaroce/metaroce/gpu/internal/dl"
)

// API is a GPU runtime library: HIP on AMD, CUDA on NVIDIA. Both expose the
// same calls under different prefixes, with the same argument layouts and
// the same memcpy-kind and not-ready codes, so one Runtime serves both.
type API int

// Runtime APIs.
const (
	HIP API = iota + 1
	CUDA
)

func (a API) String() string {
	switch a {
	case HIP:
		return "HIP"
	case CUDA:
		return "CUDA"
	}
	return fmt.Sprintf("API(%d)", int(a))
}

// Environment variables that name the runtime libraries.
const (
	EnvHIPLib    = "METAROCE_HIP_LIB"
	EnvCUDARTLib = "METAROCE_CUDART_LIB"
)

// runtimeSearch is where each runtime may be: its sonames, ROCm's or the
// CUDA toolkit's directory, and the copies PyTorch's wheels bring (ROCm
// builds bundle HIP in torch/lib; CUDA builds take libcudart from the
// nvidia-cuda-runtime-cu12 wheel, in nvidia/cuda_runtime/lib, or from CUDA
// 13's nvidia-cuda-runtime, which puts it in nvidia/cu13/lib, a directory
// all of CUDA 13's wheels share; older builds bundled it in torch/lib).
var runtimeSearch = map[API]LibSearch{
	HIP: {
		Names:  []string{"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7", "libamdhip64.so.5"},
		Python: []string{"torch/lib/libamdhip64.so*"},
		System: []dl.Place{
			Linker("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7", "libamdhip64.so.5"),
			{Dirs: []string{"/opt/rocm/lib"}, Files: []string{"libamdhip64.so"}},
		},
	},
	CUDA: {
		Names:  []string{"libcudart.so", "libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0"},
		Python: []string{"nvidia/cuda_runtime/lib/libcudart.so*", "nvidia/cu13/lib/libcudart.so*", "torch/lib/libcudart*.so*"},
		System: []dl.Place{
			Linker("libcudart.so", "libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0"),
			{Dirs: []string{"/usr/local/cuda/lib64"}, Files: []string{"libcudart.so"}},
		},
	},
}

var runtimeSpecs = map[API]dl.Spec{
	HIP: {
		What:    "HIP runtime",
		Env:     EnvHIPLib,
		Search:  runtimeSearch[HIP].Places,
		Install: "ROCm's HIP runtime (package hip-runtime-amd)",
	},
	CUDA: {
		What:    "CUDA runtime",
		Env:     EnvCUDARTLib,
		Search:  runtimeSearch[CUDA].Places,
		Install: "the CUDA runtime (libcudart, e.g. package cuda-cudart-12-x or pip nvidia-cuda-runtime-cu12)",
	},
}

// runtimeFuncs lists the entry points a Runtime resolves, in the order of the
// fields of runtimeFns, without the "hip"/"cuda" prefix.
var runtimeFuncs = []string{
	"Malloc", "Free", "HostAlloc", "FreeHost", "Memcpy", "StreamCreate", "StreamDestroy",
	"StreamSynchronize", "StreamQuery", "GetDeviceCount", "SetDevice", "DeviceSynchronize", "GetErrorString",
}

// runtimeNames maps the generic names to each API's symbols where they are
// not just the prefix plus the generic name.
var runtimeNames = map[API]map[string]string{
	HIP:  {"HostAlloc": "hipHostMalloc", "FreeHost": "hipHostFree"},
	CUDA: {},
}

type runtimeFns struct {
	malloc, free, hostAlloc, freeHost, memcpy, streamCreate, streamDestroy,
	streamSync, streamQuery, deviceCount, setDevice, deviceSync, errString unsafe.Pointer
}

// MemcpyKind is the direction argument of hipMemcpy/cudaMemcpy; the values
// are the same in both APIs.
type MemcpyKind int

// Memcpy directions.
const (
	HostToHost     MemcpyKind = 0
	HostToDevice   MemcpyKind = 1
	DeviceToHost   MemcpyKind = 2
	DeviceToDevice MemcpyKind = 3
)

// Stream is a hipStream_t or cudaStream_t handle; 0 is the default stream.
type Stream uintptr

// errNotReady is hipErrorNotReady and cudaErrorNotReady: work is pending.
const errNotReady = 600

// errNoDevice is hipErrorNoDevice and cudaErrorNoDevice: the runtime sees no
// GPU, none being installed or all hidden by HIP_VISIBLE_DEVICES,
// ROCR_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES.
const errNoDevice = 100

// Runtime is an opened HIP or CUDA runtime library. Its methods may be
// called from any goroutine; the libraries are thread-safe, but the current
// device (SetDevice) belongs to the OS thread, so callers that use several
// devices lock their goroutine to a thread.
type Runtime struct {
	api API
	lib *dl.Lib
	fn  runtimeFns
}

// OpenRuntime opens the runtime of api from path, or, when path is empty,
// from METAROCE_HIP_LIB / METAROCE_CUDART_LIB or the usual locations in the
// order of LibSearch.Places: LD_LIBRARY_PATH, the active virtualenv's or
// conda environment's PyTorch, the user's, the linker's path, /opt/rocm/lib
// or /usr/local/cuda/lib64, the system Python's PyTorch.
func OpenRuntime(api API, path string) (*Runtime, error) {
	spec, ok := runtimeSpecs[api]
	if !ok {
		return nil, fmt.Errorf("gpu: unknown runtime API %v", api)
	}
	lib, err := dl.Open(spec, path)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	r := &Runtime{api: api, lib: lib}
	f := &r.fn
	into := []*unsafe.Pointer{&f.malloc, &f.free, &f.hostAlloc, &f.freeHost, &f.memcpy, &f.streamCreate,
		&f.streamDestroy, &f.streamSync, &f.streamQuery, &f.deviceCount, &f.setDevice, &f.deviceSync, &f.errString}
	names := make([]string, len(runtimeFuncs))
	for i, g := range runtimeFuncs {
		names[i] = r.symbol(g)
	}
	if err := lib.Syms(names, into); err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	return r, nil
}

// symbol returns the library's name for the generic entry point g.
func (r *Runtime) symbol(g string) string {
	if s, ok := runtimeNames[r.api][g]; ok {
		return s
	}
	if r.api == HIP {
		return "hip" + g
	}
	return "cuda" + g
}

// API reports whether this is the HIP or the CUDA runtime.
func (r *Runtime) API() API { return r.api }

// Path is the library the runtime was loaded from.
func (r *Runtime) Path() string { return r.lib.Path() }

// check turns a non-zero return code of generic entry point g into an error
// carrying the library's text for it.
func (r *Runtime) check(g string, rc int) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("gpu: %w", &CUDAError{Func: r.symbol(g), Code: rc, Text: callSI(r.fn.errString, rc)})
}

// DeviceCount is the number of GPUs the runtime can use. No GPU is a count
// of 0, not an error: both runtimes answer it with errNoDevice rather than
// a zero count, and callers tell the user what to check.
func (r *Runtime) DeviceCount() (int, error) {
	var n int32
	rc := callP(r.fn.deviceCount, unsafe.Pointer(&n))
	if rc == errNoDevice {
		return 0, nil
	}
	if err := r.check("GetDeviceCount", rc); err != nil {
		return 0, err
	}
	return int(n), nil
}

// SetDevice makes device i current for the calling OS thread.
func (r *Runtime) SetDevice(i int) error { return r.check("SetDevice", callI(r.fn.setDevice, i)) }

// Malloc allocates n bytes of device memory and returns its device address.
func (r *Runtime) Malloc(n int) (uintptr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("gpu: %s of %d bytes: size must be positive", r.symbol("Malloc"), n)
	}
	var p uintptr
	if err := r.check("Malloc", callPZ(r.fn.malloc, unsafe.Pointer(&p), uintptr(n))); err != nil {
		return 0, err
	}
	return p, nil
}

// Free releases device memory from Malloc.
func (r *Runtime) Free(p uintptr) error { return r.check("Free", callH(r.fn.free, p)) }

// MallocHost allocates n bytes of page-locked host memory, which the GPU
// reaches by DMA and which makes host<->device copies asynchronous-capable.
func (r *Runtime) MallocHost(n int) (unsafe.Pointer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("gpu: %s of %d bytes: size must be positive", r.symbol("HostAlloc"), n)
	}
	var p unsafe.Pointer
	if err := r.check("HostAlloc", callPZU(r.fn.hostAlloc, unsafe.Pointer(&p), uintptr(n), 0)); err != nil {
		return nil, err
	}
	return p, nil
}

// FreeHost releases memory from MallocHost.
func (r *Runtime) FreeHost(p unsafe.Pointer) error {
	return r.check("FreeHost", callP(r.fn.freeHost, p))
}

// Memcpy copies n bytes from src to dst (addresses in the spaces kind says)
// and returns when the copy is complete.
func (r *Runtime) Memcpy(dst, src uintptr, n int, kind MemcpyKind) error {
	if n < 0 {
		return fmt.Errorf("gpu: %s of %d bytes: negative size", r.symbol("Memcpy"), n)
	}
	return r.check("Memcpy", callHHZI(r.fn.memcpy, dst, src, uintptr(n), int(kind)))
}

// StreamCreate creates a stream on the current device.
func (r *Runtime) StreamCreate() (Stream, error) {
	var s uintptr
	if err := r.check("StreamCreate", callP(r.fn.streamCreate, unsafe.Pointer(&s))); err != nil {
		return 0, err
	}
	return Stream(s), nil
}

// StreamDestroy releases a stream from StreamCreate.
func (r *Runtime) StreamDestroy(s Stream) error {
	return r.check("StreamDestroy", callH(r.fn.streamDestroy, uintptr(s)))
}

// StreamSynchronize blocks until all work queued on s is done. It has no
// deadline: a collective waiting for a dead peer blocks it forever, so
// callers that may meet one use StreamWait.
func (r *Runtime) StreamSynchronize(s Stream) error {
	return r.check("StreamSynchronize", callH(r.fn.streamSync, uintptr(s)))
}

// StreamWait waits until all work queued on s is done or ctx ends, polling
// StreamQuery with a backoff from 1 µs to 1 ms. On ctx's end the work is
// still queued: the caller aborts the communicator that feeds the stream.
func (r *Runtime) StreamWait(ctx context.Context, s Stream) error {
	delay := time.Microsecond
	for {
		rc := callH(r.fn.streamQuery, uintptr(s))
		if rc != errNotReady {
			return r.check("StreamQuery", rc)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("gpu: waiting for %s stream %#x: %w", r.api, uintptr(s), ctx.Err())
		case <-t.C:
		}
		if delay < time.Millisecond {
			delay *= 2
		}
	}
}

// DeviceSynchronize blocks until the current device is idle.
func (r *Runtime) DeviceSynchronize() error {
	return r.check("DeviceSynchronize", callV(r.fn.deviceSync))
}
