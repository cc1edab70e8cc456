// Package rccl binds RCCL (AMD) and NCCL (NVIDIA) through dlopen, for
// mrbench's rccl backend: the benchmark drives the vendor library directly,
// with or without the metaroce network plugin underneath.
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
