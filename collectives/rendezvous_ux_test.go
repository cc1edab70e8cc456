package collectives

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBootstrapVars: a bootstrap read from a launcher's environment names
// the variables it came from, Describe prints them with their values, and
// a bad rank or rank count is an error that names the variable and value.
func TestBootstrapVars(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	b, ok, err := bootstrapFrom(env(map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3"}))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, BootstrapVars{Rank: "SLURM_PROCID", NRanks: "SLURM_NTASKS"}, b.Vars)
	assert.Equal(t, "launcher slurm: rank 0 of 4 (SLURM_PROCID=0, SLURM_NTASKS=4), rendezvous at 127.0.0.1:30893"+
		" (the single-host default: neither METAROCE_ROOT nor MASTER_ADDR and MASTER_PORT is set), job 77.3", b.Describe())

	b, _, err = bootstrapFrom(env(map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "5"}))
	require.NoError(t, err)
	assert.Equal(t, "MASTER_ADDR:MASTER_PORT+1", b.Vars.Root)
	assert.Equal(t, "launcher torchrun: rank 1 of 2 (RANK=1, WORLD_SIZE=2), rendezvous at h:6 (from MASTER_ADDR:MASTER_PORT+1)", b.Describe())

	b, _, err = bootstrapFrom(env(map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "METAROCE_ROOT": "n0:7000"}))
	require.NoError(t, err)
	assert.Contains(t, b.Describe(), "rendezvous at n0:7000 (from METAROCE_ROOT)")

	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RANK": "x", "WORLD_SIZE": "4"}, `RANK="x" is not a rank number`},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "0"}, `WORLD_SIZE="0": want a rank count of 1 to 65536`},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "-3", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, `WORLD_SIZE="-3"`},
		{map[string]string{"SLURM_PROCID": "4", "SLURM_NTASKS": "4"}, `SLURM_PROCID="4" is outside 0..3, the ranks of SLURM_NTASKS=4`},
	} {
		_, ok, err := bootstrapFrom(env(tc.env))
		assert.True(t, ok, "%v", tc.env)
		assert.ErrorContains(t, err, tc.want, "%v", tc.env)
	}
}

// TestRendezvousWaitingLines pins the progress lines' text.
func TestRendezvousWaitingLines(t *testing.T) {
	b := Bootstrap{Rank: 0, NRanks: 4, Root: "10.0.0.1:29517", Source: "slurm",
		Vars: BootstrapVars{Rank: "SLURM_PROCID", NRanks: "SLURM_NTASKS"}}
	assert.Equal(t, "rank 0: waiting for ranks 2, 3 (2 of 4 joined the rendezvous at 10.0.0.1:29517) after 5s, giving up in 55s",
		rootWaitingLine(b, []int{2, 3}, 5*time.Second+200*time.Millisecond, 55*time.Second-200*time.Millisecond))
	assert.Equal(t, "rank 0: waiting for ranks 1, 2, 3 (1 of 4 joined the rendezvous at 10.0.0.1:29517) after 10s, giving up in 50s;"+
		" if no other rank was started, SLURM_PROCID and SLURM_NTASKS do not belong to this run: unset them to run without slurm",
		rootWaitingLine(b, []int{1, 2, 3}, 10*time.Second, 50*time.Second))
	b.Vars = BootstrapVars{}
	assert.Equal(t, "rank 0: waiting for rank 3 (3 of 4 joined the rendezvous at 10.0.0.1:29517) after 5s",
		rootWaitingLine(b, []int{3}, 5*time.Second, -1))
	b.Rank = 2
	assert.Equal(t, "rank 2: waiting for rank 0's rendezvous at 10.0.0.1:29517 to answer after 5s, giving up in 1s",
		leafWaitingLine(b, false, "", 5*time.Second, time.Second))
	assert.Equal(t, "rank 2: waiting for rank 0's rendezvous at 10.0.0.1:29517 to answer after 5s (last attempt: dial tcp: lookup nosuchhost.invalid: no such host), giving up in 1s",
		leafWaitingLine(b, false, "dial tcp: lookup nosuchhost.invalid: no such host", 5*time.Second, time.Second))
	assert.Equal(t, "rank 2: joined the rendezvous at 10.0.0.1:29517, waiting for the other ranks of 4 to join (rank 0 reports which are missing), after 5s",
		leafWaitingLine(b, true, "an earlier dial's error", 5*time.Second, -1))
	err := missingErr(Bootstrap{Rank: 0, NRanks: 3, Root: "h:1", Source: "slurm", Vars: BootstrapVars{Rank: "SLURM_PROCID", NRanks: "SLURM_NTASKS"}},
		[][]byte{[]byte("zero"), nil, nil}, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "ranks [1 2] of 3 never joined the rendezvous at h:1: context deadline exceeded; check that every rank")
	assert.ErrorContains(t, err, "SLURM_PROCID=0 and SLURM_NTASKS=3 do not belong to this run: unset them to run without slurm")

	// Our own variables: unsetting them runs one process, not "without
	// metaroce".
	own := Bootstrap{Rank: 0, NRanks: 2, Root: "h:1", Source: "metaroce", Vars: BootstrapVars{Rank: "METAROCE_RANK", NRanks: "METAROCE_NRANKS"}}
	assert.Equal(t, "rank 0: waiting for rank 1 (1 of 2 joined the rendezvous at h:1) after 5s;"+
		" if no other rank was started, METAROCE_RANK and METAROCE_NRANKS do not belong to this run: unset them to run as a single process",
		rootWaitingLine(own, []int{1}, 5*time.Second, -1))
	err = missingErr(own, [][]byte{[]byte("zero"), nil}, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "METAROCE_RANK=0 and METAROCE_NRANKS=2 do not belong to this run: unset them to run as a single process")
	assert.NotContains(t, err.Error(), "without metaroce")
	many := make([]int, 20)
	for i := range many {
		many[i] = i + 1
	}
	assert.Equal(t, "ranks 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 and 4 more", rankWords(many))
}

