package collectives

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireDeadlineError checks that err, the error of a setup that its
// deadline ended, wraps that deadline as a *DeadlineError with want's
// fields, that its text names it in the DeadlineError's words, so that a
// program may put its own setting's name in their place (Named), and that
// it wraps context.DeadlineExceeded.
func requireDeadlineError(t *testing.T, err error, want DeadlineError) {
	t.Helper()
	var d *DeadlineError
	require.ErrorAs(t, err, &d, "%v", err)
	assert.Equal(t, want.Timeout, d.Timeout, "Timeout")
	assert.Equal(t, want.Caller, d.Caller, "Caller")
	assert.Equal(t, "Config.Timeout", d.Field, "Field")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), d.Error())
	renamed := strings.ReplaceAll(err.Error(), d.Error(), d.Named("-T"))
	if want.Caller {
		assert.Equal(t, err.Error(), renamed, "the caller's deadline names no setting")
	} else {
		assert.Contains(t, renamed, "-T")
		assert.NotContains(t, renamed, "Config.Timeout")
	}
}

// TestDeadlineErrorWords: DeadlineError names the deadline by Field, or,
// through Named, by the caller's setting; the caller's deadline by none.
func TestDeadlineErrorWords(t *testing.T) {
	d := &DeadlineError{Timeout: time.Minute, Field: "Config.Timeout"}
	assert.EqualError(t, d, "the setup deadline of 1m0s (Config.Timeout)")
	assert.Equal(t, "the setup deadline of 1m0s (-T)", d.Named("-T"))
	assert.ErrorIs(t, d, context.DeadlineExceeded)
	c := &DeadlineError{Timeout: 500 * time.Millisecond, Caller: true, Field: "Config.Timeout"}
	assert.EqualError(t, c, "the caller's deadline (500ms after New began)")
	assert.Equal(t, c.Error(), c.Named("-T"))
	e := &DeadlineError{Timeout: 45 * time.Second, Field: "Config.Timeout", either: true}
	assert.EqualError(t, e, "the setup deadline (Config.Timeout, 45s, or the caller's own)")
	assert.Equal(t, "the setup deadline (-T, 45s, or the caller's own)", e.Named("-T"))
}

