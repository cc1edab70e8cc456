package control

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Request
		err  string
	}{
		{line: "listen", want: Request{Cmd: CmdListen}},
		{line: "listen 127.0.0.1", want: Request{Cmd: CmdListen, IP: "127.0.0.1"}},
		{line: "accept 2500", want: Request{Cmd: CmdAccept, Timeout: 2500 * time.Millisecond}},
		{line: "  post-recv 4 4096,100 7,0x10 ", want: Request{Cmd: CmdPostRecv, Flow: 4, Caps: []uint64{4096, 100}, Tags: []uint32{7, 16}}},
		{line: "send 3 a5ff 9", want: Request{Cmd: CmdSend, Flow: 3, Data: []byte{0xa5, 0xff}, Tags: []uint32{9}}},
		{line: "send 3 4:0 9", want: Request{Cmd: CmdSend, Flow: 3, Data: Payload(4, 0), Seeded: true, Tags: []uint32{9}}},
		{line: "completions", want: Request{Cmd: CmdCompletions}},
		{line: "quit", want: Request{Cmd: CmdQuit}},
		{line: "", err: "empty"},
		{line: "frobnicate", err: "unknown command"},
		{line: "accept 99999999", err: "accept timeout"},
		{line: "post-recv 4 4096 1,2", err: "1 capacities but 2 tags"},
		{line: "post-recv 4 1,1,1,1,1,1,1,1,1 1", err: "at most 8"},
		{line: "post-recv 4 99999999999 1", err: "capacity"},
		{line: "post-recv x 1 1", err: "flow"},
		{line: "send 1 zz 1", err: "hex digits"},
		{line: "send 1 999999999999:1 1", err: "send length"},
		{line: "send 1 12:x 1", err: "seed"},
		{line: "send 1 00 1,2", err: "one tag"},
		{line: "close now", err: "takes 0 arguments"},
		// Numbers are decimal, tags also 0x-hexadecimal: a leading zero
		// is not octal, and other bases and digit separators are refused.
		{line: "post-recv 4 100 010", want: Request{Cmd: CmdPostRecv, Flow: 4, Caps: []uint64{100}, Tags: []uint32{10}}},
		{line: "send 3 00 0X1f", want: Request{Cmd: CmdSend, Flow: 3, Data: []byte{0}, Tags: []uint32{31}}},
		{line: "post-recv 4 100 0o17", err: "tag"},
		{line: "post-recv 4 100 0b101", err: "tag"},
		{line: "post-recv 4 100 1_000", err: "tag"},
		{line: "post-recv 4 100 0x", err: "tag"},
		{line: "post-recv 4 100 0x_1", err: "tag"},
		{line: "post-recv 4 100 0x100000000", err: "tag"},
		{line: "send 1 00", err: "takes 3 arguments"},
	} {
		got, err := ParseRequest(tc.line)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%q", tc.line)
			continue
		}
		require.NoError(t, err, "%q", tc.line)
		require.Equal(t, tc.want, got, "%q", tc.line)
		back, err := ParseRequest(got.String())
		require.NoError(t, err, "%q → %q", tc.line, got.String())
		require.Equal(t, got, back)
	}
}

// TestPayloadReference compares Payload with a direct transcription of
// SplitMix64 and checks that a prefix is stable under a longer length.
func TestPayloadReference(t *testing.T) {
	ref := func(n int, seed uint64) []byte {
		out := []byte{}
		for len(out) < n {
			seed += 0x9e3779b97f4a7c15
			z := seed
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			out = binary.LittleEndian.AppendUint64(out, z^(z>>31))
		}
		return out[:n]
	}
	for _, n := range []int{0, 1, 7, 8, 9, 1000} {
		for _, seed := range []uint64{0, 1, 1 << 63} {
			require.Equal(t, ref(n, seed), Payload(n, seed), "n %d seed %d", n, seed)
		}
	}
	require.True(t, bytes.HasPrefix(Payload(100, 5), Payload(37, 5)))
	// SplitMix64 from seed 0 starts 0xe220a8397b1dcdaf.
	require.Equal(t, uint64(0xe220a8397b1dcdaf), binary.LittleEndian.Uint64(Payload(8, 0)))
}

