package collectives

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// Comm is a communicator: this process's rank in a group, connected to
// every other rank. A Comm is used by one goroutine at a time (a call made
// while another is in progress fails with ErrConcurrentUse, and so does the
// call in progress, whose link is then closed), and every rank must
// call the same collectives in the same order, as with NCCL.
type Comm struct {
	rank, size int
	cfg        Config
	link       link
	boot       Bootstrap
	// shared, when not empty, says how New fitted spinning to the host's
	// CPUs (fitSpin); Describe appends it.
	shared string

	// closed is set by Close, from any goroutine, before it closes the
	// link: a call then reports ErrClosed rather than the transport
	// errors of a link closed under it, which read as a peer's failure.
	closed atomic.Bool

	// callMu orders the taking and release of mu with interloper, so
	// that a call that finds mu held knows that a call is in progress,
	// and the call in progress, as it ends, knows whether one cut in
	// (cutIn). interloper is set, once, by the first call made while
	// another was in progress.
	callMu     sync.Mutex
	interloper *sched.Collective
	// onLocked, when set, is called by Run once it holds mu (tests).
	onLocked func()

	mu      sync.Mutex
	plans   map[sched.Config]*sched.Plan
	scratch []byte
	broken  error
}

// ErrBroken is wrapped by calls on a communicator whose earlier collective
// failed: its streams are out of step and it must be closed. The error
// wraps that earlier failure too, so errors.Is finds its cause (ErrMismatch,
// context.DeadlineExceeded, ...).
var ErrBroken = errors.New("communicator unusable after an earlier failure")

// ErrClosed is wrapped by calls made on a communicator after its Close, and
// by calls that Close cut short. Close fails the transfers in flight with
// the link's own errors (a closed socket, a connection closed locally),
// which say nothing of the Close and read as a broken peer; such a call
// reports ErrClosed instead.
var ErrClosed = errors.New("communicator closed")

// ErrConcurrentUse is returned by a call made while another goroutine's
// call on the same communicator is in progress, and wrapped by the error
// of the call in progress, which that makes fail, and by the ErrBroken of
// every later call (after Close, later calls report ErrClosed alone).
// Waiting for the first call instead would let each rank order the two its
// own way; refusing the second alone does not stop that either: the other
// ranks' first calls may be this rank's second, and the calls that ran
// would pair different collectives and return their mixed data without an
// error. So the communicator's link is closed at once, which fails the call in
// progress here and, unless it has already completed, at the other ranks;
// the caller must order its calls, as with NCCL. The call in progress also
// wraps its own failure where it has one: a lost peer (*PeerError,
// ErrPeerLost), a disagreement on the call (ErrMismatch), or a refusal of
// its arguments (ErrInvalidArgument, which the later calls' ErrBroken does
// not wrap: their arguments were not refused; likewise the context.Canceled
// or DeadlineExceeded of a call refused because its context was already
// done).
var ErrConcurrentUse = errors.New("another collective is in progress on this communicator (a Comm is used by one goroutine at a time)")

