package udp

import (
	"errors"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/cc"
	"github.com/stretchr/testify/require"
)

// TestListenValidatesCore: a Core field out of the core's range fails
// Listen with the core's *transport.ConfigError naming the field, instead
// of an endpoint that listens and then fails every Dial. A negative
// PathsPerPlane or MinRTO used to be read as the driver's default, where
// the core refuses a negative value as meaning something the default is
// not; and a MaxRTO below the driver's loopback MinRTO passed Listen.
func TestListenValidatesCore(t *testing.T) {
	for _, tc := range []struct {
		name  string
		core  transport.Config
		field string
	}{
		{"MaxRTO beyond an hour", transport.Config{MaxRTO: transport.MaxRTTScale + 1}, "MaxRTO"},
		{"negative MinRTO", transport.Config{MinRTO: -1}, "MinRTO"},
		{"negative PathsPerPlane", transport.Config{PathsPerPlane: -2}, "PathsPerPlane"},
		// The driver's loopback MinRTO (10 ms) above the user's MaxRTO.
		{"MaxRTO below the driver's MinRTO", transport.Config{MaxRTO: 5 * transport.Millisecond}, "MinRTO"},
		{"KeepAlive not below IdleTimeout", transport.Config{KeepAlive: transport.Second, IdleTimeout: transport.Second}, "KeepAlive"},
		{"CC windows", transport.Config{CC: cc.Config{MinWindow: 1 << 20, MaxWindow: 1 << 16}}, "CC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Listen(Config{Addrs: lo, Core: tc.core})
			if err == nil {
				e.Close()
			}
			var ce *transport.ConfigError
			require.True(t, errors.As(err, &ce), "Listen returned %v, want a *transport.ConfigError", err)
			require.Equal(t, tc.field, ce.Field)
			require.ErrorIs(t, err, transport.ErrInvalid)
			require.ErrorContains(t, err, "udp: Config.Core: ")
			require.ErrorContains(t, err, "Config."+tc.field)
		})
	}
}

// TestListenCoreFieldsTheDriverFills: the Core fields the driver fills in
// are its own, whatever the user left there, and the values it derives from
// its own bounds pass the core's checks: the smallest and largest
// MaxDatagram with and without a secret (whose trailer the core's
// MaxDatagram leaves out), and the most ports per plane.
func TestListenCoreFieldsTheDriverFills(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	for _, cfg := range []Config{
		{MaxDatagram: 576},
		{MaxDatagram: 600, Secret: secret},
		{MaxDatagram: maxDatagramUpperBound, Secret: secret},
		{PortsPerPlane: maxPortsPerPlane},
		{Core: transport.Config{MaxDatagram: -1, Planes: 99, EntropiesPerPlane: -1, Addr: make([]byte, 1000)}},
	} {
		cfg.Addrs = lo
		e, err := Listen(cfg)
		require.NoError(t, err, "MaxDatagram %d, secret %v, %d ports", cfg.MaxDatagram, cfg.Secret != nil, cfg.PortsPerPlane)
		require.NoError(t, e.Close())
	}
}
