package conformance

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunOutOfTime: cases the run had no time left for fail as not run,
// and a case cut short by the end of the run says so. They failed with
// what a case sees when it waits no time, "setup: no HELLO_ACK", which
// blamed the IUT for a --timeout too short.
func TestRunOutOfTime(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ran := []string{}
	cut := &Case{ID: "cut", Level: Mandatory, Run: func(context.Context, *Env) (Verdict, string) {
		ran = append(ran, "cut")
		cancel(context.DeadlineExceeded) // the run's time ends while this case waits
		return Fail, "setup: no HELLO_ACK"
	}}
	after := &Case{ID: "after", Level: Mandatory, Run: func(context.Context, *Env) (Verdict, string) {
		ran = append(ran, "after")
		return Fail, "setup: no HELLO_ACK"
	}}
	iut := AddrIUT(netip.MustParseAddrPort("127.0.0.1:9"))
	rs := Run(ctx, iut, []*Case{cut, after}, 1)
	require.Equal(t, []string{"cut"}, ran, "no case starts once the run's time is over")
	require.Len(t, rs, 2)
	require.Equal(t, Fail, rs[0].Verdict)
	require.True(t, strings.HasPrefix(rs[0].Evidence, "setup: no HELLO_ACK; "), rs[0].Evidence)
	require.Contains(t, rs[0].Evidence, "the run's time ran out during this case")
	require.Equal(t, Fail, rs[1].Verdict, "a mandatory case not run is not a pass")
	require.True(t, strings.HasPrefix(rs[1].Evidence, "not run: the run's time ran out before this case"), rs[1].Evidence)
	require.NotContains(t, rs[1].Evidence, "HELLO_ACK")
}

// TestRunStopped: a run stopped from outside (mrconform on SIGINT or
// SIGTERM) fails the cases it did not reach as not run and names the
// cause; neither they nor the case it cut short tell the user to give the
// run more time, as they did, since more time would not have helped.
func TestRunStopped(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	interrupted := errors.New("interrupt signal received")
	cut := &Case{ID: "cut", Level: Mandatory, Run: func(context.Context, *Env) (Verdict, string) {
		cancel(interrupted)
		return Fail, "setup: no HELLO_ACK"
	}}
	after := &Case{ID: "after", Level: Mandatory, Run: func(context.Context, *Env) (Verdict, string) {
		t.Error("a case started after the run was stopped")
		return Pass, ""
	}}
	rs := Run(ctx, AddrIUT(netip.MustParseAddrPort("127.0.0.1:9")), []*Case{cut, after}, 1)
	require.Len(t, rs, 2)
	require.Equal(t, Fail, rs[0].Verdict)
	require.Equal(t, "setup: no HELLO_ACK; the run was stopped during this case, which may be why it failed (interrupt signal received)", rs[0].Evidence)
	require.Equal(t, Fail, rs[1].Verdict)
	require.Equal(t, "not run: the run was stopped before this case (interrupt signal received)", rs[1].Evidence)
	for _, r := range rs {
		require.NotContains(t, r.Evidence, "more time", r.Case.ID)
	}
}

// TestRunProgressSeesEveryCase: the progress hook is called once per case,
// in order, before the case runs, skipped and not-run cases included.
func TestRunProgressSeesEveryCase(t *testing.T) {
	var log []string
	run := func(id string) *Case {
		return &Case{ID: id, Level: Mandatory, Run: func(context.Context, *Env) (Verdict, string) {
			log = append(log, "run "+id)
			return Pass, ""
		}}
	}
	ctl := run("ctl")
	ctl.NeedsControl = true // skipped for an address alone
	cases := []*Case{run("a"), ctl, run("b")}
	rs := RunProgress(context.Background(), AddrIUT(netip.MustParseAddrPort("127.0.0.1:9")), cases, 1, func(i int, c *Case) {
		require.Same(t, cases[i], c)
		log = append(log, "start "+c.ID)
	})
	require.Len(t, rs, 3)
	require.Equal(t, []string{"start a", "run a", "start ctl", "start b", "run b"}, log)
}
