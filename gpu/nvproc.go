package gpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// nvProcGPUs is the NVIDIA driver's per-GPU procfs directory, relative to the
// root of the fs.FS; each entry is named by the GPU's PCI address.
const nvProcGPUs = "proc/driver/nvidia/gpus"

// ParseNVInformation parses /proc/driver/nvidia/gpus/<bus>/information, whose
// lines are "Key:<spaces or tabs>value". Keys keep their inner spaces ("Bus
// Location"); lines without ':' are skipped. A repeated key is an error.
func ParseNVInformation(b []byte) (map[string]string, error) {
	m := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("gpu: NVIDIA information: key %q appears twice", k)
		}
		m[k] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gpu: NVIDIA information: %w", err)
	}
	return m, nil
}

// DiscoverNVIDIAProc lists the NVIDIA GPUs that the kernel driver publishes
// below fsys (an fs.FS rooted at "/"), ordered by PCI address, which is the
// CUDA ordinal order under CUDA_DEVICE_ORDER=PCI_BUS_ID. MemBytes is 0: the
// file carries no size (QueryCUDA supplies it). Without the driver the result
// is empty and the error nil. Every error begins "gpu: " once and names the
// file.
func DiscoverNVIDIAProc(fsys fs.FS) ([]Device, error) {
	ents, err := fs.ReadDir(fsys, nvProcGPUs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gpu: reading %s: %w", nvProcGPUs, err)
	}
	var devs []Device
	for _, e := range ents {
		file := nvProcGPUs + "/" + e.Name() + "/information"
		raw, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("gpu: %w", err)
		}
		info, err := ParseNVInformation(raw)
		if err != nil {
			return nil, fmt.Errorf("gpu: %s: %w", file, withoutPrefix(err))
		}
		loc := info["Bus Location"]
		if loc == "" {
			loc = e.Name()
		}
		pci, err := ParsePCI(loc)
		if err != nil {
			return nil, fmt.Errorf("gpu: %s: %w", file, withoutPrefix(err))
		}
		devs = append(devs, Device{Vendor: NVIDIA, Name: info["Model"], PCI: pci, NUMANode: NUMANodeOf(fsys, pci)})
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].PCI < devs[j].PCI })
	for i := range devs {
		devs[i].Index = i
	}
	return devs, nil
}
