package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/metaroce/metaroce/gpu/internal/dl"
)

// Options says where discovery looks.
type Options struct {
	// Root is the filesystem holding sys/ and proc/; nil means the real
	// root, os.DirFS("/"). Tests pass fake trees.
	Root fs.FS
	// CUDADriver is the path of libcuda; empty searches METAROCE_CUDA_LIB
	// and the usual names.
	CUDADriver string
	// NoCUDADriver skips libcuda, leaving NVIDIA memory sizes unknown.
	NoCUDADriver bool
}

// Report is the outcome of discovery.
type Report struct {
	// Devices are the GPUs found: AMD first, then NVIDIA, each in driver
	// order.
	Devices []Device
	// Notes are problems that did not stop discovery, such as a libcuda
	// that failed to load, and the limits that CUDA_VISIBLE_DEVICES and
	// its kind put on the GPUs listed; one line each.
	Notes []string

	// amdWhy and nvWhy say what was found of each vendor's driver, for
	// FallbackNotice; empty (a Report not made by Discover) is read as
	// no driver at all.
	amdWhy, nvWhy string
}

// nvNoGPU is Report.nvWhy when neither procfs nor libcuda shows an NVIDIA
// driver.
const nvNoGPU = "no NVIDIA driver"

// nvNoCgo is Report.nvWhy when procfs shows no NVIDIA driver and libcuda
// could not be asked, the build having no cgo: procfs is hidden in some
// containers whose GPUs libcuda still finds, so "no NVIDIA driver" would
// claim more than was looked at.
const nvNoCgo = "no NVIDIA driver in /proc/driver/nvidia, and libcuda not asked: NVIDIA GPU detection through libcuda needs a build with cgo (CGO_ENABLED=1)"

// Discover lists the GPUs of the machine (or of the fake tree in opt.Root).
// Errors are reserved for trees that exist but cannot be read; a machine
// without GPUs gets an empty Report.
func Discover(opt Options) (*Report, error) {
	root := opt.Root
	if root == nil {
		root = os.DirFS("/")
	}
	amd, topo, err := discoverAMD(root)
	if err != nil {
		return nil, err
	}
	nv, err := DiscoverNVIDIAProc(root)
	if err != nil {
		return nil, err
	}
	rep := &Report{amdWhy: topo.why(), nvWhy: nvNoGPU}
	if _, err := fs.Stat(root, nvProcGPUs); err == nil {
		rep.nvWhy = "the NVIDIA driver lists no GPU"
	}
	cudaSees := -1
	if !opt.NoCUDADriver {
		cu, err := QueryCUDA(opt.CUDADriver)
		// A note is read inside a "gpu: " line (Summary): the error's
		// own prefix is left out of it.
		var why string
		if err != nil {
			why = strings.TrimPrefix(err.Error(), "gpu: ")
		}
		var le *dl.LoadError
		switch {
		case err == nil:
			if len(cu) == 0 && len(nv) == 0 && rep.nvWhy == nvNoGPU {
				// procfs hidden (a container) or absent, and a
				// driver that answers: there is a driver.
				rep.nvWhy = "libcuda reports no NVIDIA GPU"
				if v, ok := os.LookupEnv(EnvCUDAVisibleDevices); ok {
					rep.nvWhy += fmt.Sprintf(" with %s=%q", EnvCUDAVisibleDevices, v)
				}
			}
			nv = mergeCUDA(root, nv, cu)
			cudaSees = countSeen(nv, cu)
		case len(nv) > 0:
			rep.Notes = append(rep.Notes, "NVIDIA memory sizes unknown: "+why)
		case errors.Is(err, dl.ErrNoCgo):
			// Said in the reason, where a note would repeat it.
			if rep.nvWhy == nvNoGPU {
				rep.nvWhy = nvNoCgo
			}
		case !errors.As(err, &le) || le.Explicit:
			// No NVIDIA GPU in procfs, which some containers hide: a
			// libcuda that was named (Options.CUDADriver or
			// METAROCE_CUDA_LIB) and did not load, or one that loaded and
			// failed, may be what hides the GPUs. Only a search that
			// found no libcuda at all is the plain no-NVIDIA case.
			rep.Notes = append(rep.Notes, "NVIDIA GPUs not queried: "+why)
		}
	}
	rep.Notes = append(rep.Notes, visibleNotes(len(amd), len(nv), cudaSees)...)
	rep.Devices = append(amd, nv...)
	return rep, nil
}

// Variables with which CUDA and HIP programs limit the GPUs they use. The
// KFD topology and procfs list every GPU regardless, so discovery names
// them in the Report's notes rather than parse them: ROCR_VISIBLE_DEVICES
// and CUDA_VISIBLE_DEVICES take UUIDs and MIG ids as well as indices, and
// ROCR's list is applied before HIP's.
const (
	// EnvCUDAVisibleDevices limits CUDA programs, and HIP programs too
	// (HIP reads it as HIP_VISIBLE_DEVICES).
	EnvCUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"
	// EnvHIPVisibleDevices limits HIP programs.
	EnvHIPVisibleDevices = "HIP_VISIBLE_DEVICES"
	// EnvROCRVisibleDevices limits every ROCm program, below HIP.
	EnvROCRVisibleDevices = "ROCR_VISIBLE_DEVICES"
	// EnvGPUDeviceOrdinal limits HIP and OpenCL programs on ROCm.
	EnvGPUDeviceOrdinal = "GPU_DEVICE_ORDINAL"
)

