package tcpnet

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// pollUntil calls step until it reports true, failing the test after a
// generous deadline so that a bug shows up as a failure, not a hang.
func pollUntil(t testing.TB, what string, step func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !step() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no progress within the deadline", what)
		}
		runtime.Gosched()
	}
}

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
	pollUntil(t, "connect", func() bool {
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

// pattern is the deterministic content of byte i of message m.
func pattern(m, i int) byte { return byte(m*131 + i*7 + i>>8) }

func TestTransferGroupedTags(t *testing.T) {
	for _, socks := range []int{1, 3} {
		t.Run(strings.Repeat("s", socks), func(t *testing.T) {
			sc, rc := pair(t, socks)
			rng := rand.New(rand.NewPCG(1, uint64(socks)))
			const groups, n, capSize = 40, 3, 1 << 16
			type msg struct {
				tag  int32
				size int
				data []byte
			}
			// sends[g] lists the group's messages in sending order; tags are
			// shuffled so that the tag, not the order, picks the buffer.
			var sends [][]msg
			for g := range groups {
				var ms []msg
				for _, tag := range rng.Perm(n) {
					size := rng.IntN(capSize + 1)
					switch g % 5 {
					case 0:
						size = 0
					case 1:
						size = capSize
					}
					m := msg{tag: int32(tag + 10), size: size, data: make([]byte, size)}
					for i := range m.data {
						m.data[i] = pattern(g*n+tag, i)
					}
					ms = append(ms, m)
				}
				sends = append(sends, ms)
			}
			// Post every receive first (more than 32 in flight), then send.
			recvBufs := make([][][]byte, groups)
			var rreqs []backend.Request
			for g := range groups {
				bufs := make([][]byte, n)
				tags := make([]int32, n)
				for s := range n {
					bufs[s], tags[s] = make([]byte, capSize), int32(s+10)
				}
				recvBufs[g] = bufs
				r, err := rc.Irecv(bufs, tags)
				noErr(t, err)
				if r == nil {
					t.Fatalf("group %d: no receive slot", g)
				}
				rreqs = append(rreqs, r)
			}
			var sreqs []backend.Request
			for _, ms := range sends {
				for _, m := range ms {
					r, err := sc.Isend(m.data, m.tag)
					noErr(t, err)
					if r == nil {
						t.Fatal("no send slot")
					}
					sreqs = append(sreqs, r)
				}
			}
			for i, r := range sreqs {
				pollUntil(t, "send", func() bool {
					var sz [1]int
					done, err := r.Test(sz[:])
					noErr(t, err)
					if done && sz[0] != len(sends[i/n][i%n].data) {
						t.Fatalf("send %d reports %d bytes", i, sz[0])
					}
					return done
				})
			}
			for g, r := range rreqs {
				var sizes [backend.MaxRecvs]int
				pollUntil(t, "recv", func() bool {
					done, err := r.Test(sizes[:])
					noErr(t, err)
					return done
				})
				for _, m := range sends[g] {
					slot := int(m.tag - 10)
					if sizes[slot] != m.size {
						t.Fatalf("group %d tag %d: size %d, want %d", g, m.tag, sizes[slot], m.size)
					}
					got := recvBufs[g][slot][:m.size]
					for i := range got {
						if got[i] != m.data[i] {
							t.Fatalf("group %d tag %d byte %d: %d want %d", g, m.tag, i, got[i], m.data[i])
						}
					}
				}
			}
		})
	}
}

func TestTruncatedMessageIsInvalidUsage(t *testing.T) {
	sc, rc := pair(t, 2)
	r, err := rc.Irecv([][]byte{make([]byte, 10)}, []int32{0})
	noErr(t, err)
	_, err = sc.Isend(make([]byte, 11), 0)
	noErr(t, err)
	pollUntil(t, "truncation error", func() bool {
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
	pollUntil(t, "send", func() bool { d, err := s.Test(nil); noErr(t, err); return d })
	noErr(t, sc.Close())
	pollUntil(t, "starved receive", func() bool {
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
				data[i] = pattern(m, i)
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
			pollUntil(t, "recv", func() bool { d, err := r.Test(sz[:]); noErr(t, err); return d })
			eq(t, inlineMax-m%3, sz[0])
			for i := range sz[0] {
				if buf[i] != pattern(m, i) {
					t.Fatalf("socks %d message %d byte %d: %d want %d", socks, m, i, buf[i], pattern(m, i))
				}
			}
		}
		for _, r := range sreqs {
			pollUntil(t, "send", func() bool { d, err := r.Test(nil); noErr(t, err); return d })
		}
	}
}