// TestRendezvousProgress: while ranks are missing, rank 0 reports which
// ones every ProgressEvery, and a rank that cannot reach rank 0 says so.
// The interval is a millisecond, and the test reads lines until the one
// it expects, so it waits on no clock of its own.
func TestRendezvousProgress(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines := make(chan string, 64)
	report := func(l string) {
		select {
		case lines <- l:
		default: // the test reads on; a full channel drops lines
		}
	}
	joined := make(chan int, 4)
	rootDone := make(chan error, 1)
	goExchange(ctx, Bootstrap{Rank: 0, NRanks: 3, Root: root, Source: "test", Progress: report, ProgressEvery: time.Millisecond,
		joined: func(r int) { joined <- r }}, "zero", rootDone)
	leafDone := make(chan error, 2)
	goExchange(ctx, Bootstrap{Rank: 1, NRanks: 3, Root: root, Source: "test"}, "one", leafDone)
	require.Equal(t, 1, recv(ctx, t, joined, "rank 1 joining"))
	want := "rank 0: waiting for rank 2 (2 of 3 joined the rendezvous at " + root + ")"
	for {
		l := recv(ctx, t, lines, "rank 0's line "+strconv.Quote(want))
		if strings.HasPrefix(l, want) {
			break
		}
		require.Contains(t, l, "waiting for rank", "an unexpected line")
	}
	goExchange(ctx, Bootstrap{Rank: 2, NRanks: 3, Root: root, Source: "test"}, "two", leafDone)
	require.NoError(t, recv(ctx, t, rootDone, "rank 0's rendezvous"))
	require.NoError(t, recv(ctx, t, leafDone, "a rank's rendezvous"))
	require.NoError(t, recv(ctx, t, leafDone, "a rank's rendezvous"))

	// A rank whose rank 0 never listens.
	nowhere, err := freeLocalAddr()
	require.NoError(t, err)
	lctx, lcancel := context.WithCancel(ctx)
	leafLines := make(chan string, 64)
	done := make(chan error, 1)
	go func() {
		b := Bootstrap{Rank: 1, NRanks: 2, Root: nowhere, Source: "test", ProgressEvery: time.Millisecond,
			Progress: func(l string) {
				select {
				case leafLines <- l:
				default:
				}
			}}
		_, err := exchange(lctx, b, []byte("one"))
		done <- err
	}()
	assert.Contains(t, recv(ctx, t, leafLines, "rank 1's progress line"), "rank 1: waiting for rank 0's rendezvous at "+nowhere+" to answer after")
	lcancel()
	require.Error(t, recv(ctx, t, done, "rank 1 giving up"))
}

