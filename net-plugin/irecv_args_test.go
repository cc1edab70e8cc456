//go:build cgo

package main

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/metaroce/metaroce/net-plugin/internal/core"
)

// callIrecv calls metaroce_net_irecv with n buffers, passing NULL for each
// pointer argument named in null and a valid array for the others (the
// request comm is no comm at all: the arguments are checked first). The
// C types of the arguments cannot be named outside cgo files, so the call
// goes through reflect. It returns the ncclResult_t and the recorded error.
func callIrecv(n int, null ...string) (core.Result, string) {
	fn := reflect.ValueOf(metaroce_net_irecv)
	ft := fn.Type()
	isNull := func(name string) bool {
		for _, s := range null {
			if s == name {
				return true
			}
		}
		return false
	}
	bufs := make([]byte, 64)
	arg := func(i int, name string) reflect.Value {
		t := ft.In(i)
		if isNull(name) {
			return reflect.Zero(t)
		}
		arr := reflect.New(reflect.ArrayOf(8, t.Elem())) // n ≤ 8 entries
		if name == "data" {
			for k := range 8 {
				arr.Elem().Index(k).Set(reflect.ValueOf(unsafe.Pointer(&bufs[k*8])))
			}
		}
		return reflect.NewAt(t.Elem(), arr.UnsafePointer())
	}
	out := fn.Call([]reflect.Value{
		reflect.Zero(ft.In(0)),
		reflect.ValueOf(n).Convert(ft.In(1)),
		arg(2, "data"), arg(3, "sizes"), arg(4, "tags"), arg(5, "request"),
	})
	return core.Result(out[0].Convert(reflect.TypeFor[int64]()).Int()), core.LastError()
}

// TestIrecvNullArguments: irecv with a NULL array argument fails naming
// that argument, not the group size, which is valid; a group size out of
// range still says so.
func TestIrecvNullArguments(t *testing.T) {
	core.SetLogSink(func(core.Level, uint64, string) {}) // the failures' WARN lines
	t.Cleanup(func() { core.SetLogSink(nil) })
	for _, name := range []string{"data", "sizes", "tags", "request"} {
		rc, msg := callIrecv(1, name)
		if rc != core.InternalError || !strings.Contains(msg, "NULL "+name) || strings.Contains(msg, "maxRecvs") {
			t.Errorf("irecv with NULL %s: result %d, %q; want an internal error naming NULL %s", name, rc, msg, name)
		}
	}
	for _, n := range []int{0, 9} {
		rc, msg := callIrecv(n)
		if rc != core.InternalError || !strings.Contains(msg, "maxRecvs") {
			t.Errorf("irecv of %d buffers: result %d, %q; want an internal error naming the group size", n, rc, msg)
		}
	}
	// A valid call reaches the comm lookup, which refuses comm 0.
	if rc, msg := callIrecv(1); rc != core.InternalError || !strings.Contains(msg, "unknown recv comm") {
		t.Errorf("irecv on comm 0: result %d, %q", rc, msg)
	}
}
