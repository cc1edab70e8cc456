package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agreeOver runs agreeSettings on in-process ranks over the reference
// communicator, rank r with the command line args[r], and returns each
// rank's error.
func agreeOver(t *testing.T, args [][]string) []error {
	t.Helper()
	opts := make([]*options, len(args))
	for r, a := range args {
		o, err := parseOptions(a, &bytes.Buffer{})
		require.NoError(t, err, "rank %d: %v", r, a)
		opts[r] = o
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, len(args))
	var mu sync.Mutex
	_ = newMemGroup(len(args)).run(func(c comm) error {
		err := agreeSettings(ctx, c, opts[c.Rank()].agreedSettings(), 10*time.Second)
		mu.Lock()
		errs[c.Rank()] = err
		mu.Unlock()
		return err
	})
	return errs
}

// TestAgreeSettings: in-process ranks started with different flags find
// the first flag they disagree on, name it with rank 0's value and the
// differing ranks', and list the other flags that differ; every rank
// returns the same usage error. Two spellings of one sweep, flags the
// sweep does not use and flags that may differ (agree.go) agree.
func TestAgreeSettings(t *testing.T) {
	base := []string{"-b", "1K", "-e", "64K"}
	with := func(extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	for _, tc := range []struct {
		name string
		args [][]string
		want string // "" when the ranks agree
	}{
		{"same", [][]string{with(), with()}, ""},
		{"spellings", [][]string{
			with("-b", "1024", "--iters", "5", "-f", "1", "-i", "1K", "-d", "fp32", "-o", "mean", "--chunk", "64K"),
			with("-n", "5", "-i", "1024", "-d", "float", "-o", "avg", "--chunk", "65536")}, ""},
		{"may differ", [][]string{
			with("-T", "10s", "-v", "--json", "a.json", "--csv", "a.csv", "--plot", "a.png", "--seed", "3", "-np", "2"),
			with("-T", "1m", "--seed", "4", "-np", "8", "-t", "1", "-p", "1", "-R", "2")}, ""},
		{"unused by the sweep", [][]string{
			{"-b", "1K", "-e", "1K", "--op", "allgather", "-o", "max", "-r", "1", "-f", "2", "--a2a-inflight", "4", "--transport", "tcp", "--loss", "0.1", "--paths", "4"},
			{"-b", "1K", "-e", "1K", "--op", "allgather", "-o", "min", "-i", "8", "--transport", "tcp"}}, ""},
		{"reduction", [][]string{with("-o", "sum"), with("-o", "max")},
			"the ranks disagree on -o: rank 0 has sum, rank 1 has max"},
		{"data type and counts", [][]string{with("-d", "float"), with("-d", "double", "-n", "3", "-w", "0", "-c", "2")},
			"the ranks disagree on -d: rank 0 has float, rank 1 has double; they also disagree on -n, -w, -c"},
		{"all types", [][]string{with("-d", "all"), with()},
			"the ranks disagree on -d: rank 0 has all, rank 1 has float"},
		{"sizes", [][]string{with("-e", "1M"), with()},
			"the ranks disagree on -e: rank 0 has 1M, rank 1 has 64K"},
		{"step", [][]string{with("-f", "2"), with("-i", "4K")},
			"the ranks disagree on -f: rank 0 has 2, rank 1 has none (steps by -i)"},
		{"collective, not what it makes moot", [][]string{with("--op", "allreduce"), with("--op", "broadcast", "-r", "1", "-o", "max")},
			"the ranks disagree on --op: rank 0 has allreduce, rank 1 has broadcast"},
		{"root", [][]string{with("--op", "broadcast", "-r", "1"), with("--op", "broadcast")},
			"the ranks disagree on -r: rank 0 has 1, rank 1 has 0"},
		{"timing and blocking", [][]string{with("-a", "2", "-z", "1"), with()},
			"the ranks disagree on -a: rank 0 has 2, rank 1 has 1; they also disagree on -z"},
		{"transport", [][]string{with("--transport", "both", "--loss", "0.1"), with("--transport", "tcp")},
			"the ranks disagree on --transport: rank 0 has both, rank 1 has tcp"},
		{"transport settings", [][]string{with("--transport", "metaroce", "--loss", "0.01"), with("--transport", "metaroce")},
			"the ranks disagree on --loss: rank 0 has 0.01, rank 1 has 0"},
		// Left to the collectives, which compare them after their
		// defaults when the table's communicator is set up (there
		// --channels 1 and the default agree, --group-size 2 and none
		// do not): mrbench's own comparison passes them.
		{"channels, chunk and group size", [][]string{with("--chunk", "512K", "--channels", "1", "--group-size", "2"), with()}, ""},
		{"paths", [][]string{with("--transport", "both", "--paths", "4"), with("--transport", "both")},
			"the ranks disagree on --paths: rank 0 has 4, rank 1 has 0 (the library default)"},
		{"paths and loss", [][]string{with("--transport", "metaroce", "--paths", "2", "--loss", "0.01"), with("--transport", "metaroce", "--paths", "3")},
			"the ranks disagree on --paths: rank 0 has 2, rank 1 has 3; they also disagree on --loss"},
		{"paths unused by rccl", [][]string{with("--backend", "rccl", "--paths", "2"), with("--backend", "rccl")}, ""},
		{"all-to-all window", [][]string{with("--op", "alltoall", "--a2a-inflight", "1"), with("--op", "alltoall")},
			"the ranks disagree on --a2a-inflight: rank 0 has 1, rank 1 has 0 (by message size)"},
		{"three ranks", [][]string{with("-o", "sum"), with("-o", "max"), with("-o", "min")},
			"the ranks disagree on -o: rank 0 has sum, rank 1 has max, rank 2 has min"},
		{"one rank of three", [][]string{with(), with(), with("-n", "7")},
			"the ranks disagree on -n: rank 0 has 20, rank 2 has 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := agreeOver(t, tc.args)
			for r, err := range errs {
				if tc.want == "" {
					assert.NoError(t, err, "rank %d", r)
					continue
				}
				var se settingsError
				require.ErrorAs(t, err, &se, "rank %d", r)
				assert.Equal(t, tc.want, se.Error(), "rank %d", r)
			}
		})
	}
}

