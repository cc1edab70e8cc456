package gpu

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestFallbackNoticeSaysWhatWasFound: "no GPU found" names, for each
// vendor, what discovery did find, so that a user whose driver is loaded
// (but shows no GPU, or hides them from a container) is not told there is
// no driver.
func TestFallbackNoticeSaysWhatWasFound(t *testing.T) {
	const nodes = "sys/class/kfd/kfd/topology/nodes/"
	amd := loadTree(t, "testdata/amd.tree")
	cpuOnly := fstest.MapFS{nodes + "0/properties": amd[nodes+"0/properties"]}
	emptyProc := fstest.MapFS{"proc/driver/nvidia/gpus": {Mode: fs.ModeDir | 0o555}}
	allHidden := deniedFS{tree: amd, deny: []string{nodes + "1/", nodes + "10/"}}

	cases := []struct {
		name string
		fsys fs.FS
		want string
	}{
		{"nothing", fstest.MapFS{}, "no AMD KFD topology, no NVIDIA driver"},
		{"KFD without GPU nodes", cpuOnly, "no GPU in the AMD KFD topology, no NVIDIA driver"},
		{"KFD GPU nodes hidden", allHidden, "2 AMD GPU(s) in the KFD topology are hidden from this process (a container's device cgroup), no NVIDIA driver"},
		{"NVIDIA driver without GPUs", emptyProc, "no AMD KFD topology, the NVIDIA driver lists no GPU"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearVisible(t)
			rep, err := Discover(Options{Root: c.fsys, NoCUDADriver: true})
			require.NoError(t, err)
			require.Empty(t, rep.Devices)
			require.Equal(t, "gpu: no GPU found ("+c.want+"): using host memory", rep.FallbackNotice())
		})
	}

	// A container that hides /proc/driver/nvidia but has libcuda: the
	// driver answers, with no device.
	t.Run("libcuda without devices", func(t *testing.T) {
		clearVisible(t)
		lib := fakeCUDADriver(t)
		t.Setenv("FAKE_CU_INIT", "100")
		rep, err := Discover(Options{Root: fstest.MapFS{}, CUDADriver: lib})
		require.NoError(t, err)
		require.Equal(t, "gpu: no GPU found (no AMD KFD topology, libcuda reports no NVIDIA GPU): using host memory", rep.FallbackNotice())

		t.Setenv(EnvCUDAVisibleDevices, "")
		rep, err = Discover(Options{Root: fstest.MapFS{}, CUDADriver: lib})
		require.NoError(t, err)
		require.Equal(t, `gpu: no GPU found (no AMD KFD topology, libcuda reports no NVIDIA GPU with CUDA_VISIBLE_DEVICES=""): using host memory`, rep.FallbackNotice())

		t.Setenv("FAKE_CU_INIT", "0")
		t.Setenv("FAKE_CU_COUNT", "0")
		rep, err = Discover(Options{Root: fstest.MapFS{}, CUDADriver: lib})
		require.NoError(t, err)
		require.Contains(t, rep.FallbackNotice(), "libcuda reports no NVIDIA GPU", "a count of 0 is no device too")
	})

	t.Run("zero Report", func(t *testing.T) {
		require.Equal(t, "gpu: no GPU found (no AMD KFD topology, no NVIDIA driver): using host memory", (&Report{}).FallbackNotice())
	})
}
