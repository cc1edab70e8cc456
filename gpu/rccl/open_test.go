package rccl

import (
	"errors"
	"testing"

	"github.com/metaroce/metaroce/gpu/internal/dl"
)

func TestOpenErrors(t *testing.T) {
	_, err := Open("/nonexistent/librccl.so")
	mustErrContains(t, err, "cannot load the RCCL/NCCL library", "/nonexistent/librccl.so", "No such file", EnvLib)
	var le *dl.LoadError
	if !errors.As(err, &le) {
		t.Errorf("%v is not a *dl.LoadError", err)
	}

	t.Setenv(EnvLib, "/nonexistent/libnccl.so.2")
	_, err = Open("")
	mustErrContains(t, err, "/nonexistent/libnccl.so.2", EnvLib)

	// A library that is not NCCL: the first required symbol is named.
	_, err = Open("libc.so.6")
	mustErrContains(t, err, "RCCL/NCCL library libc.so.6 has no symbol ncclGetVersion", "install a current RCCL", "set "+EnvLib)
	var se *dl.SymbolError
	if !errors.As(err, &se) || se.Symbol != "ncclGetVersion" {
		t.Errorf("%v is not a *dl.SymbolError for ncclGetVersion", err)
	}
}

// TestOpenSearch checks the search without a path or variable: on a machine
// without RCCL or NCCL it fails with what was tried and what to install.
func TestOpenSearch(t *testing.T) {
	t.Setenv(EnvLib, "")
	l, err := Open("")
	if err == nil {
		t.Skipf("an RCCL/NCCL library is installed here (%s)", l.Path())
	}
	mustErrContains(t, err, "librccl.so", "libnccl.so.2", "/opt/rocm/lib/librccl.so", "install RCCL (ROCm package rccl) or NCCL", "or set "+EnvLib)
}

func TestVersionString(t *testing.T) {
	for code, want := range map[int]string{22304: "2.23.4", 21403: "2.14.3", 20903: "2.9.3", 2708: "2.7.8", 2406: "2.4.6"} {
		mustEqual(t, want, VersionString(code), code)
	}
}

func TestEnums(t *testing.T) {
	// The values are the C API's; a change here breaks every call.
	mustEqual(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		[]int{int(Int8), int(Uint8), int(Int32), int(Uint32), int(Int64), int(Uint64), int(Float16), int(Float32), int(Float64), int(Bfloat16)}, "data types")
	mustEqual(t, []int{0, 1, 2, 3, 4}, []int{int(Sum), int(Prod), int(Max), int(Min), int(Avg)}, "reductions")
	mustEqual(t, []int{1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 0},
		[]int{Int8.Size(), Uint8.Size(), Int32.Size(), Uint32.Size(), Int64.Size(), Uint64.Size(), Float16.Size(), Float32.Size(), Float64.Size(), Bfloat16.Size(), DataType(10).Size()}, "sizes")
	mustEqual(t, "bfloat16", Bfloat16.String(), "name")
	mustEqual(t, "RedOp(9)", RedOp(9).String(), "unknown op")
	mustEqual(t, 128, len(UniqueID{}), "ncclUniqueId size")
	if !errors.Is(&Error{Code: RemoteError}, RemoteError) || errors.Is(&Error{Code: RemoteError}, InternalError) {
		t.Error("Error.Is must match its own Result only")
	}
}
