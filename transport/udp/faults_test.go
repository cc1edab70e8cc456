package udp

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

func TestTransferWithLoss(t *testing.T) {
	for _, p := range []float64{0.01, 0.10} {
		t.Run(fmt.Sprintf("drop=%v", p), func(t *testing.T) {
			// Small datagrams, so that a few megabytes are thousands of them.
			pr := newPair(t, Config{DropProb: p, MaxDatagram: 4096 + 56})
			for i, n := range []int{1, 4096, 300000, 4 << 20} {
				transfer(t, pr.a, pr.b, 1, pattern(n, byte(i)))
			}
			st := pr.a.Stats()
			require.Positive(t, pr.ea.Stats().FaultDrops)
			require.Positive(t, st.Retransmits, "%+v", st)
			t.Logf("sent %d retransmits %d lost %d timeouts %d", st.PacketsSent, st.Retransmits, st.Lost, st.Timeouts)
		})
	}
}

// TestBlackholedEntropy drops everything sent from two source ports: the
// paths on them time out and move to other ports, and transfers go on.
func TestBlackholedEntropy(t *testing.T) {
	cfg := Config{PortsPerPlane: 8, Blackhole: []int{1, 2}}
	cfg.Core.PathsPerPlane = 4
	pr := newPair(t, cfg)
	for i := 0; i < 10; i++ {
		transfer(t, pr.a, pr.b, 1, pattern(1<<20, byte(i)))
		transfer(t, pr.b, pr.a, 1, pattern(1<<20, byte(i)))
	}
	for _, c := range []*Conn{pr.a, pr.b} {
		for _, ps := range c.PathStats() {
			if ps.Active {
				require.NotContains(t, []uint16{1, 2}, ps.Entropy, "%+v", ps)
			}
		}
	}
	st := pr.a.Stats()
	st2 := pr.b.Stats()
	t.Logf("path changes %d/%d", st.PathChanges, st2.PathChanges)
	require.Positive(t, st.PathChanges+st2.PathChanges)
}

// TestPeerClosedMidTransfer stops the receiving endpoint abruptly (its
// sockets vanish without a CLOSE reaching the sender) and checks that the
// sender's requests fail with an error naming the peer well within a
// generous deadline, and that the connection counts as gone by the time
// the first of them completes.
func TestPeerClosedMidTransfer(t *testing.T) {
	msg := pattern(64<<20, 1)
	cfg := Config{}
	// Short enough for a quick test, long enough that a loaded 2-core host
	// does not starve a healthy connection into a false alarm.
	cfg.Core.IdleTimeout = transport.Second
	pr := newPair(t, cfg)
	ctx := testCtx(t)
	// What a caller woken by each failure would find: the connection
	// already gone (notify runs as the request completes, before any
	// other event of the drain that fails it). notify runs after Done is
	// closed, so a Wait may return before it has: its findings come
	// through channels.
	goneAtSend, goneAtRecv := make(chan error, 1), make(chan error, 1)
	sr, err := pr.a.SendNotify(1, msg, 0, func() { goneAtSend <- pr.a.closedErr() })
	require.NoError(t, err)
	rr, err := pr.a.RecvNotify(2, [][]byte{make([]byte, 10)}, []uint32{0}, func() { goneAtRecv <- pr.a.closedErr() })
	require.NoError(t, err)
	// Make the peer unreachable: drop every datagram it would send, then
	// close it so that its CLOSE never arrives either.
	done := make(chan struct{})
	require.NoError(t, pr.eb.enqueue(command{kind: cmdFunc, fn: func() {
		pr.eb.cfg.DropProb = 1 // under the drive lock, which every reader holds
		close(done)
	}}))
	<-done
	require.NoError(t, pr.eb.Close())
	start := time.Now()
	serr := sr.Wait(ctx)
	rerr := rr.Wait(ctx)
	elapsed := time.Since(start)
	require.Less(t, elapsed, 10*time.Second)
	for _, err := range []error{serr, rerr} {
		require.ErrorIs(t, err, transport.ErrPeerDead)
		var pe *PeerError
		require.True(t, errors.As(err, &pe))
		require.Equal(t, pr.eb.Addrs(), pe.Peer)
		require.Contains(t, err.Error(), pr.eb.Addrs()[0].String())
	}
	// The connection was gone before either request completed, so a
	// caller that sends again right after the failure is refused at once.
	require.ErrorIs(t, <-goneAtSend, transport.ErrPeerDead)
	require.ErrorIs(t, <-goneAtRecv, transport.ErrPeerDead)
	// The connection is gone; new calls fail at once with the same error.
	_, err = pr.a.Send(1, msg[:10], 0)
	require.ErrorIs(t, err, transport.ErrPeerDead)
}

