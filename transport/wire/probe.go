package wire

// Probe is a path probe (docs/spec.md §2.9): a bare header, sequenced on its
// path with FlagAckReq set, sent on a path under test (a path re-tried with a
// new source port) or to elicit an ACK for a tail. The receiver answers with
// an ACK for that path; a probe carries no data and is never retransmitted.
type Probe struct {
	Header
}

// ParseProbe parses a PROBE packet; it has no body.
func ParseProbe(p *Probe, b []byte) (int, error) {
	if err := expect(&p.Header, OpProbe, b); err != nil {
		return 0, err
	}
	if len(b) != HeaderLen {
		return 0, perr(OpProbe, "length", uint64(len(b)), ErrLength)
	}
	return HeaderLen, nil
}

// Append appends the packet.
func (p *Probe) Append(b []byte) []byte {
	p.Op = OpProbe
	return p.Header.Append(b)
}

// Length is the encoded size of p.
func (p *Probe) Length() int { return HeaderLen }
