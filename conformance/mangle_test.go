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
var receiveCases = append([]string{"forged-token", "sack", "reorder", "out-of-bounds", "duplicate", "ecn-echo", "flow-aborted"}, placementIDs...)

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

// placementIDs are the cases of DATA that disagrees with its message, or
// is malformed where it would start it (placement.go).
var placementIDs = []string{"placement-index", "placement-length", "placement-offset", "placement-size", "placement-capacity",
	"placement-first", "placement-first-oversize"}

// allFail maps every id to the same evidence fragment.
func allFail(ids []string, why string) map[string]string {
	m := map[string]string{}
	for _, id := range ids {
		m[id] = why
	}
	return m
}

// TestBrokenReceivers: a receiver that breaks one rule fails the cases that
// check it, each with evidence that says so, and only those of the cases
// run beside them.
func TestBrokenReceivers(t *testing.T) {
	// overCopy's fault shows in every message that ends in a short
	// segment: the placement cases' do too.
	overCopied := allFail(placementIDs, "past the 2669-byte message written")
	overCopied["reorder"] = "past the 6101-byte message"
	overCopied["forged-token"] = "past the 100-byte message"
	for _, tc := range []struct {
		name  string
		sw    fakeSwitches
		fails map[string]string // case id → a fragment its evidence must hold
	}{
		// Answers DATA with a wrong token by a NACK UNKNOWN_CONN: not
		// silent, and it tells a forger that the connection id exists.
		{"NACKs a bad token", fakeSwitches{nackBadToken: true}, map[string]string{"forged-token": "NACK"}},
		// Checks only that a segment starts inside the buffer and places
		// what fits: a segment across the end is written before the
		// receive fails, and a malformed first DATA before it is
		// dropped, where its bytes past the message show.
		{"bounds by offset only", fakeSwitches{boundsByOffset: true}, map[string]string{"out-of-bounds": "written",
			"placement-first":          "buffer byte 2860 past the 2669-byte message written",
			"placement-first-oversize": "buffer byte 2669 past the 2669-byte message written"}},
		// Fails the receive of a message too long for its buffer
		// unwritten, but does not NACK it BAD_OFFSET with its length
		// (§3.4): no NACK, the sender's reason, or the DATA's offset.
		{"no NACK for an oversize message", fakeSwitches{oversizeNack: oversizeNone},
			map[string]string{"out-of-bounds": "no NACK within 3s of the DATA, want BAD_OFFSET value 2288"}},
		{"NACKs an oversize message TOO_LARGE", fakeSwitches{oversizeNack: oversizeTooLarge},
			map[string]string{"out-of-bounds": "NACK TOO_LARGE value 2288, want BAD_OFFSET value 2288"}},
		{"NACKs an oversize message with the offset", fakeSwitches{oversizeNack: oversizeOffset},
			map[string]string{"out-of-bounds": "NACK BAD_OFFSET value 1144, want BAD_OFFSET value 2288"}},
		{"accepts a bad token", fakeSwitches{acceptBadToken: true}, map[string]string{"forged-token": "forged DATA acknowledged"}},
		{"ignores ECN", fakeSwitches{ignoreCE: true}, map[string]string{"ecn-echo": "ce 0"}},
		// Drops a duplicate PSN without acknowledging it: a sender whose
		// ACK was lost would wait for its timer (§3.1).
		{"duplicate unanswered", fakeSwitches{silentDuplicate: true}, map[string]string{"duplicate": "not acknowledged"}},
		// Writes past the end of the message, inside the buffer: every
		// message with a short last segment shows it.
		{"copies past the message", fakeSwitches{overCopy: true}, overCopied},
		// Drops DATA that disagrees with its message unwritten, but
		// sends no NACK BAD_OFFSET (§3.4).
		{"no NACK for a bad placement", fakeSwitches{placement: placementNone},
			allFail(placementIDs, "drew no NACK within 3s, want BAD_OFFSET value")},
		// NACKs it right but places it anyway: its payload lands in
		// the buffer, where the message's own DATA then finds its
		// segment taken.
		{"places a NACKed placement", fakeSwitches{placement: placementWrites},
			allFail(placementIDs, " of the malformed DATA's ")},
		// NACKs it right but fails the whole receive, as for a first
		// DATA too long for the buffer: §3.4 drops the DATA alone.
		{"fails the receive on a bad placement", fakeSwitches{placement: placementFails},
			allFail(placementIDs, "the receive failed (DATA disagrees with its message) on DATA [")},
		// NACKs it with the message's length, the value of a message
		// too long for its buffer, instead of the DATA's offset (§2.7).
		{"NACKs a bad placement with the length", fakeSwitches{placement: placementValueLen},
			allFail(placementIDs, ", want BAD_OFFSET value ")},
		// Takes a malformed first DATA's length for the message's
		// before dropping it: the message's own DATA are refused since
		// (NACKed at their offsets), and the receive never completes.
		{"starts the message from a malformed first DATA", fakeSwitches{firstData: firstDataStarts},
			map[string]string{
				"placement-first":          "no completion within 3s of the message's last DATA, sent after DATA [2860, 3432) index 0 of a 3432-byte message (the receive's first DATA, ",
				"placement-first-oversize": "; 3 more NACK(s) came after it: BAD_OFFSET value 0, BAD_OFFSET value 1144, BAD_OFFSET value 2288",
			}},
		// Checks a first DATA's length against the capacity before its
		// form: a malformed one naming a message longer than the buffer
		// fails the buffer, which only a well-formed one does (§3.4).
		{"fails the buffer on a malformed first DATA too long for it", fakeSwitches{firstData: firstDataLengthFirst},
			map[string]string{"placement-first-oversize": "the receive failed (message larger than the posted buffer) "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newFakeWith(false, tc.sw)
			require.NoError(t, err)
			defer f.Close()
			ids := append([]string{"forged-token", "reorder", "out-of-bounds", "duplicate", "ecn-echo"}, placementIDs...)
			rs := runCases(t, f, ids...)
			for id, r := range rs {
				want := conformance.Pass
				if _, ok := tc.fails[id]; ok {
					want = conformance.Fail
				}
				require.Equal(t, want, r.Verdict, "%s: %s", id, r.Evidence)
			}
			for id, why := range tc.fails {
				require.Contains(t, rs[id].Evidence, why, id)
			}
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
