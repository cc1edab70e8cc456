package collectives

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRankLeavingAfterRendezvousFailsOthers: a rank that leaves between
// the rendezvous and the handshakes (it exits, its rendezvous connection
// closes without a report) or gives its setup up (it reports why) makes
// every other rank's New fail with an error that names it and says what
// happened, instead of each waiting for its handshake until the setup
// deadline. The impostor is rank 2 (which ranks 0 and 1 wait to dial
// them) or rank 0 (the rendezvous itself), over both transports; it runs
// the rendezvous with a real endpoint's description, then leaves. The
// deadline is far beyond the test: an error that only the deadline gave
// would not name the rank.
func TestRankLeavingAfterRendezvousFailsOthers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gone   int
		giveUp bool
		want   []string
	}{
		{"rank 2 exits", 2, false, []string{"rank 2 (", "left before it had connected to its peers", "it exited or failed"}},
		{"rank 2 gives up", 2, true, []string{"rank 2 gave the setup up: rank 2 cannot reach rank 1 (impostor)"}},
		{"rank 0 exits", 0, false, []string{"rank 0's rendezvous connection at", "closed before the setup was over"}},
		{"rank 0 gives up", 0, true, []string{"rank 0 at", "gave the setup up: rank 0 cannot reach rank 1 (impostor)"}},
	} {
		for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
			t.Run(tc.name+"/"+tr, func(t *testing.T) {
				root, err := freeLocalAddr()
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
				defer cancel()
				cfg := Config{Transport: tr, Timeout: 100 * time.Second}
				errs := make(chan error, 3)
				for r := range 3 {
					if r == tc.gone {
						continue
					}
					go func() {
						c, err := New(ctx, Bootstrap{Rank: r, NRanks: 3, Root: root, Source: "test"}, cfg)
						if c != nil {
							c.Close()
						}
						errs <- err
					}()
				}
				// The impostor: a real description, then it leaves.
				full, err := cfg.withDefaults()
				require.NoError(t, err)
				var f linkFactory
				if tr == TransportTCP {
					f, err = newTCPFactory(full)
				} else {
					f, err = newMetaroceFactory(full)
				}
				require.NoError(t, err)
				_, w, err := exchangeWatched(ctx, Bootstrap{Rank: tc.gone, NRanks: 3, Root: root, Source: "test"}, settingsBlob(full, f.blob()))
				require.NoError(t, err)
				if tc.giveUp {
					err := w.run(ctx, func(context.Context) error {
						return fmt.Errorf("rank %d cannot reach rank 1 (impostor)", tc.gone)
					})
					assert.ErrorContains(t, err, "impostor")
				} else {
					w.close()
				}
				f.abort()
				for range 2 {
					err := recv(ctx, t, errs, "the other ranks' New")
					require.Error(t, err)
					for _, s := range tc.want {
						assert.ErrorContains(t, err, s)
					}
					assert.True(t, errors.Is(err, errLeft), "%v", err)
					assert.NotErrorIs(t, err, context.DeadlineExceeded)
				}
			})
		}
	}
}

// TestWatchReportsEveryRank: with every rank setting up, the watch
// returns nil everywhere, and no rank returns before the last one
// connected (a barrier: rank 0 confirms only once every rank reported).
func TestWatchReportsEveryRank(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 4
	release, started := make(chan struct{}), make(chan struct{})
	errs := make(chan error, n)
	for r := range n {
		go func() {
			_, w, err := exchangeWatched(ctx, Bootstrap{Rank: r, NRanks: n, Root: root, Source: "test"}, []byte{byte(r)})
			if err == nil {
				err = w.run(ctx, func(context.Context) error {
					if r == n-1 {
						close(started) // past the rendezvous
						<-release      // but slow to connect
					}
					return nil
				})
			}
			errs <- err
		}()
	}
	<-started
	select {
	case err := <-errs:
		t.Fatalf("a rank returned (%v) before rank %d connected", err, n-1)
	case <-time.After(100 * time.Millisecond):
		// Not a proof, a chance to catch a rank returning early.
	}
	close(release)
	for range n {
		require.NoError(t, recv(ctx, t, errs, "a rank's setup"))
	}
}

