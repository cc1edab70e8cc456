package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/fabric/sim/scenarios"
	"github.com/metaroce/metaroce/gpu/rccl"
	"github.com/metaroce/metaroce/internal/interrupt"
)

func TestSimScenario(t *testing.T) {
	dir := t.TempDir()
	jp, pp := filepath.Join(dir, "loss.json"), filepath.Join(dir, "loss.png")
	code, out, errs := runMrbench(t, "sim", "loss", "--smoke", "--json", jp, "--plot", pp)
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, out, "scenario loss  seed 1")
	// The simulator's speed goes to stderr, out of the seeded output.
	assert.Regexp(t, `mrbench sim loss: [0-9.]+ M events in [0-9.]+ s, [0-9.]+ M events/s`, errs)
	assert.NotContains(t, out, "events/s")
	b, err := os.ReadFile(jp)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "loss", doc["scenario"])
	// Numbers are JSON numbers (SCHEMA.md, "mrbench sim --json"): the
	// parameters, and the goodput table's numeric columns; the protocol
	// column is a string.
	var typed struct {
		Seed   uint64 `json:"seed"`
		Params []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"params"`
		Tables []struct {
			Name    string   `json:"name"`
			Columns []string `json:"columns"`
			Rows    [][]any  `json:"rows"`
		} `json:"tables"`
	}
	require.NoError(t, json.Unmarshal(b, &typed), "a string where a number belongs fails to decode")
	assert.EqualValues(t, 1, typed.Seed)
	require.NotEmpty(t, typed.Params)
	require.NotEmpty(t, typed.Tables)
	tb := typed.Tables[0]
	require.NotEmpty(t, tb.Rows)
	for k, c := range tb.Columns {
		if c == "protocol" {
			assert.IsType(t, "", tb.Rows[0][k], c)
		} else {
			assert.IsType(t, 0.0, tb.Rows[0][k], c)
		}
	}
	f, err := os.Open(pp)
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)
}

func TestSimUsage(t *testing.T) {
	code, _, errs := runMrbench(t, "sim")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "name a scenario")
	code, _, errs = runMrbench(t, "sim", "nosuch", "--smoke")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "unknown scenario")
	code, _, _ = runMrbench(t, "sim", "loss", "--plot", "x.svg")
	assert.Equal(t, exitUsage, code)
}

// TestSimBadValues: a seed of 0 (which the scenarios would run as seed 1)
// and a link rate the simulator cannot model are usage errors naming the
// value, found before anything runs.
func TestSimBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"loss", "--smoke", "--seed", "0"}, "--seed 0: seeds start at 1"},
		{[]string{"loss", "--smoke", "--link-gbps", "1e-7"}, "link rate 1e-07 Gb/s"},
	} {
		code, out, errs := runMrbench(t, append([]string{"sim"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
	}
}

// TestSimMTURange: mrbench sim -h gives --mtu's range, which it only
// defaulted ("(0: 4096)"), and the range is the scenarios' own: a value
// just outside it either way is refused with an error that names the same
// bounds.
func TestSimMTURange(t *testing.T) {
	bounds := fmt.Sprintf("%d to %d", scenarios.MinMTU, scenarios.MaxMTU)
	assert.Equal(t, "520 to 65000", bounds)
	code, out, errs := runMrbench(t, "sim", "-h")
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, out, "payload bytes per packet, "+bounds+" (0: 4096)")
	for _, mtu := range []int{scenarios.MinMTU - 1, scenarios.MaxMTU + 1} {
		code, out, errs := runMrbench(t, "sim", "loss", "--smoke", "--mtu", fmt.Sprint(mtu))
		assert.Equal(t, exitUsage, code, "--mtu %d: %s", mtu, errs)
		assert.Empty(t, out, "--mtu %d", mtu)
		assert.Contains(t, errs, fmt.Sprintf("MTU %d bytes: want 0 (the default, 4096) or %s", mtu, bounds), "--mtu %d", mtu)
	}
}

// TestSimFlagRanges: mrbench sim -h gives the range of every flag the
// scenarios bound (--link-gbps, --sizes and --losses gave only a default),
// and each range is the scenarios' own: a value just outside it is refused
// with the scenarios' error naming the same bounds, while the bounds
// themselves pass the scenarios' checks, the run then ending at once on a
// context already cancelled.
func TestSimFlagRanges(t *testing.T) {
	code, help, errs := runMrbench(t, "sim", "-h")
	require.Equal(t, exitOK, code, errs)
	for _, want := range []string{
		"link rate in Gb/s, 1e-06 to 100000 (0: the scenario's default, 400)",
		"sizes per rank, each a multiple of 1K from 1K to 1G,",
		"loss percentages across spines, each at least 0 and under 100",
	} {
		assert.Contains(t, help, want)
	}
	maxK := scenarios.MaxCollectiveBytes / 1024
	for _, tc := range []struct {
		args []string
		want string // the scenarios' refusal; "" where the value is in range
	}{
		{[]string{"loss", "--link-gbps", "9.99e-7"}, "link rate 9.99e-07 Gb/s: want 0 (the default) or 1e-06 to 100000"},
		{[]string{"loss", "--link-gbps", "100000.5"}, "link rate 100000.5 Gb/s: want 0 (the default) or 1e-06 to 100000"},
		{[]string{"loss", "--link-gbps", fmt.Sprint(scenarios.MinLinkGbps)}, ""},
		{[]string{"loss", "--link-gbps", fmt.Sprint(scenarios.MaxLinkGbps)}, ""},
		{[]string{"collective", "--sizes", "0"}, "collective size 0: want a multiple of 1 KiB from 1 KiB to 1073741824 bytes"},
		{[]string{"collective", "--sizes", fmt.Sprintf("%dK", maxK+1)}, fmt.Sprintf("collective size %d: want a multiple of 1 KiB from 1 KiB to 1073741824 bytes", (maxK+1)*1024)},
		{[]string{"collective", "--sizes", "1K,1G"}, ""},
		{[]string{"collective", "--losses", "-0.001"}, "collective loss -0.001%: want a percentage in [0, 100)"},
		{[]string{"collective", "--losses", "100"}, "collective loss 100%: want a percentage in [0, 100)"},
		{[]string{"collective", "--losses", "0,99.999"}, ""},
	} {
		args := append([]string{"sim"}, tc.args...)
		if tc.want != "" {
			code, out, errs := runMrbench(t, args...)
			assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errs)
			assert.Empty(t, out, "%v", tc.args)
			assert.Contains(t, errs, tc.want, "%v", tc.args)
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errb strings.Builder
		code := run(ctx, args, &out, &errb)
		assert.Equal(t, interrupt.ExitStatus(ctx), code, "%v: %s", tc.args, errb.String())
		assert.NotContains(t, errb.String(), "want", "%v", tc.args)
	}
}

// TestSimLinkRateWithMTU: --link-gbps and --mtu each in range but whose
// round trip the MetaRoCE core cannot take (the slowest link with the
// largest MTU) are a usage error naming both values and what to change,
// not one naming the core's Config.InitialRTT, a setting mrbench sim has
// no flag for.
func TestSimLinkRateWithMTU(t *testing.T) {
	code, out, errs := runMrbench(t, "sim", "loss", "--smoke", "--link-gbps", fmt.Sprint(scenarios.MinLinkGbps), "--mtu", fmt.Sprint(scenarios.MaxMTU))
	assert.Equal(t, exitUsage, code, errs)
	assert.Empty(t, out)
	assert.Contains(t, errs, "MTU 65000 bytes at link rate 1e-06 Gb/s: ")
	assert.Contains(t, errs, "want an MTU of at most 55997 bytes at this rate, or a link rate of at least 1.161e-06 Gb/s for this MTU")
	assert.NotContains(t, errs, "Config.InitialRTT")
}

// TestSimCollectiveRowsUsage: a bad, empty or repeated size, loss or
// operation, or a row flag given to another scenario, is a usage error
// that names the flag's value.
func TestSimCollectiveRowsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"collective", "--sizes", "1M,lots"}, `--sizes: size "lots"`},
		{[]string{"collective", "--sizes", "2G"}, "collective size 2147483648"},
		{[]string{"collective", "--sizes", "1000"}, "multiple of 1 KiB"},
		{[]string{"collective", "--sizes", "0"}, "collective size 0"},
		{[]string{"collective", "--losses", "0,abc"}, `--losses: "abc"`},
		{[]string{"collective", "--losses", "100"}, "collective loss 100%"},
		{[]string{"collective", "--losses", "-1"}, "collective loss -1%"},
		{[]string{"collective", "--ops", "allgather"}, `operation "allgather"`},
		{[]string{"collective", "--sizes", "1M,4M,1024K"}, "collective size 1048576 given twice"},
		{[]string{"collective", "--losses", "0.1,0.10"}, "collective loss 0.1% given twice"},
		{[]string{"collective", "--ops", "alltoall,alltoall"}, `operation "alltoall" given twice`},
		{[]string{"collective", "--ops", "allreduce,"}, `--ops "allreduce,": an empty item between commas`},
		{[]string{"collective", "--losses", "0,,1"}, `--losses "0,,1": an empty item between commas`},
		{[]string{"collective", "--sizes", " ,1M"}, `--sizes " ,1M": an empty item between commas`},
		{[]string{"loss", "--sizes", "1M"}, `not "loss"`},
		{[]string{"incast", "--ops", "allreduce"}, `not "incast"`},
	} {
		code, out, errs := runMrbench(t, append([]string{"sim"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
	}
}

// TestSimCollectiveSweep: --sizes, --losses and --ops choose the rows; with
// more than two sizes the result gains the bus bandwidth against size and
// its log-x plot.
func TestSimCollectiveSweep(t *testing.T) {
	dir := t.TempDir()
	jp, pp := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.png")
	code, _, errs := runMrbench(t, "sim", "collective", "--smoke", "--sizes", "64K,128K,256K",
		"--losses", "0", "--ops", "allreduce", "--json", jp, "--plot", pp)
	require.Equal(t, exitOK, code, errs)
	b, err := os.ReadFile(jp)
	require.NoError(t, err)
	var doc struct {
		Tables []struct {
			Name string  `json:"name"`
			Rows [][]any `json:"rows"`
		} `json:"tables"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	rows := map[string]int{}
	for _, tb := range doc.Tables {
		rows[tb.Name] = len(tb.Rows)
	}
	assert.Equal(t, 9, rows["collectives"], "3 sizes × 1 loss × 3 protocols")
	assert.Equal(t, 9, rows["busbw_vs_size"])
	for _, p := range []string{pp, filepath.Join(dir, "c-2.png")} {
		f, err := os.Open(p)
		require.NoError(t, err)
		_, err = png.Decode(f)
		f.Close()
		require.NoError(t, err, p)
	}
}

