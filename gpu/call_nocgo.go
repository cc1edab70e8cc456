//go:build !cgo

package gpu

import "unsafe"

// Without cgo the vendor entry points cannot be called. They cannot be
// reached either: their addresses come from dl.Open, which fails in such a
// build, so OpenRuntime and QueryCUDA return before any call. The stand-ins
// below only let the package compile (host memory and discovery through
// sysfs and procfs work without cgo); reaching one is a bug.

func noCgoCall() int {
	panic("gpu: a vendor entry point was called in a build without cgo, although no library can be loaded in one")
}

func callV(unsafe.Pointer) int                              { return noCgoCall() }
func callI(unsafe.Pointer, int) int                         { return noCgoCall() }
func callU(unsafe.Pointer, uint32) int                      { return noCgoCall() }
func callP(_, _ unsafe.Pointer) int                         { return noCgoCall() }
func callH(unsafe.Pointer, uintptr) int                     { return noCgoCall() }
func callPI(_, _ unsafe.Pointer, _ int) int                 { return noCgoCall() }
func callPII(_, _ unsafe.Pointer, _, _ int) int             { return noCgoCall() }
func callPZ(_, _ unsafe.Pointer, _ uintptr) int             { return noCgoCall() }
func callPZU(_, _ unsafe.Pointer, _ uintptr, _ uint32) int  { return noCgoCall() }
func callHHZI(_ unsafe.Pointer, _, _, _ uintptr, _ int) int { return noCgoCall() }
func callSI(unsafe.Pointer, int) string                     { noCgoCall(); return "" }
func callCUStr(unsafe.Pointer, int) string                  { noCgoCall(); return "" }
