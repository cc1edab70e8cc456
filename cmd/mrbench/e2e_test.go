package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/collectives"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runMrbench runs mrbench in-process and returns its exit code and output.
func runMrbench(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestEndToEndLocal runs small sweeps over real in-process ranks on both
// transports and checks the output as an nccl-tests reader would, the JSON
// against schema.json, the CSV and the plot.
func TestEndToEndLocal(t *testing.T) {
	for _, tc := range []struct {
		ranks string
		coll  string
	}{{"2", "allreduce"}, {"4", "allreduce"}, {"4", "alltoall"}, {"3", "reducescatter"}} {
		t.Run(tc.coll+"/np"+tc.ranks, func(t *testing.T) {
			dir := t.TempDir()
			jsonPath, csvPath, pngPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.png")
			code, out, errs := runMrbench(t, "-np", tc.ranks, "--op", tc.coll, "-b", "64", "-e", "256K", "-f", "16", "-n", "3", "-w", "1",
				"--timeout", "20s", "--json", jsonPath, "--csv", csvPath, "--plot", pngPath)
			require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errs, out)
			assert.Empty(t, errs, "nothing on stderr when it is not a terminal")

			tables, err := parseNCCLTests(out)
			require.NoError(t, err, out)
			require.Len(t, tables, 2, "MetaRoCE then TCP")
			for i, tr := range []string{"metaroce", "tcp"} {
				tab := tables[i]
				assert.True(t, tab.Closed, "table %d closed", i)
				assert.Equal(t, "OK", tab.Status)
				assert.Contains(t, tab.Header, "minBytes 64 maxBytes 262144 step: 16(factor) warmup iters: 1 iters: 3 agg iters: 1 validation: 1 graph: 0")
				require.Len(t, tab.Rows, 4, "64 B, 1 KiB, 16 KiB, 256 KiB")
				for _, r := range tab.Rows {
					assert.Zero(t, r.OutOfPlace.Wrong)
					assert.Zero(t, r.InPlace.Wrong)
					assert.Positive(t, r.OutOfPlace.TimeUs)
					assert.Equal(t, "float", r.Type)
					assert.Equal(t, -1, r.Root)
				}
				assert.Positive(t, tab.AvgBusBW)
				assert.Contains(t, out, "# transport: "+tr)
			}

			doc := validateReportFile(t, jsonPath)
			tabs := doc["tables"].([]any)
			require.Len(t, tabs, 2)
			assert.Equal(t, "metaroce", tabs[0].(map[string]any)["transport"])
			assert.Equal(t, float64(len(tables[0].Rows)), float64(len(tabs[0].(map[string]any)["rows"].([]any))))

			csvText, err := os.ReadFile(csvPath)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(csvText)), "\n")
			assert.Len(t, lines, 1+8)
			assert.Equal(t, strings.Join(csvHeader, ","), lines[0])
			for _, l := range lines[1:] {
				assert.True(t, strings.HasSuffix(l, ",ok"), "row without its table's status: %s", l)
			}

			f, err := os.Open(pngPath)
			require.NoError(t, err)
			defer f.Close()
			img, err := png.Decode(f)
			require.NoError(t, err)
			assert.Greater(t, img.Bounds().Dx(), 100)
		})
	}
}

// TestEndToEndVerboseAndLoss: -v prints per-peer counters after each table,
// a lossy MetaRoCE run still gets every element right, and the seed that
// --seed 0 drew is in the header.
func TestEndToEndVerboseAndLoss(t *testing.T) {
	code, out, errs := runMrbench(t, "-np", "2", "--transport", "metaroce", "--loss", "0.01", "--seed", "0", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-w", "0", "-v")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errs, out)
	tables, err := parseNCCLTests(out)
	require.NoError(t, err)
	require.Len(t, tables, 1)
	for _, r := range tables[0].Rows {
		assert.Zero(t, r.OutOfPlace.Wrong)
		assert.Zero(t, r.InPlace.Wrong)
	}
	assert.Contains(t, out, "# metaroce per-peer counters:")
	assert.Regexp(t, `(?m)^#   path plane 0 entropy +\d+ (active|idle) +packets +\d+`, out, "-v prints one line per path")
	assert.Regexp(t, `(?m)^# datapath: 1 plane\(s\), \d+ path\(s\) per plane, .*max datagram \d+ B`, out)
	assert.Regexp(t, `(?m)^# loss: driver drops each MetaRoCE datagram with probability 0\.01 \(seed (\d+), drawn at random: --seed (\d+) repeats it\)$`, out)
}

// TestEndToEndPaths: the header's datapath line gives the paths per plane
// that the MetaRoCE table ran with: --paths 3 where given, and the
// library's default on loopback, one, where not. The report records the
// count in use in the table's paths_per_plane, given or not, and --paths
// as given in params.paths_per_plane, absent where not given; a TCP table
// has no paths_per_plane.
func TestEndToEndPaths(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     string
		table    any // tables[0].paths_per_plane; nil: absent
		reported any // params.paths_per_plane; nil: absent
	}{
		{[]string{"--transport", "metaroce", "--paths", "3"}, "# datapath: 1 plane(s), 3 path(s) per plane, 3 path(s) open to each peer, ", float64(3), float64(3)},
		{[]string{"--transport", "metaroce"}, "# datapath: 1 plane(s), 1 path(s) per plane, 1 path(s) open to each peer, ", float64(collectives.LoopbackPathsPerPlane), nil},
		{[]string{"--transport", "tcp"}, "# datapath: kernel TCP over ", nil, nil},
	} {
		jsonPath := filepath.Join(t.TempDir(), "r.json")
		args := append([]string{"-np", "2", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "--json", jsonPath}, tc.args...)
		code, out, errs := runMrbench(t, args...)
		require.Equal(t, exitOK, code, "%v: stderr: %s\nstdout: %s", tc.args, errs, out)
		assert.Contains(t, out, "\n"+tc.want, "%v", tc.args)
		tables, err := parseNCCLTests(out)
		require.NoError(t, err, out)
		require.Len(t, tables, 1)
		assert.Equal(t, "OK", tables[0].Status, "%v", tables[0])
		doc := validateReportFile(t, jsonPath)
		assert.Equal(t, tc.reported, doc["params"].(map[string]any)["paths_per_plane"], "%v", tc.args)
		assert.Equal(t, tc.table, doc["tables"].([]any)[0].(map[string]any)["paths_per_plane"], "%v", tc.args)
	}
}