// TestSetupDeadlineErrorType: every error of a setup that its deadline
// ended wraps that deadline as a *DeadlineError (requireDeadlineError):
// the rendezvous' at rank 0 and at a rank that dials rank 0, waits for its
// table or was turned away by another job; the connections' over both
// transports, waiting for the ranks above and dialing the ranks below;
// the watch's waits for the reports (rank 0) and for rank 0's
// confirmation (the others); and New's, end to end. Before, they named
// the deadline in their text alone, which a program that names the
// setting otherwise (mrbench's -T) could only match as text. A setup that
// the caller cancelled wraps none.
func TestSetupDeadlineErrorType(t *testing.T) {
	const d = 150 * time.Millisecond
	setup := setupDeadline{d: d}
	caller := setupDeadline{d: d, caller: true}
	wantSetup := DeadlineError{Timeout: d}
	wantCaller := DeadlineError{Timeout: d, Caller: true}
	deadline := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}

	t.Run("rendezvous/rank 0", func(t *testing.T) {
		root, err := freeLocalAddr()
		require.NoError(t, err)
		_, err = exchange(deadline(t), Bootstrap{Rank: 0, NRanks: 2, Root: root, Source: "test", deadline: setup}, []byte("zero"))
		requireDeadlineError(t, err, wantSetup)
		require.ErrorContains(t, err, "never joined the rendezvous")
	})
	t.Run("rendezvous/dialing rank 0", func(t *testing.T) {
		root, err := freeLocalAddr() // closed: every dial is refused
		require.NoError(t, err)
		_, err = exchange(deadline(t), Bootstrap{Rank: 1, NRanks: 2, Root: root, Source: "test", deadline: caller}, []byte("one"))
		requireDeadlineError(t, err, wantCaller)
		require.ErrorContains(t, err, "could not reach rank 0's rendezvous")
	})
	t.Run("rendezvous/waiting for the table", func(t *testing.T) {
		defer func(g time.Duration) { echoGrace = g }(echoGrace)
		echoGrace = time.Millisecond
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		go func() {
			// Rank 0 takes the hello and never answers.
			if c, err := ln.Accept(); err == nil {
				defer c.Close()
				_, _ = readFrame(c, 1)
				_, _ = readFrame(c, 1) // until rank 1 closes
			}
		}()
		// A longer deadline than d, so that the rank has reached rank 0
		// before it ends, even on a busy host.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err = exchange(ctx, Bootstrap{Rank: 1, NRanks: 2, Root: ln.Addr().String(), Source: "test", deadline: setup}, []byte("one"))
		requireDeadlineError(t, err, wantSetup)
		require.ErrorContains(t, err, "waiting for the table from rank 0")
	})
	t.Run("rendezvous/turned away by another job", func(t *testing.T) {
		past, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
		defer cancel()
		err := otherJobErr(past, Bootstrap{Rank: 1, Root: "h:1", deadline: setup}, errOtherJob)
		requireDeadlineError(t, err, wantSetup)
		require.ErrorIs(t, err, errOtherJob)
	})

	for _, tr := range []string{TransportTCP, TransportMetaRoCE} {
		cfg, err := Config{Transport: tr, Timeout: 45 * time.Second, Channels: 1}.withDefaults()
		require.NoError(t, err)
		open := func(t *testing.T) linkFactory {
			f, err := newLinkFactory(cfg)
			require.NoError(t, err)
			t.Cleanup(f.abort)
			return f
		}
		t.Run("connect/"+tr+"/waiting for the ranks above", func(t *testing.T) {
			f, peer := open(t), open(t)
			_, err := f.connect(deadline(t), 0, [][]byte{f.blob(), peer.blob()}, setup)
			requireDeadlineError(t, err, wantSetup)
			require.ErrorContains(t, err, "waiting for ranks above it to connect")
		})
		t.Run("connect/"+tr+"/dialing the ranks below", func(t *testing.T) {
			// As in TestConnectDeadlineNamed: a silent rank below over
			// MetaRoCE; a deadline already past over TCP, whose dial
			// the kernel completes.
			f := open(t)
			below, ctx := silentPeer(t), deadline(t)
			if tr == TransportTCP {
				below = open(t).blob()
				past, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
				t.Cleanup(cancel)
				ctx = past
			}
			_, err := f.connect(ctx, 1, [][]byte{below, f.blob()}, caller)
			requireDeadlineError(t, err, wantCaller)
			require.ErrorContains(t, err, "rank 1 connecting to rank 0 at ")
		})
	}
	t.Run("connect/metaroce/dialing outside New", func(t *testing.T) {
		// No deadline to name: Config.Timeout's or the caller's.
		cfg, err := Config{Timeout: 45 * time.Second}.withDefaults()
		require.NoError(t, err)
		f, err := newMetaroceFactory(cfg)
		require.NoError(t, err)
		defer f.abort()
		_, err = f.connect(deadline(t), 1, [][]byte{silentPeer(t), f.blob()}, setupDeadline{})
		requireDeadlineError(t, err, DeadlineError{Timeout: 45 * time.Second})
		var de *DeadlineError
		require.ErrorAs(t, err, &de)
		require.Equal(t, "the setup deadline (-T, 45s, or the caller's own)", de.Named("-T"))
	})

	for _, r := range []int{0, 1} {
		t.Run(fmt.Sprintf("watch/rank %d", r), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			w0, w1, _ := watchedPair(ctx, t, setup)
			mine := []*setupWatch{w0, w1}[r]
			// The other rank joined the rendezvous and says nothing.
			err := mine.run(deadline(t), func(context.Context) error { return nil })
			requireDeadlineError(t, err, wantSetup)
		})
	}

	t.Run("New", func(t *testing.T) {
		err := LaunchLocal(context.Background(), 2, Config{Transport: TransportTCP, Timeout: time.Nanosecond}, func(*Comm) error { return nil })
		requireDeadlineError(t, err, DeadlineError{Timeout: time.Nanosecond})
	})

	t.Run("cancelled", func(t *testing.T) {
		root, err := freeLocalAddr()
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = exchange(ctx, Bootstrap{Rank: 0, NRanks: 2, Root: root, Source: "test", deadline: setup}, []byte("zero"))
		require.ErrorIs(t, err, context.Canceled)
		var de *DeadlineError
		require.False(t, errors.As(err, &de), "%v", err)
	})
}
