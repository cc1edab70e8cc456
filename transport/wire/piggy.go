package wire

import "encoding/binary"

// PiggyLen is the size in bytes of a piggybacked acknowledgement
// (docs/spec.md §2.11): a 4-byte rate hint followed by one 52-byte ACK
// record. It sits after the fixed part of a sequenced packet whose header
// has FlagPiggyAck set.
const PiggyLen = 4 + ackRecordLen

// Piggyback is an acknowledgement carried inside a sequenced packet (DATA,
// RECV_READY, sequenced NACK, PROBE), so that a peer that has something to
// send anyway needs no separate ACK datagram (docs/spec.md §2.11).
//
// Invariant after a successful parse: HasPiggy equals the header's
// FlagPiggyAck bit, and Piggy and PiggyHint are zero when it is false.
// Append sets or clears the flag from HasPiggy, so the two never disagree on
// the wire.
type Piggyback struct {
	HasPiggy  bool
	PiggyHint uint32    // rate hint in kbit/s, same meaning as Ack.RateHint
	Piggy     AckRecord // one record, same meaning as an ACK record
}

// piggyFlags returns fl with FlagPiggyAck set exactly when pg carries one.
func (pg *Piggyback) piggyFlags(fl Flags) Flags {
	if pg.HasPiggy {
		return fl | FlagPiggyAck
	}
	return fl &^ FlagPiggyAck
}

// appendPiggy appends the piggybacked acknowledgement when there is one.
func (pg *Piggyback) appendPiggy(b []byte) []byte {
	if !pg.HasPiggy {
		return b
	}
	b = binary.BigEndian.AppendUint32(b, pg.PiggyHint)
	return appendRecord(b, &pg.Piggy)
}

// piggyLen is the encoded size of the piggybacked part: 0 or PiggyLen.
func (pg *Piggyback) piggyLen() int {
	if pg.HasPiggy {
		return PiggyLen
	}
	return 0
}

// parsePiggy reads the piggybacked part at b[off:] when h carries
// FlagPiggyAck and returns the offset after it.
func (pg *Piggyback) parsePiggy(h *Header, b []byte, off int) (int, error) {
	*pg = Piggyback{}
	if h.Flags&FlagPiggyAck == 0 {
		return off, nil
	}
	if len(b) < off+PiggyLen {
		return 0, perr(h.Op, "length", uint64(len(b)), ErrShort)
	}
	pg.HasPiggy = true
	pg.PiggyHint = binary.BigEndian.Uint32(b[off:])
	parseRecord(&pg.Piggy, b[off+4:])
	return off + PiggyLen, nil
}

// ParsePiggy extracts the piggybacked acknowledgement of any sequenced
// packet without parsing the rest of its body; HasPiggy is false when the
// packet carries none. It is for observers (a conformance tester, a trace
// decoder) that want the acknowledgement of packets whose type they do not
// otherwise handle; a receiver gets the same values from the body parsers.
func ParsePiggy(pg *Piggyback, b []byte) error {
	var h Header
	if _, err := ParseHeader(&h, b); err != nil {
		return err
	}
	*pg = Piggyback{}
	if h.Flags&FlagPiggyAck == 0 {
		return nil
	}
	var off int
	switch h.Op {
	case OpData:
		off = DataHeaderLen
	case OpRecvReady:
		if len(b) < HeaderLen+recvReadyFixedLen {
			return perr(h.Op, "length", uint64(len(b)), ErrShort)
		}
		// The count places the piggyback: one the body parser refuses
		// (ParseRecvReady) would read it out of the entries or past
		// them, so it is refused here too, with the same error.
		n := int(b[32])
		if n == 0 || n > MaxRecvEntries {
			return perr(h.Op, "count", uint64(n), ErrRange)
		}
		off = HeaderLen + recvReadyFixedLen + n*recvEntryLen
	case OpNack:
		if len(b) > 24 && NackReason(b[24]) == NackUnknownConn {
			return perr(h.Op, "flags", uint64(h.Flags), ErrReserved)
		}
		off = NackLen
	case OpProbe:
		off = HeaderLen
	default:
		return perr(h.Op, "flags", uint64(h.Flags), ErrReserved)
	}
	_, err := pg.parsePiggy(&h, b, off)
	return err
}

// noPiggy refuses FlagPiggyAck on a packet type that cannot carry one.
func noPiggy(h *Header) error {
	if h.Flags&FlagPiggyAck != 0 {
		return perr(h.Op, "flags", uint64(h.Flags), ErrReserved)
	}
	return nil
}
