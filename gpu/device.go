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
	// Index numbers the GPUs of one vendor from 0 in the order of the
	// source that listed them, which is not always the device number a
	// CUDA or HIP program gives the same GPU:
	//   - AMD: the order of the KFD topology's GPU nodes this process may
	//     read, ROCm's own, before ROCR_VISIBLE_DEVICES and
	//     HIP_VISIBLE_DEVICES choose among them.
	//   - NVIDIA listed by /proc/driver/nvidia (libcuda, when asked, adds
	//     the memory size, not the order): PCI bus address order over
	//     every GPU of the machine. That is CUDA's device number only under
	//     CUDA_DEVICE_ORDER=PCI_BUS_ID with CUDA_VISIBLE_DEVICES unset;
	//     CUDA's default order puts the fastest GPU first.
	//   - NVIDIA listed by libcuda alone (procfs hidden, as in some
	//     containers): CUDA's device number in this process, after
	//     CUDA_VISIBLE_DEVICES and in CUDA_DEVICE_ORDER's order.
	// A GPU is the same one in two lists when its PCI address is.
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
