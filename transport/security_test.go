package transport_test

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// secBed is a connected pair after one completed exchange in each
// direction, with what an on-path observer saw: both tokens and the DATA
// packets node 0 sent to node 1.
type secBed struct {
	n          *transporttest.Net
	ca, cb     transport.ConnID
	tokA, tokB uint64 // tokens node 0 and node 1 expect in packets to them
	data       [][]byte
	done       uint64 // cookie of node 1's completed receive on flow 0
}

func newSecBed(t *testing.T) *secBed {
	n, ca, cb := pair(t, baseNet(5), baseCfg())
	b := &secBed{n: n, ca: ca, cb: cb}
	n.OnArrive = func(p *transporttest.Packet, _ transport.Time, _ int) {
		var h wire.Header
		if _, err := wire.ParseHeader(&h, p.Data); err != nil || h.Op == wire.OpHello {
			return
		}
		if p.Dst == 1 {
			b.tokB = h.Token
			if h.Op == wire.OpData {
				b.data = append(b.data, append([]byte(nil), p.Data...))
			}
		} else {
			b.tokA = h.Token
		}
	}
	ck, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 10000})
	require.NoError(t, err)
	b.done = ck[0]
	_, err = n.PostRecv(0, ca, 0, transporttest.RecvSpec{Cap: 10})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, fill(rand.New(rand.NewPCG(1, 1)), 10000), 0)
	require.NoError(t, err)
	_, err = n.Send(1, cb, 0, make([]byte, 10), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+transport.Second))
	require.NoError(t, n.RunFor(transport.Millisecond)) // let the last ACKs land
	n.OnArrive = nil
	require.NotZero(t, b.tokA)
	require.NotZero(t, b.tokB)
	require.NotEmpty(t, b.data)
	return b
}

// forgedData builds a DATA packet to node 1's connection.
func (b *secBed) forgedData(tok uint64, path uint16, flow, msg uint32, off, msgLen uint64, payload int) []byte {
	d := wire.Data{Flow: flow, Msg: msg, Offset: off, MsgLen: msgLen, Payload: bytes.Repeat([]byte{0x66}, payload)}
	d.Op, d.DstConn, d.Token, d.Path = wire.OpData, uint32(b.cb), tok, path
	return d.Append(nil)
}

// injectExpect injects data into node and requires that exactly one
// datagram was dropped, for reason want.
func (b *secBed) injectExpect(t *testing.T, node int, data []byte, want transport.DropReason) {
	t.Helper()
	before := b.n.Node(node).EP.Counters()
	b.n.Inject(node, 1-node, 0, transport.ECT0, data)
	after := b.n.Node(node).EP.Counters()
	require.Equal(t, before.Total()+1, after.Total(), "one drop expected (%v)", want)
	require.Equal(t, before.Dropped[want]+1, after.Dropped[want], "drop reason: want %v, counters %v", want, after.Dropped)
}

func untouched(t *testing.T, rb *transporttest.RecvBuffer) {
	t.Helper()
	for i, x := range rb.Bytes() {
		if x != 0xA5 {
			t.Fatalf("receive %d: byte %d written (%#x) by a forged packet", rb.Cookie, i, x)
		}
	}
	require.False(t, rb.Done, "receive %d completed by a forged packet", rb.Cookie)
}

// TestForgedDataAtPostedBuffer aims forged DATA at a posted receive: with a
// wrong token it is dropped as bad-token; with the right token but a
// placement that disagrees with the message (unaligned offset, wrong
// segment length, offset beyond the message) it is dropped too. None of it
// writes a byte, and the genuine message that follows arrives intact.
func TestForgedDataAtPostedBuffer(t *testing.T) {
	b := newSecBed(t)
	ck, err := b.n.PostRecv(1, b.cb, 1, transporttest.RecvSpec{Cap: 8192})
	require.NoError(t, err)
	require.NoError(t, b.n.RunFor(20*transport.Microsecond)) // RECV_READY leaves
	rb := b.n.Node(1).RecvBuf(ck[0])
	seg := uint64(b.n.Node(1).EP.Config().MaxDatagram - wire.DataHeaderLen)
	cases := []struct {
		name string
		pkt  []byte
		want transport.DropReason
	}{
		{"wrong token", b.forgedData(b.tokB^1, 0, 1, 0, 0, 8192, 100), transport.DropBadToken},
		{"wrong token, other flow", b.forgedData(0, 0, 1, 0, 0, 8192, 100), transport.DropBadToken},
		{"unaligned offset", b.forgedData(b.tokB, 900, 1, 0, 100, 8192, 10), transport.DropBadPlacement},
		{"segment longer than agreed", b.forgedData(b.tokB, 901, 1, 0, 0, 8192, int(seg)+8), transport.DropBadPlacement},
		{"offset beyond the message", b.forgedData(b.tokB, 902, 1, 0, 9000, 8192, 10), transport.DropMalformed},
		{"payload beyond the message", b.forgedData(b.tokB, 903, 1, 0, 8190, 8192, 10), transport.DropMalformed},
	}
	for _, c := range cases {
		b.injectExpect(t, 1, c.pkt, c.want)
		untouched(t, rb)
	}
	_, err = b.n.Send(0, b.ca, 1, fill(rand.New(rand.NewPCG(2, 2)), 8192), 0)
	require.NoError(t, err)
	require.NoError(t, b.n.RunUntil(b.n.AllDone, b.n.Now()+transport.Second))
	require.NoError(t, b.n.Check(transporttest.CheckOptions{Complete: true}))
}

