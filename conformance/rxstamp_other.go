//go:build !linux

package conformance

import (
	"errors"
	"net"
	"time"
)

// rxStampOOB is the control-message space one receive needs: none here.
const rxStampOOB = 0

// enableRxStamps is not available here: packets are timed when read.
func enableRxStamps(*net.UDPConn) error {
	return errors.New("kernel receive timestamps are implemented for Linux only")
}

// rxStamp never finds a kernel timestamp here.
func rxStamp([]byte) (time.Time, bool) { return time.Time{}, false }
