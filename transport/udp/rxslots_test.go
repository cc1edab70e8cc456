package udp

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/metaroce/metaroce/transport/udp/sockio"
	"github.com/metaroce/metaroce/transport/wire"
)

// TestRxRoundSlotsHoldAWholeMessage checks that one receive call has room
// for every datagram of an rxRoundBytes message, and for no more than one
// such message: with a slot too few, the short last datagram of a 512 KiB
// message over loopback waited for the next call.
func TestRxRoundSlotsHoldAWholeMessage(t *testing.T) {
	for _, tc := range []struct {
		per, want int
	}{
		{65000, 9}, // loopback: eight full datagrams and a short ninth
		{sockio.MaxDatagram, 9},
		{9000, 59},
		{1500, 364},
	} {
		got := rxRoundSlots(tc.per)
		assert.Equal(t, tc.want, got, "per %d", tc.per)
		payload := tc.per - wire.DataHeaderLen
		assert.GreaterOrEqual(t, got*payload, rxRoundBytes, "per %d: a message does not fit", tc.per)
		assert.Less(t, (got-1)*payload, rxRoundBytes, "per %d: more slots than a message needs", tc.per)
	}
}
