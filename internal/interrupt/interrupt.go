// Package interrupt turns the signals that end a command-line run into a
// context, for the commands that must clean up when they stop (write their
// results, tear a namespace fabric down), and names the exit status such a
// run ends with.
package interrupt

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// Signal is the cause (context.Cause) of a context that Context ended: the
// signal that arrived. It matches context.Canceled under errors.Is, as the
// context's Err does.
type Signal struct{ Sig syscall.Signal }

// Error names the signal as the os/signal package's NotifyContext does
// ("terminated signal received").
func (s Signal) Error() string { return s.Sig.String() + " signal received" }

// Is reports whether target is context.Canceled.
func (s Signal) Is(target error) bool { return target == context.Canceled }

// Context returns a context that ends at the first SIGINT, SIGTERM (kill,
// systemd, CI timeouts) or SIGHUP (a closed terminal), with a Signal as its
// cause, and its stop function. After that first signal the default actions
// apply again, so that a second one stops a run that does not end at once.
// Call stop when done.
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		select {
		case s := <-ch:
			// The default actions first: a second signal from here on
			// ends the process.
			signal.Stop(ch)
			sig, ok := s.(syscall.Signal)
			if !ok {
				sig = syscall.SIGINT // os.Interrupt where it is no syscall.Signal
			}
			cancel(Signal{sig})
		case <-ctx.Done():
			signal.Stop(ch)
		}
	}()
	return ctx, func() {
		cancel(nil)
		signal.Stop(ch)
	}
}

// ExitStatus is the exit status of a run that ctx's end stopped, as a shell
// reports a command that a signal ended: 128 plus the signal's number when
// a Signal is the cause (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP),
// which is also what scripts around the commands use; 130, SIGINT's, for a
// context ended otherwise (a parent cancelled by the caller, which stands
// for Ctrl-C).
func ExitStatus(ctx context.Context) int {
	var s Signal
	if errors.As(context.Cause(ctx), &s) {
		return 128 + int(s.Sig)
	}
	return 128 + int(syscall.SIGINT)
}
