package tcpnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/backend/backendtest"
)

// listening returns a backend of 2 sockets per connection on loopback, a
// listener on device 0, closed at the end of the test, and that listener's
// handle parsed.
func listening(t *testing.T) (*Backend, backend.Listener, listenHandle) {
	t.Helper()
	b, err := New(Config{IfNames: "=lo", Socks: 2, Timeout: 5 * time.Second})
	noErr(t, err)
	l, err := b.Listen(0)
	noErr(t, err)
	t.Cleanup(func() { l.Close() })
	var h listenHandle
	_, err = parseListenHandle(&h, l.Handle())
	noErr(t, err)
	return b, l, h
}

// stepUntilDone polls d until it returns a connection or an error.
func stepUntilDone(t *testing.T, d backend.Dialer) (backend.SendConn, error) {
	t.Helper()
	var sc backend.SendConn
	var err error
	backendtest.PollUntil(t, "connect", func() bool {
		sc, err = d.Step()
		return sc != nil || err != nil
	})
	return sc, err
}

// TestForeignHandleRejectedAtConnect: a handle whose nonce is not the
// listener's (stale, from another job) fails connect with ncclRemoteError's
// category and a message naming the peer and the cause, instead of a
// connection whose sockets the listener silently dropped.
func TestForeignHandleRejectedAtConnect(t *testing.T) {
	b, l, h := listening(t)
	h.Nonce++ // same address and port, another listener's identity
	foreign, err := h.Append(nil)
	noErr(t, err)
	d, err := b.Dial(0, foreign)
	noErr(t, err)
	defer d.Abort()
	sc, err := stepUntilDone(t, d)
	if sc != nil {
		t.Fatal("connect with a foreign handle succeeded")
	}
	if !errors.Is(err, backend.ErrRemote) || !strings.Contains(err.Error(), h.Addr.String()) || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("error %v: want ErrRemote naming %v and a stale handle", err, h.Addr)
	}
	if rc, err := l.Accept(); rc != nil || err != nil {
		t.Fatalf("the listener produced a connection (%v, %v) from a foreign handle", rc, err)
	}
}

// dialFake starts a connect of socks sockets, under a connect timeout of
// timeout, to a fakeListener, whose side of each socket comes on conns as
// it connects; the connect is aborted when the test ends.
func dialFake(t *testing.T, socks int, timeout time.Duration) (d backend.Dialer, conns <-chan net.Conn) {
	t.Helper()
	hb, conns := fakeListener(t, socks)
	b, err := New(Config{IfNames: "=lo", Socks: socks, Timeout: timeout})
	noErr(t, err)
	d, err = b.Dial(0, hb)
	noErr(t, err)
	t.Cleanup(d.Abort)
	return d, conns
}

// fakeListener accepts one socket on loopback, reads its hello and hands
// it to the test, which answers as it likes.
func fakeListener(t *testing.T, socks int) (handle []byte, conns <-chan net.Conn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	noErr(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	h := listenHandle{Addr: ln.Addr().(*net.TCPAddr).AddrPort(), Socks: socks, Nonce: 42}
	hb, err := h.Append(nil)
	noErr(t, err)
	ch := make(chan net.Conn, socks)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var buf [helloLen]byte
			var hl hello
			if _, err := io.ReadFull(c, buf[:]); err != nil {
				_ = c.Close()
				continue
			}
			if _, err := parseHello(&hl, buf[:]); err != nil || hl.Nonce != 42 {
				_ = c.Close()
				continue
			}
			ch <- c
		}
	}()
	return hb, ch
}

// TestSocketCountsOnlyOnceAccepted: the dialer does not report the
// connection while the listener has read the hello but not answered it,
// reports it once it answered, and fails with the verdict's reason on a
// refusal.
func TestSocketCountsOnlyOnceAccepted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict byte
		want    string // "" = connected
	}{
		{"accepted", helloAccepted, ""},
		{"stale", helloStale, "stale"},
		{"refused", helloRefused, "closing"},
		{"refused, naming the timeout", helloRefused, "is METAROCE_TIMEOUT_MS, 5s here, the same on every rank?"},
		{"garbage", 0x7f, "not a MetaRoCE tcp listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, conns := dialFake(t, 1, 5*time.Second)
			c := <-conns // the hello has arrived; the dialer now waits for the answer
			defer c.Close()
			if sc, err := d.Step(); sc != nil || err != nil {
				t.Fatalf("Step before the listener answered: %v, %v; want not ready", sc, err)
			}
			if _, err := c.Write([]byte{tc.verdict}); err != nil {
				t.Fatal(err)
			}
			sc, err := stepUntilDone(t, d)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				_ = sc.Close()
				return
			}
			if !errors.Is(err, backend.ErrRemote) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "127.0.0.1:") {
				t.Fatalf("error %v: want ErrRemote naming the peer and %q", err, tc.want)
			}
		})
	}
}

