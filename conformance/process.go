package conformance

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"sync"
	"time"

	"github.com/metaroce/metaroce/conformance/control"
)

// pollCompletions is how often a ProcessIUT asks for completions.
const pollCompletions = 5 * time.Millisecond

// processQuit bounds the wait for an IUT process to exit after quit.
const processQuit = 3 * time.Second

// ProcessIUT drives an implementation under test running as a separate
// process that speaks the control contract of package control on its stdin
// and stdout. Requests are serialised; a goroutine polls completions and
// delivers them on Completions.
type ProcessIUT struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []byte // reply lines, closed when stdout ends
	addr  netip.AddrPort
	comps chan Completion
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex // one request at a time
	broken error      // set once the process stopped answering
}

// StartProcess starts argv (program and arguments), asks it to listen on
// 127.0.0.1 and returns it ready for the suite. stderr receives the
// process's diagnostics (nil discards them).
func StartProcess(ctx context.Context, argv []string, stderr io.Writer) (*ProcessIUT, error) {
	if len(argv) == 0 {
		return nil, errors.New("conformance: empty IUT command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("conformance: start IUT %q: %w", argv[0], err)
	}
	p := &ProcessIUT{cmd: cmd, stdin: in, lines: make(chan []byte, 4),
		comps: make(chan Completion, 256), stop: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), control.MaxLine)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(p.lines)
	}()
	rep, err := p.request(ctx, control.Request{Cmd: control.CmdListen, IP: "127.0.0.1"})
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
	if p.broken != nil {
		return control.Reply{}, p.broken
	}
	if _, err := io.WriteString(p.stdin, r.String()+"\n"); err != nil {
		p.broken = fmt.Errorf("conformance: IUT stdin: %w", err)
		return control.Reply{}, p.broken
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.broken = errors.New("conformance: IUT closed its stdout")
			return control.Reply{}, p.broken
		}
		rep, err := control.ParseReply(line)
		if err != nil {
			p.broken = err
			return rep, err
		}
		if !rep.OK {
			return rep, fmt.Errorf("IUT: %s", rep.Error)
		}
		return rep, nil
	case <-ctx.Done():
		p.broken = fmt.Errorf("conformance: IUT did not answer %q: %w", r.Cmd, ctx.Err())
		return control.Reply{}, p.broken
	}
}

// poll asks for completions until Close.
func (p *ProcessIUT) poll() {
	defer p.wg.Done()
	t := time.NewTicker(pollCompletions)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := p.request(ctx, control.Request{Cmd: control.CmdCompletions})
		cancel()
		if err != nil {
			return
		}
		for _, c := range rep.Completions {
			comp := Completion{Flow: c.Flow, Sizes: c.Sizes, Err: c.Error, Send: c.Op == control.OpSend}
			for _, h := range c.Bufs {
				b, err := hex.DecodeString(h)
				if err != nil {
					comp.Err = "control: completion buffer is not hex"
				}
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

// ListenAddr implements IUT.
func (p *ProcessIUT) ListenAddr() netip.AddrPort { return p.addr }

// Accept implements IUT.
func (p *ProcessIUT) Accept(ctx context.Context) error {
	r := control.Request{Cmd: control.CmdAccept, Timeout: 2 * time.Second}
	if d, ok := ctx.Deadline(); ok {
		r.Timeout = min(time.Until(d), control.MaxAcceptWait*time.Millisecond).Truncate(time.Millisecond)
		if r.Timeout <= 0 {
			return ctx.Err()
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
// otherwise.
func (p *ProcessIUT) Close() error {
	close(p.stop)
	p.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), processQuit)
	defer cancel()
	p.request(ctx, control.Request{Cmd: control.CmdQuit})
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(processQuit):
		p.cmd.Process.Kill()
		<-done
		return errors.New("conformance: IUT did not exit after quit; killed")
	}
}

func (p *ProcessIUT) kill() {
	p.stdin.Close()
	p.cmd.Process.Kill()
	p.cmd.Wait()
}
