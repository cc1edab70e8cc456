package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/transport/udp"
)

func TestSweepSizes(t *testing.T) {
	got, err := sweepSizes(16, 64<<20, 4, 0)
	require.NoError(t, err)
	assert.Len(t, got, 12)
	assert.Equal(t, int64(16), got[0])
	assert.Equal(t, int64(64<<20), got[11])

	got, err = sweepSizes(8, 20, 0, 4)
	require.NoError(t, err)
	assert.Equal(t, []int64{8, 12, 16, 20}, got)

	got, err = sweepSizes(8, 8, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []int64{8}, got)

	_, err = sweepSizes(16<<20, 8, 2, 0)
	assert.ErrorContains(t, err, "-e 8 is below -b 16M")
	_, err = sweepSizes(0, 8, 2, 0)
	assert.ErrorContains(t, err, "-b 0: a step factor (-f) never grows a size of 0")

	// A sweep from a size to itself is that size, whatever the step: size
	// 0 with the default factor too.
	for _, step := range []struct {
		factor float64
		bytes  int64
	}{{4, 0}, {0, 0}, {0, 1 << 20}} {
		got, err = sweepSizes(0, 0, step.factor, step.bytes)
		require.NoError(t, err, "%+v", step)
		assert.Equal(t, []int64{0}, got, "%+v", step)
	}
	got, err = sweepSizes(0, 1024, 0, 256)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 256, 512, 768, 1024}, got)
	_, err = sweepSizes(1, 1<<40, 0, 1)
	assert.ErrorContains(t, err, "more than")
	_, err = sweepSizes(1, 2, 1.0000001, 0)
	assert.ErrorContains(t, err, "-f 1.0000001 does not grow size 1")
}

func TestParseOptionsDefaults(t *testing.T) {
	o, err := parseOptions(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, int64(defaultMinBytes), o.MinBytes)
	assert.Equal(t, int64(64<<20), o.MaxBytes)
	assert.Equal(t, float64(defaultStepFactor), o.StepFactor)
	assert.Equal(t, sched.AllReduce, o.Collective)
	assert.Equal(t, []reduce.DType{reduce.Float32}, o.DTypes)
	assert.Equal(t, []reduce.Op{reduce.OpSum}, o.Ops)
	assert.Equal(t, []string{"metaroce", "tcp"}, o.Transports)
	assert.Equal(t, 4, o.Ranks)
	assert.Equal(t, 1, o.Check)
	assert.Equal(t, 1, o.Average)
	assert.Equal(t, "4(factor)", o.stepLabel())
}

