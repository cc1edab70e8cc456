package tcpnet

import (
	"errors"
	"fmt"
	"strings"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/netdev"
)

// defaultSpeedMbps is reported when the kernel does not know the link speed
// (loopback, virtual NICs); it matches NCCL's socket transport.
const defaultSpeedMbps = 10000

// discoverDevices turns every interface the filter selects into one device.
func discoverDevices(f netdev.Filter, socks int) ([]backend.Device, error) {
	ifs, err := netdev.Select(f)
	if errors.Is(err, netdev.ErrNoMatch) {
		return nil, fmt.Errorf("tcpnet: %w: %w", err, backend.ErrInvalidUsage)
	}
	if err != nil {
		return nil, fmt.Errorf("tcpnet: %w", err)
	}
	devs := make([]backend.Device, 0, len(ifs))
	var dark []string
	for _, ifc := range ifs {
		if ifc.NoCarrier {
			// A TCP device has no plane to fail over to: one without a
			// carrier would only time out the peers that dial it.
			dark = append(dark, ifc.Name)
			continue
		}
		d := backend.Device{
			Name:      "metaroce_" + ifc.Name,
			IfName:    ifc.Name,
			PCIPath:   ifc.PCIPath,
			SpeedMbps: ifc.SpeedMbps,
			Addr:      ifc.Addr.String(),
			Planes:    1,
			Paths:     socks,
		}
		if d.SpeedMbps == 0 {
			d.SpeedMbps = defaultSpeedMbps
		}
		devs = append(devs, d)
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("tcpnet: the interfaces selected have no carrier (%s): plug them in, or name others in METAROCE_IFNAMES: %w", strings.Join(dark, ", "), backend.ErrInvalidUsage)
	}
	return devs, nil
}
