package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/internal/bytesize"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/transport/udp"
)

// Transport and backend names accepted on the command line.
const (
	transportMetaRoCE = "metaroce"
	transportTCP      = "tcp"
	transportBoth     = "both"

	backendHost = "host"
	backendRCCL = "rccl"
)

// Defaults of the sweep run by a bare `mrbench`: 16 B to 64 MiB in steps of
// ×4 lands on round sizes (16, 64, 256 B, …, 16 MiB, 64 MiB), twelve points
// per table, which keeps both tables of the default run under a minute on a
// two-core machine while still reaching the bandwidth-bound regime.
const (
	defaultMinBytes   = 16
	defaultMaxBytes   = 64 << 20
	defaultStepFactor = 4
	defaultStepBytes  = 1 << 20
	defaultIters      = 20
	defaultWarmup     = 2
	defaultRanks      = 4
	defaultTimeout    = 60 * time.Second
)

// minChunkBytes is the smallest --chunk mrbench takes (besides 0, the
// library's default): a page, the unit below which per-message costs
// (a RECV_READY, an acknowledgement, a completion) swamp the bytes.
const minChunkBytes = 4 << 10

// Bounds of --paths. maxPathsPerPlane is the source ports that the
// MetaRoCE driver opens per plane (udp.Config.PortsPerPlane, which mrbench
// leaves at its default): each path of a plane sends from a port of its
// own, and the driver refuses more paths than ports. defaultPathsPerPlane
// is the datapath's own default (udp.Config.Core), which the collectives
// library leaves in place for a rank with an address other than a
// loopback one (--netlab's ranks, launched ranks on a fabric) and which
// the help names for those; package udp exports no name for it, and a test
// checks it against what a udp endpoint resolves.
const (
	maxPathsPerPlane     = udp.DefaultPortsPerPlane
	defaultPathsPerPlane = 4
)

// pathsHelp is the help of --paths. The counts it names are the
// constants that the libraries resolve 0 with, so the text follows them.
var pathsHelp = fmt.Sprintf("MetaRoCE paths per plane of each connection, 0 to %d "+
	"(0: the library default: %d where all of a rank's plane addresses are loopback ones, as for -np's in-process ranks, "+
	"else %d, as under --netlab)",
	maxPathsPerPlane, collectives.LoopbackPathsPerPlane, defaultPathsPerPlane)

// options is the parsed command line. Sizes are bytes; Loss is a probability
// in [0, 1); PathsPerPlane (--paths) is the MetaRoCE paths per plane of each
// connection, 0 to maxPathsPerPlane, where 0 is the library's default
// (collectives.LoopbackPathsPerPlane for a rank on loopback addresses only,
// the datapath's defaultPathsPerPlane for any other); Timeout bounds each
// collective.
type options struct {
	MinBytes, MaxBytes, StepBytes int64
	StepFactor                    float64
	Iters, Warmup                 int
	Check                         int
	DTypes                        []reduce.DType
	Ops                           []reduce.Op
	Average                       int
	Blocking                      int
	Root                          int
	Collective                    sched.Collective
	Ranks                         int
	Channels                      int
	ChunkBytes                    int64
	AllToAllInFlight              int
	PathsPerPlane                 int
	GroupSize                     int
	Transports                    []string
	Loss                          float64
	Seed                          uint64
	// SeedDrawn says that Seed was drawn at random (--seed 0), so the
	// header prints it: the run can then be repeated with --seed N.
	SeedDrawn       bool
	Netlab          bool
	JSON, CSV, Plot string
	Verbose         bool
	Timeout         time.Duration
	Backend         string

	// set records the flags given explicitly, by canonical name.
	set map[string]bool
}

// sizeFlag is a flag.Value for byte counts with K/M/G suffixes.
type sizeFlag struct{ p *int64 }

func (f sizeFlag) String() string {
	if f.p == nil {
		return ""
	}
	return bytesize.Format(*f.p)
}

func (f sizeFlag) Set(s string) error {
	v, err := bytesize.Parse(s, maxSweepBytes)
	if err != nil {
		return err
	}
	*f.p = v
	return nil
}

