package wire

// Probe is a path probe (docs/spec.md §2.9): a bare header, sequenced on its
// path with FlagAckReq set, sent on a path under test (a path re-tried with a
// new source port) or to elicit an ACK for a tail. The receiver answers with
// an ACK for that path; a probe carries no data and is never retransmitted.
//
// With FlagPiggyAck the header is followed by a piggybacked acknowledgement
// (§2.11); otherwise the probe is the bare header.
type Probe struct {
	Header
	Piggyback
}

// ParseProbe parses a PROBE packet; it has no body.
func ParseProbe(p *Probe, b []byte) (int, error) {
	if err := expect(&p.Header, OpProbe, b); err != nil {
		return 0, err
	}
	want := HeaderLen
	if p.Flags&FlagPiggyAck != 0 {
		want += PiggyLen
	}
	if len(b) != want {
		return 0, perr(OpProbe, "length", uint64(len(b)), ErrLength)
	}
	if _, err := p.parsePiggy(&p.Header, b, HeaderLen); err != nil {
		return 0, err
	}
	return want, nil
}

// Append appends the packet.
func (p *Probe) Append(b []byte) []byte {
	p.Op = OpProbe
	p.Flags = p.piggyFlags(p.Flags)
	return p.appendPiggy(p.Header.Append(b))
}

// Length is the encoded size of p.
func (p *Probe) Length() int { return HeaderLen + p.piggyLen() }
