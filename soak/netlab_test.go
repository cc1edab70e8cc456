package soak

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/metaroce/metaroce/netlab"
	"github.com/stretchr/testify/require"
)

// TestDrawKeepsAWayThrough draws many fault schedules and checks the
// invariants the netlab rounds rely on: loss rates within 1–10 %, links in
// range, held faults on distinct links, and never more than maxHardLinks
// links cut, held and injected faults together.
func TestDrawKeepsAWayThrough(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 2000; i++ {
		p := netlabRotation[i%len(netlabRotation)]
		static, busy := drawStatic(rng, p.static)
		require.Len(t, static, len(p.static), "round %q: a held fault found no link", p.name)
		links := map[int]bool{}
		cut := 0
		for _, a := range static {
			if a.kind == kindLinkLoss || a.kind == kindAllLoss {
				require.True(t, a.pct >= 1 && a.pct <= 10, "loss %v%%", a.pct)
			}
			if a.kind == kindAllLoss {
				continue
			}
			require.True(t, a.link >= 0 && a.link < netlabLinks)
			require.False(t, links[a.link], "two held faults on link %d", a.link)
			links[a.link] = true
			if hard(a.kind) {
				cut++
			}
		}
		for _, k := range p.dynamic {
			a, ok := draw(rng, k, busy)
			if !ok {
				continue
			}
			if k != kindAllLoss {
				require.False(t, links[a.link], "injected %v on a link with a held fault", a)
			}
			if hard(k) {
				require.LessOrEqual(t, cut+1, maxHardLinks, "%v would cut too many links", a)
			}
		}
	}
}

// TestRotationCoversEveryKind: each fault kind is held in some round and
// injected during some round, and one round kills a rank.
func TestRotationCoversEveryKind(t *testing.T) {
	held, injected, kill := map[string]bool{}, map[string]bool{}, false
	for _, p := range netlabRotation {
		for _, k := range p.static {
			held[k] = true
		}
		for _, k := range p.dynamic {
			injected[k] = true
		}
		kill = kill || p.kill
	}
	for _, k := range []string{kindLinkLoss, kindAllLoss, kindHole, kindCE, kindFlap} {
		require.True(t, injected[k], "%s never injected during a round", k)
		if k != kindFlap { // a link held down for a whole round is a blackhole the switch sees
			require.True(t, held[k], "%s never held for a round", k)
		}
	}
	require.True(t, kill)
}

// TestNetlabFallback: without a lab the run says why and injects
// driver-level faults instead.
func TestNetlabFallback(t *testing.T) {
	defer func(f func() error) { netlabAvailable = f }(netlabAvailable)
	netlabAvailable = func() error { return errors.New("netlab unavailable: not running as root") }
	rep, err := Run(context.Background(), Options{Netlab: true, Duration: time.Minute, MaxRounds: 2, OpsPerRound: 2, MaxCount: 64})
	require.NoError(t, err)
	require.Equal(t, "driver", rep.Mode)
	require.Equal(t, 2, rep.Rounds)
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], "not running as root")
	require.Contains(t, rep.String(), "note: netlab mode not possible")
	require.True(t, rep.Healthy(), "%v", rep)
}

// TestNetlabSoakShort runs three passes of the netlab rotation on a real
// namespace fabric: every collective under loss, black holes, CE marking
// and flaps must succeed and match the reference, the killed rank must be
// noticed, and every held fault kind must have been injected.
func TestNetlabSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric and soaks on it for a few seconds")
	}
	if err := netlab.Available(); err != nil {
		t.Skip(err)
	}
	n := 3 * len(netlabRotation)
	rep, err := Run(context.Background(), Options{Netlab: true, Duration: 15 * time.Second, MaxRounds: n,
		Seed: 5, OpsPerRound: 16, MaxCount: 1 << 16, Logf: t.Logf})
	require.NoError(t, err)
	t.Log(rep)
	for _, e := range rep.FirstErrors {
		t.Log(e)
	}
	require.Equal(t, "netlab", rep.Mode)
	require.Zero(t, rep.Corrupted)
	require.Zero(t, rep.Unexpected)
	require.Zero(t, rep.MissedKills)
	require.Positive(t, rep.Ops)
	if rep.Rounds < n {
		t.Skipf("only %d of %d rounds in %v on this loaded machine: fault coverage not checked", rep.Rounds, n, rep.Elapsed)
	}
	for _, k := range []string{kindLinkLoss, kindAllLoss, kindHole, kindCE, "kill a rank"} {
		require.Positive(t, rep.Faults[k], "fault kind %s", k)
	}
	require.Equal(t, 3, rep.KillRounds)
	require.Equal(t, 3, rep.Surfaced, "the survivor of each kill round reports it")
	require.Positive(t, rep.CERecv+rep.ECNMarks, "CE marking reached the receiver")
	require.LessOrEqual(t, rep.GoroutinesAfter, rep.GoroutinesBefore, "goroutines leaked")
	require.LessOrEqual(t, rep.FDsAfter, rep.FDsBefore, "file descriptors leaked")
}
