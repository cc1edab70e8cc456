//go:build !amd64 || purego

package reduce

import "unsafe"

// haveAVX2Asm is false where the assembly kernels are not built.
const haveAVX2Asm = false

// avx2Reduce has no kernels to offer on this build.
func avx2Reduce(DType, Op, unsafe.Pointer, unsafe.Pointer, int) bool { return false }

// avx2Scale has no kernels to offer on this build.
func avx2Scale(DType, unsafe.Pointer, unsafe.Pointer, int, float64) bool { return false }
