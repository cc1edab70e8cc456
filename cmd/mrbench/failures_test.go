package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// memLauncher runs a table's ranks over the in-memory reference communicator.
type memLauncher struct{ g *memGroup }

func (m memLauncher) launch(ctx context.Context, _ string, fn func(r rankEnv) error) error {
	return m.g.run(func(c comm) error { return fn(rankEnv{comm: c, describe: "mem"}) })
}
func (m memLauncher) source() string { return "mem" }

// TestFooterFailsOnWrongElements: nccl-tests counts wrong elements on its
// "# Out of bounds values : N OK|FAILED" line, and scripts grep that line:
// a corrupted result must not read "0 OK" there.
func TestFooterFailsOnWrongElements(t *testing.T) {
	g := newMemGroup(2)
	g.corrupt = func(rank int, k call, recv []byte) {
		if k.Coll == sched.AllReduce && !k.InPlace && len(recv) > 0 {
			recv[0] ^= 0x40
		}
	}
	o, err := parseOptions([]string{"-b", "1K", "-e", "1K", "-n", "1", "-w", "0"}, &bytes.Buffer{})
	require.NoError(t, err)
	var out bytes.Buffer
	env := baseEnv()
	tab, isRoot, err := runTable(context.Background(), o, memLauncher{g}, "mem", &env, &out, nil)
	require.NoError(t, err)
	require.True(t, isRoot)
	require.Positive(t, tab.Wrong, "the checker found the corruption")
	assert.Contains(t, out.String(), fmt.Sprintf("# Out of bounds values : %d FAILED", tab.Wrong))
	assert.Equal(t, "failed", tab.Status)
}

// TestCheckerTellsRanksApart: an all-gather that delivers rank 7's block in
// place of rank 0's is counted wrong (input patterns repeat every 7
// elements, and once repeated every 7 ranks too).
func TestCheckerTellsRanksApart(t *testing.T) {
	g := newMemGroup(8)
	g.corrupt = func(rank int, k call, recv []byte) {
		if k.Coll != sched.AllGather || k.InPlace || k.DType != reduce.Float32 || k.Count < 2 {
			return
		}
		blk := int(k.Count) * 4
		b0 := append([]byte(nil), recv[:blk]...)
		copy(recv[:blk], recv[7*blk:8*blk]) // block 0 <- rank 7's data
		copy(recv[7*blk:8*blk], b0)         // block 7 <- rank 0's data
	}
	s := sweep{Coll: sched.AllGather, Sizes: []int64{8 * 4 * 16}, DTypes: []reduce.DType{reduce.Float32},
		Ops: []reduce.Op{reduce.OpSum}, Iters: 1, Warmup: 0, Check: 1, Average: 1, Timeout: 10 * time.Second}
	rows, _ := runMemSweep(t, g, s)
	require.Len(t, rows, 1)
	assert.Positive(t, rows[0].OutOfPlace.Wrong, "swapped blocks of ranks 0 and 7 went unnoticed")
}

// TestFailedTableInJSON: a table that stops on an error says so in --json,
// with the error, instead of looking like a clean table without rows.
func TestFailedTableInJSON(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	// A collective deadline nothing can meet: connection setup fails,
	// before any row.
	code, _, _ := runMrbench(t, "-np", "2", "-b", "1K", "-e", "1K", "-n", "1",
		"--transport", "tcp", "--timeout", "1us", "--json", p)
	require.Equal(t, exitFail, code)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var rep map[string]any
	require.NoError(t, json.Unmarshal(b, &rep))
	tab := rep["tables"].([]any)[0].(map[string]any)
	assert.Equal(t, "failed", tab["status"], "%s", b)
	assert.Contains(t, tab["error"], "deadline", "%s", b)
}

// TestSetupFailureReportValidates: a table whose connection setup fails,
// before rank 0 has a communicator to count its ranks, still names the
// ranks it was run with, in --json as in --csv, and the report validates
// against schema.json, whose tables have at least one rank.
func TestSetupFailureReportValidates(t *testing.T) {
	dir := t.TempDir()
	jsonPath, csvPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv")
	code, _, _ := runMrbench(t, "-np", "3", "-b", "1K", "-e", "1K", "-n", "1",
		"--transport", "tcp", "--timeout", "1us", "--json", jsonPath, "--csv", csvPath)
	require.Equal(t, exitFail, code)
	rep := validateReportFile(t, jsonPath)
	tab := rep["tables"].([]any)[0].(map[string]any)
	require.Equal(t, "failed", tab["status"])
	require.Empty(t, tab["rows"], "setup was meant to fail before any row")
	assert.EqualValues(t, 3, tab["ranks"])
	assert.EqualValues(t, 3, rep["env"].(map[string]any)["ranks"])
	b, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	assert.Contains(t, string(b), "\ntcp,host,allreduce,3,", "%s", b)
}

