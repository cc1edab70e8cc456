package control

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Commands of the contract, the first word of a request line.
const (
	CmdListen      = "listen"      // listen [IP] → addr
	CmdAccept      = "accept"      // accept [TIMEOUT_MS] → conn
	CmdPostRecv    = "post-recv"   // post-recv FLOW CAP[,CAP..] TAG[,TAG..] → id
	CmdSend        = "send"        // send FLOW HEXDATA|LEN:SEED TAG → id
	CmdCompletions = "completions" // completions → completions (each reported once)
	CmdCounters    = "counters"    // counters → counters
	CmdClose       = "close"       // close → closes the current connection
	CmdQuit        = "quit"        // quit → the IUT replies and exits
)

// Limits of a request, so that bad input is refused before it allocates.
const (
	// MaxLine is the longest request or reply line, bytes (a reply carries
	// every completed buffer in hex).
	MaxLine = 64 << 20
	// MaxBuffer is the largest receive capacity or send length, bytes.
	MaxBuffer = 16 << 20
	// MaxEntries is the number of buffers of one receive group (spec §2.6).
	MaxEntries = 8
	// MaxAcceptWait bounds the accept timeout, milliseconds.
	MaxAcceptWait = 60_000
)

// Request is one parsed request line. Fields beyond Cmd are set by the
// commands that take them.
type Request struct {
	Cmd     string
	IP      string        // listen: local address to bind ("" = IUT's choice)
	Timeout time.Duration // accept: how long to wait (0 = IUT's default)
	Flow    uint32        // post-recv, send
	Caps    []uint64      // post-recv: one capacity per buffer, bytes
	Tags    []uint32      // post-recv: one tag per buffer; send: Tags[0]
	Data    []byte        // send: the message
	// Seed is set when send gave LEN:SEED (Data is then Payload(len, Seed)),
	// so String can reproduce the compact form.
	Seed   uint64
	Seeded bool
}

// ErrEmpty is returned for a blank line.
var ErrEmpty = errors.New("control: empty request")

// ParseRequest parses one request line (without its newline). Words are
// separated by blanks; numbers are decimal, tags may also be 0x-hexadecimal.
func ParseRequest(line string) (Request, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Request{}, ErrEmpty
	}
	r := Request{Cmd: f[0]}
	args := f[1:]
	want := func(lo, hi int) error {
		if len(args) < lo || len(args) > hi {
			if lo == hi {
				return fmt.Errorf("control: %s takes %d arguments, got %d", r.Cmd, lo, len(args))
			}
			return fmt.Errorf("control: %s takes %d to %d arguments, got %d", r.Cmd, lo, hi, len(args))
		}
		return nil
	}
	var err error
	switch r.Cmd {
	case CmdListen:
		if err = want(0, 1); err == nil && len(args) == 1 {
			r.IP = args[0]
		}
	case CmdAccept:
		if err = want(0, 1); err == nil && len(args) == 1 {
			var ms uint64
			ms, err = strconv.ParseUint(args[0], 10, 32)
			if err != nil || ms > MaxAcceptWait {
				return r, fmt.Errorf("control: accept timeout %q: want milliseconds 0..%d", args[0], MaxAcceptWait)
			}
			r.Timeout = time.Duration(ms) * time.Millisecond
		}
	case CmdPostRecv:
		if err = want(3, 3); err != nil {
			return r, err
		}
		if r.Flow, err = parseFlow(args[0]); err != nil {
			return r, err
		}
		if r.Caps, err = parseCaps(args[1]); err != nil {
			return r, err
		}
		if r.Tags, err = parseTags(args[2]); err != nil {
			return r, err
		}
		if len(r.Tags) != len(r.Caps) {
			return r, fmt.Errorf("control: %d capacities but %d tags", len(r.Caps), len(r.Tags))
		}
	case CmdSend:
		if err = want(3, 3); err != nil {
			return r, err
		}
		if r.Flow, err = parseFlow(args[0]); err != nil {
			return r, err
		}
		if err = r.parseData(args[1]); err != nil {
			return r, err
		}
		if r.Tags, err = parseTags(args[2]); err != nil {
			return r, err
		}
		if len(r.Tags) != 1 {
			return r, fmt.Errorf("control: send takes one tag, got %d", len(r.Tags))
		}
	case CmdCompletions, CmdCounters, CmdClose, CmdQuit:
		err = want(0, 0)
	default:
		return r, fmt.Errorf("control: unknown command %q (want listen, accept, post-recv, send, completions, counters, close or quit)", r.Cmd)
	}
	return r, err
}

