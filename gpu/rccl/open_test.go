package rccl

import (
	"errors"
	"testing"

	"github.com/metaroce/metaroce/gpu"
	"github.com/metaroce/metaroce/gpu/internal/ctest"
	"github.com/metaroce/metaroce/gpu/internal/dl"
	"github.com/stretchr/testify/require"
)

func TestOpenErrors(t *testing.T) {
	ctest.NeedDlopen(t)
	_, err := Open("/nonexistent/librccl.so")
	require.Error(t, err)
	require.ErrorContains(t, err, "cannot load the RCCL/NCCL library")
	require.ErrorContains(t, err, "/nonexistent/librccl.so")
	require.ErrorContains(t, err, "No such file")
	require.ErrorContains(t, err, EnvLib)
	var le *dl.LoadError
	if !errors.As(err, &le) {
		t.Errorf("%v is not a *dl.LoadError", err)
	}

	t.Setenv(EnvLib, "/nonexistent/libnccl.so.2")
	_, err = Open("")
	require.Error(t, err)
	require.ErrorContains(t, err, "/nonexistent/libnccl.so.2")
	require.ErrorContains(t, err, EnvLib)

	// A library that is not NCCL: the first required symbol is named.
	_, err = Open("libc.so.6")
	require.Error(t, err)
	require.ErrorContains(t, err, "RCCL/NCCL library libc.so.6 has no symbol ncclGetVersion")
	require.ErrorContains(t, err, "install a current version of RCCL (ROCm package rccl)")
	require.ErrorContains(t, err, "set "+EnvLib)
	var se *dl.SymbolError
	if !errors.As(err, &se) || se.Symbol != "ncclGetVersion" {
		t.Errorf("%v is not a *dl.SymbolError for ncclGetVersion", err)
	}
}

// TestOpenSearch checks the search without a path or variable: on a machine
// without RCCL or NCCL it fails with every place searched, the active
// environment's included, and what to install or set.
func TestOpenSearch(t *testing.T) {
	ctest.NeedDlopen(t)
	venv := t.TempDir()
	t.Setenv(EnvLib, "")
	t.Setenv(gpu.EnvLDLibraryPath, "")
	t.Setenv(gpu.EnvCondaPrefix, "")
	t.Setenv(gpu.EnvPythonUserBase, "")
	t.Setenv(gpu.EnvVirtualEnv, venv)
	l, err := Open("")
	if err == nil {
		t.Skipf("an RCCL/NCCL library is installed here (%s)", l.Path())
	}
	require.Error(t, err)
	require.ErrorContains(t, err, "rccl: cannot load the RCCL/NCCL library: ")
	require.ErrorContains(t, err, "looked for torch/lib/librccl.so* in $VIRTUAL_ENV ("+venv+"/lib/python3*/site-packages)")
	require.ErrorContains(t, err, "for torch/lib/libnccl.so*, torch/lib/libnccl-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f].so*, nvidia/nccl/lib/libnccl.so* in $VIRTUAL_ENV ("+venv+"/lib/python3*/site-packages)")
	require.ErrorContains(t, err, "/usr/local/lib/python3*/dist-packages")
	require.ErrorContains(t, err, "for librccl.so, librccl.so.1 in the dynamic linker's path, /opt/rocm/lib")
	require.ErrorContains(t, err, "for libnccl.so.2, libnccl.so in the dynamic linker's path")
	require.ErrorContains(t, err, "install RCCL (ROCm package rccl) or NCCL")
	require.ErrorContains(t, err, "or set "+EnvLib+" to the library's full path")
}

func TestVersionString(t *testing.T) {
	for code, want := range map[int]string{22304: "2.23.4", 21403: "2.14.3", 20903: "2.9.3", 2708: "2.7.8", 2406: "2.4.6"} {
		require.Equal(t, want, VersionString(code), code)
	}
}

func TestEnums(t *testing.T) {
	// The values are the C API's; a change here breaks every call.
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		[]int{int(Int8), int(Uint8), int(Int32), int(Uint32), int(Int64), int(Uint64), int(Float16), int(Float32), int(Float64), int(Bfloat16)}, "data types")
	require.Equal(t, []int{0, 1, 2, 3, 4}, []int{int(Sum), int(Prod), int(Max), int(Min), int(Avg)}, "reductions")
	require.Equal(t, []int{1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 0},
		[]int{Int8.Size(), Uint8.Size(), Int32.Size(), Uint32.Size(), Int64.Size(), Uint64.Size(), Float16.Size(), Float32.Size(), Float64.Size(), Bfloat16.Size(), DataType(10).Size()}, "sizes")
	require.Equal(t, "bfloat16", Bfloat16.String(), "name")
	require.Equal(t, "RedOp(9)", RedOp(9).String(), "unknown op")
	require.Equal(t, 128, len(UniqueID{}), "ncclUniqueId size")
	if !errors.Is(&Error{Code: RemoteError}, RemoteError) || errors.Is(&Error{Code: RemoteError}, InternalError) {
		t.Error("Error.Is must match its own Result only")
	}
}
