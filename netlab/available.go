package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// Available returns nil when this process can build labs, or an error naming
// what is missing: root privileges, the ip tool (iproute2) or the nft tool
// (nftables).
func Available() error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("not running as root"))
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			errs = append(errs, fmt.Errorf("%s not found in PATH (install %s)", tool, map[string]string{"ip": "iproute2", "nft": "nftables"}[tool]))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("netlab unavailable: %w", errors.Join(errs...))
	}
	return nil
}
