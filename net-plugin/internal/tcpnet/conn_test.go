package tcpnet

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/backend/backendtest"
)

// pair connects a send and a receive connection over loopback.
func pair(t testing.TB, socks int) (backend.SendConn, backend.RecvConn) {
	t.Helper()
	b, err := New(Config{IfNames: "=lo", Socks: socks, Timeout: 5 * time.Second})
	noErr(t, err)
	l, err := b.Listen(0)
	noErr(t, err)
	defer l.Close()
	d, err := b.Dial(0, l.Handle())
	noErr(t, err)
	var sc backend.SendConn
	var rc backend.RecvConn
	backendtest.PollUntil(t, "connect", func() bool {
		if sc == nil {
			sc, err = d.Step()
			noErr(t, err)
		}
		if rc == nil {
			rc, err = l.Accept()
			noErr(t, err)
		}
		return sc != nil && rc != nil
	})
	t.Cleanup(func() { _ = sc.Close(); _ = rc.Close() })
	return sc, rc
}

func TestTransferGroupedTags(t *testing.T) {
	for _, socks := range []int{1, 3} {
		t.Run(strings.Repeat("s", socks), func(t *testing.T) {
			sc, rc := pair(t, socks)
			backendtest.GroupedTransfer(t, sc, rc, uint64(socks))
		})
	}
}

func TestTruncatedMessageIsInvalidUsage(t *testing.T) {
	sc, rc := pair(t, 2)
	r, err := rc.Irecv([][]byte{make([]byte, 10)}, []int32{0})
	noErr(t, err)
	_, err = sc.Isend(make([]byte, 11), 0)
	noErr(t, err)
	backendtest.PollUntil(t, "truncation error", func() bool {
		_, err := r.Test(nil)
		if err != nil {
			if !errors.Is(err, backend.ErrInvalidUsage) || !strings.Contains(err.Error(), "127.0.0.1") {
				t.Fatalf("unexpected error %v", err)
			}
			return true
		}
		return false
	})
}

func TestPeerCloseFailsPendingReceive(t *testing.T) {
	sc, rc := pair(t, 2)
	r, err := rc.Irecv([][]byte{make([]byte, 10), make([]byte, 10)}, []int32{1, 2})
	noErr(t, err)
	s, err := sc.Isend([]byte("hello"), 1)
	noErr(t, err)
	backendtest.PollUntil(t, "send", func() bool { d, err := s.Test(nil); noErr(t, err); return d })
	noErr(t, sc.Close())
	backendtest.PollUntil(t, "starved receive", func() bool {
		_, err := r.Test(nil)
		if err != nil && !strings.Contains(err.Error(), "closed the connection") {
			t.Fatalf("unexpected error %v", err)
		}
		return err != nil
	})
}

func TestSlotsExhaustedMeansRetry(t *testing.T) {
	_, rc := pair(t, 1)
	for i := range MaxRecvRequests {
		r, err := rc.Irecv([][]byte{nil}, []int32{0})
		noErr(t, err)
		if r == nil {
			t.Fatalf("receive %d refused", i)
		}
	}
	r, err := rc.Irecv([][]byte{nil}, []int32{0})
	noErr(t, err)
	if r != nil {
		t.Fatal("receive beyond capacity was accepted")
	}
	_, err = rc.Irecv(make([][]byte, backend.MaxRecvs+1), make([]int32, backend.MaxRecvs+1))
	if !errors.Is(err, backend.ErrInternal) {
		t.Fatalf("oversized group: %v", err)
	}
}

func TestDialGarbageHandle(t *testing.T) {
	b, err := New(Config{IfNames: "=lo"})
	noErr(t, err)
	_, err = b.Dial(0, make([]byte, backend.HandleSize))
	if !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("garbage handle: %v", err)
	}
	_, err = b.Dial(5, nil)
	if !errors.Is(err, backend.ErrInternal) {
		t.Fatalf("bad device: %v", err)
	}
}

// TestListenErrorReturnsNilListener: a Listen that fails returns a nil
// Listener, not a non-nil interface holding a nil *listener, which a
// caller checking l != nil would go on to use. The failure here is the
// handle's: a socket count that New would have refused.
func TestListenErrorReturnsNilListener(t *testing.T) {
	b := &Backend{cfg: Config{Socks: MaxSocks + 1, Timeout: time.Second}, devs: []backend.Device{{Name: "lo", IfName: "lo", Addr: "127.0.0.1"}}}
	l, err := b.Listen(0)
	if !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("listen with %d sockets per connection: %v", MaxSocks+1, err)
	}
	if l != nil {
		t.Fatalf("Listen failed with a non-nil Listener %#v", l)
	}
}

// TestInlineWritesStayOrdered sends more small messages than the socket
// buffers hold before any receive is posted, so inline writes meet full and
// partially written sockets and hand the rest to the writers; every message
// must still arrive whole and in order.
func TestInlineWritesStayOrdered(t *testing.T) {
	for _, socks := range []int{1, 2} {
		sc, rc := pair(t, socks)
		var sreqs []backend.Request
		for m := range MaxSendRequests {
			data := make([]byte, inlineMax-m%3)
			for i := range data {
				data[i] = backendtest.Pattern(m, i)
			}
			r, err := sc.Isend(data, 0)
			noErr(t, err)
			if r == nil {
				t.Fatalf("send %d refused", m)
			}
			sreqs = append(sreqs, r)
		}
		buf := make([]byte, inlineMax)
		for m := range len(sreqs) {
			r, err := rc.Irecv([][]byte{buf}, []int32{0})
			noErr(t, err)
			var sz [1]int
			backendtest.PollUntil(t, "recv", func() bool { d, err := r.Test(sz[:]); noErr(t, err); return d })
			eq(t, inlineMax-m%3, sz[0])
			for i := range sz[0] {
				if buf[i] != backendtest.Pattern(m, i) {
					t.Fatalf("socks %d message %d byte %d: %d want %d", socks, m, i, buf[i], backendtest.Pattern(m, i))
				}
			}
		}
		for _, r := range sreqs {
			backendtest.PollUntil(t, "send", func() bool { d, err := r.Test(nil); noErr(t, err); return d })
		}
	}
}

// TestZeroByteMessage: NCCL posts 0-byte receives for empty transfers.
func TestZeroByteMessage(t *testing.T) {
	for _, socks := range []int{1, 2} {
		sc, rc := pair(t, socks)
		backendtest.ZeroByteMessage(t, sc, rc)
	}
}

// TestAbort: see backendtest.AbortStopsBufferUse.
func TestAbort(t *testing.T) {
	for _, receiver := range []bool{true, false} {
		sc, rc := pair(t, 2)
		backendtest.AbortStopsBufferUse(t, sc, rc, receiver)
	}
}
