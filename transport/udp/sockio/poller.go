package sockio

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// wakeTag is the tag of the Poller's own eventfd; user tags are >= 0.
const wakeTag = -1

// maxEvents is how many readiness events one Wait collects.
const maxEvents = 128

// Poller waits for readability on many sockets with one epoll instance, so an
// event loop needs no goroutine per socket. It is level-triggered: a socket
// stays ready until ReadBatch has returned ErrWouldBlock. Wake interrupts a
// Wait from any goroutine through an eventfd; Mute silences the sockets
// while others read them.
//
// Wait must be called by one goroutine at a time; Add, Remove, Mute and Wake
// may be called from any goroutine, also while Close runs, and Close ends a blocked
// Wait with ErrClosed. After Close every call reports ErrClosed.
type Poller struct {
	epfd int
	evfd int
	// file and raw wrap epfd for the Go runtime's network poller: a Wait
	// that must block parks its goroutine there instead of blocking its
	// thread in epoll_wait (see Wait).
	file *os.File
	raw  syscall.RawConn
	// parkPoll is the callback park hands the runtime, built once so that
	// a Wait allocates nothing; parkMax, parkGot and parkErr are its
	// argument and results.
	parkPoll         func(uintptr) bool
	parkMax, parkGot int
	parkErr          error
	events           [maxEvents]unix.EpollEvent
	one              [8]byte
	drain            [8]byte
	closed           atomic.Bool
	// fdMu is held shared by every use of epfd or evfd outside the
	// runtime's poller (Add, Remove, Mute, Wake, Wait's non-blocking poll and
	// its drain of the eventfd) and exclusively by Close, so that no call
	// racing with Close reaches a descriptor number that Close released
	// and the process may already have reused. A parked Wait holds no
	// lock: the runtime keeps the epoll descriptor open under it until it
	// returns.
	fdMu sync.RWMutex
	// regs maps each descriptor registered with Add to its tag and
	// whether it is in the epoll instance now; muted says whether Mute
	// took them out, and stray counts those an epoll_ctl failure left on
	// the wrong side, for the next Mute to retry. regMu guards all three.
	regMu sync.Mutex
	regs  map[int]reg
	muted bool
	stray int
}

// NewPoller creates the epoll instance and its wake-up eventfd.
func NewPoller() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sockio: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("sockio: eventfd: %w", err)
	}
	p := &Poller{epfd: epfd, evfd: evfd, regs: map[int]reg{}}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, fmt.Errorf("sockio: epoll fd non-blocking: %w", err)
	}
	p.file = os.NewFile(uintptr(epfd), "epoll")
	if p.raw, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		unix.Close(evfd)
		return nil, fmt.Errorf("sockio: epoll fd: %w", err)
	}
	p.parkPoll = func(uintptr) bool {
		p.parkGot, p.parkErr = p.poll(p.parkMax)
		return p.parkGot > 0 || p.parkErr != nil
	}
	p.one[0] = 1 // eventfd counters are host-endian uint64; amd64 and arm64 are little-endian
	if err := p.add(evfd, wakeTag); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Add registers fd (for example Conn.Fd()) for readability; Wait reports it by
// tag, which must be >= 0.
func (p *Poller) Add(fd int, tag int32) error { return p.register(fd, tag, false) }

// AddAlways registers fd like Add, except that Mute leaves it in: for
// descriptors that seldom turn readable, whose wake-ups a Mute would not
// save, so that a change of Mute costs no epoll_ctl for them.
func (p *Poller) AddAlways(fd int, tag int32) error { return p.register(fd, tag, true) }

// register is Add (always false) and AddAlways (true).
func (p *Poller) register(fd int, tag int32, always bool) error {
	if tag < 0 {
		return fmt.Errorf("sockio: poller tag %d is negative", tag)
	}
	if err := p.lockRegs(); err != nil {
		return err
	}
	defer p.unlockRegs()
	if err := p.add(fd, tag); err != nil {
		return err
	}
	p.regs[fd] = reg{tag: tag, in: true, always: always}
	if p.muted && !always {
		if err := p.arm(fd, tag, false); err != nil {
			p.stray++
			return err
		}
		p.regs[fd] = reg{tag: tag}
	}
	return nil
}

