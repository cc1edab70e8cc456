package rccl

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/metaroce/metaroce/gpu"
	"github.com/metaroce/metaroce/gpu/internal/dl"
)

// EnvLib names the RCCL or NCCL library to load, overriding the search.
const EnvLib = "METAROCE_RCCL_LIB"

// rcclSearch and ncclSearch list where RCCL and NCCL live. Every place is
// searched for RCCL before any is searched for NCCL (librarySearch): the
// project's first target is AMD, and a CUDA PyTorch that pip put in the
// user's site-packages or a virtualenv (it brings the nvidia-nccl-cu*
// wheel) must not take a ROCm machine's system RCCL's place. PyTorch's
// ROCm wheels bundle librccl in torch/lib, its CUDA wheels load libnccl
// from the nvidia-nccl-cu* wheel; a libnccl in torch/lib (builds that
// bundle it, possibly renamed libnccl-<8 hex digits>.so.N by the wheel tools) is
// taken too, as gpu/check/mrbench_rccl.sh does, but not a net plugin
// copied there (libnccl-net*.so).
var (
	rcclSearch = gpu.LibSearch{
		Names:  []string{"librccl.so", "librccl.so.1"},
		Python: []string{"torch/lib/librccl.so*"},
		System: []dl.Place{
			gpu.Linker("librccl.so", "librccl.so.1"),
			{Dirs: []string{"/opt/rocm/lib"}, Files: []string{"librccl.so", "librccl.so.1"}},
		},
	}
	ncclSearch = gpu.LibSearch{
		Names:  []string{"libnccl.so.2", "libnccl.so"},
		Python: []string{"torch/lib/libnccl.so*", "torch/lib/libnccl-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f].so*", "nvidia/nccl/lib/libnccl.so*"},
		System: []dl.Place{gpu.Linker("libnccl.so.2", "libnccl.so")},
	}
)

// librarySearch is every place for RCCL, then every place for NCCL.
func librarySearch() []dl.Place {
	return append(rcclSearch.Places(), ncclSearch.Places()...)
}

var librarySpec = dl.Spec{
	What:    "RCCL/NCCL",
	Env:     EnvLib,
	Search:  librarySearch,
	Install: "RCCL (ROCm package rccl) or NCCL (package libnccl2, or pip nvidia-nccl-cu12)",
}

// required are the entry points every supported version exports; Open fails
// with a clear error naming the first one missing.
var required = []string{
	"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclCommAbort",
	"ncclCommCount", "ncclCommUserRank", "ncclGetErrorString", "ncclAllReduce", "ncclBroadcast",
	"ncclReduceScatter", "ncclAllGather", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
}

// Lib is a loaded RCCL or NCCL library. It is safe for concurrent use.
type Lib struct {
	dl *dl.Lib

	getVersion, getUniqueID, commInitRank, commDestroy, commAbort, commCount, commUserRank,
	errString, allReduce, broadcast, reduceScatter, allGather, send, recv, groupStart, groupEnd unsafe.Pointer

	// Optional entry points, nil when absent: ncclAllToAll is RCCL's,
	// ncclCommFinalize appeared in NCCL 2.14, ncclGetLastError in 2.13;
	// ncclCommCuDevice is in every NCCL and RCCL, but nothing needs it.
	allToAll, commFinalize, lastError, commDevice unsafe.Pointer

	rtOnce sync.Once
	rt     *gpu.Runtime
	rtErr  error
}

