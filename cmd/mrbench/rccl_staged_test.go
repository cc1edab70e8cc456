//go:build cgo

package main

import (
	"context"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/gpu"
	"github.com/metaroce/metaroce/gpu/rccl"
)

// fakeRCCLComm opens the host-memory stand-in for NCCL (gpu/rccl's test
// library, built here with gcc) and makes a one-rank rcclComm on it with no
// bound buffers, so that every call takes the staged path through the
// scratch device buffer.
func fakeRCCLComm(t *testing.T) *rcclComm {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found on PATH: the fake RCCL library cannot be built")
	}
	lib := filepath.Join(t.TempDir(), "libnccl-fake.so")
	out, err := exec.Command(gcc, "-shared", "-fPIC", "-O1", "-o", lib,
		"../../gpu/rccl/testdata/fakenccl.c", "../../gpu/testdata/fakecudart.c").CombinedOutput()
	require.NoError(t, err, "building the fake library: %s", out)
	l, err := rccl.Open(lib)
	require.NoError(t, err)
	t.Setenv(gpu.EnvCUDARTLib, lib) // the fake's CUDA runtime is in the same file
	rt, err := l.Runtime()
	require.NoError(t, err)
	id, err := l.UniqueID()
	require.NoError(t, err)
	c, err := l.InitRank(context.Background(), 1, id, 0, -1)
	require.NoError(t, err)
	s, err := rt.StreamCreate()
	require.NoError(t, err)
	rc := &rcclComm{l: &rcclLauncher{o: &options{}, lib: l, rt: rt, ndev: 1}, c: c, s: s}
	t.Cleanup(func() {
		rc.free()
		rt.StreamDestroy(s)
		_ = c.Destroy()
	})
	return rc
}

// TestRCCLStagedCalls runs small exchanges on host slices that are not the
// sweep's bound buffers, which the rccl backend stages through scratch
// device memory: out of place, and in place, where the input is in the
// receive buffer and must be uploaded from there.
func TestRCCLStagedCalls(t *testing.T) {
	rc := fakeRCCLComm(t)
	ints := func(v ...int32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.NativeEndian.PutUint32(b[4*i:], uint32(x))
		}
		return b
	}
	// The in-place call's input differs from the out-of-place one's, which
	// is still in the scratch buffer it reuses.
	for _, tc := range []struct {
		inPlace bool
		input   []byte
	}{{false, ints(3, -7, 11, 42)}, {true, ints(5, 6, -8, 9)}} {
		send, recv := tc.input, ints(0, 0, 0, 0)
		if tc.inPlace {
			send, recv = nil, append([]byte(nil), tc.input...)
		}
		k := call{Coll: sched.AllReduce, Count: 4, DType: reduce.Int32, Op: reduce.OpSum, InPlace: tc.inPlace}
		require.NoError(t, rc.Collective(context.Background(), k, send, recv), "in place: %v", tc.inPlace)
		require.Equal(t, tc.input, recv, "a one-rank sum is the input (in place: %v)", tc.inPlace)
	}
}
