package wire

import "encoding/binary"

// MaxRecvEntries is the most buffers one grouped receive may post, matching
// NCCL's NCCL_NET_MAX_RECVS-style grouped irecv (docs/spec.md §2.6).
const MaxRecvEntries = 8

const (
	recvReadyFixedLen = 12
	recvEntryLen      = 16
)

// RecvEntry is one posted buffer of a grouped receive.
type RecvEntry struct {
	Capacity uint64 // bytes the buffer can take, ≤ MaxMessageLen
	Tag      uint32 // the sender's tag that selects this buffer
}

// RecvReady announces a posted receive group to the sender (docs/spec.md
// §2.6). It is sequenced and therefore reliable: a sender transmits DATA for
// message Msg only after it holds the matching RECV_READY, so the receiver
// never has to buffer unexpected payload.
//
//	offset size field
//	24     4    flow id
//	28     4    message sequence number on the flow
//	32     1    entry count (1..8)
//	33     3    reserved (0)
//	36     16×n entries: capacity u64, tag u32, reserved u32
//	…      56   piggybacked acknowledgement, only with FlagPiggyAck (§2.11)
type RecvReady struct {
	Header
	Piggyback
	Flow    uint32
	Msg     uint32
	N       int
	Entries [MaxRecvEntries]RecvEntry
}

// ParseRecvReady parses a RECV_READY packet.
func ParseRecvReady(r *RecvReady, b []byte) (int, error) {
	if err := expect(&r.Header, OpRecvReady, b); err != nil {
		return 0, err
	}
	if len(b) < HeaderLen+recvReadyFixedLen {
		return 0, perr(OpRecvReady, "length", uint64(len(b)), ErrShort)
	}
	r.Flow = binary.BigEndian.Uint32(b[24:])
	r.Msg = binary.BigEndian.Uint32(b[28:])
	n := int(b[32])
	if n == 0 || n > MaxRecvEntries {
		return 0, perr(OpRecvReady, "count", uint64(n), ErrRange)
	}
	if b[33]|b[34]|b[35] != 0 {
		return 0, perr(OpRecvReady, "reserved", 0, ErrReserved)
	}
	want := HeaderLen + recvReadyFixedLen + n*recvEntryLen
	if r.Flags&FlagPiggyAck != 0 {
		want += PiggyLen
	}
	if len(b) < want {
		return 0, perr(OpRecvReady, "length", uint64(len(b)), ErrShort)
	}
	if len(b) > want {
		return 0, perr(OpRecvReady, "length", uint64(len(b)), ErrLength)
	}
	r.N = n
	for i := 0; i < n; i++ {
		q := b[HeaderLen+recvReadyFixedLen+i*recvEntryLen:]
		e := &r.Entries[i]
		e.Capacity = binary.BigEndian.Uint64(q)
		if e.Capacity > MaxMessageLen {
			return 0, perr(OpRecvReady, "capacity", e.Capacity, ErrRange)
		}
		e.Tag = binary.BigEndian.Uint32(q[8:])
		if binary.BigEndian.Uint32(q[12:]) != 0 {
			return 0, perr(OpRecvReady, "reserved", 0, ErrReserved)
		}
	}
	if _, err := r.parsePiggy(&r.Header, b, HeaderLen+recvReadyFixedLen+n*recvEntryLen); err != nil {
		return 0, err
	}
	return want, nil
}

// Append appends the packet. N must be in [1, MaxRecvEntries].
func (r *RecvReady) Append(b []byte) []byte {
	r.Op = OpRecvReady
	r.Flags = r.piggyFlags(r.Flags)
	b = r.Header.Append(b)
	b = binary.BigEndian.AppendUint32(b, r.Flow)
	b = binary.BigEndian.AppendUint32(b, r.Msg)
	b = append(b, byte(r.N), 0, 0, 0)
	for i := 0; i < r.N; i++ {
		b = binary.BigEndian.AppendUint64(b, r.Entries[i].Capacity)
		b = binary.BigEndian.AppendUint32(b, r.Entries[i].Tag)
		b = binary.BigEndian.AppendUint32(b, 0)
	}
	return r.appendPiggy(b)
}

// Length is the encoded size of r.
func (r *RecvReady) Length() int {
	return HeaderLen + recvReadyFixedLen + r.N*recvEntryLen + r.piggyLen()
}
