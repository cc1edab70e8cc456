package collectives

import (
	"unsafe"

	"github.com/metaroce/metaroce/collectives/sched"
)

// How a call's send and recv buffers may share memory. A plan reads BufSend
// while it writes BufRecv, so buffers that overlap in any way other than the
// in-place layouts below would read bytes the call already overwrote: the
// result would be wrong without any error. Such calls are refused.

// span is the address range [lo, hi) of b; empty for an empty slice.
func span(b []byte) (lo, hi uintptr) {
	if len(b) == 0 {
		return 0, 0
	}
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return lo, lo + uintptr(len(b))
}

// overlap reports whether a and b share at least one byte.
func overlap(a, b []byte) bool {
	alo, ahi := span(a)
	blo, bhi := span(b)
	return alo < bhi && blo < ahi
}

// within reports whether inner lies entirely inside outer, and at which
// byte offset of outer it starts.
func within(inner, outer []byte) (int, bool) {
	ilo, ihi := span(inner)
	olo, ohi := span(outer)
	if len(inner) == 0 || len(outer) == 0 || ilo < olo || ihi > ohi {
		return 0, false
	}
	return int(ilo - olo), true
}

// sameBuffer classifies the buffers of a collective whose in-place form
// reads and writes recv alone: in place when send is nil or starts where
// recv starts; out of place when they are disjoint; an error otherwise.
func sameBuffer(coll sched.Collective, send, recv []byte) (inPlace bool, err error) {
	if send == nil {
		return true, nil
	}
	if len(send) > 0 && len(recv) > 0 && unsafe.SliceData(send) == unsafe.SliceData(recv) {
		return true, nil
	}
	if overlap(send, recv) {
		return false, overlapErr(coll, send, recv)
	}
	return false, nil
}

// overlapErr explains a refused partial overlap.
func overlapErr(coll sched.Collective, send, recv []byte) error {
	slo, _ := span(send)
	rlo, _ := span(recv)
	return invalidf("collectives: %v: send (%d bytes) and recv (%d bytes) overlap, %+d bytes apart: pass the same buffer (or nil send) for an in-place call, or disjoint buffers",
		coll, len(send), len(recv), int64(slo)-int64(rlo))
}
