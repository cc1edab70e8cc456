package sockio

import (
	"errors"
	"fmt"
	"net/netip"
)

// Pool is the set of sockets of one plane: one socket per UDP source port on
// the plane's local address. Every source port is one path's entropy, shared by
// all connections of the endpoint, and the datapath receives on all of them.
type Pool struct {
	conns []*Conn
}

// OpenPool opens count sockets on cfg.Local's address. With cfg.Local's port 0,
// each socket gets its own ephemeral port; otherwise the ports are
// cfg.Local.Port(), +1, ..., +count-1. On error every socket opened is closed.
func OpenPool(cfg Config, count int) (*Pool, error) {
	if count <= 0 {
		return nil, fmt.Errorf("sockio: pool of %d sockets", count)
	}
	base := int(cfg.Local.Port())
	if base != 0 && base+count-1 > 0xffff {
		return nil, fmt.Errorf("sockio: ports %d+%d exceed 65535", base, count)
	}
	p := &Pool{conns: make([]*Conn, 0, count)}
	for i := 0; i < count; i++ {
		c := cfg
		if base != 0 {
			c.Local = netip.AddrPortFrom(cfg.Local.Addr(), uint16(base+i))
		}
		conn, err := Open(c)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.conns = append(p.conns, conn)
	}
	return p, nil
}

// Conns returns the pool's sockets in port order of opening; the slice is the
// pool's own and must not be modified.
func (p *Pool) Conns() []*Conn { return p.conns }

// Close closes every socket of the pool.
func (p *Pool) Close() error {
	var errs []error
	for _, c := range p.conns {
		if err := c.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
