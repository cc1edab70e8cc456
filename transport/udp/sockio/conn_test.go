package sockio

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRoundTripSizes(t *testing.T) {
	sizes := []int{0, 1, 64, 1200, 1472, 4000, 8972, 9000, 32768, 65000}
	for _, fam := range []struct {
		name  string
		local netip.AddrPort
	}{{"ipv4", lo4}, {"ipv6", lo6}} {
		t.Run(fam.name, func(t *testing.T) {
			rx := openT(t, Config{Local: fam.local})
			tx := openT(t, Config{Local: fam.local})
			msgs := make([]Msg, len(sizes))
			for i, s := range sizes {
				msgs[i] = Msg{Buf: pattern(make([]byte, s), i), N: s, Addr: rx.LocalAddr()}
			}
			n, err := tx.WriteBatch(msgs)
			require.NoError(t, err)
			require.Equal(t, len(sizes), n)
			i := 0
			got := collect(t, rx, len(sizes), 5*time.Second, func(m *Msg, seg []byte) {
				require.Equal(t, sizes[i], len(seg), "datagram %d", i)
				require.True(t, bytes.Equal(msgs[i].Buf[:sizes[i]], seg), "datagram %d differs", i)
				require.Equal(t, tx.LocalAddr(), m.Addr)
				require.Equal(t, ECT0, m.ECN)
				require.False(t, m.Trunc)
				i++
			})
			require.Equal(t, len(sizes), got)
		})
	}
}

func TestECNCodepoints(t *testing.T) {
	for _, fam := range []netip.AddrPort{lo4, lo6} {
		for _, tc := range []struct {
			cfg  Config
			want uint8
		}{
			{Config{}, ECT0},
			{Config{ECN: CE}, CE},
			{Config{ECN: ECT1}, ECT1},
			{Config{DisableECN: true}, NotECT},
		} {
			t.Run(fmt.Sprintf("%v/%d", fam.Addr(), tc.want), func(t *testing.T) {
				rx := openT(t, Config{Local: fam})
				tc.cfg.Local = fam
				tx := openT(t, tc.cfg)
				_, err := tx.WriteBatch([]Msg{{Buf: []byte("x"), N: 1, Addr: rx.LocalAddr()}})
				require.NoError(t, err)
				got := collect(t, rx, 1, 5*time.Second, func(m *Msg, _ []byte) {
					require.Equal(t, tc.want, m.ECN)
				})
				require.Equal(t, 1, got)
			})
		}
	}
}

// TestSegmentedPaths sends GSO-style messages through every combination of
// sender offload and receiver coalescing and checks the segment stream
// byte for byte.
func TestSegmentedPaths(t *testing.T) {
	for _, fam := range []netip.AddrPort{lo4, lo6} {
		for _, seg := range []int{1200, 1500, 9000} {
			for _, off := range []struct{ gso, gro bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
				name := fmt.Sprintf("%v/seg%d/gso=%v/gro=%v", fam.Addr(), seg, off.gso, off.gro)
				t.Run(name, func(t *testing.T) {
					rx := openT(t, Config{Local: fam, DisableGRO: !off.gro})
					tx := openT(t, Config{Local: fam, DisableGSO: !off.gso})
					if off.gso && !tx.GSO() || off.gro && !rx.GRO() {
						t.Skip("kernel offers no UDP GSO/GRO here")
					}
					require.Equal(t, off.gso, tx.GSO())
					require.Equal(t, off.gro, rx.GRO())
					const rounds = 4
					per := min(maxGSOBytes/seg, MaxSegments)
					var want [][]byte
					msgs := make([]Msg, rounds)
					for r := range msgs {
						n := per*seg - seg/3 // short last segment
						b := make([]byte, n)
						for k := 0; k*seg < n; k++ {
							s := b[k*seg : min((k+1)*seg, n)]
							pattern(s, r*100+k)
							want = append(want, s)
						}
						msgs[r] = Msg{Buf: b, N: n, Seg: seg, Addr: rx.LocalAddr()}
					}
					n, err := tx.WriteBatch(msgs)
					require.NoError(t, err)
					require.Equal(t, rounds, n)
					i, coalesced := 0, 0
					got := collect(t, rx, len(want), 5*time.Second, func(m *Msg, s []byte) {
						if m.Seg > 0 {
							coalesced++
						}
						require.Less(t, i, len(want))
						require.True(t, bytes.Equal(want[i], s), "segment %d differs (len %d vs %d)", i, len(s), len(want[i]))
						require.Equal(t, ECT0, m.ECN)
						i++
					})
					require.Equal(t, len(want), got)
					if !off.gro {
						require.Zero(t, coalesced, "coalesced segments without GRO")
					}
					t.Logf("%d segments, %d arrived coalesced", got, coalesced)
				})
			}
		}
	}
}

