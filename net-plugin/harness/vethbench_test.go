package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
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
	for _, tool := range []string{"ip", "make", "gcc", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	if out, err := exec.Command("go", "env", "CGO_ENABLED").Output(); err == nil && strings.TrimSpace(string(out)) != "1" {
		t.Skip("cgo is off: the plugin is a c-shared library")
	}
	// Root without CAP_SYS_ADMIN (a container) cannot make namespaces.
	probe := fmt.Sprintf("mrvbprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
	before, _ := exec.Command("ip", "netns", "list").Output()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(), "net-plugin", "harness", "veth-bench.sh"), "1500", "1")
	// On the deadline the script gets SIGTERM, so that it removes its
	// namespaces, and its children a while to go.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("veth-bench.sh: %v\n%s", err, out)
	}
	for _, be := range []string{"udp", "tcp"} {
		if !regexp.MustCompile(`(?m)^` + be + ` goodput_GBps=[0-9.]+ isend_test_latency_us=[0-9.]+$`).Match(out) {
			t.Errorf("no %s result in\n%s", be, out)
		}
	}
	after, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(after), "\n") {
		if strings.HasPrefix(l, "mrvb") && !strings.Contains(string(before), l) {
			t.Errorf("namespace left behind: %s", l)
		}
	}
}
