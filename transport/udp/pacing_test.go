package udp

import (
	"sync"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/cc"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// departure is one DATA send as the sending endpoint handed it to the
// kernel: a GSO send of several datagrams is one departure.
type departure struct {
	at    transport.Time
	bytes int
}

// dataLog collects the DATA departures of an endpoint through its txTap.
type dataLog struct {
	mu  sync.Mutex
	got []departure
}

// tap installs the log on e; it must run before any DATA flows.
func (l *dataLog) tap(e *Endpoint) {
	e.drive.Lock()
	e.txTap = func(at transport.Time, data []byte, segs, bytes int) {
		if len(data) < 2 || wire.Opcode(data[1]) != wire.OpData {
			return
		}
		l.mu.Lock()
		l.got = append(l.got, departure{at, bytes})
		l.mu.Unlock()
	}
	e.drive.Unlock()
}

func (l *dataLog) departures() []departure {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]departure(nil), l.got...)
}

// worstWindow returns the most wire bytes that left within any span of
// width w (departures are in time order), and the start of that span.
func worstWindow(as []departure, w transport.Time) (int, transport.Time) {
	best, bestAt, sum, lo := 0, transport.Time(0), 0, 0
	for hi := range as {
		sum += as[hi].bytes
		for as[hi].at-as[lo].at >= w {
			sum -= as[lo].bytes
			lo++
		}
		if sum > best {
			best, bestAt = sum, as[lo].at
		}
	}
	return best, bestAt
}

// TestWorstWindow checks the sliding-window count against a dumb
// reference that tries every departure as the start of a window.
func TestWorstWindow(t *testing.T) {
	as := []departure{{0, 5}, {1, 7}, {10, 3}, {11, 1}, {12, 9}, {30, 4}, {31, 4}, {32, 4}, {33, 4}}
	for _, w := range []transport.Time{1, 2, 3, 5, 11, 13, 40} {
		want := 0
		for i := range as {
			s := 0
			for j := i; j < len(as) && as[j].at-as[i].at < w; j++ {
				s += as[j].bytes
			}
			want = max(want, s)
		}
		got, _ := worstWindow(as, w)
		require.Equal(t, want, got, "window %d", w)
	}
}

// pacedRestartFixed says whether the core judges a stale rate hint when
// new data appears rather than when the pacer releases it. Until it does,
// a message queued while the pacer still holds the previous message's last
// gap finds the hint that arrived with its RECV_READY "stale" by the time
// the pacer lets it go, ignores it and sends a whole initial window
// unpaced: the second message of the hinted case below then fails in
// most runs, so it is checked only once the core is fixed.
const pacedRestartFixed = true

// TestPacingLimitsDepartures sends messages many packets long under a low
// rate (the receiver's rate hint, or the sender's configured line rate) and
// checks that no span of a transfer carried more than the rate allows plus
// the core's burst. Each send the kernel accepted (after batching into
// sendmmsg and GSO sends) is stamped with the time the core released its
// batch, so a batch holding packets that the pacer released later, or that
// collected packets over several turns, shows as a burst. Send times are
// not taken from the receiver, whose reads bunch paced packets whenever
// its loop is descheduled, nor from the clock at the send call, which a
// sender preempted between the core's decision and the system call
// bunches likewise. An unpaced sender releases a message within a
// millisecond, far above the bound. The second message is sent as soon as
// the first completes, while the pacer still holds the gap after the first
// one's last packet: the sender has idled, and the hint must still hold.
func TestPacingLimitsDepartures(t *testing.T) {
	const (
		dgram = 1472
		rate  = 256 << 10 // bytes per second, a 5.6 ms gap per datagram
		msg   = 32 << 10  // 23 datagrams, about 130 ms at rate
	)
	cases := []struct {
		name  string
		core  transport.Config
		burst int // bytes the core may release back to back
	}{
		{"receiver hint", transport.Config{InboundRate: rate}, dgram},
		{"configured rate", transport.Config{CC: cc.Config{LineRate: rate, PacingBurst: 2 * dgram}}, 2 * dgram},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, Config{MaxDatagram: dgram, PortsPerPlane: 4, Core: tc.core})
			var log dataLog
			log.tap(p.ea)
			ctx := testCtx(t)
			const n = 2
			var want, got [n][]byte
			var cut [n + 1]int // log index where each message's departures start
			for i := range n {
				want[i], got[i] = pattern(msg, byte(i)), make([]byte, msg)
			}
			for i := range n {
				cut[i] = len(log.departures())
				// Send before the receive is posted: the hint then
				// arrives with the RECV_READY that releases the data,
				// and the core judges it in the same turn. Posted
				// first, a sender goroutine descheduled for more than
				// four RTTs (loopback RTTs are microseconds) found the
				// hint stale and restarted without it, which the core
				// allows (docs/spec.md §3.5).
				sr, err := p.a.Send(1, want[i], 1)
				require.NoError(t, err)
				rr, err := p.b.Recv(1, [][]byte{got[i]}, []uint32{1})
				require.NoError(t, err)
				require.NoError(t, sr.Wait(ctx))
				require.NoError(t, rr.Wait(ctx))
			}
			all := log.departures()
			cut[n] = len(all)
			for i := range n {
				require.Equal(t, want[i], got[i], "message %d", i)
				if i > 0 && tc.core.InboundRate > 0 && !pacedRestartFixed {
					t.Logf("message %d not checked: the core's restart rule is pending a fix (pacedRestartFixed)", i)
					continue
				}
				as := all[cut[i]:cut[i+1]]
				sent := 0
				for _, d := range as {
					sent += d.bytes
				}
				require.GreaterOrEqual(t, sent, msg, "message %d: DATA bytes sent", i)
				for _, w := range []transport.Time{5 * transport.Millisecond, 20 * transport.Millisecond} {
					// The core draws each hinted gap from 7/8..9/8 of the
					// nominal one; two datagrams cover a window's edges.
					allowed := int(uint64(w)*rate/uint64(transport.Second))*9/8 + tc.burst + 2*dgram
					most, at := worstWindow(as, w)
					require.LessOrEqual(t, most, allowed, "message %d: %d bytes sent within %v from %v after its first DATA (rate %d B/s, %d sends)",
						i, most, time.Duration(w), time.Duration(at-as[0].at), rate, len(as))
				}
				t.Logf("message %d: %d DATA sends over %v", i, len(as), time.Duration(as[len(as)-1].at-as[0].at))
			}
		})
	}
}
