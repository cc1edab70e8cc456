package collectives

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/transport"
)

// TestMisuseRefused: calls with buffers that do not fit the collective, an
// invalid data type or more channels than the communicator has fail at
// once, on the calling rank alone, and leave the communicator usable
// (nothing was sent). A call made while another is in progress is
// TestConcurrentUseClosesTheComm's.
func TestMisuseRefused(t *testing.T) {
	const n = 2
	dt := reduce.Int32
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			cfg := Config{Transport: tr, Timeout: 10 * time.Second, Channels: 2}
			err := LaunchLocal(context.Background(), n, cfg, func(c *Comm) error {
				ctx := context.Background()
				b := func(elems int) []byte { return make([]byte, elems*dt.Size()) }
				calls := []struct {
					name, want string
					run        func() error
				}{
					{"allreduce ragged", "whole number", func() error { return c.AllReduce(ctx, nil, make([]byte, 10), dt, reduce.OpSum) }},
					{"allreduce sizes", "equal lengths", func() error { return c.AllReduce(ctx, b(10), b(4), dt, reduce.OpSum) }},
					{"allgather sizes", "recv = 2 × send", func() error { return c.AllGather(ctx, b(10), b(16), dt) }},
					{"allgather blocks", "equal blocks", func() error { return c.AllGather(ctx, nil, b(5), dt) }},
					{"alltoall blocks", "equal blocks", func() error { return c.AllToAll(ctx, b(5), b(5), dt) }},
					{"reducescatter sizes", "send = 2 × recv", func() error { return c.ReduceScatter(ctx, b(10), b(4), dt, reduce.OpSum) }},
					{"reducescatter blocks", "equal blocks", func() error { return c.ReduceScatter(ctx, nil, b(5), dt, reduce.OpSum) }},
					// send starts at recv but is not recv: neither
					// in-place layout (recv block Rank of send, or
					// recv itself holding all blocks).
					{"reducescatter send a prefix of recv", "send = 2 × recv", func() error {
						buf := b(8)
						return c.ReduceScatter(ctx, buf[:4*dt.Size()], buf, dt, reduce.OpSum)
					}},
					{"broadcast sizes", "equal lengths", func() error { return c.Broadcast(ctx, b(3), b(4), dt, 0) }},
					{"sendrecv sizes", "equal lengths", func() error { return c.SendRecv(ctx, b(3), b(4), dt) }},
					{"invalid dtype", "invalid data type", func() error { return c.AllReduce(ctx, nil, b(4), reduce.DType(42), reduce.OpSum) }},
					{"root", "broadcast on rank", func() error { return c.Broadcast(ctx, nil, b(4), dt, -1) }},
					{"peer", "p2p on rank", func() error {
						return c.Run(ctx, sched.Config{Collective: sched.P2P, Count: 4, DType: dt, Root: 0, Peer: 7, InPlace: true}, nil, b(4))
					}},
					{"in place with a send", "pass send nil", func() error {
						return c.Run(ctx, sched.Config{Collective: sched.AllReduce, Count: 4, DType: dt, Op: reduce.OpSum, InPlace: true}, b(4), b(4))
					}},
					{"channels", "the communicator has 2", func() error {
						return c.Run(ctx, sched.Config{Collective: sched.AllReduce, Count: 4, DType: dt, Op: reduce.OpSum, Channels: 4, InPlace: true}, nil, b(4))
					}},
				}
				if c.Rank() == 1 {
					// A rank in NCCL's in-place reduce-scatter layout at
					// the wrong block.
					send := b(4)
					calls = append(calls, struct {
						name, want string
						run        func() error
					}{"reducescatter wrong block", "not block 1", func() error { return c.ReduceScatter(ctx, send, send[:8], dt, reduce.OpSum) }})
				}
				for _, call := range calls {
					err := call.run()
					if err == nil || !strings.Contains(err.Error(), call.want) {
						return fmt.Errorf("rank %d: %s: %v, want an error saying %q", c.Rank(), call.name, err, call.want)
					}
					if !errors.Is(err, ErrInvalidArgument) {
						return fmt.Errorf("rank %d: %s: %v does not wrap ErrInvalidArgument", c.Rank(), call.name, err)
					}
				}
				return c.Barrier(ctx)
			})
			require.NoError(t, err)
		})
	}
}