// recv receives from ch, or fails the test at once, naming what it waited
// for, when ctx ends first: a line that never comes fails the test rather
// than hanging it until go test's own timeout.
func recv[T any](ctx context.Context, t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		require.FailNow(t, "gave up waiting for "+what, "%v", ctx.Err())
		panic("unreachable")
	}
}

// TestRendezvousLeafSaysJoinedOnce: a rank that has reached rank 0 says so
// once, not at every interval: with a thousand ranks those lines would
// flood the launcher's output, and rank 0's lines already name the ranks
// still missing. Rank 0's own lines, every millisecond as the rank's,
// serve as the clock: the rank stays silent while rank 0 prints many.
func TestRendezvousLeafSaysJoinedOnce(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines := func() (chan string, func(string)) {
		ch := make(chan string, 256)
		return ch, func(l string) {
			select {
			case ch <- l:
			default:
			}
		}
	}
	rootLines, rootReport := lines()
	leafLines, leafReport := lines()
	rootDone := make(chan error, 1)
	goExchange(ctx, Bootstrap{Rank: 0, NRanks: 3, Root: root, Source: "test", Progress: rootReport, ProgressEvery: time.Millisecond},
		"zero", rootDone)
	leafDone := make(chan error, 2)
	goExchange(ctx, Bootstrap{Rank: 1, NRanks: 3, Root: root, Source: "test", Progress: leafReport, ProgressEvery: time.Millisecond},
		"one", leafDone)
	joinedLine := "rank 1: joined the rendezvous at " + root
	for {
		l := recv(ctx, t, leafLines, "rank 1's line "+strconv.Quote(joinedLine))
		if strings.HasPrefix(l, joinedLine) {
			break
		}
		require.Contains(t, l, "rank 1: waiting for rank 0's rendezvous", "an unexpected line")
	}
	// Rank 1 says it joined once its entry is sent; rank 0 may print a
	// line or two more before it has read it. From its first line that
	// misses rank 2 alone, rank 0's next 50 lines, each a millisecond or
	// more after the one before, are the clock.
	for !strings.Contains(recv(ctx, t, rootLines, "rank 0's line naming rank 2 alone"), "rank 0: waiting for rank 2") {
	}
	for range 50 {
		require.Contains(t, recv(ctx, t, rootLines, "rank 0's lines"), "rank 0: waiting for rank 2")
	}
	select {
	case l := <-leafLines:
		require.FailNow(t, "rank 1 printed again after it had said it joined", "%s", l)
	default:
	}
	goExchange(ctx, Bootstrap{Rank: 2, NRanks: 3, Root: root, Source: "test"}, "two", leafDone)
	require.NoError(t, recv(ctx, t, rootDone, "rank 0's rendezvous"))
	require.NoError(t, recv(ctx, t, leafDone, "a rank's rendezvous"))
	require.NoError(t, recv(ctx, t, leafDone, "a rank's rendezvous"))
}