// flagAliases maps nccl-tests' long flag names (and our own spellings) to the
// canonical short name, so that `set` is keyed one way.
var flagAliases = map[string]string{
	"minbytes": "b", "maxbytes": "e", "stepbytes": "i", "stepfactor": "f",
	"iters": "n", "warmup_iters": "w", "check": "c", "datatype": "d",
	"average": "a", "blocking": "z", "root": "r", "collective": "op",
	"nranks": "np", "verbose": "v", "T": "timeout",
}

// errHelp is returned by parseOptions for -h/--help: usage has been printed.
var errHelp = flag.ErrHelp

// parseOptions parses args (without the program name). -h prints the usage
// on stdout; the caller prints a flag error, which is one line.
func parseOptions(args []string, stdout io.Writer) (*options, error) {
	o := &options{
		MinBytes: defaultMinBytes, MaxBytes: defaultMaxBytes,
		StepBytes: defaultStepBytes, StepFactor: defaultStepFactor,
		Iters: defaultIters, Warmup: defaultWarmup, Check: 1, Average: 1,
		Ranks: defaultRanks, Timeout: defaultTimeout, Seed: 1,
		set: map[string]bool{},
	}
	fs := flag.NewFlagSet("mrbench", flag.ContinueOnError)
	var dtype, redop, coll, transport, backend string
	sizeVar := func(p *int64, usage string, names ...string) {
		for _, n := range names {
			fs.Var(sizeFlag{p}, n, usage)
		}
	}
	intVar := func(p *int, def int, usage string, names ...string) {
		for _, n := range names {
			fs.IntVar(p, n, def, usage)
		}
	}
	strVar := func(p *string, def, usage string, names ...string) {
		for _, n := range names {
			fs.StringVar(p, n, def, usage)
		}
	}
	sizeVar(&o.MinBytes, "minimum size in bytes (K/M/G suffixes)", "b", "minbytes")
	sizeVar(&o.MaxBytes, "maximum size in bytes (K/M/G suffixes)", "e", "maxbytes")
	sizeVar(&o.StepBytes, "size increment in bytes when no step factor is given", "i", "stepbytes")
	for _, n := range []string{"f", "stepfactor"} {
		fs.Float64Var(&o.StepFactor, n, defaultStepFactor, "multiplication factor between sizes (0 or 1: step by -i)")
	}
	intVar(&o.Iters, defaultIters, "timed iterations per size", "n", "iters")
	intVar(&o.Warmup, defaultWarmup, "untimed warm-up iterations per size", "w", "warmup_iters")
	intVar(&o.Check, 1, "check results: 0 off, N checked iterations", "c", "check")
	strVar(&dtype, "float", "data type (int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double, or all)", "d", "datatype")
	strVar(&redop, "sum", "reduction (sum prod min max avg, or all)", "o")
	intVar(&o.Average, 1, "time reported across ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum", "a", "average")
	intVar(&o.Blocking, 0, "1: wait for each collective (host collectives always do)", "z", "blocking")
	intVar(&o.Root, 0, "root rank of broadcast", "r", "root")
	strVar(&coll, "allreduce", "collective: allreduce alltoall reducescatter allgather broadcast sendrecv", "op", "collective")
	intVar(&o.Ranks, defaultRanks, "local ranks launched in this process (ignored under mpirun/torchrun/srun)", "np", "nranks")
	intVar(&o.Channels, 0, "collective channels per peer connection (0: the library default)", "channels")
	sizeVar(&o.ChunkBytes, "largest message a collective pipelines, bytes (K/M/G suffixes; 0: the library default, 512K over MetaRoCE, 128K over TCP)", "chunk")
	intVar(&o.AllToAllInFlight, 0, "all-to-all messages in flight per direction and rank (0: by message size, at least 4; 1: rounds in lockstep)", "a2a-inflight")
	intVar(&o.PathsPerPlane, 0, pathsHelp, "paths")
	intVar(&o.GroupSize, 0, "consecutive ranks per leaf switch or host, for the hierarchical all-reduce (0: unknown; must divide the ranks)", "group-size")
	strVar(&transport, transportBoth, "transport: metaroce, tcp or both (MetaRoCE then TCP)", "transport")
	fs.Float64Var(&o.Loss, "loss", 0, "MetaRoCE driver-level packet drop probability in [0,1)")
	fs.Uint64Var(&o.Seed, "seed", 1, "with --loss: seed of the driver's random choices (drops, connection ids, tokens); 0 draws one at random and the header prints it")
	fs.BoolVar(&o.Netlab, "netlab", false, "run 2 ranks over a namespace fabric (1 plane, 4 spine links; rank 0 in lab host 1, rank 1 in host 2); needs root and nftables")
	strVar(&o.JSON, "", "write the results as JSON to this file (see SCHEMA.md)", "json")
	strVar(&o.CSV, "", "write the results as CSV to this file", "csv")
	strVar(&o.Plot, "", "plot bus bandwidth against size to this .png or .svg file", "plot")
	for _, n := range []string{"v", "verbose"} {
		fs.BoolVar(&o.Verbose, n, false, "print per-peer and per-path counters after each table")
	}
	for _, n := range []string{timeoutFlag[1:], "timeout"} {
		fs.Var(secondsFlag{&o.Timeout}, n, "deadline of each collective and of connection setup, above 0 (no 0 for no limit): a duration (30s, 2m) or seconds")
	}
	checkCompat := registerCompat(fs)
	strVar(&backend, backendHost, "host (collectives over MetaRoCE/TCP) or rccl (RCCL/NCCL on GPU buffers)", "backend")
	fs.Usage = func() { usage(fs) }

	if err := cli.ParseFlags(fs, args, stdout, "mrbench"); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (subcommands: sim)", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) {
		n := f.Name
		if a, ok := flagAliases[n]; ok {
			n = a
		}
		o.set[n] = true
	})
	if err := checkCompat(); err != nil {
		return nil, err
	}
	if err := o.finish(dtype, redop, coll, transport, backend); err != nil {
		return nil, err
	}
	return o, nil
}