// New joins the job described by b: it opens the local endpoint, exchanges
// descriptions through the rendezvous, and connects to every peer, all
// within cfg.Timeout. A Bootstrap that cannot form a job (a rank outside
// the rank count, a rendezvous address with port 0 or none) is refused
// before anything is opened. Ranks whose configurations disagree where
// they must agree (transport, channels, chunk size, group size) fail right
// after the rendezvous, each with an error that names the setting, the
// ranks and their values; a rank that exits or fails before it has
// connected to its peers fails the others at once (setupWatch). Without
// Config.UDP.Addrs, a rank of a job that may span hosts (its launcher does
// not say all ranks are on this host) announces the address this host
// reaches the rendezvous host from, and a job on one host 127.0.0.1 (see
// hostaddr.go).
func New(ctx context.Context, b Bootstrap, cfg Config) (*Comm, error) {
	given := cfg
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The layout first (exchange checks it again): a rendezvous address
	// that no rank reaches fails here, before a socket is opened, rather
	// than when the rendezvous times out.
	if err := b.check(); err != nil {
		return nil, err
	}
	if cfg.GroupSize > 0 && b.NRanks%cfg.GroupSize != 0 {
		return nil, fmt.Errorf("collectives: group size %d does not divide the %d ranks", cfg.GroupSize, b.NRanks)
	}
	b.deadline = newSetupDeadline(ctx, cfg.Timeout, cfg.TimeoutSetting)
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// The endpoint's address, where the caller gave none (hostaddr.go),
	// within the setup's deadline; the defaults then again, as they
	// depend on it (one path per plane on loopback).
	routed, why, err := planeAddrs(ctx, given, b, routeFrom)
	if err != nil {
		return nil, b.deadline.wrap(err, ctx.Err())
	}
	if routed != nil {
		given.UDP.Addrs = routed
		if cfg, err = given.withDefaults(); err != nil {
			return nil, err
		}
		cfg.Logf("rank %d/%d: endpoint on %v, %s (Config.UDP.Addrs sets others)", b.Rank, b.NRanks, routed[0], why)
	}
	if cfg.UDP.Seed != 0 {
		// A seeded run must still give every rank its own tokens and
		// connection ids: derive the rank's seed from the job's.
		cfg.UDP.Seed = cfg.UDP.Seed*0x9e3779b97f4a7c15 + uint64(b.Rank) + 1
	}
	shared := fitSpin(&cfg, b, HostCPUs(), runtime.NumCPU())
	if shared != "" {
		cfg.Logf("rank %d/%d: %s", b.Rank, b.NRanks, shared)
	}
	f, err := newLinkFactory(cfg)
	if err != nil {
		return nil, err
	}
	blobs, w, err := exchangeWatched(ctx, b, settingsBlob(cfg, f.blob()))
	if err == nil {
		blobs, err = agree(blobs)
	}
	if err != nil {
		w.close()
		f.abort()
		return nil, err
	}
	if b.connecting != nil {
		b.connecting(blobs)
	}
	// The rendezvous connections stay open while the ranks connect, so
	// that one that exits meanwhile fails the others at once (watch.go).
	var l link
	err = w.run(ctx, func(ctx context.Context) (err error) {
		l, err = f.connect(ctx, b.Rank, blobs, b.deadline)
		return err
	})
	if err != nil {
		if l != nil {
			l.close()
		}
		f.abort()
		return nil, err
	}
	cfg.Logf("rank %d/%d connected (%s)", b.Rank, b.NRanks, l.describe())
	return &Comm{rank: b.Rank, size: b.NRanks, cfg: cfg, link: l, boot: b, shared: shared, plans: map[sched.Config]*sched.Plan{}}, nil
}

// Rank returns this process's rank.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.size }

// Transport returns the transport name.
func (c *Comm) Transport() string { return c.cfg.Transport }

// Describe is one line about the link: transport, planes, channels, and
// how the ranks' number fitted event-loop spinning to the host's CPUs
// (fitSpin: off, or yielding the CPU to the other ranks' processes).
func (c *Comm) Describe() string {
	if c.shared != "" {
		return c.link.describe() + "; " + c.shared
	}
	return c.link.describe()
}

// LinkInfo returns the link's effective settings: transport, planes,
// paths per plane, largest datagram, channels.
func (c *Comm) LinkInfo() LinkInfo { return c.link.info() }

// PeerStats returns the transport counters of each peer connection
// (MetaRoCE only; nil for the TCP baseline).
func (c *Comm) PeerStats() []PeerStats { return c.link.peerStats() }

// Close closes every connection of the communicator. It may be called
// from any goroutine, also while a call is in progress: that call then
// fails, as do all later ones, with an error wrapping ErrClosed. Close does
// not wait for that call: its buffers are the caller's again once the call
// itself has returned.
func (c *Comm) Close() error {
	c.closed.Store(true)
	return c.link.close()
}

// closedErr returns the error of a call of plan p that failed with err, a
// transfer's failure, after Close was called: it wraps ErrClosed and,
// second, err, which a Close that raced with a real failure leaves as the
// useful part. Without Close it returns err unchanged.
func (c *Comm) closedErr(p *sched.Plan, err error) error {
	if !c.closed.Load() || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("collectives: %v on rank %d: %w during the call, which failed its transfers: %w", p.Collective, p.Rank, ErrClosed, err)
}

