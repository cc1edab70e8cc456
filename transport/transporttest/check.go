package transporttest

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/metaroce/metaroce/transport"
)

// connKey names a connection of a node; flowKey a flow of a node's
// connection.
type connKey struct {
	node int
	conn transport.ConnID
}

type flowKey struct {
	conn transport.ConnID
	flow uint32
}

// sendRec is one Send as the harness posted it.
type sendRec struct {
	cookie uint64
	data   []byte
	tag    uint32
}

// flowLog records what was posted on one flow of one node and what
// completed, in order.
type flowLog struct {
	sends    []sendRec
	groups   [][]uint64 // receive groups: cookies in posting order
	sendDone []uint64
	sendErr  []error
	recvDone []uint64
}

// Outcome is what the reference model expects for one send and the buffer
// it matched.
type Outcome int

const (
	Delivered Outcome = iota // bytes arrive intact
	TooLarge                 // both sides fail with ErrMessageTooLarge
	TagMiss                  // both sides fail with ErrTagMismatch
	Unmatched                // no receive buffer for it (yet)
)

// match is the reference pairing of one send with one receive buffer.
type match struct {
	send    sendRec
	recv    *RecvBuffer
	outcome Outcome
}

// reference pairs the sends of a flow with the receive groups of its peer
// flow with the simplest possible rules (docs/spec.md §3.4): sends in
// posting order; each takes, in the oldest receive group that still has a
// free buffer, the first free buffer whose tag equals its own; when no
// buffer there has its tag, it takes the first free buffer and both fail;
// a buffer smaller than the message fails both.
func reference(sends []sendRec, groups [][]uint64, bufs map[uint64]*RecvBuffer) []match {
	var out []match
	gi := 0
	used := map[uint64]bool{}
	free := func(g []uint64) int {
		k := 0
		for _, c := range g {
			if !used[c] {
				k++
			}
		}
		return k
	}
	for _, s := range sends {
		for gi < len(groups) && free(groups[gi]) == 0 {
			gi++
		}
		if gi == len(groups) {
			out = append(out, match{send: s, outcome: Unmatched})
			continue
		}
		var pick uint64
		outcome := Delivered
		for _, c := range groups[gi] {
			if !used[c] && bufs[c].Tag == s.tag {
				pick = c
				break
			}
		}
		if pick == 0 {
			outcome = TagMiss
			for _, c := range groups[gi] {
				if !used[c] {
					pick = c
					break
				}
			}
		} else if uint64(len(s.data)) > bufs[pick].Cap {
			outcome = TooLarge
		}
		used[pick] = true
		out = append(out, match{send: s, recv: bufs[pick], outcome: outcome})
	}
	return out
}

// Matches returns the reference pairing for flow of connection conn at node
// (the sending side).
func (n *Net) Matches(node int, conn transport.ConnID, flow uint32) []match {
	peer, ok := n.conns[connKey{node, conn}]
	if !ok {
		return nil
	}
	sfl := n.nodes[node].flows[flowKey{conn, flow}]
	rfl := n.nodes[peer.node].flows[flowKey{peer.conn, flow}]
	if sfl == nil {
		return nil
	}
	var groups [][]uint64
	if rfl != nil {
		groups = rfl.groups
	}
	return reference(sfl.sends, groups, n.nodes[peer.node].recvBufs)
}

// AllDone reports whether every send and every posted receive of every node
// has completed (successfully or not).
func (n *Net) AllDone() bool {
	for _, nd := range n.nodes {
		for _, fl := range nd.flows {
			if len(fl.sendDone) < len(fl.sends) {
				return false
			}
			posted := 0
			for _, g := range fl.groups {
				posted += len(g)
			}
			if len(fl.recvDone) < posted {
				return false
			}
		}
	}
	return true
}

// CheckOptions select the invariants Check asserts beyond the ones that
// always hold.
type CheckOptions struct {
	// Complete requires that every send and receive completed with the
	// reference outcome (otherwise pending operations are allowed).
	Complete bool
	// AllowFailures accepts operations that failed with a connection-level
	// error (closed connection, dead peer, a peer that exceeded this
	// side's limits and failed the connection) or an aborted flow instead
	// of the reference outcome.
	AllowFailures bool
}

