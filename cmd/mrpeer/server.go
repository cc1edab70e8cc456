package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/conformance/control"
	"github.com/metaroce/metaroce/transport/udp"
)

// defaultAccept is how long accept waits when the request names no timeout.
const defaultAccept = 5 * time.Second

// maxErrText is the longest error text a completion carries, bytes; a
// longer one is cut, so that the completion's reply line has a known bound.
const maxErrText = 256

// completionBound bounds the length of a reply line that carries one
// receive completion of buffers of caps bytes: each buffer in hex, its
// size, the error text (every byte escaped in JSON at worst) and the fixed
// fields.
func completionBound(caps []uint64) uint64 {
	n := uint64(200 + 6*maxErrText)
	for _, c := range caps {
		n += 2*c + 16
	}
	return n
}

// server holds the IUT's state between requests: one endpoint, the
// connections accepted so far (the latest is current) and the completions
// not yet reported. Requests are served one at a time; completions are
// appended by one goroutine per operation.
type server struct {
	seed    uint64
	log     io.Writer
	maxLine int // longest request or reply line, bytes without the newline (control.MaxLine)
	ep      *udp.Endpoint
	conns   []*udp.Conn
	nextID  uint64

	mu   sync.Mutex
	done []control.Completion
	wg   sync.WaitGroup
}

func newServer(seed uint64, log io.Writer) *server {
	return &server{seed: seed, log: log, maxLine: control.MaxLine}
}

// serve answers requests until quit or the end of in. A line longer than
// maxLine is read to its end without being kept, and answered with an
// error like any other bad request: the contract promises one reply per
// line, and the tester's next request must still find the IUT in step.
// It returns an error only when in cannot be read or out written; a
// write that finds out a pipe without a reader (EPIPE) is no error: the
// tester has gone, as at the end of in, and there is nobody left to
// answer.
//
// in is read by a goroutine of its own (readLines), one line ahead of the
// request being served, so that the end of in is seen while a request
// runs: the tester has gone (it exited, or closed its end of the pipe),
// and an accept under way is stopped at once instead of waiting out its
// timeout of up to a minute for a connection nobody will use. The reply
// to that accept still goes out, for a tester that closed only its end of
// the requests.
func (s *server) serve(in io.Reader, out io.Writer) error {
	gone, leave := context.WithCancelCause(context.Background())
	defer leave(nil)
	lines := make(chan readResult)
	next := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go readLines(bufio.NewReaderSize(in, 64<<10), s.maxLine, lines, next, done, leave)
	w := bufio.NewWriter(out)
	for {
		lr := <-lines
		if lr.err == io.EOF {
			return nil
		}
		if lr.err != nil {
			return lr.err
		}
		var req control.Request
		var rep control.Reply
		var err error
		if lr.tooLong {
			err = fmt.Errorf("mrpeer: request line longer than %d bytes, ignored", s.maxLine)
		} else {
			req, err = control.ParseRequest(string(lr.line))
		}
		next <- struct{}{} // the line is copied (or dropped): read the next one
		if err != nil {
			rep = control.Fail(err)
		} else {
			rep = s.do(gone, req)
		}
		w.Write(rep.Format())
		w.WriteByte('\n')
		if err := w.Flush(); err != nil {
			if errors.Is(err, syscall.EPIPE) {
				return nil
			}
			return err
		}
		if err == nil && req.Cmd == control.CmdQuit {
			return nil
		}
	}
}

// errInputEnded is the cause of serve's request context once its input
// has ended: the tester is gone.
var errInputEnded = errors.New("the tester's requests ended (its end of stdin closed)")

// readResult is one line read by readLines, or why none was.
type readResult struct {
	line    []byte // without its newline; valid until readLines is told next
	tooLong bool
	err     error // io.EOF at the end of the input
}

// readLines reads lines from r (readLine, at most max bytes each) and
// sends each on lines; after a line it waits for next, as the line's
// buffer is reused for the one after it. At the end of r, or when r
// fails, it calls ended first (with errInputEnded, or with the error),
// then sends the end on lines and returns. It returns as well once done
// is closed, and may then have read one line more than was served.
func readLines(r *bufio.Reader, max int, lines chan<- readResult, next, done <-chan struct{}, ended context.CancelCauseFunc) {
	var buf []byte
	for {
		line, tooLong, err := readLine(r, max, buf[:0])
		switch {
		case err == io.EOF:
			ended(errInputEnded)
		case err != nil:
			ended(fmt.Errorf("reading the tester's requests: %w", err))
		}
		select {
		case lines <- readResult{line, tooLong, err}:
		case <-done:
			return
		}
		if err != nil {
			return
		}
		select {
		case <-next:
		case <-done:
			return
		}
		buf = line
	}
}

