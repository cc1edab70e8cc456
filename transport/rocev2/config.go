package rocev2

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/transport/cc"
)

// MaxQPs bounds the queue pairs of one connection.
const MaxQPs = 64

// Config parameterises an endpoint. Zero fields take the defaults noted.
type Config struct {
	Listen            bool  // accept connection requests
	Planes            int   // NIC ports; QP i uses plane i mod Planes. Default 1.
	QPsPerConn        int   // queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION). Default 1.
	EntropiesPerPlane int   // source-port pool a QP draws its fixed port from. Default 64.
	MTU               int   // payload bytes per packet. Default 4096.
	AckEvery          int   // in-order packets per coalesced ACK. Default 4.
	TimeoutExp        int   // local ACK timeout t: RTO = 4.096 µs × 2^t. Default 14 (67 ms).
	RetryLimit        int   // timeouts in a row before the connection fails. Default 7.
	RNRDelay          int64 // wait before resending after RNR, ns. Default 10 µs.
	HandshakeRetry    int64 // ConnReq retransmission interval, ns. Default 1 ms.
	HandshakeTries    int   // ConnReq attempts before Dial fails. Default 10.
	DCQCN             bool  // rate-limit each QP with DCQCN
	// Rendezvous makes every receive announce itself before the sender
	// may send into it, as NCCL's IB transport does: ncclIbIrecv writes
	// an element of the sender's FIFO (a CTS, OpCTS) from the receive
	// side's QP, and ncclIbIsend does not start a message until the CTS
	// of the receive it fills has arrived. Without it the model is RC
	// Send, where a message goes at once and meets an RNR NAK if no
	// receive is posted. Each connection then gets one more QP, numbered
	// QPsPerConn, that carries only CTSs, so that a CTS does not queue
	// behind this end's own DATA to the peer; it is sequenced like DATA
	// (a PSN, ACKs, go-back-N, the retransmission timer). Both ends of
	// a connection must agree on it.
	Rendezvous bool
	CC         cc.DCQCNConfig
	MaxConns   int // default 4096
}

// ErrInvalid reports bad arguments; ErrRetryExceeded a QP that timed out
// RetryLimit times in a row; ErrHandshake a Dial nobody answered;
// ErrUnknownConn an API call naming no connection; ErrTooLarge a message
// longer than the buffer posted for it.
var (
	ErrInvalid       = errors.New("rocev2: invalid argument")
	ErrRetryExceeded = errors.New("rocev2: transport retry counter exceeded")
	ErrHandshake     = errors.New("rocev2: connection request not answered")
	ErrUnknownConn   = errors.New("rocev2: unknown connection")
	ErrTooLarge      = errors.New("rocev2: message larger than posted receive buffer")
	ErrClosed        = errors.New("rocev2: connection closed")
)

func (c *Config) fill() error {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Planes, 1)
	def(&c.QPsPerConn, 1)
	def(&c.EntropiesPerPlane, 64)
	def(&c.MTU, 4096)
	def(&c.AckEvery, 4)
	def(&c.TimeoutExp, 14)
	def(&c.RetryLimit, 7)
	def(&c.HandshakeTries, 10)
	def(&c.MaxConns, 4096)
	if c.RNRDelay <= 0 {
		c.RNRDelay = 10_000
	}
	if c.HandshakeRetry <= 0 {
		c.HandshakeRetry = 1_000_000
	}
	if c.CC.CNPInterval <= 0 {
		c.CC.CNPInterval = 50_000 // DCQCN paper: one CNP per 50 µs per QP
	}
	if c.QPsPerConn > MaxQPs || c.Planes > 16 || c.TimeoutExp > 31 || c.EntropiesPerPlane > 1<<16 {
		return fmt.Errorf("%w: config %+v", ErrInvalid, *c)
	}
	return nil
}

// RTO is the retransmission timeout 4.096 µs × 2^TimeoutExp in ns.
func (c Config) RTO() int64 { return 4096 << c.TimeoutExp }
