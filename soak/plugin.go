package soak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/metaroce/metaroce/internal/pluginbuild"
)

// modulePath is the module whose root holds net-plugin/ and include/.
const modulePath = "github.com/metaroce/metaroce"

// errNoCompiler says the plugin rounds cannot run on this machine: gcc
// (for the C harness) or the go command (for the c-shared plugin) is
// missing, or cgo is off.
var errNoCompiler = errors.New("no compiler")

// Limits of plugin rounds: building takes minutes on a loaded 2-core host
// with a cold cache; one harness run (two processes, each with its own
// 20 s deadlines, plus a reload) well under a minute.
const (
	pluginBuildTimeout = 10 * time.Minute
	harnessTimeout     = 90 * time.Second
	// pluginKillEvery makes every fourth plugin round a kill scenario.
	pluginKillEvery = 4
	// pluginTimeoutMs is METAROCE_TIMEOUT_MS of the harness: the receiver
	// of a kill scenario declares its dead sender after this long.
	pluginTimeoutMs = 2000
)

// lookPath is exec.LookPath; tests replace it to take the no-compiler path.
var lookPath = exec.LookPath

// cgoOff reports whether the go command builds with cgo off
// (CGO_ENABLED=0), where no c-shared library can be built; a go command
// that cannot say counts as on, and its build reports why.
func cgoOff(ctx context.Context) bool {
	out, err := exec.CommandContext(ctx, "go", "env", "CGO_ENABLED").Output()
	return err == nil && strings.TrimSpace(string(out)) != "1"
}

// pluginKit is the plugin library and the C harness, built into dir.
type pluginKit struct {
	dir, lib, harness string
}

// buildPlugin compiles the plugin (c-shared, SONAME libnccl-net.so) and the
// harness into a fresh temporary directory. root is the module root; ""
// finds it from the working directory.
func buildPlugin(ctx context.Context, root string) (*pluginKit, error) {
	for _, tool := range []string{"gcc", "go"} {
		if _, err := lookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %s not found in PATH, needed to build the NCCL net plugin and its C harness", errNoCompiler, tool)
		}
	}
	if cgoOff(ctx) {
		return nil, fmt.Errorf("%w: cgo is off (CGO_ENABLED=0), and the NCCL net plugin is a c-shared library", errNoCompiler)
	}
	if root == "" {
		var err error
		if root, err = findModuleRoot(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "metaroce-soak-plugin")
	if err != nil {
		return nil, fmt.Errorf("soak: plugin build directory: %w", err)
	}
	k := &pluginKit{dir: dir, lib: filepath.Join(dir, "libnccl-net.so"), harness: filepath.Join(dir, "nccl-net-harness")}
	ctx, cancel := context.WithTimeout(ctx, pluginBuildTimeout)
	defer cancel()
	steps := [][]string{
		append([]string{"go"}, pluginbuild.Args(root, "libnccl-net.so", k.lib)...),
		{"gcc", "-O2", "-Wall", "-Wextra", "-I", filepath.Join(root, "include"), "-o", k.harness,
			filepath.Join(root, "net-plugin", "harness", "harness.c"), "-ldl"},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			k.remove()
			return nil, fmt.Errorf("soak: building the plugin round (%s): %w\n%s", strings.Join(s, " "), err, out)
		}
	}
	return k, nil
}

// remove deletes the built files.
func (k *pluginKit) remove() { _ = os.RemoveAll(k.dir) }

// findModuleRoot returns the nearest directory at or above the working
// directory whose go.mod declares modulePath.
func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("soak: working directory: %w", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(b, modulePath) {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("soak: no go.mod of %s at or above the working directory; set Options.RepoRoot (plugin rounds build the plugin from source)", modulePath)
		}
		dir = up
	}
}

// declaresModule reports whether go.mod text b has the module line of path.
func declaresModule(b []byte, path string) bool {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}

// run executes the harness with scenario over loopback with the udp
// backend and returns its stdout, stderr and exit error.
func (k *pluginKit) run(ctx context.Context, scenario string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, harnessTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.harness, k.lib, scenario)
	cmd.Env = append(os.Environ(),
		"METAROCE_BACKEND=udp", "METAROCE_IFNAMES==lo", "NCCL_DEBUG=WARN",
		"METAROCE_TIMEOUT_MS="+strconv.Itoa(pluginTimeoutMs))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("harness did not finish within %v: %w", harnessTimeout, err)
	}
	return out.String(), errb.String(), err
}

