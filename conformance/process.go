package conformance

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/metaroce/metaroce/conformance/control"
)

// pollCompletions is how often a ProcessIUT asks for completions.
const pollCompletions = 5 * time.Millisecond

// pollRefusedMax bounds the wait between completions requests while the
// IUT refuses them: each refusal in a row doubles the wait, from
// pollCompletions up to this. An IUT that refuses completions for the
// whole run (one that has no connection, or does not implement the
// request) is then asked a few times a second, not 200 times, each
// request filling its log; the first answered request brings the wait
// back to pollCompletions.
const pollRefusedMax = 200 * time.Millisecond

// processQuit bounds the wait for an IUT process to exit after quit, and
// for its stderr to be copied after it exited (a child it started may hold
// that open).
const processQuit = 3 * time.Second

// exitWait bounds the wait for an IUT process to be reaped once it closed
// its stdout or stdin: a process that does so is almost always exiting, and
// its exit status is what the control channel's error should name.
const exitWait = time.Second

// listenWait bounds the wait for the reply to the first request, listen:
// an IUT process that never answers (one that does not flush its stdout,
// say) is reported then, not when the whole run's time is spent.
const listenWait = 10 * time.Second

// processLimits are the bounds a ProcessIUT holds its process to.
type processLimits struct {
	maxLine    int           // longest reply line, bytes
	listenWait time.Duration // longest wait for the reply to listen
	// pollWait returns a channel that delivers once the poller has
	// waited d before its next completions request; nil: a timer.
	pollWait func(d time.Duration) <-chan time.Time
}

// acceptWait is the longest an IUT process is asked to wait for a
// connection: the tester has completed the handshake when it asks, so the
// connection is there at once in an IUT that conforms.
const acceptWait = 5 * time.Second

// ProcessIUT drives an implementation under test running as a separate
// process that speaks the control contract of package control on its stdin
// and stdout. Requests are serialised; a goroutine polls completions and
// delivers them on Completions.
type ProcessIUT struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   *os.File      // the read end of the process's stdout, closed by Close
	lines    chan []byte   // reply lines, closed when stdout ends
	readErr  error         // why the lines ended early, set before lines closes
	exited   chan struct{} // closed once the process was reaped
	exitErr  error         // cmd.Wait's result, set before exited closes
	done     chan struct{} // closed when Close is done: nobody reads lines any more
	maxLine  int           // longest reply line, bytes
	pollWait func(time.Duration) <-chan time.Time
	addr     netip.AddrPort
	comps    chan Completion
	stop     chan struct{}
	wg       sync.WaitGroup
	closed   sync.Once
	closeErr error

	mu sync.Mutex // one request at a time

	bmu     sync.Mutex
	broken  error // set once the process stopped answering in step
	refused error // the latest refusal of completions, nil once one is answered
}

// StartProcess starts argv (program and arguments), asks it to listen on
// 127.0.0.1 and returns it ready for the suite. stderr receives the
// process's diagnostics (nil discards them).
func StartProcess(ctx context.Context, argv []string, stderr io.Writer) (*ProcessIUT, error) {
	return startProcess(ctx, argv, stderr, processLimits{maxLine: control.MaxLine, listenWait: listenWait})
}

// startProcess is StartProcess with the given limits.
func startProcess(ctx context.Context, argv []string, stderr io.Writer, lim processLimits) (*ProcessIUT, error) {
	maxLine := lim.maxLine
	if len(argv) == 0 {
		return nil, errors.New("conformance: empty IUT command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	cmd.WaitDelay = processQuit
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own rather than StdoutPipe, which Wait closes: the
	// process is reaped as soon as it exits, so that its exit status can
	// explain a broken control channel, while its last replies are still
	// read.
	out, outW, err := os.Pipe()
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("conformance: IUT stdout pipe: %w", err)
	}
	cmd.Stdout = outW
	err = cmd.Start()
	outW.Close() // the process has its copy
	if err != nil {
		in.Close()
		out.Close()
		return nil, fmt.Errorf("conformance: start IUT %q: %w", argv[0], err)
	}
	p := &ProcessIUT{cmd: cmd, stdin: in, stdout: out, lines: make(chan []byte, 4), exited: make(chan struct{}),
		done: make(chan struct{}), maxLine: maxLine, pollWait: lim.pollWait, comps: make(chan Completion, 256), stop: make(chan struct{})}
	if p.pollWait == nil {
		p.pollWait = time.After
	}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		// A token may be as long as the buffer's capacity or max,
		// whichever is larger; the line proper excludes its newline.
		sc.Buffer(make([]byte, 0, min(64<<10, maxLine)), maxLine+1)
		for sc.Scan() {
			if len(sc.Bytes()) > maxLine {
				p.readErr = bufio.ErrTooLong
				return
			}
			select {
			case p.lines <- append([]byte(nil), sc.Bytes()...):
			case <-p.done:
				return
			}
		}
		p.readErr = sc.Err()
	}()
	lctx, cancel := context.WithTimeout(ctx, lim.listenWait)
	rep, err := p.request(lctx, control.Request{Cmd: control.CmdListen, IP: "127.0.0.1"})
	cancel()
	if err == nil {
		p.addr, err = netip.ParseAddrPort(rep.Addr)
		if err != nil {
			err = fmt.Errorf("conformance: IUT listen address %q: %v", rep.Addr, err)
		}
	}
	if err != nil {
		p.kill()
		return nil, err
	}
	p.wg.Add(1)
	go p.poll()
	return p, nil
}

