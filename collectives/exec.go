package collectives

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/transport"
)

// streamKey names one ordered message stream: direction, peer, channel.
type streamKey struct {
	send bool
	peer int
	ch   int
}

// maxStreamDepth bounds the messages of one stream posted to the link and
// not yet complete. A plan can hold thousands of messages per stream (a
// 2 GiB ring block in 512 KiB messages is 4096), while the links take a
// bounded queue: MetaRoCE refuses more than MaxPendingSends/MaxPendingRecvs
// per flow (4096), and the TCP baseline's streams queue 1024. Messages of a
// stream complete in posting order on both sides, so posting the next one
// only when an earlier one completed cannot deadlock a plan whose streams
// are matched in Seq order; at the sizes users run (up to 64 MiB in 512 KiB
// messages: at most 128 per stream) the bound never binds.
const maxStreamDepth = 512

// abandonWait bounds how long a failed call waits for its transfers to end
// once the link is closed under them. Closing fails every outstanding
// request at once; the bound only keeps a broken link from hanging the
// caller.
const abandonWait = 10 * time.Second

// errCallTimeout is the cause of the deadline Config.Timeout sets on a call,
// told apart from the caller's own deadline or cancellation.
var errCallTimeout = errors.New("collectives: call timeout")

// execute runs plan p over the link (docs of collectives/sched: a step
// starts once its Deps completed; messages of one stream are posted in Seq
// order, which is the order in which both sides match them, at most
// maxStreamDepth at a time). Local steps run inline; transfers complete
// asynchronously and wake the loop. On any failure the communicator is
// marked broken and its link closed, and execute returns only once no
// transfer of the call can write into the caller's buffers any more. Every
// message carries tag (callTag); sch, the call's schedule, is named in the
// errors that say the ranks disagree on the call.
func (c *Comm) execute(ctx context.Context, p *sched.Plan, tag uint32, sch callSchedule, bufs [3][]byte) (err error) {
	n := len(p.Steps)
	if n == 0 {
		return nil
	}
	waiting := make([]int, n) // unfinished dependencies per step
	after := make([][]int, n) // dependents per step
	for i := range p.Steps {
		waiting[i] = len(p.Steps[i].Deps)
		for _, d := range p.Steps[i].Deps {
			after[d] = append(after[d], i)
		}
	}
	nextSeq := map[streamKey]int{}
	depth := map[streamKey]int{}          // posted and not yet complete
	parked := map[streamKey]map[int]int{} // ready but not yet postable: seq → step
	var ready []int
	for i := range p.Steps {
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	// The endpoint's starting rate hints divide its inbound capacity by the
	// peers that may send at once: for a ring, the one before this rank.
	c.link.expectSenders(p.RecvPeers())
	completions := make(chan int, n)
	inflight := map[int]pending{}
	defer func() {
		if err != nil {
			err = c.closedErr(p, err)
			c.abandon(err, completions, inflight)
		}
	}()
	// completed is what the wait below drives the datapath for; built once,
	// not per completion.
	completed := func() bool { return len(completions) > 0 || ctx.Err() != nil }
	remaining := n

	finish := func(i int) {
		remaining--
		for _, j := range after[i] {
			waiting[j]--
			if waiting[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	post := func(i int) error {
		s := &p.Steps[i]
		buf := rangeOf(bufs, s.Src)
		var pd pending
		var err error
		// The link reports completion straight into the buffered channel
		// (each step completes once, so it never fills): no goroutine per
		// transfer, and one wake-up of this loop instead of two.
		done := func() { completions <- i }
		if s.Kind == sched.KindSend {
			pd, err = c.link.send(s.Peer, s.Channel, tag, buf, done)
		} else {
			pd, err = c.link.recv(s.Peer, s.Channel, tag, rangeOf(bufs, s.Dst), done)
		}
		if err != nil {
			return c.stepErr(p, s, sch, err)
		}
		inflight[i] = pd
		return nil
	}
	// pump posts stream k's parked messages that are next in Seq order,
	// while the stream has room.
	pump := func(k streamKey) error {
		for depth[k] < maxStreamDepth {
			j, ok := parked[k][nextSeq[k]]
			if !ok {
				return nil
			}
			delete(parked[k], nextSeq[k])
			if err := post(j); err != nil {
				return err
			}
			nextSeq[k]++
			depth[k]++
		}
		return nil
	}
	keyOf := func(s *sched.Step) streamKey { return streamKey{s.Kind == sched.KindSend, s.Peer, s.Channel} }
	for remaining > 0 {
		for len(ready) > 0 {
			i := ready[len(ready)-1]
			ready = ready[:len(ready)-1]
			s := &p.Steps[i]
			switch s.Kind {
			case sched.KindSend, sched.KindRecv:
				k := keyOf(s)
				if s.Seq != nextSeq[k] || depth[k] >= maxStreamDepth {
					if parked[k] == nil {
						parked[k] = map[int]int{}
					}
					parked[k][s.Seq] = i
					continue
				}
				if err := post(i); err != nil {
					return err
				}
				nextSeq[k]++
				depth[k]++
				if len(parked[k]) > 0 {
					if err := pump(k); err != nil {
						return err
					}
				}
			default:
				if err := sched.RunLocal(p, s, bufs); err != nil {
					return c.markBroken(fmt.Errorf("collectives: %v on rank %d: local step %d: %w", p.Collective, p.Rank, i, err))
				}
				finish(i)
			}
		}
		if remaining == 0 {
			break
		}
		if len(inflight) == 0 {
			return c.markBroken(fmt.Errorf("collectives: %v rank %d: schedule stalled with %d steps left (a bug in the plan)", p.Collective, p.Rank, remaining))
		}
		// Drive the datapath from this goroutine while transfers move: a
		// completion then costs no wake-up of this goroutine, and the
		// event loop parks instead of handing every datagram over.
		c.link.progress(completed)
		select {
		case i := <-completions:
			_, err := inflight[i].Test()
			got := -1
			if sz := inflight[i].Sizes(); len(sz) > 0 {
				got = sz[0]
			}
			delete(inflight, i)
			s := &p.Steps[i]
			if err != nil {
				return c.stepErr(p, s, sch, err)
			}
			if s.Kind == sched.KindRecv && int64(got) != s.Dst.Len {
				// Every message of a plan has one exact length on both
				// sides: a shorter one means the ranks run different
				// plans (different counts, types or collectives). A
				// longer one fails the receive in the link (see
				// stepErr).
				return c.stepErr(p, s, sch, fmt.Errorf("%w: received %d bytes where the plan expects %d", ErrMismatch, got, s.Dst.Len))
			}
			finish(i)
			k := keyOf(s)
			depth[k]--
			if len(parked[k]) > 0 {
				if err := pump(k); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return c.stuckErr(ctx, p, sch, inflight)
		}
	}
	return nil
}

// ErrMismatch is wrapped when a peer's message does not have the length
// this rank's plan expects, shorter or longer, or carries another call's
// tag (callTag: a different collective, count, type, reduction or root, or
// a different schedule: algorithm, channels, chunk size, group size): the
// ranks did not call the same collective with the same arguments and
// settings. A rank whose peer saw the mismatch first and left may instead
// get an error saying the peer closed the connection.
var ErrMismatch = errors.New("ranks disagree on the call")

// mismatchHint starts the end of every ErrMismatch error of a call: the
// likely cause. mismatchText completes it.
const mismatchHint = "do all ranks call the same collective with the same count and type?"

// mismatchText is mismatchHint and the schedule of this rank's call, which
// every rank's must match: the ranks' tags (callTag) are hashes, so a rank
// cannot tell which setting its peer's message differs in, and each rank
// names its own values for the user to set side by side. The per-call
// fields that set them are named, since the communicator's own are
// compared by New and so agree.
func mismatchText(sch callSchedule) string {
	return fmt.Sprintf("%s Their schedules must match too (a call's own sched.Config Algorithm, Channels, ChunkBytes and GroupSize override the communicator's): this rank ran %v, and each rank that sees the disagreement names its own", mismatchHint, sch)
}

// asMismatch returns err, a failed transfer's error, as an ErrMismatch
// error, ending with mismatchText(sch), when it says that the two sides'
// messages differ in length or belong to different calls, and err
// unchanged otherwise. Links report a message longer than its receive, or
// of another call (callTag), in their own words: the TCP baseline's reader
// wraps ErrMismatch, MetaRoCE fails the receive, and the send too, with
// transport.ErrMessageTooLarge or transport.ErrTagMismatch.
// Either means that the peers run different plans, not that the connection
// broke, so the error says so and wraps ErrMismatch like the short case.
func asMismatch(err error, sch callSchedule) error {
	switch {
	case errors.Is(err, ErrMismatch):
		return fmt.Errorf("%w; %s", err, mismatchText(sch))
	case errors.Is(err, transport.ErrMessageTooLarge), errors.Is(err, transport.ErrTagMismatch):
		return fmt.Errorf("%w: %w; %s", ErrMismatch, err, mismatchText(sch))
	}
	return err
}

// abandon ends a failed call: the communicator is already broken, so its
// link is closed, which fails every transfer still posted, and abandon
// waits (at most abandonWait) until each has reported completion. After
// that no transfer of the call writes into the caller's buffers. Closing
// also tells the peers at once, instead of at their own deadline, that this
// rank left.
func (c *Comm) abandon(cause error, completions chan int, inflight map[int]pending) {
	c.markBroken(cause)
	c.link.close()
	if len(inflight) == 0 {
		return
	}
	t := time.NewTimer(abandonWait)
	defer t.Stop()
	for len(inflight) > 0 {
		select {
		case i := <-completions:
			delete(inflight, i)
		case <-t.C:
			c.cfg.Logf("rank %d: %d transfers still outstanding %v after the link closed", c.rank, len(inflight), abandonWait)
			return
		}
	}
}

// markBroken records err as the reason the communicator is unusable (the
// first reason wins) and returns it.
func (c *Comm) markBroken(err error) error {
	if c.broken == nil {
		c.broken = err
	}
	return err
}

// rangeOf returns the bytes of r.
func rangeOf(bufs [3][]byte, r sched.Range) []byte {
	return bufs[r.Buf][r.Off:r.End()]
}

// stepErr describes the failure of transfer s of plan p, whose schedule is
// sch, marks the communicator broken and returns the error.
func (c *Comm) stepErr(p *sched.Plan, s *sched.Step, sch callSchedule, err error) error {
	dir := "sending to"
	if s.Kind == sched.KindRecv {
		dir = "receiving from"
	}
	return c.markBroken(&PeerError{Peer: s.Peer, lost: connectionLost(err),
		err: fmt.Errorf("collectives: %v on rank %d: %s rank %d (channel %d, message %d): %w%s", p.Collective, p.Rank, dir, s.Peer, s.Channel, s.Seq, asMismatch(err, sch), peerLeftHint(s.Peer, err))})
}

// peerLeftHint explains a transfer that failed because its peer closed the
// connection: a rank whose own call fails closes all its connections (see
// abandon), so the rank named is usually not the one at fault, and its
// own error names the cause. Without this the survivors of a dead rank
// blamed whichever live peer gave up first: only the ranks that talk to
// the dead one see it die. The peer may also have closed before this call
// began, having made fewer calls than this rank and closed its
// communicator or exited without an error of its own: the hint names that
// misuse too.
func peerLeftHint(peer int, err error) string {
	if !connectionLost(err) || errors.Is(err, transport.ErrPeerDead) {
		return ""
	}
	return fmt.Sprintf("; rank %d closed its connections, during this call or before it: it gave a call up (its own error says why, often another rank that died or stalled), or it closed its communicator or exited, perhaps after fewer calls than this rank made", peer)
}

// stuckErr explains why a call's context ended while transfers were
// outstanding: the communicator's Timeout, the caller's own deadline or a
// cancellation, and which peers this rank still waits for. Where the time
// ran out it also names this rank's call, its count, type, root (where
// the collective has one) and schedule sch: ranks that pass different
// calls fail with ErrMismatch when a message of one meets the other's,
// but plans that never share a message stream (a ring against halving and
// doubling on 4 ranks) only wait, and the user needs each rank's call to
// tell that from a dead peer. The ranks compared may not all say theirs:
// one whose peer gave up first fails with that peer's closed connection.
func (c *Comm) stuckErr(ctx context.Context, p *sched.Plan, sch callSchedule, inflight map[int]pending) error {
	peers := map[int]bool{}
	for i := range inflight {
		peers[p.Steps[i].Peer] = true
	}
	var list []int
	for r := range peers {
		list = append(list, r)
	}
	sortInts(list)
	transfers := "transfers"
	if len(inflight) == 1 {
		transfers = "transfer"
	}
	// A deadline that passed may be a peer's fault; a cancellation is the
	// caller's own doing, and the ranks it waited on are only named.
	why, cancelled := "did not finish by the caller's deadline", false
	switch {
	case errors.Is(context.Cause(ctx), errCallTimeout):
		why = fmt.Sprintf("did not finish within the communicator's timeout of %v", c.cfg.Timeout)
	case errors.Is(ctx.Err(), context.Canceled):
		why, cancelled = "was cancelled by the caller", true
	}
	hint := ""
	if !cancelled {
		// What a peer that made another call may differ in, and this
		// rank's value of each: the arguments callTag covers that can
		// change which messages the plan sends, and the schedule. The
		// reduction is left out: it changes no message, and a peer that
		// reduces otherwise fails on the tag of the first message.
		elements := "elements"
		if p.Count == 1 {
			elements = "element"
		}
		differ, call := "another collective, count, type or schedule", fmt.Sprintf("%d %v %s", p.Count, p.DType, elements)
		switch p.Collective {
		case sched.Broadcast:
			differ = "another collective, count, type, root or schedule"
			call += fmt.Sprintf(", root %d", p.Root)
		case sched.P2P:
			differ = "another collective, count, type, pair of ranks or schedule"
			call += fmt.Sprintf(", from rank %d to rank %d", p.Root, p.Peer)
		}
		hint = fmt.Sprintf("; a peer may have died, stopped calling the collective, or made a different call (%s; this rank's call: %s, %v)", differ, call, sch)
	}
	waited := fmt.Sprintf("ranks %v", list)
	if len(list) == 1 {
		waited = fmt.Sprintf("rank %d", list[0])
	}
	return c.markBroken(fmt.Errorf("collectives: %v on rank %d %s: still waiting on %s (%d %s outstanding)%s: %w",
		p.Collective, p.Rank, why, waited, len(inflight), transfers, hint, ctxErr(ctx)))
}

// ctxErr is the error of a done ctx: ctx.Err() and, where the context was
// ended with a cause of its own (context.WithCancelCause,
// WithDeadlineCause), that cause too, so that errors.Is finds both and the
// message says why. The cause of the communicator's own call timeout
// (errCallTimeout) is left out: stuckErr says it in words.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err && !errors.Is(cause, errCallTimeout) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
