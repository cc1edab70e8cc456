package udpnet

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/udp"
)

// opErr turns a datapath error of a send or receive with peer p into the
// backend's categories, naming the peer and saying what to do.
func opErr(op string, p *peer, flow uint32, err error) error {
	switch {
	case errors.Is(err, transport.ErrMessageTooLarge):
		return fmt.Errorf("udpnet: %s on flow %d with peer %s: the message is larger than the posted receive buffer (message truncated; the receiver must post buffers as large as the sends): %v: %w", op, flow, p.name, err, backend.ErrInvalidUsage)
	case errors.Is(err, transport.ErrTagMismatch):
		return fmt.Errorf("udpnet: %s on flow %d with peer %s: the send's tag matches no buffer of the grouped receive: %v: %w", op, flow, p.name, err, backend.ErrInvalidUsage)
	case errors.Is(err, transport.ErrPeerDead):
		return fmt.Errorf("udpnet: %s on flow %d: peer %s not responding (process exited, host down or network failed; detection time is METAROCE_TIMEOUT_MS): %v", op, flow, p.name, err)
	case errors.Is(err, udp.ErrEndpointClosed):
		return fmt.Errorf("udpnet: %s on flow %d with peer %s: the plugin is shutting down: %v: %w", op, flow, p.name, err, backend.ErrClosed)
	case errors.Is(err, transport.ErrFlowAborted):
		return fmt.Errorf("udpnet: %s on flow %d with peer %s: the peer aborted the comm's flow (it closed its end of the comm, which aborts the flow whether or not requests were in flight there, deregistered memory that requests in flight still used, or closed its listener before accepting the comm): %v: %w", op, flow, p.name, err, backend.ErrRemote)
	case errors.Is(err, transport.ErrClosed):
		return fmt.Errorf("udpnet: %s on flow %d: the connection to peer %s was closed (the peer closed it or exited): %v: %w", op, flow, p.name, err, backend.ErrRemote)
	}
	return fmt.Errorf("udpnet: %s on flow %d with peer %s: %w", op, flow, p.name, err)
}
