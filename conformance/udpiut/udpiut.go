// Package udpiut adapts this module's UDP datapath (transport/udp) to the
// conformance.IUT control interface, so the suite can judge it in-process.
// It lives apart from package conformance, which must stay independent of
// the implementation it judges.
package udpiut

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/transport/udp"
)

// IUT is an in-process UDP endpoint driven through conformance.IUT.
type IUT struct {
	ep    *udp.Endpoint
	comps chan conformance.Completion
	mu    sync.Mutex
	cur   *udp.Conn
	conns []*udp.Conn
}

// Listen starts an endpoint on 127.0.0.1 with a fixed seed.
func Listen(seed uint64) (*IUT, error) {
	ep, err := udp.Listen(udp.Config{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Seed: seed})
	if err != nil {
		return nil, err
	}
	return &IUT{ep: ep, comps: make(chan conformance.Completion, 64)}, nil
}

// ListenAddr implements conformance.IUT.
func (u *IUT) ListenAddr() netip.AddrPort { return u.ep.Addrs()[0] }

// Accept implements conformance.IUT.
func (u *IUT) Accept(ctx context.Context) error {
	c, err := u.ep.Accept(ctx)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.cur = c
	u.conns = append(u.conns, c)
	u.mu.Unlock()
	return nil
}

func (u *IUT) current() (*udp.Conn, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cur == nil {
		return nil, errors.New("udpiut: no accepted connection")
	}
	return u.cur, nil
}

// PostRecv implements conformance.IUT; the completion is delivered by a
// goroutine that ends with the request (connections fail their requests on
// Close).
func (u *IUT) PostRecv(ctx context.Context, flow uint32, caps []uint64, tags []uint32) error {
	c, err := u.current()
	if err != nil {
		return err
	}
	bufs := make([][]byte, len(caps))
	for i, n := range caps {
		bufs[i] = make([]byte, n)
		for j := range bufs[i] {
			bufs[i][j] = conformance.GuardByte
		}
	}
	r, err := c.Recv(flow, bufs, tags)
	if err != nil {
		return err
	}
	go func() {
		<-r.Done()
		comp := conformance.Completion{Flow: flow, Bufs: bufs}
		if err := r.Wait(context.Background()); err != nil {
			comp.Err = err.Error()
		} else {
			comp.Sizes = r.Sizes()
		}
		select {
		case u.comps <- comp:
		default: // nobody is listening any more; drop
		}
	}()
	return nil
}

// Send implements conformance.IUT; the send's completion is delivered like
// a receive's.
func (u *IUT) Send(ctx context.Context, flow uint32, data []byte, tag uint32) error {
	c, err := u.current()
	if err != nil {
		return err
	}
	r, err := c.Send(flow, data, tag)
	if err != nil {
		return err
	}
	go func() {
		<-r.Done()
		comp := conformance.Completion{Send: true, Flow: flow}
		if err := r.Wait(context.Background()); err != nil {
			comp.Err = err.Error()
		} else {
			comp.Sizes = []int{len(data)}
		}
		select {
		case u.comps <- comp:
		default:
		}
	}()
	return nil
}

// Completions implements conformance.IUT.
func (u *IUT) Completions() <-chan conformance.Completion { return u.comps }

// Close closes every accepted connection and the endpoint.
func (u *IUT) Close() error {
	u.mu.Lock()
	conns := u.conns
	u.conns = nil
	u.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return u.ep.Close()
}
