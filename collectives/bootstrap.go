package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Bootstrap says who this process is in the job and where the rendezvous
// is: rank 0 listens on Root, every other rank connects to it, and each
// learns every rank's endpoint description (its per-plane addresses).
type Bootstrap struct {
	Rank, NRanks, LocalRank int
	// LocalSize is the number of the job's ranks on this host, as the
	// launcher reports it (0: not reported).
	LocalSize int
	// SpansHosts is whether the launcher says the job runs on more than
	// one host: BootstrapFromEnv sets it for fewer ranks on this host than
	// in the job, or a Slurm step on several nodes; a LocalSize below
	// NRanks implies it. New then gives each rank an address of its host
	// that the others reach, or fails where it finds none (hostaddr.go);
	// rank 0, given its own host by a name that resolves to loopback
	// there, listens on every interface; and a rendezvous address that
	// names no host the others reach is refused.
	SpansHosts bool
	// Root is host:port of rank 0's rendezvous listener, with a port of
	// 1 to 65535 (an IPv6 host in brackets); unused, and may be empty,
	// with one rank. New refuses any other before it opens a socket.
	Root string
	// Source names where these values came from: torchrun, openmpi,
	// slurm, metaroce or local.
	Source string
	// Job is the launcher's identity of the job ("": unknown). Every rank
	// sends a hash of it to the rendezvous, and rank 0 turns away a rank
	// of another job that reached its address: two jobs that share one
	// rendezvous address must not form one communicator and mix their
	// data. The check needs both sides to know their job; a rank or a
	// rank 0 with an unknown identity is not checked.
	Job string
	// Vars names the environment variables BootstrapFromEnv read these
	// values from, for messages that must say which setting to change;
	// zero where the caller filled the Bootstrap in itself.
	Vars BootstrapVars

	// Progress, when set, receives a line every ProgressEvery while this
	// rank waits in the rendezvous: at rank 0, the ranks that have not
	// joined yet; at the others, whether rank 0 answered. A job whose
	// ranks never all start (a launcher's variables left over in the
	// environment of a plain run, a rank that died before it joined)
	// otherwise waits without a word until the deadline. It is called on
	// the rendezvous' goroutines, never after New returns, and must not
	// block.
	Progress func(line string)
	// ProgressEvery is the interval of the Progress lines (0:
	// DefaultProgressEvery).
	ProgressEvery time.Duration

	// listener, when set, is rank 0's rendezvous listener, already open
	// on Root (LaunchLocal, LaunchOn): a port found free and closed again
	// could be taken by another process before rank 0 listened on it.
	// exchangeRoot closes it.
	listener net.Listener

	// joined, when set, is called by rank 0 as each rank joins (tests).
	joined func(rank int)
	// gone, when set, is called by rank 0's setup watch as it learns
	// that a rank left or gave up (tests).
	gone func(rank int)
	// deadline is the deadline of New's setup, which New sets for the
	// errors of a rendezvous that it ends (zero outside New).
	deadline setupDeadline
	// connecting, when set, is called by New once the rendezvous is
	// over, with every rank's endpoint description (by rank), before this
	// rank connects to its peers (tests).
	connecting func(eps [][]byte)
	// allocLocal is set where the launcher's local size exceeded the
	// job's and was cut to NRanks (a count of the allocation, not of the
	// job): it says nothing then of whether the job shares one host.
	allocLocal bool
	// turnedAway, when set, is called by a rank other than 0 each time
	// another job's rank 0 turned it away, before it waits to try again
	// (tests).
	turnedAway func()
}

// BootstrapVars names where BootstrapFromEnv found a Bootstrap's values.
type BootstrapVars struct {
	// Rank and NRanks are the variables of the rank and of the rank
	// count (SLURM_PROCID and SLURM_NTASKS, RANK and WORLD_SIZE, ...).
	Rank, NRanks string
	// Root is where the rendezvous address came from: "METAROCE_ROOT",
	// "MASTER_ADDR:MASTER_PORT+1", or "" for the single-host default.
	Root string
}

// DefaultProgressEvery is the interval of the rendezvous' progress lines
// when Bootstrap.ProgressEvery is 0: long enough that a job whose ranks
// start within a moment of each other prints none.
const DefaultProgressEvery = 5 * time.Second

// Describe is one line on where the job's layout came from, for a program
// to print as it joins a launched job: the launcher, the rank and rank
// count with the variables that set them, and the rendezvous address with
// its source. Variables that a launcher left behind in the environment of
// a run not meant to be one of its jobs are then named at once, rather
// than found after the rendezvous times out.
func (b Bootstrap) Describe() string {
	var s strings.Builder
	fmt.Fprintf(&s, "launcher %s: rank %d of %d", b.Source, b.Rank, b.NRanks)
	if b.Vars.Rank != "" {
		fmt.Fprintf(&s, " (%s=%d, %s=%d)", b.Vars.Rank, b.Rank, b.Vars.NRanks, b.NRanks)
	}
	if b.NRanks > 1 {
		fmt.Fprintf(&s, ", rendezvous at %s", b.Root)
		switch {
		case b.Vars.Root != "":
			fmt.Fprintf(&s, " (from %s)", b.Vars.Root)
		case b.Vars.Rank != "":
			s.WriteString(" (the single-host default: neither METAROCE_ROOT nor MASTER_ADDR and MASTER_PORT is set)")
		}
	}
	if b.Job != "" {
		fmt.Fprintf(&s, ", job %s", b.Job)
	}
	return s.String()
}

// progressEvery is the interval of the Progress lines.
func (b Bootstrap) progressEvery() time.Duration {
	if b.ProgressEvery > 0 {
		return b.ProgressEvery
	}
	return DefaultProgressEvery
}

