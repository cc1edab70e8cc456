package collectives

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/transport"
)

// Calls whose plans hold more messages per stream than a link queues: the
// executor posts at most maxStreamDepth of a stream at a time. Before, the
// TCP baseline hung (its stream queue of 1024 filled on both sides before any
// byte moved) and MetaRoCE failed with its 4096-receive limit.
func TestManyMessagesPerStream(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			// 4-byte chunks: one message per element per ring step.
			cfg := Config{Transport: tr, Timeout: 30 * time.Second, ChunkBytes: 4, Channels: 1}
			const n, cnt = 2, 4200
			err := LaunchLocal(context.Background(), n, cfg, func(c *Comm) error {
				send := fill(reduce.Int32, cnt, func(i int) float64 { return value(c.Rank(), i) })
				recv := make([]byte, n*len(send))
				if err := c.AllGather(context.Background(), send, recv, reduce.Int32); err != nil {
					return err
				}
				if !bytes.Equal(recv, reference(sched.AllGather, reduce.Int32, reduce.OpSum, n, c.Rank(), cnt, 0)) {
					return fmt.Errorf("rank %d: all-gather differs from the reference", c.Rank())
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// NCCL's in-place layouts, where one buffer is a block of the other, give
// the right result; any other partial overlap is refused instead of
// computing from bytes the call already overwrote.
func TestPartlyOverlappingBuffers(t *testing.T) {
	const n, cnt = 3, 5
	dt := reduce.Int32
	err := LaunchLocal(context.Background(), n, Config{Timeout: 10 * time.Second}, func(c *Comm) error {
		r := c.Rank()
		ctx := context.Background()
		blk := cnt * dt.Size()

		// Reduce-scatter: recv = send[r×cnt:(r+1)×cnt].
		send := fill(dt, n*cnt, func(i int) float64 { return value(r, i) })
		recv := send[r*blk : (r+1)*blk]
		if err := c.ReduceScatter(ctx, send, recv, dt, reduce.OpSum); err != nil {
			return err
		}
		if want := reference(sched.ReduceScatter, dt, reduce.OpSum, n, r, cnt, 0); !bytes.Equal(recv, want) {
			return fmt.Errorf("rank %d: in-place reduce-scatter in NCCL's layout: got % x, want % x", r, recv, want)
		}

		// All-gather: send = recv[r×cnt:(r+1)×cnt].
		all := make([]byte, n*blk)
		copy(all[r*blk:], fill(dt, cnt, func(i int) float64 { return value(r, i) }))
		if err := c.AllGather(ctx, all[r*blk:(r+1)*blk], all, dt); err != nil {
			return err
		}
		if !bytes.Equal(all, reference(sched.AllGather, dt, reduce.OpSum, n, r, cnt, 0)) {
			return fmt.Errorf("rank %d: in-place all-gather in NCCL's layout differs from the reference", r)
		}

		// Overlaps that are no in-place layout: refused, and the
		// communicator stays usable.
		buf := make([]byte, 2*n*blk)
		for _, call := range []struct {
			name string
			run  func() error
		}{
			{"allreduce", func() error { return c.AllReduce(ctx, buf[4:4+blk], buf[:blk], dt, reduce.OpSum) }},
			{"alltoall", func() error { return c.AllToAll(ctx, buf[blk:blk+n*blk], buf[:n*blk], dt) }},
			{"allgather", func() error { return c.AllGather(ctx, buf[4:4+blk], buf[:n*blk], dt) }},
			{"reducescatter", func() error { return c.ReduceScatter(ctx, buf[:n*blk], buf[4:4+blk], dt, reduce.OpSum) }},
			{"run", func() error {
				return c.Run(ctx, sched.Config{Collective: sched.AllReduce, Count: cnt, DType: dt, Op: reduce.OpSum}, buf[:blk], buf[4:4+blk])
			}},
		} {
			if err := call.run(); err == nil || !strings.Contains(err.Error(), "overlap") {
				return fmt.Errorf("rank %d: %s with partly overlapping buffers: %v, want an overlap error", r, call.name, err)
			}
		}
		return c.Barrier(ctx)
	})
	require.NoError(t, err)
}

// NCCL's in-place reduce-scatter layout with a send longer than Size
// blocks runs on the first Size blocks on one rank as it does on several.
// Before, a lone rank refused it: its recv starts at send, which read as
// the other in-place layout with a send of the wrong length.
func TestReduceScatterInPlaceLongSend(t *testing.T) {
	dt := reduce.Int32
	const cnt = 4
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			err := LaunchLocal(context.Background(), n, Config{Transport: TransportTCP, Timeout: 10 * time.Second}, func(c *Comm) error {
				r, blk := c.Rank(), cnt*dt.Size()
				buf := fill(dt, (n+1)*cnt, func(i int) float64 { return value(r, i) })
				recv := buf[r*blk : (r+1)*blk]
				if err := c.ReduceScatter(context.Background(), buf, recv, dt, reduce.OpSum); err != nil {
					return fmt.Errorf("rank %d: %w", r, err)
				}
				if want := reference(sched.ReduceScatter, dt, reduce.OpSum, n, r, cnt, 0); !bytes.Equal(recv, want) {
					return fmt.Errorf("rank %d: got % x, want % x", r, recv, want)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// Ranks that disagree on the count never get a success with a half-filled
// buffer: a rank whose receive is too small for the peer's longer message,
// like one that gets a shorter message than it expects, fails with an error
// that wraps ErrMismatch and says what to check. Before, the longer message
// failed over TCP with a plain error that read like a broken connection,
// and over MetaRoCE with transport.ErrMessageTooLarge alone.
//
// The rank that sees the disagreement first fails and leaves, and its peer
// may then fail on the closed connection before it sees the disagreement
// itself (which side is first is a race, and over MetaRoCE the sender of
// the longer message can tell from the receive's advertised size before
// sending anything). So each rank must report ErrMismatch, or the peer's
// leaving where the peer reported ErrMismatch, and at least one reports it.
// A broadcast root whose message went out may also succeed; it waits for
// rank 0's call to end before it closes, so that its closing cannot stand
// in for the mismatch rank 0 must report then.
func TestRanksDisagreeOnCount(t *testing.T) {
	dt := reduce.Int32
	cases := []struct {
		name        string
		counts      [2]int // elements per rank
		call        func(c *Comm, buf []byte) error
		rootMayPass bool // rank 1 sends only
	}{
		{"sendrecv", [2]int{8, 16}, func(c *Comm, buf []byte) error {
			return c.SendRecv(context.Background(), buf, make([]byte, len(buf)), dt)
		}, false},
		{"broadcast/longer", [2]int{8, 16}, func(c *Comm, buf []byte) error {
			return c.Broadcast(context.Background(), nil, buf, dt, 1)
		}, true},
		{"broadcast/shorter", [2]int{16, 8}, func(c *Comm, buf []byte) error {
			return c.Broadcast(context.Background(), nil, buf, dt, 1)
		}, true},
	}
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		for _, tc := range cases {
			t.Run(tr+"/"+tc.name, func(t *testing.T) {
				var errs [2]error
				var ran [2]bool
				rank0Done := make(chan struct{})
				cfg := Config{Transport: tr, Timeout: 10 * time.Second}
				launchErr := LaunchLocal(context.Background(), 2, cfg, func(c *Comm) error {
					r := c.Rank()
					ran[r] = true
					errs[r] = tc.call(c, fill(dt, tc.counts[r], func(int) float64 { return 1 }))
					if errs[r] != nil {
						// The next call reports the communicator broken,
						// and errors.Is still finds the first failure's
						// cause.
						again := c.Barrier(context.Background())
						if !errors.Is(again, ErrBroken) || errors.Is(again, ErrMismatch) != errors.Is(errs[r], ErrMismatch) {
							t.Errorf("rank %d: the call after %q returned %v, want ErrBroken wrapping the same cause", r, errs[r], again)
						}
					}
					if r == 0 {
						close(rank0Done)
					} else {
						// Close only once rank 0's call ended; the bound
						// keeps a rank 0 that never ran from hanging this.
						select {
						case <-rank0Done:
						case <-time.After(cfg.Timeout):
						}
					}
					return errs[r]
				})
				require.True(t, ran[0] && ran[1], "the ranks did not start: %v", launchErr)
				var seen bool
				for r, err := range errs {
					switch {
					case errors.Is(err, ErrMismatch):
						seen = true
						require.Contains(t, err.Error(), mismatchHint, "rank %d", r)
					case err == nil && tc.rootMayPass && r == 1:
					case peerLeft(err) && errors.Is(errs[1-r], ErrMismatch):
						t.Logf("rank %d failed because rank %d saw the disagreement first and left: %v", r, 1-r, err)
					default:
						t.Errorf("rank %d: got %v, want an error wrapping ErrMismatch", r, err)
					}
				}
				require.True(t, seen, "no rank reported ErrMismatch")
			})
		}
	}
}

// Close, before a call or during one, makes the call fail with an error
// wrapping ErrClosed that says so. Before, a call after Close or cut short
// by it reported the link's errors ("use of closed network connection",
// "tcp stream closed", "connection closed"), which blame the peer.
func TestCloseFailsCallsWithErrClosed(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		for _, during := range []bool{false, true} {
			name := tr + "/after"
			if during {
				name = tr + "/during"
			}
			t.Run(name, func(t *testing.T) {
				rank0Done := make(chan struct{})
				var errs []error
				cfg := Config{Transport: tr, Timeout: 10 * time.Second}
				launchErr := LaunchLocal(context.Background(), 2, cfg, func(c *Comm) error {
					if c.Rank() == 1 {
						// Rank 1 never calls: rank 0's call waits until
						// its Close.
						select {
						case <-rank0Done:
						case <-time.After(cfg.Timeout):
						}
						return nil
					}
					defer close(rank0Done)
					buf := make([]byte, 64)
					if during {
						posted := make(chan struct{})
						var once sync.Once
						c.link = postHook{c.link, func() { once.Do(func() { close(posted) }) }}
						go func() {
							<-posted // the call is in progress
							c.Close()
						}()
					} else {
						c.Close()
					}
					errs = append(errs, c.SendRecv(context.Background(), buf, make([]byte, len(buf)), reduce.Int32))
					errs = append(errs, c.Barrier(context.Background()))
					return nil
				})
				require.NoError(t, launchErr)
				require.Len(t, errs, 2)
				for i, err := range errs {
					require.ErrorIs(t, err, ErrClosed, "call %d", i)
					require.NotErrorIs(t, err, ErrBroken, "call %d", i)
					require.Contains(t, err.Error(), "communicator closed", "call %d", i)
				}
				if !during {
					// Nothing was posted: nothing else to report.
					require.NotContains(t, errs[0].Error(), "connection")
				}
			})
		}
	}
}

// postHook is a link that calls posted after each receive it posts, so that
// a test acts while a call is in progress.
type postHook struct {
	link
	posted func()
}

func (h postHook) recv(peer, ch int, tag uint32, buf []byte, done func()) (pending, error) {
	pd, err := h.link.recv(peer, ch, tag, buf, done)
	h.posted()
	return pd, err
}

// peerLeft reports whether err is a transfer's failure because the peer
// closed its side: a MetaRoCE connection the peer closed, or a TCP stream
// that ended or was reset.
func peerLeft(err error) bool {
	return errors.Is(err, transport.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// A call that fails leaves nothing posted behind it: once it returned, no
// peer's data lands in the caller's buffer any more, and the peers learn at
// once that the rank left.
func TestFailedCallStopsWritingIntoBuffers(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			returned, peerDone := make(chan struct{}), make(chan struct{})
			var late, peerErr error
			LaunchLocal(context.Background(), 2, Config{Transport: tr, Timeout: 20 * time.Second}, func(c *Comm) error {
				send := fill(reduce.Int32, 1024, func(int) float64 { return 7 })
				recv := make([]byte, len(send))
				if c.Rank() == 1 {
					<-returned // calls only after rank 0 gave up
					start := time.Now()
					peerErr = c.SendRecv(context.Background(), send, recv, reduce.Int32)
					if time.Since(start) > 15*time.Second {
						peerErr = fmt.Errorf("rank 1 learned of rank 0's failure only at its own deadline: %w", peerErr)
					}
					close(peerDone)
					return nil
				}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				err := c.SendRecv(ctx, send, recv, reduce.Int32)
				switch {
				case !errors.Is(err, context.DeadlineExceeded):
					late = fmt.Errorf("rank 0: want the caller's deadline, got %v", err)
				case !strings.Contains(err.Error(), "caller's deadline"):
					late = fmt.Errorf("rank 0: the error does not say whose deadline passed: %v", err)
				}
				clear(recv)
				close(returned)
				<-peerDone
				if i := bytes.IndexFunc(recv, func(r rune) bool { return r != 0 }); i >= 0 && late == nil {
					late = fmt.Errorf("rank 0: byte %d of recv was written after the failed call returned", i)
				}
				return nil
			})
			require.NoError(t, late)
			require.Error(t, peerErr, "rank 1's SendRecv cannot succeed without rank 0")
		})
	}
}

// A connection to the rendezvous that never says hello (a port scan, a
// stopped process) does not hold up the ranks that do.
func TestBootstrapSilentConnection(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := exchange(ctx, Bootstrap{Rank: 0, NRanks: 2, Root: root, Source: "test"}, []byte("zero"))
		done <- err
	}()
	var silent net.Conn
	for silent == nil {
		if silent, err = net.Dial("tcp", root); err != nil {
			select {
			case <-ctx.Done():
				t.Fatalf("rank 0 never listened on %s: %v", root, err)
			case <-time.After(10 * time.Millisecond): // retry until rank 0 listens
			}
		}
	}
	defer silent.Close()
	start := time.Now()
	blobs, err := exchange(ctx, Bootstrap{Rank: 1, NRanks: 2, Root: root, Source: "test"}, []byte("one"))
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("zero"), []byte("one")}, blobs)
	require.NoError(t, <-done)
	require.Less(t, time.Since(start), helloWait, "rank 0 waited out the silent connection's hello")
}

// TestPeerLeftHint: a transfer that failed because its peer closed the
// connection (MetaRoCE's CLOSE, or the TCP baseline's end of stream or
// reset) says that the peer gave up or exited; other failures (a dead
// peer, a local close, a mismatch) get no such words.
func TestPeerLeftHint(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		hint bool
	}{
		{"metaroce close", &transport.ConnError{Err: transport.ErrPeerClosed}, true},
		{"tcp end of stream", fmt.Errorf("tcp connection to rank 1: %w", io.EOF), true},
		{"tcp short read", fmt.Errorf("tcp connection to rank 1: %w", io.ErrUnexpectedEOF), true},
		{"tcp reset", fmt.Errorf("tcp connection to rank 1: %w", syscall.ECONNRESET), true},
		{"dead peer", &transport.ConnError{Err: transport.ErrPeerDead}, false},
		{"closed here", &transport.ConnError{Err: transport.ErrClosed}, false},
		{"mismatch", ErrMismatch, false},
	} {
		got := peerLeftHint(3, tc.err)
		if tc.hint {
			require.Contains(t, got, "rank 3 closed its connections", tc.name)
		} else {
			require.Empty(t, got, tc.name)
		}
	}
	require.ErrorIs(t, transport.ErrPeerClosed, transport.ErrClosed)
}

// TestPeerWithFewerCalls: a rank that makes fewer calls than its peer and
// closes its communicator without an error of its own fails the peer's
// next call with a *PeerError naming it, wrapping ErrPeerLost, whose
// words allow for that misuse. Before, they said the rank closed its
// connections "during the call" and gave it up, and sent the user looking
// for that rank's own error, which it did not have.
func TestPeerWithFewerCalls(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			var second error
			err := LaunchLocal(context.Background(), 2, Config{Transport: tr, Timeout: 30 * time.Second}, func(c *Comm) error {
				if err := c.Barrier(context.Background()); err != nil {
					return err
				}
				if c.Rank() == 1 {
					return nil // one call where rank 0 makes two: LaunchLocal closes
				}
				second = c.Barrier(context.Background())
				return nil
			})
			require.NoError(t, err)
			require.ErrorIs(t, second, ErrPeerLost)
			var pe *PeerError
			require.ErrorAs(t, second, &pe)
			require.Equal(t, 1, pe.Peer)
			require.ErrorContains(t, second, "rank 1 closed its connections, during this call or before it")
			require.ErrorContains(t, second, "fewer calls than this rank made")
		})
	}
}