// TestAgreeSettingsManyRanks: past maxNamedRanks differing ranks, the
// error counts the others instead of naming them.
func TestAgreeSettingsManyRanks(t *testing.T) {
	args := make([][]string, 12)
	for r := range args {
		args[r] = []string{"-b", "1K", "-e", "1K", "-n", fmt.Sprint(r + 1)}
	}
	errs := agreeOver(t, args)
	want := "the ranks disagree on -n: rank 0 has 1, rank 1 has 2, rank 2 has 3, rank 3 has 4, rank 4 has 5, rank 5 has 6, rank 6 has 7, rank 7 has 8, rank 8 has 9 and 3 more ranks differ"
	for r, err := range errs {
		assert.EqualError(t, err, want, "rank %d", r)
	}
}

// TestDisagreementAcrossBuilds: settings that a rank of another build
// lists otherwise are reported as such, not as a match.
func TestDisagreementAcrossBuilds(t *testing.T) {
	a := []setting{{"-n", "1"}, {"-w", "0"}}
	assert.Equal(t, "the ranks disagree on -w: rank 0 has 0, rank 1 has no such setting (another build of mrbench)",
		disagreement([][]setting{a, {{"-n", "1"}}}))
	assert.Equal(t, "the ranks list different settings: they run different builds of mrbench",
		disagreement([][]setting{a, append(a, setting{"-x", "1"})}))
	assert.Equal(t, a, decodeSettings(encodeSettings(a)))
}

// TestLaunchedRanksDisagree starts a job's two processes the way a
// launcher would, with different flags: both exit with the usage error,
// naming the flag and the two values, before either prints a table. A
// flag of the transport (--chunk), which package collectives itself
// refuses to set up a communicator over, is named as mrbench's flag too;
// flags that may differ (-T, -v, --json) run.
func TestLaunchedRanksDisagree(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	base := []string{"-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--transport", "tcp"}
	with := func(extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	for _, tc := range []struct {
		name       string
		rank0      []string
		rank1      []string
		want       string // "" when the job runs
		wantStatus int
	}{
		{"reduction", with("-o", "sum"), with("-o", "max"), "mrbench: the ranks disagree on -o: rank 0 has sum, rank 1 has max\n", exitUsage},
		{"iterations", with("-n", "2"), with(), "mrbench: the ranks disagree on -n: rank 0 has 2, rank 1 has 1\n", exitUsage},
		{"paths", with("--transport", "metaroce", "--paths", "2"), with("--transport", "metaroce"), "mrbench: the ranks disagree on --paths: rank 0 has 2, rank 1 has 0 (the library default)\n", exitUsage},
		// Compared by the library after its defaults, named as the flag.
		{"channels", with("--transport", "metaroce", "--channels", "2"), with("--transport", "metaroce"), "mrbench: the ranks disagree on --channels (collectives: the ranks disagree on channels (Config.Channels)", exitUsage},
		{"channels the default's", with("--transport", "metaroce", "--channels", "1"), with("--transport", "metaroce"), "", exitOK},
		// A drawn seed on one rank and a given one on the other: every
		// rank takes part in taking rank 0's.
		{"seeds", with("--transport", "metaroce", "--loss", "0.01", "--seed", "0"), with("--transport", "metaroce", "--loss", "0.01", "--seed", "5"), "", exitOK},
		{"output flags", with("-T", "20s", "-v"), with("-T", "30s", "--json", os.DevNull), "", exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, errs, codes := runTwoRanks(t, self, tc.rank0, tc.rank1)
			for r := range 2 {
				assert.Equal(t, tc.wantStatus, codes[r], "rank %d stderr: %s", r, errs[r].String())
				if tc.want == "" {
					continue
				}
				assert.Contains(t, errs[r].String(), tc.want, "rank %d", r)
				assert.Empty(t, outs[r].String(), "rank %d prints no table", r)
			}
			if tc.want == "" {
				assert.Contains(t, outs[0].String(), "# Out of bounds values : 0 OK")
			}
		})
	}
}

