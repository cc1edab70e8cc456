package core

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// envMap is a LookupEnv over kv: a variable is set when it is a key.
func envMap(kv map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestTableHandles(t *testing.T) {
	tb := newTable[int](KindSend, 2)
	a, ok := tb.add(1)
	if !ok || a.Kind() != KindSend || a <= 1 {
		t.Fatalf("add: %#x %v", uint64(a), ok)
	}
	b, _ := tb.add(2)
	if _, ok := tb.add(3); ok {
		t.Fatal("table over capacity")
	}
	if v, ok := tb.remove(a); !ok || v != 1 {
		t.Fatal("remove")
	}
	c, _ := tb.add(4)
	for name, h := range map[string]Handle{"stale": a, "wrong kind": makeHandle(KindRecv, b.gen(), b.idx()), "garbage": 0xdeadbeef, "zero": 0} {
		if _, ok := tb.get(h); ok {
			t.Fatalf("%s handle accepted", name)
		}
	}
	if v, _ := tb.get(c); v != 4 || tb.len() != 2 {
		t.Fatal("reuse")
	}
	tb.removeIf(func(v int) bool { return v == 2 })
	if tb.len() != 1 {
		t.Fatal("removeIf")
	}
}

func TestCodeMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Result
	}{
		{nil, Success},
		{fmt.Errorf("x: %w", backend.ErrInvalidUsage), InvalidUsage},
		{fmt.Errorf("x: %w", backend.ErrInvalidArgument), InvalidArgument},
		{fmt.Errorf("x: %w", backend.ErrInternal), InternalError},
		{fmt.Errorf("x: %w", backend.ErrRemote), RemoteError},
		{errors.New("connection reset"), SystemError},
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := envMap
	c, err := ConfigFromEnv(env(nil))
	if err != nil || c.Backend != "udp" || c.Threads != DefaultThreads || c.Socks != 2 || c.Secret != nil {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = ConfigFromEnv(env(map[string]string{"METAROCE_THREADS": "4", "METAROCE_TCP_SOCKS": "8", "METAROCE_BACKEND": "TCP", "METAROCE_MAX_PEERS": "100000"}))
	if err != nil || c.Threads != 4 || c.Socks != 8 || c.Backend != "tcp" || c.MaxPeers != 100000 {
		t.Fatalf("set: %+v %v", c, err)
	}
	for _, bad := range []map[string]string{{"METAROCE_THREADS": "0"}, {"METAROCE_TCP_SOCKS": "9"}, {"METAROCE_TIMEOUT_MS": "soon"}, {"METAROCE_MAX_PEERS": "8"}, {"METAROCE_SECRET": "short-secret"}} {
		if _, err := ConfigFromEnv(env(bad)); !errors.Is(err, backend.ErrInvalidUsage) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
	// METAROCE_SECRET is read through the lookup (not os.LookupEnv, which
	// the datapath would use) and never echoed in an error.
	const secret = "0123456789abcdef-job-secret"
	if c, err := ConfigFromEnv(env(map[string]string{"METAROCE_SECRET": secret})); err != nil || string(c.Secret) != secret {
		t.Fatalf("secret: %q %v", c.Secret, err)
	}
	if _, err := ConfigFromEnv(env(map[string]string{"METAROCE_SECRET": "tiny-secret"})); err == nil || strings.Contains(err.Error(), "tiny-secret") {
		t.Fatalf("short secret: %v", err)
	}
	p := New(env(map[string]string{"METAROCE_BACKEND": "carrier-pigeon"}))
	if _, err := p.Init(12, 1); !errors.Is(err, backend.ErrInvalidUsage) {
		t.Fatalf("unknown backend: %v", err)
	}
}

func TestDebugFilter(t *testing.T) {
	for _, tc := range []struct {
		level, subsys string
		ask           Level
		flags         uint64
		want          bool
	}{
		{"", "", LogWarn, SubsysNet, false},
		{"WARN", "", LogWarn, SubsysNet, true},
		{"WARN", "", LogInfo, SubsysInit, false},
		{"info", "", LogInfo, SubsysInit | SubsysNet, true},
		{"INFO", "", LogInfo, SubsysNet, false},
		{"INFO", "NET", LogInfo, SubsysNet, true},
		{"INFO", "^NET", LogInfo, SubsysNet, false},
		{"INFO", "^NET", LogWarn, SubsysNet, true},
		{"TRACE", "ALL", LogTrace, SubsysNet, true},
	} {
		ConfigureLog(tc.level, tc.subsys, func(Level, uint64, string) {})
		if got := Enabled(tc.ask, tc.flags); got != tc.want {
			t.Errorf("NCCL_DEBUG=%q SUBSYS=%q level %d flags %#x: %v", tc.level, tc.subsys, tc.ask, tc.flags, got)
		}
	}
	ConfigureLog("", "", nil)
}

// TestWarnReachesNCCL: with NCCL's logger installed, a failure's WARN
// reaches it under the default NCCL_DEBUG (unset), since NCCL records the
// last WARN as the failed call's reason before filtering; INFO does not,
// and without NCCL's logger the local filter holds for WARN too.
func TestWarnReachesNCCL(t *testing.T) {
	defer ConfigureLog("", "", nil)
	var got []string
	ConfigureLog("", "", func(l Level, _ uint64, msg string) { got = append(got, msg) })
	Fail("isend", fmt.Errorf("peer 10.0.0.2 died: %w", backend.ErrRemote))
	Logf(LogInfo, SubsysNet, "an info line")
	if len(got) != 1 || !strings.Contains(got[0], "peer 10.0.0.2 died") {
		t.Fatalf("NCCL's logger got %q, want the one WARN naming the peer", got)
	}
	if Enabled(LogWarn, SubsysNet) {
		t.Error("the stderr fallback must still obey NCCL_DEBUG")
	}
}

// ncclShows is NCCL's ncclDebugLog filter: a message is printed when its
// level is within NCCL_DEBUG and its flags share a bit with the
// NCCL_DEBUG_SUBSYS mask, WARN included.
func ncclShows(debug Level, mask uint64, level Level, flags uint64) bool {
	return level <= debug && flags&mask != 0
}

// TestLogFlagsPassNCCLFilter: WARN and VERSION messages reach NCCL's logger
// with NCCL_ALL as flags, as NCCL's own WARN() does, so that NCCL prints
// them at NCCL_DEBUG=WARN with the default NCCL_DEBUG_SUBSYS; INFO keeps
// its subsystem bits, which NCCL_DEBUG_SUBSYS selects.
func TestLogFlagsPassNCCLFilter(t *testing.T) {
	defer ConfigureLog("", "", nil)
	type entry struct {
		level Level
		flags uint64
	}
	var got []entry
	ConfigureLog("INFO", "NET", func(l Level, flags uint64, _ string) { got = append(got, entry{l, flags}) })
	Fail("connect", fmt.Errorf("peer 10.0.0.3 refused: %w", backend.ErrRemote))
	Logf(LogVersion, SubsysInit, "version line")
	Logf(LogInfo, SubsysNet, "info line")
	want := []entry{{LogWarn, SubsysAll}, {LogVersion, SubsysAll}, {LogInfo, SubsysNet}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("logger received (level, flags) %v, want %v", got, want)
	}
	mask := ParseDebugSubsys("") // NCCL_DEBUG_SUBSYS unset
	if !ncclShows(LogWarn, mask, got[0].level, got[0].flags) {
		t.Errorf("NCCL at NCCL_DEBUG=WARN with default subsystems drops the WARN (flags %#x)", got[0].flags)
	}
	if ncclShows(LogInfo, mask, got[2].level, got[2].flags) {
		t.Errorf("a NET INFO line passes NCCL's default subsystems")
	}
}

// TestEnvironmentReadAtInit: the log filter and the configuration come
// from the plugin's LookupEnv at the first init, not from what the
// environment said when the library (and this package) was loaded.
func TestEnvironmentReadAtInit(t *testing.T) {
	defer ConfigureLog("", "", nil)
	var lines []string
	ConfigureLog("", "", func(_ Level, _ uint64, msg string) { lines = append(lines, msg) })
	name := registerBackend(t, &nopBackend{})
	env := map[string]string{}
	p := New(envMap(env))
	// Set after New, as NCCL's setenv of ~/.nccl.conf lands after load.
	env["METAROCE_BACKEND"] = name
	env["METAROCE_THREADS"] = "3"
	env["NCCL_DEBUG"] = "INFO"
	env["NCCL_DEBUG_SUBSYS"] = "NET"
	ctx, err := p.Init(12, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Finalize(ctx)
	if !Enabled(LogInfo, SubsysNet) || Enabled(LogInfo, SubsysEnv) {
		t.Error("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET set before init not applied")
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "MetaRoCE net plugin") || !strings.Contains(lines[0], "backend nop") {
		t.Errorf("init lines %q, want the INFO line naming backend nop", lines)
	}
	if cfg, ok := p.Config(); !ok || cfg.Threads != 3 {
		t.Errorf("Config() = %+v, %v; want METAROCE_THREADS=3", cfg, ok)
	}
}

func FuzzParseDebugSubsys(f *testing.F) {
	for _, s := range []string{"", "INIT,NET", "^NET", "ALL", "bogus,,net", "^ ", "^  ^NET"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := ParseDebugSubsys(s)
		// "^LIST" inverts LIST, for a non-empty LIST that is not itself
		// inverted (an empty or doubly inverted list has no inverse here).
		rest := strings.TrimSpace(strings.TrimPrefix(s, "^"))
		if strings.HasPrefix(s, "^") && rest != "" && !strings.HasPrefix(rest, "^") && ParseDebugSubsys(rest) != ^m {
			t.Fatalf("%q: inversion mismatch", s)
		}
	})
}

func poll(t *testing.T, what string, step func() bool) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for !step() {
		if time.Now().After(end) {
			t.Fatalf("%s: no progress", what)
		}
		runtime.Gosched()
	}
}

// reserved returns n bytes of inaccessible address space (PROT_NONE,
// nothing committed), unmapped at the end of the test: a buffer larger
// than any allocation the test could afford, which the race detector's
// pointer checks accept because it is a real mapping.
func reserved(t *testing.T, n int) []byte {
	t.Helper()
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		t.Fatalf("reserving %d bytes of address space: %v", n, err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(b) })
	return b
}