// TestRanksDisagreeOnTheCall: ranks whose calls move the same bytes but
// are not the same call fail with ErrMismatch instead of returning a
// wrong result: an all-reduce with sum on one rank and max on the other,
// and (over TCP, where a send completes without a matching receive) a
// broadcast that each rank believes it roots, whose messages then wait in
// the sockets for the next call. Every message carries its call's tag
// (callTag); before, both all-reduces returned success, and after the
// broadcasts the next all-reduce summed the stray broadcast data.
func TestRanksDisagreeOnTheCall(t *testing.T) {
	dt := reduce.Int32
	type step func(c *Comm, buf []byte) error
	cases := []struct {
		name       string
		transports []string
		first      step
		// then, when set, is the call after first, which must fail
		// with ErrMismatch where first succeeded.
		then step
	}{
		{"reduction", []string{TransportMetaRoCE, TransportTCP}, func(c *Comm, buf []byte) error {
			op := reduce.OpSum
			if c.Rank() == 1 {
				op = reduce.OpMax
			}
			return c.AllReduce(context.Background(), nil, buf, dt, op)
		}, nil},
		{"broadcast root", []string{TransportTCP}, func(c *Comm, buf []byte) error {
			return c.Broadcast(context.Background(), nil, buf, dt, c.Rank())
		}, func(c *Comm, buf []byte) error {
			return c.AllReduce(context.Background(), nil, buf, dt, reduce.OpSum)
		}},
	}
	for _, tc := range cases {
		for _, tr := range tc.transports {
			t.Run(tr+"/"+tc.name, func(t *testing.T) {
				var errs [2]error
				var results [2][]byte
				cfg := Config{Transport: tr, Timeout: 10 * time.Second}
				_ = LaunchLocal(context.Background(), 2, cfg, func(c *Comm) error {
					r := c.Rank()
					buf := fill(dt, 16, func(int) float64 { return float64(r + 1) })
					err := tc.first(c, buf)
					if err == nil && tc.then != nil {
						buf = fill(dt, 16, func(int) float64 { return 1 })
						err = tc.then(c, buf)
					}
					errs[r], results[r] = err, buf
					return err
				})
				var seen bool
				for r, err := range errs {
					switch {
					case errors.Is(err, ErrMismatch):
						seen = true
					case err != nil && peerLeft(err) && errors.Is(errs[1-r], ErrMismatch):
					default:
						t.Errorf("rank %d: got %v (result %v), want ErrMismatch", r, err, results[r][:8])
					}
				}
				require.True(t, seen, "no rank reported ErrMismatch")
			})
		}
	}
}

