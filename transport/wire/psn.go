package wire

// PSN is a path sequence number (docs/spec.md §2.3). Each path numbers its
// sequenced packets 0, 1, 2, … modulo 2^32 and never reuses a number while it
// could still be confused with an outstanding one: a retransmission always
// takes a fresh PSN. Comparisons use serial-number arithmetic (RFC 1982 style):
// a is before b when the signed 32-bit difference b-a is positive, so the
// ordering holds across wraparound as long as the two are within 2^31 of each
// other, which the 256-packet window guarantees.
type PSN uint32

// Add returns p advanced by n (wrapping).
func (p PSN) Add(n uint32) PSN { return p + PSN(n) }

// Diff returns the signed distance p-q.
func (p PSN) Diff(q PSN) int32 { return int32(uint32(p) - uint32(q)) }

// Less reports whether p comes strictly before q.
func (p PSN) Less(q PSN) bool { return p.Diff(q) < 0 }

// LessEq reports whether p comes before q or equals it.
func (p PSN) LessEq(q PSN) bool { return p.Diff(q) <= 0 }

// InWindow reports whether p lies in [base, base+size).
func (p PSN) InWindow(base PSN, size uint32) bool {
	d := uint32(p) - uint32(base)
	return d < size
}

// MaxPSN returns the later of a and b.
func MaxPSN(a, b PSN) PSN {
	if a.Less(b) {
		return b
	}
	return a
}