// TestRendezvousOtherVersion: ranks of different versions fail at the
// rendezvous frame, each with an error that says to run one version on
// every rank. Rank 0 answers a rank of the version before in that
// version's frame, which that rank reads as rank 0 giving up; a rank whose
// rank 0 runs another version, which closes the connection or answers in
// another frame, says so.
func TestRendezvousOtherVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const what = "run the same metaroce version on every rank"

	var buf bytes.Buffer
	require.NoError(t, writeFrameMagic(&buf, prevMagic, 0, 2, 0, []byte("a")))
	_, err := readFrame(&buf, 2)
	assert.ErrorContains(t, err, `a metaroce rendezvous peer of another version (magic "MRB6", this version's is "MRB7"): `+what)
	_, err = readFrame(strings.NewReader("MRB5, a frame of a version before the last one"), 2)
	assert.ErrorContains(t, err, `not a metaroce rendezvous peer of this version (magic "MRB5", this version's is "MRB7"): `+what)
	// Something else listening at the address: not called a version.
	_, err = readFrame(strings.NewReader("HTTP/1.0 400 Bad Request\r\n\r\n"), 2)
	assert.ErrorIs(t, err, errNotRendezvous)
	assert.ErrorContains(t, err, `something other than a metaroce rendezvous listens there`)
	assert.ErrorContains(t, err, `it answered "HTTP", not a rendezvous frame ("MRB7")`)
	assert.NotErrorIs(t, err, errVersion)
	// A reply shorter than a frame's header (a line protocol's error)
	// reads the same.
	_, err = readFrame(strings.NewReader("-ERR unknown\r\n"), 2)
	assert.ErrorIs(t, err, errNotRendezvous)
	_, err = readFrame(strings.NewReader("MRB3"), 2)
	assert.ErrorIs(t, err, errVersion, "an older version's magic alone")

	// A rank of the version before, at this version's rank 0; a rank of
	// this version is already waiting there.
	root, err := freeLocalAddr()
	require.NoError(t, err)
	joined := make(chan int, 1)
	rootDone := make(chan error, 1)
	goExchange(ctx, Bootstrap{Rank: 0, NRanks: 3, Root: root, Source: "test", joined: func(r int) { joined <- r }}, "zero", rootDone)
	leafDone := make(chan error, 1)
	goExchange(ctx, Bootstrap{Rank: 1, NRanks: 3, Root: root, Source: "test"}, "one", leafDone)
	require.Equal(t, 1, recv(ctx, t, joined, "rank 1 joining"))
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", root)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, writeFrameMagic(c, prevMagic, 2, 3, 0, []byte("old endpoint")))
	f, err := readFrame(c, 3)
	require.ErrorIs(t, err, errVersion)
	assert.Equal(t, uint32(prevMagic), f.magic, "the answer is in the old rank's frame")
	assert.Equal(t, abortRanks, f.nranks, "the old rank reads rank 0 giving up")
	require.Len(t, f.blobs, 1)
	assert.Contains(t, string(f.blobs[0]), "rank 2 from "+c.LocalAddr().String()+` runs another version of metaroce (rendezvous magic "MRB6", rank 0's is "MRB7"): `+what)
	for _, err := range []error{recv(ctx, t, rootDone, "rank 0 giving up"), recv(ctx, t, leafDone, "rank 1 giving up")} {
		assert.ErrorContains(t, err, "rank 2 from "+c.LocalAddr().String()+" runs another version of metaroce")
		assert.ErrorContains(t, err, what)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
	}

	// A rank of this version at a rank 0 of another: one that reads the
	// hello's header and closes (as the version before does), and one
	// that answers in its own frame.
	for _, answer := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			var h [frameHeader]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			if answer {
				io.Copy(io.Discard, io.LimitReader(c, 4+int64(len("one"))))
				_ = writeFrameMagic(c, 0x4d524238, 0, 2, 0, []byte("zero"), []byte("one")) // "MRB8", a later version
			}
		}()
		_, err = exchange(ctx, Bootstrap{Rank: 1, NRanks: 2, Root: ln.Addr().String(), Source: "test"}, []byte("one"))
		assert.ErrorContains(t, err, "rank 1: waiting for the table from rank 0 at "+ln.Addr().String(), "answer %v", answer)
		assert.ErrorContains(t, err, what, "answer %v", answer)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "answer %v", answer)
	}
}

// TestSettingsMismatchFailsFast: ranks with different channel counts (or
// group sizes) fail right after the rendezvous, each with an error that
// names the setting and both ranks' values, instead of waiting out the
// timeout for connections that never come.
func TestSettingsMismatchFailsFast(t *testing.T) {
	for _, tr := range []string{TransportTCP, TransportMetaRoCE} {
		t.Run(tr, func(t *testing.T) {
			root, err := freeLocalAddr()
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errs := make(chan error, 2)
			for r, ch := range []int{2, 4} {
				go func() {
					c, err := New(ctx, Bootstrap{Rank: r, NRanks: 2, Root: root, Source: "test"},
						Config{Transport: tr, Channels: ch, Timeout: 20 * time.Second})
					if c != nil {
						c.Close()
					}
					errs <- err
				}()
			}
			for range 2 {
				err := <-errs
				require.Error(t, err)
				assert.ErrorContains(t, err, "disagree on channels (Config.Channels)")
				assert.ErrorContains(t, err, "rank 0 has 2, rank 1 has 4")
				assert.NotContains(t, err.Error(), "still missing")
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
			}
		})
	}
	blobs := [][]byte{settingsBlob(Config{Transport: "tcp", Channels: 2, GroupSize: 2}, []byte("a")),
		settingsBlob(Config{Transport: "tcp", Channels: 2, GroupSize: 4}, []byte("b")),
		settingsBlob(Config{Transport: "tcp", Channels: 2, GroupSize: 2}, []byte("c"))}
	_, err := agree(blobs)
	assert.ErrorContains(t, err, "disagree on group_size (Config.GroupSize), which must be the same on every rank: rank 0 has 2, rank 1 has 4")
	blobs[1] = settingsBlob(Config{Transport: "tcp", Channels: 2, GroupSize: 2}, []byte("b"))
	eps, err := agree(blobs)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, eps)
	_, err = agree([][]byte{blobs[0], []byte("no settings")})
	assert.ErrorContains(t, err, "rank 1 sent no settings")
}

