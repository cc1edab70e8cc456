package collectives

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/metaroce/metaroce/transport/udp"
)

// metaroceFactory opens the MetaRoCE endpoint of a rank.
type metaroceFactory struct {
	ep  *udp.Endpoint
	cfg Config
}

func newMetaroceFactory(cfg Config) (*metaroceFactory, error) {
	ep, err := udp.Listen(cfg.UDP)
	if err != nil {
		return nil, fmt.Errorf("collectives: opening the MetaRoCE endpoint: %w", err)
	}
	return &metaroceFactory{ep: ep, cfg: cfg}, nil
}

// blob encodes the endpoint's per-plane addresses, comma separated.
func (f *metaroceFactory) blob() []byte {
	var s []string
	for _, a := range f.ep.Addrs() {
		s = append(s, a.String())
	}
	return []byte(strings.Join(s, ","))
}

func parseAddrs(b []byte) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, s := range strings.Split(string(b), ",") {
		a, err := netip.ParseAddrPort(s)
		if err != nil {
			return nil, fmt.Errorf("bad endpoint address %q: %w", s, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func (f *metaroceFactory) abort() { f.ep.Close() }

// maxParallelDials bounds the handshakes one rank has in progress at once.
const maxParallelDials = 32

// connect joins every peer: rank r dials the ranks below it and accepts
// the ranks above it, so each pair has exactly one connection. Its errors
// name dl where that deadline ran out.
func (f *metaroceFactory) connect(ctx context.Context, rank int, blobs [][]byte, dl setupDeadline) (link, error) {
	n := len(blobs)
	l := &metaroceLink{ep: f.ep, conns: make([]*udp.Conn, n), channels: f.cfg.Channels}
	addrs := make([][]netip.AddrPort, n)
	for r, b := range blobs {
		a, err := parseAddrs(b)
		if err != nil {
			return nil, fmt.Errorf("collectives: rank %d's description: %w", r, err)
		}
		addrs[r] = a
	}
	// Accepting runs beside dialing: the endpoint queues at most 256
	// connections not yet accepted, and in a large job the ranks above
	// this one may all dial it before it has dialed the ranks below.
	// The dials go a bounded number at a time, each waiting out its own
	// handshake. The two sides fill disjoint entries of l.conns.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		dials, dctx := errgroup.WithContext(gctx)
		dials.SetLimit(maxParallelDials)
		for r := 0; r < rank; r++ {
			dials.Go(func() error {
				c, err := f.ep.Dial(dctx, addrs[r])
				if errors.Is(err, context.DeadlineExceeded) {
					// The handshake timeout is Config.Timeout (unless
					// set apart), so the setup deadline, which started
					// before the rendezvous, ends a dial to a silent rank
					// first, with none of the transport's own advice.
					when, d := dl.ended(ctx.Err()), dl.error(ctx.Err())
					if d == nil {
						d = &DeadlineError{Timeout: f.cfg.Timeout, Field: f.cfg.timeoutSetting(), either: true}
						when = " before " + d.Error()
					}
					return &endedError{err: fmt.Errorf("collectives: rank %d connecting to rank %d at %v: rank %d did not answer the handshake%s: check that it still runs, that UDP between the hosts is not filtered, and that every rank has the same secret or none: %w",
						rank, r, addrs[r], r, when, err), dl: d}
				}
				if err != nil {
					return fmt.Errorf("collectives: rank %d connecting to rank %d at %v: %w", rank, r, addrs[r], err)
				}
				l.conns[r] = c
				return nil
			})
		}
		return dials.Wait()
	})
	g.Go(func() error { return f.acceptAbove(gctx, rank, addrs, l, dl) })
	if err := g.Wait(); err != nil {
		return nil, err // the caller's abort closes the endpoint and its connections
	}
	return l, nil
}

// acceptAbove accepts the connections of the ranks above rank into
// l.conns, one per rank, until every one has connected or ctx ends; its
// error names dl where that deadline ran out.
//
// A connection that names no rank this one waits for (by the plane-0
// address its HELLO announced: a leftover rank of an earlier job that
// still dials the port, a scanner that speaks MetaRoCE, a second
// connection claiming a rank already connected) is closed and does not
// count, as the TCP baseline's acceptAbove ignores such strays: the
// endpoint is on an ephemeral port that anything may reach, and a job
// without a secret accepts every handshake. Counting it failed New on this
// rank, and so on every rank, for a datagram that was none of the job's.
// (With a secret, the endpoint drops a HELLO it cannot authenticate before
// any connection exists.) The stray is closed on a goroutine of its own: a
// close waits for the peer's answer, up to 4 × Core.HandshakeRetry for one
// that never answers, and the real ranks must not wait behind it; the
// endpoint's own close, when the setup fails or the link closes, ends
// those waits.
func (f *metaroceFactory) acceptAbove(ctx context.Context, rank int, addrs [][]netip.AddrPort, l *metaroceLink, dl setupDeadline) error {
	n := len(addrs)
	for left := n - 1 - rank; left > 0; {
		c, err := f.ep.Accept(ctx)
		if err != nil {
			miss := ranksWhere(rank+1, n, func(r int) bool { return l.conns[r] == nil })
			return dl.wrap(fmt.Errorf("collectives: rank %d waiting for ranks above it to connect (still missing: %s)%s: %w", rank, rankList(miss), dl.ended(ctx.Err()), err), ctx.Err())
		}
		peer := -1
		if ra := c.RemoteAddrs(); len(ra) > 0 {
			for r := rank + 1; r < n; r++ {
				if len(addrs[r]) > 0 && addrs[r][0] == ra[0] {
					peer = r
				}
			}
		}
		if peer < 0 || l.conns[peer] != nil {
			why := "no rank of this job"
			if peer >= 0 {
				why = fmt.Sprintf("rank %d, which has connected already", peer)
			}
			f.cfg.Logf("rank %d: closed a connection to its MetaRoCE endpoint from %v: the addresses its handshake announced are those of %s", rank, c.RemoteAddrs(), why)
			go c.Close()
			continue
		}
		l.conns[peer] = c
		left--
	}
	return nil
}

// metaroceLink carries channel c to peer p as flow c of the one MetaRoCE
// connection to p: all channels share that connection's paths and its
// congestion controller.
type metaroceLink struct {
	ep       *udp.Endpoint
	conns    []*udp.Conn
	channels int
	senders  int // the concurrent senders last declared to the endpoint (0: none yet)
}

// expectSenders declares k concurrent senders to the endpoint, at most the
// bound it was opened with (Config.UDP.Core.ConcurrentSenders, which
// defaults to the all-to-all's messages in flight): a ring's rank hears
// from one peer, so the endpoint's first rate hint to it is the whole
// inbound capacity rather than a share among the connections that could
// send (docs/spec.md §3.5).
func (l *metaroceLink) expectSenders(k int) {
	if b := l.ep.Config().Core.ConcurrentSenders; b > 0 {
		k = min(k, b)
	}
	k = max(k, 1)
	if k == l.senders {
		return
	}
	if l.ep.SetConcurrentSenders(k) == nil {
		l.senders = k
	}
}

func (l *metaroceLink) send(peer, ch int, tag uint32, buf []byte, done func()) (pending, error) {
	return l.conns[peer].SendNotify(uint32(ch), buf, tag, done)
}

func (l *metaroceLink) recv(peer, ch int, tag uint32, buf []byte, done func()) (pending, error) {
	return l.conns[peer].RecvNotify(uint32(ch), [][]byte{buf}, []uint32{tag}, done)
}

// progress drives the endpoint's datapath from the calling goroutine (see
// udp.Endpoint.Progress).
func (l *metaroceLink) progress(done func() bool) bool { return l.ep.Progress(done) }

func (l *metaroceLink) peerStats() []PeerStats {
	var out []PeerStats
	for r, c := range l.conns {
		if c == nil {
			continue
		}
		out = append(out, PeerStats{Rank: r, Conn: c.Stats(), Paths: c.PathStats()})
	}
	return out
}

func (l *metaroceLink) describe() string {
	addrs := l.ep.Addrs()
	return fmt.Sprintf("metaroce: %d plane(s) %v, %d channel(s) as flows on one connection per peer", len(addrs), addrs, l.channels)
}

func (l *metaroceLink) info() LinkInfo {
	cfg := l.ep.Config()
	return LinkInfo{Transport: TransportMetaRoCE, Addrs: append([]netip.Addr(nil), cfg.Addrs...),
		PathsPerPlane: cfg.Core.PathsPerPlane, MaxDatagram: cfg.MaxDatagram, Channels: l.channels}
}

// close ends every connection at once and then the endpoint. The
// connections close side by side: each waits for its peer's answer (or,
// for a dead peer, the linger), and one after another that would add up
// to the linger times the dead peers.
func (l *metaroceLink) close() error {
	var wg sync.WaitGroup
	for _, c := range l.conns {
		if c != nil {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
	return l.ep.Close()
}
