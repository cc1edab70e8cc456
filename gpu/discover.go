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
	// that failed to load; one line each.
	Notes []string
}

// Discover lists the GPUs of the machine (or of the fake tree in opt.Root).
// Errors are reserved for trees that exist but cannot be read; a machine
// without GPUs gets an empty Report.
func Discover(opt Options) (*Report, error) {
	root := opt.Root
	if root == nil {
		root = os.DirFS("/")
	}
	amd, err := DiscoverAMD(root)
	if err != nil {
		return nil, err
	}
	nv, err := DiscoverNVIDIAProc(root)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	if !opt.NoCUDADriver {
		cu, err := QueryCUDA(opt.CUDADriver)
		var le *dl.LoadError
		switch {
		case err == nil:
			nv = mergeCUDA(root, nv, cu)
		case len(nv) > 0:
			rep.Notes = append(rep.Notes, "NVIDIA memory sizes unknown: "+err.Error())
		case !errors.As(err, &le) || le.Explicit:
			// No NVIDIA GPU in procfs, which some containers hide: a
			// libcuda that was named (Options.CUDADriver or
			// METAROCE_CUDA_LIB) and did not load, or one that loaded and
			// failed, may be what hides the GPUs. Only a search that
			// found no libcuda at all is the plain no-NVIDIA case.
			rep.Notes = append(rep.Notes, "NVIDIA GPUs not queried: "+err.Error())
		}
	}
	rep.Devices = append(amd, nv...)
	return rep, nil
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
// memory is used instead, or "" when GPUs were found. Notes, such as a
// libcuda named by METAROCE_CUDA_LIB that did not load, follow in
// parentheses.
func (r *Report) FallbackNotice() string {
	if len(r.Devices) > 0 {
		return ""
	}
	s := "gpu: no GPU found (no AMD KFD topology, no NVIDIA driver): using host memory"
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
