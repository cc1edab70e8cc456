// Command mrsoak runs the collectives soak (package soak): rounds of random
// collectives on in-process ranks under changing faults (datagram loss,
// blackholed ports, a rank that dies), every result checked against a
// reference. It prints the report.
//
// Exit status: 0 when the run checked at least one result and found nothing
// wrong; 1 when a result was corrupted, a failure went unreported, an error
// appeared without a fault that explains it, goroutines or file descriptors
// leaked, nothing was checked (a duration too short for one round), or a
// round could not start (the report of the rounds before it is printed all
// the same, with the error); 2 on bad usage, found before anything runs; 128
// plus the signal's number when SIGINT, SIGTERM or SIGHUP ended the run
// (130, 143 or 129, as a shell reports a command a signal ended; the report
// then covers the rounds before it, and the namespace fabric is torn down
// first), unless those rounds found corrupted results, unexpected errors,
// missed kills or plugin failures: that is status 1 whatever ended the
// run. -h prints the usage and exits 0.
//
// With --netlab (root and nftables) the collective rounds run two ranks on
// a namespace fabric of four ECMP spine links, with loss, black holes, CE
// marking and link flaps injected by nftables before and during each
// round; without root it says why and injects driver-level faults. With
// --plugin every fourth round builds (once) and runs the NCCL net plugin's
// C harness in two processes (data scenario; every fourth time the kill
// scenario), which needs gcc; without it those rounds are skipped with a
// note.
//
// A flag with a bad value is named, with the value, in the usage error.
//
// Progress: -v prints one line per round on stderr. Without it, a stderr
// that is a terminal keeps one status line, redrawn each round with the
// time run so far and that round's line, and cleared before the report;
// logs and pipes get nothing.
//
// With -json the report is one JSON object on stdout (the text report
// otherwise) with these keys, soak.Report's JSON form (its fields say
// what each count counts):
//
//	mode                 "driver" or "netlab"
//	elapsed_s            seconds the run took (float)
//	rounds, fault_rounds, kill_rounds
//	ops, bytes           collectives checked and their output bytes
//	packets_sent, retransmits, lost, timeouts, path_changes, ecn_marks, ce_recv
//	faults               {"kind": count} of injected faults
//	mid_round_faults
//	surfaced, missed_kills, unexpected, corrupted
//	plugin_rounds, plugin_messages, plugin_kills, plugin_surfaced,
//	plugin_missed_kills, plugin_failures
//	goroutines_before, goroutines_after, fds_before, fds_after
//	first_errors, notes  lists of strings (possibly empty)
//	interrupted, healthy booleans
//	error                why a round could not start, ending the run ("" when none)
//	problems             why healthy is false, in words (empty when true)
//
//	mrsoak -duration 30m
//	mrsoak --netlab --plugin -duration 3m
//	mrsoak -rounds 8 -json | jq .healthy
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/interrupt"
	"github.com/metaroce/metaroce/internal/term"
	"github.com/metaroce/metaroce/soak"
)

// Exit statuses (see the package documentation).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	// A run that a signal ended exits 128 + the signal's number
	// (interrupt.ExitStatus) unless its rounds found something wrong.
)

// usageTail follows the flag list in -h output.
const usageTail = `
-json prints one object with snake_case keys; elapsed_s is in seconds, and
healthy and problems give the verdict (the command's documentation lists
every key).

Exit status: 0 healthy (something was checked and nothing was wrong);
1 unhealthy (corruption, unreported or unexplained errors, leaks, nothing
checked) or a round could not start; 2 bad usage; 130, 143 or 129 (128 +
the signal's number) ended by SIGINT, SIGTERM or SIGHUP (the fabric is torn
down first), but 1 when the rounds before the signal found corruption,
unexpected errors, missed kills or plugin failures.
`