// TestAbortDuringHandshake: Abort returns without waiting for the connect
// timeout while a listener holds the hello unanswered.
func TestAbortDuringHandshake(t *testing.T) {
	hb, conns := fakeListener(t, 1)
	b, err := New(Config{IfNames: "=lo", Socks: 1, Timeout: time.Hour})
	noErr(t, err)
	d, err := b.Dial(0, hb)
	noErr(t, err)
	c := <-conns
	defer c.Close()
	aborted := make(chan struct{})
	go func() { d.Abort(); close(aborted) }()
	select {
	case <-aborted:
	case <-time.After(backendtest.Deadline):
		t.Fatal("Abort waited for the listener's answer")
	}
	if sc, err := d.Step(); sc != nil || err == nil {
		t.Fatalf("Step after Abort: %v, %v", sc, err)
	}
}

// TestListenerAnswersEveryHello: the listener answers each hello: a foreign
// nonce is stale, sockets are accepted until maxPendingConns connections
// are half set up, and beyond that, or for a slot already filled, the
// answer is a refusal.
func TestListenerAnswersEveryHello(t *testing.T) {
	_, l, h := listening(t)
	var last *net.TCPConn // the socket of the latest ask
	ask := func(hl hello) byte {
		t.Helper()
		c, v := helloSocket(t, h.Addr, hl)
		last = c
		return v
	}
	eq(t, helloStale, ask(hello{Index: 0, Socks: 2, Nonce: h.Nonce + 1, ConnID: 1}))
	eq(t, helloStale, ask(hello{Index: 0, Socks: 1, Nonce: h.Nonce, ConnID: 1}))
	var first *net.TCPConn // socket 0 of connection 1
	for id := range uint64(maxPendingConns) {
		eq(t, helloAccepted, ask(hello{Index: 0, Socks: 2, Nonce: h.Nonce, ConnID: id + 1}))
		if id == 0 {
			first = last
		}
	}
	eq(t, helloRefused, ask(hello{Index: 0, Socks: 2, Nonce: h.Nonce, ConnID: maxPendingConns + 1}))
	eq(t, helloRefused, ask(hello{Index: 0, Socks: 2, Nonce: h.Nonce, ConnID: 1}))
	// The second socket of a half set up connection completes it, and
	// the dialer's confirmation hands it out.
	eq(t, helloAccepted, ask(hello{Index: 1, Socks: 2, Nonce: h.Nonce, ConnID: 1}))
	_, err := first.Write([]byte{connConfirmed})
	noErr(t, err)
	var rc backend.RecvConn
	backendtest.PollUntil(t, "accept", func() bool {
		var err error
		rc, err = l.Accept()
		noErr(t, err)
		return rc != nil
	})
	noErr(t, rc.Close())
}

// TestAcceptInHandCompletesConnect: a connect whose deadline comes just
// after every socket read the listener's helloAccepted completes, as the
// listener, which filed the sockets before answering, queued the
// connection: both sides hold it, and a message crosses it (the deadline
// left no expired socket deadline behind).
func TestAcceptInHandCompletesConnect(t *testing.T) {
	b, l, h := listening(t)
	read, proceed := holdVerdicts(b, h.Socks)
	d, err := b.Dial(0, l.Handle())
	noErr(t, err)
	defer d.Abort()
	for range h.Socks {
		<-read // this socket holds the listener's answer
	}
	d.(*dialer).cancel() // what the connect timeout does
	close(proceed)
	sc, err := stepUntilDone(t, d)
	if err != nil {
		t.Fatalf("connect whose accepts were in hand when its context ended: %v", err)
	}
	defer sc.Close()
	var rc backend.RecvConn
	backendtest.PollUntil(t, "accept", func() bool {
		rc, err = l.Accept()
		noErr(t, err)
		return rc != nil
	})
	defer rc.Close()
	buf := make([]byte, 5)
	r, err := rc.Irecv([][]byte{buf}, []int32{7})
	noErr(t, err)
	s, err := sc.Isend([]byte("hello"), 7)
	noErr(t, err)
	backendtest.Wait(t, s, nil)
	backendtest.Wait(t, r, nil)
	eq(t, "hello", string(buf))
}

