package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envRunAsMain makes the test binary behave as mrbench (arguments in
// envRunArgs, separated by newlines), so tests start real processes without
// building a second binary.
const (
	envRunAsMain = "MRBENCH_TEST_RUN_AS_MAIN"
	envRunArgs   = "MRBENCH_TEST_ARGS"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRunAsMain) == "1" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		code := run(ctx, strings.Split(os.Getenv(envRunArgs), "\n"), os.Stdout, os.Stderr)
		cancel()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// freePort returns a TCP port of 127.0.0.1 that nothing listens on, from
// 20000 to 31999: below Linux's default ephemeral range (32768-60999), so
// that no outgoing connection takes it before the job's rank 0 listens (a
// port the kernel picks is in that range, and so was the port that rank 0
// of TestMpirunScript once found taken, in 46 runs).
func freePort(t *testing.T) int {
	t.Helper()
	const lo, n = 20000, 12000
	start := os.Getpid() % n
	for i := range 200 {
		port := lo + (start+i*61)%n
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatalf("no free port among 200 tried from %d to %d", lo, lo+n-1)
	return 0
}

// TestLaunchedJob starts three processes the way a launcher would (rank
// environment variables, a shared rendezvous address): they must form one
// job in which rank 0 alone prints the tables and writes the JSON file.
func TestLaunchedJob(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	const n = 3
	dir := t.TempDir()
	root := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	outs := make([]bytes.Buffer, n)
	errs := make([]bytes.Buffer, n)
	codes := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		args := []string{"-b", "256", "-e", "16K", "-f", "8", "-n", "2", "-w", "1", "--timeout", "20s",
			"--json", filepath.Join(dir, fmt.Sprintf("r%d.json", r))}
		cmd := exec.CommandContext(ctx, self)
		cmd.Env = append(os.Environ(), envRunAsMain+"=1", envRunArgs+"="+strings.Join(args, "\n"),
			fmt.Sprintf("METAROCE_RANK=%d", r), fmt.Sprintf("METAROCE_NRANKS=%d", n), "METAROCE_ROOT="+root)
		cmd.Stdout, cmd.Stderr = &outs[r], &errs[r]
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[r] = cmd.Wait()
		}()
	}
	wg.Wait()
	for r := 0; r < n; r++ {
		require.NoError(t, codes[r], "rank %d stderr: %s", r, errs[r].String())
	}
	tables, err := parseNCCLTests(outs[0].String())
	require.NoError(t, err)
	require.Len(t, tables, 2)
	for _, tab := range tables {
		assert.Len(t, tab.Rows, 3)
		assert.Equal(t, "OK", tab.Status)
		for _, r := range tab.Rows {
			assert.Zero(t, r.OutOfPlace.Wrong)
			assert.Zero(t, r.InPlace.Wrong)
		}
	}
	assert.Contains(t, outs[0].String(), "3 ranks on 1 host(s), launcher: metaroce")
	for r := 1; r < n; r++ {
		assert.Empty(t, outs[r].String(), "rank %d prints nothing", r)
		assert.NoFileExists(t, filepath.Join(dir, fmt.Sprintf("r%d.json", r)))
	}
	validateReportFile(t, filepath.Join(dir, "r0.json"))
}

// TestMpirunScript runs testdata/mpirun.sh when Open MPI's mpirun is
// installed.
func TestMpirunScript(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not on PATH (Debian: openmpi-bin)")
	}
	if testing.Short() {
		t.Skip("builds mrbench")
	}
	bin := filepath.Join(t.TempDir(), "mrbench")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "testdata/mpirun.sh", bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("METAROCE_ROOT=127.0.0.1:%d", freePort(t)))
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "mpirun.sh: OK")
}
