package udp

import (
	"runtime"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// Caller-runs: a user goroutine that finds the datapath idle runs the turn
// itself instead of handing its work to the event loop. On a small host the
// hand-off is what costs: the loop sleeps in epoll, the command's eventfd
// write wakes its thread (tens to hundreds of microseconds on a busy vCPU),
// and the completion comes back through a channel that wakes the user's
// thread in turn. Running the turn inline needs no wake-up at all, and on
// loopback, where a send lands in the receiver's socket within the sending
// system call, a goroutine that waits for the answer can read it itself.
//
// Turns are serialised by Endpoint.drive, which the loop holds for its own
// turns too, so the core and the sockets still see one thread at a time. A
// caller only ever try-locks: if the loop or another caller holds the lock,
// the holder (or the loop, woken as before) does the work.

// enqueueFast queues a send or receive and, when nobody else is running the
// datapath, applies it and transmits at once in the calling goroutine.
func (e *Endpoint) enqueueFast(c command) error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return ErrEndpointClosed
	}
	e.cmds = append(e.cmds, c)
	e.nCmds.Add(1)
	e.mu.Unlock()
	if e.tryDrive() {
		if c.kind == cmdSend {
			e.sendTurn()
		} else {
			e.assist(nil)
		}
		e.drive.Unlock()
		return nil
	}
	// The holder may have applied its commands already: make sure a
	// sleeping loop sees ours (a loop that is not asleep checks the queue
	// before it sleeps).
	e.wake()
	return nil
}

// driveWait bounds how long a caller waits for the drive lock before it
// hands its command to the holder. The holder is mostly the loop running a
// short turn (a wake-up's acknowledgement, a timer): waiting it out and
// transmitting inline costs less than the hand-off, which makes the loop
// run one more turn, its poll included, before the message leaves. In a
// loopback ping-pong about half the sends found the lock held, and waiting
// took the round trip from 1.54 to 1.48 times raw UDP's
// (BenchmarkLoopbackRTT).
const driveWait = 10 * time.Microsecond

// tryDrive takes e.drive if it is free or freed within driveWait, yielding
// the processor between attempts, and reports whether it did.
func (e *Endpoint) tryDrive() bool {
	if e.drive.TryLock() {
		return true
	}
	start := time.Now()
	for time.Since(start) < driveWait {
		runtime.Gosched()
		if e.drive.TryLock() {
			return true
		}
	}
	return false
}

// wake wakes the loop if it sleeps or is parked.
func (e *Endpoint) wake() {
	e.mu.Lock()
	e.wakeLocked()
	e.mu.Unlock()
}

// assist runs one turn in the calling goroutine, which holds e.drive. The
// turn first reads the listening socket of every plane: peers address every
// datagram to that socket, so reading it directly costs one system call
// where asking the poller first would cost two; the loop still watches
// every socket. It re-arms the loop's timer for what the turn scheduled and
// wakes the loop when the turn left work it cannot leave to the timer. It
// reports whether the turn moved anything.
//
// When awaited (a waiter's completion test) reports true after the first
// half of the turn, the caller returns to its user at once and the loop is
// woken to transmit what the turn made due: on a round trip that is the
// acknowledgement of the message just received, which then leaves from the
// other processor while the user already answers.
func (e *Endpoint) assist(awaited func() bool) bool {
	if e.dead {
		return false
	}
	now, busy := e.turnIn(e.listening)
	if awaited != nil && awaited() {
		e.wake()
		return true
	}
	return e.assistOut(now, busy)
}

// assistOut ends a caller's turn: it transmits, then re-arms the loop's
// timer or wakes the loop as assist describes, and reports whether the
// turn moved anything.
func (e *Endpoint) assistOut(now transport.Time, busy bool) bool {
	before := e.lastBusy
	now, more := e.turnOut(now, busy)
	if more || e.stopping {
		e.wake()
	} else if e.sleeping.Load() {
		// Only a loop asleep in the poller needs the timer; a spinning
		// or parked one runs its own turn before it sleeps.
		e.timer.arm(now, e.nextWake())
	}
	return busy || e.lastBusy != before
}

// sendTurn is the turn a Send runs in the calling goroutine, which holds
// e.drive: it applies the queued commands and transmits, and leaves reading
// the sockets and running the timers to the loop or a waiter. A send needs
// neither: what arrived meanwhile is read by whoever watches the sockets
// (the loop, woken by the arrival, or a goroutine spinning in Wait), and a
// RECV_READY not yet read only means the message leaves from that turn
// instead. Skipping the read saves a system call that finds nothing in a
// ping-pong, about 0.7 µs of a 16 µs loopback round trip
// (BenchmarkLoopbackRTT).
func (e *Endpoint) sendTurn() {
	if e.dead {
		return
	}
	now := e.now()
	e.assistOut(now, e.runCommands(now))
}

// progress runs one turn if the datapath is free and reports whether it did
// and moved anything.
func (e *Endpoint) progress(awaited func() bool) bool {
	if !e.drive.TryLock() {
		return false
	}
	moved := e.assist(awaited)
	e.drive.Unlock()
	return moved
}

// spinWait drives the datapath from the calling goroutine until done reports
// true or the endpoint's WaitSpin passes since the last turn that moved
// anything; it reports whether done became true.
func (e *Endpoint) spinWait(done func() bool) bool {
	spin := e.cfg.WaitSpin
	if spin <= 0 {
		return done()
	}
	e.spinners.Add(1)
	defer func() {
		if e.spinners.Add(-1) == 0 {
			e.unpark()
		}
	}()
	last := time.Now()
	for !done() {
		if e.progress(done) {
			last = time.Now()
			continue
		}
		if time.Since(last) > spin {
			return done()
		}
		e.yield()
	}
	return true
}

// yield gives the processor away between two polls of a spin: to the
// process's other goroutines, and with YieldCPU to other processes too.
func (e *Endpoint) yield() {
	runtime.Gosched()
	if e.cfg.YieldCPU {
		// Raw: the call returns once the kernel has let the CPU's other
		// runnable threads have their turn; handing this thread's P to
		// another thread meanwhile would only add one more of them.
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
}