// Check verifies the run's invariants and returns every violation found:
// exactly-once delivery with identical bytes, the reference outcome for
// every completed operation, completions in posting order per flow, no
// write outside a posted buffer, and the endpoints' memory bounds.
func (n *Net) Check(opt CheckOptions) error {
	v := append([]string(nil), n.violations...)
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	if n.MemCheck != nil {
		for _, nd := range n.nodes {
			if err := n.MemCheck(nd.Index, nd.EP); err != nil {
				bad("node %d: %v", nd.Index, err)
			}
		}
	}
	for _, nd := range n.nodes {
		keys := make([]flowKey, 0, len(nd.flows))
		for k := range nd.flows {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].conn != keys[j].conn {
				return keys[i].conn < keys[j].conn
			}
			return keys[i].flow < keys[j].flow
		})
		for _, k := range keys {
			fl := nd.flows[k]
			where := fmt.Sprintf("node %d conn %d flow %d", nd.Index, k.conn, k.flow)
			// Completion order: each completion list is a prefix of the
			// posting order.
			for i, ck := range fl.sendDone {
				if i >= len(fl.sends) || fl.sends[i].cookie != ck {
					bad("%s: send completion %d is cookie %d, out of posting order", where, i, ck)
					break
				}
			}
			var posted []uint64
			for _, g := range fl.groups {
				posted = append(posted, g...)
			}
			for i, ck := range fl.recvDone {
				if i >= len(posted) || posted[i] != ck {
					bad("%s: receive completion %d is cookie %d, out of posting order", where, i, ck)
					break
				}
			}
			for _, b := range nd.recvBufs {
				if !b.guardsIntact() {
					bad("node %d: guard bytes of receive %d overwritten", nd.Index, b.Cookie)
				}
			}
			// Outcomes against the reference.
			peer, paired := n.conns[connKey{nd.Index, k.conn}]
			if !paired {
				continue
			}
			for i, m := range n.Matches(nd.Index, k.conn, k.flow) {
				var serr error
				sdone := i < len(fl.sendDone)
				if sdone {
					serr = fl.sendErr[i]
				}
				what := fmt.Sprintf("%s send %d (cookie %d, %d bytes, tag %d)", where, i, m.send.cookie, len(m.send.data), m.send.tag)
				connFail := func(err error) bool {
					return opt.AllowFailures && (errors.Is(err, transport.ErrClosed) || errors.Is(err, transport.ErrPeerDead) || errors.Is(err, transport.ErrLimit) || errors.Is(err, transport.ErrFlowAborted))
				}
				if sdone && connFail(serr) || m.recv != nil && m.recv.Done && connFail(m.recv.Err) {
					continue
				}
				switch m.outcome {
				case Unmatched:
					if sdone && !connFail(serr) {
						bad("%s completed (err %v) without a receive buffer", what, serr)
					}
				case Delivered:
					if sdone && serr != nil {
						bad("%s failed: %v", what, serr)
					}
					r := m.recv
					if r.Done {
						if r.Err != nil {
							bad("%s: receive %d at node %d failed: %v", what, r.Cookie, peer.node, r.Err)
						} else if r.Len != uint64(len(m.send.data)) || !bytes.Equal(r.Bytes()[:r.Len], m.send.data) {
							bad("%s: receive %d at node %d got %d bytes that differ from the %d sent", what, r.Cookie, peer.node, r.Len, len(m.send.data))
						} else if r.SendTag != m.send.tag && r.SendTag != r.Tag {
							bad("%s: receive %d reports tag %d", what, r.Cookie, r.SendTag)
						}
						if sdone && r.placed != r.Len {
							bad("%s: %d bytes placed for a %d-byte message", what, r.placed, r.Len)
						}
					}
					if opt.Complete && (!sdone || !r.Done) {
						bad("%s: not complete (send done %v, receive done %v)", what, sdone, r.Done)
					}
				case TooLarge, TagMiss:
					want := transport.ErrMessageTooLarge
					if m.outcome == TagMiss {
						want = transport.ErrTagMismatch
					}
					if sdone && !errors.Is(serr, want) {
						bad("%s: send ended with %v, want %v", what, serr, want)
					}
					if m.recv.Done && !errors.Is(m.recv.Err, want) {
						bad("%s: receive %d ended with %v, want %v", what, m.recv.Cookie, m.recv.Err, want)
					}
					if opt.Complete && (!sdone || !m.recv.Done) {
						bad("%s: not complete (send done %v, receive done %v)", what, sdone, m.recv.Done)
					}
				}
			}
		}
	}
	if len(v) == 0 {
		return nil
	}
	if len(v) > 20 {
		v = append(v[:20], fmt.Sprintf("… and %d more", len(v)-20))
	}
	return errors.New("transporttest: invariants violated:\n\t" + strings.Join(v, "\n\t"))
}

// Totals sums the connection statistics of every live connection.
type Totals struct {
	PacketsSent, Retransmits, Lost, Spurious, Timeouts, PathChanges uint64
}

// Totals returns the sums over every connection still open.
func (n *Net) Totals() Totals {
	var t Totals
	for k := range n.conns {
		st, ok := n.nodes[k.node].EP.Stats(k.conn)
		if !ok {
			continue
		}
		t.PacketsSent += st.PacketsSent
		t.Retransmits += st.Retransmits
		t.Lost += st.Lost
		t.Spurious += st.Spurious
		t.Timeouts += st.Timeouts
		t.PathChanges += st.PathChanges
	}
	return t
}

// AllDoneAt reports whether every send and posted receive of node has
// completed.
func (n *Net) AllDoneAt(node int) bool {
	for _, fl := range n.nodes[node].flows {
		posted := 0
		for _, g := range fl.groups {
			posted += len(g)
		}
		if len(fl.sendDone) < len(fl.sends) || len(fl.recvDone) < posted {
			return false
		}
	}
	return true
}
