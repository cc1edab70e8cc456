package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/conformance/control"
	"github.com/stretchr/testify/require"
)

// helperEnv names the scripted control side the test binary plays when it
// is started as an IUT process (see helperIUT).
const helperEnv = "CONFORMANCE_HELPER_IUT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperIUT(mode))
	}
	os.Exit(m.Run())
}

// helperIUT speaks the control side of the contract badly, as mode says;
// it has no datapath. listen is answered with an address where nothing
// listens, except in mode long.
//
//	echo     every other request fails with the request line as its error
//	badcomp  completions reports a receive whose buffer is not hex
//	long     the reply to listen is 100 bytes long
//	crash    exits at the first request after listen
//	silent   reads its requests and never answers
//	late     refuses completions until accept, then reports one receive
//	exit     exits with status 1 before reading anything
func helperIUT(mode string) int {
	if mode == "exit" {
		return 1
	}
	sc := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	reply := func(r control.Reply) {
		out.Write(r.Format())
		out.WriteByte('\n')
		out.Flush()
	}
	accepted, reported := false, false
	for sc.Scan() {
		req, err := control.ParseRequest(sc.Text())
		switch {
		case mode == "silent":
		case err != nil:
			reply(control.Fail(err))
		case mode == "long" && req.Cmd == control.CmdListen:
			reply(control.Reply{OK: true, Addr: "127.0.0.1:9", Error: strings.Repeat("x", 60)})
		case req.Cmd == control.CmdListen:
			reply(control.Reply{OK: true, Addr: "127.0.0.1:9"})
		case req.Cmd == control.CmdQuit:
			reply(control.Reply{OK: true})
			return 0
		case mode == "crash":
			return 3
		case mode == "badcomp" && req.Cmd == control.CmdCompletions:
			out.WriteString(`{"ok":true,"completions":[{"id":1,"op":"recv","flow":6,"error":"x","bufs":["a5zz"]}]}` + "\n")
			out.Flush()
		case mode == "badcomp":
			reply(control.Reply{OK: true, ID: 1})
		case mode == "late" && req.Cmd == control.CmdAccept:
			accepted = true
			reply(control.Reply{OK: true, Conn: 1})
		case mode == "late" && req.Cmd == control.CmdCompletions && !accepted:
			reply(control.Fail(fmt.Errorf("no accepted connection")))
		case mode == "late" && req.Cmd == control.CmdCompletions && !reported:
			reported = true
			reply(control.Reply{OK: true, Completions: []control.Completion{{ID: 1, Op: control.OpRecv, Flow: 6, Sizes: []int{1}, Bufs: []string{"a5"}}}})
		case mode == "late" && req.Cmd == control.CmdCompletions:
			reply(control.Reply{OK: true})
		default:
			reply(control.Fail(fmt.Errorf("%s", sc.Text())))
		}
	}
	return 0
}

// defaultLimits are StartProcess's.
var defaultLimits = processLimits{maxLine: control.MaxLine, listenWait: listenWait}

// startHelper starts the test binary as a scripted IUT process.
func startHelper(t *testing.T, mode string, lim processLimits) (*ProcessIUT, error) {
	t.Helper()
	t.Setenv(helperEnv, mode)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := startProcess(ctx, []string{os.Args[0], "-test.run=^$"}, os.Stderr, lim)
	if p != nil {
		t.Cleanup(func() { p.Close() })
	}
	return p, err
}

// TestAcceptLeavesTimeToAnswer: the IUT is asked to wait for a connection
// for at most half the time the tester waits for its reply. An IUT that
// honours the wait and refuses the accept at its end then answers while
// the tester still listens; asked for the whole remaining time, its answer
// raced the tester's deadline, lost, and left every later case failing on
// a control channel taken for broken.
func TestAcceptLeavesTimeToAnswer(t *testing.T) {
	p, err := startHelper(t, "echo", defaultLimits)
	require.NoError(t, err)
	for _, left := range []time.Duration{400 * time.Millisecond, 10 * time.Second, 5 * time.Minute} {
		ctx, cancel := context.WithTimeout(context.Background(), left)
		d, _ := ctx.Deadline()
		before := time.Until(d) // no more is left when Accept looks
		err := p.Accept(ctx)
		cancel()
		require.Error(t, err)
		ms, ok := strings.CutPrefix(err.Error(), "IUT: accept ")
		require.True(t, ok, "%v", err)
		n, err := strconv.Atoi(ms)
		require.NoError(t, err)
		asked := time.Duration(n) * time.Millisecond
		require.Positive(t, asked)
		require.LessOrEqual(t, 2*asked, before, "asked for %v with %v left", asked, before)
	}
	// The refusals left the pipe in step.
	_, err = p.Counters(context.Background())
	require.EqualError(t, err, "IUT: counters")
}