// reg is a descriptor registered with Add or AddAlways: its tag, whether
// it is in the epoll instance (not muted) now, and whether Mute leaves it
// there (AddAlways).
type reg struct {
	tag    int32
	in     bool
	always bool
}

// arm puts fd back into the epoll instance (on) or takes it out. Out, not
// merely with its interest cleared: a socket with no epoll entry has no
// waiter on its wait queue, so the kernel's send and receive paths skip
// the wake-up (and its lock) for every datagram, which an entry with no
// interest would still cost them.
func (p *Poller) arm(fd int, tag int32, on bool) error {
	if on {
		return p.add(fd, tag)
	}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("sockio: epoll_ctl del fd %d: %w", fd, err)
	}
	return nil
}

// Mute turns off (on true) or back on the readiness reports of every
// descriptor registered with Add; Wake still works. A muted descriptor
// wakes nothing: a datagram arriving on a muted socket neither makes this
// epoll instance readable nor, through it, the Go runtime's poller, where
// the instance is registered (see park). Unmuted, a descriptor that is
// readable is reported by the next Wait, as if it had never been muted
// (the kernel checks its readiness when it is added back).
//
// Why: an event loop that hands the datapath to goroutines reading the
// sockets themselves (udp's Request.Wait and Request.Poll) parks off the
// poller meanwhile, but every datagram still woke the runtime's poller,
// and with it a thread blocked there whenever the process had an idle P.
// In the net plugin's two-process harness that cost a context switch per
// datagram: muting took 8-byte isend→test from 34-40 to 13-15 µs and the
// goodput from 6.4-6.7 to 8.6 GB/s in alternated runs of the harness
// (docs/results.md).
//
// Muting takes the descriptors out of the epoll instance, which also
// spares the kernel a wake-up attempt per datagram sent or received
// (arm); in alternated runs of the collectives' BusBW benchmarks that
// made the 1 MiB cells another 1-8% faster than clearing their interest
// did. Mute costs one epoll_ctl per descriptor registered with Add when
// it changes the state, nothing otherwise; those registered with
// AddAlways stay in. Descriptors added while muted start
// muted; Remove of a muted descriptor only forgets it. A descriptor that
// an epoll_ctl failure left on the wrong side is retried by the next Mute
// call, whatever its argument, and the error names it.
func (p *Poller) Mute(on bool) error {
	if err := p.lockRegs(); err != nil {
		return err
	}
	defer p.unlockRegs()
	if p.muted == on && p.stray == 0 {
		return nil
	}
	p.muted, p.stray = on, 0
	var errs []error
	for fd, r := range p.regs {
		if r.in != on || r.always {
			continue // already where it belongs
		}
		if err := p.arm(fd, r.tag, !on); err != nil {
			// Left where it was; the next Mute tries again.
			p.stray++
			errs = append(errs, err)
			continue
		}
		p.regs[fd] = reg{tag: r.tag, in: !on}
	}
	return errors.Join(errs...)
}

func (p *Poller) add(fd int, tag int32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: tag}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("sockio: epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// Muted reports whether the last Mute call muted the descriptors.
func (p *Poller) Muted() bool {
	p.regMu.Lock()
	defer p.regMu.Unlock()
	return p.muted
}

// lockRegs takes fdMu shared and regMu, for a change of the registrations;
// unlockRegs releases both. It fails with ErrClosed, holding nothing, once
// Close ran. (A pair rather than a returned closure: the loop mutes on
// every turn, and a closure would allocate each time.)
func (p *Poller) lockRegs() error {
	p.fdMu.RLock()
	if p.closed.Load() {
		p.fdMu.RUnlock()
		return ErrClosed
	}
	p.regMu.Lock()
	return nil
}

func (p *Poller) unlockRegs() {
	p.regMu.Unlock()
	p.fdMu.RUnlock()
}

// Remove unregisters fd. Remove it before closing it.
func (p *Poller) Remove(fd int) error {
	if err := p.lockRegs(); err != nil {
		return err
	}
	defer p.unlockRegs()
	r, ok := p.regs[fd]
	delete(p.regs, fd)
	if ok && !r.always && r.in == p.muted {
		p.stray-- // on the wrong side, waiting for a retry: no longer
	}
	if ok && !r.in {
		return nil // Mute took it out already
	}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("sockio: epoll_ctl del fd %d: %w", fd, err)
	}
	return nil
}

