package tcpnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/backend/backendtest"
)

// logged collects the lines a backend logs.
type logged struct {
	mu    sync.Mutex
	lines []string
}

func (g *logged) logf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lines = append(g.lines, fmt.Sprintf(format, args...))
}

// requireLine fails the test unless a logged line contains every one of
// parts.
func (g *logged) requireLine(t *testing.T, parts ...string) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, line := range g.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return
		}
	}
	t.Fatalf("no log line with %q among %q", parts, g.lines)
}

// watchedListener returns a backend of 2 sockets per connection on
// loopback with connect timeout timeout, whose lines go to the returned
// log, a listener on device 0, closed at the end of the test, and a
// channel that receives, for each complete connection, whether the
// listener queued it for Accept (true) or dropped it (false).
func watchedListener(t *testing.T, timeout time.Duration) (*Backend, *listener, *logged, <-chan bool) {
	t.Helper()
	g := &logged{}
	b, err := New(Config{IfNames: "=lo", Socks: 2, Timeout: timeout, Logf: g.logf})
	noErr(t, err)
	bl, err := b.Listen(0)
	noErr(t, err)
	t.Cleanup(func() { _ = bl.Close() })
	l := bl.(*listener)
	settled := make(chan bool, 4)
	l.mu.Lock()
	l.settled = func(handedOut bool) { settled <- handedOut }
	l.mu.Unlock()
	return b, l, g, settled
}

// requireSettled waits for the listener's decision on a complete
// connection and fails the test unless it is want.
func requireSettled(t *testing.T, settled <-chan bool, want bool, what string) {
	t.Helper()
	select {
	case got := <-settled:
		if got != want {
			t.Fatalf("%s: the listener handed the connection out: %v, want %v", what, got, want)
		}
	case <-time.After(backendtest.Deadline):
		t.Fatalf("%s: the listener neither handed out nor dropped the connection", what)
	}
}

// requireNothingToAccept fails the test unless the listener has no
// connection for Accept, and holds none half set up or unconfirmed.
func requireNothingToAccept(t *testing.T, l *listener) {
	t.Helper()
	rc, err := l.Accept()
	if rc != nil || err != nil {
		t.Fatalf("Accept: %v, %v; want no connection", rc, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) != 0 || len(l.confirming) != 0 {
		t.Fatalf("listener holds %d half set up and %d unconfirmed connections, want none", len(l.pending), len(l.confirming))
	}
}

// TestConnectGivenUpBeforeAcceptanceIsDropped: a connect whose deadline
// passes after its last socket's hello reached the listener, which then
// completes the connection, and before the acceptance of that socket
// reaches the dialer has failed at the dialer; the listener drops the
// connection, logging the peer, instead of handing NCCL a comm whose
// sender is gone.
func TestConnectGivenUpBeforeAcceptanceIsDropped(t *testing.T) {
	b, l, g, settled := watchedListener(t, 5*time.Second)
	entered, proceed := make(chan struct{}), make(chan struct{})
	l.mu.Lock()
	l.answering = func(last bool) {
		if last {
			close(entered)
			<-proceed
		}
	}
	l.mu.Unlock()
	d, err := b.Dial(0, l.Handle())
	noErr(t, err)
	defer d.Abort()
	<-entered            // the listener holds the complete connection, unanswered
	d.(*dialer).cancel() // what the connect timeout does
	sc, err := stepUntilDone(t, d)
	if sc != nil || err == nil {
		t.Fatalf("connect interrupted before its last acceptance: %v, %v; want a failure", sc, err)
	}
	close(proceed) // the listener answers the last socket
	requireSettled(t, settled, false, "connect given up before its last acceptance")
	requireNothingToAccept(t, l)
	g.requireLine(t, "127.0.0.1:", "gave up", "dropped")
}

// TestAbortedConnectIsDropped: a connect aborted while the acceptances of
// its sockets are on their way (NCCL gave it up) takes none of them, and
// the listener, which completed the connection, drops it instead of
// handing it out.
func TestAbortedConnectIsDropped(t *testing.T) {
	b, l, _, settled := watchedListener(t, 5*time.Second)
	read, proceed := holdVerdicts(b, 2)
	d, err := b.Dial(0, l.Handle())
	noErr(t, err)
	<-read
	<-read // both sockets hold their acceptance
	dl := d.(*dialer)
	aborted := make(chan struct{})
	go func() { d.Abort(); close(aborted) }()
	backendtest.PollUntil(t, "abort begun", func() bool {
		dl.mu.Lock()
		defer dl.mu.Unlock()
		return dl.aborting
	})
	close(proceed)
	<-aborted
	requireSettled(t, settled, false, "aborted connect")
	requireNothingToAccept(t, l)
}

// TestUnconfirmedConnectionIsDropped: a complete connection whose dialer
// answers the acceptance with another byte than connConfirmed, or with
// nothing until twice the timeout, is dropped, logging the peer; one
// confirmed is handed out.
func TestUnconfirmedConnectionIsDropped(t *testing.T) {
	for _, tc := range []struct {
		name    string
		confirm []byte
		want    bool
		line    string
	}{
		{"confirmed", []byte{connConfirmed}, true, ""},
		{"other byte", []byte{0x7f}, false, "instead of a confirmation"},
		{"silent", nil, false, "did not confirm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, l, g, settled := watchedListener(t, 200*time.Millisecond)
			var h listenHandle
			_, err := parseListenHandle(&h, l.Handle())
			noErr(t, err)
			socks := acceptedSockets(t, h, 7)
			_, err = socks[0].Write(tc.confirm)
			noErr(t, err)
			requireSettled(t, settled, tc.want, tc.name)
			if !tc.want {
				requireNothingToAccept(t, l)
				g.requireLine(t, "127.0.0.1:", tc.line, "dropped")
				// The listener closed its side: the socket reads the end
				// of the stream (the deadline only turns a socket left
				// open into a failure instead of a hang).
				noErr(t, socks[1].SetReadDeadline(time.Now().Add(backendtest.Deadline)))
				if n, err := socks[1].Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
					t.Fatalf("socket of a dropped connection: read %d bytes, %v; want the end of the stream", n, err)
				}
				return
			}
			rc, err := l.Accept()
			noErr(t, err)
			if rc == nil {
				t.Fatal("confirmed connection not handed out")
			}
			noErr(t, rc.Close())
		})
	}
}

