package tcpnet

import (
	"encoding/binary"
	"fmt"
)

// helloMagic opens the first bytes the connecting side writes on each socket.
var helloMagic = [4]byte{'M', 'R', 'T', 'S'}

// helloLen is the size of a hello in bytes:
// magic(4) version(1) index(1) socks(1) zero(1) nonce(8) connID(8).
const helloLen = 24

// The listener's answer to a hello: one byte on the same socket. The dialer
// counts a socket connected only once it reads helloAccepted, so that a
// stale or foreign handle fails connect, naming the peer, instead of a
// later send or receive.
const (
	// helloAccepted: the socket joined its connection.
	helloAccepted byte = 0x01
	// helloStale: the hello's nonce (or socket count) is not this
	// listener's: the handle is stale (its listener closed and another
	// took the port) or comes from another job.
	helloStale byte = 0x02
	// helloRefused: the listener is closing, already holds
	// maxPendingConns connections half set up by dialers still there,
	// has this socket's slot filled, or dropped this socket's connection
	// as half set up for longer than twice the listener's connect
	// timeout (its dialer's timeout is longer).
	helloRefused byte = 0x03
)

// connConfirmed is the dialer's last word of the handshake, one byte on
// socket 0 after that socket's answer: every socket of the connection was
// accepted and the dialer has taken the connection (dialer.finish). The
// listener hands a complete connection out only once it has read this
// byte (listener.awaitConfirm), so that a connect that ends between the
// listener's last helloAccepted and the dialer's reading it (its deadline,
// an abort) leaves the listener nothing to hand out: the dialer closes its
// sockets instead of confirming, and the listener drops the connection.
// Any other byte, or silence past the listener's wait, drops it too.
const connConfirmed byte = 0x04

// hello is the first message on every socket of a connection. It lets the
// listener group sockets into connections and put each in its slot.
type hello struct {
	// Index is the socket's slot, 0..Socks-1.
	Index int
	// Socks is the number of sockets of the connection.
	Socks int
	// Nonce must equal the listener's nonce.
	Nonce uint64
	// ConnID is chosen at random by the connecting side, shared by all
	// sockets of one connection.
	ConnID uint64
}

// Length returns the encoded size in bytes.
func (h *hello) Length() int { return helloLen }

// Append encodes h after b.
func (h *hello) Append(b []byte) ([]byte, error) {
	if h.Socks < 1 || h.Socks > MaxSocks || h.Index < 0 || h.Index >= h.Socks {
		return b, fmt.Errorf("tcpnet: hello for socket %d of %d", h.Index, h.Socks)
	}
	b = append(b, helloMagic[:]...)
	b = append(b, handleVersion, byte(h.Index), byte(h.Socks), 0)
	b = binary.BigEndian.AppendUint64(b, h.Nonce)
	return binary.BigEndian.AppendUint64(b, h.ConnID), nil
}

// parseHello decodes a hello, rejecting anything a MetaRoCE sender would not
// write (a port scanner or a stray client, for instance).
func parseHello(into *hello, b []byte) (int, error) {
	if len(b) < helloLen {
		return 0, fmt.Errorf("tcpnet: short hello (%d bytes)", len(b))
	}
	if [4]byte(b[:4]) != helloMagic || b[4] != handleVersion || b[7] != 0 {
		return 0, fmt.Errorf("tcpnet: unexpected hello % x (not a MetaRoCE peer of this version)", b[:8])
	}
	h := hello{Index: int(b[5]), Socks: int(b[6]), Nonce: binary.BigEndian.Uint64(b[8:]), ConnID: binary.BigEndian.Uint64(b[16:])}
	if h.Socks < 1 || h.Socks > MaxSocks || h.Index >= h.Socks {
		return 0, fmt.Errorf("tcpnet: hello for socket %d of %d", h.Index, h.Socks)
	}
	*into = h
	return helloLen, nil
}
