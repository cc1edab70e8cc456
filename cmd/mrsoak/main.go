// Command mrsoak runs the collectives soak (package soak): rounds of random
// collectives on in-process ranks under changing faults (datagram loss,
// blackholed ports, a rank that dies), every result checked against a
// reference. It prints the report and exits 1 when a result was corrupted,
// a failure went unreported, an error appeared without a fault that
// explains it, or goroutines or file descriptors leaked; 2 on bad usage.
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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/metaroce/metaroce/soak"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mrsoak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dur := fs.Duration("duration", 10*time.Second, "how long to start new rounds")
	ranks := fs.Int("ranks", 4, "in-process ranks")
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
		return 2
	}
	if *ranks < 2 || *ranks > 64 || *ops < 2 || *maxCount < 1 || *pluginEvery < 2 || *rounds < 0 {
		fmt.Fprintln(stderr, "mrsoak: need 2..64 ranks, at least 2 ops per round, a positive -maxcount and -plugin-every of at least 2 and -rounds of at least 0")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opt := soak.Options{Duration: *dur, Ranks: *ranks, Seed: *seed, OpsPerRound: *ops, MaxCount: *maxCount,
		Netlab: *useNetlab, Plugin: *plugin, PluginEvery: *pluginEvery, MaxRounds: *rounds}
	if *verbose {
		opt.Logf = func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	}
	rep, err := soak.Run(ctx, opt)
	if err != nil {
		fmt.Fprintln(stderr, "mrsoak:", err)
		return 1
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
	if !rep.Healthy() {
		return 1
	}
	return 0
}