func TestWriteBatchErrors(t *testing.T) {
	rx := openT(t, Config{Local: lo4})
	tx := openT(t, Config{Local: lo4})
	_, err := tx.WriteBatch([]Msg{{Buf: make([]byte, 4), N: 5, Addr: rx.LocalAddr()}})
	require.ErrorIs(t, err, ErrShortBuffer)
	big := make([]byte, 65*100)
	_, err = tx.WriteBatch([]Msg{{Buf: big, N: len(big), Seg: 100, Addr: rx.LocalAddr()}})
	require.ErrorIs(t, err, ErrTooManySegments)
	huge := make([]byte, 70000)
	_, err = tx.WriteBatch([]Msg{{Buf: huge, N: len(huge), Addr: rx.LocalAddr()}})
	require.Error(t, err, "oversized datagram must fail")
	require.NoError(t, tx.Close())
	_, err = tx.WriteBatch(nil)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, tx.Close(), ErrClosed)
}

func TestReadBatchErrors(t *testing.T) {
	rx := openT(t, Config{Local: lo4})
	n, err := rx.ReadBatch(newBufs(2, MaxDatagram))
	require.ErrorIs(t, err, ErrWouldBlock)
	require.Zero(t, n)
	_, err = rx.ReadBatch([]Msg{{}})
	require.ErrorIs(t, err, ErrShortBuffer)
	if rx.GRO() {
		_, err = rx.ReadBatch(newBufs(1, 1500))
		require.ErrorIs(t, err, ErrShortBuffer)
	}
}

func TestTruncatedDatagram(t *testing.T) {
	rx := openT(t, Config{Local: lo4, DisableGRO: true})
	tx := openT(t, Config{Local: lo4})
	_, err := tx.WriteBatch([]Msg{{Buf: make([]byte, 3000), N: 3000, Addr: rx.LocalAddr()}})
	require.NoError(t, err)
	p, err := NewPoller()
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Add(rx.Fd(), 0))
	_, _, err = p.Wait(5*time.Second, make([]int32, 1))
	require.NoError(t, err)
	msgs := newBufs(1, 1000)
	n, err := rx.ReadBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, msgs[0].Trunc)
	require.Equal(t, 1000, msgs[0].N)
}

func TestBufferSizes(t *testing.T) {
	c := openT(t, Config{Local: lo4, RcvBuf: 1 << 20, SndBuf: 1 << 20})
	// The kernel reports twice what it accepted, and accepts at least the
	// capped request.
	require.GreaterOrEqual(t, c.RcvBuf(), 1<<20)
	require.GreaterOrEqual(t, c.SndBuf(), 1<<20)
	t.Logf("rcvbuf %d sndbuf %d gso %v gro %v", c.RcvBuf(), c.SndBuf(), c.GSO(), c.GRO())
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(Config{})
	require.Error(t, err)
	a := openT(t, Config{Local: lo4})
	_, err = Open(Config{Local: a.LocalAddr()})
	require.Error(t, err, "binding a busy port must fail")
}

func TestPool(t *testing.T) {
	p, err := OpenPool(Config{Local: lo4}, 4)
	require.NoError(t, err)
	defer p.Close()
	seen := map[uint16]bool{}
	for _, c := range p.Conns() {
		seen[c.LocalAddr().Port()] = true
	}
	require.Len(t, seen, 4)

	base := p.Conns()[0].LocalAddr().Port()
	_, err = OpenPool(Config{Local: netip.AddrPortFrom(lo4.Addr(), base)}, 2)
	require.Error(t, err, "a busy port in the range fails the pool")
	_, err = OpenPool(Config{Local: lo4}, 0)
	require.Error(t, err)
	_, err = OpenPool(Config{Local: netip.AddrPortFrom(lo4.Addr(), 65535)}, 2)
	require.Error(t, err)
}

func TestPollerWakeAndTimeout(t *testing.T) {
	p, err := NewPoller()
	require.NoError(t, err)
	defer p.Close()
	ready := make([]int32, 4)
	n, woken, err := p.Wait(0, ready)
	require.NoError(t, err)
	require.Zero(t, n)
	require.False(t, woken)

	done := make(chan bool)
	go func() {
		_, w, err := p.Wait(10*time.Second, ready)
		done <- err == nil && w
	}()
	require.NoError(t, p.Wake())
	select {
	case ok := <-done:
		require.True(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("Wake did not end Wait")
	}
	// The wake was consumed.
	_, woken, err = p.Wait(0, ready)
	require.NoError(t, err)
	require.False(t, woken)
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Wake(), ErrClosed)
	_, _, err = p.Wait(0, ready)
	require.ErrorIs(t, err, ErrClosed)
}

