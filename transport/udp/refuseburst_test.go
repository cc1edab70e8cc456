package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

var burstSecret = []byte("0123456789abcdef0123456789abcdef")

// refusingPair listens with two planes (b), which refuses every dial of an
// endpoint with one (a), and with one plane (a).
func refusingPair(t *testing.T, sec []byte) (a, b *Endpoint) {
	t.Helper()
	b, err := Listen(Config{Addrs: []netipAddr{mustAddr("127.0.0.1"), mustAddr("127.0.0.2")}, Secret: sec, Seed: 2})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	a, err = Listen(Config{Addrs: lo, Secret: sec, Seed: 1, Core: transport.Config{HandshakeTimeout: 60 * transport.Second}})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a, b
}

// requireRefused checks that a dial of b failed as refused, naming b.
func requireRefused(t *testing.T, c *Conn, err error, b *Endpoint, what string) {
	t.Helper()
	require.Error(t, err, "%s: a refused dial reported success", what)
	require.Nil(t, c)
	require.ErrorIs(t, err, ErrRefused, what)
	require.ErrorContains(t, err, b.Addrs()[0].String(), "%s: the error names the peer", what)
}

// junkSender sends datagrams of zeros, which no endpoint takes for a packet
// of the protocol (nor, with a secret, authenticates), of sizes that grow
// but at every 64th, so that a receiver coalesces none of them with the one
// before into a GRO batch.
type junkSender struct {
	c   *net.UDPConn
	dst netip.AddrPort
	buf [64]byte
	n   int
}

func newJunkSender(t *testing.T, dst netip.AddrPort) *junkSender {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(mustAP("127.0.0.1:0")))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &junkSender{c: c, dst: dst}
}

func (j *junkSender) send(n int) error {
	for range n {
		j.n++
		if _, err := j.c.WriteToUDPAddrPort(j.buf[:1+j.n%len(j.buf)], j.dst); err != nil {
			return err
		}
	}
	return nil
}

// TestRefusedDialReadAmidBurst: a HELLO read in a full round of a socket,
// ahead of more datagrams, is accepted by the core before the read goes
// on, and a transmit pass between the rounds used to send its HELLO_ACK
// before the connection's EvAccepted was handled, that is before the
// refusal, so that the CLOSE came after it and the refused Dial succeeded
// (a connection that closed at once). The acceptor's turn is held here
// until the HELLO and a burst behind it wait in its socket, so that every
// dial meets that case.
func TestRefusedDialReadAmidBurst(t *testing.T) {
	for _, sec := range [][]byte{nil, burstSecret} {
		what := map[bool]string{false: "no secret", true: "secret"}[sec != nil]
		t.Run(strings.ReplaceAll(what, " ", "_"), func(t *testing.T) {
			a, b := refusingPair(t, sec)
			hello := make(chan struct{}, 1)
			a.drive.Lock()
			a.txTap = func(_ transport.Time, data []byte, _, _ int) {
				if wire.PeekOpcode(data) == wire.OpHello {
					select {
					case hello <- struct{}{}:
					default:
					}
				}
			}
			a.drive.Unlock()
			junk := newJunkSender(t, b.Addrs()[0])
			for range 8 {
				b.drive.Lock()
				type result struct {
					c   *Conn
					err error
				}
				res := make(chan result, 1)
				go func() {
					c, err := a.Dial(testCtx(t), b.Addrs()[:1])
					res <- result{c, err}
				}()
				<-hello
				// At least two full rounds of a read, whatever their
				// size, follow the HELLO.
				err := junk.send(3 * rxBatch)
				b.drive.Unlock()
				require.NoError(t, err)
				r := <-res
				requireRefused(t, r.c, r.err, b, what)
				select {
				case <-hello: // a retransmitted HELLO
				default:
				}
			}
			require.Zero(t, b.Stats().TxDrops, "%s: the acceptor could not seal its refusal", what)
		})
	}
}

// TestRefusedDialUnderJunkFlood: while junk datagrams flood the refusing
// acceptor, so that its reads run several rounds with transmit passes in
// between, every refused Dial fails with ErrRefused naming the peer. A
// HELLO_ACK that left in such a pass ahead of the refusal used to let
// about half of them succeed.
func TestRefusedDialUnderJunkFlood(t *testing.T) {
	const dials = 100
	for _, sec := range [][]byte{nil, burstSecret} {
		what := map[bool]string{false: "no secret", true: "secret"}[sec != nil]
		t.Run(strings.ReplaceAll(what, " ", "_"), func(t *testing.T) {
			a, b := refusingPair(t, sec)
			junk := newJunkSender(t, b.Addrs()[0])
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if junk.send(16) != nil {
						return
					}
				}
			}()
			bad, first := 0, "" // dials that did not fail as refused
			for range dials {
				c, err := a.Dial(testCtx(t), b.Addrs()[:1])
				if err == nil {
					c.Close()
				}
				if c != nil || !isRefusedBy(err, b) {
					if bad++; bad == 1 {
						first = fmt.Sprint(err)
					}
				}
			}
			cancel()
			wg.Wait()
			require.Zero(t, bad, "%s: %d of %d refused dials did not fail with ErrRefused naming the peer; the first: %s", what, bad, dials, first)
			c, err := a.Dial(testCtx(t), b.Addrs()[:1])
			requireRefused(t, c, err, b, what)
		})
	}
}

func isRefusedBy(err error, b *Endpoint) bool {
	return errors.Is(err, ErrRefused) && strings.Contains(err.Error(), b.Addrs()[0].String())
}

// TestRefusalNotPutOffByFullBudget: a refusal waits for its connection's
// HELLO_ACK to leave the core only while the transmit budget of a turn
// runs out, and not for ever. One whose HELLO_ACK the core does not owe
// (here one that left long ago) used to wait as long as the budget stayed
// full; now the connection closes within refuseWaitTurns turns of a full
// budget.
func TestRefusalNotPutOffByFullBudget(t *testing.T) {
	const senders = 40
	p := newPair(t, Config{Addrs: lo, MaxDatagram: 1200})
	conns := []*pair{p}
	for range senders - 1 {
		conns = append(conns, join(t, p.ea, p.eb))
	}
	victim := join(t, p.ea, p.eb)
	e := p.eb
	// Each sender's message fills its initial window: the core has
	// several budgets of DATA due at once.
	for i, c := range conns {
		_, err := c.a.Recv(1, [][]byte{make([]byte, 8<<20)}, []uint32{0})
		require.NoError(t, err, "sender %d", i)
	}
	e.drive.Lock()
	defer e.drive.Unlock()
	for i, c := range conns {
		// The drive lock is held: the sends wait in the queue.
		_, err := c.b.Send(1, make([]byte, 8<<20), 0)
		require.NoError(t, err, "sender %d", i)
	}
	e.runCommands(e.now())
	e.laterRefuse = append(e.laterRefuse, victim.b.id)
	turns := 0
	for len(e.laterRefuse) > 0 {
		turns++
		_, more := e.turnOut(e.now(), true)
		require.True(t, more || len(e.laterRefuse) == 0, "turn %d: the budget did not run out", turns)
		require.LessOrEqual(t, turns, refuseWaitTurns+1, "the refusal is still put off")
	}
	st, ok := e.core.Stats(victim.b.id)
	require.True(t, !ok || st.State == "closing", "the refused connection is %q", st.State)
}