// request sends one line and waits for its reply within ctx. A reply that
// does not come in time leaves the pipe out of step, so the IUT is then
// treated as broken.
func (p *ProcessIUT) request(ctx context.Context, r control.Request) (control.Reply, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ControlErr(); err != nil {
		return control.Reply{}, err
	}
	if _, err := io.WriteString(p.stdin, r.String()+"\n"); err != nil {
		if exit := p.exitStatus(ctx); exit != "" {
			return control.Reply{}, p.fail(fmt.Errorf("conformance: the IUT process exited (%s) before %q could be sent to it", exit, r.Cmd))
		}
		return control.Reply{}, p.fail(fmt.Errorf("conformance: IUT stdin: %w", err))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	select {
	case line, ok := <-p.lines:
		if !ok {
			switch {
			case errors.Is(p.readErr, bufio.ErrTooLong):
				return control.Reply{}, p.fail(fmt.Errorf("conformance: IUT reply to %q longer than %d bytes", r.Cmd, p.maxLine))
			case p.readErr != nil:
				return control.Reply{}, p.fail(fmt.Errorf("conformance: reading the IUT's stdout: %w", p.readErr))
			}
			if exit := p.exitStatus(ctx); exit != "" {
				return control.Reply{}, p.fail(fmt.Errorf("conformance: the IUT process exited (%s) before answering %q", exit, r.Cmd))
			}
			return control.Reply{}, p.fail(fmt.Errorf("conformance: IUT closed its stdout, still running, before answering %q", r.Cmd))
		}
		rep, err := control.ParseReply(line)
		if err != nil {
			return rep, p.fail(fmt.Errorf("conformance: IUT reply to %q: %w", r.Cmd, err))
		}
		if !rep.OK {
			return rep, fmt.Errorf("IUT: %s", rep.Error)
		}
		return rep, nil
	case <-ctx.Done():
		return control.Reply{}, p.fail(fmt.Errorf("conformance: IUT did not answer %q: %w", r.Cmd, ctx.Err()))
	}
}

// exitStatus waits up to exitWait, and no longer than ctx, for the process
// to be reaped and says how it ended ("exit status 3", "signal: killed");
// "" when it is still running. A process already reaped is named even
// when ctx is done: a select with both ready would pick either.
func (p *ProcessIUT) exitStatus(ctx context.Context) string {
	select {
	case <-p.exited:
	default:
		t := time.NewTimer(exitWait)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			return ""
		case <-ctx.Done():
			return ""
		}
	}
	if p.exitErr == nil {
		return "exit status 0"
	}
	return p.exitErr.Error()
}

// fail marks the control channel broken with err, unless it already is,
// and returns the error every later request gets.
func (p *ProcessIUT) fail(err error) error {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	if p.broken == nil {
		p.broken = err
	}
	return p.broken
}

// ControlErr reports why the control channel stopped working (the process
// exited, did not answer in time, or answered what is not a reply), or nil
// while it works. Run names it in the evidence of a case that fails.
func (p *ProcessIUT) ControlErr() error {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	return p.broken
}

// completionsErr is the IUT's latest refusal of completions, or nil when
// its latest answer was a list.
func (p *ProcessIUT) completionsErr() error {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	return p.refused
}