// Open loads the library at path or, when path is empty, the one named by
// METAROCE_RCCL_LIB, else the first librccl or libnccl found in the order of
// gpu.LibSearch.Places: LD_LIBRARY_PATH; the active virtualenv's or conda
// environment's PyTorch (torch/lib, nvidia/nccl/lib) and $CONDA_PREFIX/lib;
// the user's site-packages; the linker's path and /opt/rocm/lib; the system
// Python's PyTorch.
func Open(path string) (*Lib, error) {
	d, err := dl.Open(librarySpec, path)
	if err != nil {
		return nil, fmt.Errorf("rccl: %w", err)
	}
	l := &Lib{dl: d}
	into := []*unsafe.Pointer{&l.getVersion, &l.getUniqueID, &l.commInitRank, &l.commDestroy, &l.commAbort,
		&l.commCount, &l.commUserRank, &l.errString, &l.allReduce, &l.broadcast, &l.reduceScatter, &l.allGather,
		&l.send, &l.recv, &l.groupStart, &l.groupEnd}
	if err := d.Syms(required, into); err != nil {
		return nil, fmt.Errorf("rccl: %w", err)
	}
	l.allToAll, _ = d.Sym("ncclAllToAll")
	l.commFinalize, _ = d.Sym("ncclCommFinalize")
	l.lastError, _ = d.Sym("ncclGetLastError")
	l.commDevice, _ = d.Sym("ncclCommCuDevice")
	return l, nil
}

// Path is the library's path or soname as opened.
func (l *Lib) Path() string { return l.dl.Path() }

// IsRCCL reports whether the library is AMD's RCCL, judged by its file name
// ("librccl..."); NCCL and RCCL export the same names.
func (l *Lib) IsRCCL() bool { return strings.Contains(filepath.Base(l.Path()), "rccl") }

// HasAllToAll reports whether the library has a native ncclAllToAll; without
// it, AllToAll is a group of sends and receives.
func (l *Lib) HasAllToAll() bool { return l.allToAll != nil }

// Runtime opens, once, the GPU runtime whose streams the library uses: HIP
// for RCCL, CUDA for NCCL (paths from METAROCE_HIP_LIB/METAROCE_CUDART_LIB
// or the usual search). Streams are synchronised through it.
func (l *Lib) Runtime() (*gpu.Runtime, error) {
	l.rtOnce.Do(func() {
		api := gpu.CUDA
		if l.IsRCCL() {
			api = gpu.HIP
		}
		l.rt, l.rtErr = gpu.OpenRuntime(api, "")
	})
	return l.rt, l.rtErr
}

// fail builds the error for a non-success result of fn on comm (0 when the
// call has no communicator).
func (l *Lib) fail(fn string, rc Result, comm uintptr) error {
	if rc == Success {
		return nil
	}
	e := &Error{Func: fn, Code: rc, Text: callSI(l.errString, int(rc))}
	if l.lastError != nil {
		e.Detail = callSH(l.lastError, comm)
	}
	return e
}

// Version is the library's NCCL_VERSION_CODE, e.g. 22304 for 2.23.4.
func (l *Lib) Version() (int, error) {
	var v int32
	if err := l.fail("ncclGetVersion", callP(l.getVersion, unsafe.Pointer(&v)), 0); err != nil {
		return 0, err
	}
	return int(v), nil
}

// VersionString renders a version code as "major.minor.patch". Codes from
// 2.9 on are major*10000 + minor*100 + patch; older ones major*1000 +
// minor*100 + patch.
func VersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code/100%10, code%100)
}

// UniqueID makes the identifier of a new communicator. One rank calls it and
// sends the bytes to the others; it opens a listening socket in the library.
func (l *Lib) UniqueID() (UniqueID, error) {
	var id UniqueID
	err := l.fail("ncclGetUniqueId", callP(l.getUniqueID, unsafe.Pointer(&id[0])), 0)
	return id, err
}

// GroupStart opens a group: the calls up to GroupEnd are issued together,
// which is how one thread posts sends and receives to several peers without
// deadlock. The group belongs to the calling OS thread: lock the goroutine
// to its thread (runtime.LockOSThread) from GroupStart to GroupEnd, or the
// calls between may land outside the group.
func (l *Lib) GroupStart() error { return l.fail("ncclGroupStart", callV(l.groupStart), 0) }

// GroupEnd closes a group opened by GroupStart on the same OS thread and
// issues its calls.
func (l *Lib) GroupEnd() error { return l.fail("ncclGroupEnd", callV(l.groupEnd), 0) }

// ErrorString is the library's text for a result code.
func (l *Lib) ErrorString(r Result) string { return callSI(l.errString, int(r)) }
