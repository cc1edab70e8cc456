package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/metaroce/metaroce/gpu/internal/ctest"
	"github.com/metaroce/metaroce/gpu/internal/dl"
	"github.com/stretchr/testify/require"
)

func TestDiscoverAMDFakeTree(t *testing.T) {
	devs, err := DiscoverAMD(loadTree(t, "testdata/amd.tree"))
	require.NoError(t, err)
	want := []Device{
		{Vendor: AMD, Index: 0, Name: "gfx942", Arch: "gfx942", MemBytes: 206141652992, PCI: "0000:c3:00.0", NUMANode: 1},
		{Vendor: AMD, Index: 1, Name: "aldebaran", Arch: "gfx90a", MemBytes: 68702699520, PCI: "0001:c1:01.0", NUMANode: -1},
	}
	require.Equal(t, want, devs, "AMD devices")
}

func TestDiscoverNVIDIAProcFakeTree(t *testing.T) {
	devs, err := DiscoverNVIDIAProc(loadTree(t, "testdata/nvidia.tree"))
	require.NoError(t, err)
	want := []Device{
		{Vendor: NVIDIA, Index: 0, Name: "NVIDIA H100 80GB HBM3", PCI: "0000:18:00.0", NUMANode: 0},
		{Vendor: NVIDIA, Index: 1, Name: "Fake GPU 1", PCI: "0000:28:00.0", NUMANode: -1},
	}
	require.Equal(t, want, devs, "NVIDIA devices")
}

func TestDiscoverEmptyTree(t *testing.T) {
	rep, err := Discover(Options{Root: fstest.MapFS{}, NoCUDADriver: true})
	require.NoError(t, err)
	require.Equal(t, 0, len(rep.Devices), "devices")
	require.Equal(t, rep.FallbackNotice(), rep.Summary(), "summary of an empty machine")
	if s := rep.Summary(); !strings.Contains(s, "using host memory") || strings.Contains(s, "\n") {
		t.Errorf("summary %q: want one line saying host memory is used", s)
	}
}

// TestDiscoverBrokenTree: a tree that exists but does not read is an error
// that names the file and what is wrong with it, and begins with the
// package's "gpu: " once, also where it wraps a parser's own gpu error.
func TestDiscoverBrokenTree(t *testing.T) {
	const (
		kfdNode1 = "sys/class/kfd/kfd/topology/nodes/1"
		nvInfo   = "proc/driver/nvidia/gpus/0000:01:00.0/information"
	)
	cases := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"duplicate key", fstest.MapFS{kfdNode1 + "/properties": {Data: []byte("simd_count 4\nsimd_count 4\n")}},
			"gpu: KFD node " + kfdNode1 + `: KFD properties: key "simd_count" appears twice`},
		{"duplicate key in a memory bank", fstest.MapFS{
			kfdNode1 + "/properties":             {Data: []byte("simd_count 4\n")},
			kfdNode1 + "/mem_banks/0/properties": {Data: []byte("heap_type 1\nheap_type 1\n")},
		}, "gpu: KFD node " + kfdNode1 + ` bank 0: KFD properties: key "heap_type" appears twice`},
		{"node without properties", fstest.MapFS{kfdNode1 + "/gpu_id": {Data: []byte("7\n")}}, "nodes/1"},
		{"bad bus location", fstest.MapFS{"proc/driver/nvidia/gpus/x/information": {Data: []byte("Model: X\nBus Location: nonsense\n")}},
			`gpu: proc/driver/nvidia/gpus/x/information: bad PCI address "nonsense"`},
		{"duplicate NVIDIA key", fstest.MapFS{nvInfo: {Data: []byte("Model: X\nModel: Y\n")}},
			"gpu: " + nvInfo + `: NVIDIA information: key "Model" appears twice`},
		{"NVIDIA line too long", fstest.MapFS{nvInfo: {Data: []byte("Model: " + strings.Repeat("x", bufio.MaxScanTokenSize) + "\n")}},
			"gpu: " + nvInfo + ": NVIDIA information: " + bufio.ErrTooLong.Error()},
		{"missing information", fstest.MapFS{"proc/driver/nvidia/gpus/0000:01:00.0/power": {Data: []byte("x")}}, "information"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Discover(Options{Root: c.fsys, NoCUDADriver: true})
			require.ErrorContains(t, err, c.want)
			require.True(t, strings.HasPrefix(err.Error(), "gpu: "), "%q lacks the package's prefix", err)
			require.Equal(t, 1, strings.Count(err.Error(), "gpu: "), "%q has the prefix more than once", err)
		})
	}
	// The wrapped cause stays reachable under the one prefix.
	_, err := DiscoverNVIDIAProc(fstest.MapFS{nvInfo: {Data: []byte(strings.Repeat("x", bufio.MaxScanTokenSize+1))}})
	require.ErrorIs(t, err, bufio.ErrTooLong)
}