// waitTimes returns how long the rendezvous has waited since start and
// how long is left to ctx's deadline (-1: no deadline).
func waitTimes(ctx context.Context, start time.Time) (waited, left time.Duration) {
	waited, left = time.Since(start), -1
	if dl, ok := ctx.Deadline(); ok {
		left = max(time.Until(dl), 0)
	}
	return waited, left
}

// rootWaitingLine is rank 0's progress line while ranks are missing (in
// order, not empty): which, how many of the job's have joined, and for
// how long more it waits. When no other rank has joined and b came from
// a launcher's variables, it names them: a plain run that finds them set
// (an sbatch script run without srun) is waiting for ranks that will
// never start.
func rootWaitingLine(b Bootstrap, missing []int, waited, left time.Duration) string {
	var s strings.Builder
	fmt.Fprintf(&s, "rank 0: waiting for %s (%d of %d joined the rendezvous at %s) after %v",
		rankWords(missing), b.NRanks-len(missing), b.NRanks, b.Root, waited.Round(time.Second))
	if left >= 0 {
		fmt.Fprintf(&s, ", giving up in %v", left.Round(time.Second))
	}
	if len(missing) == b.NRanks-1 && b.Vars.Rank != "" {
		fmt.Fprintf(&s, "; if no other rank was started, %s and %s do not belong to this run: %s",
			b.Vars.Rank, b.Vars.NRanks, unsetHint(b))
	}
	return s.String()
}

// unsetHint says what unsetting the launcher's variables does: the run
// no longer takes its layout from that launcher, or, where the variables
// are this package's own METAROCE_RANK and METAROCE_NRANKS, runs as one
// process.
func unsetHint(b Bootstrap) string {
	if b.Source == "metaroce" {
		return "unset them to run as a single process"
	}
	return "unset them to run without " + b.Source
}

// leafWaitingLine is the progress line of a rank other than 0: whether it
// reached rank 0's rendezvous (and now waits for the others to join) or
// not yet. A rank prints the first only once (see exchangeLeaf): rank 0
// lists the ranks still missing.
func leafWaitingLine(b Bootstrap, reached bool, lastDial string, waited, left time.Duration) string {
	var s strings.Builder
	if reached {
		fmt.Fprintf(&s, "rank %d: joined the rendezvous at %s, waiting for the other ranks of %d to join (rank 0 reports which are missing), after %v",
			b.Rank, b.Root, b.NRanks, waited.Round(time.Second))
	} else {
		fmt.Fprintf(&s, "rank %d: waiting for rank 0's rendezvous at %s to answer after %v",
			b.Rank, b.Root, waited.Round(time.Second))
		if lastDial != "" {
			// A typo in the address ("no such host") is retried
			// like a rank 0 not up yet, as a name that a cluster's
			// DNS does not know yet would be: say what the dials get.
			fmt.Fprintf(&s, " (last attempt: %s)", lastDial)
		}
	}
	if left >= 0 {
		fmt.Fprintf(&s, ", giving up in %v", left.Round(time.Second))
	}
	return s.String()
}

// rankWords lists ranks (in order) for progress lines: "rank 3", "ranks
// 1, 2, 3", the first 16 and a count of the rest.
func rankWords(ranks []int) string {
	const show = 16
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d", ranks[0])
	}
	var s strings.Builder
	s.WriteString("ranks ")
	for i, r := range ranks[:min(len(ranks), show)] {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprint(&s, r)
	}
	if len(ranks) > show {
		fmt.Fprintf(&s, " and %d more", len(ranks)-show)
	}
	return s.String()
}