// TestPollerParkedWait covers a Wait that parks: its deadline passes with
// nothing ready, an arriving datagram ends it, and Close ends one waiting
// without deadline with ErrClosed.
func TestPollerParkedWait(t *testing.T) {
	rx, tx := openT(t, Config{Local: lo4}), openT(t, Config{Local: lo4})
	p, err := NewPoller()
	require.NoError(t, err)
	require.NoError(t, p.Add(rx.Fd(), 3))
	ready := make([]int32, 4)
	n, woken, err := p.Wait(time.Millisecond, ready)
	require.NoError(t, err)
	require.Zero(t, n)
	require.False(t, woken)

	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	go func() {
		n, _, err := p.Wait(-1, ready)
		got <- result{n, err}
	}()
	_, err = tx.WriteBatch([]Msg{{Buf: []byte("x"), N: 1, Addr: rx.LocalAddr()}})
	require.NoError(t, err)
	select {
	case r := <-got:
		require.NoError(t, r.err)
		require.Equal(t, []int32{3}, ready[:r.n])
	case <-time.After(10 * time.Second):
		t.Fatal("a readable socket did not end Wait")
	}
	require.NoError(t, p.Remove(rx.Fd()))

	go func() {
		_, _, err := p.Wait(-1, ready)
		got <- result{0, err}
	}()
	require.NoError(t, p.Close())
	select {
	case r := <-got:
		require.ErrorIs(t, r.err, ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a parked Wait")
	}
}

func TestPollerTags(t *testing.T) {
	conns := []*Conn{openT(t, Config{Local: lo4}), openT(t, Config{Local: lo4}), openT(t, Config{Local: lo4})}
	tx := openT(t, Config{Local: lo4})
	p, err := NewPoller()
	require.NoError(t, err)
	defer p.Close()
	for i, c := range conns {
		require.NoError(t, p.Add(c.Fd(), int32(i+10)))
	}
	require.Error(t, p.Add(tx.Fd(), -2))
	_, err = tx.WriteBatch([]Msg{{Buf: []byte("a"), N: 1, Addr: conns[2].LocalAddr()}})
	require.NoError(t, err)
	ready := make([]int32, 4)
	n, _, err := p.Wait(5*time.Second, ready)
	require.NoError(t, err)
	require.Equal(t, []int32{12}, ready[:n])
	require.NoError(t, p.Remove(conns[2].Fd()))
	n, _, err = p.Wait(0, ready)
	require.NoError(t, err)
	require.Zero(t, n, "removed socket reported")
}

// TestZeroAllocs checks the allocation budget of the steady-state datapath:
// no allocation per WriteBatch or ReadBatch, in either family.
func TestZeroAllocs(t *testing.T) {
	for _, fam := range []netip.AddrPort{lo4, lo6} {
		rx := openT(t, Config{Local: fam})
		tx := openT(t, Config{Local: fam})
		out := make([]Msg, 8)
		for i := range out {
			out[i] = Msg{Buf: make([]byte, 1200), N: 1200, Addr: rx.LocalAddr()}
		}
		seg := []Msg{{Buf: make([]byte, 9000*4), N: 9000 * 4, Seg: 9000, Addr: rx.LocalAddr()},
			{Buf: make([]byte, 64), N: 64, Tail: make([]byte, 8000), Addr: rx.LocalAddr()}}
		in := newBufs(16, MaxDatagram)
		drain := func() {
			for {
				if _, err := rx.ReadBatch(in); err != nil {
					if !errors.Is(err, ErrWouldBlock) {
						t.Fatal(err)
					}
					return
				}
			}
		}
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := tx.WriteBatch(out); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.WriteBatch(seg); err != nil {
				t.Fatal(err)
			}
			drain()
		})
		require.Zero(t, allocs, "%v", fam)
	}
}