// Wait blocks until a registered socket is readable, Wake is called, or
// timeout passes (0 polls, negative waits without deadline). While it blocks
// its goroutine is parked in the runtime's network poller (see park). It appends the tags of readable sockets to ready[:0]
// (at most len(ready), the rest stay for the next Wait) and reports whether a
// Wake arrived.
func (p *Poller) Wait(timeout time.Duration, ready []int32) (n int, woken bool, err error) {
	max := min(len(ready)+1, maxEvents)
	p.fdMu.RLock()
	if p.closed.Load() {
		p.fdMu.RUnlock()
		return 0, false, ErrClosed
	}
	got, err := p.poll(max)
	p.fdMu.RUnlock()
	if err == nil && got == 0 && timeout != 0 {
		got, err = p.park(timeout, max)
	}
	if err != nil {
		return 0, false, err
	}
	for i := 0; i < got; i++ {
		tag := p.events[i].Fd
		if tag == wakeTag {
			woken = true
			p.fdMu.RLock()
			if !p.closed.Load() {
				unix.Read(p.evfd, p.drain[:])
			}
			p.fdMu.RUnlock()
			continue
		}
		if n < len(ready) {
			ready[n] = tag
			n++
		}
	}
	return n, woken, nil
}

// poll collects up to max ready events without blocking.
func (p *Poller) poll(max int) (int, error) {
	for {
		got, err := unix.EpollWait(p.epfd, p.events[:max], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("sockio: epoll_wait: %w", err)
		}
		return got, nil
	}
}

// park waits for events in the Go runtime's network poller, where the epoll
// instance itself is registered: the goroutine parks and its thread and P
// stay free for other goroutines. A thread blocked in epoll_wait would keep
// its P until the runtime's monitor takes it back (20 µs to 10 ms later),
// and with several endpoints in one process on few cores that left the
// cores idle while the goroutines the loop had just woken waited for a P.
func (p *Poller) park(timeout time.Duration, max int) (int, error) {
	if timeout > 0 {
		if err := p.file.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			return 0, fmt.Errorf("sockio: epoll deadline: %w", err)
		}
		defer p.file.SetReadDeadline(time.Time{})
	}
	p.parkMax, p.parkGot, p.parkErr = max, 0, nil
	err := p.raw.Read(p.parkPoll)
	got, perr := p.parkGot, p.parkErr
	switch {
	case perr != nil:
		return 0, perr
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case errors.Is(err, os.ErrClosed) || err != nil && p.closed.Load():
		// A Wait parked when Close came gets the runtime poller's own
		// "use of closed file", which is not os.ErrClosed.
		return 0, ErrClosed
	case err != nil:
		return 0, fmt.Errorf("sockio: epoll wait: %w", err)
	}
	return got, nil
}

// Wake makes the current or next Wait return with woken set. Several Wakes
// before a Wait collapse into one.
func (p *Poller) Wake() error {
	p.fdMu.RLock()
	defer p.fdMu.RUnlock()
	if p.closed.Load() {
		return ErrClosed
	}
	_, err := unix.Write(p.evfd, p.one[:])
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("sockio: eventfd write: %w", err)
	}
	return nil
}

// Close releases the epoll instance and the eventfd; the registered sockets
// stay open.
func (p *Poller) Close() error {
	p.fdMu.Lock()
	defer p.fdMu.Unlock()
	if p.closed.Swap(true) {
		return ErrClosed
	}
	err1 := unix.Close(p.evfd)
	err2 := p.file.Close()
	return errors.Join(err1, err2)
}