// jobTag is what the rendezvous frames carry of Bootstrap.Job: its 64-bit
// FNV-1a hash (1 where that is 0), and 0 for "" (unknown).
func jobTag(job string) uint64 {
	if job == "" {
		return 0
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(job); i++ {
		h ^= uint64(job[i])
		h *= 1099511628211
	}
	if h == 0 {
		return 1
	}
	return h
}

// sameJob reports whether two frames' job tags allow one communicator:
// they match, or one side does not know its job.
func sameJob(a, b uint64) bool { return a == 0 || b == 0 || a == b }

// check refuses a layout that cannot form a communicator: a rank count
// outside 1..maxRanks, a rank outside it, and, with more than one rank, a
// rendezvous address that no rank reaches (none, port 0, no port:
// rootAddrError, or, where fewer than all ranks run on this host, one of
// this host alone: hereOnly), which would otherwise be found only when
// the rendezvous times out. It names the variable the address came from, or
// Bootstrap.Root where the caller filled it in.
func (b Bootstrap) check() error {
	if b.NRanks < 1 || b.NRanks > maxRanks {
		return fmt.Errorf("collectives: bootstrap (%s): %d ranks, want 1..%d", b.Source, b.NRanks, maxRanks)
	}
	if b.Rank < 0 || b.Rank >= b.NRanks {
		return fmt.Errorf("collectives: bootstrap (%s): rank %d outside 0..%d", b.Source, b.Rank, b.NRanks-1)
	}
	if b.NRanks > 1 && b.Root == "" {
		return fmt.Errorf("collectives: bootstrap (%s): no rendezvous address; set METAROCE_ROOT=host:port (or MASTER_ADDR and MASTER_PORT)", b.Source)
	}
	if b.NRanks == 1 {
		return nil
	}
	name := b.rootSetting()
	if err := rootAddrError(b.Root); err != nil {
		return fmt.Errorf("collectives: bootstrap (%s): %s=%q: %w", b.Source, name, b.Root, err)
	}
	host, _, _ := net.SplitHostPort(b.Root)
	if why := hereOnly(b.Rank, host); why != "" && b.spans() {
		return fmt.Errorf("collectives: bootstrap (%s): %s=%q names no host the others reach (%s), but %s; give an address of rank 0's host that every host reaches", b.Source, name, b.Root, why, b.spansWhy())
	}
	return nil
}

// rootSetting names the setting b.Root came from, for messages.
func (b Bootstrap) rootSetting() string {
	if b.Vars.Root != "" {
		return b.Vars.Root
	}
	return "Bootstrap.Root"
}

// spans reports whether the job is known to span hosts: SpansHosts, or a
// local size below the rank count.
func (b Bootstrap) spans() bool {
	return b.SpansHosts || b.LocalSize > 0 && b.LocalSize < b.NRanks
}

// spansWhy says how b is known to span hosts, for messages.
func (b Bootstrap) spansWhy() string {
	if b.LocalSize > 0 && b.LocalSize < b.NRanks {
		return fmt.Sprintf("only %d of the %d ranks run on this host", b.LocalSize, b.NRanks)
	}
	return "the launcher says the job spans hosts"
}

const (
	maxRanks = 1 << 16
	// bootMagic starts every rendezvous frame, and changes with what the
	// frames carry, so that ranks of different versions fail at the
	// frame, with an error that says so, rather than misread each other.
	bootMagic = 0x4d524237 // "MRB7": the call tag (callTag) covers the call's schedule
	// prevMagic is the version before ("MRB6": call tags of the call's
	// arguments alone, which differ from this version's for every call,
	// so that its ranks and this version's would fail every collective
	// with an error blaming the call; "MRB5" and older, untagged, are
	// not read at all).
	// Its frames are laid out as this version's, and rank 0 answers a
	// rank of it in its own frame, which that version reads, with why
	// the rendezvous failed.
	prevMagic   = 0x4d524236
	maxBlob     = 4096
	dialBackoff = 50 * time.Millisecond
	// helloWait bounds how long rank 0 waits for a connection's hello: a
	// rank writes it as soon as it connects.
	helloWait = 10 * time.Second
)

// errOtherJob is wrapped by the error of a rank that rank 0 turned away
// because it serves another job, the last answer the rank had at its
// deadline.
var errOtherJob = errors.New("the rendezvous there belongs to another job")

// errVersion is wrapped by readFrame's error for a frame of another
// version of the rendezvous: it says what to do.
var errVersion = errors.New("run the same metaroce version on every rank")

// abortWaiting tells every rank that has joined rank 0's rendezvous why
// rank 0 gives the setup up, best effort (each connection is closed
// either way), and returns that reason as rank 0's error. Without the
// abort a waiting rank saw only its connection close and blamed a version
// mismatch, though its progress line had promised that rank 0 would name
// the missing ranks.
func abortWaiting(conns []net.Conn, tag uint64, why error) error {
	for _, w := range conns {
		if w != nil {
			w.SetWriteDeadline(time.Now().Add(watchWrite))
			_ = writeFrame(w, 0, abortRanks, tag, abortText(why))
		}
	}
	return fmt.Errorf("collectives: bootstrap: %w", why)
}

// errNotRendezvous is wrapped by readFrame's error for bytes that are no
// rendezvous frame of any version: something other than metaroce listens
// at the address (a web server, another job's service), which a version
// hint would misdirect.
var errNotRendezvous = errors.New("something other than a metaroce rendezvous listens there: check the rendezvous address (METAROCE_ROOT, MASTER_ADDR/MASTER_PORT)")

// magicText prints a frame's magic for errors: its four bytes where they
// are printable ("MRB2"), else in hex.
func magicText(m uint32) string {
	b := binary.BigEndian.AppendUint32(nil, m)
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return fmt.Sprintf("%#010x", m)
		}
	}
	return fmt.Sprintf("%q", b)
}

// exchange runs the rendezvous: it returns every rank's blob, indexed by
// rank. It fails by the context's deadline with an error that names the
// ranks that never showed up (at the root) or the root that never answered.
func exchange(ctx context.Context, b Bootstrap, blob []byte) ([][]byte, error) {
	blobs, w, err := exchangeWatched(ctx, b, blob)
	w.close()
	return blobs, err
}

// exchangeWatched is exchange, and returns too the rendezvous connections,
// kept open to watch the setup that follows (setupWatch; nil for a job of
// one rank or on error).
func exchangeWatched(ctx context.Context, b Bootstrap, blob []byte) ([][]byte, *setupWatch, error) {
	if err := b.check(); err != nil {
		return nil, nil, err
	}
	if len(blob) > maxBlob {
		return nil, nil, fmt.Errorf("collectives: bootstrap: endpoint description of %d bytes exceeds %d", len(blob), maxBlob)
	}
	if b.NRanks == 1 {
		return [][]byte{blob}, nil, nil
	}
	w := &setupWatch{b: b, tag: jobTag(b.Job)}
	var blobs [][]byte
	var err error
	if b.Rank == 0 {
		blobs, w.leaves, err = exchangeRoot(ctx, b, blob)
	} else {
		blobs, w.root, err = exchangeLeaf(ctx, b, blob)
	}
	if err != nil {
		return nil, nil, err
	}
	w.keepAlive()
	return blobs, w, nil
}

