// Package core is the NCCL net plugin without cgo: reference-counted
// initialisation, integer handle tables for every object NCCL holds, the
// non-blocking connect/accept bookkeeping, the isend/irecv/test contract and
// error mapping. The c-shared package main only converts C types and calls
// in here, so all of this is testable with plain `go test`.
package core

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// Version is the plugin's release, shown in the init log line.
const Version = "0.1.0"

// Table capacities. Requests: enough for 1024 comms with 256 sends each in
// flight; comms: NCCL opens one per channel, peer and direction.
const (
	maxCtx     = 4096
	maxListen  = 16384
	maxComms   = 65536
	maxMRs     = 1 << 18
	maxReqs    = 1 << 18
	maxPending = 16384
)

// Pointer kinds accepted by RegMr (NCCL_PTR_*).
const (
	PtrHost = 0x1
	PtrCUDA = 0x2
)

// Props are a device's properties in ABI-neutral form; the C layer writes
// them into the version's ncclNetProperties struct.
type Props struct {
	Name, PCIPath       string
	GUID                uint64
	SpeedMbps, Port     int
	LatencyUs           float32
	MaxComms, MaxRecvs  int
	MaxP2pBytes         uint64
	MaxCollBytes        uint64
	MaxMultiRequestSize int
	RailID, PlaneID     int16
	Dev                 int // vProps = {1, {Dev}}
}

type mr struct {
	comm       Handle
	base, size uintptr
}

type req struct {
	comm Handle
	r    backend.Request
	n    int // size entries Test writes: 1 for a send, the group size for a receive
	// spans are the request's n buffers, [start, end) addresses, so that
	// deregMr can tell whether a request still uses the memory it
	// deregisters.
	spans [backend.MaxRecvs]span
}

// span is the address range [lo, hi) of one buffer.
type span struct{ lo, hi uintptr }