func BenchmarkLoopbackBatch(b *testing.B) {
	for _, seg := range []int{0, 1500, 9000} {
		b.Run(fmt.Sprintf("seg%d", seg), func(b *testing.B) {
			rx := openT(b, Config{Local: lo4})
			tx := openT(b, Config{Local: lo4})
			n := 1200
			if seg > 0 {
				n = seg * min(maxGSOBytes/seg, 40)
			}
			out := []Msg{{Buf: make([]byte, n), N: n, Seg: seg, Addr: rx.LocalAddr()}}
			in := newBufs(16, MaxDatagram)
			var bytesIn int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := tx.WriteBatch(out); err != nil && !errors.Is(err, ErrWouldBlock) {
					b.Fatal(err)
				}
				for {
					k, err := rx.ReadBatch(in)
					if err != nil {
						break
					}
					for j := range in[:k] {
						bytesIn += int64(in[j].N)
					}
				}
			}
			b.ReportMetric(float64(bytesIn)*8/b.Elapsed().Seconds()/1e9, "Gb/s")
		})
	}
}

// TestTailGathered checks that a Tail leaves in the same datagram right
// after Buf[:N], next to messages without one, and that a Tail with Seg is
// refused.
func TestTailGathered(t *testing.T) {
	rx := openT(t, Config{Local: lo4, DisableGRO: true})
	tx := openT(t, Config{Local: lo4})
	hdr := []byte("header-and-junk")
	tail := bytes.Repeat([]byte("payload."), 500)
	out := []Msg{
		{Buf: hdr, N: 6, Tail: tail, Addr: rx.LocalAddr()},
		{Buf: []byte("plain"), N: 5, Addr: rx.LocalAddr()},
		{Buf: hdr, N: 0, Tail: tail[:3], Addr: rx.LocalAddr()},
	}
	n, err := tx.WriteBatch(out)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	want := [][]byte{append([]byte("header"), tail...), []byte("plain"), tail[:3]}
	in := newBufs(4, MaxDatagram)
	var got [][]byte
	p, err := NewPoller()
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Add(rx.Fd(), 0))
	for len(got) < len(want) {
		_, _, err := p.Wait(5*time.Second, make([]int32, 1))
		require.NoError(t, err)
		k, err := rx.ReadBatch(in)
		if errors.Is(err, ErrWouldBlock) {
			continue
		}
		require.NoError(t, err)
		for i := range in[:k] {
			got = append(got, append([]byte(nil), in[i].Buf[:in[i].N]...))
		}
	}
	require.Equal(t, want, got)

	_, err = tx.WriteBatch([]Msg{{Buf: make([]byte, 3000), N: 3000, Seg: 1000, Tail: tail, Addr: rx.LocalAddr()}})
	require.ErrorIs(t, err, ErrTooManySegments)
}

// TestPollerAfterClose: once Close has run, every call reports ErrClosed
// rather than reaching the released descriptors (whose numbers the
// process may already have given to other files), also when the calls
// race with Close.
func TestPollerAfterClose(t *testing.T) {
	c := openT(t, Config{Local: lo4})
	p, err := NewPoller()
	require.NoError(t, err)
	require.NoError(t, p.Add(c.Fd(), 1))
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Add(c.Fd(), 2), ErrClosed)
	require.ErrorIs(t, p.Remove(c.Fd()), ErrClosed)
	require.ErrorIs(t, p.Wake(), ErrClosed)
	_, _, err = p.Wait(0, make([]int32, 4))
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, p.Close(), ErrClosed)

	for round := 0; round < 50; round++ {
		p, err := NewPoller()
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					errs <- p.Wake()
					if i%10 == 0 {
						if err := p.Add(c.Fd(), 3); err == nil || errors.Is(err, ErrClosed) {
							errs <- p.Remove(c.Fd())
						}
					}
				}
			}()
		}
		go func() {
			wg.Wait()
			close(errs)
		}()
		go p.Close()
		for err := range errs {
			if err != nil {
				require.ErrorIs(t, err, ErrClosed, "round %d", round)
			}
		}
	}
}

