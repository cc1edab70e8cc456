// Command mrpeer runs this module's UDP datapath (transport/udp) as an
// implementation under test for the conformance suite. It reads control
// requests, one per line, on stdin and answers each with one JSON line on
// stdout (docs/conformance.md, "Control contract"); a bad request, a line
// longer than the contract's 64 MiB included, gets an error reply and the
// next line is served. No reply is longer than 64 MiB either: completions
// reports as many operations as fit and the rest at the next call, and a
// receive whose buffers could not be reported on one line is refused when
// posted. The end of stdin (the tester exited or closed its end) stops an
// accept under way at once, with an error reply, rather than when its
// timeout of up to a minute runs out. A reply that finds stdout closed (a
// broken pipe: the tester has gone without reading it) ends mrpeer as the
// end of its input does. Diagnostics go to stderr.
//
// Exit status: 0 after quit, at the end of its input, or when stdout is a
// pipe whose reader has gone; 1 when stdin cannot be read or stdout
// written otherwise; 2 on bad usage, found before anything runs. -h prints
// the usage and exits 0.
//
//	mrconform --iut "build/mrpeer --seed 7"
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/metaroce/metaroce/internal/cli"
)

// Exit statuses (see the package documentation).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// usageTail follows the flag list in -h output.
const usageTail = `
Reads control requests on stdin, one a line, and answers each with one JSON
line on stdout (docs/conformance.md, "Control contract").

Exit status: 0 after quit, at the end of the input, or when the reader of
stdout has gone (a broken pipe); 1 when stdin cannot be read or stdout
written otherwise; 2 bad usage.
`

func main() {
	// A write to stdout after the tester has gone fails with EPIPE, which
	// serve takes for the tester's departure. Left to the runtime's
	// default, SIGPIPE on stdout would kill the process instead, and the
	// tester would report a signal death for a normal end.
	signal.Ignore(syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mrpeer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mrpeer [--seed N]")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), usageTail)
	}
	seed := fs.Uint64("seed", 1, "seed of connection ids, tokens and entropies (0: crypto/rand)")
	if err := cli.ParseFlags(fs, args, stdout, "mrpeer"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "mrpeer:", err)
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "mrpeer: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	s := newServer(*seed, stderr)
	defer s.shutdown()
	if err := s.serve(stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "mrpeer:", err)
		return exitFail
	}
	return exitOK
}
