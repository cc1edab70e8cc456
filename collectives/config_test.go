package collectives

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/udp"
)

// TestConfigChunkDefault: the pipelining unit and the channel count default
// per transport and explicit values are kept.
func TestConfigChunkDefault(t *testing.T) {
	for _, tc := range []struct {
		transport    string
		chunk        int64
		channels     int
		want         int64
		wantChannels int
	}{
		{"", 0, 0, DefaultMetaRoCEChunkBytes, DefaultMetaRoCEChannels},
		{TransportMetaRoCE, 0, 0, DefaultMetaRoCEChunkBytes, DefaultMetaRoCEChannels},
		{TransportTCP, 0, 0, sched.DefaultChunkBytes, DefaultTCPChannels},
		{TransportMetaRoCE, 4096, 3, 4096, 3},
		{TransportTCP, 1 << 20, 1, 1 << 20, 1},
	} {
		c, err := Config{Transport: tc.transport, ChunkBytes: tc.chunk, Channels: tc.channels}.withDefaults()
		require.NoError(t, err)
		assert.Equal(t, tc.want, c.ChunkBytes, "transport %q chunk %d", tc.transport, tc.chunk)
		assert.Equal(t, tc.wantChannels, c.Channels, "transport %q channels %d", tc.transport, tc.channels)
		assert.Zero(t, c.AllToAllInFlight, "0: chosen per call (sched.AutoAllToAllInFlight)")
	}
	c, err := Config{AllToAllInFlight: 1}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 1, c.AllToAllInFlight, "an explicit lockstep is kept")
	assert.Equal(t, 1, c.UDP.Core.ConcurrentSenders, "the endpoint hears of the schedules' bound")
	c, err = Config{}.withDefaults()
	require.NoError(t, err)
	assert.Zero(t, c.UDP.Core.ConcurrentSenders, "with the automatic window each plan declares its senders")
	c, err = Config{UDP: udp.Config{Core: transport.Config{ConcurrentSenders: 9}}}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 9, c.UDP.Core.ConcurrentSenders, "an explicit bound is kept")
	_, err = Config{AllToAllInFlight: -1}.withDefaults()
	assert.ErrorContains(t, err, "all-to-all messages in flight")
}
