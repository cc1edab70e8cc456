package collectives

import (
	"context"
	"net/netip"
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
		leafWaitingLine(b, false, 5*time.Second, time.Second))
	assert.Equal(t, "rank 2: joined the rendezvous at 10.0.0.1:29517, waiting for the other ranks of 4 to join, after 5s",
		leafWaitingLine(b, true, 5*time.Second, -1))
	err := missingErr(Bootstrap{Rank: 0, NRanks: 3, Root: "h:1", Source: "slurm", Vars: BootstrapVars{Rank: "SLURM_PROCID", NRanks: "SLURM_NTASKS"}},
		[][]byte{[]byte("zero"), nil, nil}, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "ranks [1 2] of 3 never joined the rendezvous at h:1: context deadline exceeded; check that every rank")
	assert.ErrorContains(t, err, "SLURM_PROCID=0 and SLURM_NTASKS=3 do not belong to this run: unset them to run without slurm")
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
	go func() {
		b := Bootstrap{Rank: 0, NRanks: 3, Root: root, Source: "test", Progress: report, ProgressEvery: time.Millisecond,
			joined: func(r int) { joined <- r }}
		_, err := exchange(ctx, b, []byte("zero"))
		rootDone <- err
	}()
	leafDone := make(chan error, 2)
	go func() {
		_, err := exchange(ctx, Bootstrap{Rank: 1, NRanks: 3, Root: root, Source: "test"}, []byte("one"))
		leafDone <- err
	}()
	require.Equal(t, 1, <-joined)
	want := "rank 0: waiting for rank 2 (2 of 3 joined the rendezvous at " + root + ")"
	for l := range lines {
		if strings.HasPrefix(l, want) {
			break
		}
		require.Contains(t, l, "waiting for rank", "an unexpected line")
	}
	go func() {
		_, err := exchange(ctx, Bootstrap{Rank: 2, NRanks: 3, Root: root, Source: "test"}, []byte("two"))
		leafDone <- err
	}()
	require.NoError(t, <-rootDone)
	require.NoError(t, <-leafDone)
	require.NoError(t, <-leafDone)

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
	assert.Contains(t, <-leafLines, "rank 1: waiting for rank 0's rendezvous at "+nowhere+" to answer after")
	lcancel()
	require.Error(t, <-done)
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