// TestRunCountBeyondBuffers: a Run whose count its buffers cannot hold by
// far (bytes passed as elements) is refused at once, before a plan is
// built for it. Before, the plan of 2^28 elements took a second or more to
// build (of 2^32, minutes) and stayed in the cache, only for the call to
// be refused once it was there.
func TestRunCountBeyondBuffers(t *testing.T) {
	const count = 1 << 28
	rankZeroAlone(t, func(c *Comm) {
		for _, tc := range []struct {
			name       string
			cfg        sched.Config
			send, recv []byte
			want       string
		}{
			{"allreduce", sched.Config{Collective: sched.AllReduce, Count: count, DType: reduce.Float32, Op: reduce.OpSum, InPlace: true},
				nil, make([]byte, 64), "receive buffer has 64 bytes"},
			{"p2p root", sched.Config{Collective: sched.P2P, Count: count, DType: reduce.Float32, Root: 0, Peer: 1},
				make([]byte, 64), nil, "send buffer has 64 bytes"},
			{"p2p peer", sched.Config{Collective: sched.P2P, Count: count, DType: reduce.Float32, Root: 1, Peer: 0},
				nil, make([]byte, 64), "receive buffer has 64 bytes"},
		} {
			err := c.Run(context.Background(), tc.cfg, tc.send, tc.recv)
			require.ErrorIs(t, err, ErrInvalidArgument, tc.name)
			require.ErrorContains(t, err, tc.want, tc.name)
			require.Empty(t, c.plans, "%s: a plan was built for a call refused for its buffers", tc.name)
		}
	})
}

// TestDoneContextRefused: a call made with a context that is already done
// fails at once on the calling rank, wrapping the context's error and
// saying so rather than blaming the peers, sends nothing, and leaves the
// communicator usable: the next call with a live context succeeds. Before,
// the call posted its transfers and raced them against the done context,
// so it either succeeded or broke the communicator.
func TestDoneContextRefused(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			err := LaunchLocal(context.Background(), 2, Config{Transport: tr, Timeout: 10 * time.Second}, func(c *Comm) error {
				cancelled, cancel := context.WithCancel(context.Background())
				cancel()
				expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
				defer cancel2()
				why := errors.New("shutting down")
				caused, cancel3 := context.WithCancelCause(context.Background())
				cancel3(why)
				for _, tc := range []struct {
					ctx  context.Context
					want error
				}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}, {caused, why}} {
					for i := 0; i < 20; i++ { // the old race went either way
						buf := fill(reduce.Int32, 64, func(int) float64 { return float64(c.Rank() + 1) })
						err := c.AllReduce(tc.ctx, nil, buf, reduce.Int32, reduce.OpSum)
						if !errors.Is(err, tc.want) {
							return fmt.Errorf("rank %d: %v, want an error wrapping %v", c.Rank(), err, tc.want)
						}
						if !strings.Contains(err.Error(), "already done") || strings.Contains(err.Error(), "may have died") {
							return fmt.Errorf("rank %d: the error does not say the context was done before the call: %v", c.Rank(), err)
						}
					}
				}
				buf := fill(reduce.Int32, 64, func(int) float64 { return float64(c.Rank() + 1) })
				if err := c.AllReduce(context.Background(), nil, buf, reduce.Int32, reduce.OpSum); err != nil {
					return fmt.Errorf("rank %d: the communicator is unusable after the refused calls: %w", c.Rank(), err)
				}
				if want := fill(reduce.Int32, 64, func(int) float64 { return 3 }); !bytes.Equal(buf, want) {
					return fmt.Errorf("rank %d: wrong all-reduce after the refused calls", c.Rank())
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// TestCancelDuringCallSaysWhy: a call whose context the caller cancels
// while it waits for a peer fails with an error that says the caller
// cancelled it and wraps the cancellation's cause, as the refusal of a call
// whose context was already done does, and the later call's ErrBroken
// wraps that cause too. Before, the error wrapped context.Canceled alone
// and said that "a peer may have died", sending the user looking for a
// dead rank.
func TestCancelDuringCallSaysWhy(t *testing.T) {
	why := errors.New("shutting down")
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			var callErr, later error
			finished := make(chan struct{})
			err := LaunchLocal(context.Background(), 2, Config{Transport: tr, Timeout: 30 * time.Second}, func(c *Comm) error {
				if c.Rank() == 1 {
					<-finished // never calls: rank 0's call waits until cancelled
					return nil
				}
				defer close(finished)
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				c.link = postHook{c.link, sync.OnceFunc(func() { cancel(why) })}
				callErr = c.AllReduce(ctx, nil, make([]byte, 64), reduce.Int32, reduce.OpSum)
				later = c.Barrier(context.Background())
				return nil
			})
			require.NoError(t, err)
			require.ErrorIs(t, callErr, context.Canceled)
			require.ErrorIs(t, callErr, why)
			require.ErrorContains(t, callErr, "cancelled by the caller")
			require.NotContains(t, callErr.Error(), "may have died")
			require.ErrorIs(t, later, ErrBroken)
			require.ErrorIs(t, later, why)
		})
	}
}

