//go:build cgo

// The functions under test live in cgo files, so without cgo the whole
// package, this test included, is left out of the build (go vet and go test
// skip it) instead of failing to compile with an undefined name.

package main

import (
	"math"
	"testing"
	"unsafe"
)

// TestCopyCString: metaroce_net_last_error's copy writes a NUL-terminated,
// truncated string and touches at most len(msg)+1 bytes, whatever size the
// caller claims, SIZE_MAX included (which int(n) would make negative).
func TestCopyCString(t *testing.T) {
	const msg = "NET/MetaRoCE : connect failed"
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{math.MaxUint64, msg},
		{math.MaxInt64 + 1, msg},
		{uint64(len(msg)) + 1, msg},
		{uint64(len(msg)), msg[:len(msg)-1]},
		{4, msg[:3]},
		{1, ""},
	} {
		buf := make([]byte, 64)
		for i := range buf {
			buf[i] = 0xee
		}
		if got := copyCString(unsafe.Pointer(&buf[0]), tc.n, msg); got != len(msg) {
			t.Fatalf("n=%d: returned %d, want %d", tc.n, got, len(msg))
		}
		k := len(tc.want)
		if string(buf[:k]) != tc.want || buf[k] != 0 || buf[k+1] != 0xee {
			t.Fatalf("n=%d: buffer %q, want %q, NUL, then untouched", tc.n, buf[:k+2], tc.want)
		}
	}
	if got := copyCString(nil, math.MaxUint64, msg); got != len(msg) {
		t.Fatalf("NULL buffer: returned %d", got)
	}
	var b [1]byte
	b[0] = 0xee
	if copyCString(unsafe.Pointer(&b[0]), 0, msg); b[0] != 0xee {
		t.Fatal("n=0 wrote to the buffer")
	}
}
