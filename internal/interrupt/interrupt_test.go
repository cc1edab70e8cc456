package interrupt

import (
	"context"
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
