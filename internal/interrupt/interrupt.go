// Package interrupt turns the signals that end a command-line run into a
// context, for the commands that must clean up when they stop (write their
// results, tear a namespace fabric down).
package interrupt

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Context returns a context that ends at the first SIGINT, SIGTERM (kill,
// systemd, CI timeouts) or SIGHUP (a closed terminal), and its stop
// function. After that first signal the default actions apply again, so that
// a second one stops a run that does not end at once. Call stop when done.
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
