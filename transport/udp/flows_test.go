package udp

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

func TestManyFlowsConcurrently(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	const flows, msgs = 16, 8
	var g errgroup.Group
	for f := uint32(0); f < flows; f++ {
		g.Go(func() error {
			for m := 0; m < msgs; m++ {
				msg := pattern(int(f)*10000+m*777, byte(f*31+uint32(m)))
				buf := make([]byte, len(msg))
				rr, err := p.b.Recv(f, [][]byte{buf}, []uint32{f})
				if err != nil {
					return err
				}
				sr, err := p.a.Send(f, msg, f)
				if err != nil {
					return err
				}
				if err := sr.Wait(ctx); err != nil {
					return err
				}
				if err := rr.Wait(ctx); err != nil {
					return err
				}
				if !bytes.Equal(buf, msg) {
					return fmt.Errorf("flow %d message %d differs", f, m)
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

// TestFlowOrder posts several receives on one flow and checks that messages
// fill them in posting order (docs/spec.md §3.4).
func TestFlowOrder(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	const n = 20
	var rrs []*Request
	var bufs [][]byte
	for i := 0; i < n; i++ {
		b := make([]byte, 5000)
		bufs = append(bufs, b)
		rr, err := p.b.Recv(3, [][]byte{b}, []uint32{0})
		require.NoError(t, err)
		rrs = append(rrs, rr)
	}
	var srs []*Request
	for i := 0; i < n; i++ {
		sr, err := p.a.Send(3, pattern(1000+i*100, byte(i)), 0)
		require.NoError(t, err)
		srs = append(srs, sr)
	}
	for i := 0; i < n; i++ {
		require.NoError(t, srs[i].Wait(ctx))
		require.NoError(t, rrs[i].Wait(ctx))
		require.Equal(t, 1000+i*100, rrs[i].Sizes()[0])
		require.Equal(t, pattern(1000+i*100, byte(i)), bufs[i][:1000+i*100])
	}
}

func TestGroupedReceiveTags(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	tags := []uint32{7, 3, 11, 5}
	bufs := make([][]byte, len(tags))
	for i := range bufs {
		bufs[i] = make([]byte, 100000)
	}
	rr, err := p.b.Recv(1, bufs, tags)
	require.NoError(t, err)
	// Send in a different order than posted: the tag selects the buffer.
	order := []int{2, 0, 3, 1}
	var srs []*Request
	for _, i := range order {
		sr, err := p.a.Send(1, pattern(1000*(i+1), byte(i)), tags[i])
		require.NoError(t, err)
		srs = append(srs, sr)
	}
	for _, sr := range srs {
		require.NoError(t, sr.Wait(ctx))
	}
	require.NoError(t, rr.Wait(ctx))
	require.Equal(t, []int{1000, 2000, 3000, 4000}, rr.Sizes())
	for i := range bufs {
		require.Equal(t, pattern(1000*(i+1), byte(i)), bufs[i][:1000*(i+1)], "buffer %d", i)
	}
}

func TestRecvArgumentErrors(t *testing.T) {
	p := newPair(t, Config{})
	b := make([]byte, 10)
	tests := []struct {
		name string
		bufs [][]byte
		tags []uint32
	}{
		{"empty", nil, nil},
		{"nine buffers", [][]byte{b, b, b, b, b, b, b, b, b}, make([]uint32, 9)},
		{"tag count", [][]byte{b, b}, []uint32{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.a.Recv(0, tc.bufs, tc.tags)
			require.Error(t, err)
		})
	}
}

// TestMessageTooLarge checks that a message longer than the posted buffer
// fails on both sides with ErrMessageTooLarge, and that the flow then
// carries the next message normally.
func TestMessageTooLarge(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	small := make([]byte, 1000)
	rr, err := p.b.Recv(4, [][]byte{small}, []uint32{1})
	require.NoError(t, err)
	sr, err := p.a.Send(4, pattern(5000, 1), 1)
	require.NoError(t, err)
	serr, rerr := sr.Wait(ctx), rr.Wait(ctx)
	require.ErrorIs(t, serr, transport.ErrMessageTooLarge)
	require.ErrorIs(t, rerr, transport.ErrMessageTooLarge)
	for _, err := range []error{serr, rerr} {
		var pe *PeerError
		require.True(t, errors.As(err, &pe), "%v", err)
		require.Contains(t, err.Error(), "127.0.0.1:")
		require.Contains(t, err.Error(), "5000")
	}
	transfer(t, p.a, p.b, 4, pattern(777, 2))
}

func TestTagMismatch(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	rr, err := p.b.Recv(5, [][]byte{make([]byte, 100)}, []uint32{1})
	require.NoError(t, err)
	sr, err := p.a.Send(5, pattern(10, 1), 2)
	require.NoError(t, err)
	require.ErrorIs(t, sr.Wait(ctx), transport.ErrTagMismatch)
	require.ErrorIs(t, rr.Wait(ctx), transport.ErrTagMismatch)
}

// guardedBufs returns n receive buffers of size bytes each, cut from one
// array with guard bytes around every buffer, all filled with fill, and a
// check that every byte outside the buffers still holds fill.
func guardedBufs(t *testing.T, n, size int, fill byte) ([][]byte, func()) {
	const guard = 64
	mem := bytes.Repeat([]byte{fill}, guard+n*(size+guard))
	bufs := make([][]byte, n)
	for i := range bufs {
		off := guard + i*(size+guard)
		bufs[i] = mem[off : off+size : off+size]
	}
	check := func() {
		t.Helper()
		for i := 0; i <= n; i++ {
			off := i * (size + guard)
			require.Equal(t, bytes.Repeat([]byte{fill}, guard), mem[off:off+guard], "guard bytes before buffer %d written", i)
		}
	}
	return bufs, check
}

// TestGroupedReceiveOneBufferFails: a grouped receive one of whose buffers
// fails (the peer's message for it is too large) completes once the other
// buffers have their messages, with the failure and the peer's addresses
// as its error and the others' sizes; the failed buffer and the bytes
// around every buffer are left untouched. A group that waits for a
// message that never comes is ended by AbortFlow, with every buffer
// accounted for.
func TestGroupedReceiveOneBufferFails(t *testing.T) {
	const size, fill = 1000, 0xAA
	tags := []uint32{4, 5, 6}
	t.Run("others filled", func(t *testing.T) {
		p := newPair(t, Config{})
		ctx := testCtx(t)
		bufs, check := guardedBufs(t, len(tags), size, fill)
		rr, err := p.b.Recv(1, bufs, tags)
		require.NoError(t, err)
		big, err := p.a.Send(1, pattern(5000, 1), tags[1])
		require.NoError(t, err)
		require.ErrorIs(t, big.Wait(ctx), transport.ErrMessageTooLarge)
		for i, n := range []int{size, 0, 700} {
			if i == 1 {
				continue
			}
			sr, err := p.a.Send(1, pattern(n, byte(i)), tags[i])
			require.NoError(t, err)
			require.NoError(t, sr.Wait(ctx))
		}
		err = rr.Wait(ctx)
		require.ErrorIs(t, err, transport.ErrMessageTooLarge)
		var pe *PeerError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, p.b.RemoteAddrs(), pe.Peer)
		require.Equal(t, []int{size, 0, 700}, rr.Sizes())
		require.Equal(t, pattern(size, 0), bufs[0])
		require.Equal(t, bytes.Repeat([]byte{fill}, size), bufs[1], "the failed buffer was written")
		require.Equal(t, pattern(700, 2), bufs[2][:700])
		require.Equal(t, bytes.Repeat([]byte{fill}, size-700), bufs[2][700:])
		check()
		transfer(t, p.a, p.b, 1, pattern(300, 3))
	})
	t.Run("aborted", func(t *testing.T) {
		p := newPair(t, Config{})
		ctx := testCtx(t)
		bufs, check := guardedBufs(t, len(tags), size, fill)
		rr, err := p.b.Recv(1, bufs, tags)
		require.NoError(t, err)
		big, err := p.a.Send(1, pattern(5000, 1), tags[1])
		require.NoError(t, err)
		require.ErrorIs(t, big.Wait(ctx), transport.ErrMessageTooLarge)
		sr, err := p.a.Send(1, pattern(size, 0), tags[0])
		require.NoError(t, err)
		require.NoError(t, sr.Wait(ctx))
		done, _ := rr.Test()
		require.False(t, done, "the group completed with a buffer still waiting")

		p.b.AbortFlow(1)
		done, err = rr.Test()
		require.True(t, done, "the group is still in flight after AbortFlow returned")
		require.ErrorIs(t, err, transport.ErrFlowAborted)
		require.ErrorContains(t, err, p.b.RemoteAddrs()[0].String())
		late, err := p.a.Send(1, pattern(700, 2), tags[2])
		require.NoError(t, err)
		require.ErrorIs(t, late.Wait(ctx), transport.ErrFlowAborted)
		require.Equal(t, bytes.Repeat([]byte{fill}, size), bufs[1], "the failed buffer was written")
		require.Equal(t, bytes.Repeat([]byte{fill}, size), bufs[2], "a buffer was written after its group was aborted")
		check()
	})
}
