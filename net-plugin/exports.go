package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/core"
)

// guard recovers a panic in an export and turns it into ncclInternalError;
// every export defers it so that no Go panic unwinds into NCCL.
func guard(op string, rc *C.ncclResult_t) {
	if r := recover(); r != nil {
		*rc = C.ncclResult_t(core.Panicked(op, r))
	}
}

// ret maps an error to ncclResult_t (logging and recording it).
func ret(op string, err error) C.ncclResult_t { return C.ncclResult_t(core.Fail(op, err)) }

// cstrings keeps the C copies of device names and PCI paths alive for the
// life of the process: NCCL stores the pointers from getProperties.
var cstrings struct {
	sync.Mutex
	m map[string]*C.char
}

func cstr(s string) *C.char {
	if s == "" {
		return nil
	}
	cstrings.Lock()
	defer cstrings.Unlock()
	if cstrings.m == nil {
		cstrings.m = map[string]*C.char{}
	}
	p, ok := cstrings.m[s]
	if !ok {
		p = C.CString(s)
		cstrings.m[s] = p
	}
	return p
}

//export metaroce_net_init
func metaroce_net_init(abi C.int, commID C.uint64_t, ctx *C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("init", &rc)
	h, err := plugin.Init(int(abi), uint64(commID))
	*ctx = C.uintptr_t(h)
	applyThreads()
	return ret("init", err)
}

//export metaroce_net_init_legacy
func metaroce_net_init_legacy(abi C.int) (rc C.ncclResult_t) {
	defer guard("init", &rc)
	err := plugin.InitLegacy(int(abi))
	applyThreads()
	return ret("init", err)
}

//export metaroce_net_finalize
func metaroce_net_finalize(ctx C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("finalize", &rc)
	return ret("finalize", plugin.Finalize(core.Handle(ctx)))
}

//export metaroce_net_devices
func metaroce_net_devices(ndev *C.int) (rc C.ncclResult_t) {
	defer guard("devices", &rc)
	n, err := plugin.Devices()
	*ndev = C.int(n)
	return ret("devices", err)
}

//export metaroce_net_get_properties
func metaroce_net_get_properties(dev C.int, p *C.ncclNetProperties_v12_t) (rc C.ncclResult_t) {
	defer guard("getProperties", &rc)
	pr, err := plugin.Properties(int(dev))
	if err != nil {
		return ret("getProperties", err)
	}
	p.name = cstr(pr.Name)
	p.pciPath = cstr(pr.PCIPath)
	p.guid = C.uint64_t(pr.GUID)
	p.ptrSupport = C.NCCL_PTR_HOST
	p.regIsGlobal = 0
	p.forceFlush = 0
	p.speed = C.int(pr.SpeedMbps)
	p.port = C.int(pr.Port)
	p.latency = C.float(pr.LatencyUs)
	p.maxComms = C.int(pr.MaxComms)
	p.maxRecvs = C.int(pr.MaxRecvs)
	p.netDeviceType = C.NCCL_NET_DEVICE_HOST
	p.netDeviceVersion = C.NCCL_NET_DEVICE_INVALID_VERSION
	p.vProps.ndevs = 1
	p.vProps.devs[0] = C.int(pr.Dev)
	p.maxP2pBytes = C.size_t(pr.MaxP2pBytes)
	p.maxCollBytes = C.size_t(pr.MaxCollBytes)
	p.maxMultiRequestSize = C.int(pr.MaxMultiRequestSize)
	p.railId = C.int16_t(pr.RailID)
	p.planeId = C.int16_t(pr.PlaneID)
	return C.ncclSuccess
}

func handleBytes(p unsafe.Pointer) []byte {
	return unsafe.Slice((*byte)(p), backend.HandleSize)
}

//export metaroce_net_listen
func metaroce_net_listen(ctx C.uintptr_t, dev C.int, handle unsafe.Pointer, out *C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("listen", &rc)
	*out = 0
	if handle == nil {
		return ret("listen", core.ErrNilArgument("handle"))
	}
	h, err := plugin.Listen(core.Handle(ctx), int(dev), handleBytes(handle))
	*out = C.uintptr_t(h)
	return ret("listen", err)
}

