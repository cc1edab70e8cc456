package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/internal/bytesize"
	"github.com/metaroce/metaroce/internal/term"
)

// TestProgressClearsBeforeRows: the bar is erased once before each line the
// table prints (stdout and stderr may be one terminal), and not at all
// when it is not on the screen. It counts the rows done and names the one
// that runs.
func TestProgressClearsBeforeRows(t *testing.T) {
	var b bytes.Buffer
	p := &progress{line: term.NewLine(&b, true), total: 2}
	p.clear()
	assert.Empty(t, b.String(), "nothing to erase before the first row")
	p.show("tcp float 1K")
	p.clear()
	p.clear()
	p.step()
	assert.Equal(t, "\r\033[K[                              ] 0/2 tcp float 1K\r\033[K", b.String(), "one erasure, and step draws nothing")
	b.Reset()
	p.show("tcp float 4K")
	assert.Equal(t, "\r\033[K[###############               ] 1/2 tcp float 4K", b.String())
	assert.NotPanics(t, func() { (*progress)(nil).clear(); (*progress)(nil).step(); (*progress)(nil).show("x") })
}

// barSpy is a comm whose rank 0 notes the progress bar's last drawing at
// each collective of a row (the float all-reduces; the figures' all-gather
// after each row is of float64, the host names' of uint8).
type barSpy struct {
	comm
	bar   *bytes.Buffer
	calls *[]string // "size|bar", by call
}

func (s barSpy) Collective(ctx context.Context, k call, send, recv []byte) error {
	if s.Rank() == 0 && k.DType == reduce.Float32 {
		drawn := s.bar.String()
		drawn = drawn[strings.LastIndex(drawn, "\r")+1:]
		*s.calls = append(*s.calls, bytesize.Format(k.Count*4)+"|"+drawn)
	}
	return s.comm.Collective(ctx, k, send, recv)
}

type barSpyLauncher struct {
	g     *memGroup
	bar   *bytes.Buffer
	calls *[]string
}

func (l barSpyLauncher) launch(ctx context.Context, _ string, fn func(r rankEnv) error) error {
	return l.g.run(func(c comm) error {
		return fn(rankEnv{comm: barSpy{comm: c, bar: l.bar, calls: l.calls}, describe: "mem"})
	})
}
func (l barSpyLauncher) source() string { return "mem" }

// TestProgressNamesTheRunningSize: while a row's collectives run, the bar
// names that row's size, not the one that finished before it, and counts
// the rows finished.
func TestProgressNamesTheRunningSize(t *testing.T) {
	o, err := parseOptions([]string{"-b", "1K", "-e", "16K", "-f", "4", "-n", "1", "-w", "1"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, sched.AllReduce, o.Collective)
	var bar, out bytes.Buffer
	var calls []string
	p := &progress{line: term.NewLine(&bar, true), total: newSweep(o).points()}
	env := baseEnv()
	_, isRoot, err := runTable(context.Background(), o, barSpyLauncher{newMemGroup(2), &bar, &calls}, "mem", &env, &out, p)
	require.NoError(t, err)
	require.True(t, isRoot)
	require.NotEmpty(t, calls)
	done := map[string]string{"1K": "0/3", "4K": "1/3", "16K": "2/3"}
	for _, c := range calls {
		size, drawn, _ := strings.Cut(c, "|")
		assert.True(t, strings.HasSuffix(drawn, "] "+done[size]+" mem float "+size), "a call of %s ran under the bar %q", size, drawn)
	}
}
