package core

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// gatedBackend is a nopBackend whose Isend and Irecv, once entered, report
// it on entered and wait for proceed before they return a request: a test
// can close the comm while one is in the backend, deterministically.
type gatedBackend struct {
	nopBackend
	entered, proceed chan struct{}
}

func (b *gatedBackend) Listen(int) (backend.Listener, error)     { return b, nil }
func (b *gatedBackend) Dial(int, []byte) (backend.Dialer, error) { return b, nil }
func (b *gatedBackend) Accept() (backend.RecvConn, error)        { return b, nil }
func (b *gatedBackend) Step() (backend.SendConn, error)          { return b, nil }

func (b *gatedBackend) Isend([]byte, int32) (backend.Request, error) {
	b.entered <- struct{}{}
	<-b.proceed
	return pendingReq{}, nil
}

func (b *gatedBackend) Irecv([][]byte, []int32) (backend.Request, error) {
	b.entered <- struct{}{}
	<-b.proceed
	return pendingReq{}, nil
}

// TestRequestRacingCloseIsNotKept: an isend or irecv whose comm is closed
// (an abort) while the request is being posted fails, and leaves no entry
// in the request table, which nothing would ever remove.
func TestRequestRacingCloseIsNotKept(t *testing.T) {
	for _, dir := range []string{"isend", "irecv"} {
		t.Run(dir, func(t *testing.T) {
			b := &gatedBackend{entered: make(chan struct{}), proceed: make(chan struct{})}
			p, sc, rc := pluginOver(t, b)
			type result struct {
				h   Handle
				err error
			}
			out := make(chan result)
			go func() {
				var r result
				if dir == "isend" {
					r.h, r.err = p.Isend(sc, make([]byte, 8), 0)
				} else {
					r.h, r.err = p.Irecv(rc, [][]byte{make([]byte, 8)}, []int32{0})
				}
				out <- r
			}()
			<-b.entered
			if dir == "isend" {
				require.NoError(t, p.CloseSend(sc))
				require.NoError(t, p.CloseRecv(rc))
			} else {
				require.NoError(t, p.CloseRecv(rc))
				require.NoError(t, p.CloseSend(sc))
			}
			close(b.proceed)
			r := <-out
			require.ErrorIs(t, r.err, backend.ErrInternal)
			require.ErrorContains(t, r.err, "closed while")
			require.Zero(t, r.h)
			require.Zero(t, p.reqs.len(), "a request of a closed comm is kept")
		})
	}
}

// gatedDialer is a connect whose Step, once entered, reports it on entered
// and waits for proceed, then returns its send comm, as a dialer whose
// connection completed does; like the udp backend's, an Abort after Step
// took the result leaves the comm to Step's caller.
type gatedDialer struct {
	entered, proceed chan struct{}
	sc               *closeCounter
}

func (d *gatedDialer) Step() (backend.SendConn, error) {
	d.entered <- struct{}{}
	<-d.proceed
	return d.sc, nil
}

func (d *gatedDialer) Abort() {}

// closeCounter is a send comm that counts its Closes.
type closeCounter struct {
	nopBackend
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

// dialGated is a backend whose connects are gatedDialer d.
type dialGated struct {
	nopBackend
	d *gatedDialer
}

func (b *dialGated) Dial(int, []byte) (backend.Dialer, error) { return b.d, nil }

// TestConnectCompletingAfterFinalize: a connect whose context is finalized
// while its last step is under way (finalize aborts the connects of its
// context, but this one has its comm already) fails, and its comm is
// closed rather than handed out under a context that no longer exists.
func TestConnectCompletingAfterFinalize(t *testing.T) {
	d := &gatedDialer{entered: make(chan struct{}), proceed: make(chan struct{}), sc: &closeCounter{}}
	b := &dialGated{d: d}
	name := registerBackend(t, b)
	p := New(envMap(map[string]string{"METAROCE_BACKEND": name}))
	ctx, err := p.Init(12, 1)
	require.NoError(t, err)
	live, err := p.Init(12, 2) // another communicator keeps the plugin up
	require.NoError(t, err)

	type result struct {
		h   Handle
		err error
	}
	out := make(chan result)
	go func() {
		var r result
		r.h, r.err = p.Connect(ctx, 0, make([]byte, backend.HandleSize))
		out <- r
	}()
	<-d.entered
	require.NoError(t, p.Finalize(ctx))
	close(d.proceed)
	r := <-out
	require.ErrorIs(t, r.err, backend.ErrInternal)
	require.ErrorContains(t, r.err, "finalized")
	require.Zero(t, r.h)
	require.Equal(t, 1, d.sc.closes, "the comm of the finalized context's connect was not closed")
	require.Zero(t, p.Live(), "the comm of the finalized context's connect is still held")
	require.NoError(t, p.Finalize(live))
}

// TestRegMrRacingCloseIsNotKept: a regMr whose comm is closed (an abort,
// on another thread) after the call found the comm but before its
// registration is in the table fails, and leaves no entry in the
// registration table, which nothing would ever remove: the close has
// already forgotten the comm's registrations.
func TestRegMrRacingCloseIsNotKept(t *testing.T) {
	for _, dir := range []string{"send", "recv"} {
		t.Run(dir, func(t *testing.T) {
			p, sc, rc := pluginOver(t, &nopBackend{})
			comm, closeComm := sc, p.CloseSend
			if dir == "recv" {
				comm, closeComm = rc, p.CloseRecv
			}
			p.beforeRegister = func() { require.NoError(t, closeComm(comm)) }
			mem := make([]byte, 64)
			mh, err := p.RegMr(comm, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), PtrHost)
			require.ErrorIs(t, err, backend.ErrInternal)
			require.ErrorContains(t, err, "closed while")
			require.Zero(t, mh)
			require.Zero(t, p.mrs.len(), "a registration of a closed comm is kept")
		})
	}
}
