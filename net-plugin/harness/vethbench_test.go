package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestVethBench runs net-plugin/harness/veth-bench.sh for one round: both
// backends move data between two network namespaces over a veth, the
// harness's sender placed in the second one by HARNESS_SENDER_NETNS. It
// checks that each backend reports a goodput, not what it is.
func TestVethBench(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	for _, tool := range []string{"ip", "make", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	if out, err := exec.Command("go", "env", "CGO_ENABLED").Output(); err == nil && strings.TrimSpace(string(out)) != "1" {
		t.Skip("cgo is off: the plugin is a c-shared library")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(), "net-plugin", "harness", "veth-bench.sh"), "1500", "1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("veth-bench.sh: %v\n%s", err, out)
	}
	for _, be := range []string{"udp", "tcp"} {
		if !regexp.MustCompile(`(?m)^` + be + ` goodput_GBps=[0-9.]+ isend_test_latency_us=[0-9.]+$`).Match(out) {
			t.Errorf("no %s result in\n%s", be, out)
		}
	}
	if n, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(n), "mrvb") {
		t.Errorf("namespaces left behind:\n%s", n)
	}
}
