package harness

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/pluginbuild"
)

// built holds the artifacts shared by every test of this package.
var built struct {
	once              sync.Once
	dir, lib, harness string
	err               error
}

// repoRoot is the module root, two levels above this package.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// build compiles the plugin (SONAME libnccl-net.so), a copy whose SONAME
// reads librccl-net.so, and the C harness.
func build(t testing.TB) (dir, lib, harness string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed: cannot build the C harness")
	}
	if out, err := exec.Command("go", "env", "CGO_ENABLED").Output(); err == nil && strings.TrimSpace(string(out)) != "1" {
		t.Skip("cgo is off (CGO_ENABLED=0): the plugin is a c-shared library")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "metaroce-harness")
		if built.err != nil {
			return
		}
		root := repoRoot()
		built.lib = filepath.Join(built.dir, "libnccl-net.so")
		cmd := exec.Command("go", pluginbuild.Args(root, "libnccl-net.so", built.lib)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		// Same length names: retarget the SONAME for the RCCL variant.
		b, err := os.ReadFile(built.lib)
		if err != nil {
			built.err = err
			return
		}
		old, repl := []byte("libnccl-net.so\x00"), []byte("librccl-net.so\x00")
		if n := bytes.Count(b, old); n != 1 {
			built.err = fmt.Errorf("SONAME string found %d times", n)
			return
		}
		if err := os.WriteFile(filepath.Join(built.dir, "librccl-net.so"), bytes.Replace(b, old, repl, 1), 0o755); err != nil {
			built.err = err
			return
		}
		built.harness = filepath.Join(built.dir, "nccl-net-harness")
		cc := exec.Command("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-I", filepath.Join(root, "include"), "-o", built.harness, filepath.Join(root, "net-plugin", "harness", "harness.c"), "-ldl")
		if out, err := cc.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("gcc: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir, built.lib, built.harness
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// run executes the harness with a deadline and returns stdout, stderr and
// the exit error. The harness logs as NCCL does at NCCL_DEBUG=WARN with the
// default NCCL_DEBUG_SUBSYS (an inherited one is dropped), so that a
// message that NCCL would hide is missing from stderr too.
func run(t testing.TB, env []string, args ...string) (string, string, error) {
	t.Helper()
	_, _, h := build(t)
	cmd := exec.Command(h, args...)
	var inherited []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NCCL_DEBUG_SUBSYS=") {
			inherited = append(inherited, kv)
		}
	}
	cmd.Env = append(append(inherited, "METAROCE_IFNAMES==lo", "NCCL_DEBUG=WARN"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), errb.String(), err
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("harness %v did not finish\nstdout:\n%s\nstderr:\n%s", args, out.String(), errb.String())
		return "", "", nil
	}
}

// backends are the METAROCE_BACKEND values every scenario runs with.
var backends = []string{"udp", "tcp"}

// withBackend is the environment selecting backend be; the udp backend gets a
// short METAROCE_TIMEOUT_MS so that a killed peer is declared dead quickly.
func withBackend(be string, env ...string) []string {
	env = append(env, "METAROCE_BACKEND="+be)
	if be == "udp" {
		env = append(env, "METAROCE_TIMEOUT_MS="+strconv.Itoa(udpTimeoutMs))
	}
	return env
}

// udpTimeoutMs is METAROCE_TIMEOUT_MS of the udp runs.
const udpTimeoutMs = 2000

// TestEveryABIVersion runs the data scenario with every ABI version over the
// udp backend, and with the newest and oldest over tcp.
func TestEveryABIVersion(t *testing.T) {
	_, lib, _ := build(t)
	for _, be := range backends {
		for v := 12; v >= 6; v-- {
			if be == "tcp" && v != 12 && v != 6 {
				continue
			}
			t.Run(be+"/v"+strconv.Itoa(v), func(t *testing.T) {
				out, errOut, err := run(t, withBackend(be), "-v", strconv.Itoa(v), lib, "data")
				if err != nil {
					t.Fatalf("harness failed: %v\n%s\n%s", err, out, errOut)
				}
				want := fmt.Sprintf("RESULT ok version=%d reload=1", v)
				if !strings.Contains(out, want) || !strings.Contains(out, "RESULT data groups=96 n=3") {
					t.Fatalf("missing %q in\n%s\n%s", want, out, errOut)
				}
			})
		}
	}
}

