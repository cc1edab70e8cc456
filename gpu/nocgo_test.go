//go:build !cgo

package gpu

import (
	"testing"
	"testing/fstest"

	"github.com/metaroce/metaroce/gpu/internal/dl"
	"github.com/stretchr/testify/require"
)

// TestWithoutCgo: a build without cgo uses host memory and finds GPUs in
// sysfs and procfs; what needs a vendor library fails with the reason.
func TestWithoutCgo(t *testing.T) {
	_, err := OpenRuntime(CUDA, "")
	require.ErrorIs(t, err, dl.ErrNoCgo)
	require.ErrorContains(t, err, "gpu: cannot load the CUDA runtime library: not available: built without cgo")

	_, err = QueryCUDA("")
	require.ErrorIs(t, err, dl.ErrNoCgo)

	// No NVIDIA GPU in procfs, which containers may hide, and no libcuda
	// to ask: the line says what was not looked at, not "no NVIDIA
	// driver", whether or not a libcuda was named.
	for _, named := range []string{"", "/nonexistent/libcuda.so.1"} {
		t.Setenv(EnvCUDADriverLib, named)
		rep, err := Discover(Options{Root: fstest.MapFS{}})
		require.NoError(t, err)
		require.Equal(t, "gpu: no GPU found (no AMD KFD topology, no NVIDIA driver in /proc/driver/nvidia, and libcuda not asked: NVIDIA GPU detection through libcuda needs a build with cgo (CGO_ENABLED=1)): using host memory", rep.Summary(), "%s=%q", EnvCUDADriverLib, named)
	}
	t.Setenv(EnvCUDADriverLib, "")

	// GPUs in procfs: listed, with the reason their memory is unknown.
	rep, err := Discover(Options{Root: loadTree(t, "testdata/nvidia.tree")})
	require.NoError(t, err)
	require.Len(t, rep.Devices, 2)
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], "NVIDIA memory sizes unknown: cannot load the CUDA driver library: not available: built without cgo")

	b, err := AllocHost(4096, -1)
	require.NoError(t, err)
	require.NoError(t, b.Free())
}
