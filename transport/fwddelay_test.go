package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/cc"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestFwdDelaySample checks the receiver's forward-delay estimate of
// docs/spec.md §3.5: the excess of arrival − timestamp over its recent
// minimum, whatever the offset between the two clocks (here across the
// 2^32 wrap of the timestamps), in FwdDelayUnit and saturated; and a base
// that only held in the past is forgotten after two epochs.
func TestFwdDelaySample(t *testing.T) {
	for _, offset := range []uint32{0, 12345, 0xfffff000, 0x80000000} {
		var f fwdDelay
		send := Time(5 * Millisecond)
		at := func(sent, oneWay Time) uint16 {
			return f.sample(sent+oneWay, uint32(sent)+offset)
		}
		require.Equal(t, uint16(0), at(send, 10*Microsecond), "first sample is the base")
		require.Equal(t, uint16(3000/wire.FwdDelayUnit), at(send+Microsecond, 13*Microsecond), "offset %#x", offset)
		require.Equal(t, uint16(0), at(send+2*Microsecond, 9*Microsecond), "a quicker packet lowers the base")
		require.Equal(t, uint16(1000/wire.FwdDelayUnit), at(send+3*Microsecond, 10*Microsecond))
		require.Equal(t, uint16(wire.MaxFwdDelay), at(send+4*Microsecond, 9*Microsecond+3*Millisecond), "saturated")

		// The delay rises for good by 2 µs (a longer route, or the
		// clocks drifted): measured against the old base for up to two
		// epochs, then forgotten.
		t0 := send + 5*Microsecond
		require.Equal(t, uint16(2000/wire.FwdDelayUnit), at(t0, 11*Microsecond))
		require.Equal(t, uint16(2000/wire.FwdDelayUnit), at(t0+FwdDelayEpoch, 11*Microsecond), "previous epoch still counts")
		require.Equal(t, uint16(0), at(t0+2*FwdDelayEpoch+Microsecond, 11*Microsecond), "old base forgotten")
	}
}

// TestFwdDelayNeedsCapability checks that an ACK record carries a forward
// delay only to a peer that announced wire.CapFwdDelay (docs/spec.md §2.5):
// one that did not would drop it.
func TestFwdDelayNeedsCapability(t *testing.T) {
	for _, peerFwd := range []bool{false, true} {
		c := &Conn{peerFwd: peerFwd, ep: &Endpoint{cfg: Config{AckEvery: 4, AckDelay: Microsecond}}}
		c.cc = cc.NewAIMD(cc.Config{})
		h := &wire.Header{Op: wire.OpData, Path: 0}
		require.True(t, c.onSequenced(1000, h, ECN(0), 0, true))
		h.PSN = 1
		require.True(t, c.onSequenced(2000+5*Microsecond, h, ECN(0), 2000, true))
		var rec wire.AckRecord
		c.rxPathFor(0).record(3000+5*Microsecond, &rec)
		if peerFwd {
			require.Equal(t, uint16(4000/wire.FwdDelayUnit), rec.FwdDelay)
		} else {
			require.Zero(t, rec.FwdDelay)
		}
	}
}