// A rendezvous frame is, big-endian: magic u32, rank u32, ranks u32, job tag
// u64 (jobTag), entries u32, then each entry as length u32 and bytes. A
// rank's hello has one entry, its blob; rank 0's answer has every rank's,
// or none with 0 ranks when it turns the rank away (another job), or one,
// the reason as text, with abortRanks ranks when it gives the rendezvous
// up (a rank with another rank count, a rank number twice), so that the
// ranks already waiting fail with the cause rather than a closed
// connection. After the table, on the same connections (setupWatch), a
// rank reports to rank 0 with a frame of its rank, the rank count and no
// entry once it connected to every peer, or with an abort frame (its
// rank, abortRanks, its error) when its setup failed; once every rank
// reported, rank 0 confirms with a frame of rank 0, the rank count and no
// entry, and when the setup fails it sends every rank an abort frame
// (rank 0, abortRanks, the reason) instead.
const (
	frameHeader = 24
	abortRanks  = 1<<32 - 1
)

func writeFrame(w io.Writer, rank, nranks int, tag uint64, blobs ...[]byte) error {
	return writeFrameMagic(w, bootMagic, rank, nranks, tag, blobs...)
}

// writeFrameMagic writes a frame with the given magic: bootMagic, or
// prevMagic for a rank of the version before.
func writeFrameMagic(w io.Writer, magic uint32, rank, nranks int, tag uint64, blobs ...[]byte) error {
	buf := binary.BigEndian.AppendUint32(nil, magic)
	buf = binary.BigEndian.AppendUint32(buf, uint32(rank))
	buf = binary.BigEndian.AppendUint32(buf, uint32(nranks))
	buf = binary.BigEndian.AppendUint64(buf, tag)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(blobs)))
	for _, bl := range blobs {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(bl)))
		buf = append(buf, bl...)
	}
	_, err := w.Write(buf)
	return err
}

// frame is a rendezvous frame as read.
type frame struct {
	magic        uint32
	rank, nranks int
	tag          uint64
	blobs        [][]byte
}

// readFrame reads a frame written by writeFrame, bounding every count. A
// frame of the version before (prevMagic) is read whole, and returned
// with an error that wraps errVersion; another version's magic is an
// error that wraps it too, with the frame's magic only, and bytes that
// are no rendezvous frame of any version one that wraps errNotRendezvous.
func readFrame(r io.Reader, maxBlobs int) (f frame, err error) {
	var h [frameHeader]byte
	// The magic first, so that another service's reply shorter than a
	// frame's header is still told apart from a rendezvous.
	if _, err = io.ReadFull(r, h[:4]); err != nil {
		return
	}
	f.magic = binary.BigEndian.Uint32(h[:])
	if f.magic>>8 != bootMagic>>8 {
		// Not "MRB" and a version: another service answers there.
		return frame{magic: f.magic}, fmt.Errorf("%w: it answered %s, not a rendezvous frame (%s)", errNotRendezvous, magicText(f.magic), magicText(bootMagic))
	}
	if f.magic != bootMagic && f.magic != prevMagic {
		return frame{magic: f.magic}, fmt.Errorf("not a metaroce rendezvous peer of this version (magic %s, this version's is %s): %w",
			magicText(f.magic), magicText(bootMagic), errVersion)
	}
	if _, err = io.ReadFull(r, h[4:]); err != nil {
		return frame{}, err
	}
	f.rank = int(binary.BigEndian.Uint32(h[4:]))
	f.nranks = int(binary.BigEndian.Uint32(h[8:]))
	f.tag = binary.BigEndian.Uint64(h[12:])
	n32 := binary.BigEndian.Uint32(h[20:])
	if uint64(n32) > uint64(max(maxBlobs, 0)) {
		return frame{}, fmt.Errorf("rendezvous frame with %d entries, at most %d", n32, maxBlobs)
	}
	n := int(n32)
	for i := 0; i < n; i++ {
		var l [4]byte
		if _, err = io.ReadFull(r, l[:]); err != nil {
			return
		}
		l32 := binary.BigEndian.Uint32(l[:])
		if l32 > maxBlob {
			return frame{}, fmt.Errorf("rendezvous entry of %d bytes, at most %d", l32, maxBlob)
		}
		ln := int(l32)
		bl := make([]byte, ln)
		if _, err = io.ReadFull(r, bl); err != nil {
			return
		}
		f.blobs = append(f.blobs, bl)
	}
	if f.magic != bootMagic {
		err = fmt.Errorf("a metaroce rendezvous peer of another version (magic %s, this version's is %s): %w",
			magicText(f.magic), magicText(bootMagic), errVersion)
	}
	return
}

// rootListenAddr is where rank 0 listens: b.Root, or every interface at
// its port where the job spans hosts and b.Root's host is a name that
// resolves to loopback here. That is rank 0 given its own host by name
// where the name resolves to loopback on that host (Debian maps the host
// name to 127.0.1.1) while the other hosts resolve it to the host's
// address: listening on the loopback address would leave them no
// rendezvous to reach. It also returns every loopback address the name
// resolves to (127.0.1.1, and ::1 where the hosts file maps the name to
// both), which acceptRoot lets through beside the host's other addresses,
// so that ranks of another job on this host that dial another loopback
// address at the same port are turned away like any other job's. A
// loopback address given as such, or "localhost", is taken at its word.
func rootListenAddr(ctx context.Context, b Bootstrap) (addr string, home []netip.Addr) {
	host, port, err := net.SplitHostPort(b.Root)
	if err != nil || !b.spans() || strings.EqualFold(host, "localhost") {
		return b.Root, nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return b.Root, nil
	}
	for _, a := range lookupRoot(ctx, host) {
		if a.IsLoopback() {
			home = append(home, a)
		}
	}
	if len(home) == 0 {
		return b.Root, nil
	}
	return net.JoinHostPort("", port), home
}

