// Package rccl binds RCCL (AMD) and NCCL (NVIDIA) through dlopen, for
// mrbench's rccl backend: the benchmark drives the vendor library directly,
// over the library's own transports. The metaroce network plugin cannot run
// underneath: it is a Go c-shared library, and a Go program such as mrbench
// cannot load a second Go runtime, so mrbench sets NCCL_NET_PLUGIN=none
// (measure the plugin from PyTorch or nccl-tests instead).
//
// The two libraries share one C API (RCCL keeps NCCL's names), so one binding
// serves both. The library is found through METAROCE_RCCL_LIB, else in
// LD_LIBRARY_PATH, the active virtualenv's or conda environment's PyTorch
// and NVIDIA wheels, the user's site-packages, the dynamic linker's path,
// /opt/rocm/lib and the system Python's site-packages, in that order (see
// Open). Nothing is linked at build time: a machine without either library
// builds and tests this package, and Open lists where it looked, what to
// install and which variable to set.
//
// Buffers cross into C as addresses (uintptr) of device memory or of host
// memory outside the Go heap (gpu.Buffer.Addr); no Go pointer is ever kept
// by the library.
package rccl