// TestPollerMute checks that a muted socket is not reported however much
// arrives, that unmuting reports what arrived meanwhile, that a socket
// added while muted starts muted, that one removed while muted stays out,
// and that Wake works throughout.
func TestPollerMute(t *testing.T) {
	rx := openT(t, Config{Local: lo4})
	late := openT(t, Config{Local: lo4})
	tx := openT(t, Config{Local: lo4})
	p, err := NewPoller()
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Add(rx.Fd(), 7))
	ready := make([]int32, 4)

	require.NoError(t, p.Mute(true))
	require.NoError(t, p.Mute(true), "muting twice is no error")
	require.NoError(t, p.Add(late.Fd(), 9))
	for _, to := range []netip.AddrPort{rx.LocalAddr(), late.LocalAddr()} {
		_, err = tx.WriteBatch([]Msg{{Buf: []byte("x"), N: 1, Addr: to}})
		require.NoError(t, err)
	}
	// Both datagrams are queued by the time WriteBatch returns over
	// loopback; a muted poller reports neither, and a parked Wait ends
	// at its deadline rather than at their arrival.
	n, woken, err := p.Wait(20*time.Millisecond, ready)
	require.NoError(t, err)
	require.Zero(t, n, "muted sockets reported: %v", ready[:n])
	require.False(t, woken)
	require.NoError(t, p.Wake())
	n, woken, err = p.Wait(0, ready)
	require.NoError(t, err)
	require.Zero(t, n)
	require.True(t, woken, "Wake must work while muted")

	require.NoError(t, p.Mute(false))
	n, _, err = p.Wait(5*time.Second, ready)
	require.NoError(t, err)
	got := slices.Clone(ready[:n])
	slices.Sort(got)
	require.Equal(t, []int32{7, 9}, got, "unmuted, both sockets hold a datagram")

	require.NoError(t, p.Remove(late.Fd()))
	require.NoError(t, p.Mute(true))
	require.NoError(t, p.Mute(false), "a removed descriptor is not re-armed")

	// rx still holds its datagram: removed while muted, it must not come
	// back when the poller is unmuted.
	require.NoError(t, p.Mute(true))
	require.NoError(t, p.Remove(rx.Fd()))
	require.NoError(t, p.Mute(false))
	n, _, err = p.Wait(0, ready)
	require.NoError(t, err)
	require.Zero(t, n, "a descriptor removed while muted was reported: %v", ready[:n])
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Mute(true), ErrClosed)
}

// TestPollerMuteRetries checks that a descriptor an epoll_ctl failure left
// muted is retried by every later Mute, each failure naming it, until it
// is removed; and that a Mute that changes nothing allocates nothing (the
// event loop calls it on every turn).
func TestPollerMuteRetries(t *testing.T) {
	c := openT(t, Config{Local: lo4})
	p, err := NewPoller()
	require.NoError(t, err)
	defer p.Close()
	fd, err := unix.Dup(c.Fd())
	require.NoError(t, err)
	require.NoError(t, p.Add(fd, 3))
	require.NoError(t, p.Mute(true))
	// Closed behind the poller's back while muted: adding it back fails.
	require.NoError(t, unix.Close(fd))
	err = p.Mute(false)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), fmt.Sprintf("fd %d", fd)), "the error names the descriptor: %v", err)
	require.Error(t, p.Mute(false), "the failed descriptor is retried")
	require.NoError(t, p.Remove(fd))
	require.NoError(t, p.Mute(false), "nothing left to retry")
	require.NoError(t, p.Add(c.Fd(), 4))
	require.NoError(t, p.Mute(false))
	if n := testing.AllocsPerRun(100, func() { p.Mute(false) }); n != 0 {
		t.Fatalf("a Mute that changes nothing allocates %v times", n)
	}
}

// TestPollerMuteLeavesAlways checks that Mute silences what Add registered
// and leaves what AddAlways registered reporting, and that removing the
// latter while muted counts no stray descriptor (the next Mute succeeds
// and changes nothing).
func TestPollerMuteLeavesAlways(t *testing.T) {
	quiet := openT(t, Config{Local: lo4})
	loud := openT(t, Config{Local: lo4})
	tx := openT(t, Config{Local: lo4})
	p, err := NewPoller()
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Add(quiet.Fd(), 1))
	require.NoError(t, p.AddAlways(loud.Fd(), 2))
	require.Error(t, p.AddAlways(loud.Fd(), -3), "negative tag")
	require.NoError(t, p.Mute(true))
	for _, to := range []netip.AddrPort{quiet.LocalAddr(), loud.LocalAddr()} {
		_, err = tx.WriteBatch([]Msg{{Buf: []byte("x"), N: 1, Addr: to}})
		require.NoError(t, err)
	}
	ready := make([]int32, 4)
	n, _, err := p.Wait(5*time.Second, ready)
	require.NoError(t, err)
	require.Equal(t, []int32{2}, ready[:n], "muted, only the AddAlways socket reports")
	require.NoError(t, p.Remove(loud.Fd()))
	require.NoError(t, p.Mute(true))
	require.NoError(t, p.Mute(false))
	n, _, err = p.Wait(5*time.Second, ready)
	require.NoError(t, err)
	require.Equal(t, []int32{1}, ready[:n], "unmuted, the Add socket reports what arrived meanwhile")
}