// lookupRoot returns every address rank 0's rendezvous host name resolves
// to, unmapped, for rootListenAddr (a table of names in tests).
var lookupRoot = func(ctx context.Context, host string) []netip.Addr {
	ctx, cancel := context.WithTimeout(ctx, routeLookupTimeout)
	defer cancel()
	addrs, _ := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	return addrs
}

// wrongLoopback reports whether c, accepted on every interface for a
// rendezvous whose name resolves to the loopback addresses home, came in
// on another loopback address: a rank of another job on this host, whose
// rendezvous is that address at the same port. With home empty (the
// rendezvous listens where it was told) nothing is.
func wrongLoopback(c net.Conn, home []netip.Addr) bool {
	if len(home) == 0 {
		return false
	}
	ta, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return false
	}
	a := ta.AddrPort().Addr().Unmap()
	return a.IsLoopback() && !slices.Contains(home, a)
}

// listenRoot opens rank 0's rendezvous listener on root.
func listenRoot(ctx context.Context, root string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", root)
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = " (another job on this host may be using it: give each job its own METAROCE_ROOT, or MASTER_ADDR and MASTER_PORT)"
		}
		return nil, fmt.Errorf("collectives: bootstrap: rank 0 cannot listen on %s: %w%s", root, err, hint)
	}
	return ln, nil
}

// exchangeRoot is rank 0's side of the rendezvous; on success it also
// returns the connection of every other rank, by rank (nil at 0).
func exchangeRoot(ctx context.Context, b Bootstrap, blob []byte) (_ [][]byte, _ []net.Conn, err error) {
	ln := b.listener
	var home []netip.Addr
	if ln == nil {
		var at string
		at, home = rootListenAddr(ctx, b)
		ln, err = listenRoot(ctx, at)
		if err != nil && len(home) > 0 {
			err = fmt.Errorf("%w (every interface: %s=%q names this host, which resolves to %v here)", err, b.rootSetting(), b.Root, home)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	tag := jobTag(b.Job)
	blobs := make([][]byte, b.NRanks)
	blobs[0] = blob
	conns := make([]net.Conn, b.NRanks)
	defer func() {
		if err == nil {
			return // handed to the setup watch
		}
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	// Hellos are read concurrently, each within helloWait: a connection
	// that sends nothing (a port scan, a stopped process) must not hold up
	// the ranks behind it, and the deadline's error must still name the
	// ranks that never joined.
	type hello struct {
		c     net.Conn
		f     frame
		err   error
		wrong bool // came in on another loopback address (wrongLoopback)
	}
	hellos := make(chan hello)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				select {
				case hellos <- hello{err: err}:
				case <-quit:
				}
				return
			}
			wrong := wrongLoopback(c, home)
			go func() {
				c.SetDeadline(time.Now().Add(helloWait))
				f, err := readFrame(c, 1)
				select {
				case hellos <- hello{c: c, f: f, err: err, wrong: wrong}:
				case <-quit:
					c.Close()
				}
			}()
		}
	}()
	var tick <-chan time.Time
	if b.Progress != nil {
		t := time.NewTicker(b.progressEvery())
		defer t.Stop()
		tick = t.C
	}
	start := time.Now()
	for have := 1; have < b.NRanks; {
		var h hello
		select {
		case h = <-hellos:
		case <-tick:
			waited, left := waitTimes(ctx, start)
			miss := ranksWhere(0, len(blobs), func(r int) bool { return blobs[r] == nil })
			b.Progress(rootWaitingLine(b, miss, waited, left))
			continue
		case <-ctx.Done():
			return nil, nil, abortWaiting(conns, tag, missingErr(b, blobs, ctxErr(ctx)))
		}
		c, f, herr := h.c, h.f, h.err
		if c == nil {
			if ctx.Err() != nil {
				return nil, nil, abortWaiting(conns, tag, missingErr(b, blobs, ctxErr(ctx)))
			}
			return nil, nil, fmt.Errorf("collectives: bootstrap: accept on %s: %w", b.Root, herr)
		}
		// A rank of the version before: its frame reads whole, and it is
		// answered in that version's frame.
		old := f.magic == prevMagic && errors.Is(herr, errVersion)
		if (herr != nil && !old) || len(f.blobs) != 1 {
			// A stray connection: keep waiting for the real ranks.
			c.Close()
			continue
		}
		dl, _ := ctx.Deadline()
		c.SetDeadline(dl)
		if !sameJob(tag, f.tag) || h.wrong {
			// A rank of another job that shares this address, or that
			// reached this widened listener on a loopback address this
			// job's name does not resolve to: turn it away (it retries,
			// in case its own rank 0 comes up there later) and keep
			// waiting for this job's ranks.
			_ = writeFrameMagic(c, f.magic, 0, 0, tag) // best effort: it is closed either way
			c.Close()
			continue
		}
		rank, nranks, got := f.rank, f.nranks, f.blobs
		var bad error
		switch {
		case old:
			bad = fmt.Errorf("rank %d from %v runs another version of metaroce (rendezvous magic %s, rank 0's is %s): %w",
				rank, c.RemoteAddr(), magicText(f.magic), magicText(bootMagic), errVersion)
		case nranks != b.NRanks:
			bad = fmt.Errorf("rank %d from %v believes the job has %d ranks, rank 0 has %d (a rank of another job at the same address? give each job its own METAROCE_ROOT, or METAROCE_JOB)", rank, c.RemoteAddr(), nranks, b.NRanks)
		case rank <= 0 || rank >= b.NRanks:
			bad = fmt.Errorf("%v claims rank %d outside 1..%d", c.RemoteAddr(), rank, b.NRanks-1)
		case conns[rank] != nil:
			bad = fmt.Errorf("rank %d joined twice (second from %v): check the launcher's rank assignment", rank, c.RemoteAddr())
		}
		if bad != nil {
			// Tell the offender (in its version's frame) and every rank
			// already waiting why, best effort: each is closed either way.
			_ = writeFrameMagic(c, f.magic, 0, abortRanks, tag, []byte(bad.Error()))
			c.Close()
			return nil, nil, abortWaiting(conns, tag, bad)
		}
		conns[rank] = c
		blobs[rank] = got[0]
		have++
		if b.joined != nil {
			b.joined(rank)
		}
	}
	for r := 1; r < b.NRanks; r++ {
		if err := writeFrame(conns[r], 0, b.NRanks, tag, blobs...); err != nil {
			return nil, nil, fmt.Errorf("collectives: bootstrap: sending the table to rank %d: %w", r, err)
		}
		conns[r].SetDeadline(time.Time{}) // the watch bounds what follows
	}
	return blobs, conns, nil
}