// finish validates the numeric flags and resolves the named ones.
func (o *options) finish(dtype, redop, coll, transport, backend string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.set["i"] && !o.set["f"] {
		o.StepFactor = 0 // nccl-tests: a step factor wins only when given
	}
	switch f := o.StepFactor; {
	case math.IsNaN(f) || math.IsInf(f, 0):
		bad("-f %g: the step factor must be a number: 0 or 1 (step by -i) or more than 1", f)
	case f == 1:
		o.StepFactor = 0 // nccl-tests: a factor of 1 steps by -i
	case f != 0 && f < 1:
		bad("-f %g: the step factor must be 0 or 1 (step by -i) or more than 1", f)
	}
	if o.Iters < 1 {
		bad("-n %d: at least one iteration", o.Iters)
	}
	if o.Warmup < 0 {
		bad("-w %d: warm-up iterations must be >= 0", o.Warmup)
	}
	if o.Check < 0 {
		bad("-c %d: must be >= 0", o.Check)
	}
	if o.Average < 0 || o.Average > 3 {
		bad("-a %d: want 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum)", o.Average)
	}
	if o.Blocking != 0 && o.Blocking != 1 {
		bad("-z %d: want 0 or 1", o.Blocking)
	}
	if o.Ranks < 1 || o.Ranks > 256 {
		bad("-np %d: want 1 to 256 local ranks", o.Ranks)
	}
	if o.Channels < 0 || o.Channels > 64 {
		bad("--channels %d: want 0 (default) to 64", o.Channels)
	}
	if o.AllToAllInFlight < 0 {
		bad("--a2a-inflight %d: want 0 (by message size) or more", o.AllToAllInFlight)
	}
	if o.PathsPerPlane < 0 || o.PathsPerPlane > maxPathsPerPlane {
		bad("--paths %d: want 0 (the library default) to %d: each path of a plane takes a source port of its own, and the driver opens %d per plane", o.PathsPerPlane, maxPathsPerPlane, maxPathsPerPlane)
	}
	if o.GroupSize < 0 {
		bad("--group-size %d: want 0 (unknown) or more", o.GroupSize)
	}
	if o.ChunkBytes != 0 && o.ChunkBytes < minChunkBytes {
		bad("--chunk %d: want 0 (the library default) or at least %s: every message costs a round of control packets, and a sweep of smaller ones would run for hours", o.ChunkBytes, bytesize.Format(minChunkBytes))
	}
	if !(o.Loss >= 0 && o.Loss < 1) {
		bad("--loss %g: want a probability in [0, 1)", o.Loss)
	}
	if o.Seed == 0 {
		o.Seed, o.SeedDrawn = drawSeed(), true
	}
	if o.Root < 0 {
		bad("-r %d: the root must be >= 0", o.Root)
	}
	if o.MinBytes == 0 && o.MaxBytes > 0 && o.StepFactor > 1 {
		// nccl-tests would multiply 0 by the factor forever. Name the
		// factor as the user knows it: the default -f is never typed.
		factor := fmt.Sprintf("the default step factor (-f %g)", o.StepFactor)
		way := "step by bytes with -i"
		if o.set["f"] {
			factor = fmt.Sprintf("-f %g", o.StepFactor)
			way = "step by bytes with -i instead of -f"
		}
		bad("-b 0 -e %s: %s never grows a size of 0: %s (e.g. -b 0 -e %s -i %s), run size 0 alone (-b 0 -e 0), or start at -b 1 or more",
			bytesize.Format(o.MaxBytes), factor, way, bytesize.Format(o.MaxBytes), bytesize.Format(max(o.MaxBytes/8, 1)))
	} else if _, err := sweepSizes(o.MinBytes, o.MaxBytes, o.StepFactor, o.StepBytes); err != nil {
		bad("sizes: %v", err)
	}
	var err error
	if o.Collective, err = sched.ParseCollective(coll); err != nil {
		if _, rerr := reduce.ParseOp(coll); rerr == nil {
			bad("--op %q: --op selects the collective here (allreduce, alltoall, ...); the reduction is -o %s", coll, coll)
		} else {
			bad("--op %q: unknown collective (want one of allreduce reducescatter allgather alltoall broadcast sendrecv)", coll)
		}
	} else if o.Collective == sched.P2P {
		bad("--op p2p: not a benchmark collective (use sendrecv)")
	} else if o.GroupSize > 0 && o.Collective != sched.AllReduce {
		bad("--group-size %d: groups ranks for the hierarchical all-reduce only, not --op %s", o.GroupSize, o.Collective)
	}
	if strings.EqualFold(strings.TrimSpace(dtype), "all") {
		o.DTypes = reduce.AllDTypes()
	} else if dt, err := reduce.ParseDType(dtype); err != nil {
		bad("-d %q: unknown data type (want one of %s, or all)", dtype, joinNames(reduce.AllDTypes()))
	} else {
		o.DTypes = []reduce.DType{dt}
	}
	if strings.EqualFold(strings.TrimSpace(redop), "all") {
		o.Ops = reduce.AllOps()
	} else if op, err := reduce.ParseOp(redop); err != nil {
		if _, cerr := sched.ParseCollective(redop); cerr == nil {
			bad("-o %q: -o selects the reduction here (%s); the collective is --op %s", redop, joinNames(reduce.AllOps()), redop)
		} else {
			bad("-o %q: unknown reduction (want one of %s, or all)", redop, joinNames(reduce.AllOps()))
		}
	} else {
		o.Ops = []reduce.Op{op}
	}
	switch strings.ToLower(transport) {
	case transportMetaRoCE, transportTCP:
		o.Transports = []string{strings.ToLower(transport)}
	case transportBoth, "":
		o.Transports = []string{transportMetaRoCE, transportTCP}
	default:
		bad("--transport %q: want metaroce, tcp or both", transport)
	}
	switch strings.ToLower(backend) {
	case backendHost, backendRCCL:
		o.Backend = strings.ToLower(backend)
	default:
		bad("--backend %q: want host or rccl", backend)
	}
	if o.Plot != "" {
		if ext := plotFormat(o.Plot); ext == "" {
			bad("--plot %q: the file name must end in .png or .svg", o.Plot)
		} else if err := checkPlotName(o.Plot); err != nil {
			bad("--plot %q: %v", o.Plot, err)
		} else if o.MaxBytes == 0 {
			// Found now rather than after the run, which would measure
			// and then fail to write the file.
			bad("--plot %q: -e 0 leaves nothing to plot (the size axis is logarithmic, and has no place for size 0)", o.Plot)
		}
	}
	return errors.Join(errs...)
}