func main() {
	// SIGTERM and SIGHUP end the run as Ctrl-C does, so that the namespace
	// fabric and its nftables rules are torn down; with the default action
	// they would be left behind.
	ctx, stop := interrupt.Context(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit status. ctx ending
// (a signal, in main) interrupts the soak.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mrsoak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mrsoak [flags]")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), usageTail)
	}
	dur := fs.Duration("duration", 10*time.Second, "how long to start new rounds (positive); with -rounds, only when given")
	ranks := fs.Int("ranks", 4, fmt.Sprintf("in-process ranks (2..%d)", soak.MaxRanks))
	seed := fs.Uint64("seed", 1, "seed of every random choice")
	ops := fs.Int("ops", 24, "collectives per round")
	maxCount := fs.Int("maxcount", 1<<17, "largest element count of one collective")
	useNetlab := fs.Bool("netlab", false, "run 2 ranks on a namespace fabric with nftables faults (needs root and nftables)")
	plugin := fs.Bool("plugin", false, "add rounds that run the NCCL net plugin's C harness (needs gcc)")
	pluginEvery := fs.Int("plugin-every", 4, "with -plugin, every how many rounds one is a plugin round (2..)")
	rounds := fs.Int("rounds", 0, "stop after this many rounds, however long they take unless -duration is given too (0: run for -duration)")
	verbose := fs.Bool("v", false, "print one line per round (without it, a terminal keeps one status line: the time run and the latest round)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := cli.ParseFlags(fs, args, stdout, "mrsoak"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "mrsoak:", err)
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "mrsoak: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	bad := false
	check := func(ok bool, flag string, value any, want string) {
		if !ok {
			fmt.Fprintf(stderr, "mrsoak: -%s %v: want %s\n", flag, value, want)
			bad = true
		}
	}
	check(*dur > 0, "duration", *dur, "a positive duration, such as 30s or 10m")
	check(*ranks >= 2 && *ranks <= soak.MaxRanks, "ranks", *ranks, fmt.Sprintf("2..%d", soak.MaxRanks))
	check(*ops >= 2, "ops", *ops, "at least 2 collectives per round")
	check(*maxCount >= 1, "maxcount", *maxCount, "a positive element count")
	check(*pluginEvery >= 2, "plugin-every", *pluginEvery, "at least 2")
	check(*rounds >= 0, "rounds", *rounds, "0 (run for -duration) or more")
	if bad {
		return exitUsage
	}
	// -rounds without -duration runs that many rounds: the default
	// duration would end it after 10 s, with however many rounds fitted,
	// and the same seed would give another run on a slower host.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if *rounds > 0 && !given["duration"] {
		*dur = math.MaxInt64
	}
	opt := soak.Options{Duration: *dur, Ranks: *ranks, Seed: *seed, OpsPerRound: *ops, MaxCount: *maxCount,
		Netlab: *useNetlab, Plugin: *plugin, PluginEvery: *pluginEvery, MaxRounds: *rounds}
	var line *status
	if *verbose {
		opt.Logf = func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	} else if line = newStatus(stderr, term.IsTerminal(stderr), time.Now(), time.Now, *dur, given["duration"], *rounds); line != nil {
		opt.Logf = line.logf
	}
	rep, err := soakRun(ctx, opt)
	line.clear()
	if err != nil {
		// What the rounds before the error found (a corruption an hour
		// in, say) is printed, not lost with them.
		if rep != nil && (rep.Rounds > 0 || rep.PluginRounds > 0) {
			writeReport(rep, *asJSON, stdout, stderr)
		}
		fmt.Fprintln(stderr, "mrsoak:", err)
		if ctx.Err() != nil {
			return interruptedStatus(ctx, rep, stderr)
		}
		return exitFail
	}
	if !writeReport(rep, *asJSON, stdout, stderr) {
		return exitFail
	}
	switch {
	case rep.Interrupted:
		fmt.Fprintln(stderr, "mrsoak: interrupted; the report covers the rounds before the signal")
		return interruptedStatus(ctx, rep, stderr)
	case !rep.Healthy():
		return exitFail
	}
	return exitOK
}

// interruptedStatus is the exit status of a run that the end of ctx (a
// signal) ended: exitFail when the rounds judged before it found something
// wrong (findings), so that a corruption found an hour in is not reported
// as a mere interruption by a script that reads only the status, and 128
// plus the signal's number otherwise (interrupt.ExitStatus).
func interruptedStatus(ctx context.Context, rep *soak.Report, stderr io.Writer) int {
	code := interrupt.ExitStatus(ctx)
	if f := findings(rep); len(f) > 0 {
		fmt.Fprintf(stderr, "mrsoak: exit status %d, not %d: the rounds before the signal found %s\n",
			exitFail, code, strings.Join(f, ", "))
		return exitFail
	}
	return code
}

// findings lists, in words, what the judged rounds of rep found wrong:
// corrupted results, errors no fault explains, kills no survivor saw, and
// the plugin's failures and missed kills. A signal does not cause these
// (soak leaves the round it cuts short unjudged). Leaks and "nothing
// checked" are left out: the round the signal cut short ends unjudged, and
// what it had not yet closed, or not yet checked, says nothing about the
// build. nil for a nil report or one without findings.
func findings(rep *soak.Report) []string {
	if rep == nil {
		return nil
	}
	var f []string
	for _, c := range []struct {
		n    int
		what string
	}{
		{rep.Corrupted, "corrupted results"},
		{rep.Unexpected, "unexpected errors"},
		{rep.MissedKills, "missed kills"},
		{rep.PluginFailures, "plugin failures"},
		{rep.PluginMissedKills, "plugin missed kills"},
	} {
		if c.n > 0 {
			f = append(f, fmt.Sprintf("%s %d", c.what, c.n))
		}
	}
	return f
}

// soakRun is soak.Run; tests replace it to make a run end by an error.
var soakRun = soak.Run

// writeReport prints the report's notes on stderr and the report on
// stdout, as JSON or text, and reports whether it could be written.
func writeReport(rep *soak.Report, asJSON bool, stdout, stderr io.Writer) bool {
	for _, n := range rep.Notes {
		fmt.Fprintln(stderr, "mrsoak:", n)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "mrsoak: writing the report:", err)
			return false
		}
		return true
	}
	fmt.Fprintln(stdout, rep)
	for _, e := range rep.FirstErrors {
		fmt.Fprintln(stdout, "  error:", e)
	}
	return true
}