// TestOnlyABISymbolsExported: the plugin's dynamic symbols are the ABI
// tables of every version and the metaroce_* entry points; the Go
// runtime's cgo glue (crosscall2, fatalf, x_cgo_*, _cgo_*) is local, so
// that a preloaded plugin cannot take another library's symbols' place.
func TestOnlyABISymbolsExported(t *testing.T) {
	_, lib, _ := build(t)
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]bool{}
	var stray []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF {
			continue // what the plugin imports (libc)
		}
		switch {
		case strings.HasPrefix(s.Name, "ncclNetPlugin_v"):
			tables[s.Name] = true
		case strings.HasPrefix(s.Name, "metaroce_"):
		default:
			stray = append(stray, s.Name)
		}
	}
	if len(stray) > 0 {
		t.Errorf("exported beyond the ABI: %v", stray)
	}
	for v := 6; v <= 12; v++ {
		if name := "ncclNetPlugin_v" + strconv.Itoa(v); !tables[name] {
			t.Errorf("%s not exported", name)
		}
	}
}

func TestLoadedByNameLikeNCCLAndRCCL(t *testing.T) {
	dir, _, _ := build(t)
	for _, tc := range []struct{ name, preload, open string }{
		{"nccl-soname", "libnccl-net.so", "libnccl-net.so"},
		{"rccl-soname", "librccl-net.so", "librccl-net.so"},
		{"static-plugin", "libnccl-net.so", "STATIC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := run(t, []string{"LD_PRELOAD=" + filepath.Join(dir, tc.preload)}, tc.open, "data")
			if err != nil || !strings.Contains(out, "RESULT ok version=12 reload=1") {
				t.Fatalf("harness: %v\n%s\n%s", err, out, errOut)
			}
		})
	}
}

func TestPeerKilledMidTransfer(t *testing.T) {
	_, lib, _ := build(t)
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			out, errOut, err := run(t, withBackend(be), lib, "kill")
			if err != nil {
				t.Fatalf("harness: %v\n%s\n%s", err, out, errOut)
			}
			m := regexp.MustCompile(`RESULT kill rc=(\d+) ms=(\d+)`).FindStringSubmatch(out)
			if m == nil || m[1] == "0" {
				t.Fatalf("no failure reported:\n%s\n%s", out, errOut)
			}
			if !strings.Contains(errOut, "peer 127.0.0.1:") {
				t.Fatalf("error does not name the peer:\n%s", errOut)
			}
		})
	}
}

func TestOversizeSendIsInvalidUsage(t *testing.T) {
	_, lib, _ := build(t)
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			out, errOut, err := run(t, withBackend(be), lib, "oversize")
			if err != nil || !strings.Contains(out, "RESULT oversize rc=5") {
				t.Fatalf("harness: %v\n%s\n%s", err, out, errOut)
			}
			if !strings.Contains(errOut, "truncated") {
				t.Fatalf("no actionable warning:\n%s", errOut)
			}
			// MetaRoCE sends complete on the receiver's acknowledgement, so
			// the sender learns of the truncation too; a TCP send is done
			// once the kernel holds it.
			if be == "udp" && !strings.Contains(out, "RESULT oversize-send rc=5") {
				t.Fatalf("sender not told:\n%s\n%s", out, errOut)
			}
		})
	}
}

