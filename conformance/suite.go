package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// caseTimeout bounds one case, handshake included.
const caseTimeout = 10 * time.Second

// Env is what a case gets: the IUT and a seeded random source for ids and
// payloads, so a run is reproducible.
type Env struct {
	IUT IUT
	Rng *rand.Rand
	// lastMsg is the message a sender case asked the IUT to send.
	lastMsg []byte
}

// connect opens a fresh tester connection: handshake, then IUT.Accept. A
// failure here is reported by the caller as a failed case.
func (e *Env) connect(ctx context.Context) (*peer, error) {
	// Without its control channel the IUT cannot accept: say so at once
	// rather than after a handshake with what may be a dead process.
	if ctl, ok := e.IUT.(interface{ ControlErr() error }); ok {
		if err := ctl.ControlErr(); err != nil {
			return nil, fmt.Errorf("the IUT's control channel failed: %w", err)
		}
	}
	p, err := newPeer(e.IUT, e.Rng)
	if err != nil {
		return nil, err
	}
	if _, err := p.handshake(ctx); err != nil {
		p.closeSock()
		return nil, err
	}
	if err := e.IUT.Accept(ctx); err != nil && !errors.Is(err, ErrNoControl) {
		p.closeSock()
		return nil, fmt.Errorf("IUT accept: %w", err)
	}
	return p, nil
}

// Run runs cases in order against iut and returns one result each. seed
// makes connection ids, tokens and payloads reproducible.
func Run(ctx context.Context, iut IUT, cases []*Case, seed uint64) []Result {
	return RunProgress(ctx, iut, cases, seed, nil)
}

// RunProgress is Run, calling starting (when not nil) with each case and
// its index in cases as the case is reached, before it runs or is skipped,
// so that a caller can show how far a run of minutes has got.
func RunProgress(ctx context.Context, iut IUT, cases []*Case, seed uint64, starting func(i int, c *Case)) []Result {
	env := &Env{IUT: iut, Rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	rs := make([]Result, 0, len(cases))
	_, addrOnly := iut.(AddrIUT)
	ctl, _ := iut.(interface{ ControlErr() error })
	refusing, _ := iut.(interface{ completionsErr() error })
	for i, c := range cases {
		if starting != nil {
			starting(i, c)
		}
		if addrOnly && c.NeedsControl {
			rs = append(rs, Result{Case: c, Verdict: Skip, Evidence: "needs a control channel"})
			continue
		}
		// Once the run's time is over a case would wait no time and
		// fail with what it did not see (no HELLO_ACK), which blames
		// the IUT for a run given too little time.
		if ctx.Err() != nil {
			rs = append(rs, Result{Case: c, Verdict: Fail, Evidence: "not run: " + runEnded(ctx, "before this case")})
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, caseTimeout)
		v, ev := c.Run(cctx, env)
		cancel()
		if v == Fail && ctx.Err() != nil {
			ev += "; " + runEnded(ctx, "during this case, which may be why it failed")
		}
		if v == Fail && ctl != nil {
			// What the case waited for may have been lost with the
			// control channel (a completions reply that was garbage):
			// say so, unless the evidence does already.
			if err := ctl.ControlErr(); err != nil && !strings.Contains(ev, err.Error()) {
				ev += "; the IUT's control channel failed: " + err.Error()
			}
		}
		if v == Fail && refusing != nil {
			// Completions the IUT would not report look like
			// operations that never finished.
			if err := refusing.completionsErr(); err != nil {
				ev += "; the IUT refused the latest completions request: " + err.Error()
			}
		}
		rs = append(rs, Result{Case: c, Verdict: v, Evidence: ev})
	}
	return rs
}

// runEnded says how the run ended (ctx is done), when: its time ran out,
// with what to do about it, or it was stopped, with the cause ctx was
// cancelled with (a signal, for mrconform). A stopped run is not one given
// too little time, and saying so would send its user after the wrong fix.
func runEnded(ctx context.Context, when string) string {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.DeadlineExceeded) {
		return fmt.Sprintf("the run's time ran out %s (%v); give the run more time", when, cause)
	}
	return fmt.Sprintf("the run was stopped %s (%v)", when, cause)
}