//export metaroce_net_connect
func metaroce_net_connect(ctx C.uintptr_t, dev C.int, handle unsafe.Pointer, out *C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("connect", &rc)
	*out = 0
	if handle == nil {
		return ret("connect", core.ErrNilArgument("handle"))
	}
	h, err := plugin.Connect(core.Handle(ctx), int(dev), handleBytes(handle))
	*out = C.uintptr_t(h)
	return ret("connect", err)
}

//export metaroce_net_accept
func metaroce_net_accept(listen C.uintptr_t, out *C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("accept", &rc)
	*out = 0
	h, err := plugin.Accept(core.Handle(listen))
	*out = C.uintptr_t(h)
	return ret("accept", err)
}

//export metaroce_net_reg_mr
func metaroce_net_reg_mr(comm C.uintptr_t, data unsafe.Pointer, size C.size_t, typ C.int, out *C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("regMr", &rc)
	*out = 0
	h, err := plugin.RegMr(core.Handle(comm), uintptr(data), uintptr(size), int(typ))
	*out = C.uintptr_t(h)
	return ret("regMr", err)
}

//export metaroce_net_dereg_mr
func metaroce_net_dereg_mr(comm, mh C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("deregMr", &rc)
	return ret("deregMr", plugin.DeregMr(core.Handle(comm), core.Handle(mh)))
}