// halfConn opens socket 0 of 2 of connection id to the listener at addr,
// as a dialer does, and returns it once the listener accepted it.
func halfConn(t *testing.T, addr netip.AddrPort, nonce, id uint64) *net.TCPConn {
	t.Helper()
	c, v := helloSocket(t, addr, hello{Index: 0, Socks: 2, Nonce: nonce, ConnID: id})
	eq(t, helloAccepted, v)
	return c
}

// holdVerdicts makes each of b's dialer goroutines, once it has read the
// listener's answer to its socket, send the socket's index on read (which
// holds socks of them) and wait until proceed is closed.
func holdVerdicts(b *Backend, socks int) (read chan int, proceed chan struct{}) {
	read, proceed = make(chan int, socks), make(chan struct{})
	b.verdictRead = func(idx int) {
		read <- idx
		<-proceed
	}
	return read, proceed
}

// helloSocket opens a socket to the listener at addr, closed at the end of
// the test, writes hl on it and returns it with the listener's answer.
func helloSocket(t *testing.T, addr netip.AddrPort, hl hello) (*net.TCPConn, byte) {
	t.Helper()
	c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(addr))
	noErr(t, err)
	t.Cleanup(func() { _ = c.Close() })
	hb, err := hl.Append(nil)
	noErr(t, err)
	_, err = c.Write(hb)
	noErr(t, err)
	var v [1]byte
	_, err = io.ReadFull(c, v[:])
	noErr(t, err)
	return c, v[0]
}

// fakeClock makes l read its clock from the returned function's sum of
// advances, starting now.
func fakeClock(l *listener) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Now()
	l.mu.Lock()
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l.mu.Unlock()
	return func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
}

// requireServed dials the listener l of backend b and requires the connect
// to complete and the listener to hand the connection out, which it then
// closes, leaving the listener no connection half set up. what names the
// listener's state for the failure message.
func requireServed(t *testing.T, b *Backend, l backend.Listener, what string) {
	t.Helper()
	d, err := b.Dial(0, l.Handle())
	noErr(t, err)
	defer d.Abort()
	sc, err := stepUntilDone(t, d)
	if err != nil {
		t.Fatalf("connect after %s: %v", what, err)
	}
	defer sc.Close()
	var rc backend.RecvConn
	backendtest.PollUntil(t, "accept", func() bool {
		rc, err = l.Accept()
		noErr(t, err)
		return rc != nil
	})
	noErr(t, rc.Close())
	ln := l.(*listener)
	ln.mu.Lock()
	defer ln.mu.Unlock()
	eq(t, 0, len(ln.pending))
	eq(t, 0, len(ln.since))
}

// finTaken reports whether the other end's kernel has acknowledged the FIN
// that c sent (c is in FIN_WAIT2), so that the other end reads the end of
// the stream.
func finTaken(t *testing.T, c *net.TCPConn) bool {
	t.Helper()
	return tcpInfo(t, c).State == unix.BPF_TCP_FIN_WAIT2
}

// tcpInfo reads c's TCP_INFO.
func tcpInfo(t *testing.T, c *net.TCPConn) *unix.TCPInfo {
	t.Helper()
	raw, err := c.SyscallConn()
	noErr(t, err)
	var info *unix.TCPInfo
	noErr(t, raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}))
	noErr(t, err)
	return info
}

// TestAbandonedHalfConnsExpire: maxPendingConns connections of which one
// socket of two arrived and whose dialers then gave up (closed it) do not
// make the listener refuse the next dialer: it drops them, closing their
// sockets, when that dialer's first socket arrives.
func TestAbandonedHalfConnsExpire(t *testing.T) {
	b, l, h := listening(t)
	var given []*net.TCPConn
	for id := range uint64(maxPendingConns) {
		given = append(given, halfConn(t, h.Addr, h.Nonce, id+1))
	}
	for _, c := range given {
		noErr(t, c.CloseWrite()) // the dialer gives up
	}
	backendtest.PollUntil(t, "the listener's side reading each end", func() bool {
		for len(given) > 0 && finTaken(t, given[0]) {
			given = given[1:]
		}
		return len(given) == 0
	})
	requireServed(t, b, l, fmt.Sprintf("%d abandoned half connections", maxPendingConns))
}