// TestRanksDisagreeOnTheSchedule: ranks that pass Run different per-call
// schedules (sched.Config Algorithm, Channels, ChunkBytes) fail the call
// on every rank with ErrMismatch, each that sees it naming its own
// schedule; ranks whose schedules only look different (AlgoAuto against
// the algorithm it picks, different all-to-all messages in flight) pair
// and get the right result. Before, the tag covered the call's arguments
// alone: a ring against recursive halving and doubling, and 1 KiB chunks
// against 2 KiB ones, returned success (by chance, with the right data
// here; other sizes and rank counts fail on a message's length or wait
// out the timeout), and a mismatch that was caught asked only about the
// count and type.
func TestRanksDisagreeOnTheSchedule(t *testing.T) {
	dt := reduce.Float32
	auto := sched.ChooseAlgorithm(sched.AllReduce, 2, 0, 1<<18)
	cases := []struct {
		name  string
		coll  sched.Collective
		count int // elements; per peer for all-to-all
		set   func(r int, c *sched.Config)
		want  [2]string // each rank's schedule in its error; "" where the call must succeed
	}{
		{"algorithm", sched.AllReduce, 1 << 16, func(r int, c *sched.Config) {
			c.Algorithm = [2]sched.Algorithm{sched.AlgoRing, sched.AlgoHalvingDoubling}[r]
		}, [2]string{"this rank ran algorithm ring, 2 channels, 131072-byte chunks", "this rank ran algorithm halving, 2 channels, 131072-byte chunks"}},
		{"chunk", sched.AllReduce, 1 << 10, func(r int, c *sched.Config) {
			c.Algorithm, c.ChunkBytes = sched.AlgoRing, int64(1<<10)<<r
		}, [2]string{"this rank ran algorithm ring, 2 channels, 1024-byte chunks", "this rank ran algorithm ring, 2 channels, 2048-byte chunks"}},
		{"channels", sched.AllReduce, 1 << 16, func(r int, c *sched.Config) {
			c.Algorithm, c.Channels = sched.AlgoRing, r+1
		}, [2]string{"this rank ran algorithm ring, 1 channel, 131072-byte chunks", "this rank ran algorithm ring, 2 channels, 131072-byte chunks"}},
		{"auto", sched.AllReduce, 1 << 16, func(r int, c *sched.Config) {
			if r == 1 {
				c.Algorithm = auto
			}
		}, [2]string{}},
		{"in flight", sched.AllToAll, 1 << 12, func(r int, c *sched.Config) { c.AllToAllInFlight = 1 + 7*r }, [2]string{}},
	}
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		for _, tc := range cases {
			t.Run(tr+"/"+tc.name, func(t *testing.T) {
				var errs, results [2]error
				cfg := Config{Transport: tr, Timeout: time.Minute, Channels: 2, ChunkBytes: 128 << 10}
				_ = LaunchLocal(context.Background(), 2, cfg, func(c *Comm) error {
					r := c.Rank()
					n := tc.count
					if tc.coll == sched.AllToAll {
						n *= c.Size()
					}
					buf := fill(dt, n, func(i int) float64 { return value(r, i) })
					sc := sched.Config{Collective: tc.coll, Count: int64(tc.count), DType: dt, Op: reduce.OpSum, InPlace: true}
					tc.set(r, &sc)
					errs[r] = c.Run(context.Background(), sc, nil, buf)
					if errs[r] == nil && !bytes.Equal(buf, reference(tc.coll, dt, reduce.OpSum, 2, r, tc.count, 0)) {
						results[r] = fmt.Errorf("rank %d: wrong result", r)
					}
					return errs[r]
				})
				if tc.want[0] == "" {
					for r := range 2 {
						require.NoError(t, errs[r], "rank %d", r)
						require.NoError(t, results[r])
					}
					return
				}
				var seen bool
				for r, err := range errs {
					switch {
					case errors.Is(err, ErrMismatch):
						seen = true
						require.ErrorContains(t, err, mismatchHint, "rank %d", r)
						require.ErrorContains(t, err, tc.want[r], "rank %d", r)
					case err != nil && peerLeft(err) && errors.Is(errs[1-r], ErrMismatch):
					default:
						t.Errorf("rank %d: got %v, want ErrMismatch", r, err)
					}
				}
				require.True(t, seen, "no rank reported ErrMismatch")
			})
		}
	}
}

