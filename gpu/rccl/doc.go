// Package rccl binds RCCL (AMD) and NCCL (NVIDIA) through dlopen, for
// mrbench's rccl backend: the benchmark drives the vendor library directly,
// with or without the metaroce network plugin underneath.
//
// The two libraries share one C API (RCCL keeps NCCL's names), so one binding
// serves both. The library is found through METAROCE_RCCL_LIB, the dynamic
// linker's path, /opt/rocm/lib and the copies bundled with PyTorch. Nothing
// is linked at build time: a machine without either library builds and tests
// this package, and Open explains what to install.
//
// Buffers cross into C as addresses (uintptr) of device memory or of host
// memory outside the Go heap (gpu.Buffer.Addr); no Go pointer is ever kept
// by the library.
package rccl