// joinNames lists the names of xs (data types, reductions) as the flags
// take them, separated by spaces, for errors that name the valid values
// in mrbench's words rather than the parsing package's.
func joinNames[T fmt.Stringer](xs []T) string {
	names := make([]string, len(xs))
	for i, x := range xs {
		names[i] = x.String()
	}
	return strings.Join(names, " ")
}

// drawSeed returns a random seed for --seed 0, from 1 to 2^53: the JSON
// report gives it as a number, which readers that hold numbers as
// float64 (jq, JavaScript) round above 2^53.
func drawSeed() uint64 {
	return 1 + rand.Uint64N(1<<53)
}

// stepLabel renders the header's "step:" field as nccl-tests does.
func (o *options) stepLabel() string {
	if o.StepFactor > 1 {
		return strconv.FormatFloat(o.StepFactor, 'g', -1, 64) + "(factor)"
	}
	return strconv.FormatInt(o.StepBytes, 10) + "(bytes)"
}

// redOpName is the redop column for collective c: the op name for reducing
// collectives and "none" otherwise, as nccl-tests prints.
func redOpName(c sched.Collective, op reduce.Op) string {
	if c.Reduces() {
		return op.String()
	}
	return "none"
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `Usage: mrbench [flags]          sweep a collective over sizes (nccl-tests style)
       mrbench sim SCENARIO [flags]  run a fabric-simulator scenario

With no flags: all-reduce of float sums over 4 local ranks, 16 B to 64 MiB by
×4, first over MetaRoCE, then over kernel TCP. Under mpirun, torchrun or srun
every process joins one job and rank 0 prints; the processes compare their
flags before the first table and exit 2 where they differ, except -T, --seed,
-v, --json, --csv, --plot and those without effect there (-np, the
compatibility flags); --channels, --chunk and --group-size are compared
after their defaults, when the first table's communicator is set up; a rank
that refuses its own flags tells the others, which exit 2 too. Flags
follow nccl-tests (-b -e -f -i -n -w -c -d -o -a -z -r); note that --op
selects the collective, while nccl-tests' long --op (the reduction) is -o
here.

Flags (aliases share a line):
`)
	printFlags(w, fs, helpSections)
	fmt.Fprint(w, `
mrbench sim -h lists the simulator's scenarios and their flags.

Exit status: 0 when every table ran and checked out; 1 when a run failed or
produced wrong results; 2 on bad usage or configuration (flags, a launcher's
environment variables, a missing RCCL/NCCL library, the ranks of a launched
job started with different flags), found before anything runs; 130, 143 or
129 (128 + the signal's number) when SIGINT, SIGTERM or SIGHUP interrupted
the run (the tables so far are still written to --json and --csv).
`)
}

