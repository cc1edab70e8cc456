// Command mrconform runs the MetaRoCE conformance suite against an
// implementation under test and reports TAP, a table and optionally JUnit
// XML.
//
// Exit status: 0 when every mandatory case passed (and the JUnit report,
// if asked for, was written); 1 when a mandatory case failed, the IUT could
// not be brought up (its process did not answer, the in-process datapath
// could not listen; the reports then fail every case as not run) or the
// JUnit report could not be written; 2 on bad usage, found before anything
// runs (unknown flags, not exactly one of --self, --iut and --addr, a bad
// address (port 0 or no address included), format or case id, a case
// named twice in --cases, --addr with --cases naming only cases that need
// a control channel (none would run), a non-positive --timeout, an --iut program that
// does not exist, a --junit file that cannot be created); 128 plus the
// signal's number when SIGINT, SIGTERM or SIGHUP stopped the run (130, 143
// or 129, as a shell reports a command a signal ended; the reports, the
// JUnit file included, are still written: the cases run before the signal
// with their verdicts, the others failed as not run). -h prints the usage
// and exits 0.
//
// While the cases run, a stderr that is a terminal shows which case of how
// many runs now, on one line cleared before the reports.
//
//	mrconform --self                     judge this module's UDP datapath, in-process
//	mrconform --iut "build/mrpeer"       judge a process speaking the control contract
//	mrconform --addr 10.0.0.2:4793       judge a remote IUT (cases needing control are skipped)
//	mrconform --self --junit report.xml  also write JUnit XML
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/conformance/udpiut"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/interrupt"
	"github.com/metaroce/metaroce/internal/term"
)

// Exit statuses (see the package documentation).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	// A run that a signal stopped exits 128 + the signal's number
	// (interrupt.ExitStatus).
)

// usageTail follows the flag list in -h output.
const usageTail = `
Exit status: 0 every mandatory case passed; 1 a mandatory case failed, the
IUT could not be brought up, or the JUnit report could not be written;
2 bad usage, found before anything runs; 130, 143 or 129 (128 + the
signal's number) stopped by SIGINT, SIGTERM or SIGHUP (the reports still
cover the cases run before it).
`

func main() {
	// A signal stops the run rather than the process, so that the reports
	// are written (the JUnit file, created before the run, would be left
	// empty) and the IUT process is asked to quit.
	ctx, stop := interrupt.Context(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit status. ctx ending
// (a signal, in main) stops the run; the cases it did not reach fail as
// not run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mrconform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mrconform (--self | --iut COMMAND | --addr IP:PORT) [flags]")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), usageTail)
	}
	self := fs.Bool("self", false, "start this module's UDP datapath in-process as the IUT")
	iutCmd := fs.String("iut", "", "command line (split at blanks) of an IUT process speaking the control contract on stdin/stdout")
	addr := fs.String("addr", "", "UDP address (ip:port) of the IUT; without a control channel only control-free cases run")
	seed := fs.Uint64("seed", 1, "seed of connection ids, tokens and payloads")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole run (positive)")
	format := fs.String("format", "tap,markdown", "reports on stdout, comma-separated: tap, human, markdown")
	junit := fs.String("junit", "", "also write JUnit XML to this file")
	only := fs.String("cases", "", "comma-separated case ids to run (default: all)")
	if err := cli.ParseFlags(fs, args, stdout, "mrconform"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "mrconform:", err)
		return exitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "mrconform: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() != 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	formats := strings.Split(*format, ",")
	for _, f := range formats {
		if f != "tap" && f != "human" && f != "markdown" {
			return usage("--format %q: want tap, human or markdown", f)
		}
	}
	cases, err := selectCases(*only)
	if err != nil {
		return usage("%v", err)
	}
	n := 0
	for _, set := range []bool{*self, *iutCmd != "", *addr != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return usage("give exactly one of --self, --iut or --addr")
	}
	if *timeout <= 0 {
		// A run without time fails every case, which would blame the IUT
		// for the command line.
		return usage("--timeout %v: want a positive duration, such as 90s", *timeout)
	}
	argv := strings.Fields(*iutCmd)
	var ap netip.AddrPort
	switch {
	case *iutCmd != "" && len(argv) == 0:
		return usage("--iut: empty command")
	case *iutCmd != "":
		if _, err := exec.LookPath(argv[0]); err != nil {
			return usage("--iut: %v", err)
		}
	case *addr != "":
		if ap, err = netip.ParseAddrPort(*addr); err != nil {
			return usage("--addr %q: %v", *addr, err)
		}
		// Nothing can be sent there: every case would fail and blame
		// the implementation for the command line.
		if ap.Port() == 0 || ap.Addr().IsUnspecified() {
			return usage("--addr %q: want the IUT's address and a non-zero port, such as 192.0.2.7:4793", *addr)
		}
		// Every case would be skipped and the run pass having
		// judged nothing.
		if why := needsControl(cases); why != "" {
			return usage("%s", why)
		}
	}
	// The report file is created before the run, so that a path that
	// cannot be written is a usage error now rather than a lost report
	// after minutes of cases.
	var junitFile *os.File
	if *junit != "" {
		if junitFile, err = os.Create(*junit); err != nil {
			return usage("--junit: %v", err)
		}
		defer junitFile.Close()
	}

	stopped := ctx
	report := func(rs []conformance.Result) int {
		code := writeReports(rs, formats, stdout, stderr, *junit, junitFile)
		if stopped.Err() != nil {
			fmt.Fprintf(stderr, "mrconform: stopped (%v); the reports cover the cases run before it\n", context.Cause(stopped))
			return interrupt.ExitStatus(stopped)
		}
		return code
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var iut conformance.IUT
	switch {
	case *self:
		u, err := udpiut.Listen(*seed)
		if err != nil {
			fmt.Fprintln(stderr, "mrconform: starting the in-process IUT:", err)
			return report(notRun(cases, "starting the in-process IUT: "+err.Error()))
		}
		defer u.Close()
		iut = u
	case *iutCmd != "":
		p, err := conformance.StartProcess(ctx, argv, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "mrconform: starting the IUT:", err)
			return report(notRun(cases, "starting the IUT: "+err.Error()))
		}
		defer p.Close()
		iut = p
	default:
		iut = conformance.AddrIUT(ap)
	}
	line := newCaseLine(stderr, term.IsTerminal(stderr), len(cases))
	rs := conformance.RunProgress(ctx, iut, cases, *seed, line.hook())
	line.clear()
	return report(rs)
}