// TestTwoPluginsLoopback runs a receiver and a sender plugin instance (as
// two processes would) over each backend and checks that every handle is
// released at the end.
func TestTwoPluginsLoopback(t *testing.T) {
	for _, be := range []string{"udp", "tcp"} {
		t.Run(be, func(t *testing.T) { twoPlugins(t, be) })
	}
}

// loopbackPlugins initialises a receiving and a sending plugin on lo with
// backend be, as two processes of a job would.
func loopbackPlugins(t *testing.T, be string) (rp, sp *Plugin, rctx, sctx Handle) {
	t.Helper()
	env := envMap(map[string]string{"METAROCE_IFNAMES": "=lo", "METAROCE_BACKEND": be})
	rp, sp = New(env), New(env)
	rctx, err := rp.Init(12, 1)
	if err != nil {
		t.Fatal(err)
	}
	sctx, err = sp.Init(12, 2)
	if err != nil {
		t.Fatal(err)
	}
	return rp, sp, rctx, sctx
}

// stuckConnect returns a receiving and a sending plugin over backend be
// (contexts rctx, sctx) and a listen handle of the receiver's whose
// connect from the sender stays in progress by construction, until
// METAROCE_TIMEOUT_MS (30 s): a connect to a live listener may complete
// within the first connect call, since both backends take a connection
// in before NCCL's accept asks for it. The receiver's listener is closed
// before the connect starts, over either backend. Over tcp that alone
// keeps the connect in progress: it retries the refused port until its
// deadline. Over udp the closed listener would refuse the flow as soon as
// the announcement arrived, failing the connect, so the two plugins also
// authenticate with different METAROCE_SECRETs: the receiver drops the
// sender's HELLOs without answering, and the connection never comes up.
func stuckConnect(t *testing.T, be string) (rp, sp *Plugin, rctx, sctx Handle, handle []byte) {
	t.Helper()
	env := func(secret string) LookupEnv {
		return envMap(map[string]string{"METAROCE_IFNAMES": "=lo", "METAROCE_BACKEND": be, "METAROCE_SECRET": secret})
	}
	rp, sp = New(env("receiving-plugin-secret")), New(env("sending-plugin-secret"))
	var err error
	rctx, err = rp.Init(12, 1)
	require.NoError(t, err)
	sctx, err = sp.Init(12, 2)
	require.NoError(t, err)
	handle = make([]byte, backend.HandleSize)
	lc, err := rp.Listen(rctx, 0, handle)
	require.NoError(t, err)
	require.NoError(t, rp.CloseListen(lc))
	return rp, sp, rctx, sctx, handle
}