// TestDiscoverThisMachine runs discovery on the real root. On a machine
// without GPU drivers it must find nothing and say so in one line.
func TestDiscoverThisMachine(t *testing.T) {
	for _, p := range []string{"/sys/class/kfd/kfd/topology/nodes", "/proc/driver/nvidia/gpus"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s exists: this machine has a GPU driver, the fallback cannot be observed", p)
		}
	}
	t.Setenv(EnvCUDADriverLib, "") // the search, not a path the environment names
	clearVisible(t)
	rep, err := Discover(Options{})
	require.NoError(t, err)
	if len(rep.Devices) > 0 {
		t.Skipf("libcuda reports GPUs without procfs entries: %s", rep.Summary())
	}
	nv := "no NVIDIA driver"
	if !dl.Available {
		nv = nvNoCgo // libcuda not asked, which the line says
	}
	require.Equal(t, "gpu: no GPU found (no AMD KFD topology, "+nv+"): using host memory", rep.Summary(), "summary")
}

func fakeCUDADriver(t *testing.T) string {
	return ctest.SharedLib(t, "libcuda.so.1", []string{"testdata/fakecuda.c"})
}

func TestQueryCUDAFake(t *testing.T) {
	lib := fakeCUDADriver(t)
	devs, err := QueryCUDA(lib)
	require.NoError(t, err)
	want := []Device{
		{Vendor: NVIDIA, Index: 0, Name: "Fake GPU 0", MemBytes: 16 << 30, PCI: "0000:18:00.0", NUMANode: -1},
		{Vendor: NVIDIA, Index: 1, Name: "Fake GPU 1", MemBytes: 32 << 30, PCI: "0000:28:00.0", NUMANode: -1},
	}
	require.Equal(t, want, devs, "devices from libcuda")

	t.Setenv("FAKE_CU_INIT", "100")
	devs, err = QueryCUDA(lib)
	require.NoError(t, err, "CUDA_ERROR_NO_DEVICE means no GPU, not a failure")
	require.Equal(t, 0, len(devs), "devices")

	t.Setenv("FAKE_CU_INIT", "999")
	_, err = QueryCUDA(lib)
	require.Error(t, err)
	require.ErrorContains(t, err, "cuInit failed with error 999 (CUDA_ERROR_UNKNOWN): fake: unknown error")
	require.ErrorContains(t, err, lib)
}