// TestUnspecifiedAddressRefused: an endpoint address of 0.0.0.0 or ::
// would be announced to the peers, who cannot reach it; New refuses it at
// once, over either transport, with an error that says why, rather than
// waiting in the rendezvous (a rank 0 of two here) or failing later.
func TestUnspecifiedAddressRefused(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		for _, a := range []string{"0.0.0.0", "::", "::ffff:0.0.0.0"} {
			cfg := Config{Transport: tr, Timeout: 20 * time.Second}
			cfg.UDP.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr(a)}
			if tr == TransportTCP {
				cfg.UDP.Addrs = cfg.UDP.Addrs[1:]
			}
			c, err := New(context.Background(), Bootstrap{Rank: 0, NRanks: 2, Root: root, Source: "test"}, cfg)
			if c != nil {
				c.Close()
			}
			assert.ErrorContains(t, err, "address "+a+" (Config.UDP.Addrs) is unspecified", "%s %s", tr, a)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s %s", tr, a)
		}
	}
}

// goExchange runs exchange for b with blob in a goroutine and sends its
// error to done.
func goExchange(ctx context.Context, b Bootstrap, blob string, done chan<- error) {
	go func() {
		_, err := exchange(ctx, b, []byte(blob))
		done <- err
	}()
}

// freeLocalAddr returns a loopback TCP address that was free a moment ago,
// for tests that start rank 0's rendezvous themselves (LaunchLocal hands
// its open listener to rank 0 instead).
func freeLocalAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// TestRootTakesItsListener: a rank 0 handed an open rendezvous listener
// (as LaunchLocal and LaunchOn do) rendezvouses on it rather than listening
// on Root again, which would fail while it is open, and closes it. Choosing
// a free port and closing it before rank 0 listened left a moment in which
// another process on the host could take the port.
func TestRootTakesItsListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	root := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	for r := range 2 {
		go func() {
			b := Bootstrap{Rank: r, NRanks: 2, Root: root, Source: "test"}
			if r == 0 {
				b.listener = ln
			}
			c, err := New(ctx, b, Config{Transport: TransportTCP, Timeout: 20 * time.Second})
			if err == nil {
				err = c.Barrier(ctx)
				c.Close()
			}
			errs <- err
		}()
	}
	for range 2 {
		require.NoError(t, <-errs)
	}
	// A listener left open would block Accept for ever: the deadline
	// turns that into a failure (a closed one fails at once, ErrClosed).
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second))
	_, err = ln.Accept()
	require.ErrorIs(t, err, net.ErrClosed, "rank 0 left its listener open")
}

