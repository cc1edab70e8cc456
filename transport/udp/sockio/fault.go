package sockio

import (
	"math/rand/v2"
	"net/netip"
	"sync"
)

// BatchConn is what the datapath needs of a socket; Conn and FaultConn
// implement it.
type BatchConn interface {
	WriteBatch(msgs []Msg) (int, error)
	ReadBatch(msgs []Msg) (int, error)
	LocalAddr() netip.AddrPort
	Fd() int
	GSO() bool
	GRO() bool
	Close() error
}

var (
	_ BatchConn = (*Conn)(nil)
	_ BatchConn = (*FaultConn)(nil)
)

// faultKey selects the datagrams a loss probability applies to; the zero
// AddrPort and port 0 are wildcards.
type faultKey struct {
	dst netip.AddrPort
	src uint16
}

// Faults is a seeded fault injector shared by the FaultConns it wraps: random
// loss per (destination, local source port) and black-holed source ports. It
// needs no privileges, so tests of the datapath can run it on loopback. The
// same seed and the same sequence of sends give the same drops.
type Faults struct {
	mu      sync.Mutex
	rng     *rand.Rand
	loss    map[faultKey]float64
	black   map[uint16]bool
	dropped uint64
}

// NewFaults returns an injector that drops nothing until configured.
func NewFaults(seed uint64) *Faults {
	return &Faults{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		loss:  make(map[faultKey]float64),
		black: make(map[uint16]bool),
	}
}

// SetLoss sets the probability (0..1) that a datagram sent to dst from local
// source port src is dropped. A zero dst matches every destination and src 0
// every port; the most specific rule wins (exact, then destination only, then
// port only, then the catch-all). p <= 0 removes the rule.
func (f *Faults) SetLoss(dst netip.AddrPort, src uint16, p float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := faultKey{dst, src}
	if p <= 0 {
		delete(f.loss, k)
		return
	}
	f.loss[k] = min(p, 1)
}

// Blackhole makes the local source port src a dead path (on) or heals it:
// every datagram sent from it, or received on it, is dropped.
func (f *Faults) Blackhole(src uint16, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.black[src] = true
	} else {
		delete(f.black, src)
	}
}

// Dropped is the number of datagrams (segments count one each) dropped so far.
func (f *Faults) Dropped() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// dropSend decides for one message; caller holds mu.
func (f *Faults) dropSend(dst netip.AddrPort, src uint16) bool {
	if f.black[src] {
		return true
	}
	p, ok := f.loss[faultKey{dst, src}]
	if !ok {
		p, ok = f.loss[faultKey{dst: dst}]
	}
	if !ok {
		p, ok = f.loss[faultKey{src: src}]
	}
	if !ok {
		p, ok = f.loss[faultKey{}]
	}
	return ok && f.rng.Float64() < p
}

// Wrap returns c with f's faults applied to its traffic.
func (f *Faults) Wrap(c *Conn) *FaultConn { return &FaultConn{Conn: c, f: f} }

// FaultConn is a Conn whose sends pass through a Faults first. A dropped
// message counts as sent. A message with segments is dropped or kept whole.
type FaultConn struct {
	*Conn
	f       *Faults
	keep    [MaxBatch]Msg
	keepIdx [MaxBatch]int
}

// WriteBatch drops messages as the Faults say and sends the rest; the count
// includes the dropped ones, as the network, not the socket, lost them.
func (fc *FaultConn) WriteBatch(msgs []Msg) (int, error) {
	src := fc.LocalAddr().Port()
	done := 0
	for done < len(msgs) {
		end := min(done+MaxBatch, len(msgs))
		k := 0
		fc.f.mu.Lock()
		for i := done; i < end; i++ {
			if fc.f.dropSend(msgs[i].Addr, src) {
				fc.f.dropped += uint64(msgs[i].Segments())
				continue
			}
			fc.keep[k] = msgs[i]
			fc.keepIdx[k] = i
			k++
		}
		fc.f.mu.Unlock()
		n, err := fc.Conn.WriteBatch(fc.keep[:k])
		for i := range fc.keep[:k] {
			fc.keep[i] = Msg{}
		}
		if err != nil {
			// Conn.WriteBatch names the kept message that failed; the
			// dropped ones before it count as sent.
			if n < k {
				return fc.keepIdx[n], err
			}
			return end, err
		}
		done = end
	}
	return done, nil
}

// ReadBatch reads like Conn.ReadBatch and discards everything when the local
// port is black-holed (the Msgs keep their buffers).
func (fc *FaultConn) ReadBatch(msgs []Msg) (int, error) {
	for {
		n, err := fc.Conn.ReadBatch(msgs)
		if err != nil || n == 0 {
			return n, err
		}
		fc.f.mu.Lock()
		black := fc.f.black[fc.LocalAddr().Port()]
		if black {
			for i := range msgs[:n] {
				fc.f.dropped += uint64(msgs[i].Segments())
			}
		}
		fc.f.mu.Unlock()
		if !black {
			return n, nil
		}
	}
}