// TestRCCLBackendWithoutLibrary: without RCCL or NCCL the backend fails at
// once with the binding's explanation (where to point it, or, without cgo,
// that no library can be loaded) and exits 2, a configuration error found
// before anything runs.
func TestRCCLBackendWithoutLibrary(t *testing.T) {
	if lib, err := rccl.Open(""); err == nil {
		t.Skipf("an RCCL/NCCL library is installed (%s)", lib.Path())
	}
	t.Setenv("NCCL_NET_PLUGIN", "libnccl-net-metaroce.so")
	code, out, errs := runMrbench(t, "--backend", "rccl", "-np", "1")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "--backend rccl: ")
	if cgoEnabled {
		assert.Contains(t, errs, "METAROCE_RCCL_LIB")
	} else {
		assert.Contains(t, errs, "built without cgo (CGO_ENABLED=0)", "no library path helps a build that cannot load one")
	}
	assert.Contains(t, errs, "NCCL_NET_PLUGIN=libnccl-net-metaroce.so ignored")
	assert.Equal(t, "none", os.Getenv("NCCL_NET_PLUGIN"))
}

// TestPlotNameOnlyExtensionRefused: a --plot file name that is its
// extension alone (".png") is a usage error naming it, for mrbench and
// mrbench sim alike, before anything runs, rather than a plot written as a
// hidden file named ".png".
func TestPlotNameOnlyExtensionRefused(t *testing.T) {
	clearLauncherEnv(t, nil)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		path string
	}{
		{[]string{"-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--plot"}, filepath.Join(dir, ".png")},
		{[]string{"-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--plot"}, filepath.Join(dir, ".SVG")},
		{[]string{"sim", "loss", "--smoke", "--plot"}, filepath.Join(dir, ".png")},
	} {
		code, out, errs := runMrbench(t, append(tc.args, tc.path)...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
		ext := filepath.Ext(tc.path)
		assert.Contains(t, errs, fmt.Sprintf("--plot %q: the file name is the extension %s alone", tc.path, ext), "%v", tc.args)
		assert.Contains(t, errs, "give the plot a name, such as "+filepath.Join(dir, "plot"+ext), "%v", tc.args)
		assert.NoFileExists(t, tc.path)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written")
}

// cancellingWriter keeps what is written to it, safe for concurrent
// writers, and cancels its context once the text holds at.
type cancellingWriter struct {
	mu     sync.Mutex
	b      strings.Builder
	at     string
	cancel context.CancelFunc
}

func (w *cancellingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.at) {
		w.cancel()
	}
	return len(p), nil
}

func (w *cancellingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestSimInterruptStopsScenario: mrbench sim interrupted after the
// scenario's first run exits with the interruption's status once the
// scenario has stopped, after no further run; none of it is left running
// in this process. Before, runSim returned at the cancel and the scenario
// went on in a goroutine to the end of its sweep.
func TestSimInterruptStopsScenario(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := &cancellingWriter{at: " ran ", cancel: cancel}
	var out strings.Builder
	code := run(ctx, []string{"sim", "loss", "--smoke", "-v"}, &out, errs)
	assert.Equal(t, interrupt.ExitStatus(ctx), code, errs.String())
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	assert.NotContains(t, stacks, "fabric/sim/scenarios.", "a scenario still runs after mrbench sim returned")
	assert.Equal(t, 1, strings.Count(errs.String(), " ran "), "runs after the interrupt:\n%s", errs.String())
	assert.Contains(t, errs.String(), "mrbench: interrupted")
	assert.Empty(t, out.String(), "no table of a scenario cut short")
}