// missingErr names the ranks that have not joined, and, where the setup
// deadline ended the wait, that deadline (setupDeadline.ended). Where the
// deadline is the plausible cause (longerHint) the error says to give a
// longer one, and blames the rendezvous address only where one could be
// wrong: the ranks of LaunchLocal and LaunchOn share the address this
// package chose. cause is the error of the context that ended the wait
// (ctxErr: with the cause of a cancel); a cancel is the caller's, which
// no address or deadline explains, and its error says so and wraps it.
func missingErr(b Bootstrap, blobs [][]byte, cause error) error {
	miss := ranksWhere(0, len(blobs), func(r int) bool { return blobs[r] == nil })
	if errors.Is(cause, context.Canceled) {
		return fmt.Errorf("rank 0: cancelled while ranks %s of %d had not joined the rendezvous at %s: %w", rankList(miss), b.NRanks, b.Root, cause)
	}
	hint := "check that every rank was started with the same METAROCE_ROOT/MASTER_ADDR:MASTER_PORT"
	if len(miss) == b.NRanks-1 && b.Vars.Rank != "" {
		// No rank at all: perhaps none was started (see rootWaitingLine).
		hint = fmt.Sprintf("%s; if no other rank was started, %s=%d and %s=%d do not belong to this run: %s",
			hint, b.Vars.Rank, b.Rank, b.Vars.NRanks, b.NRanks, unsetHint(b))
	}
	err := b.deadline.wrap(fmt.Errorf("ranks %s of %d never joined the rendezvous at %s%s: %w", rankList(miss), b.NRanks, b.Root, b.deadline.ended(cause), cause), cause)
	switch longer := b.deadline.longerHint(b, cause); {
	case longer == nil:
		return fmt.Errorf("%w; %s", err, hint)
	case b.inProcess():
		return fmt.Errorf("%w; %w", err, longer)
	default:
		return fmt.Errorf("%w; %w; or %s", err, longer, hint)
	}
}

// withLongerHint is err, an error of a rendezvous that cause ended, with
// longerHint's advice after it where it has any.
func withLongerHint(b Bootstrap, err, cause error) error {
	if longer := b.deadline.longerHint(b, cause); longer != nil {
		return fmt.Errorf("%w; %w", err, longer)
	}
	return err
}

// inProcess reports whether every rank of b's job runs in this process
// (LaunchLocal, LaunchOn), on a rendezvous address this package chose.
func (b Bootstrap) inProcess() bool { return b.Source == sourceLocal || b.Source == sourceHosts }

// minSetupDeadline is the shortest setup deadline under which the ranks
// of a launched job that did not join the rendezvous are taken for late
// rather than lost: launchers start a job's processes over seconds (ssh,
// containers, a Python framework's imports), and under this deadline it
// is as plausible a cause as a wrong address.
const minSetupDeadline = 10 * time.Second

// setupDeadline is the deadline of New's setup, for the errors of a setup
// that it ended: its length from New's start, and whether it is the
// caller's context's, which came before Config.Timeout. The zero value is
// unknown: the rendezvous ran outside New, and its errors say nothing of
// a deadline.
type setupDeadline struct {
	d      time.Duration
	caller bool
	// setting is Config.TimeoutSetting, the name the errors give the
	// deadline's setting ("" for Config.Timeout).
	setting string
}

// newSetupDeadline is the deadline New's setup runs under: timeout
// (Config.Timeout) from now, or ctx's own where that comes first.
func newSetupDeadline(ctx context.Context, timeout time.Duration, setting string) setupDeadline {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			return setupDeadline{d: max(left, 0), caller: true, setting: setting}
		}
	}
	return setupDeadline{d: timeout, setting: setting}
}

// known reports whether New set the deadline.
func (s setupDeadline) known() bool { return s.d > 0 || s.caller }

// error is the deadline as the errors of a setup that it ended wrap it,
// cause being the error that ended it; nil where cause is another (a
// cancel) or the deadline is unknown.
func (s setupDeadline) error(cause error) *DeadlineError {
	if !s.known() || !errors.Is(cause, context.DeadlineExceeded) {
		return nil
	}
	return &DeadlineError{Timeout: s.d, Caller: s.caller, Field: s.field()}
}

// field is the setting that sets the deadline as its errors name it:
// Config.TimeoutSetting, or Config.Timeout where none was given.
func (s setupDeadline) field() string {
	if s.setting != "" {
		return s.setting
	}
	return timeoutField
}

// String names the deadline: "the setup deadline of 1ms (Config.Timeout)"
// (DeadlineError.Error).
func (s setupDeadline) String() string {
	return (&DeadlineError{Timeout: s.d, Caller: s.caller, Field: s.field()}).Error()
}

