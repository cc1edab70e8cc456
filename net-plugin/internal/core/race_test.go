package core

import (
	"testing"

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
