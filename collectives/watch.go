package collectives

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// setupWatch keeps the rendezvous connections open while the ranks connect
// to one another, so that a rank that exits or gives up in between is
// named to every other rank at once, instead of each of them waiting for
// its handshake until the setup deadline (Config.Timeout, 60 s by
// default).
//
// The rendezvous table ends the exchange of blobs; the connections stay.
// A rank other than 0 reports to rank 0, once it has connected to every
// peer, with an empty frame, or, when its own setup failed, with an abort
// frame that carries its error. Rank 0 waits for every report as well as
// for its own setup, then confirms with an empty frame of its own to
// every rank, which ends their setup: New succeeds on every rank or on
// none (but for a rank that dies in the instant between), a barrier.
//
// A connection that closes before its rank reported means that the rank
// exited: the kernel closes a dead process's sockets, so rank 0 learns of
// it within a round trip. Rank 0 then sends every rank an abort frame
// naming the rank and why, and each of them ends its setup with that
// error; a rank that sees rank 0's connection close before the setup was
// over fails the same way, naming rank 0. A host that vanishes without
// closing its connections is found by TCP keepalive (watchKeepAlive),
// about 10 s later.
type setupWatch struct {
	b   Bootstrap
	tag uint64
	// leaves are rank 0's connections, by rank (nil at 0); root is the
	// connection to rank 0 of any other rank.
	leaves []net.Conn
	root   net.Conn
}

// echoGrace is how long a rank whose own setup failed waits for rank 0's
// abort before it returns its own error as the cause (New may so take
// Config.Timeout and this much); a rank whose caller cancelled it does
// not wait (runLeaf). A variable for tests only.
var echoGrace = time.Second

// watchWrite bounds each write of the watch: a report or an abort is a
// few hundred bytes into an idle connection, and a peer that does not
// take it is treated as gone.
const watchWrite = 5 * time.Second

// watchKeepAlive is the TCP keepalive of the watch's connections: probes
// after 5 s of silence, every second, 5 unanswered ones ending the
// connection, so that a rank whose host vanishes (its kernel no longer
// answers) is found about 10 s later rather than at the setup deadline.
// A busy rank's kernel still answers, so a slow setup is not mistaken
// for a dead one.
var watchKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: time.Second, Count: 5}

// each calls f with every connection of the watch: rank 0's to the
// others, or another rank's to rank 0.
func (w *setupWatch) each(f func(c net.Conn)) {
	if w.root != nil {
		f(w.root)
	}
	for _, c := range w.leaves {
		if c != nil {
			f(c)
		}
	}
}

// keepAlive turns watchKeepAlive on for the watch's TCP connections, best
// effort.
func (w *setupWatch) keepAlive() {
	w.each(func(c net.Conn) {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetKeepAliveConfig(watchKeepAlive)
		}
	})
}

// close closes the watch's connections. A nil watch has none.
func (w *setupWatch) close() {
	if w != nil {
		w.each(func(c net.Conn) { c.Close() })
	}
}

// send writes a frame of this rank to c within watchWrite: a report or a
// confirmation (nranks the rank count, no entry) or an abort (abortRanks,
// the reason).
func (w *setupWatch) send(c net.Conn, nranks int, blobs ...[]byte) error {
	c.SetWriteDeadline(time.Now().Add(watchWrite))
	return writeFrame(c, w.b.Rank, nranks, w.tag, blobs...)
}

// run calls setup with a context that ends, with an error that names the
// rank concerned as its cause, as soon as the watch learns that another
// rank left or gave up; it returns that error rather than setup's
// "context canceled". It closes the connections before it returns. A nil
// watch (a job of one rank) runs setup alone.
func (w *setupWatch) run(ctx context.Context, setup func(context.Context) error) error {
	if w == nil {
		return setup(ctx)
	}
	defer w.close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if w.root != nil {
		return w.runLeaf(ctx, cancel, setup)
	}
	return w.runRoot(ctx, cancel, setup)
}

// errLeft marks the causes the watch gives: another rank ended the setup.
var errLeft = errors.New("another rank ended the setup")

// leftError wraps errLeft with its words, so that errors.Is finds it while
// the text stays the watch's own.
type leftError struct{ msg string }

func (e *leftError) Error() string { return e.msg }
func (e *leftError) Unwrap() error { return errLeft }

func leftf(format string, args ...any) error {
	return &leftError{msg: fmt.Sprintf(format, args...)}
}

// outcome returns setup's error, or the watch's cause where the watch
// ended the setup.
func outcome(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if c := context.Cause(ctx); errors.Is(c, errLeft) {
		return c
	}
	return err
}

