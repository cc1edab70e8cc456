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

// arm makes the timer fire at deadline (loop time), now being the current
// loop time; transport.Never disarms it. Re-arming for the same deadline
// costs no system call.
func (t *timerFD) arm(now, deadline transport.Time) {
	if deadline == transport.Never {
		if t.armed == 0 {
			return
		}
		t.armed = 0
		t.spec = unix.ItimerSpec{}
		unix.TimerfdSettime(t.fd, 0, &t.spec, nil)
		return
	}
	if deadline == t.armed {
		return
	}
	t.armed = deadline
	d := max(time.Duration(deadline-now), time.Microsecond)
	t.spec = unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	unix.TimerfdSettime(t.fd, 0, &t.spec, nil)
}

// fired consumes an expiry so that the level-triggered poller stops
// reporting it.
func (t *timerFD) fired() {
	unix.Read(t.fd, t.buf[:])
	t.armed = 0
}

func (t *timerFD) close() { unix.Close(t.fd) }