// String formats r as a request line that ParseRequest reads back.
func (r Request) String() string {
	var b strings.Builder
	b.WriteString(r.Cmd)
	switch r.Cmd {
	case CmdListen:
		if r.IP != "" {
			b.WriteString(" " + r.IP)
		}
	case CmdAccept:
		if r.Timeout > 0 {
			fmt.Fprintf(&b, " %d", r.Timeout.Milliseconds())
		}
	case CmdPostRecv:
		fmt.Fprintf(&b, " %d %s %s", r.Flow, joinU64(r.Caps), joinTags(r.Tags))
	case CmdSend:
		data := hex.EncodeToString(r.Data)
		if r.Seeded {
			data = fmt.Sprintf("%d:%d", len(r.Data), r.Seed)
		} else if len(r.Data) == 0 {
			data = "0:0"
		}
		fmt.Fprintf(&b, " %d %s %s", r.Flow, data, joinTags(r.Tags))
	}
	return b.String()
}

func (r *Request) parseData(s string) error {
	if l, seed, ok := strings.Cut(s, ":"); ok {
		n, err := strconv.ParseUint(l, 10, 64)
		if err != nil || n > MaxBuffer {
			return fmt.Errorf("control: send length %q: want 0..%d bytes", l, MaxBuffer)
		}
		sd, err := strconv.ParseUint(seed, 10, 64)
		if err != nil {
			return fmt.Errorf("control: send seed %q: want a decimal 64-bit number", seed)
		}
		r.Data, r.Seed, r.Seeded = Payload(int(n), sd), sd, true
		return nil
	}
	if len(s) > 2*MaxBuffer {
		return fmt.Errorf("control: send data of %d hex digits exceeds %d bytes", len(s), MaxBuffer)
	}
	d, err := hex.DecodeString(s)
	if err != nil {
		return fmt.Errorf("control: send data: want hex digits or LEN:SEED: %v", err)
	}
	r.Data = d
	return nil
}

func parseFlow(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("control: flow %q: want a decimal 32-bit number", s)
	}
	return uint32(v), nil
}

func parseCaps(s string) ([]uint64, error) {
	parts := strings.Split(s, ",")
	if len(parts) > MaxEntries {
		return nil, fmt.Errorf("control: %d buffers, at most %d", len(parts), MaxEntries)
	}
	out := make([]uint64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil || v > MaxBuffer {
			return nil, fmt.Errorf("control: capacity %q: want 0..%d bytes", p, MaxBuffer)
		}
		out[i] = v
	}
	return out, nil
}

func parseTags(s string) ([]uint32, error) {
	parts := strings.Split(s, ",")
	if len(parts) > MaxEntries {
		return nil, fmt.Errorf("control: %d tags, at most %d", len(parts), MaxEntries)
	}
	out := make([]uint32, len(parts))
	for i, p := range parts {
		// Decimal, or hexadecimal after 0x: base 0 would also read a
		// leading zero as octal ("010" is 8), 0b and 0o prefixes and
		// digit separators, none of which the contract has.
		digits, base := p, 10
		if len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') {
			digits, base = p[2:], 16
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return nil, fmt.Errorf("control: tag %q: want a decimal or 0x-hexadecimal 32-bit number", p)
		}
		out[i] = uint32(v)
	}
	return out, nil
}

func joinU64(v []uint64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(s, ",")
}

func joinTags(v []uint32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatUint(uint64(x), 10)
	}
	return strings.Join(s, ",")
}