// TestRankLeavingAfterReportFailsOthers: a rank that reported connecting
// to its peers and then leaves before rank 0 confirmed (its deadline came
// first, or it died) fails the setup everywhere: rank 0 does not confirm,
// and the rank that had been slowest to connect fails too, instead of
// succeeding into a job with a rank missing.
func TestRankLeavingAfterReportFailsOthers(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 3
	release := make(chan struct{})
	errs := make(chan error, n)
	// Rank 1 connects once rank 0 has seen rank 2 leave: before that,
	// rank 0 may confirm in the instant between, which the watch allows.
	gone := make(chan int, n)
	for r := range n - 1 {
		go func() {
			b := Bootstrap{Rank: r, NRanks: n, Root: root, Source: "test"}
			if r == 0 {
				b.gone = func(r int) { gone <- r }
			}
			_, w, err := exchangeWatched(ctx, b, []byte{byte(r)})
			if err == nil {
				err = w.run(ctx, func(context.Context) error {
					if r == 1 {
						<-release // slow to connect
					}
					return nil
				})
			}
			errs <- err
		}()
	}
	// Rank 2 reports, then leaves.
	_, w, err := exchangeWatched(ctx, Bootstrap{Rank: 2, NRanks: n, Root: root, Source: "test"}, []byte{2})
	require.NoError(t, err)
	require.NoError(t, writeFrame(w.root, 2, n, w.tag))
	w.close()
	require.Equal(t, 2, recv(ctx, t, gone, "rank 0 seeing rank 2 leave"))
	close(release)
	for range n - 1 {
		err := recv(ctx, t, errs, "a rank's setup")
		require.Error(t, err)
		assert.ErrorContains(t, err, "rank 2 (")
		assert.ErrorContains(t, err, "left after it had connected to its peers, before rank 0 confirmed the setup")
		assert.ErrorIs(t, err, errLeft)
	}
}

// TestAbortTextFitsAFrame: an error longer than a frame entry is cut to
// fit, so that the frame still reads.
func TestAbortTextFitsAFrame(t *testing.T) {
	long := errors.New(string(make([]byte, 3*maxBlob)))
	assert.Len(t, abortText(long), maxBlob)
	assert.Equal(t, "short", string(abortText(errors.New("short"))))
}

// TestWatchKeepAlive: the watch's connections probe a silent peer after
// 5 s, every second, 5 times (watchKeepAlive), on both sides.
func TestWatchKeepAlive(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := make(chan *setupWatch, 2)
	for r := range 2 {
		go func() {
			_, w, err := exchangeWatched(ctx, Bootstrap{Rank: r, NRanks: 2, Root: root, Source: "test"}, []byte{byte(r)})
			assert.NoError(t, err)
			ws <- w
		}()
	}
	for range 2 {
		w := recv(ctx, t, ws, "a rank's rendezvous")
		require.NotNil(t, w)
		conns := append([]net.Conn{w.root}, w.leaves...)
		for _, c := range conns {
			if c == nil {
				continue
			}
			raw, err := c.(*net.TCPConn).SyscallConn()
			require.NoError(t, err)
			require.NoError(t, raw.Control(func(fd uintptr) {
				for opt, want := range map[int]int{unix.TCP_KEEPIDLE: 5, unix.TCP_KEEPINTVL: 1, unix.TCP_KEEPCNT: 5} {
					got, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, opt)
					assert.NoError(t, err)
					assert.Equal(t, want, got, "option %d", opt)
				}
				on, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
				assert.NoError(t, err)
				assert.Equal(t, 1, on)
			}))
		}
		w.close()
	}
}

// TestWatchDeadlineNamed: when New's setup deadline ends the watch's wait
// for the other ranks' reports (at rank 0) or for rank 0's confirmation
// (at the others), the error names the deadline and its value, as the
// rendezvous' errors do. Before, it said "before the setup ended".
func TestWatchDeadlineNamed(t *testing.T) {
	for _, r := range []int{0, 1} {
		t.Run(fmt.Sprintf("rank %d", r), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Rank r runs its watch under a short deadline; the other
			// rank joins the rendezvous and then says nothing.
			const d = 150 * time.Millisecond
			w0, w1, root := watchedPair(ctx, t, setupDeadline{d: d})
			mine := []*setupWatch{w0, w1}[r]
			wctx, wcancel := context.WithTimeout(ctx, d)
			defer wcancel()
			err := mine.run(wctx, func(context.Context) error { return nil })
			require.ErrorIs(t, err, context.DeadlineExceeded)
			want := "ranks [1] did not report connecting to their peers before the setup deadline of 150ms (Config.Timeout) ran out: "
			if r == 1 {
				want = "rank 1: connected to every peer, but rank 0 at " + root + " did not confirm that every rank did before the setup deadline of 150ms (Config.Timeout) ran out: "
			}
			require.ErrorContains(t, err, want)
		})
	}
}