// helpSection is a titled group of flags in mrbench -h, each flag by one
// of its names.
type helpSection struct {
	title string
	flags []string
}

// helpSections is the order of mrbench -h. The flag package lists flags
// alphabetically, which scatters related ones (-b and -e far apart, -T
// first); this follows nccl-tests' own help, which reads from what is
// swept to how it runs: the sizes (-b -e -i -f, nccl-tests' order), then
// what runs (collective, data type, reduction, root), how it is timed and
// checked, where it runs (ranks, transport, backend, the transport's
// options), what it writes, and last the nccl-tests flags accepted only
// for compatibility. TestHelpFlagOrder pins it, and fails when a flag is
// defined without a place here.
var helpSections = []helpSection{
	{"Sizes", []string{"b", "e", "i", "f"}},
	{"Collective and data", []string{"op", "d", "o", "r"}},
	{"Iterations, timing and checking", []string{"n", "w", "c", "a", "z", "T"}},
	{"Ranks and transport", []string{"np", "transport", "backend", "channels", "chunk", "a2a-inflight", "paths", "group-size", "loss", "seed", "netlab"}},
	{"Output", []string{"json", "csv", "plot", "v"}},
	{"nccl-tests compatibility (accepted, no effect)", []string{"t", "g", "m", "N", "p", "G", "C", "R"}},
}

