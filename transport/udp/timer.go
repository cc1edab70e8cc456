package udp

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/transport"
	"golang.org/x/sys/unix"
)

// timerTag is the poller tag of the loop's timerfd (socket tags are
// 0..len(socks)-1).
const timerTag = 1 << 30

// timerFD is a CLOCK_MONOTONIC timerfd registered with the poller: it wakes
// the loop for the core's NextTimeout with nanosecond resolution, where
// epoll's own timeout has only milliseconds.
type timerFD struct {
	fd    int
	armed transport.Time // absolute deadline in loop time, 0 when disarmed
	spec  unix.ItimerSpec
	buf   [8]byte
}

func newTimerFD() (*timerFD, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("udp: timerfd_create: %w", err)
	}
	return &timerFD{fd: fd}, nil
}

// arm makes the timer fire at deadline (loop time) or earlier, now being the
// current loop time; transport.Never asks for no expiry. A timer already
// armed for a time between now and deadline is left alone: it fires early,
// and the turn it causes re-arms it. Deadlines mostly move later (every
// send pushes the tail-loss timeout out), so this saves a system call on
// nearly every turn for an occasional spurious wake-up.
func (t *timerFD) arm(now, deadline transport.Time) {
	if t.armed != 0 && t.armed > now && t.armed <= deadline {
		return
	}
	if deadline == transport.Never {
		if t.armed == 0 {
			return
		}
		t.armed = 0
		t.spec = unix.ItimerSpec{}
		unix.TimerfdSettime(t.fd, 0, &t.spec, nil)
		return
	}
	t.armed = deadline
	d := max(time.Duration(deadline-now), time.Microsecond)
	t.spec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	unix.TimerfdSettime(t.fd, 0, &t.spec, nil)
}

// fired consumes an expiry so that the level-triggered poller stops
// reporting it.
// A read that finds no expiry (another turn consumed it, and the timer may
// since have been re-armed) leaves the armed deadline alone.
func (t *timerFD) fired() {
	if n, _ := unix.Read(t.fd, t.buf[:]); n == len(t.buf) {
		t.armed = 0
	}
}

func (t *timerFD) close() { unix.Close(t.fd) }
