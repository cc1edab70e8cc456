package sockio

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// cmsgHdrLen is the size of struct cmsghdr on 64-bit Linux (len uint64,
// level int32, type int32); cmsgAlign is the alignment of every header.
const (
	cmsgHdrLen = 16
	cmsgAlign  = 8
)

// errBadCmsg reports a control-message buffer the kernel could not have
// written: a header that claims more bytes than the buffer holds.
var errBadCmsg = errors.New("sockio: malformed control message")

// RecvInfo is what the control messages of one received datagram say.
type RecvInfo struct {
	ECN uint8 // the two ECN bits of the IPv4 TOS or IPv6 traffic class
	Seg int   // GRO segment size in bytes, 0 when not coalesced
}

// ParseControl walks the control messages of one received datagram and
// extracts the ECN bits (IP_TOS, IPV6_TCLASS) and the GRO segment size
// (UDP_GRO). Unknown messages are skipped; a truncated or inconsistent buffer
// gives an error and whatever was read before it.
func ParseControl(b []byte) (RecvInfo, error) {
	var info RecvInfo
	for len(b) >= cmsgHdrLen {
		l := binary.NativeEndian.Uint64(b[0:8])
		level := int32(binary.NativeEndian.Uint32(b[8:12]))
		typ := int32(binary.NativeEndian.Uint32(b[12:16]))
		if l < cmsgHdrLen || l > uint64(len(b)) {
			return info, errBadCmsg
		}
		data := b[cmsgHdrLen:l]
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_TOS && len(data) >= 1:
			info.ECN = data[0] & 3
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_TCLASS && len(data) >= 4:
			info.ECN = uint8(binary.NativeEndian.Uint32(data)) & 3
		case level == unix.IPPROTO_UDP && typ == unix.UDP_GRO && len(data) >= 4:
			info.Seg = int(int32(binary.NativeEndian.Uint32(data)))
			if info.Seg < 0 {
				info.Seg = 0
			}
		}
		next := (l + cmsgAlign - 1) &^ (cmsgAlign - 1)
		if next >= uint64(len(b)) {
			break
		}
		b = b[next:]
	}
	return info, nil
}

// AppendControl appends one control message with the given level, type and
// data, padded to the kernel's alignment. It serves tests and the send path.
func AppendControl(b []byte, level, typ int32, data []byte) []byte {
	l := cmsgHdrLen + len(data)
	b = binary.NativeEndian.AppendUint64(b, uint64(l))
	b = binary.NativeEndian.AppendUint32(b, uint32(level))
	b = binary.NativeEndian.AppendUint32(b, uint32(typ))
	b = append(b, data...)
	for pad := (cmsgAlign - l%cmsgAlign) % cmsgAlign; pad > 0; pad-- {
		b = append(b, 0)
	}
	return b
}

// putSegmentControl writes a UDP_SEGMENT control message carrying seg into b
// (at least 24 bytes) and returns its length.
func putSegmentControl(b []byte, seg uint16) int {
	const l = cmsgHdrLen + 2
	binary.NativeEndian.PutUint64(b[0:8], l)
	binary.NativeEndian.PutUint32(b[8:12], unix.IPPROTO_UDP)
	binary.NativeEndian.PutUint32(b[12:16], unix.UDP_SEGMENT)
	binary.NativeEndian.PutUint16(b[16:18], seg)
	return 24
}
