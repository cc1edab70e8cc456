package collectives

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTCPPostAfterShutdown: an op posted on a stream that has shut down
// fails at once. Before, about half of them went into a queue that the
// stream's goroutines had already drained and left, and the collective
// waited for them until it gave up.
func TestTCPPostAfterShutdown(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	s := newTCPStream(a, 1)
	s.shutdown()
	for i := range 200 {
		op := s.post(i%2 == 0, make([]byte, 8), nil)
		done, err := op.Test()
		require.True(t, done, "op %d posted after the shutdown is still pending", i)
		require.Error(t, err)
	}
}
