package gpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// kfdNodes is the KFD topology directory, relative to the root of the fs.FS.
const kfdNodes = "sys/class/kfd/kfd/topology/nodes"

// KFD memory heap types of mem_banks/*/properties: 1 and 2 are the GPU's own
// frame buffer (public and private parts), 0 is system memory.
const (
	kfdHeapFBPublic  = 1
	kfdHeapFBPrivate = 2
)

// ParseKFDProperties parses a KFD topology properties file: one "key value"
// pair per line, values unsigned decimal integers. Lines of any other shape
// are skipped, so that fields added by newer kernels do not break discovery;
// a key that appears twice is an error because it means the file is not
// what it claims to be.
func ParseKFDProperties(b []byte) (map[string]uint64, error) {
	m := make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if _, dup := m[f[0]]; dup {
			return nil, fmt.Errorf("gpu: KFD properties: key %q appears twice", f[0])
		}
		m[f[0]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gpu: KFD properties: %w", err)
	}
	return m, nil
}

// gfxArch turns KFD's gfx_target_version (major*10000 + minor*100 + stepping)
// into the ISA name the ROCm tools print: 90402 is "gfx942", 90010 "gfx90a".
func gfxArch(v uint64) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("gfx%d%x%x", v/10000, (v/100)%100, v%100)
}

// DiscoverAMD lists the AMD GPUs of the KFD topology found below fsys, an
// fs.FS rooted at "/". CPU nodes (no SIMDs) are skipped, and so are GPU
// nodes the kernel will not show this process (a container's device cgroup
// hides them). A machine without the amdgpu driver has no topology: the
// result is empty and the error nil. Every error begins "gpu: " once and
// names the file.
func DiscoverAMD(fsys fs.FS) ([]Device, error) {
	devs, _, err := discoverAMD(fsys)
	return devs, err
}

// kfdTopology says what DiscoverAMD found besides the GPUs it lists, for the
// message of a machine where it lists none.
type kfdTopology struct {
	// present is whether the topology exists: the amdgpu driver is loaded.
	present bool
	// hidden is the number of GPU nodes the kernel would not show.
	hidden int
}

// why says, for a topology in which no usable GPU was found, what was found
// instead, in the words of Report.FallbackNotice.
func (k kfdTopology) why() string {
	switch {
	case !k.present:
		return "no AMD KFD topology"
	case k.hidden > 0:
		return fmt.Sprintf("%d AMD GPU(s) in the KFD topology are hidden from this process (a container's device cgroup)", k.hidden)
	}
	return "no GPU in the AMD KFD topology"
}

// discoverAMD is DiscoverAMD, also saying what it found of the topology.
func discoverAMD(fsys fs.FS) ([]Device, kfdTopology, error) {
	var topo kfdTopology
	ents, err := fs.ReadDir(fsys, kfdNodes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, topo, nil
	}
	if err != nil {
		return nil, topo, fmt.Errorf("gpu: reading the KFD topology: %w", err)
	}
	topo.present = true
	ids := make([]int, 0, len(ents))
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			ids = append(ids, n)
		}
	}
	sort.Ints(ids)
	var devs []Device
	for _, id := range ids {
		dir := path.Join(kfdNodes, strconv.Itoa(id))
		d, isGPU, err := kfdNode(fsys, dir)
		if errors.Is(err, fs.ErrPermission) {
			// The kernel refuses (EPERM) to show a GPU node to a
			// process whose device cgroup does not grant its render
			// node: a container given some of the GPUs. ROCm skips
			// such nodes too, so the list is the GPUs this process
			// can use, in the order HIP numbers them.
			topo.hidden++
			continue
		}
		if err != nil {
			return nil, topo, err
		}
		if !isGPU {
			continue
		}
		d.Index = len(devs)
		devs = append(devs, d)
	}
	return devs, topo, nil
}

// kfdNode reads one topology node; isGPU is false for CPU nodes.
func kfdNode(fsys fs.FS, dir string) (d Device, isGPU bool, err error) {
	raw, err := fs.ReadFile(fsys, dir+"/properties")
	if err != nil {
		return d, false, fmt.Errorf("gpu: KFD node %s: %w", dir, err)
	}
	p, err := ParseKFDProperties(raw)
	if err != nil {
		return d, false, fmt.Errorf("gpu: KFD node %s: %w", dir, withoutPrefix(err))
	}
	gpuID := p["gpu_id"]
	if b, err := fs.ReadFile(fsys, dir+"/gpu_id"); err == nil {
		gpuID, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	if p["simd_count"] == 0 && gpuID == 0 {
		return d, false, nil
	}
	d.Vendor = AMD
	d.Arch = gfxArch(p["gfx_target_version"])
	if b, err := fs.ReadFile(fsys, dir+"/name"); err == nil {
		d.Name = strings.TrimSpace(string(b))
	}
	if d.Name == "" {
		d.Name = d.Arch
	}
	d.MemBytes, err = kfdMemory(fsys, dir)
	if err != nil {
		return d, false, err
	}
	if d.MemBytes == 0 {
		d.MemBytes = p["local_mem_size"]
	}
	if loc, ok := p["location_id"]; ok {
		d.PCI = kfdPCI(fsys, p["domain"], loc)
	}
	d.NUMANode = NUMANodeOf(fsys, d.PCI)
	return d, true, nil
}

// kfdPCI is the PCI address of a KFD GPU node. On a GPU split into
// partitions (MI300 in CPX or DPX mode) the kernel ORs the partition's
// number into location_id's low bits, which are the function's, so that
// partition 3 of 0000:c3:00.0 says 0000:c3:00.3, a device that does not
// exist (and whose NUMA node cannot be read). When sysfs has no device at
// the address but has one at function 0, that device is the GPU.
func kfdPCI(fsys fs.FS, domain, loc uint64) string {
	pci := pciFromLocation(domain, loc)
	if loc&7 == 0 || pciExists(fsys, pci) {
		return pci
	}
	if f0 := pciFromLocation(domain, loc&^7); pciExists(fsys, f0) {
		return f0
	}
	return pci
}

// kfdMemory sums the frame-buffer banks of a node, in bytes.
func kfdMemory(fsys fs.FS, dir string) (uint64, error) {
	banks, err := fs.ReadDir(fsys, dir+"/mem_banks")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("gpu: KFD node %s: %w", dir, err)
	}
	var total uint64
	for _, b := range banks {
		raw, err := fs.ReadFile(fsys, dir+"/mem_banks/"+b.Name()+"/properties")
		if err != nil {
			continue
		}
		p, err := ParseKFDProperties(raw)
		if err != nil {
			return 0, fmt.Errorf("gpu: KFD node %s bank %s: %w", dir, b.Name(), withoutPrefix(err))
		}
		if h := p["heap_type"]; h == kfdHeapFBPublic || h == kfdHeapFBPrivate {
			total += p["size_in_bytes"]
		}
	}
	return total, nil
}