func TestReply(t *testing.T) {
	r := Reply{OK: true, Completions: []Completion{{ID: 2, Op: OpRecv, Flow: 1, Sizes: []int{3}, Bufs: []string{"0102a5"}}}}
	got, err := ParseReply(r.Format())
	require.NoError(t, err)
	require.Equal(t, r, got)
	for _, bad := range []string{"", "ok", `{"ok":false}`, `{"ok":true,"completions":[{"op":"write"}]}`,
		// A buffer that is not hex, or a negative size, is garbage: the
		// tester must not read it as a receive that failed or placed less.
		`{"ok":true,"completions":[{"id":1,"op":"recv","flow":6,"error":"x","bufs":["a5zz"]}]}`,
		`{"ok":true,"completions":[{"id":1,"op":"recv","flow":6,"sizes":[1],"bufs":["a5a"]}]}`,
		`{"ok":true,"completions":[{"id":1,"op":"recv","flow":6,"sizes":[-1],"bufs":["a5"]}]}`} {
		_, err := ParseReply([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
	f := Fail(ErrEmpty)
	require.False(t, f.OK)
	require.Contains(t, string(f.Format()), "empty request")
}

// FuzzParseRequest checks that no line panics and that every accepted
// request formats to a line that parses back to the same request.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"listen", "accept 10", "post-recv 1 10,20 1,2", "send 1 00ff 3", "send 2 10:7 0x5", "counters", "close", "send 1 : 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := ParseRequest(line)
		if err != nil {
			return
		}
		back, err := ParseRequest(r.String())
		if err != nil {
			t.Fatalf("%q → %q: %v", line, r.String(), err)
		}
		if r.String() != back.String() {
			t.Fatalf("%q → %q → %q", line, r.String(), back.String())
		}
		// Every number read as the contract writes it: decimal, tags
		// also after 0x, nothing else.
		f := strings.Fields(line)
		if r.Cmd != CmdPostRecv && r.Cmd != CmdSend {
			return
		}
		if want, err := strconv.ParseUint(f[1], 10, 32); err != nil || uint32(want) != r.Flow {
			t.Fatalf("%q: flow %d from %q", line, r.Flow, f[1])
		}
		for i, tag := range strings.Split(f[3], ",") {
			digits, base := tag, 10
			if h, ok := strings.CutPrefix(strings.ToLower(tag), "0x"); ok {
				digits, base = h, 16
			}
			want, err := strconv.ParseUint(digits, base, 32)
			if err != nil || strings.ContainsAny(digits, "_+-") || uint32(want) != r.Tags[i] {
				t.Fatalf("%q: tag %d from %q", line, r.Tags[i], tag)
			}
		}
	})
}

// FuzzParseReply checks that no reply line panics the tester's parser.
func FuzzParseReply(f *testing.F) {
	f.Add([]byte(`{"ok":true,"addr":"127.0.0.1:1"}`))
	f.Add([]byte(`{"ok":false,"error":"x"}`))
	f.Add([]byte(`{"ok":true,"completions":[{"id":1,"op":"send","flow":2,"error":"too large"}]}`))
	f.Add([]byte(`{"ok":true,"completions":[{"id":1,"op":"recv","flow":2,"sizes":[1],"bufs":["a5"]}]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseReply(line)
		if err != nil {
			return
		}
		for _, c := range r.Completions {
			for _, b := range c.Bufs {
				if _, err := hex.DecodeString(b); err != nil {
					t.Fatalf("%q: accepted buffer %q: %v", line, b, err)
				}
			}
			for _, n := range c.Sizes {
				if n < 0 {
					t.Fatalf("%q: accepted size %d", line, n)
				}
			}
		}
	})
}