// readLine reads the next line from r into buf and returns it without its
// newline (and without a carriage return before it), as bufio.ScanLines
// does; a last line without a newline counts too. A line is at most max
// bytes, not counting its newline. A longer one is read to its end and
// dropped as it arrives, so that memory stays bounded by max, and tooLong
// is set with an empty line. err is io.EOF only when no line was left.
func readLine(r *bufio.Reader, max int, buf []byte) (line []byte, tooLong bool, err error) {
	n := 0 // bytes of the line read so far, its newline included
	for {
		chunk, err := r.ReadSlice('\n')
		n += len(chunk)
		if !tooLong {
			content := n
			if err == nil {
				content-- // the chunk ends with the newline
			}
			if content > max {
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && n > 0 {
			err = nil // the last line, without a newline
		}
		if err != nil {
			return nil, false, err
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		return bytes.TrimSuffix(buf, []byte("\r")), tooLong, nil
	}
}

// do executes one request. ctx ends when the tester is gone (serve); an
// accept under way then stops.
func (s *server) do(ctx context.Context, r control.Request) control.Reply {
	if r.Cmd != control.CmdListen && r.Cmd != control.CmdQuit && s.ep == nil {
		return control.Fail(errors.New("mrpeer: listen first"))
	}
	switch r.Cmd {
	case control.CmdListen:
		return s.listen(r.IP)
	case control.CmdAccept:
		return s.accept(ctx, r.Timeout)
	case control.CmdPostRecv:
		return s.postRecv(r.Flow, r.Caps, r.Tags)
	case control.CmdSend:
		return s.send(r.Flow, r.Data, r.Tags[0])
	case control.CmdCompletions:
		return s.completions()
	case control.CmdCounters:
		return s.counters()
	case control.CmdClose:
		c, err := s.current()
		if err != nil {
			return control.Fail(err)
		}
		if err := c.Close(); err != nil {
			return control.Fail(err)
		}
		return control.Reply{OK: true}
	case control.CmdQuit:
		return control.Reply{OK: true}
	}
	return control.Fail(fmt.Errorf("mrpeer: command %q not handled", r.Cmd))
}

func (s *server) listen(ip string) control.Reply {
	if s.ep != nil {
		return control.Fail(fmt.Errorf("mrpeer: already listening on %v", s.ep.Addrs()[0]))
	}
	a := netip.MustParseAddr("127.0.0.1")
	if ip != "" {
		var err error
		if a, err = netip.ParseAddr(ip); err != nil {
			return control.Fail(fmt.Errorf("mrpeer: listen address %q: %v", ip, err))
		}
	}
	ep, err := udp.Listen(udp.Config{Addrs: []netip.Addr{a}, Seed: s.seed})
	if err != nil {
		return control.Fail(fmt.Errorf("mrpeer: listen on %v: %w", a, err))
	}
	s.ep = ep
	return control.Reply{OK: true, Addr: ep.Addrs()[0].String()}
}

// accept waits up to d (0: defaultAccept) for the next connection and
// makes it current; it stops early, with an error naming why, when ctx
// ends (the tester is gone).
func (s *server) accept(ctx context.Context, d time.Duration) control.Reply {
	if d == 0 {
		d = defaultAccept
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c, err := s.ep.Accept(actx)
	if err != nil && ctx.Err() != nil {
		return control.Fail(fmt.Errorf("mrpeer: accept on %v: stopped waiting: %v", s.ep.Addrs()[0], context.Cause(ctx)))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The tester reads which address it was to dial, and how long
		// it had, rather than a context's error.
		return control.Fail(fmt.Errorf("mrpeer: accept on %v: no connection within %v", s.ep.Addrs()[0], d))
	}
	if err != nil {
		return control.Fail(fmt.Errorf("mrpeer: accept on %v: %w", s.ep.Addrs()[0], err))
	}
	s.conns = append(s.conns, c)
	return control.Reply{OK: true, Conn: uint64(len(s.conns))}
}

func (s *server) current() (*udp.Conn, error) {
	if len(s.conns) == 0 {
		return nil, errors.New("mrpeer: no accepted connection")
	}
	return s.conns[len(s.conns)-1], nil
}

// completions reports the operations finished since the last call, as
// many as fit one reply line; the others wait for the next call.
func (s *server) completions() control.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	size := len(control.Reply{OK: true, Completions: []control.Completion{{}}}.Format())
	n := 0
	for ; n < len(s.done); n++ {
		b, _ := json.Marshal(s.done[n])
		size += len(b) + 1 // and a comma
		if n > 0 && size > s.maxLine {
			break
		}
	}
	rep := control.Reply{OK: true, Completions: s.done[:n:n]}
	s.done = s.done[n:]
	if len(s.done) == 0 {
		s.done = nil
	}
	return rep
}

// postRecv posts a grouped receive whose buffers hold 0xA5, the tester's
// guard byte, so that unwritten bytes are visible in the completion.
func (s *server) postRecv(flow uint32, caps []uint64, tags []uint32) control.Reply {
	c, err := s.current()
	if err != nil {
		return control.Fail(err)
	}
	// The completion carries every buffer in hex on one reply line: a
	// group too large for that could never be reported (the contract's
	// 8 buffers of 16 MiB exceed its 64 MiB line).
	if b := completionBound(caps); b > uint64(s.maxLine) {
		return control.Fail(fmt.Errorf("mrpeer: post-recv: the completion of these buffers would need a reply line of up to %d bytes, over the %d-byte limit", b, s.maxLine))
	}
	bufs := make([][]byte, len(caps))
	for i, n := range caps {
		bufs[i] = make([]byte, n)
		for j := range bufs[i] {
			bufs[i][j] = 0xA5
		}
	}
	req, err := c.Recv(flow, bufs, tags)
	if err != nil {
		return control.Fail(err)
	}
	s.nextID++
	id := s.nextID
	s.watch(req, func(err error) control.Completion {
		comp := control.Completion{ID: id, Op: control.OpRecv, Flow: flow}
		for _, b := range bufs {
			comp.Bufs = append(comp.Bufs, hex.EncodeToString(b))
		}
		if err != nil {
			comp.Error = errText(err)
		} else {
			comp.Sizes = req.Sizes()
		}
		return comp
	})
	return control.Reply{OK: true, ID: id}
}

// errText is err's text, cut to maxErrText bytes.
func errText(err error) string {
	t := err.Error()
	if len(t) > maxErrText {
		t = strings.ToValidUTF8(t[:maxErrText-3], "") + "..."
	}
	return t
}

func (s *server) send(flow uint32, data []byte, tag uint32) control.Reply {
	c, err := s.current()
	if err != nil {
		return control.Fail(err)
	}
	req, err := c.Send(flow, data, tag)
	if err != nil {
		return control.Fail(err)
	}
	s.nextID++
	id := s.nextID
	s.watch(req, func(err error) control.Completion {
		comp := control.Completion{ID: id, Op: control.OpSend, Flow: flow}
		if err != nil {
			comp.Error = errText(err)
		} else {
			comp.Sizes = []int{len(data)}
		}
		return comp
	})
	return control.Reply{OK: true, ID: id}
}

// watch records the completion of req when it finishes; requests always
// finish, at the latest when their connection or the endpoint closes.
func (s *server) watch(req *udp.Request, mk func(error) control.Completion) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-req.Done()
		comp := mk(req.Wait(context.Background()))
		s.mu.Lock()
		s.done = append(s.done, comp)
		s.mu.Unlock()
	}()
}

// counters reports the current connection's counters and, per path, the
// counters that show retransmission and path health.
func (s *server) counters() control.Reply {
	c, err := s.current()
	if err != nil {
		return control.Fail(err)
	}
	st := c.Stats()
	m := map[string]uint64{
		"packets_sent": st.PacketsSent, "bytes_sent": st.BytesSent,
		"packets_recv": st.PacketsRecv, "bytes_recv": st.BytesRecv,
		"retransmits": st.Retransmits, "lost": st.Lost, "spurious": st.Spurious,
		"timeouts": st.Timeouts, "ecn_marks": st.ECNMarks, "ce_recv": st.CERecv,
		"path_changes": st.PathChanges, "acks_sent": st.AcksSent, "acks_recv": st.AcksRecv,
		"nacks_recv": st.NacksRecv, "rtt_ns": uint64(st.RTT), "rate_hint_bytes_per_s": st.RateHint,
		"pacing_rate_bytes_per_s": st.PacingRate, "paths": uint64(st.Paths),
	}
	for i, p := range c.PathStats() {
		k := fmt.Sprintf("path%d_", i)
		m[k+"entropy"] = uint64(p.Entropy)
		m[k+"packets_sent"] = p.PacketsSent
		m[k+"lost"] = p.Lost
		m[k+"timeouts"] = p.Timeouts
		m[k+"probes"] = p.Probes
		m[k+"path_changes"] = p.PathChanges
	}
	return control.Reply{OK: true, Counters: m}
}

// shutdown closes the endpoint, which finishes every outstanding request,
// and waits for their completions to be recorded.
func (s *server) shutdown() {
	if s.ep != nil {
		s.ep.Close()
	}
	s.wg.Wait()
}