// TestBrokenCommSaysWhatToDo: a call on a communicator that an earlier
// failure broke names itself and its rank, and says to close the
// communicator and make a new one on every rank, before the earlier
// failure. Before, it said only that the communicator was unusable, then
// quoted the earlier call's error, which named another call.
func TestBrokenCommSaysWhatToDo(t *testing.T) {
	var later error
	rankZeroAlone(t, func(c *Comm) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c.link = postHook{c.link, sync.OnceFunc(cancel)}
		first := c.AllReduce(ctx, nil, make([]byte, 64), reduce.Int32, reduce.OpSum)
		require.ErrorIs(t, first, context.Canceled)
		later = c.AllGather(context.Background(), nil, make([]byte, 8), reduce.Int32)
	})
	require.ErrorIs(t, later, ErrBroken)
	require.ErrorIs(t, later, context.Canceled)
	require.ErrorContains(t, later, "allgather on rank 0: ")
	require.ErrorContains(t, later, "close it; to go on, every rank makes a new communicator with New")
}

// TestConcurrentUseClosesTheComm: a call made while another goroutine's
// call holds the communicator fails with ErrConcurrentUse, and so do the
// call in progress and every later one, and the other ranks' call fails
// rather than pair with either. Rank 0 starts an all-reduce of ones, and
// while it waits for rank 1 another goroutine's all-reduce of hundreds
// cuts in; rank 1 then calls its all-reduce of hundreds. Refusing the
// second call alone let rank 0's first pair with rank 1's, and both
// returned success with 101s.
func TestConcurrentUseClosesTheComm(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			fill := func(v byte) []byte { return bytes.Repeat([]byte{v}, 64) }
			cutIn := make(chan struct{})
			err := LaunchLocal(ctx, 2, Config{Transport: tr, Timeout: 20 * time.Second}, func(c *Comm) error {
				if c.Rank() == 1 {
					<-cutIn
					buf := fill(100)
					err := c.AllReduce(ctx, nil, buf, reduce.Uint8, reduce.OpSum)
					if err == nil {
						return fmt.Errorf("rank 1's all-reduce succeeded with %d, paired with rank 0's other call", buf[0])
					}
					return nil
				}
				released := false
				release := func() {
					if !released {
						released = true
						close(cutIn)
					}
				}
				defer release()
				holding := make(chan struct{})
				c.onLocked = func() { close(holding) }
				first := make(chan error, 1)
				ones := fill(1)
				go func() { first <- c.AllReduce(ctx, nil, ones, reduce.Uint8, reduce.OpSum) }()
				<-holding
				c.onLocked = nil
				err := c.AllReduce(ctx, nil, fill(100), reduce.Uint8, reduce.OpSum)
				if !errors.Is(err, ErrConcurrentUse) {
					return fmt.Errorf("the call that cut in: %v, want ErrConcurrentUse", err)
				}
				release()
				ferr := <-first
				if !errors.Is(ferr, ErrConcurrentUse) {
					return fmt.Errorf("the call in progress: %v (result %d), want ErrConcurrentUse", ferr, ones[0])
				}
				if pe := (*PeerError)(nil); errors.As(ferr, &pe) {
					// Its transfers failed because this rank closed
					// the link: rank 1 is not to blame.
					return fmt.Errorf("the call in progress blames rank %d: %v", pe.Peer, ferr)
				}
				err = c.AllReduce(ctx, nil, fill(1), reduce.Uint8, reduce.OpSum)
				if !errors.Is(err, ErrBroken) || !errors.Is(err, ErrConcurrentUse) {
					return fmt.Errorf("a later call: %v, want ErrBroken and ErrConcurrentUse", err)
				}
				c.Close()
				err = c.AllReduce(ctx, nil, fill(1), reduce.Uint8, reduce.OpSum)
				if !errors.Is(err, ErrClosed) || errors.Is(err, ErrConcurrentUse) {
					return fmt.Errorf("a call after Close: %v, want ErrClosed alone", err)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// TestLostPeerIsTyped: a call whose peer closes its communicator during the
// call fails with a *PeerError naming that rank and wrapping ErrPeerLost,
// over either transport, so that a program can tell a lost rank from a
// misuse without reading the message.
func TestLostPeerIsTyped(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			posted := make(chan struct{})
			var callErr error
			err := LaunchLocal(ctx, 2, Config{Transport: tr, Timeout: 30 * time.Second}, func(c *Comm) error {
				if c.Rank() == 1 {
					<-posted // rank 0's call waits for this rank
					return c.Close()
				}
				var once sync.Once
				c.link = postHook{c.link, func() { once.Do(func() { close(posted) }) }}
				callErr = c.AllReduce(ctx, nil, make([]byte, 64), reduce.Int32, reduce.OpSum)
				return nil
			})
			require.NoError(t, err)
			require.ErrorIs(t, callErr, ErrPeerLost)
			var pe *PeerError
			require.ErrorAs(t, callErr, &pe)
			require.Equal(t, 1, pe.Peer)
			require.NotErrorIs(t, callErr, ErrInvalidArgument)
		})
	}
}

// failHook is a link whose first receive triggers act (while the call that
// posted it holds the communicator) and then fails with err.
type failHook struct {
	link
	once *sync.Once
	act  func()
	err  error
}

func (h failHook) recv(peer, ch int, tag uint32, buf []byte, done func()) (pending, error) {
	var fail bool
	h.once.Do(func() { h.act(); fail = true })
	if fail {
		return nil, h.err
	}
	return h.link.recv(peer, ch, tag, buf, done)
}

// TestConcurrentUseCauseKinds: a call that fails for a reason of its own
// while another goroutine's call cuts in keeps that cause beside
// ErrConcurrentUse, in a way that depends on what it is. A lost peer keeps
// its *PeerError and ErrPeerLost, for this call and in the later calls'
// ErrBroken. A peer's disagreement on the call (ErrMismatch, in a
// *PeerError too) happened before the cut-in closed the link and keeps its
// type for this call and the later ones; a refusal of this call's own
// arguments reaches its caller as ErrInvalidArgument, but the later calls,
// whose arguments were fine, are told ErrBroken without it; so does the
// refusal of a call whose context was already done (context.Canceled).
func TestConcurrentUseCauseKinds(t *testing.T) {
	cutIn := func(c *Comm) {
		_ = c.AllReduce(context.Background(), nil, make([]byte, 4), reduce.Int32, reduce.OpSum)
	}
	// transferFails makes the call's first transfer fail with err, after
	// another call cut in.
	transferFails := func(err error) func(c *Comm) error {
		return func(c *Comm) error {
			c.link = failHook{link: c.link, once: new(sync.Once), act: func() { cutIn(c) }, err: fmt.Errorf("injected: %w", err)}
			return c.AllReduce(context.Background(), nil, make([]byte, 64), reduce.Int32, reduce.OpSum)
		}
	}
	for _, tc := range []struct {
		name        string
		call        func(c *Comm) error
		first, last []error // wrapped by the call cut into, by a later call
		notLast     error   // not wrapped by the later call
		peerError   bool    // the call cut into has a *PeerError
	}{
		{name: "lost peer",
			call:      transferFails(transport.ErrPeerDead),
			first:     []error{ErrConcurrentUse, ErrPeerLost},
			last:      []error{ErrBroken, ErrConcurrentUse, ErrPeerLost},
			peerError: true},
		{name: "mismatch",
			call:      transferFails(transport.ErrTagMismatch),
			first:     []error{ErrConcurrentUse, ErrMismatch},
			last:      []error{ErrBroken, ErrConcurrentUse, ErrMismatch},
			peerError: true},
		{name: "arguments",
			call: func(c *Comm) error {
				c.onLocked = func() { cutIn(c) }
				defer func() { c.onLocked = nil }()
				return c.Run(context.Background(), sched.Config{Collective: sched.AllReduce, Count: 1, DType: reduce.Int32, Op: reduce.OpSum,
					Channels: c.cfg.Channels + 1}, nil, make([]byte, 4))
			},
			first:   []error{ErrConcurrentUse, ErrInvalidArgument},
			last:    []error{ErrBroken, ErrConcurrentUse},
			notLast: ErrInvalidArgument},
		{name: "done context",
			call: func(c *Comm) error {
				c.onLocked = func() { cutIn(c) }
				defer func() { c.onLocked = nil }()
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return c.Run(ctx, sched.Config{Collective: sched.AllReduce, Count: 1, DType: reduce.Int32, Op: reduce.OpSum,
					InPlace: true}, nil, make([]byte, 4))
			},
			first:   []error{ErrConcurrentUse, context.Canceled},
			last:    []error{ErrBroken, ErrConcurrentUse},
			notLast: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first, later error
			rankZeroAlone(t, func(c *Comm) {
				first = tc.call(c)
				later = c.AllReduce(context.Background(), nil, make([]byte, 64), reduce.Int32, reduce.OpSum)
			})
			for _, want := range tc.first {
				require.ErrorIs(t, first, want)
			}
			for _, want := range tc.last {
				require.ErrorIs(t, later, want)
			}
			var pe *PeerError
			require.Equal(t, tc.peerError, errors.As(first, &pe), "the call cut into: %v", first)
			if tc.notLast != nil {
				require.NotErrorIs(t, later, tc.notLast)
			}
		})
	}
}