// runLeaf is run on a rank other than 0.
func (w *setupWatch) runLeaf(ctx context.Context, cancel context.CancelCauseFunc, setup func(context.Context) error) error {
	b := w.b
	var ending, confirmed atomic.Bool
	heard := make(chan struct{})
	go func() {
		defer close(heard)
		f, err := readFrame(w.root, 1)
		switch {
		case err == nil && f.rank == 0 && f.nranks == b.NRanks && len(f.blobs) == 0:
			confirmed.Store(true)
		case ending.Load():
			// This rank closed the connection itself.
		case err == nil && f.nranks == abortRanks && len(f.blobs) == 1:
			cancel(leftf("collectives: setup: rank %d: rank 0 at %s gave the setup up: %s", b.Rank, b.Root, f.blobs[0]))
		default:
			if err == nil {
				err = fmt.Errorf("a frame of %d ranks and %d entries, neither a confirmation nor an abort", f.nranks, len(f.blobs))
			}
			cancel(leftf("collectives: setup: rank %d: rank 0's rendezvous connection at %s closed before the setup was over: rank 0 exited or failed (%v)", b.Rank, b.Root, err))
		}
	}()
	err := outcome(ctx, setup(ctx))
	if err != nil && !errors.Is(err, errLeft) {
		// This rank's own failure: rank 0 passes it on to the others.
		// It may be the echo of another's, though: rank 0 tells the
		// ranks why it gives up before it closes its endpoint, whose
		// closing (a refused dial) can still reach this rank's setup
		// first. Prefer rank 0's word where it follows soon. Not after
		// the caller's cancel: ctx's cause is then the caller's for
		// good, so rank 0's word could not take its place (outcome),
		// the cancel is the reason anyway, and the caller is owed its
		// return at once rather than echoGrace later.
		cancelled := callerCancelled(ctx)
		if cancelled {
			err = withCancelCause(ctx, err)
		}
		_ = w.send(w.root, abortRanks, abortText(err))
		if !cancelled {
			select {
			case <-heard:
			case <-time.After(echoGrace):
			}
			err = outcome(ctx, err)
		}
	}
	switch {
	case err == nil:
		// Connected to every peer: say so, then wait for rank 0 to
		// confirm that every rank did. Connecting is no proof that the
		// job's setup holds: a peer's kernel or event loop completes a
		// handshake that its rank, failing meanwhile, never takes up.
		if werr := w.send(w.root, b.NRanks); werr != nil {
			err = fmt.Errorf("collectives: setup: rank %d: connected to every peer, but cannot tell rank 0 at %s, which has left: %w", b.Rank, b.Root, werr)
			break
		}
		select {
		case <-heard:
		case <-ctx.Done():
		}
		if !confirmed.Load() {
			err = context.Cause(ctx)
			switch {
			case callerCancelled(ctx):
				err = fmt.Errorf("collectives: setup: rank %d: connected to every peer, but cancelled while waiting for rank 0 at %s to confirm that every rank did: %w", b.Rank, b.Root, ctxErr(ctx))
			case !errors.Is(err, errLeft):
				err = b.deadline.wrap(fmt.Errorf("collectives: setup: rank %d: connected to every peer, but rank 0 at %s did not confirm that every rank did %s: %w", b.Rank, b.Root, setupEnded(ctx, b), err), ctx.Err())
			}
			if !errors.Is(err, errLeft) {
				// Rank 0 must not confirm to the others now.
				_ = w.send(w.root, abortRanks, abortText(err))
			}
		}
	}
	ending.Store(true)
	w.root.Close()
	<-heard
	return err
}

// callerCancelled reports whether ctx, the context runLeaf gives the
// setup, was cancelled by New's caller: cancelled, and not by the watch,
// whose causes wrap errLeft (runLeaf's watch cancels with no other).
func callerCancelled(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && !errors.Is(context.Cause(ctx), errLeft)
}

// withCancelCause returns err, the error of a setup that the caller
// cancelled, wrapping the cancel's cause as well where the caller gave one
// (context.WithCancelCause) and err does not wrap it already: the links'
// errors carry ctx.Err() alone, which says that the setup was cancelled
// but not why.
func withCancelCause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && c != ctx.Err() && !errors.Is(err, c) {
		return fmt.Errorf("%w (the cancel's cause: %w)", err, c)
	}
	return err
}

// report is what rank 0 heard from one rank: nil once that rank connected
// to every peer, else why it did not.
type report struct {
	rank int
	err  error
}

