package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/conformance/control"
	"github.com/metaroce/metaroce/transport/udp"
	"github.com/stretchr/testify/require"
)

// TestScript feeds a request script and checks one reply line per request,
// each with the expected outcome.
func TestScript(t *testing.T) {
	script := []struct {
		req string
		ok  bool
	}{
		{"accept 10", false}, // listen first
		{"listen", true},
		{"listen", false}, // already listening
		{"post-recv 1 16 1", false},
		{"accept 50", false}, // nobody dials
		{"completions", true},
		{"frobnicate", false},
		{"send 1 zz 1", false},
		{"quit", true},
		{"listen", true}, // after quit: never read
	}
	var in bytes.Buffer
	for _, s := range script {
		in.WriteString(s.req + "\n")
	}
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"--seed", "3"}, &in, &out, &errb))
	sc := bufio.NewScanner(&out)
	n := 0
	for sc.Scan() {
		rep, err := control.ParseReply(sc.Bytes())
		require.NoError(t, err)
		require.Equal(t, script[n].ok, rep.OK, "%q → %s", script[n].req, sc.Text())
		if script[n].req == "listen" && rep.OK {
			require.True(t, strings.HasPrefix(rep.Addr, "127.0.0.1:"))
		}
		n++
	}
	require.Equal(t, len(script)-1, n, "one reply per request up to quit")
}

// TestErrorsNameTheAddress: an accept that times out names the address
// the tester was to dial and how long it waited, and a second listen or a
// failed one names its address. They read "mrpeer: accept: context
// deadline exceeded", "mrpeer: already listening" and the datapath's
// socket error alone.
func TestErrorsNameTheAddress(t *testing.T) {
	s := newServer(3, io.Discard)
	defer s.shutdown()
	do := func(line string) control.Reply {
		req, err := control.ParseRequest(line)
		require.NoError(t, err, line)
		return s.do(context.Background(), req)
	}
	l := do("listen")
	require.True(t, l.OK, l.Error)
	rep := do("accept 50")
	require.False(t, rep.OK)
	require.Equal(t, "mrpeer: accept on "+l.Addr+": no connection within 50ms", rep.Error)
	rep = do("listen")
	require.Equal(t, "mrpeer: already listening on "+l.Addr, rep.Error)

	// 192.0.2.1 (TEST-NET-1) is no address of this host.
	s2 := newServer(3, io.Discard)
	defer s2.shutdown()
	req, err := control.ParseRequest("listen 192.0.2.1")
	require.NoError(t, err)
	rep = s2.do(context.Background(), req)
	require.False(t, rep.OK)
	require.True(t, strings.HasPrefix(rep.Error, "mrpeer: listen on 192.0.2.1: "), rep.Error)
}

// TestTesterGoneStopsAccept: the end of the requests while an accept
// waits (the tester exited, or closed its end of the pipe) stops the
// accept at once, with a reply that says why, and mrpeer exits 0 as at any
// end of its input. Before, the accept waited out its timeout, here a
// minute, with nobody left to dial or to read the reply.
func TestTesterGoneStopsAccept(t *testing.T) {
	var out, errb bytes.Buffer
	exited := make(chan int, 1)
	go func() { exited <- run(nil, strings.NewReader("listen\naccept 60000\n"), &out, &errb) }()
	select {
	case code := <-exited:
		require.Equal(t, exitOK, code, errb.String())
	case <-time.After(30 * time.Second): // half the accept's timeout: it was not stopped
		t.Fatal("mrpeer still waits for a connection after the tester's requests ended")
	}
	sc := bufio.NewScanner(&out)
	var reps []control.Reply
	for sc.Scan() {
		rep, err := control.ParseReply(sc.Bytes())
		require.NoError(t, err)
		reps = append(reps, rep)
	}
	require.Len(t, reps, 2)
	require.True(t, reps[0].OK, reps[0].Error)
	require.False(t, reps[1].OK)
	require.Equal(t, "mrpeer: accept on "+reps[0].Addr+": stopped waiting: "+errInputEnded.Error(), reps[1].Error)
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, exitUsage, run([]string{"--bogus"}, strings.NewReader(""), &out, &errb))
	require.Equal(t, exitUsage, run([]string{"extra"}, strings.NewReader(""), &out, &errb))
	for _, h := range []string{"-h", "--help"} {
		out.Reset()
		errb.Reset()
		require.Equal(t, exitOK, run([]string{h}, strings.NewReader(""), &out, &errb), h)
		require.Contains(t, out.String(), "Exit status:", h)
		require.Empty(t, errb.String(), h)
	}
}

// repeatReader yields n copies of one byte without holding them.
type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = r.b
	}
	r.n -= k
	return k, nil
}

// replies runs mrpeer on in and returns its exit status and reply lines.
func replies(t *testing.T, in io.Reader) (int, []control.Reply) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(nil, in, &out, &errb)
	var reps []control.Reply
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		rep, err := control.ParseReply(sc.Bytes())
		require.NoError(t, err)
		reps = append(reps, rep)
	}
	return code, reps
}

