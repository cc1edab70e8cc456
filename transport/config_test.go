package transport_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/cc"
	"github.com/stretchr/testify/require"
)

// TestConfigValidate: zero fields (the defaults) and values in range pass;
// a value out of range is refused with a *ConfigError (ErrInvalid) that
// names the field, its value and what it takes. The configurations the
// drivers build (the UDP runtime's, the simulator's) are among the valid.
func TestConfigValidate(t *testing.T) {
	big := make([]byte, 513)
	for _, tc := range []struct {
		name  string
		cfg   transport.Config
		field string // "" = valid
		want  string // a substring of the error
	}{
		{"zero", transport.Config{}, "", ""},
		{"scenario", baseCfg(), "", ""},
		{"udp-like", transport.Config{Listen: true, Planes: 16, PathsPerPlane: 64, EntropiesPerPlane: 64,
			MaxDatagram: 65000, MinRTO: 10 * transport.Millisecond, InboundRate: 12.5e9,
			IdleTimeout: 30 * transport.Second, HandshakeTimeout: transport.MaxTimeout,
			MaxConns: 1 << 20, MaxFlowsPerConn: 1 << 16, Addr: make([]byte, 512)}, "", ""},
		{"sim-like", transport.Config{Listen: true, Planes: 2, MaxDatagram: 576, MinRTO: 100 * transport.Microsecond,
			InitialRTT: 8 * transport.Microsecond, AckDelay: 2 * transport.Microsecond,
			TailProbeFloor: 4 * transport.Microsecond, ConcurrentSenders: 8}, "", ""},
		{"ceilings", transport.Config{MaxRTO: transport.MaxRTTScale, IdleTimeout: transport.MaxTimeout,
			KeepAlive: transport.MaxTimeout - 1, MaxPendingRecvs: 1 << 30, EntropiesPerPlane: 1 << 16}, "", ""},

		{"negative planes", transport.Config{Planes: -1}, "Planes", "is -1: want 1 to 16 planes"},
		{"too many planes", transport.Config{Planes: 17}, "Planes", "is 17: want 1 to 16 planes (a HELLO's limit), or 0 for the default 1"},
		{"too many paths", transport.Config{PathsPerPlane: 65}, "PathsPerPlane", "is 65: want 1 to 64 paths"},
		{"negative paths", transport.Config{PathsPerPlane: -4}, "PathsPerPlane", "is -4"},
		{"entropies below paths", transport.Config{PathsPerPlane: 8, EntropiesPerPlane: 4}, "EntropiesPerPlane",
			"is 4: want PathsPerPlane (8) to 65536 source ports"},
		{"entropies below default paths", transport.Config{EntropiesPerPlane: 2}, "EntropiesPerPlane", "PathsPerPlane (4)"},
		{"too many entropies", transport.Config{EntropiesPerPlane: 1<<16 + 1}, "EntropiesPerPlane", "is 65537"},
		{"small datagram", transport.Config{MaxDatagram: 312}, "MaxDatagram",
			"is 312: want 576 to 65535 bytes (a peer refuses a HELLO announcing less, and it carries 16 bits), or 0 for the default 4152"},
		{"huge datagram", transport.Config{MaxDatagram: 70000}, "MaxDatagram", "is 70000"},
		{"negative datagram", transport.Config{MaxDatagram: -1}, "MaxDatagram", "is -1"},
		{"negative MinRTO", transport.Config{MinRTO: -1}, "MinRTO",
			"is -1ns: want a positive duration of at most an hour (MaxRTTScale), or 0 for the default 1ms"},
		{"huge MaxRTO", transport.Config{MaxRTO: transport.MaxRTTScale + 1}, "MaxRTO", "at most an hour"},
		{"negative tail probe floor", transport.Config{TailProbeFloor: -1}, "TailProbeFloor", "default MinRTO/4"},
		{"huge InitialRTT", transport.Config{InitialRTT: 2 * transport.MaxRTTScale}, "InitialRTT", "at most an hour"},
		{"negative AckDelay", transport.Config{AckDelay: -5}, "AckDelay", "is -5ns"},
		{"overflowing IdleTimeout", transport.Config{IdleTimeout: 1 << 62}, "IdleTimeout",
			"at most 2^60 ns, about 36 years (MaxTimeout), or 0 for the default 5s"},
		{"negative KeepAlive", transport.Config{KeepAlive: -1}, "KeepAlive", "default IdleTimeout/3"},
		{"overflowing HandshakeTimeout", transport.Config{HandshakeTimeout: transport.MaxTimeout + 1}, "HandshakeTimeout", "MaxTimeout"},
		{"negative HandshakeRetry", transport.Config{HandshakeRetry: -1}, "HandshakeRetry", "default 50ms"},
		{"huge ProbeInterval", transport.Config{ProbeInterval: 1 << 61}, "ProbeInterval", "default 5 × MinRTO"},
		{"negative ActiveWindow", transport.Config{ActiveWindow: -1}, "ActiveWindow", "default 1ms"},
		{"MinRTO above MaxRTO", transport.Config{MinRTO: 300 * transport.Millisecond}, "MinRTO",
			"is 300ms: want at most MaxRTO (200ms)"},
		{"KeepAlive not below IdleTimeout", transport.Config{KeepAlive: 10 * transport.Second}, "KeepAlive",
			"is 10s: want less than IdleTimeout (5s)"},
		{"KeepAlive at IdleTimeout", transport.Config{KeepAlive: transport.Second, IdleTimeout: transport.Second}, "KeepAlive", "is 1s"},
		{"negative AckEvery", transport.Config{AckEvery: -1}, "AckEvery", "is -1: want a positive count, or 0 for the default 4"},
		{"negative BadPathTimeouts", transport.Config{BadPathTimeouts: -2}, "BadPathTimeouts", "default 2"},
		{"negative MaxConns", transport.Config{MaxConns: -1}, "MaxConns", "default 4096"},
		{"negative MaxFlowsPerConn", transport.Config{MaxFlowsPerConn: -1}, "MaxFlowsPerConn", "default 1024"},
		{"negative MaxPendingRecvs", transport.Config{MaxPendingRecvs: -1}, "MaxPendingRecvs", "is -1"},
		{"huge MaxPendingRecvs", transport.Config{MaxPendingRecvs: 1<<30 + 1}, "MaxPendingRecvs", "serial arithmetic"},
		{"negative MaxPendingSends", transport.Config{MaxPendingSends: -1}, "MaxPendingSends", "is -1"},
		{"negative ConcurrentSenders", transport.Config{ConcurrentSenders: -1}, "ConcurrentSenders", "is -1"},
		{"long address", transport.Config{Addr: big}, "Addr", "is 513 bytes: want at most 512 bytes"},
		{"negative window", transport.Config{CC: cc.Config{MaxWindow: -1}}, "CC", "Config.CC: cc: Config.MaxWindow is -1"},
		{"negative MSS", transport.Config{CC: cc.Config{MSS: -1}}, "CC", "MSS is -1"},
		{"negative InitRTT", transport.Config{CC: cc.Config{InitRTT: -1}}, "CC", "InitRTT is -1"},
		// The MSS follows MaxDatagram: two 9000-byte packets are above
		// a 16000-byte ceiling.
		{"window floor above ceiling", transport.Config{MaxDatagram: 9000, CC: cc.Config{MaxWindow: 16000, InitWindow: 16000}}, "CC",
			"MinWindow (18000 bytes) exceeds MaxWindow (16000 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			_, nerr := transport.New(tc.cfg, rand.New(rand.NewPCG(1, 1)))
			if tc.field == "" {
				require.NoError(t, err)
				require.NoError(t, nerr)
				return
			}
			require.ErrorIs(t, err, transport.ErrInvalid)
			var ce *transport.ConfigError
			require.True(t, errors.As(err, &ce), "%T", err)
			require.Equal(t, tc.field, ce.Field)
			require.ErrorContains(t, err, "metaroce: Config."+tc.field)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, err, nerr, "New returns what Validate says")
		})
	}
}