// TestUsageErrors: bad flags exit 2 with a message naming the flag, in
// mrbench's words: no error of a package underneath shows through with its
// prefix.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-b", "1X"}, "size \"1X\""},
		{[]string{"-e", "8", "-b", "16"}, "sizes: -e 8 is below -b 16"},
		{[]string{"-b", "2M", "-e", "1M"}, "sizes: -e 1M is below -b 2M: the sweep runs from -b up to -e"},
		{[]string{"--transport", "ib"}, "--transport \"ib\""},
		{[]string{"--op", "gather"}, "--op \"gather\""},
		{[]string{"-a", "4"}, "-a 4"},
		{[]string{"--loss", "1"}, "--loss 1"},
		{[]string{"--paths", "17"}, "mrbench: --paths 17: want 0 (the library default) to 16"},
		{[]string{"--plot", "x.gif"}, "--plot \"x.gif\""},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"-d", "fp8"}, `mrbench: -d "fp8": unknown data type (want one of int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double, or all)` + "\n"},
		{[]string{"-o", "foo"}, `mrbench: -o "foo": unknown reduction (want one of sum prod max min avg, or all)` + "\n"},
		{[]string{"-o", "alltoall"}, `mrbench: -o "alltoall": -o selects the reduction here (sum prod max min avg); the collective is --op alltoall` + "\n"},
	} {
		code, _, errs := runMrbench(t, tc.args...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
		assert.NotRegexp(t, `\b(reduce|sched|collectives|bytesize): `, errs, "%v", tc.args)
	}
	// Several wrong flags: one line each, every one marked as mrbench's.
	code, _, errs := runMrbench(t, "-n", "0", "-w", "-1", "-a", "7")
	assert.Equal(t, exitUsage, code)
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	require.Len(t, lines, 3, errs)
	for _, l := range lines {
		assert.True(t, strings.HasPrefix(l, "mrbench: "), "a line without the prefix: %q", l)
	}
}

// TestSizeZero: -b 0 -e 0 is one row of size 0, count 0, as in nccl-tests,
// over real ranks on both transports and for every collective (where the
// blocked collectives skip sizes below one element per rank, size 0 still
// runs); a step factor cannot grow a sweep from 0, and the error says so
// with the flags the user gave and the ways out, instead of blaming an -f
// that was never typed.
func TestSizeZero(t *testing.T) {
	code, out, errs := runMrbench(t, "-np", "2", "-b", "0", "-e", "0", "-n", "2", "-w", "1", "--timeout", "20s")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errs, out)
	tables, err := parseNCCLTests(out)
	require.NoError(t, err, out)
	require.Len(t, tables, 2, "MetaRoCE then TCP")
	for _, tab := range tables {
		assert.Equal(t, "OK", tab.Status)
		require.Len(t, tab.Rows, 1)
		r := tab.Rows[0]
		assert.Zero(t, r.Bytes)
		assert.Zero(t, r.Count)
		assert.Zero(t, r.OutOfPlace.Wrong)
		assert.Zero(t, r.InPlace.Wrong)
	}

	for _, c := range benchCollectives {
		o, err := parseOptions([]string{"-b", "0", "-e", "0", "--op", c.String()}, &bytes.Buffer{})
		require.NoError(t, err, "%v", c)
		rows, skipped := newSweep(o).fits(4)
		assert.Equal(t, 1, rows, "%v", c)
		assert.Empty(t, skipped, "%v", c)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-b", "0", "-e", "1M"}, "-b 0 -e 1M: the default step factor (-f 4) never grows a size of 0: step by bytes with -i (e.g. -b 0 -e 1M -i 128K), run size 0 alone (-b 0 -e 0), or start at -b 1 or more"},
		{[]string{"-b", "0", "-e", "1M", "-f", "2"}, "-b 0 -e 1M: -f 2 never grows a size of 0: step by bytes with -i instead of -f"},
		{[]string{"-b", "0", "-e", "0", "--plot", "x.png"}, `--plot "x.png": -e 0 leaves nothing to plot`},
	} {
		code, _, errs := runMrbench(t, tc.args...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
		assert.NotContains(t, errs, "min bytes", "%v", tc.args)
	}
	o, err := parseOptions([]string{"-b", "0", "-e", "1K", "-i", "256"}, &bytes.Buffer{})
	require.NoError(t, err, "stepping by bytes from 0")
	assert.Equal(t, []int64{0, 256, 512, 768, 1024}, newSweep(o).Sizes)
}
