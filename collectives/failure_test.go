package collectives

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// Calls whose plans hold more messages per stream than a link queues: the
// executor posts at most maxStreamDepth of a stream at a time. Before, the
// TCP baseline hung (its stream queue of 1024 filled on both sides before any
// byte moved) and MetaRoCE failed with its 4096-receive limit.
func TestManyMessagesPerStream(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			// 4-byte chunks: one message per element per ring step.
			cfg := Config{Transport: tr, Timeout: 30 * time.Second, ChunkBytes: 4, Channels: 1}
			const n, cnt = 2, 4200
			err := LaunchLocal(context.Background(), n, cfg, func(c *Comm) error {
				send := fill(reduce.Int32, cnt, func(i int) float64 { return value(c.Rank(), i) })
				recv := make([]byte, n*len(send))
				if err := c.AllGather(context.Background(), send, recv, reduce.Int32); err != nil {
					return err
				}
				if !bytes.Equal(recv, reference(sched.AllGather, reduce.Int32, reduce.OpSum, n, c.Rank(), cnt, 0)) {
					return fmt.Errorf("rank %d: all-gather differs from the reference", c.Rank())
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// NCCL's in-place layouts, where one buffer is a block of the other, give
// the right result; any other partial overlap is refused instead of
// computing from bytes the call already overwrote.
func TestPartlyOverlappingBuffers(t *testing.T) {
	const n, cnt = 3, 5
	dt := reduce.Int32
	err := LaunchLocal(context.Background(), n, Config{Timeout: 10 * time.Second}, func(c *Comm) error {
		r := c.Rank()
		ctx := context.Background()
		blk := cnt * dt.Size()

		// Reduce-scatter: recv = send[r×cnt:(r+1)×cnt].
		send := fill(dt, n*cnt, func(i int) float64 { return value(r, i) })
		recv := send[r*blk : (r+1)*blk]
		if err := c.ReduceScatter(ctx, send, recv, dt, reduce.OpSum); err != nil {
			return err
		}
		if want := reference(sched.ReduceScatter, dt, reduce.OpSum, n, r, cnt, 0); !bytes.Equal(recv, want) {
			return fmt.Errorf("rank %d: in-place reduce-scatter in NCCL's layout: got % x, want % x", r, recv, want)
		}

		// All-gather: send = recv[r×cnt:(r+1)×cnt].
		all := make([]byte, n*blk)
		copy(all[r*blk:], fill(dt, cnt, func(i int) float64 { return value(r, i) }))
		if err := c.AllGather(ctx, all[r*blk:(r+1)*blk], all, dt); err != nil {
			return err
		}
		if !bytes.Equal(all, reference(sched.AllGather, dt, reduce.OpSum, n, r, cnt, 0)) {
			return fmt.Errorf("rank %d: in-place all-gather in NCCL's layout differs from the reference", r)
		}

		// Overlaps that are no in-place layout: refused, and the
		// communicator stays usable.
		buf := make([]byte, 2*n*blk)
		for _, call := range []struct {
			name string
			run  func() error
		}{
			{"allreduce", func() error { return c.AllReduce(ctx, buf[4:4+blk], buf[:blk], dt, reduce.OpSum) }},
			{"alltoall", func() error { return c.AllToAll(ctx, buf[blk:blk+n*blk], buf[:n*blk], dt) }},
			{"allgather", func() error { return c.AllGather(ctx, buf[4:4+blk], buf[:n*blk], dt) }},
			{"reducescatter", func() error { return c.ReduceScatter(ctx, buf[:n*blk], buf[4:4+blk], dt, reduce.OpSum) }},
		} {
			if err := call.run(); err == nil || !strings.Contains(err.Error(), "overlap") {
				return fmt.Errorf("rank %d: %s with partly overlapping buffers: %v, want an overlap error", r, call.name, err)
			}
		}
		return c.Barrier(ctx)
	})
	require.NoError(t, err)
}

// Ranks that disagree on the count get an error on both sides, never a
// success with a half-filled buffer.
func TestRanksDisagreeOnCount(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			var mu sync.Mutex
			errs := map[int]error{}
			LaunchLocal(context.Background(), 2, Config{Transport: tr, Timeout: 10 * time.Second}, func(c *Comm) error {
				cnt := 8 << c.Rank() // rank 0: 8 elements, rank 1: 16
				send := fill(reduce.Int32, cnt, func(i int) float64 { return 1 })
				err := c.SendRecv(context.Background(), send, make([]byte, len(send)), reduce.Int32)
				mu.Lock()
				errs[c.Rank()] = err
				mu.Unlock()
				return err
			})
			// Rank 0's receive is too small for rank 1's message; rank 1
			// expects 64 bytes and gets 32 (ErrMismatch), unless the first
			// failure reached it first.
			require.Error(t, errs[0])
			require.Error(t, errs[1])
		})
	}
}

// A call that fails leaves nothing posted behind it: once it returned, no
// peer's data lands in the caller's buffer any more, and the peers learn at
// once that the rank left.
func TestFailedCallStopsWritingIntoBuffers(t *testing.T) {
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			returned, peerDone := make(chan struct{}), make(chan struct{})
			var late, peerErr error
			LaunchLocal(context.Background(), 2, Config{Transport: tr, Timeout: 20 * time.Second}, func(c *Comm) error {
				send := fill(reduce.Int32, 1024, func(int) float64 { return 7 })
				recv := make([]byte, len(send))
				if c.Rank() == 1 {
					<-returned // calls only after rank 0 gave up
					start := time.Now()
					peerErr = c.SendRecv(context.Background(), send, recv, reduce.Int32)
					if time.Since(start) > 15*time.Second {
						peerErr = fmt.Errorf("rank 1 learned of rank 0's failure only at its own deadline: %w", peerErr)
					}
					close(peerDone)
					return nil
				}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				err := c.SendRecv(ctx, send, recv, reduce.Int32)
				switch {
				case !errors.Is(err, context.DeadlineExceeded):
					late = fmt.Errorf("rank 0: want the caller's deadline, got %v", err)
				case !strings.Contains(err.Error(), "caller's deadline"):
					late = fmt.Errorf("rank 0: the error does not say whose deadline passed: %v", err)
				}
				clear(recv)
				close(returned)
				<-peerDone
				if i := bytes.IndexFunc(recv, func(r rune) bool { return r != 0 }); i >= 0 && late == nil {
					late = fmt.Errorf("rank 0: byte %d of recv was written after the failed call returned", i)
				}
				return nil
			})
			require.NoError(t, late)
			require.Error(t, peerErr, "rank 1's SendRecv cannot succeed without rank 0")
		})
	}
}

// A connection to the rendezvous that never says hello (a port scan, a
// stopped process) does not hold up the ranks that do.
func TestBootstrapSilentConnection(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := exchange(ctx, Bootstrap{Rank: 0, NRanks: 2, Root: root, Source: "test"}, []byte("zero"))
		done <- err
	}()
	var silent net.Conn
	for silent == nil {
		if silent, err = net.Dial("tcp", root); err != nil {
			select {
			case <-ctx.Done():
				t.Fatalf("rank 0 never listened on %s: %v", root, err)
			case <-time.After(10 * time.Millisecond): // retry until rank 0 listens
			}
		}
	}
	defer silent.Close()
	start := time.Now()
	blobs, err := exchange(ctx, Bootstrap{Rank: 1, NRanks: 2, Root: root, Source: "test"}, []byte("one"))
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("zero"), []byte("one")}, blobs)
	require.NoError(t, <-done)
	require.Less(t, time.Since(start), helloWait, "rank 0 waited out the silent connection's hello")
}