// acceptFirstSocket answers c, the first socket of d's connect, with
// helloAccepted, as a listener does, and waits until d has counted it.
func acceptFirstSocket(t *testing.T, d backend.Dialer, c net.Conn) {
	t.Helper()
	_, err := c.Write([]byte{helloAccepted})
	noErr(t, err)
	dl := d.(*dialer)
	backendtest.PollUntil(t, "first socket accepted", func() bool {
		dl.mu.Lock()
		defer dl.mu.Unlock()
		return dl.n == 1
	})
}

// TestFailedConnectReleasesAcceptedSockets: when one socket of a connect
// is refused after another was accepted, the connect fails and closes the
// accepted socket at once, before any Step or Abort, so that the listener
// sees the dialer gone and drops the half-assembled connection.
func TestFailedConnectReleasesAcceptedSockets(t *testing.T) {
	d, conns := dialFake(t, 2, time.Hour)
	first, second := <-conns, <-conns
	defer first.Close()
	defer second.Close()
	acceptFirstSocket(t, d, first)
	_, err := second.Write([]byte{helloStale})
	noErr(t, err)
	requireClosedByDialer(t, first, "accepted socket of a failed connect")
}

// TestConnectToClosedSocketsFails: a connect whose listener closed one of
// its accepted sockets before the last was accepted (the listener closing,
// or dropping the connection as half set up too long) fails, naming the
// peer, and closes its sockets, instead of completing: the close sent
// only a FIN, and the confirmation's write succeeded on either socket, so
// the dialer took a connection that the listener never hands out.
func TestConnectToClosedSocketsFails(t *testing.T) {
	d, conns := dialFake(t, 2, time.Hour)
	first, last := (<-conns).(*net.TCPConn), (<-conns).(*net.TCPConn)
	defer first.Close()
	defer last.Close()
	acceptFirstSocket(t, d, first)
	noErr(t, first.CloseWrite()) // what the listener's close sends
	backendtest.PollUntil(t, "the dialer's side reading the end", func() bool { return finTaken(t, first) })
	_, err := last.Write([]byte{helloAccepted})
	noErr(t, err)
	sc, err := stepUntilDone(t, d)
	if sc != nil {
		_ = sc.Close()
		t.Fatal("connect completed on a socket its listener had closed")
	}
	if !errors.Is(err, backend.ErrRemote) || !strings.Contains(err.Error(), "127.0.0.1:") || !strings.Contains(err.Error(), "before this side could confirm") {
		t.Fatalf("error %v: want ErrRemote naming the peer and the unconfirmed connection", err)
	}
	requireClosedByDialer(t, last, "last socket of a connect whose listener closed another")
}

// TestFailedConnectStopsOtherSockets: when the listener refuses one
// socket of a connect while another still waits for its answer, the
// connect fails and the waiting socket's handshake ends at once (the
// dialer closes it) instead of going on until the connect timeout, an
// hour here, only for the socket to be closed when its answer comes.
func TestFailedConnectStopsOtherSockets(t *testing.T) {
	d, conns := dialFake(t, 2, time.Hour)
	refused, waiting := <-conns, <-conns
	defer refused.Close()
	defer waiting.Close()
	_, err := refused.Write([]byte{helloStale})
	noErr(t, err)
	sc, err := stepUntilDone(t, d)
	if sc != nil || !errors.Is(err, backend.ErrRemote) {
		t.Fatalf("connect with a refused socket: %v, %v; want ErrRemote", sc, err)
	}
	requireClosedByDialer(t, waiting, "unanswered socket of a failed connect")
}

// requireClosedByDialer reads c, the listener's side of one of a dialer's
// sockets, until the dialer closes it: the read must end at the end of the
// stream. Its deadline, far below any connect timeout the tests set, only
// turns a socket left open into a failure instead of a hang.
func requireClosedByDialer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	noErr(t, c.SetReadDeadline(time.Now().Add(backendtest.Deadline)))
	var buf [1]byte
	if n, err := c.Read(buf[:]); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("%s: read %d bytes, %v; want the end of the stream", what, n, err)
	}
}