// TestLaunchReturnsTheFailedRanksError: when one rank's function fails
// while the others wait in a collective with it, LaunchLocal returns that
// rank's error, not the error of a peer that saw it leave. Its Close tells
// the peers at once, and one of them could return first.
func TestLaunchReturnsTheFailedRanksError(t *testing.T) {
	errOwn := errors.New("rank 1's own failure")
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			for round := 0; round < 5; round++ {
				err := LaunchLocal(context.Background(), 3, Config{Transport: tr, Timeout: 30 * time.Second}, func(c *Comm) error {
					if c.Rank() == 1 {
						return errOwn
					}
					buf := make([]byte, 4<<10)
					return c.AllReduce(context.Background(), buf, buf, reduce.Float32, reduce.OpSum)
				})
				require.ErrorIs(t, err, errOwn, "round %d", round)
			}
		})
	}
}

// TestDisagreeingSchedulesThatNeverMeet: ranks 0 and 1 run a ring
// all-reduce, ranks 2 and 3 halving and doubling. The ring ranks agree with
// each other, and so do the others; each side's messages for the other
// side go to streams whose receives the other side never posts, so no
// message reveals the disagreement and every rank runs out of time. Each
// error then names the rank's own call, its count and type as well as its
// schedule, beside the dead-peer hint, so that the user can compare the
// ranks' errors. Before, it only said a peer may have died or stopped
// calling, and later named the schedule but not the count and type it
// asked about.
func TestDisagreeingSchedulesThatNeverMeet(t *testing.T) {
	dt := reduce.Float32
	const n, count = 4, 1 << 14
	algs := [n]sched.Algorithm{sched.AlgoRing, sched.AlgoRing, sched.AlgoHalvingDoubling, sched.AlgoHalvingDoubling}
	var errs [n]error
	_ = LaunchLocal(context.Background(), n, Config{Timeout: time.Minute}, func(c *Comm) error {
		r := c.Rank()
		buf := fill(dt, count, func(i int) float64 { return value(r, i) })
		sc := sched.Config{Collective: sched.AllReduce, Count: count, DType: dt, Op: reduce.OpSum, InPlace: true, Algorithm: algs[r]}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		errs[r] = c.Run(ctx, sc, nil, buf)
		return errs[r]
	})
	for r, err := range errs {
		require.ErrorIs(t, err, context.DeadlineExceeded, "rank %d", r)
		require.ErrorContains(t, err, "transfers outstanding); a peer may have died, stopped calling the collective, or made a different call "+
			"(another collective, count, type or schedule; this rank's call: 16384 float elements, algorithm "+algs[r].String()+", ", "rank %d", r)
	}
}

// TestStuckOnOneTransfer: a broadcast whose root never calls leaves its
// other rank waiting on one receive, which its error counts in the
// singular ("1 transfer", not "1 transfers"), and the call it names
// includes the root, which ranks must agree on too.
func TestStuckOnOneTransfer(t *testing.T) {
	dt := reduce.Float32
	done := make(chan struct{})
	var err error
	_ = LaunchLocal(context.Background(), 2, Config{Timeout: time.Minute, Channels: 1}, func(c *Comm) error {
		if c.Rank() == 1 {
			<-done // the root stays in the job without calling
			return nil
		}
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err = c.Run(ctx, sched.Config{Collective: sched.Broadcast, Count: 1, DType: dt, Root: 1, InPlace: true}, nil, make([]byte, dt.Size()))
		return err
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "still waiting on rank 1 (1 transfer outstanding); ")
	require.ErrorContains(t, err, "(another collective, count, type, root or schedule; this rank's call: 1 float element, root 1, algorithm ")
}
