package sockio

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// sendNumbered sends datagrams numbered first..first+count-1 through c.
func sendNumbered(t *testing.T, c BatchConn, dst netip.AddrPort, first, count int) {
	t.Helper()
	msgs := make([]Msg, count)
	for k := range msgs {
		msgs[k] = Msg{Buf: binary.BigEndian.AppendUint32(nil, uint32(first+k)), N: 4, Addr: dst}
	}
	n, err := c.WriteBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, count, n)
}

// TestFaultsMatchReference drives a FaultConn and a dumb model with the same
// seed and checks that exactly the model's survivors arrive.
func TestFaultsMatchReference(t *testing.T) {
	const seed, total, batch, p = 42, 600, 20, 0.3
	rx := openT(t, Config{Local: lo4})
	f := NewFaults(seed)
	tx := f.Wrap(openT(t, Config{Local: lo4}))
	f.SetLoss(rx.LocalAddr(), 0, p)

	ref := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	want := map[uint32]bool{}
	for i := 0; i < total; i++ {
		if !(ref.Float64() < p) {
			want[uint32(i)] = true
		}
	}
	got := map[uint32]bool{}
	record := func(_ *Msg, s []byte) { got[binary.BigEndian.Uint32(s)] = true }
	for i := 0; i < total; i += batch {
		sendNumbered(t, tx, rx.LocalAddr(), i, batch)
		// Read what arrived of this batch so the receive buffer never fills.
		wantSoFar := 0
		for k := range want {
			if int(k) < i+batch {
				wantSoFar++
			}
		}
		collect(t, rx, wantSoFar-len(got), 5*time.Second, record)
	}
	require.Equal(t, want, got)
	require.Equal(t, uint64(total-len(want)), f.Dropped())
	frac := float64(total-len(want)) / total
	require.InDelta(t, p, frac, 0.08, "reference model itself is off")
}

func TestFaultsRuleSpecificity(t *testing.T) {
	rxA := openT(t, Config{Local: lo4})
	rxB := openT(t, Config{Local: lo4})
	f := NewFaults(1)
	tx := f.Wrap(openT(t, Config{Local: lo4}))
	f.SetLoss(netip.AddrPort{}, 0, 1)           // catch-all: drop everything
	f.SetLoss(rxB.LocalAddr(), 0, 0.0000000001) // B: practically nothing
	sendNumbered(t, tx, rxA.LocalAddr(), 0, 10)
	sendNumbered(t, tx, rxB.LocalAddr(), 0, 10)
	require.Equal(t, 10, collect(t, rxB, 10, 5*time.Second, func(*Msg, []byte) {}))
	require.Equal(t, uint64(10), f.Dropped())
	f.SetLoss(netip.AddrPort{}, 0, 0) // remove catch-all
	sendNumbered(t, tx, rxA.LocalAddr(), 0, 10)
	require.Equal(t, 10, collect(t, rxA, 10, 5*time.Second, func(*Msg, []byte) {}))
}

func TestFaultsBlackhole(t *testing.T) {
	rx := openT(t, Config{Local: lo4})
	f := NewFaults(7)
	good := f.Wrap(openT(t, Config{Local: lo4}))
	dead := f.Wrap(openT(t, Config{Local: lo4}))
	f.Blackhole(dead.LocalAddr().Port(), true)
	sendNumbered(t, dead, rx.LocalAddr(), 0, 10)
	sendNumbered(t, good, rx.LocalAddr(), 100, 10)
	seen := 0
	collect(t, rx, 10, 5*time.Second, func(m *Msg, s []byte) {
		require.Equal(t, good.LocalAddr(), m.Addr)
		seen++
	})
	require.Equal(t, 10, seen)
	require.Equal(t, uint64(10), f.Dropped())

	// Receiving on a black-holed port drops too.
	plain := openT(t, Config{Local: lo4})
	sendNumbered(t, plain, dead.LocalAddr(), 0, 5)
	sendNumbered(t, plain, good.LocalAddr(), 0, 5)
	require.Equal(t, 5, collect(t, good, 5, 5*time.Second, func(*Msg, []byte) {}))
	require.Equal(t, 0, collect(t, dead, 1, 100*time.Millisecond, func(*Msg, []byte) {}))

	f.Blackhole(dead.LocalAddr().Port(), false)
	sendNumbered(t, dead, rx.LocalAddr(), 0, 3)
	require.Equal(t, 3, collect(t, rx, 3, 5*time.Second, func(*Msg, []byte) {}))
}
