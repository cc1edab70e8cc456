//go:build cgo

package rccl

/*
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// Trampolines with the C signatures of the NCCL API. Communicators, streams
// and buffer addresses travel as uintptr_t; Go-owned out-parameters as void*.
typedef struct { char internal[128]; } mr_unique_id;

typedef int (*mr_fn_v)(void);
typedef int (*mr_fn_p)(void *);
typedef int (*mr_fn_h)(uintptr_t);
typedef int (*mr_fn_hp)(uintptr_t, void *);
typedef int (*mr_fn_init)(void *, int, mr_unique_id, int);
typedef int (*mr_fn_red)(uintptr_t, uintptr_t, size_t, int, int, uintptr_t, uintptr_t);
typedef int (*mr_fn_gather)(uintptr_t, uintptr_t, size_t, int, uintptr_t, uintptr_t);
typedef int (*mr_fn_p2p)(uintptr_t, size_t, int, int, uintptr_t, uintptr_t);
typedef const char *(*mr_fn_s_i)(int);
typedef const char *(*mr_fn_s_h)(uintptr_t);

static int mr_call_v(void *f) { return ((mr_fn_v)f)(); }
static int mr_call_p(void *f, void *a) { return ((mr_fn_p)f)(a); }
static int mr_call_h(void *f, uintptr_t a) { return ((mr_fn_h)f)(a); }
static int mr_call_hp(void *f, uintptr_t a, void *b) { return ((mr_fn_hp)f)(a, b); }

// mr_call_init passes the 128-byte unique id by value, as ncclCommInitRank
// takes it.
static int mr_call_init(void *f, void *comm, int nranks, const void *id, int rank) {
	mr_unique_id u;
	memcpy(&u, id, sizeof u);
	return ((mr_fn_init)f)(comm, nranks, u, rank);
}

// mr_call_red serves ncclAllReduce, ncclReduceScatter (op) and ncclBroadcast
// (root): both take an int-sized value in the fifth place.
static int mr_call_red(void *f, uintptr_t s, uintptr_t r, size_t n, int dt, int x, uintptr_t c, uintptr_t st) {
	return ((mr_fn_red)f)(s, r, n, dt, x, c, st);
}
static int mr_call_gather(void *f, uintptr_t s, uintptr_t r, size_t n, int dt, uintptr_t c, uintptr_t st) {
	return ((mr_fn_gather)f)(s, r, n, dt, c, st);
}
static int mr_call_p2p(void *f, uintptr_t b, size_t n, int dt, int peer, uintptr_t c, uintptr_t st) {
	return ((mr_fn_p2p)f)(b, n, dt, peer, c, st);
}
static const char *mr_call_s_i(void *f, int a) { return ((mr_fn_s_i)f)(a); }
static const char *mr_call_s_h(void *f, uintptr_t a) { return ((mr_fn_s_h)f)(a); }
*/
import "C"

import "unsafe"

func callV(f unsafe.Pointer) Result            { return Result(C.mr_call_v(f)) }
func callP(f, a unsafe.Pointer) Result         { return Result(C.mr_call_p(f, a)) }
func callH(f unsafe.Pointer, a uintptr) Result { return Result(C.mr_call_h(f, C.uintptr_t(a))) }
func callHP(f unsafe.Pointer, a uintptr, b unsafe.Pointer) Result {
	return Result(C.mr_call_hp(f, C.uintptr_t(a), b))
}

func callInit(f unsafe.Pointer, comm *uintptr, nranks int, id *UniqueID, rank int) Result {
	return Result(C.mr_call_init(f, unsafe.Pointer(comm), C.int(nranks), unsafe.Pointer(id), C.int(rank)))
}

func callRed(f unsafe.Pointer, send, recv uintptr, count int, dt DataType, x int, comm, stream uintptr) Result {
	return Result(C.mr_call_red(f, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(x),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func callGather(f unsafe.Pointer, send, recv uintptr, count int, dt DataType, comm, stream uintptr) Result {
	return Result(C.mr_call_gather(f, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func callP2P(f unsafe.Pointer, buf uintptr, count int, dt DataType, peer int, comm, stream uintptr) Result {
	return Result(C.mr_call_p2p(f, C.uintptr_t(buf), C.size_t(count), C.int(dt), C.int(peer),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func callSI(f unsafe.Pointer, a int) string { return goString(C.mr_call_s_i(f, C.int(a))) }

func callSH(f unsafe.Pointer, a uintptr) string { return goString(C.mr_call_s_h(f, C.uintptr_t(a))) }

func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}
