//go:build !cgo

package rccl

import "unsafe"

// Without cgo the library's entry points cannot be called, nor reached:
// their addresses come from dl.Open, which fails in such a build, so Open
// returns its error before any call. The stand-ins below only let the
// package compile; reaching one is a bug.

func noCgoCall() Result {
	panic("rccl: an RCCL/NCCL entry point was called in a build without cgo, although no library can be loaded in one")
}

func callV(unsafe.Pointer) Result                           { return noCgoCall() }
func callP(_, _ unsafe.Pointer) Result                      { return noCgoCall() }
func callH(unsafe.Pointer, uintptr) Result                  { return noCgoCall() }
func callHP(unsafe.Pointer, uintptr, unsafe.Pointer) Result { return noCgoCall() }

func callInit(unsafe.Pointer, *uintptr, int, *UniqueID, int) Result { return noCgoCall() }

func callRed(_ unsafe.Pointer, _, _ uintptr, _ int, _ DataType, _ int, _, _ uintptr) Result {
	return noCgoCall()
}

func callGather(_ unsafe.Pointer, _, _ uintptr, _ int, _ DataType, _, _ uintptr) Result {
	return noCgoCall()
}

func callP2P(_ unsafe.Pointer, _ uintptr, _ int, _ DataType, _ int, _, _ uintptr) Result {
	return noCgoCall()
}

func callSI(unsafe.Pointer, int) string     { noCgoCall(); return "" }
func callSH(unsafe.Pointer, uintptr) string { noCgoCall(); return "" }
