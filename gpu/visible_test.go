package gpu

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// clearVisible unsets the variables that limit the GPUs CUDA and HIP
// programs use, for the rest of t, so that a summary checked word for word
// does not depend on the environment the tests run in.
func clearVisible(t *testing.T) {
	t.Helper()
	for _, v := range visibleVars {
		t.Setenv(v, "") // restores the old value after t
		require.NoError(t, os.Unsetenv(v))
	}
}

// TestSummaryNamesVisibleDevices: procfs and the KFD topology list every GPU
// of the machine, but CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and
// ROCR_VISIBLE_DEVICES limit the ones a program uses. The one-line summary
// must not count the machine's GPUs as the process's without saying so.
func TestSummaryNamesVisibleDevices(t *testing.T) {
	t.Run("libcuda sees fewer", func(t *testing.T) {
		clearVisible(t)
		lib := fakeCUDADriver(t)
		t.Setenv(EnvCUDAVisibleDevices, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
		t.Setenv("FAKE_CU_COUNT", "1") // what the driver does with the variable
		rep, err := Discover(Options{Root: loadTree(t, "testdata/nvidia.tree"), CUDADriver: lib})
		require.NoError(t, err)
		require.Len(t, rep.Devices, 2, "procfs lists both GPUs")
		require.Contains(t, rep.Summary(), `CUDA programs see 1 of the 2 NVIDIA GPUs (CUDA_VISIBLE_DEVICES="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")`)
	})
	t.Run("empty variable", func(t *testing.T) {
		clearVisible(t)
		lib := fakeCUDADriver(t)
		t.Setenv(EnvCUDAVisibleDevices, "")
		t.Setenv("FAKE_CU_INIT", "100") // CUDA_ERROR_NO_DEVICE, as "" gives
		rep, err := Discover(Options{Root: loadTree(t, "testdata/nvidia.tree"), CUDADriver: lib})
		require.NoError(t, err)
		require.Contains(t, rep.Summary(), `CUDA programs see 0 of the 2 NVIDIA GPUs (CUDA_VISIBLE_DEVICES="")`)
	})
	t.Run("libcuda sees fewer without the variable", func(t *testing.T) {
		clearVisible(t)
		lib := fakeCUDADriver(t)
		t.Setenv("FAKE_CU_COUNT", "1")
		rep, err := Discover(Options{Root: loadTree(t, "testdata/nvidia.tree"), CUDADriver: lib})
		require.NoError(t, err)
		require.Contains(t, rep.Summary(), "(CUDA programs see 1 of the 2 NVIDIA GPUs)")
	})
	t.Run("no libcuda", func(t *testing.T) {
		clearVisible(t)
		t.Setenv(EnvCUDAVisibleDevices, "1")
		rep, err := Discover(Options{Root: loadTree(t, "testdata/nvidia.tree"), NoCUDADriver: true})
		require.NoError(t, err)
		require.Contains(t, rep.Summary(), `(CUDA_VISIBLE_DEVICES="1" limits CUDA programs to the NVIDIA GPUs it names; all the driver shows are listed)`)
	})
	t.Run("AMD", func(t *testing.T) {
		clearVisible(t)
		t.Setenv(EnvROCRVisibleDevices, "GPU-4b2c1a9f8d3e6f7a")
		t.Setenv(EnvHIPVisibleDevices, "0")
		rep, err := Discover(Options{Root: loadTree(t, "testdata/amd.tree"), NoCUDADriver: true})
		require.NoError(t, err)
		require.Len(t, rep.Devices, 2)
		require.Contains(t, rep.Summary(), `(ROCR_VISIBLE_DEVICES="GPU-4b2c1a9f8d3e6f7a", HIP_VISIBLE_DEVICES="0" limit HIP programs to the AMD GPUs they name; all the driver shows are listed)`)
		require.NotContains(t, rep.Summary(), "NVIDIA")
	})
	t.Run("CUDA_VISIBLE_DEVICES limits HIP too", func(t *testing.T) {
		clearVisible(t)
		t.Setenv(EnvCUDAVisibleDevices, "1")
		rep, err := Discover(Options{Root: loadTree(t, "testdata/amd.tree"), NoCUDADriver: true})
		require.NoError(t, err)
		require.Contains(t, rep.Summary(), `(CUDA_VISIBLE_DEVICES="1" limits HIP programs to the AMD GPUs it names; all the driver shows are listed)`)
	})
	t.Run("unset says nothing", func(t *testing.T) {
		clearVisible(t)
		rep, err := Discover(Options{Root: loadTree(t, "testdata/amd.tree"), NoCUDADriver: true})
		require.NoError(t, err)
		require.Empty(t, rep.Notes)
	})
	t.Run("nothing found", func(t *testing.T) {
		clearVisible(t)
		t.Setenv(EnvHIPVisibleDevices, "0")
		rep, err := Discover(Options{Root: fstest.MapFS{}, NoCUDADriver: true})
		require.NoError(t, err)
		require.Empty(t, rep.Notes, "the variables hide nothing from KFD or procfs")
	})
}
