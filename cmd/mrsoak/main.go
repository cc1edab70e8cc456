// Command mrsoak runs the collectives soak (package soak): rounds of random
// collectives on in-process ranks under changing faults (datagram loss,
// blackholed ports, a rank that dies), every result checked against a
// reference. It prints the report.
//
// Exit status: 0 when the run checked at least one result and found nothing
// wrong; 1 when a result was corrupted, a failure went unreported, an error
// appeared without a fault that explains it, goroutines or file descriptors
// leaked, nothing was checked (a duration too short for one round), or a
// round could not start; 2 on bad usage, found before anything runs; 130
// when SIGINT, SIGTERM or SIGHUP ended the run (the report then covers the
// rounds before it, and the namespace fabric is torn down first). -h prints
// the usage and exits 0.
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
//	mrsoak -duration 30m
//	mrsoak --netlab --plugin -duration 3m
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/metaroce/metaroce/internal/interrupt"
	"github.com/metaroce/metaroce/soak"
)

// Exit statuses (see the package documentation).
const (
	exitOK          = 0
	exitFail        = 1
	exitUsage       = 2
	exitInterrupted = 130 // as a shell reports a command ended by SIGINT (128 + 2)
)

// usageTail follows the flag list in -h output.
const usageTail = `
Exit status: 0 healthy (something was checked and nothing was wrong);
1 unhealthy (corruption, unreported or unexplained errors, leaks, nothing
checked) or a round could not start; 2 bad usage; 130 ended by SIGINT,
SIGTERM or SIGHUP (the fabric is torn down first).
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
	dur := fs.Duration("duration", 10*time.Second, "how long to start new rounds (positive)")
	ranks := fs.Int("ranks", 4, fmt.Sprintf("in-process ranks (2..%d)", soak.MaxRanks))
	seed := fs.Uint64("seed", 1, "seed of every random choice")
	ops := fs.Int("ops", 24, "collectives per round")
	maxCount := fs.Int("maxcount", 1<<17, "largest element count of one collective")
	useNetlab := fs.Bool("netlab", false, "run 2 ranks on a namespace fabric with nftables faults (needs root and nftables)")
	plugin := fs.Bool("plugin", false, "add rounds that run the NCCL net plugin's C harness (needs gcc)")
	pluginEvery := fs.Int("plugin-every", 4, "with -plugin, every how many rounds one is a plugin round (2..)")
	rounds := fs.Int("rounds", 0, "stop after this many rounds (0: run for -duration)")
	verbose := fs.Bool("v", false, "print one line per round")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "mrsoak: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if *dur <= 0 {
		fmt.Fprintf(stderr, "mrsoak: -duration %v: want a positive duration, such as 30s or 10m\n", *dur)
		return exitUsage
	}
	if *ranks < 2 || *ranks > soak.MaxRanks || *ops < 2 || *maxCount < 1 || *pluginEvery < 2 || *rounds < 0 {
		fmt.Fprintf(stderr, "mrsoak: need 2..%d ranks, at least 2 ops per round, a positive -maxcount and -plugin-every of at least 2 and -rounds of at least 0\n", soak.MaxRanks)
		return exitUsage
	}
	opt := soak.Options{Duration: *dur, Ranks: *ranks, Seed: *seed, OpsPerRound: *ops, MaxCount: *maxCount,
		Netlab: *useNetlab, Plugin: *plugin, PluginEvery: *pluginEvery, MaxRounds: *rounds}
	if *verbose {
		opt.Logf = func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	}
	rep, err := soak.Run(ctx, opt)
	if err != nil {
		fmt.Fprintln(stderr, "mrsoak:", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitFail
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(stderr, "mrsoak:", n)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		fmt.Fprintln(stdout, rep)
		for _, e := range rep.FirstErrors {
			fmt.Fprintln(stdout, "  error:", e)
		}
	}
	switch {
	case rep.Interrupted:
		fmt.Fprintln(stderr, "mrsoak: interrupted; the report covers the rounds before the signal")
		return exitInterrupted
	case !rep.Healthy():
		return exitFail
	}
	return exitOK
}