// TestQueryCUDANamesDriverErrors: a cuInit error is named as cuda.h names
// it, also where the library gives no text for it (the CUDA toolkit's stub
// libcuda, which answers every call with CUDA_ERROR_STUB_LIBRARY, has
// none), and the errors with one cause say what to do: the stub is on the
// library path ahead of the driver's libcuda.
func TestQueryCUDANamesDriverErrors(t *testing.T) {
	lib := fakeCUDADriver(t)
	for _, tc := range []struct {
		rc   string
		want []string
	}{
		{"34", []string{"gpu: " + lib + ": cuInit failed with error 34 (CUDA_ERROR_STUB_LIBRARY); this libcuda is the CUDA toolkit's stub",
			"take the stubs directory out of LD_LIBRARY_PATH, or set " + EnvCUDADriverLib + " to the driver's libcuda.so.1"}},
		{"3", []string{"cuInit failed with error 3 (CUDA_ERROR_NOT_INITIALIZED)"}},
		{"802", []string{"cuInit failed with error 802 (CUDA_ERROR_SYSTEM_NOT_READY); on a machine with NVSwitches, the NVIDIA Fabric Manager"}},
		{"803", []string{"cuInit failed with error 803 (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH); this libcuda and the loaded NVIDIA kernel module are of different driver versions"}},
		{"999", []string{"cuInit failed with error 999 (CUDA_ERROR_UNKNOWN): fake: unknown error; the driver gives no reason"}},
		{"12345", []string{"cuInit failed with error 12345"}},
	} {
		t.Setenv("FAKE_CU_INIT", tc.rc)
		_, err := QueryCUDA(lib)
		var ce *CUDAError
		require.ErrorAs(t, err, &ce, tc.rc)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w, tc.rc)
		}
		if tc.rc == "12345" {
			require.Equal(t, "cuInit failed with error 12345", ce.Error(), "a code without a name is given as its number alone")
		}
	}
}

// TestQueryCUDAErrors: every error of QueryCUDA begins with the package's
// "gpu: " once, names the library, and says what went wrong: a library
// that does not load or lacks an entry point, a negative device count
// (an error, not a panic making a slice of that length) and a bus address
// that does not parse. Discover's note leaves the prefix out, as it is
// read inside a "gpu: " line.
func TestQueryCUDAErrors(t *testing.T) {
	ctest.NeedDlopen(t)
	clearVisible(t)
	onePrefix := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), "gpu: "), "%q lacks the package's prefix", err)
		require.Equal(t, 1, strings.Count(err.Error(), "gpu: "), "%q has the prefix more than once", err)
	}

	_, err := QueryCUDA("/nonexistent/libcuda.so.1")
	onePrefix(t, err)
	require.ErrorContains(t, err, "gpu: cannot load the CUDA driver library: /nonexistent/libcuda.so.1")

	notCUDA := ctest.SharedLib(t, "libcuda.so.1", []string{"testdata/fakecudart.c"})
	_, err = QueryCUDA(notCUDA)
	onePrefix(t, err)
	require.ErrorContains(t, err, "has no symbol cuInit")

	lib := fakeCUDADriver(t)
	t.Setenv("FAKE_CU_COUNT", "-1")
	_, err = QueryCUDA(lib)
	onePrefix(t, err)
	require.ErrorContains(t, err, lib+": cuDeviceGetCount succeeded with a count of -1 devices: this is no working libcuda")
	require.ErrorContains(t, err, EnvCUDADriverLib)
	rep, err := Discover(Options{Root: fstest.MapFS{}, CUDADriver: lib})
	require.NoError(t, err)
	require.Equal(t, []string{"NVIDIA GPUs not queried: " + lib + ": cuDeviceGetCount succeeded with a count of -1 devices: this is no working libcuda; reinstall the NVIDIA driver (libcuda.so.1), or set METAROCE_CUDA_LIB to the driver's libcuda.so.1"}, rep.Notes)

	t.Setenv("FAKE_CU_COUNT", "1")
	t.Setenv("FAKE_CU_PCI", "nonsense")
	_, err = QueryCUDA(lib)
	onePrefix(t, err)
	require.ErrorContains(t, err, lib+`: cuDeviceGetPCIBusId of device 0: bad PCI address "nonsense"`)
	// The parser's error stays reachable under the one prefix, where it
	// was flattened into the text.
	_, parseErr := ParsePCI("nonsense")
	require.Error(t, parseErr)
	require.True(t, inChain(err, parseErr.Error()), "%q does not wrap ParsePCI's error %q", err, parseErr)
}

// inChain reports whether an error in err's chain (errors.Unwrap) has the
// text msg.
func inChain(err error, msg string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == msg {
			return true
		}
	}
	return false
}

