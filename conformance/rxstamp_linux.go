//go:build linux

package conformance

import (
	"encoding/binary"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// rxStampOOB is the control-message space one receive needs for its
// kernel timestamp, bytes.
var rxStampOOB = unix.CmsgSpace(16)

// enableRxStamps asks the kernel to stamp every datagram sock receives with
// the time it arrived (SO_TIMESTAMPNS). Timing evidence then measures the
// IUT and the network, not when the tester's goroutine got to read: on a
// loaded host the read can lag the arrival by many milliseconds.
func enableRxStamps(sock *net.UDPConn) error {
	rc, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return err
	}
	return serr
}

// rxStamp returns the kernel's arrival time from the control messages of
// one receive, and false when there is none.
func rxStamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_TIMESTAMPNS {
			continue
		}
		// A struct timespec: two longs, seconds then nanoseconds.
		switch len(m.Data) {
		case 16:
			return time.Unix(int64(binary.NativeEndian.Uint64(m.Data)), int64(binary.NativeEndian.Uint64(m.Data[8:]))), true
		case 8:
			return time.Unix(int64(int32(binary.NativeEndian.Uint32(m.Data))), int64(int32(binary.NativeEndian.Uint32(m.Data[4:])))), true
		}
	}
	return time.Time{}, false
}
