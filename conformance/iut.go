package conformance

import (
	"context"
	"errors"
	"net/netip"
)

// GuardByte is the value every receive buffer must hold when it is posted.
// Bytes still equal to it after completion were not written, which is how
// the tester proves that a rejected packet was not placed.
const GuardByte = 0xA5

// ErrNoControl is returned by an IUT that has no control channel; cases that
// need one are reported as skipped.
var ErrNoControl = errors.New("conformance: IUT has no control channel")

// Completion reports one finished grouped receive of the IUT or, with Send
// set, one finished send.
type Completion struct {
	Send  bool // a send finished (Bufs is empty; Sizes is [length] on success)
	Flow  uint32
	Sizes []int    // bytes received per buffer (valid when Err is empty)
	Bufs  [][]byte // every posted buffer in full, capacity bytes each
	Err   string   // non-empty when the IUT failed the receive
}

// IUT is the control side of an implementation under test. Its datapath is
// reached over UDP at ListenAddr; the methods below are the side channel a
// conformance run needs to drive and observe it. Every method must return
// within its context's deadline.
//
// An IUT whose control channel can break (ProcessIUT) may also have a
// method ControlErr() error, non-nil once it broke: Run adds that error to
// the evidence of a case that fails, since what the case waited for may
// have been lost with the channel rather than by the datapath.
type IUT interface {
	// ListenAddr is where the tester sends HELLO and every later packet.
	ListenAddr() netip.AddrPort
	// Accept waits for the connection the tester has just opened and makes
	// it current: later PostRecv and Send act on it.
	Accept(ctx context.Context) error
	// PostRecv posts a grouped receive on flow of the current connection:
	// one buffer per capacity, each filled with GuardByte, matched by tag.
	PostRecv(ctx context.Context, flow uint32, caps []uint64, tags []uint32) error
	// Send sends data on flow of the current connection with tag.
	Send(ctx context.Context, flow uint32, data []byte, tag uint32) error
	// Completions delivers finished receives and sends in completion order.
	Completions() <-chan Completion
}

// AddrIUT is an IUT known only by its address: no control channel, so only
// the cases that need none run.
type AddrIUT netip.AddrPort

// ListenAddr implements IUT.
func (a AddrIUT) ListenAddr() netip.AddrPort { return netip.AddrPort(a) }

// Accept implements IUT; it has nothing to wait for.
func (a AddrIUT) Accept(context.Context) error { return nil }

// PostRecv implements IUT with ErrNoControl.
func (a AddrIUT) PostRecv(context.Context, uint32, []uint64, []uint32) error { return ErrNoControl }

// Send implements IUT with ErrNoControl.
func (a AddrIUT) Send(context.Context, uint32, []byte, uint32) error { return ErrNoControl }

// Completions implements IUT: a channel that never delivers.
func (a AddrIUT) Completions() <-chan Completion { return nil }
