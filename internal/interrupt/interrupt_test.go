package interrupt

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFirstSignalEndsContext: a SIGHUP sent to this process ends the
// context (and is not delivered with its default action, which would end
// the test binary).
func TestFirstSignalEndsContext(t *testing.T) {
	ctx, stop := Context(context.Background())
	defer stop()
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGHUP))
	<-ctx.Done()
	require.ErrorIs(t, ctx.Err(), context.Canceled)
}

// TestExitStatusNamesTheSignal: each signal that ends the context is its
// cause, and the exit status is 128 plus its number, the shell's
// convention that the GPU check scripts follow (130, 143, 129). Before,
// the commands exited 130 whichever of the three it was.
func TestExitStatusNamesTheSignal(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		want int
		text string
	}{
		{syscall.SIGINT, 130, "interrupt signal received"},
		{syscall.SIGTERM, 143, "terminated signal received"},
		{syscall.SIGHUP, 129, "hangup signal received"},
	} {
		t.Run(c.sig.String(), func(t *testing.T) {
			ctx, stop := Context(context.Background())
			defer stop()
			require.NoError(t, syscall.Kill(syscall.Getpid(), c.sig))
			<-ctx.Done()
			cause := context.Cause(ctx)
			require.Equal(t, Signal{c.sig}, cause)
			require.EqualError(t, cause, c.text)
			require.True(t, errors.Is(cause, context.Canceled))
			require.Equal(t, c.want, ExitStatus(ctx))
		})
	}
}

// TestExitStatusWithoutSignal: a context its caller cancelled, which
// stands for Ctrl-C, gives SIGINT's status.
func TestExitStatusWithoutSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, 130, ExitStatus(ctx))
	ctx, stop := Context(context.Background())
	stop()
	require.Equal(t, 130, ExitStatus(ctx))
}
