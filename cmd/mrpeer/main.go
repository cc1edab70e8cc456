// Command mrpeer runs this module's UDP datapath (transport/udp) as an
// implementation under test for the conformance suite. It reads control
// requests, one per line, on stdin and answers each with one JSON line on
// stdout (docs/conformance.md, "Control contract"); diagnostics go to
// stderr. It exits 0 after quit or at the end of its input, 2 on bad usage.
//
//	mrconform --iut "build/mrpeer --seed 7"
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run is main without the process: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mrpeer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "seed of connection ids, tokens and entropies (0: crypto/rand)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "mrpeer: unexpected arguments %q\n", fs.Args())
		return 2
	}
	s := newServer(*seed, stderr)
	defer s.shutdown()
	if err := s.serve(stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "mrpeer:", err)
		return 1
	}
	return 0
}
