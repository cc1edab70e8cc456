package udp

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParkedLoopReadsOtherSockets checks that while goroutines drive the
// datapath and the loop parks with its sockets muted, a datagram on a
// socket they do not read (not a plane's listening socket) is still read,
// with kicks ending the loop's parks all the while. A loop that never
// unmuted while parked fails it. It cannot tell reading within parkLimit
// of muting (what the loop does) from reading at the first park that
// happens to outlast parkLimit between two kicks: the scheduler leaves
// such a gap now and then, within a second here.
func TestParkedLoopReadsOtherSockets(t *testing.T) {
	e, err := Listen(Config{Addrs: lo, Seed: 1})
	require.NoError(t, err)
	defer e.Close()
	require.Greater(t, len(e.socks), 1, "needs a socket besides the listening one")
	other := e.socks[1].LocalAddr()

	// A spinner as far as the loop can tell, and kicks without pause, so
	// that no park lasts until its timer.
	e.spinners.Add(1)
	stop := make(chan struct{})
	kicked := make(chan struct{})
	go func() {
		defer close(kicked)
		for {
			select {
			case <-stop:
				return
			default:
				e.unpark()
				runtime.Gosched()
			}
		}
	}()
	defer func() {
		close(stop)
		<-kicked
		if e.spinners.Add(-1) == 0 {
			e.unpark()
		}
	}()

	// Make the loop go round, see the spinner and park muted.
	require.NoError(t, e.poller.Wake())
	require.Eventually(t, e.poller.Muted, testTimeout, 10*time.Microsecond, "the loop never parked muted")

	before := e.counters.rxDatagrams.Load()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(other))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("stray"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.counters.rxDatagrams.Load() > before },
		testTimeout, time.Millisecond, "the loop never read the datagram on %v", other)
}