// TestReplayAfterCompletion replays genuine DATA of a completed message:
// as captured (its PSN was received: duplicate) and with a fresh PSN (the
// message is complete: stale). The buffer, which the application owns
// again after completion, is not written.
func TestReplayAfterCompletion(t *testing.T) {
	b := newSecBed(t)
	rb := b.n.Node(1).RecvBuf(b.done)
	require.True(t, rb.Done)
	orig := append([]byte(nil), rb.Bytes()...)
	copy(rb.Bytes(), bytes.Repeat([]byte{0x3c}, len(rb.Bytes()))) // the application reuses it
	for i, p := range b.data {
		b.injectExpect(t, 1, p, transport.DropDuplicate)
		q := append([]byte(nil), p...)
		q[16], q[17] = 0x03, byte(i) // paths 768 and up, never used: the PSN is fresh
		b.injectExpect(t, 1, q, transport.DropStale)
	}
	require.Equal(t, bytes.Repeat([]byte{0x3c}, len(rb.Bytes())), rb.Bytes(), "a replay rewrote a completed buffer")
	copy(rb.Bytes(), orig) // so that Check compares the delivery and the guards
	require.NoError(t, b.n.Check(transporttest.CheckOptions{Complete: true}))
}

// TestSpoofedAck: an ACK with a wrong token is dropped; one with the right
// token that acknowledges PSNs never sent changes nothing: no packet is
// acknowledged or declared lost, and the next transfer runs without a
// single retransmission.
func TestSpoofedAck(t *testing.T) {
	b := newSecBed(t)
	ep := b.n.Node(0).EP
	ack := func(tok uint64) []byte {
		a := wire.Ack{N: 4}
		a.Op, a.DstConn, a.Token = wire.OpAck, uint32(b.ca), tok
		for i := range 4 {
			r := &a.Records[i]
			r.Path, r.Cum = uint16(i), 5000
			for w := range r.Sack {
				r.Sack[w] = ^uint64(0)
			}
		}
		return a.Append(nil)
	}
	b.injectExpect(t, 0, ack(b.tokA+1), transport.DropBadToken)
	before, ok := ep.Stats(b.ca)
	require.True(t, ok)
	drops := ep.Counters()
	b.n.Inject(0, 1, 0, transport.ECT0, ack(b.tokA))
	after, _ := ep.Stats(b.ca)
	require.Equal(t, drops, ep.Counters())
	require.Equal(t, before.AcksRecv+1, after.AcksRecv)
	require.Equal(t, before.Lost, after.Lost)
	require.Equal(t, before.Spurious, after.Spurious)
	require.Equal(t, 0, after.Inflight)

	_, err := b.n.PostRecv(1, b.cb, 2, transporttest.RecvSpec{Cap: 50000})
	require.NoError(t, err)
	_, err = b.n.Send(0, b.ca, 2, fill(rand.New(rand.NewPCG(3, 3)), 50000), 0)
	require.NoError(t, err)
	require.NoError(t, b.n.RunUntil(b.n.AllDone, b.n.Now()+transport.Second))
	require.NoError(t, b.n.Check(transporttest.CheckOptions{Complete: true}))
	end, _ := ep.Stats(b.ca)
	require.Equal(t, before.Retransmits, end.Retransmits, "the spoofed ACK caused retransmissions")
	require.Equal(t, before.Lost, end.Lost)
}

// TestSpoofedUnknownConnNack: a NACK UNKNOWN_CONN naming our peer's
// connection with a wrong token is dropped and the connection lives on;
// the genuine one (right token: the peer forgot us) fails it.
func TestSpoofedUnknownConnNack(t *testing.T) {
	b := newSecBed(t)
	nack := func(tok uint64) []byte {
		k := wire.Nack{Reason: wire.NackUnknownConn, Value: uint64(b.cb)}
		k.Op, k.Token = wire.OpNack, tok
		return k.Append(nil)
	}
	for _, tok := range []uint64{b.tokB ^ 1, b.tokA, 0} {
		b.injectExpect(t, 0, nack(tok), transport.DropUnknownConn)
	}
	st, ok := b.n.Node(0).EP.Stats(b.ca)
	require.True(t, ok)
	require.Equal(t, "established", st.State)
	closed, _ := b.n.Closed(0, b.ca)
	require.False(t, closed)

	b.n.Inject(0, 1, 0, transport.ECT0, nack(b.tokB))
	require.NoError(t, b.n.RunFor(transport.Millisecond))
	closed, err := b.n.Closed(0, b.ca)
	require.True(t, closed)
	require.ErrorIs(t, err, transport.ErrPeerDead)
}

