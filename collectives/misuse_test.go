package collectives

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// TestMisuseRefused: calls with buffers that do not fit the collective, an
// invalid data type, more channels than the communicator has, or made while
// another call is in progress fail at once, on the calling rank alone, and
// leave the communicator usable (nothing was sent).
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
					{"broadcast sizes", "equal lengths", func() error { return c.Broadcast(ctx, b(3), b(4), dt, 0) }},
					{"sendrecv sizes", "equal lengths", func() error { return c.SendRecv(ctx, b(3), b(4), dt) }},
					{"invalid dtype", "invalid data type", func() error { return c.AllReduce(ctx, nil, b(4), reduce.DType(42), reduce.OpSum) }},
					{"channels", "the communicator has 2", func() error {
						return c.Run(ctx, sched.Config{Collective: sched.AllReduce, Count: 4, DType: dt, Op: reduce.OpSum, Channels: 4, InPlace: true}, nil, b(4))
					}},
					{"concurrent", "another collective is in progress", func() error {
						c.mu.Lock() // as a call of another goroutine holds it
						defer c.mu.Unlock()
						err := c.AllReduce(ctx, nil, b(4), dt, reduce.OpSum)
						if !errors.Is(err, ErrConcurrentUse) {
							return fmt.Errorf("not ErrConcurrentUse: %w", err)
						}
						return err
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
				}
				return c.Barrier(ctx)
			})
			require.NoError(t, err)
		})
	}
}