// TestWatchLeafCancelReturnsAtOnce: a rank other than 0 whose caller
// cancels its setup after the rendezvous returns at once with the cancel
// and its cause, and tells rank 0 why; it does not wait for rank 0 to
// answer, whose word could not replace the cancel as the reason. Before,
// it waited up to echoGrace (a second; an hour here, with a rank 0 that
// never answers) for rank 0's echo, and its error lacked the cause. The
// same while it waits for rank 0's confirmation, having connected.
func TestWatchLeafCancelReturnsAtOnce(t *testing.T) {
	defer func(g time.Duration) { echoGrace = g }(echoGrace)
	echoGrace = time.Hour
	for _, connected := range []bool{false, true} {
		t.Run(fmt.Sprintf("connected %v", connected), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w0, w1, root := watchedPair(ctx, t, setupDeadline{})
			var err error
			// Rank 0 is the test: it reads what rank 1 says and never
			// answers.
			lctx, lcancel := context.WithCancelCause(ctx)
			defer lcancel(nil)
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- w1.run(lctx, func(ctx context.Context) error {
					close(started)
					if connected {
						return nil
					}
					<-ctx.Done()
					return fmt.Errorf("rank 1 waiting for ranks above it to connect: %w", ctx.Err())
				})
			}()
			<-started
			if connected {
				f, err := readFrame(w0.leaves[1], 1)
				require.NoError(t, err)
				require.Equal(t, 2, f.nranks, "rank 1's report")
			}
			cause := errors.New("the operator stopped the job")
			lcancel(cause)
			err = recv(ctx, t, done, "rank 1's return")
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, err, cause)
			want := "rank 1 waiting for ranks above it to connect: context canceled (the cancel's cause: the operator stopped the job)"
			if connected {
				want = "rank 1: connected to every peer, but cancelled while waiting for rank 0 at " + root + " to confirm that every rank did: context canceled: the operator stopped the job"
			}
			require.ErrorContains(t, err, want)
			f, err := readFrame(w0.leaves[1], 1)
			require.NoError(t, err)
			require.Equal(t, abortRanks, f.nranks, "rank 1's abort")
			require.Len(t, f.blobs, 1)
			require.Contains(t, string(f.blobs[0]), "the operator stopped the job")
		})
	}
}

// TestWatchRootCancelWrapsCause: rank 0 whose caller cancels its setup
// after the rendezvous returns the cancel with its cause, and tells the
// other ranks why, while its own setup still runs (whose error, as the
// links', carries "context canceled" alone) and once it has connected and
// waits for the others' reports. Before, its error lacked the cause in
// the first case, and in the second wrapped the cause but not
// context.Canceled, saying the ranks "did not report ... before the setup
// ended". Rank 0's own failure, after which its watch cancels the setup
// itself, is not taken for a cancel.
func TestWatchRootCancelWrapsCause(t *testing.T) {
	const own = "rank 0 cannot open its endpoint"
	for _, tc := range []struct {
		name string
		// setup is rank 0's setup, started: it waits for the cancel,
		// returns at once, or fails on its own.
		setup func(ctx context.Context) error
		want  string
	}{
		{"connecting", func(ctx context.Context) error {
			<-ctx.Done()
			return fmt.Errorf("rank 0 waiting for ranks above it to connect: %w", ctx.Err())
		}, "rank 0 waiting for ranks above it to connect: context canceled (the cancel's cause: the operator stopped the job)"},
		{"connected", func(context.Context) error { return nil },
			"collectives: setup: cancelled while ranks [1] had not reported connecting to their peers: context canceled: the operator stopped the job"},
		{"failed", func(context.Context) error { return errors.New(own) }, own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w0, w1, _ := watchedPair(ctx, t, setupDeadline{})
			var err error
			// Rank 1 is the test: it never reports, and reads what
			// rank 0 says.
			rctx, rcancel := context.WithCancelCause(ctx)
			defer rcancel(nil)
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- w0.run(rctx, func(ctx context.Context) error {
					close(started)
					return tc.setup(ctx)
				})
			}()
			<-started
			cause := errors.New("the operator stopped the job")
			if tc.name == "failed" {
				// Rank 0 gives up on its own, and its watch cancels
				// the setup; the caller does not.
				err = recv(ctx, t, done, "rank 0's return")
				require.EqualError(t, err, own)
			} else {
				rcancel(cause)
				err = recv(ctx, t, done, "rank 0's return")
				require.ErrorIs(t, err, context.Canceled)
				require.ErrorIs(t, err, cause)
				require.ErrorContains(t, err, tc.want)
			}
			f, err := readFrame(w1.root, 1)
			require.NoError(t, err)
			require.Equal(t, abortRanks, f.nranks, "rank 0's abort")
			require.Len(t, f.blobs, 1)
			require.Contains(t, string(f.blobs[0]), tc.want)
		})
	}
}

// watchedPair runs the rendezvous of two ranks on a free loopback address,
// root, each with its setup watch and setup as New's deadline, and returns
// rank 0's and rank 1's watches, which are closed when the test ends, and
// root.
func watchedPair(ctx context.Context, t *testing.T, setup setupDeadline) (w0, w1 *setupWatch, root string) {
	t.Helper()
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ws := make(chan *setupWatch, 2)
	for r := range 2 {
		go func() {
			_, w, err := exchangeWatched(ctx, Bootstrap{Rank: r, NRanks: 2, Root: root, Source: "test", deadline: setup}, []byte{byte(r)})
			assert.NoError(t, err)
			ws <- w
		}()
	}
	for range 2 {
		w := recv(ctx, t, ws, "a rank's rendezvous")
		require.NotNil(t, w)
		t.Cleanup(w.close)
		if w.b.Rank == 0 {
			w0 = w
		} else {
			w1 = w
		}
	}
	return w0, w1, root
}
