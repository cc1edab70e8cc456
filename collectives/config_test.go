package collectives

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/sched"
)

// TestConfigChunkDefault: the pipelining unit defaults per transport and an
// explicit value is kept.
func TestConfigChunkDefault(t *testing.T) {
	for _, tc := range []struct {
		transport string
		chunk     int64
		want      int64
	}{
		{"", 0, DefaultMetaRoCEChunkBytes},
		{TransportMetaRoCE, 0, DefaultMetaRoCEChunkBytes},
		{TransportTCP, 0, sched.DefaultChunkBytes},
		{TransportMetaRoCE, 4096, 4096},
		{TransportTCP, 1 << 20, 1 << 20},
	} {
		c, err := Config{Transport: tc.transport, ChunkBytes: tc.chunk}.withDefaults()
		require.NoError(t, err)
		assert.Equal(t, tc.want, c.ChunkBytes, "transport %q chunk %d", tc.transport, tc.chunk)
		assert.Equal(t, 2, c.Channels)
	}
}