// TestHelloClosedUnansweredIsRemote: a peer that closes the socket without
// answering the hello (whatever took the handle's port is no listener of
// this version) fails connect as a stale or foreign handle: ErrRemote,
// naming the peer, as the backend interface's rule for a well-formed
// handle that names no listener says.
func TestHelloClosedUnansweredIsRemote(t *testing.T) {
	d, conns := dialFake(t, 1, time.Hour)
	noErr(t, (<-conns).Close())
	sc, err := stepUntilDone(t, d)
	if sc != nil {
		t.Fatal("connect succeeded on a socket closed without an answer")
	}
	if !errors.Is(err, backend.ErrRemote) || !strings.Contains(err.Error(), "127.0.0.1:") || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("error %v: want ErrRemote naming the peer and a stale handle", err)
	}
}

// TestClosedListenerHandleIsRemote: a handle whose listener has closed,
// so that its port refuses connections, fails connect at the connect
// timeout as a stale handle: ErrRemote, naming the peer, as the backend
// interface's rule for a well-formed handle that names no listener says.
// The timeout leaves room for several refused attempts (refusedBackoff
// apart) on a loaded host: a dial that got no refusal before the timeout
// fails as a plain timeout, not as a stale handle.
func TestClosedListenerHandleIsRemote(t *testing.T) {
	b, err := New(Config{IfNames: "=lo", Socks: 2, Timeout: time.Second})
	noErr(t, err)
	l, err := b.Listen(0)
	noErr(t, err)
	hb := append([]byte(nil), l.Handle()...)
	noErr(t, l.Close())
	d, err := b.Dial(0, hb)
	noErr(t, err)
	defer d.Abort()
	sc, err := stepUntilDone(t, d)
	if sc != nil {
		t.Fatal("connect to a closed listener succeeded")
	}
	if !errors.Is(err, backend.ErrRemote) || !strings.Contains(err.Error(), "127.0.0.1:") || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("error %v: want ErrRemote naming the peer and a stale handle", err)
	}
}

// dataTaken reports whether the other end's kernel has acknowledged every
// byte written on c, so that the bytes wait in its receive queue.
func dataTaken(t *testing.T, c *net.TCPConn) bool {
	t.Helper()
	info := tcpInfo(t, c)
	return info.Unacked == 0 && info.Notsent_bytes == 0
}

// TestTalkingHalfConnsExpire: maxPendingConns connections of which one
// socket of two arrived and then sent bytes, which no dialer of this
// version does before its connection is complete, do not make the
// listener refuse the next dialer, whether their peers stay (half of
// them) or close after the bytes, which hides the end of the stream from
// a peek behind them: the listener drops them, closing their sockets and
// logging each peer, when that dialer's first socket arrives.
func TestTalkingHalfConnsExpire(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	b, err := New(Config{IfNames: "=lo", Socks: 2, Timeout: 5 * time.Second, Logf: func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}})
	noErr(t, err)
	l, err := b.Listen(0)
	noErr(t, err)
	t.Cleanup(func() { l.Close() })
	var h listenHandle
	_, err = parseListenHandle(&h, l.Handle())
	noErr(t, err)
	var talkers []*net.TCPConn
	for id := range uint64(maxPendingConns) {
		c := halfConn(t, h.Addr, h.Nonce, id+1)
		_, err := c.Write([]byte("early bytes"))
		noErr(t, err)
		if id%2 == 1 {
			noErr(t, c.CloseWrite())
		}
		talkers = append(talkers, c)
	}
	backendtest.PollUntil(t, "the listener's side holding each talker's bytes", func() bool {
		for len(talkers) > 0 && dataTaken(t, talkers[0]) {
			talkers = talkers[1:]
		}
		return len(talkers) == 0
	})
	requireServed(t, b, l, fmt.Sprintf("%d half connections that sent data", maxPendingConns))
	mu.Lock()
	defer mu.Unlock()
	eq(t, maxPendingConns, len(logged))
	if !strings.Contains(logged[0], "127.0.0.1:") || !strings.Contains(logged[0], "sent data") {
		t.Fatalf("log line %q: want the peer and what it did", logged[0])
	}
}

