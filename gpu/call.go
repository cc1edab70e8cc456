//go:build cgo

package gpu

/*
#include <stddef.h>
#include <stdint.h>

// Trampolines that call a function pointer obtained from dlsym with the C
// signature of the vendor entry point. Device addresses, streams and other
// opaque handles travel as uintptr_t; out-parameters that live in Go memory
// travel as void* so that cgo pins them for the duration of the call.
typedef int (*mr_fn_v)(void);
typedef int (*mr_fn_i)(int);
typedef int (*mr_fn_u)(unsigned int);
typedef int (*mr_fn_p)(void *);
typedef int (*mr_fn_h)(uintptr_t);
typedef int (*mr_fn_pi)(void *, int);
typedef int (*mr_fn_pii)(void *, int, int);
typedef int (*mr_fn_pz)(void *, size_t);
typedef int (*mr_fn_pzu)(void *, size_t, unsigned int);
typedef int (*mr_fn_hhzi)(uintptr_t, uintptr_t, size_t, int);
typedef const char *(*mr_fn_s_i)(int);

static int mr_call_v(void *f) { return ((mr_fn_v)f)(); }
static int mr_call_i(void *f, int a) { return ((mr_fn_i)f)(a); }
static int mr_call_u(void *f, unsigned int a) { return ((mr_fn_u)f)(a); }
static int mr_call_p(void *f, void *a) { return ((mr_fn_p)f)(a); }
static int mr_call_h(void *f, uintptr_t a) { return ((mr_fn_h)f)(a); }
static int mr_call_pi(void *f, void *a, int b) { return ((mr_fn_pi)f)(a, b); }
static int mr_call_pii(void *f, void *a, int b, int c) { return ((mr_fn_pii)f)(a, b, c); }
static int mr_call_pz(void *f, void *a, size_t n) { return ((mr_fn_pz)f)(a, n); }
static int mr_call_pzu(void *f, void *a, size_t n, unsigned int u) { return ((mr_fn_pzu)f)(a, n, u); }
static int mr_call_hhzi(void *f, uintptr_t a, uintptr_t b, size_t n, int k) { return ((mr_fn_hhzi)f)(a, b, n, k); }
static const char *mr_call_s_i(void *f, int a) { return ((mr_fn_s_i)f)(a); }

// mr_call_cu_str calls "CUresult cuGetErrorString(CUresult, const char **)".
static const char *mr_call_cu_str(void *f, int code) {
	const char *s = NULL;
	if (((int (*)(int, const char **))f)(code, &s) != 0) return NULL;
	return s;
}
*/
import "C"

import "unsafe"

// The wrappers below keep the C types out of the rest of the package.

func callV(f unsafe.Pointer) int            { return int(C.mr_call_v(f)) }
func callI(f unsafe.Pointer, a int) int     { return int(C.mr_call_i(f, C.int(a))) }
func callU(f unsafe.Pointer, a uint32) int  { return int(C.mr_call_u(f, C.uint(a))) }
func callP(f, a unsafe.Pointer) int         { return int(C.mr_call_p(f, a)) }
func callH(f unsafe.Pointer, a uintptr) int { return int(C.mr_call_h(f, C.uintptr_t(a))) }
func callPI(f, a unsafe.Pointer, b int) int { return int(C.mr_call_pi(f, a, C.int(b))) }
func callPII(f, a unsafe.Pointer, b, c int) int {
	return int(C.mr_call_pii(f, a, C.int(b), C.int(c)))
}
func callPZ(f, a unsafe.Pointer, n uintptr) int { return int(C.mr_call_pz(f, a, C.size_t(n))) }
func callPZU(f, a unsafe.Pointer, n uintptr, u uint32) int {
	return int(C.mr_call_pzu(f, a, C.size_t(n), C.uint(u)))
}
func callHHZI(f unsafe.Pointer, a, b, n uintptr, k int) int {
	return int(C.mr_call_hhzi(f, C.uintptr_t(a), C.uintptr_t(b), C.size_t(n), C.int(k)))
}

// callSI calls a "const char *f(int)" entry point (cudaGetErrorString and
// friends) and copies the static string into Go memory.
func callSI(f unsafe.Pointer, a int) string {
	s := C.mr_call_s_i(f, C.int(a))
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// callCUStr calls the driver API's cuGetErrorString for code.
func callCUStr(f unsafe.Pointer, code int) string {
	s := C.mr_call_cu_str(f, C.int(code))
	if s == nil {
		return ""
	}
	return C.GoString(s)
}
