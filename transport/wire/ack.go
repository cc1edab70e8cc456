package wire

import (
	"encoding/binary"
	"math/bits"
)

// SackBits is the width of the selective-acknowledgement bitmap of one path
// (docs/spec.md §2.5). It bounds the sender's outstanding packets per path.
const SackBits = 256

// FwdDelayUnit is the unit of an ACK record's forward delay, ns
// (docs/spec.md §2.5): 16 bits of it span about 2.1 ms.
const FwdDelayUnit = 32

// MaxFwdDelay is the largest forward delay an ACK record can carry, in
// FwdDelayUnit; a receiver saturates larger delays to it.
const MaxFwdDelay = 0xffff

// MaxAckRecords is the most path records one ACK may carry.
const MaxAckRecords = 16

// AckRecordsFit is how many records an ACK to a peer whose max_dgram is
// maxDgram may carry (docs/spec.md §2.5): ⌊(maxDgram − 32) / 52⌋, at most
// MaxAckRecords and at least 1 (10 at the minimum max_dgram of 576).
func AckRecordsFit(maxDgram int) int {
	n := (maxDgram - HeaderLen - ackFixedLen) / ackRecordLen
	return min(max(n, 1), MaxAckRecords)
}

// ackFixedLen is the ACK body before its records; ackRecordLen the size of one
// record.
const (
	ackFixedLen  = 8
	ackRecordLen = 52
)

// SackBitmap is a 256-bit set; bit i stands for PSN Cum+1+i of the record that
// holds it. Word 0 holds bits 0..63, least significant bit first; on the wire
// the four words are written in order, each big-endian.
type SackBitmap [SackBits / 64]uint64

// Has reports whether bit i is set; i outside [0,256) is never set.
func (s *SackBitmap) Has(i int) bool {
	if uint(i) >= SackBits {
		return false
	}
	return s[i>>6]&(1<<(uint(i)&63)) != 0
}

// Set sets bit i; i outside [0,256) is ignored.
func (s *SackBitmap) Set(i int) {
	if uint(i) < SackBits {
		s[i>>6] |= 1 << (uint(i) & 63)
	}
}

// Clear empties the set.
func (s *SackBitmap) Clear() { *s = SackBitmap{} }

// Count returns the number of set bits.
func (s *SackBitmap) Count() int {
	return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) + bits.OnesCount64(s[2]) + bits.OnesCount64(s[3])
}

// Highest returns the index of the highest set bit, or -1 when empty.
func (s *SackBitmap) Highest() int {
	for w := len(s) - 1; w >= 0; w-- {
		if s[w] != 0 {
			return w*64 + 63 - bits.LeadingZeros64(s[w])
		}
	}
	return -1
}

// Shift drops the lowest n bits, moving bit i to bit i-n.
func (s *SackBitmap) Shift(n int) {
	if n <= 0 {
		return
	}
	if n >= SackBits {
		s.Clear()
		return
	}
	words, rem := n/64, uint(n%64)
	var out SackBitmap
	for i := range out {
		j := i + words
		if j >= len(s) {
			break
		}
		out[i] = s[j] >> rem
		if rem != 0 && j+1 < len(s) {
			out[i] |= s[j+1] << (64 - rem)
		}
	}
	*s = out
}

// TrailingOnes returns how many consecutive bits starting at bit 0 are set.
func (s *SackBitmap) TrailingOnes() int {
	n := 0
	for _, w := range s {
		t := bits.TrailingZeros64(^w)
		n += t
		if t < 64 {
			break
		}
	}
	return n
}

// AckRecord is the acknowledgement state of one path (docs/spec.md §2.5).
//
//	offset size field
//	0      2    path id (the data sender's path)
//	2      2    forward delay: the echoed DATA's one-way delay above the
//	            lowest recently seen on the connection, in FwdDelayUnit;
//	            0 unless the data sender announced CapFwdDelay
//	4      4    cumulative PSN: every PSN before it was received or abandoned
//	8      4    CE count: CE-marked sequenced packets received on the path, mod 2^32
//	12     4    echoed timestamp: Timestamp of the latest DATA received on the path
//	16     4    ack delay: nanoseconds between that arrival and this ACK
//	20     32   SACK bitmap, bit i = PSN cum+1+i received
type AckRecord struct {
	Path     uint16
	FwdDelay uint16
	Cum      PSN
	CE       uint32
	EchoTS   uint32
	Delay    uint32
	Sack     SackBitmap
}