// TestCloseThenConcurrentCall: after Close, a call made while the call
// that Close cut short still holds the communicator fails with ErrClosed,
// as any call after Close does, and so does the call in progress; neither
// is reported as concurrent use.
func TestCloseThenConcurrentCall(t *testing.T) {
	var running, interloper error
	rankZeroAlone(t, func(c *Comm) {
		c.link = postHook{link: c.link, posted: sync.OnceFunc(func() {
			c.Close()
			interloper = c.AllReduce(context.Background(), nil, make([]byte, 4), reduce.Int32, reduce.OpSum)
		})}
		running = c.AllReduce(context.Background(), nil, make([]byte, 64), reduce.Int32, reduce.OpSum)
	})
	t.Logf("running: %v", running)
	require.ErrorIs(t, interloper, ErrClosed, "a call after Close")
	require.ErrorIs(t, running, ErrClosed, "the call Close cut short")
}

// TestPanicInCallReleasesTheComm: a call that panics, and whose caller
// recovers, releases the communicator like any other: the next call is
// not taken for concurrent use (which would close the communicator).
func TestPanicInCallReleasesTheComm(t *testing.T) {
	var later error
	err := LaunchLocal(context.Background(), 2, Config{Transport: TransportTCP, Timeout: 10 * time.Second}, func(c *Comm) error {
		if c.Rank() == 1 {
			return nil
		}
		c.onLocked = func() { panic("a bug in the call") }
		func() {
			defer func() { _ = recover() }()
			_ = c.Barrier(context.Background())
		}()
		c.onLocked = nil
		done, cancel := context.WithCancel(context.Background())
		cancel()
		later = c.Barrier(done) // refused for its context, nothing sent
		return nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, later, context.Canceled)
	require.NotErrorIs(t, later, ErrConcurrentUse)
}

// rankZeroAlone runs fn on rank 0 of two in-process ranks over kernel TCP,
// while rank 1 makes no call and waits for fn to return.
func rankZeroAlone(t *testing.T, fn func(c *Comm)) {
	t.Helper()
	finished := make(chan struct{})
	err := LaunchLocal(context.Background(), 2, Config{Transport: TransportTCP, Timeout: 10 * time.Second}, func(c *Comm) error {
		if c.Rank() == 1 {
			<-finished
			return nil
		}
		defer close(finished)
		fn(c)
		return nil
	})
	require.NoError(t, err)
}