// writeReports writes rs in every format on stdout and, when junitFile is
// set, as JUnit XML (named junit in messages), and returns the exit
// status: 1 when a mandatory case failed or the JUnit report could not be
// written.
func writeReports(rs []conformance.Result, formats []string, stdout, stderr io.Writer, junit string, junitFile *os.File) int {
	for i, f := range formats {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		switch f {
		case "tap":
			conformance.WriteTAP(stdout, rs)
		case "human":
			conformance.WriteHuman(stdout, rs)
		case "markdown":
			conformance.WriteTable(stdout, rs)
		}
	}
	code := exitOK
	if conformance.MandatoryFailed(rs) {
		code = exitFail
	}
	if junitFile != nil {
		if err := writeJUnit(junitFile, rs); err != nil {
			fmt.Fprintf(stderr, "mrconform: --junit %s: %v\n", junit, err)
			code = exitFail
		}
	}
	return code
}

// notRun fails every case with why none of them could run, so that the
// reports (the JUnit file above all, created before the run) are complete
// and well-formed when the IUT cannot be brought up.
func notRun(cases []*conformance.Case, why string) []conformance.Result {
	rs := make([]conformance.Result, len(cases))
	for i, c := range cases {
		rs[i] = conformance.Result{Case: c, Verdict: conformance.Fail, Evidence: "not run: " + why}
	}
	return rs
}

// selectCases returns the cases named in a comma-separated list, all for "".
// A case named twice is refused: it would run twice and be reported twice,
// as if the list meant something else than it says.
func selectCases(list string) ([]*conformance.Case, error) {
	all := conformance.Cases()
	if list == "" {
		return all, nil
	}
	var out []*conformance.Case
	named := map[string]bool{}
	for _, id := range strings.Split(list, ",") {
		if named[id] {
			return nil, fmt.Errorf("--cases: case %q named twice; name each case once", id)
		}
		named[id] = true
		found := false
		for _, c := range all {
			if c.ID == id {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("--cases: no case %q", id)
		}
	}
	return out, nil
}

// needsControl says why cases cannot run against an IUT known only by its
// address: every one of them needs a control channel. It is "" when at
// least one can run.
func needsControl(cases []*conformance.Case) string {
	var ids, free []string
	for _, c := range cases {
		if !c.NeedsControl {
			return ""
		}
		ids = append(ids, c.ID)
	}
	for _, c := range conformance.Cases() {
		if !c.NeedsControl {
			free = append(free, c.ID)
		}
	}
	return fmt.Sprintf("--cases %s: every case named needs a control channel, which --addr has not, so none would run; give --iut COMMAND to run them, or name cases that run on an address alone: %s",
		strings.Join(ids, ","), strings.Join(free, ", "))
}

// writeJUnit writes the JUnit report to f and closes it.
func writeJUnit(f *os.File, rs []conformance.Result) error {
	if err := conformance.WriteJUnit(f, "metaroce-conformance", rs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
