package gpu

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/metaroce/metaroce/gpu/internal/dl"
)

// EnvCUDADriverLib names the CUDA driver library (libcuda.so.1) when it is not
// on the dynamic linker's path.
const EnvCUDADriverLib = "METAROCE_CUDA_LIB"

// cudaDriverSpec describes libcuda, the driver API library that ships with
// the NVIDIA kernel driver (not with the CUDA toolkit).
var cudaDriverSpec = dl.Spec{
	What: "CUDA driver",
	Env:  EnvCUDADriverLib,
	Search: func() []dl.Place {
		return []dl.Place{
			Linker("libcuda.so.1", "libcuda.so"),
			{Dirs: []string{"/usr/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64"}, Files: []string{"libcuda.so.1"}},
		}
	},
	Install: "the NVIDIA driver (libcuda.so.1)",
}

// cuNameLen is the buffer for cuDeviceGetName, in bytes; NVIDIA names are
// well under 100 characters.
const cuNameLen = 256

// cuPCILen is the buffer for cuDeviceGetPCIBusId, in bytes; the driver asks
// for at least 13 ("dddd:bb:dd.f" and a NUL) and prints up to 8 domain digits.
const cuPCILen = 64

// CUDAError is a non-zero CUresult or cudaError_t from an NVIDIA or AMD entry
// point, with the name of the call and the library's own text for the code.
type CUDAError struct {
	Func string
	Code int
	Text string
}

func (e *CUDAError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("%s failed with error %d", e.Func, e.Code)
	}
	return fmt.Sprintf("%s failed with error %d: %s", e.Func, e.Code, e.Text)
}

// QueryCUDA lists the NVIDIA GPUs through the driver API of libcuda, opened
// from path or, when path is empty, from METAROCE_CUDA_LIB or the usual
// names. It honours CUDA_VISIBLE_DEVICES, as every CUDA program does. A
// driver that reports no device (CUDA_ERROR_NO_DEVICE) yields an empty list.
// Every error begins "gpu: ", as the package's others do.
func QueryCUDA(path string) ([]Device, error) {
	lib, err := dl.Open(cudaDriverSpec, path)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	var cuInit, cuCount, cuGet, cuName, cuMem, cuPCI unsafe.Pointer
	if err := lib.Syms(
		[]string{"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceTotalMem_v2", "cuDeviceGetPCIBusId"},
		[]*unsafe.Pointer{&cuInit, &cuCount, &cuGet, &cuName, &cuMem, &cuPCI}); err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	cuErrStr, _ := lib.Sym("cuGetErrorString")
	fail := func(fn string, rc int) error {
		e := &CUDAError{Func: fn, Code: rc}
		if cuErrStr != nil {
			e.Text = callCUStr(cuErrStr, rc)
		}
		return fmt.Errorf("gpu: %s: %w", lib.Path(), e)
	}
	const cudaErrorNoDevice = 100
	if rc := callU(cuInit, 0); rc == cudaErrorNoDevice {
		return nil, nil
	} else if rc != 0 {
		return nil, fail("cuInit", rc)
	}
	var n int32
	if rc := callP(cuCount, unsafe.Pointer(&n)); rc != 0 {
		return nil, fail("cuDeviceGetCount", rc)
	}
	if n < 0 {
		// A count no driver reports: a broken or foreign library
		// behind the name, not a machine without GPUs.
		return nil, fmt.Errorf("gpu: %s: cuDeviceGetCount succeeded with a count of %d devices: this is no working libcuda; reinstall %s, or set %s to the driver's libcuda.so.1",
			lib.Path(), n, cudaDriverSpec.Install, EnvCUDADriverLib)
	}
	devs := make([]Device, 0, n)
	for i := 0; i < int(n); i++ {
		var dev int32
		if rc := callPI(cuGet, unsafe.Pointer(&dev), i); rc != 0 {
			return nil, fail("cuDeviceGet", rc)
		}
		var name [cuNameLen]byte
		if rc := callPII(cuName, unsafe.Pointer(&name[0]), len(name), int(dev)); rc != 0 {
			return nil, fail("cuDeviceGetName", rc)
		}
		var mem uint64
		if rc := callPI(cuMem, unsafe.Pointer(&mem), int(dev)); rc != 0 {
			return nil, fail("cuDeviceTotalMem_v2", rc)
		}
		var bus [cuPCILen]byte
		if rc := callPII(cuPCI, unsafe.Pointer(&bus[0]), len(bus), int(dev)); rc != 0 {
			return nil, fail("cuDeviceGetPCIBusId", rc)
		}
		pci, err := ParsePCI(cString(bus[:]))
		if err != nil {
			// ParsePCI's error has the package's prefix already.
			return nil, fmt.Errorf("gpu: %s: cuDeviceGetPCIBusId of device %d: %s", lib.Path(), i, strings.TrimPrefix(err.Error(), "gpu: "))
		}
		devs = append(devs, Device{Vendor: NVIDIA, Index: i, Name: cString(name[:]), MemBytes: mem, PCI: pci, NUMANode: -1})
	}
	return devs, nil
}

// cString returns the bytes of b up to the first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
