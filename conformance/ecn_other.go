//go:build !linux

package conformance

import (
	"errors"
	"net"
)

// setTOS is not available here: the ECN case is skipped.
func setTOS(*net.UDPConn, bool, int) error {
	return errors.New("setting the ECN codepoint of a UDP socket is implemented for Linux only")
}