// Run executes the collective cfg describes (Rank and NRanks are always
// the communicator's; Channels, ChunkBytes, GroupSize and, for all-to-all,
// AllToAllInFlight are filled in from it where zero). Every rank must run
// a call with the same schedule as well as the same arguments: ranks whose
// Algorithm (as AlgoAuto resolves it), Channels, ChunkBytes (in whole
// elements) or, for AlgoHierarchical, GroupSize differ fail the call with
// ErrMismatch, each naming its own schedule (callTag); AllToAllInFlight
// may differ. In place
// (cfg.InPlace) send is nil or recv itself; out of place, send and recv
// must not overlap.
// A call whose ctx is already done is refused before anything is sent, with
// an error that wraps ctx.Err(), and leaves the communicator usable; a ctx
// that ends during the call fails it and breaks the communicator. Either
// error wraps the context's cause too, where it was ended with one
// (context.WithCancelCause).
func (c *Comm) Run(ctx context.Context, cfg sched.Config, send, recv []byte) (err error) {
	c.callMu.Lock()
	if !c.mu.TryLock() {
		return c.cutIn(cfg.Collective) // unlocks callMu
	}
	cutBefore, brokenBefore := c.interloper != nil, c.broken != nil
	c.callMu.Unlock()
	defer func() {
		// mu is released under callMu, so that a call that cuts in
		// before this point is seen here, and one that comes after
		// finds mu free (a panic in run releases it the same way).
		c.callMu.Lock()
		defer c.callMu.Unlock()
		defer c.mu.Unlock()
		coll := c.interloper
		if coll == nil || cutBefore {
			return
		}
		// Whatever this call returned, another rank may have paired it
		// with the interloper's collective: its result is not to be
		// trusted, and the link is closed.
		base := fmt.Errorf("collectives: %v on rank %d: %w: a call of %v was made on this communicator during this call, and the ranks may have paired different calls; the communicator is closed", cfg.Collective, c.rank, ErrConcurrentUse, *coll)
		e, broken := base, base
		if err != nil {
			// quoted names this call's failure without wrapping it.
			quoted := fmt.Errorf("%w (this call: %v)", base, err)
			e = fmt.Errorf("%w (this call: %w)", base, err)
			if pe := (*PeerError)(nil); errors.As(err, &pe) && !pe.lost && !errors.Is(err, ErrMismatch) {
				// A transfer the interloper's closing of the link
				// broke: no fault of that peer's, which a *PeerError
				// would name. (A peer that disagreed on the call did
				// so before the close, and keeps its type.)
				e = quoted
			}
			broken = e
			if errors.As(err, new(refusal)) {
				// This call's own arguments, or its context that
				// was already done, were refused: its caller learns
				// so, but the later calls' ErrBroken is about the
				// cut-in, not about arguments they did not pass or a
				// context they did not hold.
				broken = quoted
			}
		}
		if !brokenBefore {
			c.broken = broken
		}
		err = e
	}()
	return c.run(ctx, cfg, send, recv)
}

// cutIn answers a call of coll made while another goroutine's call holds
// the communicator; the caller holds callMu, which cutIn releases. The
// first such call closes the link, which fails the call in progress (Run
// reports it with ErrConcurrentUse) and the transfers the other ranks have
// posted for it (see ErrConcurrentUse).
func (c *Comm) cutIn(coll sched.Collective) error {
	if c.closed.Load() {
		c.callMu.Unlock()
		return fmt.Errorf("collectives: %v: %w", coll, ErrClosed)
	}
	first := c.interloper == nil
	if first {
		c.interloper = &coll
	}
	c.callMu.Unlock()
	if first {
		c.link.close()
	}
	return fmt.Errorf("collectives: %v on rank %d: %w; the call in progress fails too, and the communicator is closed", coll, c.rank, ErrConcurrentUse)
}

