package gpu

import "fmt"

// Vendor is the maker of a GPU.
type Vendor int

// Vendors known to discovery.
const (
	AMD Vendor = iota + 1
	NVIDIA
)

func (v Vendor) String() string {
	switch v {
	case AMD:
		return "AMD"
	case NVIDIA:
		return "NVIDIA"
	}
	return fmt.Sprintf("Vendor(%d)", int(v))
}

// Device is one GPU as discovery sees it.
type Device struct {
	Vendor Vendor
	// Index is the device's position among the GPUs of its vendor, in the
	// order the driver lists them (KFD node order, CUDA ordinal order).
	Index int
	// Name is the marketing or ASIC name ("NVIDIA H100 80GB HBM3", "gfx942").
	Name string
	// Arch is the ISA name where known ("gfx942"), empty otherwise.
	Arch string
	// MemBytes is the device memory in bytes; 0 when the source does not say
	// (the NVIDIA procfs file carries no size: libcuda fills it in).
	MemBytes uint64
	// PCI is the canonical bus address, "dddd:bb:dd.f" in lower case, or ""
	// when unknown.
	PCI string
	// NUMANode is the NUMA node the device is attached to, or -1 when the
	// platform does not say (single-node machines, virtual machines).
	NUMANode int
}

func (d Device) String() string {
	mem := "unknown memory"
	if d.MemBytes > 0 {
		mem = fmt.Sprintf("%.1f GiB", float64(d.MemBytes)/(1<<30))
	}
	return fmt.Sprintf("%s GPU %d %q, %s, PCI %s, NUMA node %d", d.Vendor, d.Index, d.Name, mem, d.PCI, d.NUMANode)
}
