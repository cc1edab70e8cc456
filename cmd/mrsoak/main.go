// Command mrsoak runs the collectives soak (package soak): rounds of random
// collectives on in-process ranks under changing faults (datagram loss,
// blackholed ports, a rank that dies), every result checked against a
// reference. It prints the report and exits 1 when a result was corrupted,
// a failure went unreported, an error appeared without a fault that
// explains it, or goroutines or file descriptors leaked; 2 on bad usage.
//
//	mrsoak -duration 30m
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
	verbose := fs.Bool("v", false, "print one line per round")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *ranks < 2 || *ranks > 64 || *ops < 2 || *maxCount < 1 {
		fmt.Fprintln(stderr, "mrsoak: need 2..64 ranks, at least 2 ops per round and a positive -maxcount")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opt := soak.Options{Duration: *dur, Ranks: *ranks, Seed: *seed, OpsPerRound: *ops, MaxCount: *maxCount}
	if *verbose {
		opt.Logf = func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	}
	rep, err := soak.Run(ctx, opt)
	if err != nil {
		fmt.Fprintln(stderr, "mrsoak:", err)
		return 1
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