func TestDiscoverMergesCUDA(t *testing.T) {
	lib := fakeCUDADriver(t)
	clearVisible(t)
	rep, err := Discover(Options{Root: loadTree(t, "testdata/nvidia.tree"), CUDADriver: lib})
	require.NoError(t, err)
	require.Equal(t, 2, len(rep.Devices), "devices")
	require.Equal(t, uint64(16<<30), rep.Devices[0].MemBytes, "memory of GPU 0")
	require.Equal(t, "NVIDIA H100 80GB HBM3", rep.Devices[0].Name, "procfs names win")
	require.Equal(t, uint64(32<<30), rep.Devices[1].MemBytes, "memory of GPU 1")
	require.Equal(t, "", rep.FallbackNotice(), "notice")
	wantPrefix := `gpu: 2 GPU(s): NVIDIA GPU 0 "NVIDIA H100 80GB HBM3", 16.0 GiB, PCI 0000:18:00.0, NUMA node 0;`
	if !strings.HasPrefix(rep.Summary(), wantPrefix) {
		t.Errorf("summary %q lacks prefix %q", rep.Summary(), wantPrefix)
	}

	// Without procfs (containers), the driver's list is used with sysfs NUMA.
	root := fstest.MapFS{"sys/bus/pci/devices/0000:28:00.0/numa_node": {Data: []byte("3\n")}}
	rep, err = Discover(Options{Root: root, CUDADriver: lib})
	require.NoError(t, err)
	require.Equal(t, 2, len(rep.Devices), "devices")
	require.Equal(t, 3, rep.Devices[1].NUMANode, "NUMA node from sysfs")

	// A driver that cannot be loaded leaves sizes unknown and says why.
	rep, err = Discover(Options{Root: loadTree(t, "testdata/nvidia.tree"), CUDADriver: "/nonexistent/libcuda.so.1"})
	require.NoError(t, err)
	require.Equal(t, 2, len(rep.Devices), "devices")
	require.Equal(t, uint64(0), rep.Devices[0].MemBytes, "unknown memory")
	require.Equal(t, 1, len(rep.Notes), "notes")
	if !strings.Contains(rep.Summary(), "NVIDIA memory sizes unknown") || !strings.Contains(rep.Summary(), EnvCUDADriverLib) {
		t.Errorf("summary %q does not explain the missing sizes", rep.Summary())
	}
}

// TestDiscoverNamedDriverFailureNoted: without NVIDIA GPUs in procfs (some
// containers hide them), a libcuda named by Options.CUDADriver or
// METAROCE_CUDA_LIB that does not load, or one that loads and fails, is
// noted in the one-line summary instead of vanishing behind "no GPU found".
// Only a search that finds no libcuda at all stays silent.
func TestDiscoverNamedDriverFailureNoted(t *testing.T) {
	ctest.NeedDlopen(t)
	clearVisible(t)
	notALib := filepath.Join(t.TempDir(), "libcuda.so.1")
	require.NoError(t, os.WriteFile(notALib, []byte("not a shared object\n"), 0o644))

	oneLine := func(t *testing.T, rep *Report, want ...string) {
		t.Helper()
		require.Empty(t, rep.Devices)
		require.Len(t, rep.Notes, 1)
		require.Equal(t, rep.FallbackNotice(), rep.Summary())
		require.NotContains(t, rep.Summary(), "\n")
		require.Contains(t, rep.Summary(), "using host memory")
		for _, w := range want {
			require.Contains(t, rep.Summary(), w)
		}
	}

	t.Run("path", func(t *testing.T) {
		t.Setenv(EnvCUDADriverLib, "")
		rep, err := Discover(Options{Root: fstest.MapFS{}, CUDADriver: "/nonexistent/libcuda.so.1"})
		require.NoError(t, err)
		oneLine(t, rep, "/nonexistent/libcuda.so.1", EnvCUDADriverLib)
	})
	t.Run("variable", func(t *testing.T) {
		t.Setenv(EnvCUDADriverLib, notALib)
		rep, err := Discover(Options{Root: fstest.MapFS{}})
		require.NoError(t, err)
		oneLine(t, rep, notALib, EnvCUDADriverLib)
	})
	t.Run("driver fails", func(t *testing.T) {
		lib := fakeCUDADriver(t)
		t.Setenv("FAKE_CU_INIT", "999")
		rep, err := Discover(Options{Root: fstest.MapFS{}, CUDADriver: lib})
		require.NoError(t, err)
		oneLine(t, rep, "cuInit failed with error 999")
	})
	t.Run("no device is no problem", func(t *testing.T) {
		lib := fakeCUDADriver(t)
		t.Setenv("FAKE_CU_INIT", "100")
		rep, err := Discover(Options{Root: fstest.MapFS{}, CUDADriver: lib})
		require.NoError(t, err)
		require.Empty(t, rep.Notes)
		require.Equal(t, "gpu: no GPU found (no AMD KFD topology, libcuda reports no NVIDIA GPU): using host memory", rep.Summary())
	})
}

