package gpu

import "fmt"

// Kind says where a buffer's bytes live.
type Kind int

// Buffer kinds.
const (
	// KindHost is ordinary pageable host memory, page-aligned; the default.
	KindHost Kind = iota + 1
	// KindPinned is page-locked host memory from hipHostMalloc/cudaHostAlloc.
	KindPinned
	// KindDevice is GPU memory from hipMalloc/cudaMalloc.
	KindDevice
)

func (k Kind) String() string {
	switch k {
	case KindHost:
		return "host"
	case KindPinned:
		return "pinned"
	case KindDevice:
		return "device"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Buffer is a contiguous memory region that collectives read and write.
// Its memory is never Go-heap memory, so its address may be handed to C
// libraries (RCCL, NCCL) and kept there.
type Buffer interface {
	// Kind says where the memory lives.
	Kind() Kind
	// Len is the size in bytes.
	Len() int
	// Host is the memory as a byte slice, or nil for device memory and
	// after Free.
	Host() []byte
	// Addr is the start address for C APIs (a device address for
	// KindDevice), or 0 after Free.
	Addr() uintptr
	// Free releases the memory; a second Free is an error.
	Free() error
}

// runtimeBuffer is implemented by buffers that belong to a GPU runtime; Copy
// uses it to find the runtime that moves their bytes.
type runtimeBuffer interface {
	runtime() *Runtime
}

// errFreed is returned by a second Free.
func errFreed(k Kind) error { return fmt.Errorf("gpu: %s buffer freed twice", k) }