// visibleVars are the variables above, in the order ROCm applies the AMD
// ones (ROCR first).
var visibleVars = []string{EnvROCRVisibleDevices, EnvHIPVisibleDevices, EnvCUDAVisibleDevices, EnvGPUDeviceOrdinal}

// countSeen is how many of the NVIDIA GPUs in nv libcuda listed in cu,
// matched by PCI address; MIG instances of one GPU count once.
func countSeen(nv, cu []Device) int {
	inCU := make(map[string]bool, len(cu))
	for _, d := range cu {
		inCU[d.PCI] = true
	}
	n := 0
	for _, d := range nv {
		if inCU[d.PCI] {
			n++
		}
	}
	return n
}

// visibleNotes says, for a report of nAMD AMD and nNV NVIDIA GPUs, how many
// of them a CUDA or HIP program may use, when that is or may be fewer than
// listed. cudaSees is how many of the NVIDIA GPUs libcuda reports (it
// applies CUDA_VISIBLE_DEVICES and the container's device list), or -1 when
// libcuda was not asked. A variable that is set, even to "" (which hides
// every GPU), is named with its value; the notes are empty when none is set
// and libcuda sees every NVIDIA GPU.
func visibleNotes(nAMD, nNV, cudaSees int) []string {
	var notes []string
	cvd, cvdSet := os.LookupEnv(EnvCUDAVisibleDevices)
	switch {
	case nNV == 0:
	case cudaSees >= 0 && cudaSees < nNV:
		s := fmt.Sprintf("CUDA programs see %d of the %d NVIDIA GPUs", cudaSees, nNV)
		if cvdSet {
			s += fmt.Sprintf(" (%s=%q)", EnvCUDAVisibleDevices, cvd)
		}
		notes = append(notes, s)
	case cudaSees < 0 && cvdSet:
		notes = append(notes, fmt.Sprintf("%s=%q limits CUDA programs to the NVIDIA GPUs it names; all the driver shows are listed",
			EnvCUDAVisibleDevices, cvd))
	}
	if nAMD > 0 {
		var set []string
		for _, v := range visibleVars {
			if val, ok := os.LookupEnv(v); ok {
				set = append(set, fmt.Sprintf("%s=%q", v, val))
			}
		}
		switch len(set) {
		case 0:
		case 1:
			notes = append(notes, set[0]+" limits HIP programs to the AMD GPUs it names; all the driver shows are listed")
		default:
			notes = append(notes, strings.Join(set, ", ")+" limit HIP programs to the AMD GPUs they name; all the driver shows are listed")
		}
	}
	return notes
}

// mergeCUDA fills the memory sizes of the procfs list from the driver API's
// list, matching by PCI address. When procfs shows nothing (some containers
// hide it), the driver API's list is used, with NUMA nodes from sysfs.
func mergeCUDA(root fs.FS, proc, cu []Device) []Device {
	if len(proc) == 0 {
		for i := range cu {
			cu[i].NUMANode = NUMANodeOf(root, cu[i].PCI)
		}
		return cu
	}
	byPCI := make(map[string]Device, len(cu))
	for _, d := range cu {
		byPCI[d.PCI] = d
	}
	for i := range proc {
		if d, ok := byPCI[proc[i].PCI]; ok {
			proc[i].MemBytes = d.MemBytes
			if proc[i].Name == "" {
				proc[i].Name = d.Name
			}
		}
	}
	return proc
}

// FallbackNotice is the one line to print when no GPU was found and host
// memory is used instead, or "" when GPUs were found. It says what was
// found of each vendor's driver: nothing, a driver that shows no GPU, or
// GPUs hidden from this process. Notes, such as a libcuda named by
// METAROCE_CUDA_LIB that did not load, follow in parentheses.
func (r *Report) FallbackNotice() string {
	if len(r.Devices) > 0 {
		return ""
	}
	amd, nv := r.amdWhy, r.nvWhy
	if amd == "" {
		amd = kfdTopology{}.why()
	}
	if nv == "" {
		nv = nvNoGPU
	}
	s := "gpu: no GPU found (" + amd + ", " + nv + "): using host memory"
	if len(r.Notes) > 0 {
		s += " (" + strings.Join(r.Notes, "; ") + ")"
	}
	return s
}

// Summary is one line describing what discovery found, fit for a log or the
// header of a benchmark run.
func (r *Report) Summary() string {
	if n := r.FallbackNotice(); n != "" {
		return n
	}
	parts := make([]string, len(r.Devices))
	for i, d := range r.Devices {
		parts[i] = d.String()
	}
	s := fmt.Sprintf("gpu: %d GPU(s): %s", len(r.Devices), strings.Join(parts, "; "))
	if len(r.Notes) > 0 {
		s += " (" + strings.Join(r.Notes, "; ") + ")"
	}
	return s
}