// pluginRound runs one harness scenario and records what it found: a data
// run must exit 0 having verified every message; a kill run must report a
// failed receive (its sender died mid-transfer) and still exit 0.
func pluginRound(ctx context.Context, rep *Report, opt Options, k *pluginKit) {
	kill := rep.PluginRounds%pluginKillEvery == pluginKillEvery-1
	rep.PluginRounds++
	scenario := "data"
	if kill {
		scenario = "kill"
		rep.PluginKills++
		rep.fault("plugin sender killed")
	}
	out, errOut, err := k.run(ctx, scenario)
	if ctx.Err() != nil {
		// The run was interrupted and the harness killed with it: its
		// failure says nothing about the plugin (Report.Interrupted).
		opt.Logf("plugin round %d (%s): interrupted", rep.PluginRounds, scenario)
		return
	}
	v := judgeHarness(scenario, out, err)
	rep.PluginMessages += v.messages
	switch {
	case v.failure != "":
		rep.PluginFailures++
		rep.note(fmt.Sprintf("plugin round %d (%s): %s; stderr: %s", rep.PluginRounds, scenario, v.failure, tail(errOut, 400)))
	case v.missed:
		rep.PluginMissedKills++
		rep.note(fmt.Sprintf("plugin round %d (kill): the receiver saw no error after its sender died", rep.PluginRounds))
	case kill:
		rep.PluginSurfaced++
	}
	opt.Logf("plugin round %d (%s): messages %d, failures %d, kills surfaced %d",
		rep.PluginRounds, scenario, rep.PluginMessages, rep.PluginFailures, rep.PluginSurfaced)
}

// harnessVerdict is what one harness run shows.
type harnessVerdict struct {
	messages uint64 // messages the receiver verified
	missed   bool   // kill: the receive completed although the sender died
	failure  string // why the run failed, "" when it did not
}

// judgeHarness reads a harness run's stdout and exit error. The harness
// prints "RESULT data groups=G n=N …" after verifying G groups of N
// messages, "RESULT kill rc=R ms=M" with the receive's result code, and
// "RESULT ok …" when it finished, reload included.
func judgeHarness(scenario, stdout string, runErr error) harnessVerdict {
	var v harnessVerdict
	rs := parseResults(stdout)
	ok := false
	for _, r := range rs {
		switch r.name {
		case "ok":
			ok = true
		case "data":
			g, err1 := strconv.ParseUint(r.kv["groups"], 10, 32)
			n, err2 := strconv.ParseUint(r.kv["n"], 10, 32)
			if err1 == nil && err2 == nil {
				v.messages += g * n
			}
		case "kill":
			if rc, err := strconv.Atoi(r.kv["rc"]); err == nil && rc == 0 {
				v.missed = true
			}
		}
	}
	switch {
	case v.missed:
		// The harness exits 1 in this case too; the miss is the finding.
	case runErr != nil:
		v.failure = "harness: " + runErr.Error()
	case !ok:
		v.failure = "no final RESULT ok line"
	case scenario == "data" && v.messages == 0:
		v.failure = "no RESULT data line"
	case scenario == "kill" && !hasResult(rs, "kill"):
		v.failure = "no RESULT kill line"
	}
	return v
}

// result is one "RESULT name key=value …" line.
type result struct {
	name string
	kv   map[string]string
}

// parseResults returns the RESULT lines of s in order. Fields without '='
// after the name are ignored; a repeated key keeps its last value.
func parseResults(s string) []result {
	var rs []result
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "RESULT" {
			continue
		}
		r := result{name: f[1], kv: make(map[string]string)}
		for _, kv := range f[2:] {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				r.kv[k] = v
			}
		}
		rs = append(rs, r)
	}
	return rs
}

func hasResult(rs []result, name string) bool {
	for _, r := range rs {
		if r.name == name {
			return true
		}
	}
	return false
}

// tail returns the last n bytes of s, on one line.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return strings.ReplaceAll(s, "\n", " | ")
}