// TestSilentHalfConnsExpire: maxPendingConns connections of which one
// socket of two arrived and then stayed open and silent hold the
// listener's pending slots only for twice the connect timeout, within
// which a live dialer opens all its sockets or gives them up: after that
// the next dialer is served, and each dropped connection's peer is
// logged. Before, they held their slots until Close, and every later
// dialer was refused.
func TestSilentHalfConnsExpire(t *testing.T) {
	g := &logged{}
	const timeout = 5 * time.Second
	b, err := New(Config{IfNames: "=lo", Socks: 2, Timeout: timeout, Logf: g.logf})
	noErr(t, err)
	l, err := b.Listen(0)
	noErr(t, err)
	t.Cleanup(func() { l.Close() })
	ln := l.(*listener)
	advance := fakeClock(ln)
	var h listenHandle
	_, err = parseListenHandle(&h, l.Handle())
	noErr(t, err)
	for id := range uint64(maxPendingConns) {
		halfConn(t, h.Addr, h.Nonce, id+1)
	}
	// Within the limit the slots are theirs: a dialer is refused.
	d, err := b.Dial(0, l.Handle())
	noErr(t, err)
	_, err = stepUntilDone(t, d)
	d.Abort()
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("connect with %d silent half connections pending: %v; want a refusal", maxPendingConns, err)
	}
	advance(2*timeout + time.Millisecond)
	requireServed(t, b, l, fmt.Sprintf("%d half connections outlived twice the connect timeout", maxPendingConns))
	g.requireLine(t, "127.0.0.1:", "1 of its 2 sockets arrived", "the connect timeout is 5s")
	g.mu.Lock()
	defer g.mu.Unlock()
	eq(t, maxPendingConns, len(g.lines))
}

// helloVerdict opens a socket to the listener at addr, writes hl on it and
// returns the listener's answer.
func helloVerdict(t *testing.T, addr netip.AddrPort, hl hello) byte {
	t.Helper()
	_, v := helloSocket(t, addr, hl)
	return v
}

// TestLateSocketOfDroppedConnIsRefused: the last socket of a connection
// that the listener dropped, half set up for longer than twice its
// connect timeout, while the dialer (whose own timeout is longer) kept
// going, is refused and logged, so that the connect fails naming the
// likely cause. Before, the socket opened a fresh connection under the
// same id and was accepted, and the dialer, its confirmation written
// without error on the socket the listener had closed, took a connection
// that the listener never hands out. The listener forgets the dropped
// connection twice the connect timeout later.
func TestLateSocketOfDroppedConnIsRefused(t *testing.T) {
	g := &logged{}
	const timeout = time.Second
	b, err := New(Config{IfNames: "=lo", Socks: 2, Timeout: timeout, Logf: g.logf})
	noErr(t, err)
	bl, err := b.Listen(0)
	noErr(t, err)
	t.Cleanup(func() { _ = bl.Close() })
	l := bl.(*listener)
	advance := fakeClock(l)
	var h listenHandle
	_, err = parseListenHandle(&h, l.Handle())
	noErr(t, err)
	halfConn(t, h.Addr, h.Nonce, 1)
	advance(2*timeout + time.Millisecond)
	halfConn(t, h.Addr, h.Nonce, 2) // a new connection: connection 1 is dropped
	eq(t, helloRefused, helloVerdict(t, h.Addr, hello{Index: 1, Socks: 2, Nonce: h.Nonce, ConnID: 1}))
	l.mu.Lock()
	_, reopened := l.pending[1]
	l.mu.Unlock()
	if reopened {
		t.Fatal("the late socket of a dropped connection opened it afresh")
	}
	g.requireLine(t, "refused socket 2 of 2", "127.0.0.1:", "METAROCE_TIMEOUT_MS")
	advance(2*timeout + time.Millisecond)
	halfConn(t, h.Addr, h.Nonce, 3) // a new connection: the memory of connection 1 expires
	l.mu.Lock()
	_, remembered := l.dropped[1]
	l.mu.Unlock()
	if remembered {
		t.Fatalf("connection 1 still remembered as dropped %v after its drop", 2*timeout+time.Millisecond)
	}
}

// TestDroppedConnsRememberedBounded: a listener remembers at most
// maxDroppedConns dropped connections, forgetting the oldest first, so
// that peers whose connections it drops cannot grow its memory without
// bound within twice the connect timeout.
func TestDroppedConnsRememberedBounded(t *testing.T) {
	_, bl, _ := listening(t)
	l := bl.(*listener)
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range uint64(maxDroppedConns + 1) {
		l.rememberDroppedLocked(id+1, at.Add(time.Duration(id)*time.Millisecond))
	}
	eq(t, maxDroppedConns, len(l.dropped))
	_, oldest := l.dropped[1]
	_, latest := l.dropped[maxDroppedConns+1]
	if oldest || !latest {
		t.Fatalf("remembered the oldest drop: %v, the latest: %v; want only the latest", oldest, latest)
	}
}
