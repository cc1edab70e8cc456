// Command mrconform runs the MetaRoCE conformance suite against an
// implementation under test and prints TAP followed by a Markdown table. It
// exits 1 when a mandatory case fails and 2 on bad usage.
//
//	mrconform --self               judge this module's UDP datapath, in-process
//	mrconform --addr 10.0.0.2:4793 judge a remote IUT (cases needing control are skipped)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
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
	addr := fs.String("addr", "", "UDP address (ip:port) of the IUT; without a control channel only control-free cases run")
	seed := fs.Uint64("seed", 1, "seed of connection ids, tokens and payloads")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var iut conformance.IUT
	switch {
	case *self && *addr == "":
		u, err := udpiut.Listen(*seed)
		if err != nil {
			fmt.Fprintln(stderr, "mrconform:", err)
			return 2
		}
		defer u.Close()
		iut = u
	case !*self && *addr != "":
		ap, err := netip.ParseAddrPort(*addr)
		if err != nil {
			fmt.Fprintf(stderr, "mrconform: --addr %q: %v\n", *addr, err)
			return 2
		}
		iut = conformance.AddrIUT(ap)
	default:
		fmt.Fprintln(stderr, "mrconform: give exactly one of --self or --addr")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rs := conformance.Run(ctx, iut, conformance.Cases(), *seed)
	conformance.WriteTAP(stdout, rs)
	fmt.Fprintln(stdout)
	conformance.WriteTable(stdout, rs)
	if conformance.MandatoryFailed(rs) {
		return 1
	}
	return 0
}
