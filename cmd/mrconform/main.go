// Command mrconform runs the MetaRoCE conformance suite against an
// implementation under test and reports TAP, a table and optionally JUnit
// XML. It exits 1 when a mandatory case fails and 2 on bad usage.
//
//	mrconform --self                     judge this module's UDP datapath, in-process
//	mrconform --iut "build/mrpeer"       judge a process speaking the control contract
//	mrconform --addr 10.0.0.2:4793       judge a remote IUT (cases needing control are skipped)
//	mrconform --self --junit report.xml  also write JUnit XML
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/conformance/udpiut"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mrconform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	self := fs.Bool("self", false, "start this module's UDP datapath in-process as the IUT")
	iutCmd := fs.String("iut", "", "command line (split at blanks) of an IUT process speaking the control contract on stdin/stdout")
	addr := fs.String("addr", "", "UDP address (ip:port) of the IUT; without a control channel only control-free cases run")
	seed := fs.Uint64("seed", 1, "seed of connection ids, tokens and payloads")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole run")
	format := fs.String("format", "tap,markdown", "reports on stdout, comma-separated: tap, human, markdown")
	junit := fs.String("junit", "", "also write JUnit XML to this file")
	only := fs.String("cases", "", "comma-separated case ids to run (default: all)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "mrconform: unexpected arguments %q\n", fs.Args())
		return 2
	}
	formats := strings.Split(*format, ",")
	for _, f := range formats {
		if f != "tap" && f != "human" && f != "markdown" {
			fmt.Fprintf(stderr, "mrconform: --format %q: want tap, human or markdown\n", f)
			return 2
		}
	}
	cases, err := selectCases(*only)
	if err != nil {
		fmt.Fprintln(stderr, "mrconform:", err)
		return 2
	}
	n := 0
	for _, set := range []bool{*self, *iutCmd != "", *addr != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		fmt.Fprintln(stderr, "mrconform: give exactly one of --self, --iut or --addr")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var iut conformance.IUT
	switch {
	case *self:
		u, err := udpiut.Listen(*seed)
		if err != nil {
			fmt.Fprintln(stderr, "mrconform:", err)
			return 2
		}
		defer u.Close()
		iut = u
	case *iutCmd != "":
		p, err := conformance.StartProcess(ctx, strings.Fields(*iutCmd), stderr)
		if err != nil {
			fmt.Fprintln(stderr, "mrconform:", err)
			return 2
		}
		defer p.Close()
		iut = p
	default:
		ap, err := netip.ParseAddrPort(*addr)
		if err != nil {
			fmt.Fprintf(stderr, "mrconform: --addr %q: %v\n", *addr, err)
			return 2
		}
		iut = conformance.AddrIUT(ap)
	}
	rs := conformance.Run(ctx, iut, cases, *seed)
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
	if *junit != "" {
		if err := writeJUnit(*junit, rs); err != nil {
			fmt.Fprintln(stderr, "mrconform:", err)
			return 2
		}
	}
	if conformance.MandatoryFailed(rs) {
		return 1
	}
	return 0
}

// selectCases returns the cases named in a comma-separated list, all for "".
func selectCases(list string) ([]*conformance.Case, error) {
	all := conformance.Cases()
	if list == "" {
		return all, nil
	}
	var out []*conformance.Case
	for _, id := range strings.Split(list, ",") {
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

func writeJUnit(path string, rs []conformance.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := conformance.WriteJUnit(f, "metaroce-conformance", rs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