// bytesAt views C memory as a byte slice; a zero-length message may come
// with any pointer, including NULL.
func bytesAt(p unsafe.Pointer, n uintptr) []byte {
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// metaroce_net_isend refuses a size above backend.MaxMessage before it
// views the buffer: a size_t that wraps the address space (a negative int
// sign-extended, say) would make unsafe.Slice panic, reported as a plugin
// bug instead of the caller's invalid argument.
//
//export metaroce_net_isend
func metaroce_net_isend(comm C.uintptr_t, data unsafe.Pointer, size C.size_t, tag C.int, req *C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("isend", &rc)
	if req == nil {
		return ret("isend", core.ErrNilArgument("request (where the request handle is written)"))
	}
	*req = 0
	if uint64(size) > backend.MaxMessage {
		return ret("isend", core.ErrSendSize(uint64(size)))
	}
	if data == nil && size != 0 {
		return ret("isend", core.ErrNilArgument("data"))
	}
	h, err := plugin.Isend(core.Handle(comm), bytesAt(data, uintptr(size)), int32(tag))
	*req = C.uintptr_t(h)
	return ret("isend", err)
}

// metaroce_net_irecv views each posted buffer with at most
// backend.MaxMessage bytes: no message is larger (isend refuses it), so the
// capacity beyond is never written, and a capacity that wraps the address
// space (a negative int sign-extended) would make unsafe.Slice panic.
//
//export metaroce_net_irecv
func metaroce_net_irecv(comm C.uintptr_t, n C.int, data *unsafe.Pointer, sizes *C.size_t, tags *C.int, req *C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("irecv", &rc)
	if req != nil {
		*req = 0
	}
	if n < 1 || n > backend.MaxRecvs {
		return ret("irecv", core.ErrBadGroup(int(n), backend.MaxRecvs))
	}
	nullArray := func(name string) C.ncclResult_t {
		return ret("irecv", core.ErrNilArgument(fmt.Sprintf("%s (an array of n = %d entries)", name, int(n))))
	}
	switch {
	case data == nil:
		return nullArray("data")
	case sizes == nil:
		return nullArray("sizes")
	case tags == nil:
		return nullArray("tags")
	case req == nil:
		return ret("irecv", core.ErrNilArgument("request (where the request handle is written)"))
	}
	ptrs := unsafe.Slice(data, int(n))
	szs := unsafe.Slice(sizes, int(n))
	tgs := unsafe.Slice(tags, int(n))
	var bufs [backend.MaxRecvs][]byte
	var tg [backend.MaxRecvs]int32
	for i := range int(n) {
		if ptrs[i] == nil && szs[i] != 0 {
			return ret("irecv", core.ErrNilArgument(fmt.Sprintf("data[%d] (buffer of %d bytes)", i, uint64(szs[i]))))
		}
		bufs[i] = bytesAt(ptrs[i], uintptr(min(uint64(szs[i]), backend.MaxMessage)))
		tg[i] = int32(tgs[i])
	}
	h, err := plugin.Irecv(core.Handle(comm), bufs[:n], tg[:n])
	*req = C.uintptr_t(h)
	return ret("irecv", err)
}

// metaroce_net_bad_int_size fails a call of ABI v6..v8 whose int size is
// negative (op names the call: isend, irecv or regMr), logging and
// recording it as every other failure is. The adapters in tables.c call it
// instead of converting such a size to size_t.
//
//export metaroce_net_bad_int_size
func metaroce_net_bad_int_size(op *C.char, size C.int) (rc C.ncclResult_t) {
	defer guard("size check", &rc)
	name := C.GoString(op)
	return ret(name, core.ErrNegativeSize(name, int64(size)))
}

//export metaroce_net_iflush
func metaroce_net_iflush(comm C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("iflush", &rc)
	return ret("iflush", core.ErrNoFlush())
}

//export metaroce_net_test
func metaroce_net_test(req C.uintptr_t, done *C.int, sizes *C.int) (rc C.ncclResult_t) {
	defer guard("test", &rc)
	*done = 0
	var sz [backend.MaxRecvs]int
	d, n, err := plugin.Test(core.Handle(req), sz[:])
	if err != nil {
		return ret("test", err)
	}
	if d {
		*done = 1
		if sizes != nil {
			// Write exactly the group's n entries: NCCL sums the array.
			out := unsafe.Slice(sizes, n)
			for i := range out {
				out[i] = C.int(min(sz[i], backend.MaxMessage))
			}
		}
	}
	return C.ncclSuccess
}

//export metaroce_net_close_send
func metaroce_net_close_send(comm C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("closeSend", &rc)
	return ret("closeSend", plugin.CloseSend(core.Handle(comm)))
}

//export metaroce_net_close_recv
func metaroce_net_close_recv(comm C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("closeRecv", &rc)
	return ret("closeRecv", plugin.CloseRecv(core.Handle(comm)))
}

//export metaroce_net_close_listen
func metaroce_net_close_listen(comm C.uintptr_t) (rc C.ncclResult_t) {
	defer guard("closeListen", &rc)
	return ret("closeListen", plugin.CloseListen(core.Handle(comm)))
}

// metaroce_net_last_error copies the text of the most recent failure into
// buf (n bytes, NUL-terminated, truncated to fit) and returns its full
// length in bytes, like snprintf. It returns 0 should anything panic.
//
//export metaroce_net_last_error
func metaroce_net_last_error(buf *C.char, n C.size_t) (size C.size_t) {
	defer func() {
		if recover() != nil {
			size = 0
		}
	}()
	return C.size_t(copyCString(unsafe.Pointer(buf), uint64(n), core.LastError()))
}

// copyCString writes msg into the C buffer buf of n bytes as a
// NUL-terminated string, truncated to n-1 bytes, and returns len(msg). At
// most len(msg)+1 bytes are touched, whatever n says, so a caller passing a
// huge n (SIZE_MAX for "large enough") neither overflows int nor makes a
// slice larger than the copy.
func copyCString(buf unsafe.Pointer, n uint64, msg string) int {
	if buf == nil || n == 0 {
		return len(msg)
	}
	k := len(msg)
	if n-1 < uint64(k) {
		k = int(n - 1)
	}
	out := unsafe.Slice((*byte)(buf), k+1)
	copy(out, msg[:k])
	out[k] = 0
	return len(msg)
}