// poll asks for completions until Close or until the control channel
// breaks, every pollCompletions, or less often while they are refused
// (nextPoll).
func (p *ProcessIUT) poll() {
	defer p.wg.Done()
	wait := pollCompletions
	for {
		select {
		case <-p.stop:
			return
		case <-p.pollWait(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := p.request(ctx, control.Request{Cmd: control.CmdCompletions})
		cancel()
		// A refusal leaves the pipe in step: an IUT may refuse
		// completions while it has no connection yet, as it refuses
		// counters, and report them once it has one. Only a broken
		// channel ends the polling; its error is no refusal (Run names
		// it as the channel's).
		if p.ControlErr() != nil {
			return
		}
		p.bmu.Lock()
		p.refused = err
		p.bmu.Unlock()
		wait = nextPoll(wait, err != nil)
		if err != nil {
			continue
		}
		for _, c := range rep.Completions {
			comp := Completion{Flow: c.Flow, Sizes: c.Sizes, Err: c.Error, Send: c.Op == control.OpSend}
			for _, h := range c.Bufs {
				b, _ := hex.DecodeString(h) // ParseReply refused a reply with a buffer that is not hex
				comp.Bufs = append(comp.Bufs, b)
			}
			select {
			case p.comps <- comp:
			case <-p.stop:
				return
			}
		}
	}
}

// nextPoll is the wait before the next completions request after one
// that waited wait and was refused or answered: doubled up to
// pollRefusedMax after a refusal, pollCompletions after an answer.
func nextPoll(wait time.Duration, refused bool) time.Duration {
	if !refused {
		return pollCompletions
	}
	return min(2*wait, pollRefusedMax)
}

// ListenAddr implements IUT.
func (p *ProcessIUT) ListenAddr() netip.AddrPort { return p.addr }

// Accept implements IUT. The process is asked to wait at most half the
// time left before ctx ends (and at most acceptWait): one that refuses the
// accept at the end of its wait must have time to say so before the tester
// gives up on the reply, which would leave the pipe out of step and every
// later request failing.
func (p *ProcessIUT) Accept(ctx context.Context) error {
	r := control.Request{Cmd: control.CmdAccept, Timeout: acceptWait}
	if d, ok := ctx.Deadline(); ok {
		r.Timeout = min(time.Until(d)/2, acceptWait).Truncate(time.Millisecond)
		if r.Timeout <= 0 {
			return fmt.Errorf("conformance: no time left to accept: %w", context.DeadlineExceeded)
		}
	}
	_, err := p.request(ctx, r)
	return err
}

// PostRecv implements IUT.
func (p *ProcessIUT) PostRecv(ctx context.Context, flow uint32, caps []uint64, tags []uint32) error {
	_, err := p.request(ctx, control.Request{Cmd: control.CmdPostRecv, Flow: flow, Caps: caps, Tags: tags})
	return err
}

// Send implements IUT.
func (p *ProcessIUT) Send(ctx context.Context, flow uint32, data []byte, tag uint32) error {
	_, err := p.request(ctx, control.Request{Cmd: control.CmdSend, Flow: flow, Data: data, Tags: []uint32{tag}})
	return err
}

// Completions implements IUT.
func (p *ProcessIUT) Completions() <-chan Completion { return p.comps }

// Counters returns the IUT's counters of its current connection.
func (p *ProcessIUT) Counters(ctx context.Context) (map[string]uint64, error) {
	rep, err := p.request(ctx, control.Request{Cmd: control.CmdCounters})
	return rep.Counters, err
}

// Close asks the process to quit, waits for it within a bound and kills it
// otherwise. Later calls return what the first did.
func (p *ProcessIUT) Close() error {
	p.closed.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

func (p *ProcessIUT) close() error {
	close(p.stop)
	p.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), processQuit)
	defer cancel()
	p.request(ctx, control.Request{Cmd: control.CmdQuit})
	p.stdin.Close()
	defer p.release()
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(processQuit):
		p.cmd.Process.Kill()
		<-p.exited
		return errors.New("conformance: IUT did not exit after quit; killed")
	}
}

// kill ends a process that did not start as an IUT.
func (p *ProcessIUT) kill() {
	p.stdin.Close()
	p.cmd.Process.Kill()
	<-p.exited
	p.release()
}

// release ends the reading of the process's stdout once the process is
// gone: a child it started may still hold the pipe open.
func (p *ProcessIUT) release() {
	close(p.done)
	p.stdout.Close()
}