// TestAbortFlowOnEndingConnection: a connection counts as gone before the
// turn that ends it has failed all its requests, so AbortFlow and Close,
// called from the first failure's wake-up while that turn still runs,
// must wait for it: when they return, every request of the connection is
// done, as they promise. The first failure's notify holds the turn until
// the call returned and looked at the second request, or for at most
// holdTurn, which is what lets the calls that wait complete.
func TestAbortFlowOnEndingConnection(t *testing.T) {
	const holdTurn = 300 * time.Millisecond
	for _, call := range []string{"abort", "close"} {
		t.Run(call, func(t *testing.T) {
			cfg := Config{}
			cfg.Core.IdleTimeout = transport.Second
			pr := newPair(t, cfg)
			ctx := testCtx(t)
			var rr *Request
			looked := make(chan bool, 1)
			released := make(chan struct{})
			notify := func() {
				go func() {
					if call == "abort" {
						pr.a.AbortFlow(2)
					} else {
						_ = pr.a.Close()
					}
					done, _ := rr.Test()
					looked <- done
					close(released)
				}()
				select {
				case <-released:
				case <-time.After(holdTurn):
				}
			}
			sr, err := pr.a.SendNotify(1, pattern(64<<20, 1), 0, notify)
			require.NoError(t, err)
			rr, err = pr.a.Recv(2, [][]byte{make([]byte, 10)}, []uint32{0})
			require.NoError(t, err)
			dropAll := make(chan struct{})
			require.NoError(t, pr.eb.enqueue(command{kind: cmdFunc, fn: func() {
				pr.eb.cfg.DropProb = 1
				close(dropAll)
			}}))
			<-dropAll
			require.NoError(t, pr.eb.Close())
			require.ErrorIs(t, sr.Wait(ctx), transport.ErrPeerDead)
			require.True(t, <-looked, "%s returned while the connection's other request was still in flight", call)
			require.ErrorIs(t, rr.Wait(ctx), transport.ErrPeerDead)
		})
	}
}

// TestPeerCloseOrderly closes the connection on one side: the other side's
// outstanding receive fails with ErrClosed.
func TestPeerCloseOrderly(t *testing.T) {
	pr := newPair(t, Config{})
	ctx := testCtx(t)
	rr, err := pr.b.Recv(1, [][]byte{make([]byte, 10)}, []uint32{0})
	require.NoError(t, err)
	lr, err := pr.a.Recv(1, [][]byte{make([]byte, 10)}, []uint32{0})
	require.NoError(t, err)
	require.NoError(t, pr.a.Close())
	require.ErrorIs(t, lr.Wait(ctx), transport.ErrClosed)
	// The peer learns of the close from the CLOSE, or, when its own
	// retransmission reaches us after we forgot the connection, from the
	// unknown-connection NACK; either way its receive fails promptly.
	rerr := rr.Wait(ctx)
	if !errors.Is(rerr, transport.ErrClosed) {
		require.ErrorIs(t, rerr, transport.ErrPeerDead)
	}
	_, err = pr.a.Send(1, nil, 0)
	require.ErrorIs(t, err, transport.ErrClosed)
	require.NoError(t, pr.a.Close()) // idempotent
}

func TestDialErrors(t *testing.T) {
	e, err := Listen(Config{Seed: 5})
	require.NoError(t, err)
	defer e.Close()
	ctx := testCtx(t)
	_, err = e.Dial(ctx, nil)
	require.Error(t, err)
	_, err = e.Dial(ctx, e.Addrs()[:0])
	require.Error(t, err)
	_, err = e.Dial(ctx, []netipAddrPort{mustAP("[::1]:5")})
	require.ErrorContains(t, err, "family")
	_, err = e.Dial(ctx, []netipAddrPort{mustAP("127.0.0.1:0")})
	require.Error(t, err)
}

// TestHandshakeTimeout dials a port where nobody answers. The port is held
// by a plain socket that never reads for the whole test: a port merely
// closed could be taken at once by an endpoint of a test running in
// parallel, which would then answer the handshake.
func TestHandshakeTimeout(t *testing.T) {
	cfg := Config{Seed: 6}
	cfg.Core.HandshakeTimeout = 300 * transport.Millisecond
	e, err := Listen(cfg)
	require.NoError(t, err)
	defer e.Close()
	var addrs []netipAddrPort
	for _, a := range e.Addrs() {
		silent, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a.Addr(), 0)))
		require.NoError(t, err)
		defer silent.Close()
		addrs = append(addrs, silent.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	_, err = e.Dial(testCtx(t), addrs)
	require.ErrorIs(t, err, transport.ErrHandshakeTimeout)
	require.ErrorContains(t, err, addrs[0].String())
}

func TestListenErrors(t *testing.T) {
	tests := []Config{
		{Addrs: []netipAddr{mustAddr("0.0.0.0")}},
		{Port: 70000},
		{PortsPerPlane: 2000},
		{DropProb: 2},
		{DropProb: math.NaN()},
		{Blackhole: []int{16}},
		{MaxDatagram: 100},
		{PortsPerPlane: 2, Core: transport.Config{PathsPerPlane: 4}},
	}
	for i, cfg := range tests {
		_, err := Listen(cfg)
		require.Error(t, err, "case %d", i)
	}
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// TestCloseLeaksNothing opens endpoints, moves data, closes everything and
// checks that goroutines and file descriptors return to their counts.
func TestCloseLeaksNothing(t *testing.T) {
	runtime.GC()
	g0, fd0 := runtime.NumGoroutine(), countFDs(t)
	func() {
		pr := newPairNoCleanup(t, Config{})
		transfer(t, pr.a, pr.b, 1, pattern(1<<20, 1))
		// Leave a receive outstanding: Close must fail it.
		rr, err := pr.b.Recv(9, [][]byte{make([]byte, 1)}, []uint32{0})
		require.NoError(t, err)
		require.NoError(t, pr.ea.Close())
		require.NoError(t, pr.eb.Close())
		require.Error(t, rr.Wait(testCtx(t)))
		_, err = pr.a.Send(1, nil, 0)
		require.Error(t, err)
		_, err = pr.ea.Accept(testCtx(t))
		require.ErrorIs(t, err, ErrEndpointClosed)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > g0 && time.Now().Before(deadline) {
		runtime.Gosched() // goroutines of finished waits exit asynchronously
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), g0)
	require.Equal(t, fd0, countFDs(t))
}