// otherFlags titles the section of flags that helpSections leaves out.
const otherFlags = "Other"

// printFlags prints fs's flags as flag.PrintDefaults does, but with the
// names that share one variable and usage text (aliases such as -n and
// --iters) on one line, one-letter names with one dash and longer ones with
// two, in the titled sections and order of sections. A flag that no
// section names is printed last, under otherFlags, rather than hidden.
func printFlags(w io.Writer, fs *flag.FlagSet, sections []helpSection) {
	type group struct {
		names []string
		f     *flag.Flag
	}
	var groups []*group
	byUsage := map[string]*group{}
	fs.VisitAll(func(f *flag.Flag) {
		// Aliases set one variable: group by its address where the
		// flag's value is a pointer, else by the usage text.
		key := f.Usage + "\x00" + f.DefValue
		if v := reflect.ValueOf(f.Value); v.Kind() == reflect.Pointer {
			key = fmt.Sprint(v.Pointer())
		}
		if g := byUsage[key]; g != nil {
			g.names = append(g.names, f.Name)
			return
		}
		g := &group{names: []string{f.Name}, f: f}
		byUsage[key] = g
		groups = append(groups, g)
	})
	byName := map[string]*group{}
	for _, g := range groups {
		for _, n := range g.names {
			byName[n] = g
		}
	}
	placed := map[*group]bool{}
	for _, sec := range sections {
		fmt.Fprintf(w, "\n%s:\n", sec.title)
		for _, n := range sec.flags {
			if g := byName[n]; g != nil && !placed[g] {
				placed[g] = true
				printFlagGroup(w, g.names, g.f)
			}
		}
	}
	title := false
	for _, g := range groups {
		if placed[g] {
			continue
		}
		if !title {
			fmt.Fprintf(w, "\n%s:\n", otherFlags)
			title = true
		}
		printFlagGroup(w, g.names, g.f)
	}
}

// printFlagGroup prints one line of printFlags: the names of one flag,
// shortest first, its type, usage and default.
func printFlagGroup(w io.Writer, names []string, f *flag.Flag) {
	names = append([]string(nil), names...)
	sort.SliceStable(names, func(i, j int) bool { return len(names[i]) < len(names[j]) })
	var b strings.Builder
	b.WriteString(" ")
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
		}
		if len(n) == 1 {
			b.WriteString(" -" + n)
		} else {
			b.WriteString(" --" + n)
		}
	}
	kind, usage := flag.UnquoteUsage(f)
	if kind != "" {
		b.WriteString(" " + kind)
	}
	b.WriteString("\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t"))
	if !isZeroDefault(f) {
		quoted := false
		if gt, ok := f.Value.(flag.Getter); ok {
			_, quoted = gt.Get().(string)
		}
		if quoted {
			fmt.Fprintf(&b, " (default %q)", f.DefValue)
		} else {
			fmt.Fprintf(&b, " (default %v)", f.DefValue)
		}
	}
	fmt.Fprintln(w, b.String())
}

// isZeroDefault reports whether f's default is its type's zero value, which
// PrintDefaults leaves unsaid.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

// timeoutFlag is the flag that sets Timeout, as collectives' errors name
// the setup deadline that ran out (Config.TimeoutSetting): "the setup
// deadline of 30s (-T) ran out ...: give a longer one".
const timeoutFlag = "-T"
