// Package cc holds MetaRoCE congestion control (docs/spec.md §3.5): one
// Controller per connection owns a window per path, a window for the whole
// connection and a pacing rate, and reacts to ACKs, ECN marks, losses and the
// receiver's fair-share rate hint. The interface is small so that the RoCEv2
// baseline's DCQCN can sit behind the same one.
//
// Controllers are sans-I/O: time is an int64 nanosecond value passed in, and
// nothing here reads a clock or starts a goroutine.
package cc

// Controller is the sender-side congestion controller of one connection.
// Paths are small integers assigned by the caller, 0 ≤ path < MaxPaths.
// All byte counts are payload-plus-header bytes on the wire.
type Controller interface {
	// AddPath creates (or resets to its initial state) the window of path p.
	AddPath(now int64, p int)
	// PathWindow is the most bytes path p may have in flight.
	PathWindow(p int) int
	// ConnWindow is the most bytes the whole connection may have in flight.
	ConnWindow() int
	// PacingRate is the most bytes per second the connection may send,
	// 0 meaning unpaced. It never exceeds the receiver's rate hint.
	PacingRate() uint64
	// OnAck reports bytes newly acknowledged on path p with the ECN-marked
	// share among them (marked ≤ acked, in packets), and an RTT sample in
	// nanoseconds (0 when the ACK gave none).
	OnAck(now int64, p int, ackedBytes, ackedPkts, markedPkts int, rtt int64)
	// OnLoss reports packets declared lost on path p. Loss alone is not
	// congestion (docs/spec.md §3.5): implementations may count it but must
	// not cut the window for a single loss.
	OnLoss(now int64, p int, pkts int)
	// OnTimeout reports a tail-loss timeout on path p.
	OnTimeout(now int64, p int)
	// OnRateHint records the receiver's fair-share hint in bytes per second
	// (0 = none).
	OnRateHint(now int64, bytesPerSec uint64)
}

// MaxPaths bounds the number of paths one controller tracks.
const MaxPaths = 1024
