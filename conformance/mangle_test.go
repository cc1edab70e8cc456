package conformance_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaroce/metaroce/conformance"
	"github.com/stretchr/testify/require"
)

// mangledIUT is the fake IUT behind a control side that misreports: every
// completion passes through mangle before the tester sees it, and inject,
// when set, adds completions of its own after each PostRecv. It stands for
// an implementation whose control channel lies or answers garbage.
type mangledIUT struct {
	*fakeIUT
	mangle func(conformance.Completion) conformance.Completion
	inject func(flow uint32) []conformance.Completion

	out  chan conformance.Completion
	stop chan struct{}
	wg   sync.WaitGroup
}

func newMangled(t *testing.T, mangle func(conformance.Completion) conformance.Completion) *mangledIUT {
	t.Helper()
	f, err := newFakeIUT(false)
	require.NoError(t, err)
	m := &mangledIUT{fakeIUT: f, mangle: mangle, out: make(chan conformance.Completion, 64), stop: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			select {
			case c := <-f.Completions():
				if m.mangle != nil {
					c = m.mangle(c)
				}
				select {
				case m.out <- c:
				case <-m.stop:
					return
				}
			case <-m.stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(m.stop)
		m.wg.Wait()
		f.Close()
	})
	return m
}

func (m *mangledIUT) PostRecv(ctx context.Context, flow uint32, caps []uint64, tags []uint32) error {
	if err := m.fakeIUT.PostRecv(ctx, flow, caps, tags); err != nil {
		return err
	}
	if m.inject != nil {
		for _, c := range m.inject(flow) {
			m.out <- c
		}
	}
	return nil
}

func (m *mangledIUT) Completions() <-chan conformance.Completion { return m.out }

// runCases runs the named cases against iut and returns their results by id.
func runCases(t *testing.T, iut conformance.IUT, ids ...string) map[string]conformance.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[string]conformance.Result{}
	for _, r := range conformance.Run(ctx, iut, casesByID(ids...), 2) {
		t.Logf("%s %s: %s", r.Case.ID, r.Verdict, r.Evidence)
		out[r.Case.ID] = r
	}
	require.Len(t, out, len(ids))
	return out
}

// receiveCases are the cases that judge the buffers of a receive completion.
var receiveCases = []string{"forged-token", "sack", "reorder", "out-of-bounds", "duplicate", "ecn-echo", "flow-aborted"}

// TestCompletionWithoutBuffers: a receive completion that reports no
// buffer at all fails the case that waited for it, with a reason; it must
// not crash the tester (it indexed the missing buffer).
func TestCompletionWithoutBuffers(t *testing.T) {
	m := newMangled(t, func(c conformance.Completion) conformance.Completion {
		c.Bufs = nil
		return c
	})
	for id, r := range runCases(t, m, receiveCases...) {
		require.Equal(t, conformance.Fail, r.Verdict, "%s: %s", id, r.Evidence)
		require.Contains(t, r.Evidence, "0 buffers, posted 1", id)
	}
}

// TestCompletionWithShortBuffer: a completion whose buffer is shorter than
// the capacity posted proves nothing about the bytes it leaves out. The
// guard-byte checks passed such a buffer as "intact" when it was empty.
func TestCompletionWithShortBuffer(t *testing.T) {
	m := newMangled(t, func(c conformance.Completion) conformance.Completion {
		for i := range c.Bufs {
			c.Bufs[i] = c.Bufs[i][:0]
		}
		return c
	})
	for id, r := range runCases(t, m, receiveCases...) {
		require.Equal(t, conformance.Fail, r.Verdict, "%s: %s", id, r.Evidence)
		require.Contains(t, r.Evidence, "buffer of 0 bytes, posted", id)
	}
}

// TestForgedTokenOtherFlow: a completion of another flow (a late one of an
// earlier case's receive, say) says nothing about the forged DATA, which
// was for flow 2; forged-token used to fail on any completion at all.
func TestForgedTokenOtherFlow(t *testing.T) {
	m := newMangled(t, nil)
	m.inject = func(flow uint32) []conformance.Completion {
		return []conformance.Completion{{Flow: flow + 1000, Bufs: [][]byte{nil}, Err: "an older receive failed"}}
	}
	r := runCases(t, m, "forged-token")["forged-token"]
	require.Equal(t, conformance.Pass, r.Verdict, r.Evidence)
}