// run is Run once the call holds mu.
func (c *Comm) run(ctx context.Context, cfg sched.Config, send, recv []byte) error {
	if c.onLocked != nil {
		c.onLocked()
	}
	if c.closed.Load() {
		return fmt.Errorf("collectives: %v: %w", cfg.Collective, ErrClosed)
	}
	if c.broken != nil {
		// The ranks' streams are out of step for good: say what to do,
		// before the earlier failure that says why.
		return fmt.Errorf("collectives: %v on rank %d: %w (close it; to go on, every rank makes a new communicator with New): %w", cfg.Collective, c.rank, ErrBroken, c.broken)
	}
	cfg.Rank, cfg.NRanks = c.rank, c.size
	if cfg.Channels == 0 {
		cfg.Channels = c.cfg.Channels
	}
	if cfg.Channels > c.cfg.Channels {
		return invalidf("collectives: %v on %d channels: the communicator has %d (Config.Channels)", cfg.Collective, cfg.Channels, c.cfg.Channels)
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = c.cfg.ChunkBytes
	}
	if cfg.GroupSize == 0 {
		cfg.GroupSize = c.cfg.GroupSize
	}
	if cfg.Collective == sched.AllToAll && cfg.AllToAllInFlight == 0 {
		cfg.AllToAllInFlight = c.cfg.AllToAllInFlight
	}
	if err := countFits(cfg, c.rank, send, recv); err != nil {
		return err
	}
	// Plans are cached by the call's configuration; the automatic
	// all-to-all window is worked out only when a plan is built.
	p := c.plans[cfg]
	if p == nil {
		bcfg := cfg
		if bcfg.Collective == sched.AllToAll && bcfg.AllToAllInFlight == 0 {
			bcfg.AllToAllInFlight = sched.AutoAllToAllInFlight(bcfg)
		}
		var err error
		if p, err = sched.Build(bcfg); err != nil {
			return argError{fmt.Errorf("collectives: %v on rank %d: %w", cfg.Collective, c.rank, err)}
		}
		if len(c.plans) > 256 {
			clear(c.plans)
		}
		c.plans[cfg] = p
	}
	if int64(len(recv)) < p.RecvBytes {
		return invalidf("collectives: %v of %d %v: receive buffer has %d bytes, needs %d", cfg.Collective, cfg.Count, cfg.DType, len(recv), p.RecvBytes)
	}
	if !p.InPlace && int64(len(send)) < p.SendBytes {
		return invalidf("collectives: %v of %d %v: send buffer has %d bytes, needs %d", cfg.Collective, cfg.Count, cfg.DType, len(send), p.SendBytes)
	}
	if p.InPlace && len(send) > 0 && len(recv) > 0 && unsafe.SliceData(send) != unsafe.SliceData(recv) {
		// An in-place plan reads and writes recv alone: a send that is
		// another buffer would be ignored without a word.
		return invalidf("collectives: %v: in place (InPlace) with a send buffer that is not recv: pass send nil, or the same buffer as recv", cfg.Collective)
	}
	if !p.InPlace && overlap(send[:p.SendBytes], recv[:p.RecvBytes]) {
		// The typed calls refuse these before they get here (alias.go);
		// Run is reached directly too, and an out-of-place plan reads
		// send while it writes recv: the result would be wrong silently.
		return overlapErr(cfg.Collective, send[:p.SendBytes], recv[:p.RecvBytes])
	}
	if ctx.Err() != nil {
		// Refused before anything is posted, as a misuse is: the call
		// would otherwise post its first transfers and then race them
		// against the done context, succeeding or breaking the
		// communicator by chance, and blame the peers it was "still
		// waiting on".
		return notStarted{fmt.Errorf("collectives: %v on rank %d not started: the caller's context was already done (%w); nothing was sent and the communicator stays usable, while the other ranks wait for this rank's call", cfg.Collective, c.rank, ctxErr(ctx))}
	}
	if int64(cap(c.scratch)) < p.ScratchBytes {
		c.scratch = make([]byte, p.ScratchBytes)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout, errCallTimeout)
	defer cancel()
	// The tag covers the schedule the plan runs: AlgoAuto as it resolved.
	cfg.Algorithm = p.Algorithm
	return c.execute(ctx, p, callTag(cfg), scheduleOf(cfg), [3][]byte{send, recv, c.scratch[:p.ScratchBytes]})
}

// countFits refuses, before its plan is built, a call of Run whose count
// the buffers cannot hold: a plan has a step per chunk of the count, and
// one for a count far beyond the buffers (bytes passed as elements, a
// count of another buffer) took seconds, or at 2^32 elements minutes, to
// build and was kept in the cache, only for the call to be refused once it
// was there. The bound is the least any plan needs (sched.Build): every
// rank's recv holds count elements, more for all-gather and all-to-all,
// except in a p2p, where only the peer's recv and the root's send (in
// place, its recv) do. The exact sizes are checked once the plan is built;
// an invalid type or count is left to sched.Build to name.
func countFits(cfg sched.Config, rank int, send, recv []byte) error {
	if !cfg.DType.Valid() || cfg.Count <= 0 {
		return nil
	}
	buf, what := recv, "receive"
	if cfg.Collective == sched.P2P && rank != cfg.Peer {
		if rank != cfg.Root {
			return nil
		}
		if !cfg.InPlace {
			buf, what = send, "send"
		}
	}
	if esize := int64(cfg.DType.Size()); cfg.Count > int64(len(buf))/esize {
		// Count × esize may overflow: the comparison divides instead.
		return invalidf("collectives: %v of %d %v: %s buffer has %d bytes, needs at least %d elements of %d bytes (sched.Config.Count is in elements)",
			cfg.Collective, cfg.Count, cfg.DType, what, len(buf), cfg.Count, esize)
	}
	return nil
}

