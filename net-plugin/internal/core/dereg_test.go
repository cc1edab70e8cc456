package core

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// abortCounter is a backend whose requests never complete and whose
// connections count their Aborts.
type abortCounter struct {
	nopBackend
	aborts int
}

type pendingReq struct{}

func (pendingReq) Test([]int) (bool, error) { return false, nil }

func (b *abortCounter) Listen(int) (backend.Listener, error)     { return b, nil }
func (b *abortCounter) Dial(int, []byte) (backend.Dialer, error) { return b, nil }
func (b *abortCounter) Accept() (backend.RecvConn, error)        { return b, nil }
func (b *abortCounter) Step() (backend.SendConn, error)          { return b, nil }
func (b *abortCounter) Abort()                                   { b.aborts++ }
func (b *abortCounter) Isend([]byte, int32) (backend.Request, error) {
	return pendingReq{}, nil
}
func (b *abortCounter) Irecv([][]byte, []int32) (backend.Request, error) {
	return pendingReq{}, nil
}

// TestDeregMrAbortsCommInFlight: deregMr of memory that requests in flight
// still use aborts their comm (NCCL frees the memory right after, before
// it closes the comm); deregMr of memory no request uses aborts nothing.
func TestDeregMrAbortsCommInFlight(t *testing.T) {
	b := &abortCounter{}
	p, sc, rc := pluginOver(t, b)

	mem := make([]byte, 1<<16)
	base := uintptr(unsafe.Pointer(&mem[0]))
	region := func(comm Handle, off, n int) Handle {
		mh, err := p.RegMr(comm, base+uintptr(off), uintptr(n), PtrHost)
		require.NoError(t, err)
		return mh
	}
	lowR, highR := region(rc, 0, 1<<15), region(rc, 1<<15, 1<<15)
	lowS := region(sc, 0, 1<<15)
	_, err := p.Irecv(rc, [][]byte{mem[1<<15+100 : 1<<15+200]}, []int32{0})
	require.NoError(t, err)

	// Memory no request uses: nothing aborted.
	require.NoError(t, p.DeregMr(rc, lowR))
	require.NoError(t, p.DeregMr(sc, lowS))
	require.Zero(t, b.aborts)
	// The receive's memory: its comm is aborted.
	require.NoError(t, p.DeregMr(rc, highR))
	require.Equal(t, 1, b.aborts)

	// A send in flight in the memory of the send comm.
	s2 := region(sc, 0, 1<<16)
	_, err = p.Isend(sc, mem[:10], 0)
	require.NoError(t, err)
	require.NoError(t, p.DeregMr(sc, s2))
	require.Equal(t, 2, b.aborts)
}

// TestDeregMrWrongCommKeepsRegistration: deregMr naming another comm than
// the registration's is refused and leaves the registration in place, so
// that the rightful deregMr still succeeds.
func TestDeregMrWrongCommKeepsRegistration(t *testing.T) {
	p, sc, rc := pluginOver(t, &nopBackend{})
	mem := make([]byte, 64)
	mh, err := p.RegMr(rc, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), PtrHost)
	require.NoError(t, err)
	err = p.DeregMr(sc, mh)
	require.Equal(t, InternalError, Code(err), "deregMr on the wrong comm: %v", err)
	require.ErrorContains(t, err, "registered on")
	require.NoError(t, p.DeregMr(rc, mh), "the registration must survive a refused deregMr")
	require.Equal(t, InternalError, Code(p.DeregMr(rc, mh)), "double deregMr accepted")
}
