package gpu

import (
	"fmt"
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
	// Name is the code's name in the API's header
	// ("CUDA_ERROR_STUB_LIBRARY"), where known; "" otherwise.
	Name string
	// Text is the library's own description of the code, "" where it
	// gave none (the toolkit's stub libcuda describes nothing).
	Text string
	// Hint says what to do, for a code with one cause the user can
	// remove; "" otherwise.
	Hint string
}

func (e *CUDAError) Error() string {
	s := fmt.Sprintf("%s failed with error %d", e.Func, e.Code)
	if e.Name != "" {
		s += " (" + e.Name + ")"
	}
	if e.Text != "" {
		s += ": " + e.Text
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// cuResult describes a CUresult of the driver API: its name in cuda.h,
// and what to do about it where that is one thing.
type cuResult struct {
	name, hint string
}

// cuResults are the driver API's codes that discovery meets on machines set
// up wrongly, named so that an error can be looked up even where the
// library gives no text (the stub libcuda has none). The numbers are
// CUresult's, not the runtime's cudaError_t (whose 35, "insufficient
// driver", CUresult does not have).
var cuResults = map[int]cuResult{
	1: {name: "CUDA_ERROR_INVALID_VALUE"},
	2: {name: "CUDA_ERROR_OUT_OF_MEMORY"},
	3: {name: "CUDA_ERROR_NOT_INITIALIZED"},
	4: {name: "CUDA_ERROR_DEINITIALIZED"},
	34: {name: "CUDA_ERROR_STUB_LIBRARY",
		hint: "this libcuda is the CUDA toolkit's stub (from its lib64/stubs directory), made for linking programs, not for running them: " +
			"a stubs directory on LD_LIBRARY_PATH comes before the NVIDIA driver's libcuda.so.1, or the driver is not installed; " +
			"take the stubs directory out of LD_LIBRARY_PATH, or set " + EnvCUDADriverLib + " to the driver's libcuda.so.1"},
	46:  {name: "CUDA_ERROR_DEVICE_UNAVAILABLE"},
	100: {name: "CUDA_ERROR_NO_DEVICE"},
	101: {name: "CUDA_ERROR_INVALID_DEVICE"},
	304: {name: "CUDA_ERROR_OPERATING_SYSTEM"},
	802: {name: "CUDA_ERROR_SYSTEM_NOT_READY",
		hint: "on a machine with NVSwitches, the NVIDIA Fabric Manager (nvidia-fabricmanager) must be running before CUDA starts"},
	803: {name: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
		hint: "this libcuda and the loaded NVIDIA kernel module are of different driver versions, as after a driver update without a reboot: " +
			"reboot, or use the libcuda of the running module (its version is in /proc/driver/nvidia/version)"},
	804: {name: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"},
	999: {name: "CUDA_ERROR_UNKNOWN",
		hint: "the driver gives no reason: nvidia-smi and the kernel log (dmesg) usually say more"},
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
		e := &CUDAError{Func: fn, Code: rc, Name: cuResults[rc].name, Hint: cuResults[rc].hint}
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
			// ParsePCI's error has the package's prefix already:
			// withoutPrefix reads it without, and keeps it reachable.
			return nil, fmt.Errorf("gpu: %s: cuDeviceGetPCIBusId of device %d: %w", lib.Path(), i, withoutPrefix(err))
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