// Ack acknowledges sequenced packets on up to MaxAckRecords paths and carries
// the receiver's fair-share rate hint for this sender (docs/spec.md §2.5).
//
//	offset size field
//	24     4    rate hint in kbit/s (0 = no limit)
//	28     1    record count (1..16)
//	29     3    reserved (0)
//	32     52×n records
type Ack struct {
	Header
	RateHint uint32
	N        int
	Records  [MaxAckRecords]AckRecord
}

// ParseAck parses an ACK packet.
func ParseAck(a *Ack, b []byte) (int, error) {
	if err := expect(&a.Header, OpAck, b); err != nil {
		return 0, err
	}
	if err := noPiggy(&a.Header); err != nil {
		return 0, err
	}
	if len(b) < HeaderLen+ackFixedLen {
		return 0, perr(OpAck, "length", uint64(len(b)), ErrShort)
	}
	a.RateHint = binary.BigEndian.Uint32(b[24:])
	n := int(b[28])
	if n == 0 || n > MaxAckRecords {
		return 0, perr(OpAck, "count", uint64(n), ErrRange)
	}
	if b[29]|b[30]|b[31] != 0 {
		return 0, perr(OpAck, "reserved", 0, ErrReserved)
	}
	want := HeaderLen + ackFixedLen + n*ackRecordLen
	if len(b) < want {
		return 0, perr(OpAck, "length", uint64(len(b)), ErrShort)
	}
	if len(b) > want {
		return 0, perr(OpAck, "length", uint64(len(b)), ErrLength)
	}
	a.N = n
	p := b[HeaderLen+ackFixedLen:]
	for i := 0; i < n; i++ {
		parseRecord(&a.Records[i], p[i*ackRecordLen:])
	}
	return want, nil
}

// parseRecord decodes one ACK record from q (at least ackRecordLen bytes)
// into r. Every value of every field is valid.
func parseRecord(r *AckRecord, q []byte) {
	r.Path = binary.BigEndian.Uint16(q)
	r.FwdDelay = binary.BigEndian.Uint16(q[2:])
	r.Cum = PSN(binary.BigEndian.Uint32(q[4:]))
	r.CE = binary.BigEndian.Uint32(q[8:])
	r.EchoTS = binary.BigEndian.Uint32(q[12:])
	r.Delay = binary.BigEndian.Uint32(q[16:])
	for w := range r.Sack {
		r.Sack[w] = binary.BigEndian.Uint64(q[20+8*w:])
	}
}

// appendRecord appends the ackRecordLen-byte encoding of r.
func appendRecord(b []byte, r *AckRecord) []byte {
	b = binary.BigEndian.AppendUint16(b, r.Path)
	b = binary.BigEndian.AppendUint16(b, r.FwdDelay)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Cum))
	b = binary.BigEndian.AppendUint32(b, r.CE)
	b = binary.BigEndian.AppendUint32(b, r.EchoTS)
	b = binary.BigEndian.AppendUint32(b, r.Delay)
	for _, w := range r.Sack {
		b = binary.BigEndian.AppendUint64(b, w)
	}
	return b
}

// Append appends the ACK. N must be in [1, MaxAckRecords].
func (a *Ack) Append(b []byte) []byte {
	a.Op = OpAck
	b = a.Header.Append(b)
	b = binary.BigEndian.AppendUint32(b, a.RateHint)
	b = append(b, byte(a.N), 0, 0, 0)
	for i := 0; i < a.N; i++ {
		b = appendRecord(b, &a.Records[i])
	}
	return b
}

// Length is the encoded size of a.
func (a *Ack) Length() int { return HeaderLen + ackFixedLen + a.N*ackRecordLen }