// runTwoRanks runs this test binary as mrbench twice, as ranks 0 and 1 of
// a job launched by hand (METAROCE_*), with args0 and args1, and returns
// each rank's stdout, stderr and exit status (-1: killed at the test's
// deadline of a minute).
func runTwoRanks(t *testing.T, self string, args0, args1 []string) (outs, errs [2]bytes.Buffer, codes [2]int) {
	t.Helper()
	root := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	command := func(ctx context.Context, _ int) *exec.Cmd { return exec.CommandContext(ctx, self) }
	return runRanks(t, command, [2][]string{args0, args1}, "METAROCE_ROOT="+root)
}

// runRanks runs command(ctx, r), this test binary as mrbench or a wrapper
// that runs it, as ranks 0 and 1 of a job launched by hand (METAROCE_RANK,
// METAROCE_NRANKS and env), rank r with args[r], and returns each rank's
// stdout, stderr and exit status (-1: killed at the test's deadline of a
// minute, which ends ctx).
func runRanks(t *testing.T, command func(ctx context.Context, r int) *exec.Cmd, args [2][]string, env ...string) (outs, errs [2]bytes.Buffer, codes [2]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range 2 {
		cmd := command(ctx, r)
		cmd.Env = append(append(os.Environ(), envRunAsMain+"=1", envRunArgs+"="+strings.Join(args[r], "\n"),
			fmt.Sprintf("METAROCE_RANK=%d", r), "METAROCE_NRANKS=2"), env...)
		cmd.Stdout, cmd.Stderr = &outs[r], &errs[r]
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = cmd.Wait()
			codes[r] = cmd.ProcessState.ExitCode()
		}()
	}
	wg.Wait()
	return outs, errs, codes
}

// TestRefusingRankTellsTheOthers: a rank of a launched job that refuses
// its command line before the first table (a bad flag, rank 0's output
// directory) tells the other ranks, which exit with a usage error naming
// it instead of waiting out their -T (five minutes here, past the test's
// deadline); ranks that all refuse alike exit as before.
func TestRefusingRankTellsTheOthers(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	base := []string{"-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--transport", "tcp"}
	with := func(extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	const badDir = `--json "/nonexistent/dir/out.json": directory /nonexistent/dir does not exist`
	for _, tc := range []struct {
		name         string
		rank0, rank1 []string
		want         [2]string // in each rank's stderr
	}{
		{"bad flag on rank 1", with("-T", "5m"), with("--bogus"),
			[2]string{"mrbench: rank 1 refused to run: unknown flag --bogus", "mrbench: unknown flag --bogus"}},
		{"rank 0's output directory", with("--json", "/nonexistent/dir/out.json"), with("-T", "5m"),
			[2]string{"mrbench: " + badDir, "mrbench: rank 0 refused to run: " + badDir}},
		{"bad flag on both", with("--bogus"), with("--bogus"),
			[2]string{"mrbench: unknown flag --bogus", "mrbench: unknown flag --bogus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, errs, codes := runTwoRanks(t, self, tc.rank0, tc.rank1)
			for r := range 2 {
				assert.Equal(t, exitUsage, codes[r], "rank %d stderr: %s", r, errs[r].String())
				assert.Contains(t, errs[r].String(), tc.want[r], "rank %d", r)
				assert.Empty(t, outs[r].String(), "rank %d prints no table", r)
			}
		})
	}
}

// TestRefusalsWording: the refusing ranks are found among the settings
// lists, the first one's error quoted and the others named.
func TestRefusalsWording(t *testing.T) {
	ok := []setting{{"--op", "allreduce"}}
	no := func(why string) []setting { return refusalSettings(refusedFlag, why) }
	failed := func(why string) []setting { return refusalSettings(failedFlag, why) }
	many := [][]setting{ok}
	for range 10 {
		many = append(many, no("x"))
	}
	for _, tc := range []struct {
		name   string
		byRank [][]setting
		want   string
	}{
		{"none", [][]setting{ok, ok}, ""},
		{"failed", [][]setting{ok, failed("no GPU")}, "rank 1 could not start: no GPU"},
		{"failed before refused", [][]setting{no("a"), failed("b"), failed("c")}, "ranks 1 and 2 could not start; rank 1: b"},
		{"one", [][]setting{ok, no("unknown flag --bogus\n(see -h)")}, "rank 1 refused to run: unknown flag --bogus (see -h)"},
		{"two", [][]setting{no("a"), ok, no("b")}, "ranks 0 and 2 refused to run; rank 0: a"},
		{"three", [][]setting{no("a"), no("b"), no("c")}, "ranks 0, 1 and 2 refused to run; rank 0: a"},
		{"many", many, "ranks 1, 2, 3, 4, 5, 6, 7, 8 and 2 more refused to run; rank 1: x"},
		// A rank whose only setting merely looks like one is not read
		// as a refusal unless it is exactly the marker.
		{"lookalike", [][]setting{ok, {{"(refused)x", "y"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, usage := refusals(tc.byRank)
			assert.Equal(t, tc.want, msg)
			assert.Equal(t, msg != "" && !strings.Contains(msg, "could not start"), usage, "a usage error")
		})
	}
}