// TestReplyLineTooLong: a reply line over the limit is named as such; it
// was reported as the IUT closing its stdout.
func TestReplyLineTooLong(t *testing.T) {
	_, err := startHelper(t, "long", processLimits{maxLine: 64, listenWait: listenWait})
	require.ErrorContains(t, err, "longer than 64 bytes")
	require.NotContains(t, err.Error(), "closed its stdout")
}

// TestSilentProcess: an IUT process that never answers listen fails to
// start within the listen bound, however long the run may take (the
// tester waited for the run's whole timeout, two minutes by default).
func TestSilentProcess(t *testing.T) {
	_, err := startHelper(t, "silent", processLimits{maxLine: control.MaxLine, listenWait: 50 * time.Millisecond})
	require.ErrorContains(t, err, `IUT did not answer "listen"`)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestCrashNamed: an IUT process that exits mid-run fails the request
// with a reason, and Close reports its exit status.
func TestCrashNamed(t *testing.T) {
	p, err := startHelper(t, "crash", defaultLimits)
	require.NoError(t, err)
	err = p.PostRecv(context.Background(), 1, []uint64{16}, []uint32{1})
	// Whichever request met the crash (the poller's completions, most
	// likely), the channel's error says that the process exited, and how:
	// it said the IUT closed its stdout, or named the broken pipe to its
	// stdin, as if the process might still be there.
	require.ErrorContains(t, err, "the IUT process exited (exit status 3) before")
	require.ErrorContains(t, p.ControlErr(), "the IUT process exited (exit status 3) before")
	// Cases that need a connection fail at once, naming the channel, not
	// after a handshake with a process that is gone.
	rs := Run(context.Background(), p, []*Case{{ID: "close", Level: Mandatory, Run: caseClose}}, 1)
	require.Equal(t, Fail, rs[0].Verdict)
	require.True(t, strings.HasPrefix(rs[0].Evidence, "setup: the IUT's control channel failed: "), rs[0].Evidence)
	require.NotContains(t, rs[0].Evidence, "HELLO_ACK")
	require.ErrorContains(t, p.Close(), "exit status 3")
	require.ErrorContains(t, p.Close(), "exit status 3", "Close again reports the same")
}

// TestExitBeforeListen: a program that exits at once fails to start as an
// IUT with its exit status named, not as an IUT that closed its stdout.
func TestExitBeforeListen(t *testing.T) {
	_, err := startHelper(t, "exit", defaultLimits)
	require.ErrorContains(t, err, "the IUT process exited (exit status 1) before")
	require.ErrorContains(t, err, `"listen"`)
}

// TestExitStatusOnceReaped: a process already reaped is named by its exit
// status whatever the request's context, done or not: the wait for the
// reaping is bounded by the context, but what is known already is said.
// With both ready the choice between them was Go's random select, so a
// request whose context had ended reported "still running" by chance.
func TestExitStatusOnceReaped(t *testing.T) {
	p := &ProcessIUT{exited: make(chan struct{}), exitErr: errors.New("exit status 3")}
	close(p.exited)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for range 64 {
		require.Equal(t, "exit status 3", p.exitStatus(done))
	}
	require.Equal(t, "exit status 3", p.exitStatus(context.Background()))
}

// TestControlErrorInEvidence: a case that fails while the control channel
// broke (a completions reply that is garbage, here) says so in its
// evidence, not only that what it waited for never came.
func TestControlErrorInEvidence(t *testing.T) {
	p, err := startHelper(t, "badcomp", defaultLimits)
	require.NoError(t, err)
	waits := &Case{ID: "waits", Level: Mandatory, NeedsControl: true, Run: func(ctx context.Context, e *Env) (Verdict, string) {
		if err := e.IUT.PostRecv(ctx, 6, []uint64{16}, []uint32{7}); err != nil {
			return Fail, "post receive: " + err.Error()
		}
		// Until the poller has read the garbage reply.
		require.Eventually(t, func() bool { return p.ControlErr() != nil }, 20*time.Second, time.Millisecond)
		return Fail, "receive did not complete"
	}}
	rs := Run(context.Background(), p, []*Case{waits}, 1)
	require.Equal(t, Fail, rs[0].Verdict)
	require.Contains(t, rs[0].Evidence, "receive did not complete")
	require.Contains(t, rs[0].Evidence, "bufs[0] is not hex")
	// Garbage is not a refusal: the broken channel is named once, as
	// such, not also as completions the IUT refused.
	require.NotContains(t, rs[0].Evidence, "refused", rs[0].Evidence)
	require.Equal(t, 1, strings.Count(rs[0].Evidence, "bufs[0] is not hex"), rs[0].Evidence)
	var b bytes.Buffer
	WriteTAP(&b, rs)
	require.Contains(t, b.String(), "not ok 1 - waits")
}

// TestCompletionsRefusedBeforeAccept: an IUT that refuses completions
// while it has no connection (as it refuses counters or close then) still
// has its completions delivered once it accepted one, and a case that
// fails while they are refused says so. The first refusal stopped polling
// for good, and every later receive and send was reported as never
// completing, blamed on the datapath.
func TestCompletionsRefusedBeforeAccept(t *testing.T) {
	p, err := startHelper(t, "late", defaultLimits)
	require.NoError(t, err)
	// Until the poller has had its refusal.
	require.Eventually(t, func() bool { return p.completionsErr() != nil }, 20*time.Second, time.Millisecond)
	// A case failing meanwhile names the refusal.
	waits := &Case{ID: "waits", Level: Mandatory, NeedsControl: true, Run: func(context.Context, *Env) (Verdict, string) {
		return Fail, "receive did not complete"
	}}
	rs := Run(context.Background(), p, []*Case{waits}, 1)
	require.Contains(t, rs[0].Evidence, "refused the latest completions request: IUT: no accepted connection")
	require.NoError(t, p.Accept(context.Background()))
	select {
	case c := <-p.Completions():
		require.Equal(t, uint32(6), c.Flow)
	case <-time.After(20 * time.Second):
		t.Fatal("no completion delivered after accept")
	}
	require.NoError(t, p.ControlErr())
}

// TestCompletionsRefusedBackoff: while the IUT refuses completions the
// poller waits twice as long after each refusal, up to pollRefusedMax, and
// the first answered request brings it back to pollCompletions. It asked
// every 5 ms for the whole run, 200 requests a second to an IUT that
// refuses them all. The test stands in for the poller's timer, so each
// wait is seen and ended by the test, one completions request at a time.
func TestCompletionsRefusedBackoff(t *testing.T) {
	waits, tick, done := make(chan time.Duration), make(chan time.Time), make(chan struct{})
	lim := defaultLimits
	lim.pollWait = func(d time.Duration) <-chan time.Time {
		select {
		case waits <- d:
		case <-done:
		}
		return tick
	}
	p, err := startHelper(t, "late", lim)
	require.NoError(t, err)
	t.Cleanup(func() { close(done) }) // before Close: the poller must not wait on the test
	next := func() time.Duration {
		select {
		case d := <-waits:
			return d
		case <-time.After(20 * time.Second):
			t.Fatal("the poller did not wait for its next request")
			return 0
		}
	}
	// Mode late refuses completions until accept: one request per wait.
	var got []time.Duration
	for i := 0; i < 9; i++ {
		got = append(got, next())
		tick <- time.Time{}
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 200 * ms, 200 * ms, 200 * ms}, got)
	require.Equal(t, 200*ms, next())
	require.Error(t, p.completionsErr(), "every request so far was refused")
	require.NoError(t, p.Accept(context.Background()))
	tick <- time.Time{}
	require.Equal(t, pollCompletions, next(), "answered: back to the short wait")
	require.NoError(t, p.completionsErr())
	select {
	case c := <-p.Completions():
		require.Equal(t, uint32(6), c.Flow)
	default:
		t.Fatal("the answered request's completion was not delivered")
	}
}