// TestPlotWithoutPlottableRowRefusedFirst: --plot over a sweep whose only
// row over the ranks is size 0 (every larger size holds less than one
// element per rank) has nothing to draw on its logarithmic size axis: a
// usage error before anything runs, as for -e 0, rather than a measured
// run that then fails to write its plot.
func TestPlotWithoutPlottableRowRefusedFirst(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "p.png")
	code, out, errs := runMrbench(t, "-np", "2", "--op", "alltoall", "-b", "0", "-e", "7", "-i", "7", "-n", "1",
		"--transport", "tcp", "--plot", png)
	assert.Equal(t, exitUsage, code, errs)
	assert.Empty(t, out, "nothing runs")
	assert.Contains(t, errs, "--plot")
	assert.Contains(t, errs, "-b 0 to -e 7")
	assert.NoFileExists(t, png)

	// The same sweep over one rank has a row of 4 bytes to plot.
	code, _, errs = runMrbench(t, "-np", "1", "--op", "alltoall", "-b", "0", "-e", "7", "-i", "7", "-n", "1",
		"--transport", "tcp", "--plot", png)
	assert.Equal(t, exitOK, code, errs)
	assert.FileExists(t, png)
}

// TestLossHeaderOnTCPTable: --loss only drops MetaRoCE datagrams, and the
// TCP table's header says that it ran without loss; so does --json, whose
// params record no loss and no seed (the command keeps --loss as typed),
// and the report still validates.
func TestLossHeaderOnTCPTable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.json")
	code, out, errs := runMrbench(t, "-np", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
		"--transport", "tcp", "--loss", "0.2", "--json", p)
	require.Equal(t, 0, code, errs)
	assert.NotContains(t, out, "# loss: driver drops each MetaRoCE datagram")
	assert.Contains(t, out, "# loss: none (--loss drops MetaRoCE datagrams only)")
	doc := validateReportFile(t, p)
	params := doc["params"].(map[string]any)
	assert.Equal(t, 0.0, params["loss"], "the TCP table dropped nothing")
	assert.NotContains(t, params, "seed")
	assert.Contains(t, doc["command"], "0.2", "the command as typed")
}

// TestLocalChecksBeforeConnecting: with the ranks run here, a broadcast
// root that is no rank, a group size that does not divide the ranks and a
// sweep with no row are usage errors before any connection; sizes too small for some types are named on stderr.
func TestLocalChecksBeforeConnecting(t *testing.T) {
	code, out, errs := runMrbench(t, "-np", "2", "--op", "broadcast", "-r", "5", "--transport", "tcp")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "-r 5: the root must be a rank, 0 to 1")
	assert.Empty(t, out)
	code, out, errs = runMrbench(t, "-np", "2", "-b", "4", "-e", "4", "-d", "double", "--transport", "tcp")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "no row to run")
	assert.Empty(t, out)
	code, out, errs = runMrbench(t, "-np", "4", "--group-size", "3", "--transport", "tcp")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "--group-size 3 does not divide the 4 ranks")
	assert.Empty(t, out)
	code, _, errs = runMrbench(t, "-np", "4", "--op", "reducescatter", "-b", "8", "-e", "8", "-d", "all",
		"-n", "1", "-w", "0", "--transport", "tcp")
	assert.Equal(t, exitOK, code, errs)
	assert.Contains(t, errs, "skipped, less than one element per rank for reducescatter over 4 ranks: 8 int32")
}

// TestLaunchedChecksBeforeConnecting: a launched job's rank count is known
// from the launcher's variables before any connection, so the checks of
// TestLocalChecksBeforeConnecting apply to it too, with that count: a
// sweep without a row is a usage error rather than an empty table
// reported OK, and a root or group size that the job's ranks cannot have
// is one too, rather than a failure after connecting.
func TestLaunchedChecksBeforeConnecting(t *testing.T) {
	clearLauncherEnv(t, map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "1"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--op", "alltoall", "-b", "1", "-e", "1", "-d", "double"}, "no row to run: alltoall over 1 ranks needs at least one element per rank"},
		{[]string{"--op", "broadcast", "-r", "3", "-b", "8", "-e", "8"}, "-r 3: the root must be a rank, 0 to 0"},
		{[]string{"--group-size", "2", "-b", "8", "-e", "8"}, "--group-size 2 does not divide the 1 ranks"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runMrbench(t, append(tc.args, "-n", "1", "-w", "0", "--transport", "tcp")...)
			assert.Equal(t, exitUsage, code, errs)
			assert.Contains(t, errs, tc.want)
			assert.Empty(t, out, "nothing runs")
		})
	}
}

// TestNoRowWordsFitTheCollective: the collectives that take one buffer
// (all-reduce, broadcast, sendrecv) need one element, not one per rank, and
// the errors and notes about sizes too small say which.
func TestNoRowWordsFitTheCollective(t *testing.T) {
	clearLauncherEnv(t, nil)
	code, out, errs := runMrbench(t, "-np", "4", "-b", "4", "-e", "4", "-d", "double", "--transport", "tcp")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "no row to run: allreduce over 4 ranks needs at least one element, and -b 4 to -e 4 gives none")
	assert.Empty(t, out)
	code, _, errs = runMrbench(t, "-np", "4", "--op", "broadcast", "-b", "4", "-e", "4", "-d", "all",
		"-n", "1", "-w", "0", "--transport", "tcp")
	assert.Equal(t, exitOK, code, errs)
	assert.Contains(t, errs, "skipped, less than one element for broadcast over 4 ranks: 4 int64")
	assert.NotContains(t, errs, "per rank")
}
