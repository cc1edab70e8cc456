package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestOvertakenFalseAlarmsLeaveTheFloor: a queue that comes and goes on
// plane 0 holds node 0's packets there longer, for window every
// period, while plane 1 runs free. The other plane's acknowledgements
// overtake plane 0's packets and the overtaken rule, whose deadline
// (2·srtt + 4·rttvar) has no floor, gives them up: the acknowledgements
// that follow show every such expiry needless, and they all come well
// within MinRTO. The tail-loss timer never fired, so its adaptive floor
// has nothing to learn from them (docs/spec.md §3.2: the overtaken-packet
// deadline does not use the floor). Raising it for each doubled the floor
// per spike, to MaxRTO within a dozen spikes, after which every tail loss
// that a probe does not repair waits 200 ms.
func TestOvertakenFalseAlarmsLeaveTheFloor(t *testing.T) {
	const (
		period = 500 * transport.Microsecond
		window = 200 * transport.Microsecond
		hold   = 30 * transport.Microsecond
		spikes = 40
	)
	n, ca := streaming(t, baseNet(7), 256<<20)
	start := n.Now()
	held := 0
	n.ExtraDelay = func(p *transporttest.Packet, departs transport.Time) transport.Time {
		if p.Src != 0 || p.Route.Plane != 0 || departs < start || departs >= start+spikes*period {
			return 0
		}
		if (departs-start)%period < window {
			held++
			return hold
		}
		return 0
	}
	require.NoError(t, n.RunFor(spikes*period))
	st := connStats(t, n, ca)
	t.Logf("held %d packets; timeouts %d (spurious %d), path moves %d, lost %d (spurious %d)",
		held, st.Timeouts, st.SpuriousTimeouts, st.PathChanges, st.Lost, st.Spurious)
	require.Positive(t, st.SpuriousTimeouts, "the spikes should have made the overtaken rule give packets up needlessly")
	cfg := n.Node(0).EP.Config()
	for i := 0; i < cfg.Planes*cfg.PathsPerPlane; i++ {
		ps, ok := n.Node(0).EP.PathStats(ca, i)
		require.True(t, ok)
		t.Logf("path %d plane %d: sent %d timeouts %d (spurious %d) floor %v rtt %v", i, ps.Plane, ps.PacketsSent, ps.Timeouts, ps.SpuriousTimeouts, ps.RTOFloor, ps.RTT)
		// Every acknowledgement came within hold plus a few RTTs,
		// below MinRTO: nothing calls for a floor above MinRTO.
		require.LessOrEqual(t, ps.RTOFloor, cfg.MinRTO, "path %d: floor %v (MaxRTO %v) raised by overtaken-rule expiries", i, ps.RTOFloor, cfg.MaxRTO)
	}
}