func spanOf(b []byte) span {
	if len(b) == 0 {
		return span{}
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return span{lo, lo + uintptr(len(b))}
}

// overlaps reports whether one of the request's buffers lies, in part, in
// [lo, hi).
func (r *req) overlaps(lo, hi uintptr) bool {
	for _, s := range r.spans[:r.n] {
		if s.lo < hi && lo < s.hi {
			return true
		}
	}
	return false
}

// pending is a connect in progress, keyed in Plugin.pending by its listen
// handle bytes.
type pending struct {
	d   backend.Dialer
	dev int
	// ctx is the context the connect was started under (0 for ABI ≤ v10,
	// which has none): finalizing that context aborts the connect.
	ctx Handle
	// stepped is when NCCL last called connect for it (see reapIdle).
	stepped time.Time
}

// Plugin is one plugin instance, made by New. The shared library makes a
// single one for the process (the plugin variable of package main, which
// its exported C entry points call, reading the C library's environment);
// tests create their own, with a lookup of their choosing.
type Plugin struct {
	lookup LookupEnv

	mu     sync.Mutex // guards the fields below and serialises init/finalize
	refs   int        // live Init contexts plus the legacy (≤ v10) init
	legacy bool       // a ≤ v10 init happened (never finalized)
	cfg    Config
	be     backend.Backend

	ctxs    *table[uint64]
	listens *table[backend.Listener]
	sends   *table[backend.SendConn]
	recvs   *table[backend.RecvConn]
	mrs     *table[mr]
	reqs    *table[req]

	dialMu    sync.Mutex
	pending   map[string]pending   // listen handle bytes -> connect in progress
	reaped    map[string]time.Time // handles whose connect reapIdleLocked released, when
	lastSweep time.Time            // of reapIdle, guarded by dialMu

	// now is the clock of the idle-connect reaper; time.Now unless a test
	// sets it before the first call.
	now func() time.Time

	// beforeRegister, when a test sets it, runs in RegMr after the comm
	// was found live and before the registration enters the table: the
	// window in which another thread's close of the comm races the call.
	// Nil in production.
	beforeRegister func()
}

// New returns an uninitialised plugin reading its configuration, and the
// log filter, via lookup when it is first initialised.
func New(lookup LookupEnv) *Plugin {
	return &Plugin{
		lookup:  lookup,
		ctxs:    newTable[uint64](KindCtx, maxCtx),
		listens: newTable[backend.Listener](KindListen, maxListen),
		sends:   newTable[backend.SendConn](KindSend, maxComms),
		recvs:   newTable[backend.RecvConn](KindRecv, maxComms),
		mrs:     newTable[mr](KindMR, maxMRs),
		reqs:    newTable[req](KindReq, maxReqs),
		pending: map[string]pending{},
		reaped:  map[string]time.Time{},
		now:     time.Now,
	}
}

// Init initialises the plugin for one communicator (v11/v12 semantics) and
// returns its context handle. The backend is created on the first call and
// kept afterwards: a Go c-shared library is never unloaded, so a later
// dlopen + init reuses it. abi is the ABI version in use (for the log).
func (p *Plugin) Init(abi int, commID uint64) (Handle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.setupLocked(abi); err != nil {
		return 0, err
	}
	h, ok := p.ctxs.add(commID)
	if !ok {
		return 0, fmt.Errorf("more than %d communicators use the plugin at once: %w", maxCtx, backend.ErrInternal)
	}
	p.refs++
	return h, nil
}

// InitLegacy is init for ABI v6..v10, which NCCL calls once per process.
func (p *Plugin) InitLegacy(abi int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.setupLocked(abi); err != nil {
		return err
	}
	if !p.legacy {
		p.legacy = true
		p.refs++
	}
	return nil
}

// setupLocked reads the environment and creates the backend, on the first
// init and again after an init that failed. The environment is read here,
// not when the library is loaded, so that variables set after the process
// started (NCCL's configuration files, a Python launcher) count.
func (p *Plugin) setupLocked(abi int) error {
	if p.be != nil {
		return nil
	}
	SetLogFilter(p.lookup.get("NCCL_DEBUG"), p.lookup.get("NCCL_DEBUG_SUBSYS"))
	cfg, err := ConfigFromEnv(p.lookup)
	if err != nil {
		return err
	}
	be, err := newBackend(cfg)
	if err != nil {
		return err
	}
	if len(be.Devices()) == 0 {
		return fmt.Errorf("backend %s found no network device; set METAROCE_IFNAMES: %w", be.Name(), backend.ErrInvalidUsage)
	}
	p.cfg, p.be = cfg, be
	var devs []string
	for _, d := range be.Devices() {
		devs = append(devs, fmt.Sprintf("%s (%s %s, %d Mb/s, %d plane(s), %d path(s)/conn, pci %s)", d.Name, d.IfName, d.Addr, d.SpeedMbps, d.Planes, d.Paths, orNone(d.PCIPath)))
	}
	Logf(LogInfo, SubsysInit|SubsysNet, "NET/MetaRoCE : MetaRoCE net plugin %s, ABI v%d, backend %s, %d thread(s), device(s): %s", Version, abi, be.Name(), cfg.Threads, strings.Join(devs, "; "))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Finalize releases one Init context. State is kept for a later Init.
//
// NCCL abandons the connects in progress of a communicator it aborts (it
// closes only the comms that connect returned) and then finalizes the
// communicator's context, while other communicators of the process may
// live on. Each abandoned connect holds a dialer (and, udp, a flow and a
// reference on its peer's connection), so Finalize aborts the connects
// started under ctx, and with the last context gone every one left.
func (p *Plugin) Finalize(ctx Handle) error {
	p.mu.Lock()
	if _, ok := p.ctxs.remove(ctx); !ok {
		p.mu.Unlock()
		return internalf("finalize of unknown context %#x", uint64(ctx))
	}
	p.refs--
	last := p.refs == 0
	var abandoned []backend.Dialer
	p.dialMu.Lock()
	for k, pd := range p.pending {
		if last || pd.ctx == ctx {
			abandoned = append(abandoned, pd.d)
			delete(p.pending, k)
		}
	}
	p.dialMu.Unlock()
	p.mu.Unlock()
	// Outside the locks: an Abort waits for its dialer's goroutine, which
	// must not hold up the other communicators' calls meanwhile.
	for _, d := range abandoned {
		d.Abort()
	}
	return nil
}

// Config returns the configuration the plugin was initialised with; ok is
// false before the first successful init.
func (p *Plugin) Config() (cfg Config, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg, p.be != nil
}

// Refs returns the number of live initialisations (for tests and logs).
func (p *Plugin) Refs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refs
}

// Live returns the number of live handles of every kind except contexts;
// zero after a clean shutdown.
func (p *Plugin) Live() int {
	p.dialMu.Lock()
	n := len(p.pending)
	p.dialMu.Unlock()
	return n + p.listens.len() + p.sends.len() + p.recvs.len() + p.mrs.len() + p.reqs.len()
}

func (p *Plugin) backendFor(ctx Handle) (backend.Backend, error) {
	if ctx != 0 {
		if _, ok := p.ctxs.get(ctx); !ok {
			return nil, internalf("unknown plugin context %#x", uint64(ctx))
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.be == nil {
		return nil, internalf("plugin used before init")
	}
	return p.be, nil
}

// Devices returns the number of devices.
func (p *Plugin) Devices() (int, error) {
	be, err := p.backendFor(0)
	if err != nil {
		return 0, err
	}
	return len(be.Devices()), nil
}

// Properties describes device dev.
func (p *Plugin) Properties(dev int) (Props, error) {
	be, err := p.backendFor(0)
	if err != nil {
		return Props{}, err
	}
	devs := be.Devices()
	if dev < 0 || dev >= len(devs) {
		return Props{}, internalf("device %d out of range 0..%d", dev, len(devs)-1)
	}
	d := devs[dev]
	return Props{
		Name: d.Name, PCIPath: d.PCIPath, GUID: uint64(dev), SpeedMbps: d.SpeedMbps,
		LatencyUs: d.LatencyUs, MaxComms: 65536, MaxRecvs: backend.AdvertisedRecvs,
		MaxP2pBytes: backend.MaxMessage, MaxCollBytes: 512 << 20, MaxMultiRequestSize: 1,
		RailID: -1, PlaneID: -1, Dev: dev,
	}, nil
}

// Listen opens a listener on dev and copies its handle into handle
// (NCCL_NET_HANDLE_MAXSIZE bytes).
func (p *Plugin) Listen(ctx Handle, dev int, handle []byte) (Handle, error) {
	be, err := p.backendFor(ctx)
	if err != nil {
		return 0, err
	}
	l, err := be.Listen(dev)
	if err != nil {
		return 0, err
	}
	hb := l.Handle()
	if len(hb) > len(handle) {
		_ = l.Close()
		return 0, internalf("listen handle of %d bytes does not fit %d", len(hb), len(handle))
	}
	clear(handle)
	copy(handle, hb)
	h, ok := p.listens.add(l)
	if !ok {
		_ = l.Close()
		return 0, fmt.Errorf("more than %d listeners open: %w", maxListen, backend.ErrInternal)
	}
	return h, nil
}

// Connect advances a non-blocking connect to the listener in handle. It
// returns 0 (and no error) while the connection is not ready; NCCL calls
// again with the same handle bytes, which key the attempt in progress.
func (p *Plugin) Connect(ctx Handle, dev int, handle []byte) (Handle, error) {
	be, err := p.backendFor(ctx)
	if err != nil {
		return 0, err
	}
	key := string(handle)
	now, after := p.now(), p.abandonAfter() // p.mu before dialMu, as in Finalize
	p.dialMu.Lock()
	idle := p.reapIdleLocked(now, after)
	p.dialMu.Unlock()
	abortIdle(idle)

	p.dialMu.Lock()
	pd, ok := p.pending[key]
	if at, gone := p.reaped[key]; !ok && gone {
		p.dialMu.Unlock()
		return 0, fmt.Errorf("connect called again for a handle whose connect was released at %s, after %v without a call (taken as given up by an aborted communicator): %w",
			at.Format(time.RFC3339), after, backend.ErrInvalidUsage)
	}
	if !ok {
		if len(p.pending) >= maxPending {
			p.dialMu.Unlock()
			return 0, fmt.Errorf("more than %d connects in progress: %w", maxPending, backend.ErrInternal)
		}
		d, err := be.Dial(dev, handle)
		if err != nil {
			p.dialMu.Unlock()
			return 0, err
		}
		pd = pending{d: d, dev: dev, ctx: ctx}
	}
	pd.stepped = now
	p.pending[key] = pd
	p.dialMu.Unlock()

	sc, err := pd.d.Step()
	if err == nil && sc == nil {
		return 0, nil
	}
	p.dialMu.Lock()
	delete(p.pending, key)
	p.dialMu.Unlock()
	if err != nil {
		pd.d.Abort()
		return 0, err
	}
	return p.handOut(ctx, sc)
}

// handOut gives the send comm sc of a connect started under ctx a handle.
// Finalize aborts the connects of its context, but one whose last Step has
// already taken its comm is beyond that abort: were its context finalized
// meanwhile (on another thread), the comm would be handed out under a
// context that no longer exists, holding its connection for good. The
// check and the handle are made under p.mu, as Finalize's removal of the
// context is, so the comm is either handed out before the finalize or
// closed here. A legacy connect (ctx 0) has no context to lose.
func (p *Plugin) handOut(ctx Handle, sc backend.SendConn) (Handle, error) {
	p.mu.Lock()
	if _, live := p.ctxs.get(ctx); ctx != 0 && !live {
		p.mu.Unlock()
		_ = sc.Close()
		return 0, internalf("connect under context %#x completed after the context was finalized: its connection is closed", uint64(ctx))
	}
	h, ok := p.sends.add(sc)
	p.mu.Unlock()
	if !ok {
		_ = sc.Close()
		return 0, fmt.Errorf("more than %d send connections: %w", maxComms, backend.ErrInternal)
	}
	return h, nil
}

// Idle connects. NCCL calls connect for one handle again and again until it
// returns a comm; it stops only when it gives the connect up, which it does
// without telling the plugin: on an aborted communicator, and before ABI
// v11 no finalize follows either (see Finalize). Such a connect holds its
// dialer, and under the udp backend a flow and a reference on the peer's
// connection, for the life of the process. A connect that NCCL has not
// called for abandonAfter is taken as given up and aborted: NCCL's own
// setup would have failed long before (its bootstrap and the plugin's
// handshake are bounded by Config.Timeout), so a live communicator never
// leaves a connect that long. Should NCCL call again after all, the call
// fails with an error that says so: dialing anew would announce the flow a
// second time, which the listener refuses as a stale handle (or, over a new
// connection, takes as a second comm nobody accepts).

// minAbandonAfter is the shortest idle time after which a connect is taken
// as given up, whatever Config.Timeout says.
const minAbandonAfter = time.Minute

// sweepEvery bounds how often Connect looks for idle connects, so that a
// setup of thousands of connects does not walk the table on every call.
const sweepEvery = time.Second

// abandonAfter is the idle time after which a connect is given up: twice
// Config.Timeout, and at least minAbandonAfter.
func (p *Plugin) abandonAfter() time.Duration {
	p.mu.Lock()
	t := p.cfg.Timeout
	p.mu.Unlock()
	return max(2*t, minAbandonAfter)
}

// reapIdleLocked removes from p.pending the connects not called for longer
// than after, at most once per sweepEvery, and returns their dialers for
// the caller to abort once it has released dialMu (an abort waits for the
// dialer's goroutine). The caller holds dialMu.
func (p *Plugin) reapIdleLocked(now time.Time, after time.Duration) []backend.Dialer {
	if now.Sub(p.lastSweep) < sweepEvery {
		return nil
	}
	p.lastSweep = now
	var idle []backend.Dialer
	for k, pd := range p.pending {
		if now.Sub(pd.stepped) > after {
			idle = append(idle, pd.d)
			delete(p.pending, k)
			if len(p.reaped) >= maxPending {
				clear(p.reaped) // a bound, not a history: late calls are rare
			}
			p.reaped[k] = now
		}
	}
	if len(idle) > 0 {
		Logf(LogWarn, SubsysNet, "NET/MetaRoCE : released %d connect(s) in progress that NCCL has not called for %v (an aborted communicator's)", len(idle), after)
	}
	return idle
}

func abortIdle(ds []backend.Dialer) {
	for _, d := range ds {
		d.Abort()
	}
}

// Accept advances a non-blocking accept; 0 means "call again".
func (p *Plugin) Accept(listen Handle) (Handle, error) {
	l, ok := p.listens.get(listen)
	if !ok {
		return 0, internalf("accept on unknown listen comm %#x", uint64(listen))
	}
	rc, err := l.Accept()
	if err != nil || rc == nil {
		return 0, err
	}
	h, ok := p.recvs.add(rc)
	if !ok {
		_ = rc.Close()
		return 0, fmt.Errorf("more than %d receive connections: %w", maxComms, backend.ErrInternal)
	}
	return h, nil
}

// CloseListen closes a listener.
func (p *Plugin) CloseListen(listen Handle) error {
	l, ok := p.listens.remove(listen)
	if !ok {
		return internalf("close of unknown listen comm %#x", uint64(listen))
	}
	return l.Close()
}

// RegMr registers host memory [base, base+size) for comm. Only host memory
// is supported: the plugin advertises ptrSupport = NCCL_PTR_HOST.
//
// A comm closed while the call runs (an abort, on another thread) has
// already forgotten its registrations (forget), so an entry added after
// that would stay in the table for good. As track does for requests, the
// comm is looked up again once the entry is in, and if it is gone the
// entry goes too and the call fails: Close removes the comm before it
// forgets its registrations, so one of the two always sees the other.
func (p *Plugin) RegMr(comm Handle, base, size uintptr, typ int) (Handle, error) {
	if !p.isComm(comm) {
		return 0, internalf("regMr on unknown comm %#x", uint64(comm))
	}
	if typ != PtrHost {
		return 0, internalf("regMr of memory type %#x: only host memory (NCCL_PTR_HOST) is supported", typ)
	}
	if p.beforeRegister != nil {
		p.beforeRegister()
	}
	h, ok := p.mrs.add(mr{comm: comm, base: base, size: size})
	if !ok {
		return 0, fmt.Errorf("more than %d memory registrations: %w", maxMRs, backend.ErrInternal)
	}
	if !p.isComm(comm) {
		p.mrs.remove(h)
		return 0, internalf("comm %#x closed while memory was being registered on it", uint64(comm))
	}
	return h, nil
}

// DeregMr releases a registration. When requests of comm still use the
// memory, the comm is aborted first (its requests fail, and no buffer of
// them is read or written once DeregMr returns): NCCL tears an aborted
// comm down by deregistering its buffers, freeing them, and only then
// closing the comm, so a transfer still in flight at deregMr would write
// into freed memory. An orderly teardown has nothing in flight by then.
//
// A handle passed with another comm than the one it was registered on is
// refused and stays registered: the check comes before the removal.
func (p *Plugin) DeregMr(comm, mh Handle) error {
	m, live, removed := p.mrs.removeIf1(mh, func(m mr) bool { return m.comm == comm })
	if !live {
		return internalf("deregMr of unknown memory handle %#x", uint64(mh))
	}
	if !removed {
		return internalf("deregMr of memory handle %#x on comm %#x, registered on %#x", uint64(mh), uint64(comm), uint64(m.comm))
	}
	lo, hi := m.base, m.base+m.size
	n := p.reqs.count(func(r req) bool { return r.comm == comm && r.overlaps(lo, hi) })
	if n == 0 {
		return nil
	}
	Logf(LogInfo, SubsysNet, "NET/MetaRoCE : deregMr on comm %#x with %d request(s) in flight in that memory: aborting the comm", uint64(comm), n)
	switch comm.Kind() {
	case KindSend:
		if sc, ok := p.sends.get(comm); ok {
			sc.Abort()
		}
	case KindRecv:
		if rc, ok := p.recvs.get(comm); ok {
			rc.Abort()
		}
	}
	return nil
}

func (p *Plugin) isComm(h Handle) bool {
	switch h.Kind() {
	case KindSend:
		_, ok := p.sends.get(h)
		return ok
	case KindRecv:
		_, ok := p.recvs.get(h)
		return ok
	}
	return false
}

// Isend starts sending buf with tag; 0 means "retry later".
func (p *Plugin) Isend(comm Handle, buf []byte, tag int32) (Handle, error) {
	sc, ok := p.sends.get(comm)
	if !ok {
		return 0, internalf("isend on unknown send comm %#x", uint64(comm))
	}
	if len(buf) > backend.MaxMessage {
		return 0, ErrSendSize(uint64(len(buf)))
	}
	r, err := sc.Isend(buf, tag)
	if err != nil || r == nil {
		return 0, err
	}
	q := req{comm: comm, r: r, n: 1}
	q.spans[0] = spanOf(buf)
	return p.track(q)
}

// Irecv posts a grouped receive; 0 means "retry later".
func (p *Plugin) Irecv(comm Handle, bufs [][]byte, tags []int32) (Handle, error) {
	rc, ok := p.recvs.get(comm)
	if !ok {
		return 0, internalf("irecv on unknown recv comm %#x", uint64(comm))
	}
	if len(bufs) < 1 || len(bufs) > backend.MaxRecvs {
		return 0, internalf("irecv of %d buffers (maxRecvs is %d)", len(bufs), backend.MaxRecvs)
	}
	r, err := rc.Irecv(bufs, tags)
	if err != nil || r == nil {
		return 0, err
	}
	q := req{comm: comm, r: r, n: len(bufs)}
	for i, b := range bufs {
		q.spans[i] = spanOf(b)
	}
	return p.track(q)
}

// track gives the request q a handle. A comm closed while q was being
// posted (an abort, on another thread) has already forgotten its requests
// (forget) and aborted the backend's, so q's entry would stay in the table
// for good: once the entry is in, the comm is looked up again, and if it
// is gone the entry goes too and the call fails. Close removes the comm
// before it forgets its requests, so one of the two always sees the other.
func (p *Plugin) track(q req) (Handle, error) {
	h, ok := p.reqs.add(q)
	if !ok {
		// The backend request stays in flight; completing it is impossible
		// without a handle, so report the exhaustion as fatal.
		return 0, fmt.Errorf("more than %d requests in flight: %w", maxReqs, backend.ErrInternal)
	}
	if !p.isComm(q.comm) {
		p.reqs.remove(h)
		return 0, internalf("comm %#x closed while a request was being posted on it", uint64(q.comm))
	}
	return h, nil
}

// Test polls a request. When done it returns the number n of size entries
// written to sizes (1 for a send, the group size for a receive; sizes must
// hold backend.MaxRecvs entries). When done or failed the handle is released.
func (p *Plugin) Test(rh Handle, sizes []int) (done bool, n int, err error) {
	rq, ok := p.reqs.get(rh)
	if !ok {
		return false, 0, internalf("test of unknown request %#x", uint64(rh))
	}
	done, err = rq.r.Test(sizes)
	if done || err != nil {
		p.reqs.remove(rh)
	}
	return done, rq.n, err
}

// CloseSend closes a send comm and forgets its requests and registrations.
func (p *Plugin) CloseSend(comm Handle) error {
	sc, ok := p.sends.remove(comm)
	if !ok {
		return internalf("closeSend of unknown send comm %#x", uint64(comm))
	}
	p.forget(comm)
	return sc.Close()
}

// CloseRecv closes a receive comm and forgets its requests and registrations.
func (p *Plugin) CloseRecv(comm Handle) error {
	rc, ok := p.recvs.remove(comm)
	if !ok {
		return internalf("closeRecv of unknown recv comm %#x", uint64(comm))
	}
	p.forget(comm)
	return rc.Close()
}

func (p *Plugin) forget(comm Handle) {
	p.reqs.removeIf(func(r req) bool { return r.comm == comm })
	p.mrs.removeIf(func(m mr) bool { return m.comm == comm })
}