// ended is the words an error puts after what did not happen, where
// cause, the error that ended it, is the deadline's: " before the setup
// deadline of 1ms (Config.Timeout) ran out"; "" where cause is another
// (a cancel) or the deadline is unknown. An error with these words is
// passed to wrap.
func (s setupDeadline) ended(cause error) string {
	if d := s.error(cause); d != nil {
		return " before " + d.Error() + " ran out"
	}
	return ""
}

// wrap returns err, an error that names the deadline in ended(cause)'s
// words, wrapping the deadline as a *DeadlineError as well where it
// names it; err as it is where it does not.
func (s setupDeadline) wrap(err, cause error) error {
	if d := s.error(cause); d != nil {
		return &endedError{err: err, dl: d}
	}
	return err
}

// deadlineHint is the advice of an error whose setup deadline was too
// short (longerHint). starved, which would say so again in its own words
// for in-process ranks, finds it in the error's chain.
type deadlineHint struct{ msg string }

func (h *deadlineHint) Error() string { return h.msg }

// longerHint advises a longer deadline where the deadline, having ended
// the rendezvous (cause, after ended's words), plausibly is why ranks
// were missing: every rank runs in this process, where no launcher or
// address failed them, or the deadline is under minSetupDeadline. It is
// nil otherwise.
func (s setupDeadline) longerHint(b Bootstrap, cause error) *deadlineHint {
	if s.ended(cause) == "" {
		return nil
	}
	switch {
	case b.Source == sourceHosts:
		// LaunchOn's ranks reach rank 0 through the hosts' network,
		// which may drop what it carries (a fabric with loss or a black
		// hole in place): the deadline is one cause of two.
		return &deadlineHint{fmt.Sprintf("all %d ranks run in this process, on hosts whose network this package reaches rank 0 through: the deadline was too short for them to join, or that network dropped the rendezvous (loss, a black hole, a link down); give a longer deadline or check the network", b.NRanks)}
	case b.inProcess():
		return &deadlineHint{fmt.Sprintf("all %d ranks run in this process, on a rendezvous address of its own: the deadline was too short for them to join; give a longer one", b.NRanks)}
	case s.d < minSetupDeadline:
		return &deadlineHint{fmt.Sprintf("a deadline under %v may end before the launcher has started every rank: give a longer one", minSetupDeadline)}
	}
	return nil
}

// ranksWhere lists the ranks r in [from, to) for which pred holds, in
// order: the ranks an error should name.
func ranksWhere(from, to int, pred func(r int) bool) []int {
	var out []int
	for r := from; r < to; r++ {
		if pred(r) {
			out = append(out, r)
		}
	}
	return out
}

// rankList prints ranks in order, the first 16 of them, for errors.
func rankList(ranks []int) string {
	ranks = append([]int(nil), ranks...)
	sort.Ints(ranks)
	const show = 16
	if len(ranks) > show {
		return fmt.Sprintf("%v and %d more", ranks[:show], len(ranks)-show)
	}
	return fmt.Sprint(ranks)
}

// exchangeLeaf is the side of the rendezvous of a rank other than 0; on
// success it also returns its connection to rank 0.
func exchangeLeaf(ctx context.Context, b Bootstrap, blob []byte) ([][]byte, net.Conn, error) {
	tag := jobTag(b.Job)
	var reached atomic.Bool
	// Once this rank has reached rank 0 it says so once: with many ranks,
	// a line from each of them at every interval would bury rank 0's,
	// which names the ranks still missing. (Turned away by another job's
	// rank 0, it waits again, and says so again.)
	said := false
	var lastDial atomic.Pointer[string]
	defer reportWaiting(ctx, b, func(waited, left time.Duration) string {
		r := reached.Load()
		if r && said {
			return ""
		}
		said = r
		var last string
		if p := lastDial.Load(); p != nil {
			last = *p
		}
		return leafWaitingLine(b, r, last, waited, left)
	})()
	var lastErr error
	for {
		blobs, c, err := joinRoot(ctx, b, tag, blob, &reached, &lastDial)
		if !errors.Is(err, errOtherJob) {
			if err != nil && lastErr != nil {
				err = fmt.Errorf("%w (before that, %v; give each job its own METAROCE_ROOT, or MASTER_ADDR and MASTER_PORT)", err, lastErr)
			}
			return blobs, c, err
		}
		// Another job's rank 0 answered at our address. Ours may still
		// come up there once that job's rendezvous is over. (A hello
		// still queued when that rank 0 finishes is reset, and fails
		// this rank at once.)
		lastErr = err
		if b.turnedAway != nil {
			b.turnedAway()
		}
		select {
		case <-ctx.Done():
			return nil, nil, otherJobErr(ctx, b, lastErr)
		case <-time.After(dialBackoff):
		}
	}
}

// otherJobErr is the error of a rank whose rendezvous ended (ctx is done)
// while another job's rank 0 answered at its address, lastErr being that
// rank 0's last answer: the deadline that ran out, named where New set it
// (setupDeadline), or the caller's cancel with its cause, which no
// deadline explains. Either way the address was another job's, and the
// error says to give each job its own.
func otherJobErr(ctx context.Context, b Bootstrap, lastErr error) error {
	until := "until the deadline"
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		until = "until this rank's setup was cancelled"
	case b.deadline.known():
		until = "until " + b.deadline.String() + " ran out"
	}
	return b.deadline.wrap(fmt.Errorf("collectives: bootstrap: rank %d: the rendezvous at %s served another job %s: %w (%w); give each job its own METAROCE_ROOT, or MASTER_ADDR and MASTER_PORT", b.Rank, b.Root, until, lastErr, ctxErr(ctx)), ctx.Err())
}