// TestCloseWhileQueueingLeavesNothing: a listener closed after a
// connection was confirmed and before it joined the Accept queue leaves no
// connection in the queue, open and owned by nobody. Close shuts the
// listener's done channel and drains the queue; the confirming goroutine's
// send then found both its cases ready, and half the time queued the
// connection after the drain. Sixteen rounds make that all but certain to
// show where the goroutine does not drain after such a send.
func TestCloseWhileQueueingLeavesNothing(t *testing.T) {
	for round := range 16 {
		b, l, _, settled := watchedListener(t, 5*time.Second)
		l.mu.Lock()
		l.queueing = func() { _ = l.Close() }
		l.mu.Unlock()
		d, err := b.Dial(0, l.Handle())
		noErr(t, err)
		sc, err := stepUntilDone(t, d)
		noErr(t, err)
		requireSettled(t, settled, true, fmt.Sprintf("round %d", round))
		if n := len(l.ready); n != 0 {
			t.Fatalf("round %d: %d connection(s) left in the closed listener's queue", round, n)
		}
		_ = sc.Close()
		d.Abort()
	}
}

// TestDropsLoggedOutsideLock: the lines for the half-assembled connections
// a listener drops reach Config.Logf after the listener's lock is
// released, so that NCCL's logger, however slow, holds up no other
// socket's hello or confirmation. Each line checks the lock as it is
// logged: no other goroutine takes it meanwhile, as the only socket in
// flight is the one whose hello runs the drops and which waits for its
// answer, written after them.
func TestDropsLoggedOutsideLock(t *testing.T) {
	var ln atomic.Pointer[listener]
	var mu sync.Mutex
	var lines, underLock int
	const timeout = 5 * time.Second
	b, err := New(Config{IfNames: "=lo", Socks: 2, Timeout: timeout, Logf: func(string, ...any) {
		held := !ln.Load().mu.TryLock()
		if !held {
			ln.Load().mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		lines++
		if held {
			underLock++
		}
	}})
	noErr(t, err)
	bl, err := b.Listen(0)
	noErr(t, err)
	t.Cleanup(func() { _ = bl.Close() })
	l := bl.(*listener)
	ln.Store(l)
	advance := fakeClock(l)
	var h listenHandle
	_, err = parseListenHandle(&h, l.Handle())
	noErr(t, err)
	for id := range uint64(3) {
		halfConn(t, h.Addr, h.Nonce, id+1)
	}
	advance(2*timeout + time.Millisecond)
	halfConn(t, h.Addr, h.Nonce, 4) // drops the three others
	mu.Lock()
	defer mu.Unlock()
	eq(t, 3, lines)
	eq(t, 0, underLock)
}

// TestAbortAfterConfirmFailsFirstReceive: a connect aborted after its
// last socket confirmed the connection, and before Step took it, leaves
// the listener a connection it hands out, as the confirmation had
// reached it; that comm's first receive fails, naming the peer, instead
// of waiting for a sender that is gone. NCCL abandoned the connect, so
// nothing else is owed.
func TestAbortAfterConfirmFailsFirstReceive(t *testing.T) {
	b, l, _, settled := watchedListener(t, 5*time.Second)
	d, err := b.Dial(0, l.Handle())
	noErr(t, err)
	requireSettled(t, settled, true, "confirmed connect")
	d.Abort()
	rc, err := l.Accept()
	noErr(t, err)
	if rc == nil {
		t.Fatal("a confirmed connection was not handed out")
	}
	defer rc.Close()
	r, err := rc.Irecv([][]byte{make([]byte, 4)}, []int32{1})
	noErr(t, err)
	backendtest.PollUntil(t, "receive from an aborted sender", func() bool {
		_, err = r.Test(nil)
		return err != nil
	})
	if !errors.Is(err, backend.ErrRemote) || !strings.Contains(err.Error(), "127.0.0.1:") {
		t.Fatalf("first receive from an aborted sender: %v; want ErrRemote naming the peer", err)
	}
}

// acceptedSockets opens every socket of connection id to the listener of
// h as a dialer does, and returns them once the listener accepted each;
// the caller confirms the connection, or not.
func acceptedSockets(t *testing.T, h listenHandle, id uint64) []*net.TCPConn {
	t.Helper()
	var socks []*net.TCPConn
	for i := range h.Socks {
		c, v := helloSocket(t, h.Addr, hello{Index: i, Socks: h.Socks, Nonce: h.Nonce, ConnID: id})
		eq(t, helloAccepted, v)
		socks = append(socks, c)
	}
	return socks
}

// TestConfirmDeadlineCleared: the read deadline that bounds the wait for a
// connection's confirmation (twice the connect timeout) is cleared once
// the confirmation is read, so that a message sent well after it, on the
// socket that waited, still arrives. The sleep only lets that deadline
// pass; nothing waits on it.
func TestConfirmDeadlineCleared(t *testing.T) {
	_, l, _, settled := watchedListener(t, 100*time.Millisecond)
	b, err := New(Config{IfNames: "=lo", Socks: 2, Timeout: 5 * time.Second})
	noErr(t, err)
	d, err := b.Dial(0, l.Handle())
	noErr(t, err)
	defer d.Abort()
	sc, err := stepUntilDone(t, d)
	noErr(t, err)
	defer sc.Close()
	requireSettled(t, settled, true, "confirmed connect")
	rc, err := l.Accept()
	noErr(t, err)
	defer rc.Close()
	time.Sleep(500 * time.Millisecond) // past the 200 ms the confirmation could take
	buf := make([]byte, 5)
	r, err := rc.Irecv([][]byte{buf}, []int32{7})
	noErr(t, err)
	s, err := sc.Isend([]byte("hello"), 7) // message 0 goes on socket 0, whose deadline it was
	noErr(t, err)
	backendtest.Wait(t, s, nil)
	backendtest.Wait(t, r, nil)
	eq(t, "hello", string(buf))
}

// TestConfirmTakesOneByte: the listener reads exactly the confirmation's
// byte, so that a first message that follows it in the same segment
// arrives whole.
func TestConfirmTakesOneByte(t *testing.T) {
	_, l, _, settled := watchedListener(t, 5*time.Second)
	var h listenHandle
	_, err := parseListenHandle(&h, l.Handle())
	noErr(t, err)
	socks := acceptedSockets(t, h, 5)
	segment, err := (&frameHeader{Tag: 3, Size: 5}).Append([]byte{connConfirmed})
	noErr(t, err)
	_, err = socks[0].Write(append(segment, "hello"...))
	noErr(t, err)
	requireSettled(t, settled, true, "confirmed with the first message")
	rc, err := l.Accept()
	noErr(t, err)
	defer rc.Close()
	buf := make([]byte, 5)
	r, err := rc.Irecv([][]byte{buf}, []int32{3})
	noErr(t, err)
	backendtest.Wait(t, r, nil)
	eq(t, "hello", string(buf))
}
