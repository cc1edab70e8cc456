package udp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// waitDone waits for r through its Done channel only, so that no caller
// drives the datapath and the event loop must do all the work.
func waitDone(t testing.TB, r *Request) {
	t.Helper()
	select {
	case <-r.Done():
	case <-testCtx(t).Done():
		t.Fatal("request did not complete")
	}
	done, err := r.Test()
	require.True(t, done)
	require.NoError(t, err)
}

// TestLoopAloneCompletes checks that requests complete without any caller
// running turns (WaitSpin disabled, completions awaited through Done), for
// messages of one datagram and of many, with and without loop spinning.
func TestLoopAloneCompletes(t *testing.T) {
	for _, cfg := range []Config{{WaitSpin: -1}, {WaitSpin: -1, Spin: -1}} {
		t.Run(fmt.Sprintf("spin=%v", cfg.Spin), func(t *testing.T) {
			p := newPair(t, cfg)
			for i, n := range []int{0, 64, 3 << 20} {
				msg := pattern(n, byte(i))
				buf := make([]byte, n)
				rr, err := p.b.Recv(1, [][]byte{buf}, []uint32{0})
				require.NoError(t, err)
				sr, err := p.a.Send(1, msg, 0)
				require.NoError(t, err)
				waitDone(t, sr)
				waitDone(t, rr)
				require.True(t, bytes.Equal(msg, buf))
			}
		})
	}
}

// TestMixedWaiters runs goroutines that wait with Wait (driving the
// datapath) next to goroutines that wait on Done only, on both endpoints at
// once, so that caller-run turns, parked loops and plain loop turns
// interleave; every message must arrive intact. Spinning gives the CPU to
// other goroutines, and with YieldCPU to other processes as well.
func TestMixedWaiters(t *testing.T) {
	for _, yield := range []bool{false, true} {
		t.Run(fmt.Sprintf("YieldCPU=%v", yield), func(t *testing.T) {
			mixedWaiters(t, Config{YieldCPU: yield})
		})
	}
}

func mixedWaiters(t *testing.T, cfg Config) {
	p := newPair(t, cfg)
	ctx := testCtx(t)
	const flows, msgs = 8, 12
	var g errgroup.Group
	for f := uint32(0); f < flows; f++ {
		src, dst := p.a, p.b
		if f%2 == 1 {
			src, dst = p.b, p.a
		}
		viaDone := f%4 >= 2
		g.Go(func() error {
			wait := func(r *Request) error {
				if !viaDone {
					return r.Wait(ctx)
				}
				select {
				case <-r.Done():
					_, err := r.Test()
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			for m := 0; m < msgs; m++ {
				msg := pattern(1+m*int(f+1)*9000, byte(f*17+uint32(m)))
				buf := make([]byte, len(msg))
				rr, err := dst.Recv(f, [][]byte{buf}, []uint32{0})
				if err != nil {
					return err
				}
				sr, err := src.Send(f, msg, 0)
				if err != nil {
					return err
				}
				if err := wait(rr); err != nil {
					return err
				}
				if err := wait(sr); err != nil {
					return err
				}
				if !bytes.Equal(buf, msg) {
					return fmt.Errorf("flow %d message %d differs", f, m)
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

// TestCallsAfterClose checks that the caller-runs path refuses work once the
// endpoint is closed, and that a request outstanding at Close fails instead
// of hanging a spinning Wait.
func TestCallsAfterClose(t *testing.T) {
	p := newPairNoCleanup(t, Config{})
	defer p.eb.Close()
	rr, err := p.a.Recv(1, [][]byte{make([]byte, 8)}, []uint32{0})
	require.NoError(t, err)
	require.NoError(t, p.ea.Close())
	require.Error(t, rr.Wait(testCtx(t)))
	_, err = p.a.Send(1, []byte("x"), 0)
	require.Error(t, err)
	_, err = p.a.Recv(1, [][]byte{make([]byte, 8)}, []uint32{0})
	require.Error(t, err)
}

// TestTimerArm checks the lazy re-arming of the loop's timer: a timer armed
// for a time between now and the new deadline is kept, an earlier deadline
// re-arms it, and Never leaves a pending expiry in place.
func TestTimerArm(t *testing.T) {
	tm, err := newTimerFD()
	require.NoError(t, err)
	defer tm.close()
	const now = transport.Second
	ms := transport.Millisecond
	steps := []struct {
		now, deadline, want transport.Time
	}{
		{now, now + 50*ms, now + 50*ms},         // first arm
		{now, now + 80*ms, now + 50*ms},         // later deadline: keep
		{now, now + 20*ms, now + 20*ms},         // earlier: re-arm
		{now, transport.Never, now + 20*ms},     // Never: keep, fires early
		{now + 30*ms, now + 60*ms, now + 60*ms}, // armed time passed: re-arm
	}
	for i, s := range steps {
		tm.arm(s.now, s.deadline)
		require.Equal(t, s.want, tm.armed, "step %d", i)
	}
	tm.armed = 0
	tm.arm(now, transport.Never)
	require.Zero(t, tm.armed)
}

// TestProgressCompletesNotified checks Endpoint.Progress the way a
// collective's executor uses it: receives whose notify callbacks fill a
// channel, awaited by driving the datapath from the waiting goroutine
// rather than through each request's Wait. It must complete every message
// intact, and must return (false) when nothing it waits for can happen.
func TestProgressCompletesNotified(t *testing.T) {
	for _, cfg := range []Config{{}, {Spin: -1}, {Spin: -1, WaitSpin: -1}} {
		t.Run(fmt.Sprintf("spin=%v/waitspin=%v", cfg.Spin, cfg.WaitSpin), func(t *testing.T) {
			p := newPair(t, cfg)
			ctx := testCtx(t)
			const msgs = 6
			done := make(chan int, msgs)
			bufs := make([][]byte, msgs)
			want := make([][]byte, msgs)
			for m := range msgs {
				want[m] = pattern(1+m*70000, byte(m))
				bufs[m] = make([]byte, len(want[m]))
				_, err := p.b.RecvNotify(3, [][]byte{bufs[m]}, []uint32{0}, func() { done <- m })
				require.NoError(t, err)
			}
			var g errgroup.Group
			g.Go(func() error {
				for m := range msgs {
					r, err := p.a.Send(3, want[m], 0)
					if err != nil {
						return err
					}
					if err := r.Wait(ctx); err != nil {
						return err
					}
				}
				return nil
			})
			for got := 0; got < msgs; got++ {
				p.eb.Progress(func() bool { return len(done) > 0 || ctx.Err() != nil })
				select {
				case m := <-done:
					require.Equal(t, want[m], bufs[m], "message %d", m)
				case <-ctx.Done():
					t.Fatal("receives did not complete")
				}
			}
			require.NoError(t, g.Wait())
			// Nothing left to wait for: Progress gives up after WaitSpin
			// without progress (at once when WaitSpin is off).
			require.False(t, p.eb.Progress(func() bool { return false }))
		})
	}
}