// TestOverlongLine: a request line longer than control.MaxLine gets an
// error reply, and the requests after it are served as usual. Before,
// the process ended with status 1 and no reply.
func TestOverlongLine(t *testing.T) {
	in := io.MultiReader(strings.NewReader("listen\n"), &repeatReader{'x', control.MaxLine + 1},
		strings.NewReader("\ncompletions\nquit\n"))
	code, reps := replies(t, in)
	require.Equal(t, exitOK, code)
	require.Len(t, reps, 4)
	require.True(t, reps[0].OK)
	require.False(t, reps[1].OK)
	require.Contains(t, reps[1].Error, "longer than")
	require.True(t, reps[2].OK, "completions after the long line: %+v", reps[2])
	require.True(t, reps[3].OK)
}

// TestLineLimit pins the limit: max bytes before the newline are a
// request (here an unknown one), one more is too long, a carriage return
// counts, and a last line without a newline is still one.
func TestLineLimit(t *testing.T) {
	const max = 16
	s := newServer(1, io.Discard)
	s.maxLine = max
	defer s.shutdown()
	x := func(n int) string { return strings.Repeat("x", n) }
	in := x(max) + "\n" + x(max+1) + "\n" + x(max-1) + "\r\n" + x(max) + "\r\n" + "\n" + x(max+1)
	var out bytes.Buffer
	require.NoError(t, s.serve(strings.NewReader(in), &out))
	var errs []string
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		rep, err := control.ParseReply([]byte(line))
		require.NoError(t, err)
		require.False(t, rep.OK)
		errs = append(errs, rep.Error)
	}
	require.Len(t, errs, 6)
	for i, long := range []bool{false, true, false, true, false, true} {
		require.Equal(t, long, strings.Contains(errs[i], "longer than"), "line %d: %s", i, errs[i])
	}
}

// TestRepliesFitALine: every reply line stays within the line limit of the
// contract (the server's maxLine, small here). A receive whose completion
// could not fit is refused when posted; completions that do not fit one
// reply together are reported over several calls. Before, two completed
// receives went out in one reply over the limit, which the tester reads
// as a broken control channel.
func TestRepliesFitALine(t *testing.T) {
	s := newServer(1, io.Discard)
	s.maxLine = 4096
	defer s.shutdown()
	do := func(line string) control.Reply {
		t.Helper()
		req, err := control.ParseRequest(line)
		require.NoError(t, err)
		rep := s.do(context.Background(), req)
		require.LessOrEqual(t, len(rep.Format()), s.maxLine, "%s: %s", line, rep.Format())
		return rep
	}
	rep := do("listen")
	require.True(t, rep.OK, rep.Error)
	client, err := udp.Listen(udp.Config{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Seed: 2})
	require.NoError(t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		_, err := client.Dial(ctx, []netip.AddrPort{netip.MustParseAddrPort(rep.Addr)})
		dialed <- err
	}()
	require.True(t, do("accept 10000").OK)
	require.NoError(t, <-dialed)

	rep = do("post-recv 1 1200 1")
	require.False(t, rep.OK)
	require.Contains(t, rep.Error, "reply line")
	require.True(t, do("post-recv 1 1000 1").OK)
	require.True(t, do("post-recv 2 1000 2").OK)
	require.True(t, do("close").OK) // fails both receives, buffers in full
	s.wg.Wait()                     // both completions recorded
	var got []control.Completion
	for calls := 0; len(got) < 2; calls++ {
		require.Less(t, calls, 3)
		rep := do("completions")
		require.True(t, rep.OK)
		got = append(got, rep.Completions...)
	}
	var flows []uint32
	for _, c := range got {
		flows = append(flows, c.Flow)
		require.Len(t, c.Bufs, 1)
		require.Len(t, c.Bufs[0], 2000)
		require.NotEmpty(t, c.Error)
	}
	require.ElementsMatch(t, []uint32{1, 2}, flows)
	require.Empty(t, do("completions").Completions)
}

// TestDocumentedAcceptDefault: the control contract in docs/conformance.md
// says what accept 0 (or accept with no timeout) waits in mrpeer, so that
// an author of another IUT's control side, or of a script, knows the wait
// without reading this code.
func TestDocumentedAcceptDefault(t *testing.T) {
	doc, err := os.ReadFile("../../docs/conformance.md")
	require.NoError(t, err)
	var row string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "| `accept ") {
			row = l
		}
	}
	require.NotEmpty(t, row, "docs/conformance.md has no row for accept in the control contract")
	require.Contains(t, row, "0 or none means the IUT's own default")
	require.Contains(t, row, fmt.Sprintf("(mrpeer: %v)", defaultAccept), "the row names mrpeer's default, defaultAccept")
}
