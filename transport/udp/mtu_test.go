package udp

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// inNetnsLoopback runs f on a goroutine whose thread lives in a new network
// namespace with only a loopback of the given MTU, so that sockets f opens
// see a route MTU below the datagrams it sends. The thread is discarded
// afterwards. It skips without the privilege to create a namespace.
func inNetnsLoopback(t *testing.T, mtu uint32, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		if err := loopbackUp(mtu); err != nil {
			done <- err
			return
		}
		defer func() { done <- nil }()
		f()
	}()
	if err := <-done; err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("cannot create a network namespace: %v", err)
		}
		t.Fatalf("network namespace: %v", err)
	}
}

// loopbackUp sets the MTU of this thread's namespace's loopback and brings
// it up.
func loopbackUp(mtu uint32) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint32(mtu)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// TestDatagramsAboveRouteMTU: datagrams larger than the route's MTU (here a
// 1500-byte loopback and 4152-byte datagrams) still arrive. The kernel
// refuses GSO sends whose segments exceed the MTU, where a single datagram
// is fragmented; the endpoint must fall back to single datagrams for that
// destination rather than retry the refused send forever, which stalled
// the transfer with no error.
func TestDatagramsAboveRouteMTU(t *testing.T) {
	inNetnsLoopback(t, 1500, func() {
		p := newPair(t, Config{MaxDatagram: 4152})
		msg := pattern(1<<20, 3)
		transfer(t, p.a, p.b, 1, msg)
		transfer(t, p.b, p.a, 2, msg)
		for _, e := range []*Endpoint{p.ea, p.eb} {
			require.Zero(t, e.Stats().SendErrors, "sends refused after the fallback")
		}
	})
}

// TestLiveConnectionsNeedNoTransientPeers: datagrams of established
// connections are attributed to their connection's peer, so the transient
// source table (bounded, evicted by a scan) holds no entry per source port
// of every peer: with more than its 1,024 sources in rotation it used to
// evict and allocate on every datagram.
func TestLiveConnectionsNeedNoTransientPeers(t *testing.T) {
	p := newPair(t, Config{PortsPerPlane: 16})
	transfer(t, p.a, p.b, 1, pattern(4<<20, 5))
	transfer(t, p.b, p.a, 2, pattern(4<<20, 6))
	for _, e := range []*Endpoint{p.ea, p.eb} {
		e.drive.Lock()
		n := len(e.peers.bySrc)
		e.drive.Unlock()
		require.LessOrEqual(t, n, 1, "transient peers")
	}
}