// reportWaiting calls b.Progress with line's text every interval, unless
// it is "", until the returned function is called, which returns once no
// call is in progress or to come. Line is called on one goroutine only.
// Without b.Progress it does nothing.
func reportWaiting(ctx context.Context, b Bootstrap, line func(waited, left time.Duration) string) (stop func()) {
	if b.Progress == nil {
		return func() {}
	}
	start := time.Now()
	t := time.NewTicker(b.progressEvery())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-t.C:
				if l := line(waitTimes(ctx, start)); l != "" {
					b.Progress(l)
				}
			case <-done:
				return
			}
		}
	})
	return func() {
		t.Stop()
		close(done)
		wg.Wait()
	}
}

// joinRoot makes one attempt at the rendezvous: it dials rank 0 (retrying
// until the context ends), sends this rank's hello and reads the table;
// reached is set once rank 0 took the hello, and lastDial holds the error of
// the latest failed dial, for the progress line. It returns an error wrapping
// errOtherJob when rank 0 turned it away; on success, the connection too,
// open.
func joinRoot(ctx context.Context, b Bootstrap, tag uint64, blob []byte, reached *atomic.Bool, lastDial *atomic.Pointer[string]) (_ [][]byte, _ net.Conn, err error) {
	var d net.Dialer
	var c net.Conn
	for {
		c, err = d.DialContext(ctx, "tcp", b.Root)
		if err == nil {
			break
		}
		msg := err.Error()
		lastDial.Store(&msg)
		// (Cleared below once a dial succeeds: a rank turned away by
		// another job's rank 0 dials again, and no stale error shows.)
		select {
		case <-ctx.Done():
			return nil, nil, withLongerHint(b, b.deadline.wrap(fmt.Errorf("collectives: bootstrap: rank %d could not reach rank 0's rendezvous at %s%s: %w (last error: %v)",
				b.Rank, b.Root, b.deadline.ended(ctx.Err()), ctxErr(ctx), err), ctx.Err()), ctx.Err())
		case <-time.After(dialBackoff):
		}
	}
	// When the deadline passes, the connection gets echoGrace more: rank
	// 0, whose deadline is this rank's give or take the ranks' start
	// times, says why it gives up (the ranks missing) just before it
	// closes, and closing at once here lost that word about half the
	// time. A cancel gets none: it is the caller's (New's own context
	// ends by its deadline), rank 0 knows nothing of it to say, and the
	// caller is owed its return at once, not a second later.
	graced := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			c.SetDeadline(time.Unix(1, 0))
		} else {
			c.SetDeadline(time.Now().Add(echoGrace))
		}
		close(graced)
	})
	// cancelled is the error of a rendezvous that the caller cancelled
	// (ctx's error and its cause), while this rank was doing what.
	cancelled := func(doing string) error {
		return fmt.Errorf("collectives: bootstrap: rank %d: cancelled while %s rank 0 at %s: %w", b.Rank, doing, b.Root, ctxErr(ctx))
	}
	defer func() {
		stopped := stop()
		if err != nil {
			c.Close()
			return
		}
		if !stopped {
			// The table came within the grace: the connection carries
			// on without its deadline, and the setup, whose context
			// has ended, fails on it and says so to rank 0 (closing
			// it here made rank 0 report this rank as gone).
			<-graced
			c.SetDeadline(time.Time{})
		}
	}()
	lastDial.Store(nil)
	if err := writeFrame(c, b.Rank, b.NRanks, tag, blob); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, nil, cancelled("sending its hello to")
		}
		return nil, nil, fmt.Errorf("collectives: bootstrap: rank %d: sending to %s: %w", b.Rank, b.Root, err)
	}
	reached.Store(true)
	defer reached.Store(false) // a rank 0 of another job turns it away
	f, err := readFrame(c, b.NRanks)
	if errors.Is(ctx.Err(), context.Canceled) {
		// Whatever came meanwhile, the table included: the cancel may
		// have come before it, and AfterFunc's deadline after.
		return nil, nil, cancelled("waiting for the table from")
	}
	if err != nil {
		why := "rank 0 closed the connection: it stopped, or it runs another version of metaroce, which turns this rank away; " + errVersion.Error()
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
			return nil, nil, withLongerHint(b, b.deadline.wrap(fmt.Errorf("collectives: bootstrap: rank %d: waiting for the table from rank 0 at %s%s (some ranks may not have started): %w",
				b.Rank, b.Root, b.deadline.ended(err), err), err), err)
		case errors.Is(err, errVersion):
			why = "rank 0 answered"
		case errors.Is(err, errNotRendezvous):
			why = "the address answered"
		}
		return nil, nil, fmt.Errorf("collectives: bootstrap: rank %d: waiting for the table from rank 0 at %s (%s): %w", b.Rank, b.Root, why, err)
	}
	if f.nranks == abortRanks && len(f.blobs) == 1 {
		return nil, nil, fmt.Errorf("collectives: bootstrap: rank %d: rank 0 at %s gave the rendezvous up: %s", b.Rank, b.Root, f.blobs[0])
	}
	if f.nranks == 0 || !sameJob(tag, f.tag) {
		return nil, nil, fmt.Errorf("%w (job tag %016x here, %016x there)", errOtherJob, tag, f.tag)
	}
	if f.nranks != b.NRanks || len(f.blobs) != b.NRanks {
		return nil, nil, fmt.Errorf("collectives: bootstrap: rank 0 sent a table of %d ranks, expected %d", len(f.blobs), b.NRanks)
	}
	return f.blobs, c, nil
}