// elems returns the elements of dt in b, refusing an invalid type and a
// length that is not a whole number of elements (or, with blocks > 1, of
// blocks of equal elements): a call with such a buffer would leave its tail
// unwritten without a word.
func elems(coll sched.Collective, what string, b []byte, dt reduce.DType, blocks int) (int64, error) {
	if !dt.Valid() {
		return 0, invalidf("collectives: %v: invalid data type %d", coll, dt)
	}
	unit := dt.Size() * max(blocks, 1)
	if len(b)%unit != 0 {
		if blocks > 1 {
			return 0, invalidf("collectives: %v: %s has %d bytes, not %d equal blocks of whole %v elements", coll, what, len(b), blocks, dt)
		}
		return 0, invalidf("collectives: %v: %s has %d bytes, not a whole number of %d-byte %v elements", coll, what, len(b), dt.Size(), dt)
	}
	return int64(len(b) / dt.Size()), nil
}

// sizeErr explains send and recv lengths that do not fit each other.
func sizeErr(coll sched.Collective, send, recv []byte, want string) error {
	return invalidf("collectives: %v: send has %d bytes and recv %d, want %s", coll, len(send), len(recv), want)
}

// equalBuffers checks the buffers of a collective whose send and recv have
// one length (all-reduce, broadcast, sendrecv) and returns the count in
// elements and whether the call is in place.
func equalBuffers(coll sched.Collective, send, recv []byte, dt reduce.DType) (int64, bool, error) {
	n, err := elems(coll, "recv", recv, dt, 1)
	if err != nil {
		return 0, false, err
	}
	ip, err := sameBuffer(coll, send, recv)
	if err != nil {
		return 0, false, err
	}
	if send != nil && len(send) != len(recv) {
		return 0, false, sizeErr(coll, send, recv, "equal lengths")
	}
	return n, ip, nil
}

// AllReduce reduces send over all ranks into recv on every rank. In place
// when send is nil or starts at recv.
func (c *Comm) AllReduce(ctx context.Context, send, recv []byte, dt reduce.DType, op reduce.Op) error {
	n, ip, err := equalBuffers(sched.AllReduce, send, recv, dt)
	if err != nil {
		return err
	}
	return c.Run(ctx, sched.Config{Collective: sched.AllReduce, Count: n, DType: dt, Op: op, InPlace: ip}, send, recv)
}

// ReduceScatter reduces send (Size × len(recv) bytes) over all ranks and
// leaves block Rank of the result in recv. In place in either of two
// layouts: NCCL's, where recv is block Rank of send (recv =
// send[Rank×len(recv):]); or send nil or equal to recv, where recv holds all
// Size blocks on entry and block Rank of it receives the result. Either way
// only block Rank is written: the other blocks keep the caller's data, as
// under NCCL.
func (c *Comm) ReduceScatter(ctx context.Context, send, recv []byte, dt reduce.DType, op reduce.Op) error {
	const coll = sched.ReduceScatter
	blk := len(recv)
	n, err := elems(coll, "recv", recv, dt, 1)
	if err != nil {
		return err
	}
	if off, ok := within(recv, send); ok && blk > 0 && (off > 0 || len(send) > blk) {
		// NCCL's in-place layout, recv block Rank of send: run on the
		// whole of send. Any other block would reduce the wrong data.
		// One rank too: its recv is send's first block, and a longer
		// send is taken as it is on more ranks.
		if off != c.rank*blk || len(send) < c.size*blk {
			return invalidf("collectives: %v: recv (%d bytes at byte %d of send's %d) overlaps send but is not block %d of %d of it, NCCL's in-place layout", coll, blk, off, len(send), c.rank, c.size)
		}
		return c.Run(ctx, sched.Config{Collective: coll, Count: n, DType: dt, Op: op, InPlace: true}, nil, send[:c.size*blk])
	}
	ip, err := sameBuffer(coll, send, recv)
	if err != nil {
		return err
	}
	if ip && send != nil && len(send) != len(recv) {
		// A send that starts at recv but ends elsewhere is neither
		// in-place layout: the call would run over recv alone, as if
		// it held all Size blocks, and ignore send's length without a
		// word.
		return sizeErr(coll, send, recv, fmt.Sprintf("send = %d × recv (one block per rank), or in place send nil or recv itself, holding all %d blocks", c.size, c.size))
	}
	if ip {
		// recv holds all Size blocks.
		if _, err := elems(coll, "recv", recv, dt, c.size); err != nil {
			return err
		}
		n /= int64(c.size)
	} else if len(send) != c.size*blk {
		return sizeErr(coll, send, recv, fmt.Sprintf("send = %d × recv (one block per rank)", c.size))
	}
	return c.Run(ctx, sched.Config{Collective: coll, Count: n, DType: dt, Op: op, InPlace: ip}, send, recv)
}

