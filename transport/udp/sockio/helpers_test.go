package sockio

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

var (
	lo4 = netip.MustParseAddrPort("127.0.0.1:0")
	lo6 = netip.MustParseAddrPort("[::1]:0")
)

// openT opens a socket and closes it when the test ends.
func openT(t testing.TB, cfg Config) *Conn {
	t.Helper()
	c, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newBufs returns n receive messages of size bytes each.
func newBufs(n, size int) []Msg {
	msgs := make([]Msg, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, size)
	}
	return msgs
}

// pattern fills b with bytes that depend on seed and position.
func pattern(b []byte, seed int) []byte {
	for i := range b {
		b[i] = byte(seed*131 + i*7 + i>>8)
	}
	return b
}

// collect reads from c until want datagrams (after GRO splitting) arrived or
// the deadline passes; fn gets each received segment with its message.
func collect(t testing.TB, c BatchConn, want int, deadline time.Duration, fn func(m *Msg, seg []byte)) int {
	t.Helper()
	p, err := NewPoller()
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Add(c.Fd(), 0))
	size := 65536
	msgs := newBufs(16, size)
	ready := make([]int32, 4)
	got := 0
	end := time.Now().Add(deadline)
	for got < want {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		if _, _, err := p.Wait(left, ready); err != nil {
			t.Fatalf("wait: %v", err)
		}
		for {
			n, err := c.ReadBatch(msgs)
			if errors.Is(err, ErrWouldBlock) {
				break
			}
			require.NoError(t, err)
			for i := range msgs[:n] {
				m := &msgs[i]
				for k := 0; k < m.Segments(); k++ {
					fn(m, m.Segment(k))
					got++
				}
			}
		}
	}
	return got
}