// runRoot is run on rank 0.
func (w *setupWatch) runRoot(ctx context.Context, cancel context.CancelCauseFunc, setup func(context.Context) error) error {
	b := w.b
	// Each rank's reader passes on its report, then keeps reading: the
	// end of the connection, or an abort, before rank 0 confirms means
	// that the rank left after all. Two events at most per rank.
	reports := make(chan report, 2*len(w.leaves))
	var ending atomic.Bool
	for r, c := range w.leaves {
		if c == nil {
			continue
		}
		go func() {
			for said := false; ; said = true {
				f, err := readFrame(c, 1)
				switch {
				case ending.Load():
					return
				case err == nil && !said && f.rank == r && f.nranks == b.NRanks && len(f.blobs) == 0:
					reports <- report{r, nil} // connected to every peer
					continue
				case err == nil && f.rank == r && f.nranks == abortRanks && len(f.blobs) == 1:
					err = leftf("rank %d gave the setup up: %s", r, f.blobs[0])
				case err == nil:
					err = fmt.Errorf("rank %d sent a frame of rank %d, %d ranks and %d entries, not a report", r, f.rank, f.nranks, len(f.blobs))
				case said:
					err = leftf("rank %d (%v) left after it had connected to its peers, before rank 0 confirmed the setup: its rendezvous connection closed (%v)", r, c.RemoteAddr(), err)
				default:
					err = leftf("rank %d (%v) left before it had connected to its peers: its rendezvous connection closed (%v); it exited or failed", r, c.RemoteAddr(), err)
				}
				reports <- report{r, err}
				if b.gone != nil {
					b.gone(r)
				}
				return
			}
		}()
	}
	done := make(chan error, 1)
	go func() { done <- setup(ctx) }()
	reported := make([]bool, len(w.leaves))
	waiting := len(w.leaves) - 1
	var fail error
	fails := func(err error) {
		if fail != nil {
			return
		}
		if errors.Is(ctx.Err(), context.Canceled) && !errors.Is(err, errLeft) {
			// This rank's own error (its setup's, or its wait for
			// the reports) after a cancel, which is the caller's:
			// this watch cancels ctx only below, once fail is set.
			// (runLeaf's callerCancelled, which knows the watch's
			// cancels by their cause, errLeft, would not do here:
			// this watch cancels with this rank's own error too.)
			// The links' errors carry ctx.Err() alone: add the
			// cancel's cause, as runLeaf does.
			err = withCancelCause(ctx, err)
		}
		fail = err
		// Tell every rank, best effort (each learns it otherwise when
		// its rendezvous connection closes), before this rank's setup
		// stops and closes what the others dial. Those that reported
		// wait for the confirmation, and fail on this instead.
		w.each(func(c net.Conn) { _ = w.send(c, abortRanks, abortText(err)) })
		cancel(err)
	}
	setupDone := false
	for !setupDone || (waiting > 0 && fail == nil) {
		select {
		case rep := <-reports:
			if rep.err != nil {
				fails(leftf("collectives: setup: %v", rep.err))
			} else {
				reported[rep.rank] = true
				waiting--
			}
		case err := <-done:
			setupDone = true
			if err = outcome(ctx, err); err != nil {
				fails(err)
			}
		case <-ctx.Done():
			// The deadline, the caller's cancel, or the cancel of
			// fails. This rank's own setup ends with it, and its
			// error says more than the reports still missing.
			if !setupDone {
				setupDone = true
				if err := outcome(ctx, <-done); err != nil {
					fails(err)
				}
			}
			if fail == nil {
				missing := ranksWhere(1, len(w.leaves), func(r int) bool { return !reported[r] })
				if errors.Is(ctx.Err(), context.Canceled) {
					// The caller's cancel (fail is nil: not the
					// watch's), with its cause.
					fails(fmt.Errorf("collectives: setup: cancelled while ranks %s had not reported connecting to their peers: %w", rankList(missing), ctxErr(ctx)))
				} else {
					fails(b.deadline.wrap(fmt.Errorf("collectives: setup: ranks %s did not report connecting to their peers %s: %w", rankList(missing), setupEnded(ctx, b), context.Cause(ctx)), ctx.Err()))
				}
			}
		}
	}
	if fail == nil {
		// A rank that left since its report, found by now.
		for len(reports) > 0 {
			if rep := <-reports; rep.err != nil {
				fails(leftf("collectives: setup: %v", rep.err))
				break
			}
		}
	}
	ending.Store(true)
	if fail != nil {
		return fail
	}
	// Every rank connected to every peer: confirm it, which ends their
	// setup. A rank that leaves in the instant between finds the job
	// broken at its first collective.
	w.each(func(c net.Conn) { _ = w.send(c, b.NRanks) })
	return nil
}

// setupEnded is the words for when the watch's wait ended, ctx being done:
// "before the setup deadline of 1m0s (Config.Timeout) ran out" where New's
// deadline did (setupDeadline.ended), else "before the setup ended".
func setupEnded(ctx context.Context, b Bootstrap) string {
	if s := b.deadline.ended(ctx.Err()); s != "" {
		return s[1:]
	}
	return "before the setup ended"
}

// abortText is err's text for an abort frame, cut to what a frame's entry
// may hold (maxBlob).
func abortText(err error) []byte {
	t := []byte(err.Error())
	if len(t) > maxBlob {
		t = append(t[:maxBlob-3:maxBlob-3], "..."...)
	}
	return t
}