func twoPlugins(t *testing.T, be string) {
	rp, sp, rctx, sctx := loopbackPlugins(t, be)
	if n, _ := rp.Devices(); n != 1 {
		t.Fatalf("devices %d", n)
	}
	pr, err := rp.Properties(0)
	if err != nil || pr.MaxRecvs != backend.AdvertisedRecvs || pr.MaxP2pBytes != backend.MaxMessage || pr.Name != "metaroce_lo" {
		t.Fatalf("props %+v %v", pr, err)
	}
	handle := make([]byte, backend.HandleSize)
	lc, err := rp.Listen(rctx, 0, handle)
	if err != nil {
		t.Fatal(err)
	}
	var sc, rc Handle
	poll(t, "connect/accept", func() bool {
		if sc == 0 {
			sc, err = sp.Connect(sctx, 0, handle)
			if err != nil {
				t.Fatal(err)
			}
		}
		if rc == 0 {
			rc, err = rp.Accept(lc)
			if err != nil {
				t.Fatal(err)
			}
		}
		return sc != 0 && rc != 0
	})
	if err := rp.CloseListen(lc); err != nil {
		t.Fatal(err)
	}
	mh, err := rp.RegMr(rc, 0x1000, 64, PtrHost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rp.RegMr(rc, 0x1000, 64, PtrCUDA); Code(err) != InternalError {
		t.Fatalf("CUDA memory: %v", err)
	}
	a, b := make([]byte, 5), make([]byte, 0)
	rr, err := rp.Irecv(rc, [][]byte{a, b}, []int32{7, 8})
	if err != nil || rr == 0 {
		t.Fatal(err)
	}
	// A message whose size test() could not report as an int is refused
	// before anything touches its bytes: the buffer is address space
	// reserved with PROT_NONE, so a read or write of it would fault.
	huge := reserved(t, backend.MaxMessage+1)
	if h, err := sp.Isend(sc, huge, 7); h != 0 || Code(err) != InvalidArgument {
		t.Fatalf("isend of 2 GiB: handle %#x, %v (code %v), want invalid argument", h, err, Code(err))
	}
	s1, _ := sp.Isend(sc, nil, 8)
	s2, _ := sp.Isend(sc, []byte("hello"), 7)
	sizes := make([]int, backend.MaxRecvs)
	for _, s := range []Handle{s1, s2} {
		poll(t, "send", func() bool { d, _, err := sp.Test(s, sizes); return err == nil && d })
	}
	var n int
	poll(t, "recv", func() bool {
		d, k, err := rp.Test(rr, sizes)
		if err != nil {
			t.Fatal(err)
		}
		n = k
		return d
	})
	if n != 2 || sizes[0] != 5 || sizes[1] != 0 || string(a) != "hello" {
		t.Fatalf("n=%d sizes=%v data=%q", n, sizes[:2], a)
	}
	if _, _, err := rp.Test(rr, sizes); Code(err) != InternalError {
		t.Fatal("completed request still valid")
	}
	if err := rp.DeregMr(rc, mh); err != nil {
		t.Fatal(err)
	}
	if err := sp.CloseSend(sc); err != nil {
		t.Fatal(err)
	}
	if err := rp.CloseRecv(rc); err != nil {
		t.Fatal(err)
	}
	if rp.Live() != 0 || sp.Live() != 0 {
		t.Fatalf("handles left: %d %d", rp.Live(), sp.Live())
	}
	if rp.Finalize(rctx) != nil || sp.Finalize(sctx) != nil || rp.Refs() != 0 {
		t.Fatal("finalize")
	}
	if Code(rp.Finalize(rctx)) != InternalError {
		t.Fatal("double finalize accepted")
	}
	// Re-init after the last finalize reuses the retained backend.
	if c, err := rp.Init(11, 3); err != nil || rp.Refs() != 1 || rp.Finalize(c) != nil {
		t.Fatal("re-init")
	}
}

// A connect NCCL abandons (an aborted setup) is freed by the last Finalize:
// its dialer is aborted and no handle stays live.
func TestFinalizeAbortsAbandonedConnects(t *testing.T) {
	for _, be := range []string{"udp", "tcp"} {
		t.Run(be, func(t *testing.T) {
			rp, sp, rctx, sctx, handle := stuckConnect(t, be)
			sc, err := sp.Connect(sctx, 0, handle)
			if err != nil || sc != 0 {
				t.Fatalf("connect that cannot complete: %#x, %v; want in progress", sc, err)
			}
			if sp.Live() != 1 {
				t.Fatalf("live handles with one connect in progress: %d", sp.Live())
			}
			if err := sp.Finalize(sctx); err != nil {
				t.Fatal(err)
			}
			if n := sp.Live(); n != 0 {
				t.Fatalf("%d handles live after the last finalize", n)
			}
			if err := rp.Finalize(rctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// registerBackend makes b the backend that METAROCE_BACKEND=name selects
// for this test (name is derived from the test's, in lower case, as the
// variable is matched) and removes it when the test ends.
func registerBackend(t *testing.T, b backend.Backend) string {
	t.Helper()
	name := "test-" + strings.ToLower(t.Name())
	Backends[name] = func(Config) (backend.Backend, error) { return b, nil }
	t.Cleanup(func() { delete(Backends, name) })
	return name
}
