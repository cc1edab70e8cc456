package gpu

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mpolPreferred is MPOL_PREFERRED of <linux/mempolicy.h>: allocate on the
// given node when it has free pages, elsewhere otherwise. Preferred rather
// than bound, so that a full node slows a run down instead of killing it.
const mpolPreferred = 1

// maxNUMANodes bounds the nodemask handed to mbind: 1024 nodes, the kernel's
// largest MAX_NUMNODES on x86-64.
const maxNUMANodes = 1024

// HostBuffer is page-aligned anonymous memory from mmap, outside the Go heap
// so that C code may keep its address. Page alignment is what DMA engines and
// O_DIRECT want, and what pinning with hipHostRegister needs.
type HostBuffer struct {
	mem  []byte
	node int
}

// AllocHost maps n bytes of host memory. When numaNode >= 0 the pages are
// given the MPOL_PREFERRED policy for that node before first touch, so they
// land next to the NIC or GPU on that node; numaNode < 0 leaves the placement
// to the kernel (first touch). An invalid node is an error.
func AllocHost(n, numaNode int) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("gpu: host buffer of %d bytes: size must be positive", n)
	}
	if numaNode >= maxNUMANodes {
		return nil, fmt.Errorf("gpu: host buffer on NUMA node %d: node numbers stop at %d", numaNode, maxNUMANodes-1)
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("gpu: mmap of a %d-byte host buffer: %w", n, err)
	}
	b := &HostBuffer{mem: mem, node: -1}
	if numaNode >= 0 {
		if err := mbindPreferred(mem, numaNode); err != nil {
			_ = unix.Munmap(mem)
			return nil, fmt.Errorf("gpu: placing a %d-byte host buffer on NUMA node %d: mbind: %w (pass -1 to let the kernel place it)", n, numaNode, err)
		}
		b.node = numaNode
	}
	return b, nil
}

// mbindPreferred sets the MPOL_PREFERRED policy for node on mem's pages.
func mbindPreferred(mem []byte, node int) error {
	var mask [maxNUMANodes / 64]uint64
	mask[node/64] = 1 << (node % 64)
	_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)),
		mpolPreferred, uintptr(unsafe.Pointer(&mask[0])), maxNUMANodes+1, 0)
	if e != 0 {
		return e
	}
	return nil
}

// Kind is KindHost.
func (b *HostBuffer) Kind() Kind { return KindHost }

// Len is the size in bytes.
func (b *HostBuffer) Len() int { return len(b.mem) }

// Host is the memory, nil after Free.
func (b *HostBuffer) Host() []byte { return b.mem }

// NUMANode is the node the buffer prefers, or -1 when placement was left to
// the kernel.
func (b *HostBuffer) NUMANode() int { return b.node }

// Addr is the start address, 0 after Free.
func (b *HostBuffer) Addr() uintptr {
	if b.mem == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(&b.mem[0]))
}

// Free unmaps the memory.
func (b *HostBuffer) Free() error {
	if b.mem == nil {
		return errFreed(KindHost)
	}
	err := unix.Munmap(b.mem)
	b.mem = nil
	if err != nil {
		return fmt.Errorf("gpu: munmap of a host buffer: %w", err)
	}
	return nil
}