func TestParseOptionsNCCLTestsFlags(t *testing.T) {
	o, err := parseOptions([]string{"-b", "8", "-e", "128M", "-i", "1M", "-n", "5", "-w", "0", "-c", "0", "-d", "all",
		"-o", "max", "-a", "3", "-z", "1", "-r", "1", "--op", "broadcast", "-np", "2", "--channels", "4",
		"--transport", "tcp", "--backend", "host"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, int64(8), o.MinBytes)
	assert.Equal(t, int64(128<<20), o.MaxBytes)
	assert.Zero(t, o.StepFactor, "-i without -f steps by bytes, as nccl-tests")
	assert.Equal(t, "1048576(bytes)", o.stepLabel())
	assert.Len(t, o.DTypes, 10)
	assert.Equal(t, []reduce.Op{reduce.OpMax}, o.Ops)
	assert.Equal(t, sched.Broadcast, o.Collective)
	assert.Equal(t, []string{"tcp"}, o.Transports)
	assert.Equal(t, 3, o.Average)
	assert.Equal(t, 4, o.Channels)

	o, err = parseOptions([]string{"--minbytes", "1K", "--maxbytes", "4K", "--stepfactor", "2", "--iters", "7", "--datatype", "half"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, int64(1024), o.MinBytes)
	assert.Equal(t, 7, o.Iters)
	assert.Equal(t, []reduce.DType{reduce.Float16}, o.DTypes)

	// Non-reducing collectives print "none" and run one op.
	assert.Equal(t, "none", redOpName(sched.AllGather, reduce.OpMax))
	assert.Equal(t, "max", redOpName(sched.AllReduce, reduce.OpMax))
}

// TestNCCLTestsOnlyFlags: nccl-tests flags mrbench has no use for are
// accepted with their neutral values, and refused with a hint otherwise;
// -T/--timeout take seconds as nccl-tests' -T does; --op given a reduction
// says that -o is the reduction here.
func TestNCCLTestsOnlyFlags(t *testing.T) {
	o, err := parseOptions([]string{"-g", "1", "-t", "1", "-m", "1", "-G", "0", "-N", "1", "-C", "0", "-p", "1", "-R", "1", "-T", "30"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, o.Timeout)
	o, err = parseOptions([]string{"--timeout", "1m30s"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, o.Timeout)
	for args, want := range map[string]string{
		"-g 8":           "-np N or a launcher",
		"-t 2":           "one thread per rank",
		"-m 4":           "aggregated",
		"-G 10":          "CUDA graphs",
		"--op sum":       "the reduction is -o sum",
		"--timeout x":    "seconds",
		"--ngpus 2":      "-np N",
		"--run_cycles 0": "run mrbench again",
		"-p 2":           "want 0 or 1",
		"-R 3":           "want 0, 1 or 2",
	} {
		_, err := parseOptions(strings.Fields(args), io.Discard)
		assert.ErrorContains(t, err, want, args)
	}
}

// TestHelpGroupsAliases: -h prints each flag once with its aliases, each
// default once, the exit statuses and the pointer to the simulator's help.
func TestHelpGroupsAliases(t *testing.T) {
	var out bytes.Buffer
	_, err := parseOptions([]string{"-h"}, &out)
	require.ErrorIs(t, err, errHelp)
	text := out.String()
	for _, want := range []string{"  -n, --iters int\n", "  -c, --check int\n", "  -T, --timeout value\n", "Exit status:", "mrbench sim -h"} {
		assert.Contains(t, text, want)
	}
	assert.Equal(t, 1, strings.Count(text, "(default 1m0s)"))
	assert.NotContains(t, text, "\n  -iters")
}

// TestStepFactorValues: -f 1 steps by -i as in nccl-tests (where 1 is the
// default), like -f 0; a factor that is no number (NaN, Inf) or lies in
// (0, 1) is a usage error instead of a silent fallback.
func TestStepFactorValues(t *testing.T) {
	for _, tc := range []struct {
		f    string
		want float64 // StepFactor after parsing
		err  string
	}{
		{"0", 0, ""},
		{"1", 0, ""},
		{"2", 2, ""},
		{"0.5", 0, "-f 0.5: the step factor must be 0 or 1"},
		{"-2", 0, "-f -2: the step factor must be 0 or 1"},
		{"NaN", 0, "-f NaN: the step factor must be a number"},
		{"Inf", 0, "-f +Inf: the step factor must be a number"},
	} {
		o, err := parseOptions([]string{"-f", tc.f, "-i", "8", "-b", "8", "-e", "64"}, io.Discard)
		if tc.err != "" {
			require.Error(t, err, "-f %s", tc.f)
			assert.Contains(t, err.Error(), tc.err)
			continue
		}
		require.NoError(t, err, "-f %s", tc.f)
		assert.Equal(t, tc.want, o.StepFactor, "-f %s", tc.f)
	}
}

// TestTimeoutValues: -T takes a duration or a bare number of seconds; a
// number that no time.Duration holds (NaN, Inf, beyond about 292 years) is
// refused with the value as given, rather than wrapped around to a
// negative duration that the error then names in its place. So is a
// deadline of 0 or less, which nccl-tests' users may type for "no limit":
// the error names the value as typed (not "0s" for 1e-10), says there is
// no such thing here, and gives the way out.
func TestTimeoutValues(t *testing.T) {
	const noZero = "want a deadline above 0: a duration (30s, 2m) or seconds; there is no 0 for no limit, as a rank that stopped would then hang the run: give a long one, such as 1h"
	for _, tc := range []struct {
		v    string
		want time.Duration
		err  string
	}{
		{"30", 30 * time.Second, ""},
		{"2.5", 2500 * time.Millisecond, ""},
		{"2m", 2 * time.Minute, ""},
		{"1e9", 1e9 * time.Second, ""},
		{"1ns", time.Nanosecond, ""},
		{"-1", 0, `invalid value "-1" for flag -T: ` + noZero},
		{"0", 0, `invalid value "0" for flag -T: ` + noZero},
		{"0s", 0, `invalid value "0s" for flag -T: ` + noZero},
		{"-5m", 0, `invalid value "-5m" for flag -T: ` + noZero},
		{"1e-10", 0, `invalid value "1e-10" for flag -T: ` + noZero},
		{"1e30", 0, `invalid value "1e30" for flag -T: want a number of seconds below`},
		{"NaN", 0, `invalid value "NaN" for flag -T: want a number of seconds below`},
		{"inf", 0, `invalid value "inf" for flag -T: want a number of seconds below`},
		{"-Inf", 0, `invalid value "-Inf" for flag -T: want a number of seconds below`},
	} {
		o, err := parseOptions([]string{"-T", tc.v}, io.Discard)
		if tc.err != "" {
			require.Error(t, err, "-T %s", tc.v)
			assert.Contains(t, err.Error(), tc.err)
			assert.NotContains(t, err.Error(), "-2562047h", "a wrapped-around duration")
			continue
		}
		require.NoError(t, err, "-T %s", tc.v)
		assert.Equal(t, tc.want, o.Timeout, "-T %s", tc.v)
	}
	_, err := parseOptions([]string{"--timeout", "0"}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid value "0" for flag --timeout: want a deadline above 0`, "the flag as typed")
}

// TestPipelineFlags: --chunk and --a2a-inflight reach the collectives'
// configuration and the report's parameters, absent there when not given;
// a negative window, an unparsable or tiny chunk, or a group size for a
// collective that does not group is a usage error that names the flag.
func TestPipelineFlags(t *testing.T) {
	o, err := parseOptions([]string{"--chunk", "256K", "--a2a-inflight", "8"}, io.Discard)
	require.NoError(t, err)
	cfg := (&hostLauncher{o: o}).config(transportMetaRoCE)
	assert.Equal(t, int64(256<<10), cfg.ChunkBytes)
	assert.Equal(t, 8, cfg.AllToAllInFlight)
	assert.Equal(t, int64(256<<10), o.params().ChunkBytes)
	assert.Equal(t, 8, o.params().A2AFlight)

	o, err = parseOptions(nil, io.Discard)
	require.NoError(t, err)
	js, err := json.Marshal(o.params())
	require.NoError(t, err)
	assert.NotContains(t, string(js), "chunk_bytes")
	assert.NotContains(t, string(js), "a2a_inflight")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--a2a-inflight", "-1"}, "--a2a-inflight -1: want 0"},
		{[]string{"--chunk", "lots"}, "-chunk"},
		{[]string{"--chunk", "1"}, "--chunk 1: want 0 (the library default) or at least 4K"},
		{[]string{"--group-size", "2", "--op", "alltoall"}, "--group-size 2: groups ranks for the hierarchical all-reduce only, not --op alltoall"},
	} {
		_, err := parseOptions(tc.args, io.Discard)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// TestPathsFlag: --paths reaches the MetaRoCE table's datapath
// configuration, and no other table's; 0, given or not, leaves the choice
// to the library (one path per plane on loopback); a count outside 0 to
// the driver's ports per plane is a usage error that names the flag as
// typed and the range.
func TestPathsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int    // PathsPerPlane of the MetaRoCE table's configuration
		err  string // "" when the flags parse
	}{
		{nil, 0, ""},
		{[]string{"--paths", "0"}, 0, ""},
		{[]string{"--paths", "1"}, 1, ""},
		{[]string{"--paths", "4"}, 4, ""},
		{[]string{"--paths", "16"}, 16, ""},
		{[]string{"--paths", "17"}, 0, "--paths 17: want 0 (the library default) to 16: each path of a plane takes a source port of its own, and the driver opens 16 per plane"},
		{[]string{"--paths", "-1"}, 0, "--paths -1: want 0 (the library default) to 16"},
		{[]string{"--paths", "many"}, 0, `invalid value "many" for flag --paths: want a whole number`},
	} {
		o, err := parseOptions(tc.args, io.Discard)
		if tc.err != "" {
			require.Error(t, err, "%v", tc.args)
			assert.Contains(t, err.Error(), tc.err, "%v", tc.args)
			continue
		}
		require.NoError(t, err, "%v", tc.args)
		l := &hostLauncher{o: o}
		assert.Equal(t, tc.want, l.config(transportMetaRoCE).UDP.Core.PathsPerPlane, "%v", tc.args)
		assert.Zero(t, l.config(transportTCP).UDP.Core.PathsPerPlane, "%v: the TCP table has no paths", tc.args)
	}
}

// TestPathsHelpNamesTheDefaults: the help of --paths gives what 0
// resolves to from the constants behind it, the loopback count of package
// collectives and the datapath's count for other addresses, and names
// where mrbench meets the latter (--netlab); defaultPathsPerPlane is the
// count a MetaRoCE endpoint resolves 0 to, which the collectives library
// leaves in place off loopback (the endpoint here listens on loopback, but
// the driver's own default does not depend on the address).
func TestPathsHelpNamesTheDefaults(t *testing.T) {
	var out bytes.Buffer
	_, err := parseOptions([]string{"-h"}, &out)
	require.ErrorIs(t, err, errHelp)
	assert.Contains(t, out.String(), fmt.Sprintf("(0: the library default: %d where all of a rank's plane addresses are loopback ones, as for -np's in-process ranks, else %d, as under --netlab)",
		collectives.LoopbackPathsPerPlane, defaultPathsPerPlane))

	ep, err := udp.Listen(udp.Config{Seed: 1})
	require.NoError(t, err)
	defer ep.Close()
	assert.Equal(t, defaultPathsPerPlane, ep.Config().Core.PathsPerPlane, "the datapath's default paths per plane")
}

// TestSeedZeroDrawsAndTells: --seed 0 draws a non-zero seed once, and both
// the header and the report's parameters give it, so that a lossy run can
// be repeated; a given seed is used as it is and not called drawn. The
// report carries the seed only when --loss drops anything.
func TestSeedZeroDrawsAndTells(t *testing.T) {
	o, err := parseOptions([]string{"--seed", "0", "--loss", "0.01"}, io.Discard)
	require.NoError(t, err)
	require.NotZero(t, o.Seed)
	assert.LessOrEqual(t, o.Seed, uint64(1)<<53, "a float64 reader of the JSON would round it")
	assert.True(t, o.SeedDrawn)
	assert.Equal(t, o.Seed, o.params().Seed)

	o2, err := parseOptions([]string{"--seed", "0", "--loss", "0.01"}, io.Discard)
	require.NoError(t, err)
	assert.NotEqual(t, o.Seed, o2.Seed, "two runs with --seed 0 drop alike")

	given, err := parseOptions([]string{"--seed", "7", "--loss", "0.01"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), given.Seed)
	assert.False(t, given.SeedDrawn)
	assert.Equal(t, uint64(7), given.params().Seed)

	lossless, err := parseOptions([]string{"--seed", "7"}, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, lossless.params().Seed, "no loss, no seed in the report")
	tcp, err := parseOptions([]string{"--seed", "7", "--loss", "0.1", "--transport", "tcp"}, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, tcp.params().Seed, "nothing drops over TCP, no seed in the report")
}

// TestReportLossAsApplied: the report's loss is what MetaRoCE's driver
// applied, 0 with its seed absent where no MetaRoCE table runs (kernel
// TCP alone, or the rccl backend, which runs neither host transport),
// rather than --loss as typed, which would call a lossless table lossy.
func TestReportLossAsApplied(t *testing.T) {
	for _, tc := range []struct {
		args []string
		loss float64
		seed uint64
	}{
		{[]string{"--transport", "metaroce"}, 0.1, 7},
		{[]string{"--transport", "both"}, 0.1, 7},
		{[]string{"--transport", "tcp"}, 0, 0},
		{[]string{"--backend", "rccl"}, 0, 0},
	} {
		o, err := parseOptions(append([]string{"--loss", "0.1", "--seed", "7"}, tc.args...), io.Discard)
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.loss, o.params().Loss, "%v", tc.args)
		assert.Equal(t, tc.seed, o.params().Seed, "%v", tc.args)
	}
}

// TestReportPathsAsGiven: the report's params.paths_per_plane is --paths
// as given where a MetaRoCE table runs, and absent where none does (kernel
// TCP alone, the rccl backend) or where --paths left the count to the
// library (the tables record the count in use: TestEndToEndPaths).
func TestReportPathsAsGiven(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int // 0: absent from the report
	}{
		{[]string{"--paths", "4", "--transport", "metaroce"}, 4},
		{[]string{"--paths", "4", "--transport", "both"}, 4},
		{[]string{"--paths", "4", "--transport", "tcp"}, 0},
		{[]string{"--paths", "4", "--backend", "rccl"}, 0},
		{[]string{"--paths", "0"}, 0},
		{nil, 0},
	} {
		o, err := parseOptions(tc.args, io.Discard)
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.want, o.params().Paths, "%v", tc.args)
		js, err := json.Marshal(o.params())
		require.NoError(t, err)
		if tc.want == 0 {
			assert.NotContains(t, string(js), "paths_per_plane", "%v", tc.args)
		} else {
			assert.Contains(t, string(js), fmt.Sprintf(`"paths_per_plane":%d,`, tc.want), "%v", tc.args)
		}
	}
}

// TestEmptyPeerSummarySaysWhy: -v over a transport that keeps counters
// but has no peers (one rank) says so, instead of that it keeps none.
func TestEmptyPeerSummarySaysWhy(t *testing.T) {
	var b strings.Builder
	writePeerSummary(&b, transportMetaRoCE, nil)
	assert.Equal(t, "# metaroce: no per-peer counters (no rank has a peer to count)\n#\n", b.String())
	b.Reset()
	writePeerSummary(&b, transportTCP, nil)
	assert.Equal(t, "# tcp: no per-peer counters (the transport keeps none)\n#\n", b.String())
}

// TestTimingNote: the header's timing line reads right for every -a: rank
// 0's own mean for -a 0 (not "rank 0 of each rank's mean"), and every
// rank's mean combined for the others.
func TestTimingNote(t *testing.T) {
	for a, want := range []string{
		"rank 0's mean over 5 iterations after 1 warm-up; ",
		"average over ranks of each rank's mean over 5 iterations after 1 warm-up; ",
		"minimum over ranks of each rank's mean over 5 iterations after 1 warm-up; ",
		"maximum over ranks of each rank's mean over 5 iterations after 1 warm-up; ",
	} {
		o, err := parseOptions([]string{"-a", strconv.Itoa(a), "-n", "5", "-w", "1"}, io.Discard)
		require.NoError(t, err)
		var b bytes.Buffer
		writeHeader(&b, o, &Env{}, transportTCP, "tcp", "", nil)
		assert.Contains(t, b.String(), "\n# timing: "+want, "-a %d", a)
	}
}

// TestHeaderValidationIsCheckCount: the header's "validation:" field is
// -c as given, the checked iterations per size, as nccl-tests prints it,
// not 1 for any -c above 0.
func TestHeaderValidationIsCheckCount(t *testing.T) {
	for _, c := range []int{0, 1, 5} {
		o, err := parseOptions([]string{"-c", strconv.Itoa(c), "-n", "2"}, io.Discard)
		require.NoError(t, err)
		var b bytes.Buffer
		writeHeader(&b, o, &Env{}, transportTCP, "tcp", "", nil)
		assert.Contains(t, b.String(), fmt.Sprintf(" iters: 2 agg iters: 1 validation: %d graph: 0\n", c), "-c %d", c)
	}
}

// TestIgnoredFlagsNoted: --loss, --seed and --paths where no MetaRoCE
// table runs (nothing drops datagrams, no connection has paths), and
// --transport with the rccl backend, have no effect; each is accepted with
// a note that says so, and a flag that takes effect gets none (--loss with
// --transport both drops the MetaRoCE table's datagrams). --loss, --seed
// and --paths, ignored together for the same reason, share one note that
// names them all, instead of several that repeated the reason.
func TestIgnoredFlagsNoted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--seed", "7"}, []string{"--seed 7 ignored: no --loss is given"}},
		{[]string{"--seed", "0"}, []string{"--seed 0 ignored: no --loss is given"}},
		{[]string{"--seed", "7", "--loss", "0.1", "--transport", "tcp"}, []string{
			"--loss 0.1 and --seed 7 ignored: --transport tcp runs no MetaRoCE table, and --loss drops MetaRoCE datagrams only (--seed seeds those drops); use --transport metaroce or both to drop some"}},
		{[]string{"--seed", "7", "--loss", "0.1", "--backend", "rccl"}, []string{
			"--loss 0.1 and --seed 7 ignored: --backend rccl runs no MetaRoCE table, and --loss drops MetaRoCE datagrams only (--seed seeds those drops); leave out --backend rccl to drop some"}},
		{[]string{"--seed", "0", "--loss", "0.1", "--transport", "metaroce", "--backend", "rccl"}, []string{
			"--loss 0.1 and --seed 0 ignored: --backend rccl runs no MetaRoCE table",
			"--transport metaroce ignored: --backend rccl"}},
		{[]string{"--loss", "0.25", "--transport", "tcp"}, []string{"--loss 0.25 ignored: --transport tcp runs no MetaRoCE table"}},
		{[]string{"--loss", "0.25", "--backend", "rccl"}, []string{"--loss 0.25 ignored: --backend rccl runs no MetaRoCE table"}},
		{[]string{"--loss", "0.25", "--transport", "metaroce", "--backend", "rccl"}, []string{
			"--loss 0.25 ignored: --backend rccl runs no MetaRoCE table",
			"--transport metaroce ignored: --backend rccl"}},
		{[]string{"--loss", "0.25"}, nil},
		{[]string{"--loss", "0.25", "--transport", "both"}, nil},
		{[]string{"--loss", "0", "--transport", "tcp"}, nil},
		{[]string{"--paths", "4", "--transport", "tcp"}, []string{
			"--paths 4 ignored: --transport tcp runs no MetaRoCE table, and --paths sets the paths of MetaRoCE connections only; use --transport metaroce or both to set them"}},
		{[]string{"--paths", "4", "--backend", "rccl"}, []string{
			"--paths 4 ignored: --backend rccl runs no MetaRoCE table, and --paths sets the paths of MetaRoCE connections only; leave out --backend rccl to set them"}},
		{[]string{"--paths", "2", "--loss", "0.1", "--seed", "7", "--transport", "tcp"}, []string{
			"--loss 0.1, --seed 7 and --paths 2 ignored: --transport tcp runs no MetaRoCE table, and --loss drops MetaRoCE datagrams only (--seed seeds those drops) and --paths sets the paths of MetaRoCE connections only; use --transport metaroce or both for them to take effect"}},
		{[]string{"--paths", "2", "--loss", "0.1", "--transport", "tcp"}, []string{
			"--loss 0.1 and --paths 2 ignored: --transport tcp runs no MetaRoCE table, and --loss drops MetaRoCE datagrams only and --paths sets"}},
		{[]string{"--paths", "2", "--seed", "7", "--transport", "tcp"}, []string{
			"--paths 2 ignored: --transport tcp runs no MetaRoCE table",
			"--seed 7 ignored: no --loss is given"}},
		{[]string{"--paths", "4"}, nil},
		{[]string{"--paths", "4", "--transport", "both"}, nil},
		{[]string{"--paths", "0", "--transport", "tcp"}, nil},
		{[]string{"--transport", "tcp", "--backend", "rccl"}, []string{"--transport tcp ignored: --backend rccl measures RCCL/NCCL over its own transports"}},
		{[]string{"--transport", "both", "--backend", "rccl"}, []string{"--transport both ignored: --backend rccl"}},
		{[]string{"--seed", "7", "--loss", "0.1"}, nil},
		{[]string{"--seed", "7", "--loss", "0.1", "--transport", "metaroce"}, nil},
		{[]string{"--transport", "tcp"}, nil},
		{[]string{"--backend", "rccl"}, nil},
		{nil, nil},
	} {
		o, err := parseOptions(tc.args, io.Discard)
		require.NoError(t, err, "%v", tc.args)
		notes := o.ignoredFlags()
		require.Len(t, notes, len(tc.want), "%v: %q", tc.args, notes)
		for i, w := range tc.want {
			assert.True(t, strings.HasPrefix(notes[i], w), "%v: %q does not start with %q", tc.args, notes[i], w)
		}
	}
}

// TestIgnoredSeedNotedOnStderr: a run with --seed and no --loss still
// runs, and says on stderr, once, that the seed has no effect.
func TestIgnoredSeedNotedOnStderr(t *testing.T) {
	clearLauncherEnv(t, nil)
	code, out, errs := runMrbench(t, "-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--seed", "7")
	require.Equal(t, exitOK, code, errs)
	assert.Equal(t, 1, strings.Count(errs, "mrbench: --seed 7 ignored: no --loss is given, and it seeds only --loss's drops of MetaRoCE datagrams; add --loss P to drop some\n"), errs)
	assert.Contains(t, out, "# Avg bus bandwidth")
}

// TestIgnoredLossNotedOnStderr: a run with --loss over TCP alone still
// runs, with "loss: none" in its header, and says on stderr, once for the
// job, that --loss has no effect.
func TestIgnoredLossNotedOnStderr(t *testing.T) {
	clearLauncherEnv(t, nil)
	code, out, errs := runMrbench(t, "-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--loss", "0.1")
	require.Equal(t, exitOK, code, errs)
	assert.Equal(t, 1, strings.Count(errs, "mrbench: --loss 0.1 ignored: --transport tcp runs no MetaRoCE table, and --loss drops MetaRoCE datagrams only; use --transport metaroce or both to drop some\n"), errs)
	assert.Equal(t, 1, strings.Count(errs, " ignored: "), errs)
	assert.Contains(t, out, "# loss: none (--loss drops MetaRoCE datagrams only)\n")
	assert.Contains(t, out, "# Avg bus bandwidth")
}

// TestIgnoredPathsNotedOnStderr: a run with --paths over TCP alone still
// runs, and says on stderr, once, that --paths has no effect.
func TestIgnoredPathsNotedOnStderr(t *testing.T) {
	clearLauncherEnv(t, nil)
	code, out, errs := runMrbench(t, "-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--paths", "4")
	require.Equal(t, exitOK, code, errs)
	assert.Equal(t, 1, strings.Count(errs, "mrbench: --paths 4 ignored: --transport tcp runs no MetaRoCE table, and --paths sets the paths of MetaRoCE connections only; use --transport metaroce or both to set them\n"), errs)
	assert.Equal(t, 1, strings.Count(errs, " ignored: "), errs)
	assert.Contains(t, out, "# Avg bus bandwidth")
}

// TestIgnoredLossAndSeedOneNote: --loss and --seed over TCP alone, both
// without effect for the same reason, are noted on stderr in one line that
// names both, where two lines gave that reason twice.
func TestIgnoredLossAndSeedOneNote(t *testing.T) {
	clearLauncherEnv(t, nil)
	code, out, errs := runMrbench(t, "-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--loss", "0.1", "--seed", "7")
	require.Equal(t, exitOK, code, errs)
	assert.Equal(t, 1, strings.Count(errs, "mrbench: --loss 0.1 and --seed 7 ignored: --transport tcp runs no MetaRoCE table, and --loss drops MetaRoCE datagrams only (--seed seeds those drops); use --transport metaroce or both to drop some\n"), errs)
	assert.Equal(t, 1, strings.Count(errs, " ignored: "), errs)
	assert.Contains(t, out, "# Avg bus bandwidth")
}
