package scenarios

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStreamLongerThanSendQueue: a flow of more messages than the MetaRoCE
// core queues (Config.MaxPendingSends, 4,096) is handed over as sends
// complete and arrives whole on both protocols. When the workload handed
// it over at once, the core refused every send past the bound, the
// refusal went unreported, and the flow stopped after 4,096 messages:
// throughput fell to 0 mid-run at 1600 Gb/s links in the failure scenario.
func TestStreamLongerThanSendQueue(t *testing.T) {
	const msgs, msg = 5000, 1024
	for _, proto := range []string{MetaRoCE, RoCEv2} {
		t.Run(proto, func(t *testing.T) {
			o := Options{Smoke: true}
			o.fill()
			s, err := build(&o, o.fabric(2, 2, 1, 1), proto)
			require.NoError(t, err)
			j := newJob(s, streams(2, [][2]int{{0, 1}}, msg, msgs))
			var got, n uint64
			j.onRecv = func(_ int64, h, from int, b uint64) {
				if h == 1 && from == 0 {
					got += b
					n++
				}
			}
			r := &runner{ctx: context.Background(), o: &o}
			require.NoError(t, r.run(s, j, 1_000_000_000, func() bool { return j.Finished == 2 || j.Err != nil }))
			require.NoError(t, j.Err)
			require.NoError(t, j.Refused)
			assert.Equal(t, 2, j.Finished)
			assert.Equal(t, uint64(msgs), n)
			assert.Equal(t, uint64(msgs*msg), got)
		})
	}
}

// TestRefusedCallReported: a call the transport refuses (here a send
// larger than it takes) is kept as the job's Refused error, naming the host
// and the peer, so a scenario reports it instead of figures.
func TestRefusedCallReported(t *testing.T) {
	o := Options{Smoke: true}
	o.fill()
	s, err := build(&o, o.fabric(2, 2, 1, 1), MetaRoCE)
	require.NoError(t, err)
	j := newJob(s, streams(2, [][2]int{{0, 1}}, 1<<62, 1))
	r := &runner{ctx: context.Background(), o: &o}
	require.NoError(t, r.run(s, j, 10_000_000, func() bool { return j.Refused != nil }))
	require.Error(t, j.Refused)
	assert.Contains(t, j.Refused.Error(), "host 0: send to host 1")
}