// deniedFS is a fake tree whose files under the prefixes in deny fail to
// read with EPERM, as sysfs answers for KFD nodes of GPUs outside the
// process's device cgroup. It has only Open, so that fs.ReadFile and
// fs.ReadDir go through it.
type deniedFS struct {
	tree fstest.MapFS
	deny []string
}

func (d deniedFS) Open(name string) (fs.File, error) {
	for _, p := range d.deny {
		if strings.HasPrefix(name, p) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EPERM}
		}
	}
	return d.tree.Open(name)
}

// TestDiscoverAMDSkipsCgroupHiddenNodes: in a container given one of two
// GPUs, the kernel refuses to show the other's gpu_id, name and properties.
// Discovery lists the visible GPU, as index 0, instead of failing.
func TestDiscoverAMDSkipsCgroupHiddenNodes(t *testing.T) {
	fsys := deniedFS{tree: loadTree(t, "testdata/amd.tree"), deny: []string{
		"sys/class/kfd/kfd/topology/nodes/1/gpu_id",
		"sys/class/kfd/kfd/topology/nodes/1/name",
		"sys/class/kfd/kfd/topology/nodes/1/properties",
		"sys/class/kfd/kfd/topology/nodes/1/mem_banks/0/properties",
	}}
	devs, err := DiscoverAMD(fsys)
	require.NoError(t, err)
	require.Equal(t, []Device{
		{Vendor: AMD, Index: 0, Name: "aldebaran", Arch: "gfx90a", MemBytes: 68702699520, PCI: "0001:c1:01.0", NUMANode: -1},
	}, devs, "the GPU the container was given")

	rep, err := Discover(Options{Root: fsys, NoCUDADriver: true})
	require.NoError(t, err)
	require.Len(t, rep.Devices, 1)
}

// TestDiscoverAMDPartitions: an MI300X in CPX mode is one KFD node per
// partition, and the kernel ORs the partition number into location_id's
// function bits. Every partition is the one PCI device at function 0, with
// its NUMA node; a real device at a non-zero function keeps its address.
func TestDiscoverAMDPartitions(t *testing.T) {
	node := func(loc int) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(fmt.Sprintf("simd_count 304\ngfx_target_version 90402\nlocation_id %d\ndomain 0\n", loc))}
	}
	const nodes = "sys/class/kfd/kfd/topology/nodes/"
	fsys := fstest.MapFS{
		nodes + "1/properties":                       node(0xc300),
		nodes + "2/properties":                       node(0xc301),
		nodes + "3/properties":                       node(0xc307),
		nodes + "4/properties":                       node(0x1102),
		"sys/bus/pci/devices/0000:c3:00.0/numa_node": {Data: []byte("1\n")},
		"sys/bus/pci/devices/0000:11:00.0/numa_node": {Data: []byte("0\n")},
		"sys/bus/pci/devices/0000:11:00.2/numa_node": {Data: []byte("0\n")},
	}
	devs, err := DiscoverAMD(fsys)
	require.NoError(t, err)
	var got []string
	for _, d := range devs {
		got = append(got, fmt.Sprintf("%s %d", d.PCI, d.NUMANode))
	}
	require.Equal(t, []string{"0000:c3:00.0 1", "0000:c3:00.0 1", "0000:c3:00.0 1", "0000:11:00.2 0"}, got)
}
