package rccl

import (
	"context"
	"testing"

	"github.com/metaroce/metaroce/gpu"
	"github.com/metaroce/metaroce/gpu/internal/ctest"
	"github.com/stretchr/testify/require"
)

// BenchmarkCallOverhead measures the binding's cost per collective call: a
// one-element all-reduce on the fake library, which does almost no work, so
// the figure is cgo plus argument checks.
func BenchmarkCallOverhead(b *testing.B) {
	l, err := Open(ctest.SharedLib(b, "libnccl-fake.so", fakeSources))
	if err != nil {
		b.Fatal(err)
	}
	id, err := l.UniqueID()
	if err != nil {
		b.Fatal(err)
	}
	c, err := l.InitRank(context.Background(), 1, id, 0, -1)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Destroy()
	buf, err := gpu.AllocHost(64, -1)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.AllReduce(buf.Addr(), buf.Addr(), 1, Float32, Sum, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCallAllocs(t *testing.T) {
	l, err := Open(ctest.SharedLib(t, "libnccl-fake.so", fakeSources))
	require.NoError(t, err)
	c := initFake(t, l, 1, 0)
	buf, err := gpu.AllocHost(64, -1)
	require.NoError(t, err)
	defer buf.Free()
	allocs := testing.AllocsPerRun(100, func() {
		_ = c.AllReduce(buf.Addr(), buf.Addr(), 1, Float32, Sum, 0)
	})
	require.Equal(t, 0.0, allocs, "allocations per successful collective call")
}