// AllGather gathers every rank's send into recv (Size × len(send) bytes).
// In place when send is nil (this rank's block is already at block Rank of
// recv) or is block Rank of recv itself (NCCL's layout: send =
// recv[Rank×len(send):]).
func (c *Comm) AllGather(ctx context.Context, send, recv []byte, dt reduce.DType) error {
	all, err := elems(sched.AllGather, "recv", recv, dt, c.size)
	if err != nil {
		return err
	}
	cnt := all / int64(c.size)
	if send != nil && len(recv) != c.size*len(send) {
		return sizeErr(sched.AllGather, send, recv, fmt.Sprintf("recv = %d × send (one block per rank)", c.size))
	}
	if send == nil {
		return c.Run(ctx, sched.Config{Collective: sched.AllGather, Count: cnt, DType: dt, InPlace: true}, nil, recv)
	}
	if off, ok := within(send, recv); ok && len(send) > 0 {
		if off != c.rank*len(send) || int64(len(send)) != cnt*int64(dt.Size()) {
			return invalidf("collectives: allgather: send (%d bytes at byte %d of recv) overlaps recv but is not block %d of it, NCCL's in-place layout", len(send), off, c.rank)
		}
		return c.Run(ctx, sched.Config{Collective: sched.AllGather, Count: cnt, DType: dt, InPlace: true}, nil, recv)
	}
	if overlap(send, recv) {
		return overlapErr(sched.AllGather, send, recv)
	}
	return c.Run(ctx, sched.Config{Collective: sched.AllGather, Count: cnt, DType: dt}, send, recv)
}

// AllToAll sends block j of send to rank j and receives rank j's block into
// block j of recv. In place when send is nil or starts at recv.
func (c *Comm) AllToAll(ctx context.Context, send, recv []byte, dt reduce.DType) error {
	all, err := elems(sched.AllToAll, "recv", recv, dt, c.size)
	if err != nil {
		return err
	}
	ip, err := sameBuffer(sched.AllToAll, send, recv)
	if err != nil {
		return err
	}
	if send != nil && len(send) != len(recv) {
		return sizeErr(sched.AllToAll, send, recv, "equal lengths")
	}
	return c.Run(ctx, sched.Config{Collective: sched.AllToAll, Count: all / int64(c.size), DType: dt, InPlace: ip}, send, recv)
}

// Broadcast copies root's send into recv on every rank. In place when send
// is nil or starts at recv.
func (c *Comm) Broadcast(ctx context.Context, send, recv []byte, dt reduce.DType, root int) error {
	n, ip, err := equalBuffers(sched.Broadcast, send, recv, dt)
	if err != nil {
		return err
	}
	return c.Run(ctx, sched.Config{Collective: sched.Broadcast, Count: n, DType: dt, Root: root, InPlace: ip}, send, recv)
}

// SendRecv is nccl-tests' sendrecv: rank r sends send to rank r+1 and
// receives rank r-1's into recv. In place when send is nil or starts at
// recv.
func (c *Comm) SendRecv(ctx context.Context, send, recv []byte, dt reduce.DType) error {
	n, ip, err := equalBuffers(sched.SendRecv, send, recv, dt)
	if err != nil {
		return err
	}
	return c.Run(ctx, sched.Config{Collective: sched.SendRecv, Count: n, DType: dt, InPlace: ip}, send, recv)
}

// Barrier returns once every rank called it.
func (c *Comm) Barrier(ctx context.Context) error {
	b := make([]byte, 4)
	return c.AllReduce(ctx, nil, b, reduce.Int32, reduce.OpSum)
}

// newLinkFactory opens the local end of cfg.Transport's link: the
// kernel-TCP baseline's listener or the MetaRoCE endpoint.
func newLinkFactory(cfg Config) (linkFactory, error) {
	if cfg.Transport == TransportTCP {
		return newTCPFactory(cfg)
	}
	return newMetaroceFactory(cfg)
}
