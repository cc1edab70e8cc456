package udp

import (
	"net/netip"

	"github.com/metaroce/metaroce/transport"
)

// peer is what a transport.RemoteID stands for: the per-plane destination
// addresses of a remote endpoint (its listening sockets), or, for a transient
// peer, one exact source address that sent us something.
type peer struct {
	id        transport.RemoteID
	addrs     []netip.AddrPort // per plane; a transient peer has one, used on every plane
	key       string           // address blob, the index of known peers
	transient bool
	refs      int            // connections using a known peer
	lastSeen  transport.Time // transient: last datagram from it
}

// maxTransient bounds the source-address table; when it is full the entry
// heard from least recently is evicted.
const maxTransient = 1024

// peerTable maps RemoteIDs to addresses. Known peers are keyed by their
// address blob so that a dial and an accept of the same endpoint share one
// RemoteID; transient peers are keyed by source address and port.
type peerTable struct {
	byID   map[transport.RemoteID]*peer
	byKey  map[string]*peer
	bySrc  map[netip.AddrPort]*peer
	nextID transport.RemoteID
	last   *peer // one-entry cache of bySrc
}

func newPeerTable() *peerTable {
	return &peerTable{
		byID:  make(map[transport.RemoteID]*peer),
		byKey: make(map[string]*peer),
		bySrc: make(map[netip.AddrPort]*peer),
	}
}

func (t *peerTable) newID() transport.RemoteID {
	for {
		t.nextID++
		if t.nextID != 0 && t.byID[t.nextID] == nil {
			return t.nextID
		}
	}
}

// known returns the peer for a remote endpoint's per-plane addresses, whose
// encoding is blob, creating it.
func (t *peerTable) known(addrs []netip.AddrPort, blob []byte) *peer {
	if p := t.byKey[string(blob)]; p != nil {
		return p
	}
	p := &peer{id: t.newID(), addrs: append([]netip.AddrPort(nil), addrs...), key: string(blob)}
	t.byID[p.id] = p
	t.byKey[p.key] = p
	return p
}

// lastSource reports whether src is the source fromSource saw last, which
// it answers without a lookup.
func (t *peerTable) lastSource(src netip.AddrPort) bool {
	return t.last != nil && t.last.addrs[0] == src
}

// fromSource returns the transient RemoteID of source address src, creating
// it (and evicting the stalest entry when the table is full).
func (t *peerTable) fromSource(src netip.AddrPort, now transport.Time) transport.RemoteID {
	if p := t.last; p != nil && p.addrs[0] == src {
		p.lastSeen = now
		return p.id
	}
	p := t.bySrc[src]
	if p == nil {
		if len(t.bySrc) >= maxTransient {
			var old *peer
			for _, q := range t.bySrc {
				if old == nil || q.lastSeen < old.lastSeen {
					old = q
				}
			}
			t.remove(old)
		}
		p = &peer{id: t.newID(), addrs: []netip.AddrPort{src}, transient: true}
		t.byID[p.id] = p
		t.bySrc[src] = p
	}
	p.lastSeen = now
	t.last = p
	return p.id
}

// dest returns where a datagram routed to id leaves for on plane.
func (t *peerTable) dest(id transport.RemoteID, plane int) (netip.AddrPort, bool) {
	p := t.byID[id]
	if p == nil {
		return netip.AddrPort{}, false
	}
	if p.transient {
		return p.addrs[0], true
	}
	if plane >= len(p.addrs) {
		return netip.AddrPort{}, false
	}
	return p.addrs[plane], true
}

// release drops one connection's reference to a known peer and forgets the
// peer when none is left.
func (t *peerTable) release(id transport.RemoteID) {
	p := t.byID[id]
	if p == nil || p.transient {
		return
	}
	p.refs--
	if p.refs <= 0 {
		t.remove(p)
	}
}

// sweep forgets known peers without connections (learned from HELLOs the
// core did not accept) and transient peers silent since before cutoff.
func (t *peerTable) sweep(cutoff transport.Time) {
	for _, p := range t.byID {
		if (!p.transient && p.refs <= 0) || (p.transient && p.lastSeen < cutoff) {
			t.remove(p)
		}
	}
}

func (t *peerTable) remove(p *peer) {
	delete(t.byID, p.id)
	if p.transient {
		delete(t.bySrc, p.addrs[0])
	} else {
		delete(t.byKey, p.key)
	}
	if t.last == p {
		t.last = nil
	}
}