// TestRendezvousDeadlineNamed: a rendezvous that the setup deadline ended
// says which deadline and how long it was, and, where the deadline is the
// likely cause (ranks in this process, or a deadline under
// minSetupDeadline), to give a longer one; the address is blamed only
// where one could be wrong. Before, every such error told the user to
// check METAROCE_ROOT/MASTER_ADDR, also when this package had chosen the
// address and the deadline was a millisecond.
func TestRendezvousDeadlineNamed(t *testing.T) {
	const addrHint = "check that every rank was started with the same METAROCE_ROOT/MASTER_ADDR:MASTER_PORT"
	blobs := [][]byte{[]byte("zero"), nil, nil}
	cases := []struct {
		name     string
		b        Bootstrap
		cause    error
		want     []string
		wantNone []string
	}{
		{"in process", Bootstrap{NRanks: 3, Root: "h:1", Source: sourceLocal, deadline: setupDeadline{d: time.Millisecond}}, context.DeadlineExceeded,
			[]string{"ranks [1 2] of 3 never joined the rendezvous at h:1 before the setup deadline of 1ms (Config.Timeout) ran out: context deadline exceeded; all 3 ranks run in this process, on a rendezvous address of its own: the deadline was too short for them to join; give a longer one"},
			[]string{"METAROCE_ROOT"}},
		{"on namespace hosts", Bootstrap{NRanks: 2, Root: "h:1", Source: sourceHosts, deadline: setupDeadline{d: time.Second}}, context.DeadlineExceeded,
			[]string{"ranks [1] of 2 never joined the rendezvous at h:1 before the setup deadline of 1s (Config.Timeout) ran out: context deadline exceeded; all 2 ranks run in this process, on hosts whose network this package reaches rank 0 through: the deadline was too short for them to join, or that network dropped the rendezvous (loss, a black hole, a link down); give a longer deadline or check the network"},
			[]string{"METAROCE_ROOT", "address of its own"}},
		{"launched, short", Bootstrap{NRanks: 3, Root: "h:1", Source: "slurm", deadline: setupDeadline{d: 2 * time.Second}}, context.DeadlineExceeded,
			[]string{"never joined the rendezvous at h:1 before the setup deadline of 2s (Config.Timeout) ran out: context deadline exceeded; a deadline under 10s may end before the launcher has started every rank: give a longer one; or " + addrHint},
			nil},
		{"launched, long", Bootstrap{NRanks: 3, Root: "h:1", Source: "slurm", deadline: setupDeadline{d: time.Minute}}, context.DeadlineExceeded,
			[]string{"never joined the rendezvous at h:1 before the setup deadline of 1m0s (Config.Timeout) ran out: context deadline exceeded; " + addrHint},
			[]string{"longer"}},
		{"the caller's deadline", Bootstrap{NRanks: 3, Root: "h:1", Source: "slurm", deadline: setupDeadline{d: 500 * time.Millisecond, caller: true}}, context.DeadlineExceeded,
			[]string{"before the caller's deadline (500ms after New began) ran out", "give a longer one; or " + addrHint},
			nil},
		{"cancelled", Bootstrap{NRanks: 3, Root: "h:1", Source: "slurm", deadline: setupDeadline{d: time.Millisecond}}, context.Canceled,
			[]string{"rank 0: cancelled while ranks [1 2] of 3 had not joined the rendezvous at h:1: context canceled"},
			[]string{"deadline", "longer", "METAROCE_ROOT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := missingErr(c.b, blobs[:c.b.NRanks], c.cause)
			require.ErrorIs(t, err, c.cause)
			for _, w := range c.want {
				assert.ErrorContains(t, err, w)
			}
			for _, w := range c.wantNone {
				assert.NotContains(t, err.Error(), w)
			}
		})
	}

	// New's deadline is Config.Timeout's, or the caller's where that
	// comes first.
	long, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	assert.Equal(t, setupDeadline{d: time.Minute}, newSetupDeadline(long, time.Minute, ""))
	past, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel()
	assert.Equal(t, setupDeadline{d: 0, caller: true}, newSetupDeadline(past, time.Minute, ""))
	// The caller's deadline names no setting in its words, but its
	// DeadlineError's Field is still the program's name for Timeout.
	assert.Equal(t, "-T", newSetupDeadline(past, time.Minute, "-T").error(context.DeadlineExceeded).Field)

	// A program that sets Timeout from a setting of its own names it in
	// TimeoutSetting, and the errors name that instead of the field;
	// rank 0's abort to the others is its own error's text, in the same
	// words.
	err := LaunchLocal(context.Background(), 2, Config{Transport: TransportTCP, Timeout: time.Nanosecond, TimeoutSetting: "-T"}, func(*Comm) error { return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "before the setup deadline of 1ns (-T) ran out")
	assert.NotContains(t, err.Error(), "Config.Timeout")
	var dl *DeadlineError
	require.ErrorAs(t, err, &dl)
	assert.Equal(t, "-T", dl.Field)

	// End to end: in-process ranks whose deadline ends before any can
	// join. Whichever rank fails first (rank 0 waiting for the others,
	// or another that could not reach it), the error names the deadline
	// and says to give a longer one, once.
	err = LaunchLocal(context.Background(), 2, Config{Transport: TransportTCP, Timeout: time.Nanosecond}, func(*Comm) error { return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "before the setup deadline of 1ns (Config.Timeout) ran out")
	assert.ErrorContains(t, err, "the deadline was too short for them to join; give a longer one")
	assert.NotContains(t, err.Error(), "METAROCE_ROOT")
	assert.NotContains(t, err.Error(), "starved")
}

// TestRendezvousRootCancelSaysWhy: rank 0 cancelled while it waits for
// ranks to join returns the cancel with its cause and the ranks it waited
// for, without the advice to check the rendezvous address, which does not
// explain a cancel. Before, the error said "context canceled" alone and
// blamed METAROCE_ROOT/MASTER_ADDR.
func TestRendezvousRootCancelSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rctx, rcancel := context.WithCancelCause(ctx)
	defer rcancel(nil)
	done := make(chan error, 1)
	root := ln.Addr().String()
	goExchange(rctx, Bootstrap{Rank: 0, NRanks: 3, Root: root, Source: "slurm", Vars: BootstrapVars{Rank: "SLURM_PROCID", NRanks: "SLURM_NTASKS"}, listener: ln}, "zero", done)
	cause := errors.New("the operator stopped the job")
	rcancel(cause)
	err = recv(ctx, t, done, "rank 0's return")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, cause)
	require.ErrorContains(t, err, "rank 0: cancelled while ranks [1 2] of 3 had not joined the rendezvous at "+root+": context canceled: the operator stopped the job")
	assert.NotContains(t, err.Error(), "METAROCE_ROOT")
	assert.NotContains(t, err.Error(), "SLURM_PROCID")
}