// TestBrokenReceivers: a receiver that breaks one rule fails the case that
// checks it, and only that one of the cases run beside it.
func TestBrokenReceivers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sw    fakeSwitches
		fails string
		why   string
		also  string // a second case that fails for the same fault
	}{
		// Answers DATA with a wrong token by a NACK UNKNOWN_CONN: not
		// silent, and it tells a forger that the connection id exists.
		{"NACKs a bad token", fakeSwitches{nackBadToken: true}, "forged-token", "NACK", ""},
		// Checks only that a segment starts inside the buffer and places
		// what fits: a segment across the end is written before the
		// receive fails.
		{"bounds by offset only", fakeSwitches{boundsByOffset: true}, "out-of-bounds", "written", ""},
		// Fails the receive of a message too long for its buffer
		// unwritten, but does not NACK it BAD_OFFSET with its length
		// (§3.4): no NACK, the sender's reason, or the DATA's offset.
		{"no NACK for an oversize message", fakeSwitches{oversizeNack: oversizeNone}, "out-of-bounds",
			"no NACK within 3s of the DATA, want BAD_OFFSET value 2288", ""},
		{"NACKs an oversize message TOO_LARGE", fakeSwitches{oversizeNack: oversizeTooLarge}, "out-of-bounds",
			"NACK TOO_LARGE value 2288, want BAD_OFFSET value 2288", ""},
		{"NACKs an oversize message with the offset", fakeSwitches{oversizeNack: oversizeOffset}, "out-of-bounds",
			"NACK BAD_OFFSET value 1144, want BAD_OFFSET value 2288", ""},
		{"accepts a bad token", fakeSwitches{acceptBadToken: true}, "forged-token", "forged DATA acknowledged", ""},
		{"ignores ECN", fakeSwitches{ignoreCE: true}, "ecn-echo", "ce 0", ""},
		// Drops a duplicate PSN without acknowledging it: a sender whose
		// ACK was lost would wait for its timer (§3.1).
		{"duplicate unanswered", fakeSwitches{silentDuplicate: true}, "duplicate", "not acknowledged", ""},
		// Writes past the end of the message, inside the buffer: every
		// message with a short last segment shows it.
		{"copies past the message", fakeSwitches{overCopy: true}, "reorder", "past the 6101-byte message", "forged-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newFakeWith(false, tc.sw)
			require.NoError(t, err)
			defer f.Close()
			ids := []string{"forged-token", "reorder", "out-of-bounds", "duplicate", "ecn-echo"}
			rs := runCases(t, f, ids...)
			for id, r := range rs {
				want := conformance.Pass
				if id == tc.fails || id == tc.also {
					want = conformance.Fail
				}
				require.Equal(t, want, r.Verdict, "%s: %s", id, r.Evidence)
			}
			require.Contains(t, rs[tc.fails].Evidence, tc.why)
		})
	}
}

// TestTailResegmented: a sender that retransmits the lost tail under
// another offset (cut differently from the first copy, which no receiver
// places, §3.4) has not retransmitted the tail. The case used to find no
// retransmission, measure a time from the zero time and pass.
func TestTailResegmented(t *testing.T) {
	f, err := newFakeWith(false, fakeSwitches{resegment: true})
	require.NoError(t, err)
	defer f.Close()
	r := runCases(t, f, "tail-loss")["tail-loss"]
	require.Equal(t, conformance.Fail, r.Verdict, r.Evidence)
	require.True(t, strings.Contains(r.Evidence, "no retransmission"), r.Evidence)
}

// TestNotReadyWrongToken: a NACK NOT_READY that is right but for its token
// fails, and the evidence names the token. It read "NACK NotReady msg 0
// value 1144, want NotReady msg 0 value 1144", which contradicts itself.
func TestNotReadyWrongToken(t *testing.T) {
	f, err := newFakeWith(false, fakeSwitches{notReadyBadToken: true})
	require.NoError(t, err)
	defer f.Close()
	r := runCases(t, f, "not-ready")["not-ready"]
	require.Equal(t, conformance.Fail, r.Verdict, r.Evidence)
	require.Contains(t, r.Evidence, "token", r.Evidence)
}

// TestUnknownConnWrongReason: a NACK of the wrong reason for DATA to an
// unknown connection fails, and the evidence names the reason expected
// beside the one seen. It read "NACK reason receiver not ready" alone.
func TestUnknownConnWrongReason(t *testing.T) {
	f, err := newFakeWith(false, fakeSwitches{unknownConnNotReady: true})
	require.NoError(t, err)
	defer f.Close()
	r := runCases(t, f, "unknown-conn")["unknown-conn"]
	require.Equal(t, conformance.Fail, r.Verdict, r.Evidence)
	require.Equal(t, "NACK reason receiver not ready, want unknown connection", r.Evidence)
}
