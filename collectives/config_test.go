package collectives

import (
	"net/netip"
	"testing"
	"time"

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

// TestConfigLoopbackPaths: a MetaRoCE rank on loopback addresses only
// (none given means 127.0.0.1) takes LoopbackPathsPerPlane; any other
// address, a blackholing driver, an explicit count or the TCP baseline
// leaves the count as given (0: the datapath's default).
func TestConfigLoopbackPaths(t *testing.T) {
	lo4, lo6 := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("::1")
	mapped := netip.MustParseAddr("::ffff:127.0.0.1")
	lan := netip.MustParseAddr("10.1.2.3")
	for _, tc := range []struct {
		name      string
		transport string
		addrs     []netip.Addr
		blackhole []int
		paths     int
		want      int
	}{
		{"default address", "", nil, nil, 0, LoopbackPathsPerPlane},
		{"loopback planes", TransportMetaRoCE, []netip.Addr{lo4, lo6, mapped}, nil, 0, LoopbackPathsPerPlane},
		{"one plane off loopback", TransportMetaRoCE, []netip.Addr{lo4, lan}, nil, 0, 0},
		{"blackholed ports", TransportMetaRoCE, nil, []int{3}, 0, 0},
		{"explicit", TransportMetaRoCE, nil, nil, 3, 3},
		{"tcp", TransportTCP, nil, nil, 0, 0},
	} {
		cfg := Config{Transport: tc.transport}
		cfg.UDP.Addrs, cfg.UDP.Blackhole, cfg.UDP.Core.PathsPerPlane = tc.addrs, tc.blackhole, tc.paths
		c, err := cfg.withDefaults()
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, c.UDP.Core.PathsPerPlane, tc.name)
	}
}

// TestConfigNegativeRefused: a negative channel count, chunk or timeout,
// or more channels than 64, is an error naming the field, not the default in disguise (a timeout of -1
// read as 60 s broke a communicator whose caller meant "none").
func TestConfigNegativeRefused(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Channels: -3}, "Config.Channels"},
		{Config{ChunkBytes: -1}, "Config.ChunkBytes"},
		{Config{Timeout: -time.Second}, "Config.Timeout"},
		{Config{Transport: TransportTCP, Timeout: -1}, "Config.Timeout"},
		{Config{GroupSize: -2}, "group size"},
		// Too many is named as well, with the bound.
		{Config{Channels: 65}, "65 channels (Config.Channels), want 1 to 64"},
	} {
		_, err := tc.cfg.withDefaults()
		assert.ErrorContains(t, err, tc.want, "%+v", tc.cfg)
	}
}

// TestHandshakeTimeoutFollowsTimeout: the MetaRoCE handshake may take as
// long as the communicator's setup (Config.Timeout), not the core's fixed
// default, so that raising the deadline for a large job on a loaded host
// raises both. An explicit Core.HandshakeTimeout is kept, and the idle
// timeout that reports a dead rank during a collective is left alone. The
// endpoint the communicator opens is checked too: that is the
// configuration its dials run under.
func TestHandshakeTimeoutFollowsTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		handshake transport.Time
	}{
		{"default timeout", Config{}, 60 * transport.Second},
		{"raised timeout", Config{Timeout: 10 * time.Minute}, 600 * transport.Second},
		{"lowered timeout", Config{Timeout: 1500 * time.Millisecond}, 1500 * transport.Millisecond},
		{"explicit handshake timeout", Config{Timeout: 10 * time.Minute, UDP: udp.Config{Core: transport.Config{HandshakeTimeout: 2 * transport.Second}}},
			2 * transport.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.cfg.withDefaults()
			require.NoError(t, err)
			assert.Equal(t, tc.handshake, c.UDP.Core.HandshakeTimeout)
			assert.Equal(t, tc.cfg.UDP.Core.IdleTimeout, c.UDP.Core.IdleTimeout, "the dead-peer timeout is not the setup deadline")

			c.UDP.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
			f, err := newMetaroceFactory(c)
			require.NoError(t, err)
			defer f.abort()
			got := f.ep.Config().Core
			assert.Equal(t, tc.handshake, got.HandshakeTimeout, "the endpoint's handshake timeout")
			assert.Equal(t, 5*transport.Second, got.IdleTimeout, "the core's default dead-peer timeout")
		})
	}
}