// TestHelloFlood sends 100,000 HELLOs from random remotes with random ids
// and tokens to a listening endpoint: it holds at most MaxConns
// connections, answers without growing without bound, allocates nothing for
// a HELLO it refuses, and is empty again once the flood's connections
// time out.
func TestHelloFlood(t *testing.T) {
	cfg := transport.Config{Listen: true, MaxConns: 1024, IdleTimeout: 100 * transport.Millisecond}
	ep := transport.NewEndpoint(cfg, rand.New(rand.NewPCG(9, 9)))
	rng := rand.New(rand.NewPCG(10, 10))
	buf := make([]byte, 65536)
	pkt := make([]byte, 0, 128)
	hl := wire.Hello{Planes: 1, Paths: 4, MaxDgram: 4152, Addr: []byte("somewhere")}
	hl.Op = wire.OpHello
	hello := func() []byte {
		hl.SrcConn, hl.SrcTok = rng.Uint32()|1, rng.Uint64()|1
		pkt = hl.Append(pkt[:0])
		return pkt
	}
	drain := func(now transport.Time) (sent int) {
		for {
			if _, ok := ep.PollTransmit(now, buf); !ok {
				break
			}
			sent++
		}
		for {
			if _, ok := ep.PollEvent(); !ok {
				break
			}
		}
		return sent
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	const flood = 100_000
	now := transport.Time(1)
	replies := 0
	for i := 0; i < flood; i++ {
		now += 100 // 10 M HELLOs per second
		ep.HandleDatagram(now, transport.Datagram{From: transport.RemoteID(rng.Uint32()), Data: hello()})
		if i%64 == 0 {
			replies += drain(now)
		}
		require.LessOrEqual(t, ep.NumConns(), cfg.MaxConns)
	}
	replies += drain(now)
	require.Equal(t, cfg.MaxConns, ep.NumConns())
	require.Equal(t, uint64(flood-cfg.MaxConns), ep.Counters().Dropped[transport.DropConnLimit])
	require.LessOrEqual(t, replies, 2*cfg.MaxConns, "replies are bounded by the connections, not the flood")
	require.NoError(t, transport.CheckFootprint(ep))
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapAlloc) - int64(heap0)
	t.Logf("heap grew %d KiB for %d connections (%d B each); %d replies", grown>>10, cfg.MaxConns, grown/int64(cfg.MaxConns), replies)
	require.Less(t, grown, int64(cfg.MaxConns)*64<<10, "more than 64 KiB per flood connection")

	allocs := testing.AllocsPerRun(1000, func() {
		ep.HandleDatagram(now, transport.Datagram{From: 7, Data: hello()})
	})
	require.Zero(t, allocs, "a refused HELLO allocates")

	for k := 0; k < 50 && ep.NumConns() > 0; k++ {
		now += 10 * transport.Millisecond
		ep.HandleTimeout(now)
		drain(now)
	}
	require.Zero(t, ep.NumConns(), "flood connections never heard from again must time out")
}

// FuzzForgedSequence plays a sequence of forged datagrams, valid and
// invalid, at node 1 of a live transfer: the program bytes choose a
// captured genuine packet and a rewrite of its token, path, PSN and
// placement fields. Whatever the sequence, nothing panics, nothing is
// written outside a posted buffer, the endpoint stays within its bounds,
// and the transfer then finishes or fails cleanly.
func FuzzForgedSequence(f *testing.F) {
	_, _, _, seen := fuzzBed(f)
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add(bytes.Repeat([]byte{0xff, 0x10, 0x20, 0x30, 0x40, 0x50}, 8))
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(seen) == 0 {
			t.Skip("no packets captured")
		}
		n, _, _, _ := fuzzBed(t)
		for len(prog) >= 6 {
			op := prog[:6]
			prog = prog[6:]
			d := append([]byte(nil), seen[int(op[0])%len(seen)]...)
			switch op[1] % 6 {
			case 0: // as captured: a replay
			case 1: // wrong token
				if len(d) >= 16 {
					d[8] ^= op[2] | 1
				}
			case 2: // fresh path and PSN
				if len(d) >= wire.HeaderLen {
					d[16], d[17], d[20], d[23] = 0, op[2], op[3], op[4]
				}
			case 3: // a placement field
				if len(d) >= wire.DataHeaderLen {
					d[28+int(op[2])%28] ^= op[3]
				}
			case 4: // truncate
				d = d[:int(op[2])%(len(d)+1)]
			case 5: // any byte
				d[int(op[2])%len(d)] ^= op[3]
			}
			feed(t, n, d, transport.ECN(op[5]&3))
		}
		require.NoError(t, n.RunFor(2*transport.Millisecond))
		require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
	})
}
