package auth

// window is the anti-replay state of one receive key: the highest sequence
// number accepted and a ring bitmap of the size-1 numbers below it.
//
// Invariant: bit s mod size of bits is set iff s was accepted, for every s
// in (top-size, top]; bits for numbers above top are clear.
type window struct {
	started bool
	top     uint64
	bits    []uint64
}

func newWindow(size int) window { return window{bits: make([]uint64, size/64)} }

func (w *window) size() uint64 { return uint64(len(w.bits)) * 64 }

// fresh reports whether s may be accepted: never seen, not older than the
// window. It changes nothing, so a forged packet costs no state.
func (w *window) fresh(s uint64) bool {
	if !w.started || s > w.top {
		return true
	}
	if w.top-s >= w.size() {
		return false
	}
	i := s % w.size()
	return w.bits[i/64]&(1<<(i%64)) == 0
}

// mark records s, which fresh accepted and whose tag verified.
func (w *window) mark(s uint64) {
	n := w.size()
	switch {
	case !w.started:
		w.started = true
		w.top = s
	case s > w.top:
		// Clear the slots of the numbers skipped between top and s: they
		// now stand for numbers not yet seen.
		if s-w.top >= n {
			clear(w.bits)
		} else {
			for q := w.top + 1; q < s; q++ {
				i := q % n
				w.bits[i/64] &^= 1 << (i % 64)
			}
		}
		w.top = s
	}
	i := s % n
	w.bits[i/64] |= 1 << (i % 64)
}
