package udp

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/wire"
)

// TestRefusalLeavesInItsTurn: the turn that reads a HELLO the endpoint
// refuses sends the refusal's CLOSE. Without a secret the refusal closes
// the connection in the core at once, while the turn drains the events of
// its reads, with a time taken then; the turn's transmit pass polled the
// core with the time taken before the drain, earlier than that, found the
// CLOSE not yet due and left it for another turn (a wake-up of the loop
// when a caller's turn did the read). The test holds the acceptor's drive
// lock until the HELLO waits in its socket, then runs one turn itself.
func TestRefusalLeavesInItsTurn(t *testing.T) {
	a, b := refusingPair(t, nil)
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

	b.drive.Lock()
	locked := true
	defer func() {
		if locked {
			b.drive.Unlock()
		}
	}()
	closes := 0
	b.txTap = func(_ transport.Time, data []byte, _, _ int) {
		if wire.PeekOpcode(data) == wire.OpClose {
			closes++
		}
	}
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
	tag := b.listening[0]
	fds := []unix.PollFd{{Fd: int32(b.socks[tag].Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 10_000)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the HELLO did not arrive")
	b.turn(b.listening)
	sent := closes
	b.drive.Unlock()
	locked = false
	require.Equal(t, 1, sent, "CLOSEs sent by the turn that refused the HELLO")
	r := <-res
	requireRefused(t, r.c, r.err, b, "no secret")
}
