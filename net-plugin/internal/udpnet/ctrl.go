package udpnet

import (
	"encoding/binary"
	"fmt"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// ctrlFlow is the flow of every connection that carries control messages;
// listeners allocate flow ids from 1.
const ctrlFlow = 0

// ctrlTag is the tag of control messages on ctrlFlow.
const ctrlTag = 0x4d52_4331

// ctrlKind says what a control message is.
type ctrlKind uint8

// Control message kinds.
const (
	// ctrlAnnounce: the dialer asks the listener to accept a flow.
	ctrlAnnounce ctrlKind = 1
	// ctrlAccept: the listener queued the flow for accept.
	ctrlAccept ctrlKind = 2
	// ctrlReject: no listener with that flow and nonce (stale or foreign
	// handle), or the flow is already connected.
	ctrlReject ctrlKind = 3
	// ctrlWithdraw: the dialer's answer to an accept that came after its
	// connect had ended (its deadline passed, or the plugin aborted it):
	// the listener drops the comm it queued for that connect. Flow and
	// nonce are the listener's, as in the accept. A listener of an older
	// version drops the message as malformed, and its queued comm fails
	// when used (the dialer also aborts the comm's flow).
	ctrlWithdraw ctrlKind = 4
)

func (k ctrlKind) String() string {
	switch k {
	case ctrlAnnounce:
		return "announce"
	case ctrlAccept:
		return "accept"
	case ctrlReject:
		return "reject"
	case ctrlWithdraw:
		return "withdraw"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ctrlMagic marks a control message.
var ctrlMagic = [4]byte{'M', 'R', 'U', 'C'}

// ctrlVersion is the layout version of control messages.
const ctrlVersion = 1

// Control message layout (integers big-endian), ctrlLen bytes:
//
//	0  4  magic "MRUC"
//	4  1  version
//	5  1  kind
//	6  2  zero
//	8  4  flow id (non-zero)
//	12 8  nonce (non-zero)
const ctrlLen = 20

// ctrlMsg is one control message.
type ctrlMsg struct {
	Kind  ctrlKind
	Flow  uint32
	Nonce uint64
}

// Length returns the encoded size in bytes.
func (m *ctrlMsg) Length() int { return ctrlLen }

// Append encodes m after b.
func (m *ctrlMsg) Append(b []byte) ([]byte, error) {
	if m.Kind < ctrlAnnounce || m.Kind > ctrlWithdraw || m.Flow == 0 || m.Nonce == 0 {
		return b, fmt.Errorf("udpnet: control message %v flow %d nonce %#x: %w", m.Kind, m.Flow, m.Nonce, backend.ErrInternal)
	}
	b = append(b, ctrlMagic[:]...)
	b = append(b, ctrlVersion, byte(m.Kind), 0, 0)
	b = binary.BigEndian.AppendUint32(b, m.Flow)
	return binary.BigEndian.AppendUint64(b, m.Nonce), nil
}

// parseCtrl decodes a control message written by Append.
func parseCtrl(into *ctrlMsg, b []byte) (int, error) {
	if len(b) < ctrlLen {
		return 0, fmt.Errorf("udpnet: control message of %d bytes, want %d: %w", len(b), ctrlLen, backend.ErrRemote)
	}
	if [4]byte(b[:4]) != ctrlMagic || b[4] != ctrlVersion || b[6] != 0 || b[7] != 0 {
		return 0, fmt.Errorf("udpnet: control message with bad magic or version % x (mixed plugin versions across ranks?): %w", b[:8], backend.ErrRemote)
	}
	m := ctrlMsg{Kind: ctrlKind(b[5]), Flow: binary.BigEndian.Uint32(b[8:]), Nonce: binary.BigEndian.Uint64(b[12:])}
	if m.Kind < ctrlAnnounce || m.Kind > ctrlWithdraw || m.Flow == 0 || m.Nonce == 0 {
		return 0, fmt.Errorf("udpnet: control message %v flow %d nonce %#x: %w", m.Kind, m.Flow, m.Nonce, backend.ErrRemote)
	}
	*into = m
	return ctrlLen, nil
}
