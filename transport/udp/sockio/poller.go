package sockio

import (
	"errors"
	"fmt"
	"sync/atomic"
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
// Wait from any goroutine through an eventfd.
//
// Wait must be called by one goroutine at a time; Add, Remove and Wake may be
// called from any goroutine.
type Poller struct {
	epfd   int
	evfd   int
	events [maxEvents]unix.EpollEvent
	one    [8]byte
	drain  [8]byte
	closed atomic.Bool
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
	p := &Poller{epfd: epfd, evfd: evfd}
	p.one[0] = 1 // eventfd counters are host-endian uint64; amd64 and arm64 are little-endian
	if err := p.add(evfd, wakeTag); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Add registers fd (for example Conn.Fd()) for readability; Wait reports it by
// tag, which must be >= 0.
func (p *Poller) Add(fd int, tag int32) error {
	if tag < 0 {
		return fmt.Errorf("sockio: poller tag %d is negative", tag)
	}
	return p.add(fd, tag)
}

func (p *Poller) add(fd int, tag int32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: tag}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("sockio: epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// Remove unregisters fd. Remove it before closing it.
func (p *Poller) Remove(fd int) error {
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("sockio: epoll_ctl del fd %d: %w", fd, err)
	}
	return nil
}

// Wait blocks until a registered socket is readable, Wake is called, or
// timeout passes (rounded up to whole milliseconds; 0 polls, negative waits
// without deadline). It appends the tags of readable sockets to ready[:0]
// (at most len(ready), the rest stay for the next Wait) and reports whether a
// Wake arrived.
func (p *Poller) Wait(timeout time.Duration, ready []int32) (n int, woken bool, err error) {
	if p.closed.Load() {
		return 0, false, ErrClosed
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	max := min(len(ready)+1, maxEvents)
	var got int
	for {
		got, err = unix.EpollWait(p.epfd, p.events[:max], ms)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return 0, false, fmt.Errorf("sockio: epoll_wait: %w", err)
	}
	for i := 0; i < got; i++ {
		tag := p.events[i].Fd
		if tag == wakeTag {
			woken = true
			unix.Read(p.evfd, p.drain[:])
			continue
		}
		if n < len(ready) {
			ready[n] = tag
			n++
		}
	}
	return n, woken, nil
}

// Wake makes the current or next Wait return with woken set. Several Wakes
// before a Wait collapse into one.
func (p *Poller) Wake() error {
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
	if p.closed.Swap(true) {
		return ErrClosed
	}
	err1 := unix.Close(p.evfd)
	err2 := unix.Close(p.epfd)
	return errors.Join(err1, err2)
}
