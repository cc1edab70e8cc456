package gpu

import "unsafe"

// DeviceBuffer is GPU memory from hipMalloc or cudaMalloc.
type DeviceBuffer struct {
	rt   *Runtime
	addr uintptr
	n    int
}

// AllocDevice allocates n bytes on the runtime's current device.
func (r *Runtime) AllocDevice(n int) (*DeviceBuffer, error) {
	p, err := r.Malloc(n)
	if err != nil {
		return nil, err
	}
	return &DeviceBuffer{rt: r, addr: p, n: n}, nil
}

// Kind is KindDevice.
func (b *DeviceBuffer) Kind() Kind { return KindDevice }

// Len is the size in bytes.
func (b *DeviceBuffer) Len() int { return b.n }

// Host is nil: device memory is not addressable from the CPU.
func (b *DeviceBuffer) Host() []byte { return nil }

// Addr is the device address, 0 after Free.
func (b *DeviceBuffer) Addr() uintptr { return b.addr }

// Free releases the memory with hipFree/cudaFree.
func (b *DeviceBuffer) Free() error {
	if b.addr == 0 {
		return errFreed(KindDevice)
	}
	p := b.addr
	b.addr = 0
	return b.rt.Free(p)
}

func (b *DeviceBuffer) runtime() *Runtime { return b.rt }

// PinnedBuffer is page-locked host memory from hipHostMalloc or
// cudaHostAlloc: the CPU reads it as a slice, the GPU reaches it by DMA.
type PinnedBuffer struct {
	rt  *Runtime
	p   unsafe.Pointer
	mem []byte
}

// AllocPinned allocates n bytes of pinned host memory.
func (r *Runtime) AllocPinned(n int) (*PinnedBuffer, error) {
	p, err := r.MallocHost(n)
	if err != nil {
		return nil, err
	}
	return &PinnedBuffer{rt: r, p: p, mem: unsafe.Slice((*byte)(p), n)}, nil
}

// Kind is KindPinned.
func (b *PinnedBuffer) Kind() Kind { return KindPinned }

// Len is the size in bytes.
func (b *PinnedBuffer) Len() int { return len(b.mem) }

// Host is the memory, nil after Free.
func (b *PinnedBuffer) Host() []byte { return b.mem }

// Addr is the start address, 0 after Free.
func (b *PinnedBuffer) Addr() uintptr { return uintptr(b.p) }

// Free releases the memory with hipHostFree/cudaFreeHost.
func (b *PinnedBuffer) Free() error {
	if b.p == nil {
		return errFreed(KindPinned)
	}
	p := b.p
	b.p, b.mem = nil, nil
	return b.rt.FreeHost(p)
}

func (b *PinnedBuffer) runtime() *Runtime { return b.rt }
