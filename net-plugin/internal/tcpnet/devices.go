package tcpnet

import (
	"errors"
	"fmt"

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
	for _, ifc := range ifs {
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
	return devs, nil
}