// TestInvalidConfigEndpointConnectsToNobody: an endpoint that NewEndpoint
// built from a configuration Validate refuses (here 17 planes, which a
// HELLO cannot announce) fails Dial at once with the validation's error,
// instead of sending HELLOs its peers refuse until HandshakeTimeout, and
// drops a peer's HELLO as not listening instead of answering it.
func TestInvalidConfigEndpointConnectsToNobody(t *testing.T) {
	bad := transport.NewEndpoint(transport.Config{Listen: true, Planes: 17}, rand.New(rand.NewPCG(1, 1)))
	_, err := bad.Dial(0, 1)
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "metaroce: Config.Planes is 17: want 1 to 16 planes")
	require.Zero(t, bad.NumConns())
	_, ok := bad.PollTransmit(0, make([]byte, 65536))
	require.False(t, ok, "the refused dial sent something")

	good := transport.NewEndpoint(transport.Config{}, rand.New(rand.NewPCG(2, 2)))
	_, err = good.Dial(0, 7)
	require.NoError(t, err)
	buf := make([]byte, 65536)
	tx, ok := good.PollTransmit(0, buf)
	require.True(t, ok, "no HELLO")
	bad.HandleDatagram(0, transport.Datagram{From: 2, Data: buf[:tx.N]})
	c := bad.Counters()
	require.Equal(t, uint64(1), c.Dropped[transport.DropNotListening])
	require.Zero(t, bad.NumConns())
	_, ok = bad.PollTransmit(0, buf)
	require.False(t, ok, "the HELLO was answered")
}