func TestGarbageHandles(t *testing.T) {
	_, lib, _ := build(t)
	for _, be := range backends {
		for _, v := range []string{"12", "6"} {
			out, errOut, err := run(t, withBackend(be), "-v", v, lib, "garbage")
			if err != nil || !strings.Contains(out, "RESULT garbage rc=4") {
				t.Fatalf("%s v%s: %v\n%s\n%s", be, v, err, out, errOut)
			}
			checkImpossibleSizes(t, be+" v"+v, v == "6", out)
			if !strings.Contains(out, "RESULT garbage-irecv-null rc=3 ") || !strings.Contains(out, "NULL sizes") {
				t.Errorf("%s v%s: irecv with a NULL sizes array: want ncclInternalError (3) naming NULL sizes\n%s\n%s", be, v, out, errOut)
			}
			for _, op := range []string{"irecv", "isend"} {
				if l := resultLine(out, "garbage-"+op+"-nullreq"); !strings.HasPrefix(l, "rc=3 ") || !strings.Contains(l, "NULL request") {
					t.Errorf("%s v%s: %s with a NULL request: want ncclInternalError (3) naming NULL request, got %q\n%s\n%s", be, v, op, l, out, errOut)
				}
			}
		}
	}
}

// checkImpossibleSizes reads the garbage scenario's size lines: an isend
// of SIZE_MAX bytes (the int -1 for ABI v6) is ncclInvalidArgument, as a
// send larger than maxP2pBytes is; an irecv of that capacity and (ABI v6,
// v7) a regMr of -1 bytes fail too. Every failure's last-error text names
// its call and none is reported as a plugin bug (a recovered Go panic).
// The text of an isend, and with int sizes (intSizes) of every call,
// names the size as passed, so it cannot be an earlier failure's.
func checkImpossibleSizes(t *testing.T, what string, intSizes bool, out string) {
	t.Helper()
	lines := regexp.MustCompile(`RESULT garbage-(\w+)-size rc=(\d+) msg=(.*)`).FindAllStringSubmatch(out, -1)
	want := map[string]string{"isend": "isend", "irecv": "irecv", "regmr": "regMr"}
	if len(lines) < 2 {
		t.Fatalf("%s: size results missing:\n%s", what, out)
	}
	for _, m := range lines {
		call, rc, msg := m[1], m[2], m[3]
		if rc == "0" || !strings.Contains(msg, want[call]+" ") || strings.Contains(msg, "panic") {
			t.Errorf("%s: %s of an impossible size: rc=%s, last error %q; want a failure naming %s, not a panic", what, call, rc, msg, want[call])
		}
		if call == "isend" && rc != "4" {
			t.Errorf("%s: isend of an impossible size: rc=%s, want ncclInvalidArgument (4)", what, rc)
		}
		size := "18446744073709551615"
		if intSizes {
			size = "-1"
		}
		if (intSizes || call == "isend") && !strings.Contains(msg, " "+size+" ") {
			t.Errorf("%s: %s of %s bytes: last error %q does not name the size", what, call, size, msg)
		}
	}
}

// TestEnvironmentSetAfterLoad: variables the process sets with setenv after
// the library was loaded (NCCL's nccl.conf files, a Python launcher) are
// honoured at init: METAROCE_BACKEND=bogus fails init with
// ncclInvalidUsage, and its WARN passes NCCL's filter at NCCL_DEBUG=WARN
// with default subsystems; then NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
// brings the plugin's INFO init line.
func TestEnvironmentSetAfterLoad(t *testing.T) {
	_, lib, _ := build(t)
	for _, v := range []string{"12", "6"} {
		t.Run("v"+v, func(t *testing.T) {
			out, errOut, err := run(t, withBackend("udp"), "-v", v, lib, "lateenv")
			if err != nil || !strings.Contains(out, "RESULT lateenv-bogus rc=5") || !strings.Contains(out, "RESULT ok version="+v) {
				t.Fatalf("harness: %v\n%s\n%s", err, out, errOut)
			}
			if !strings.Contains(errOut, `level=2: NET/MetaRoCE : init failed: METAROCE_BACKEND="bogus"`) {
				t.Fatalf("the init failure's WARN did not pass NCCL's filter:\n%s", errOut)
			}
			if !strings.Contains(errOut, "level=3: NET/MetaRoCE : MetaRoCE net plugin") {
				t.Fatalf("NCCL_DEBUG=INFO set after load did not bring the init line:\n%s", errOut)
			}
		})
	}
}

// resultLine returns what follows "RESULT name " on the harness's line for
// name, or "" where it printed none.
func resultLine(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "RESULT "+name+" "); ok {
			return rest
		}
	}
	return ""
}