// TestRendezvousOtherJobCancelled: a rank that another job's rank 0
// turned away, cancelled while it waits to try again, says it was
// cancelled, with the cause, and still that the address served another
// job; one whose deadline ran out names that deadline. Before, both said
// "until the deadline".
func TestRendezvousOtherJobCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	root := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lctx, lcancel := context.WithCancelCause(ctx)
	defer lcancel(nil)
	cause := errors.New("the operator stopped the job")
	done := make(chan error, 1)
	goExchange(lctx, Bootstrap{Rank: 1, NRanks: 2, Root: root, Source: "test", Job: "mine",
		turnedAway: func() { lcancel(cause) }}, "one", done)
	// Another job's rank 0: a frame of no ranks, tagged with its job.
	c, err := ln.Accept()
	require.NoError(t, err)
	defer c.Close()
	_, err = readFrame(c, 1)
	require.NoError(t, err)
	require.NoError(t, writeFrame(c, 0, 0, jobTag("theirs")))
	err = recv(ctx, t, done, "rank 1's return")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, cause)
	require.ErrorIs(t, err, errOtherJob)
	require.ErrorContains(t, err, "rank 1: the rendezvous at "+root+" served another job until this rank's setup was cancelled: ")
	require.ErrorContains(t, err, "context canceled: the operator stopped the job")
	require.NotContains(t, err.Error(), "deadline")

	past, pcancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer pcancel()
	err = otherJobErr(past, Bootstrap{Rank: 1, Root: root, deadline: setupDeadline{d: 30 * time.Second}}, errOtherJob)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "served another job until the setup deadline of 30s (Config.Timeout) ran out: ")
}

// TestRendezvousCancelReturnsAtOnce: a rank other than 0 whose context is
// cancelled while it waits for rank 0's table returns the cancel, with its
// cause, without waiting for rank 0's word: rank 0 (the test) sends the
// table only after the cancel, or nothing until the rank has returned.
// Before, the rank gave rank 0 a second's grace after a cancel as after a
// deadline: it took a table that came then and returned success, and
// otherwise returned a second later, without the cause.
func TestRendezvousCancelReturnsAtOnce(t *testing.T) {
	for _, table := range []bool{true, false} {
		t.Run(fmt.Sprintf("table after the cancel %v", table), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			lctx, lcancel := context.WithCancelCause(ctx)
			defer lcancel(nil)
			done := make(chan error, 1)
			go func() {
				_, err := exchange(lctx, Bootstrap{Rank: 1, NRanks: 2, Root: ln.Addr().String(), Source: "test"}, []byte("one"))
				done <- err
			}()
			c, err := ln.Accept()
			require.NoError(t, err)
			defer c.Close()
			_, err = readFrame(c, 1) // rank 1's hello: it now waits for the table
			require.NoError(t, err)
			cause := errors.New("the operator stopped the job")
			lcancel(cause)
			if table {
				_ = writeFrame(c, 0, 2, 0, []byte("zero"), []byte("one")) // fails where rank 1 has closed already
			}
			err = recv(ctx, t, done, "rank 1's return")
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, err, cause)
			require.ErrorContains(t, err, "rank 1: cancelled while waiting for the table from rank 0 at "+ln.Addr().String()+": context canceled: the operator stopped the job")
		})
	}
}
