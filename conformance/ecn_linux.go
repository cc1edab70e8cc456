//go:build linux

package conformance

import (
	"net"

	"golang.org/x/sys/unix"
)

// setTOS sets the IPv4 TOS byte (or IPv6 traffic class) of the datagrams
// sock sends from now on; its two low bits are the ECN codepoint.
func setTOS(sock *net.UDPConn, v6 bool, tos int) error {
	rc, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, tos)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
