package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/gpu"
	"github.com/metaroce/metaroce/internal/bytesize"
	"github.com/metaroce/metaroce/internal/interrupt"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // a run failed or produced wrong results
	exitUsage = 2
	// A run that a signal interrupted exits 128 + the signal's number
	// (interrupt.ExitStatus; run).
)

// rankEnv is what a launcher gives each of its ranks for one table.
type rankEnv struct {
	comm comm
	// describe is the transport's header line.
	describe string
	// stats snapshots the rank's per-peer counters; nil where there are none.
	stats func() []PeerSummary
	// datapath, when set, is the header's "# datapath:" line (planes, paths,
	// datagram size, interface MTUs); rank 0 calls it once per table.
	datapath func() string
	// pathsPerPlane is the MetaRoCE paths per plane that the rank's
	// endpoint resolved (Table.PathsPerPlane); 0 for other transports.
	pathsPerPlane int
}

// launcher starts the ranks of one table (in-process ranks concurrently, or
// this process's one rank of a launched job) and runs fn on each. transport
// names the table's transport.
type launcher interface {
	launch(ctx context.Context, transport string, fn func(r rankEnv) error) error
	// source names the launcher for the header (launcherLocal,
	// launcherNetlab, or the job's launcher: "openmpi", ...).
	source() string
}

// configError marks an error in the configuration that mrbench found
// before running anything: the launcher's environment variables, a
// backend's missing library. Like a bad flag, it is the user's to fix,
// and it exits with exitUsage.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// errInterrupted is the error recorded for a table that a signal stopped
// (on stdout's FAILED line and in --json): whatever the ranks' own errors
// say then (a cancelled call "still waiting on ranks", which reads as a
// dead peer) is a consequence of the interruption.
var errInterrupted = errors.New("interrupted")

// interrupted reports whether ctx was cancelled, which is how main's
// context reports SIGINT, SIGTERM and SIGHUP (a deadline is no
// interruption).
func interrupted(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }

// rendezvousProgressEvery is the interval of the progress lines of a
// launched job's rendezvous on stderr (collectives.Bootstrap.Progress); a
// variable so that tests see them at once.
var rendezvousProgressEvery = collectives.DefaultProgressEvery

// printError writes err to w, each of its lines (errors.Join puts one
// problem on each, such as every output file that cannot be written)
// marked with the command's name, so that none reads as another
// program's; it returns the lines.
func printError(w io.Writer, cmd string, err error) []string {
	lines := strings.Split(err.Error(), "\n")
	for _, line := range lines {
		fmt.Fprintf(w, "%s: %s\n", cmd, line)
	}
	return lines
}

// run is mrbench without the process around it: it parses args, runs the
// tables, writes stdout and stderr, and returns the exit code. A run that
// the context's cancellation (a signal) cut short says so, once, on
// stderr, and exits with 128 plus the signal's number (130 for SIGINT, 143
// for SIGTERM, 129 for SIGHUP; interrupt.ExitStatus), as a shell reports
// a command that the signal ended and as mrconform and mrsoak do; 130 for
// a context cancelled without a signal as its cause. A usage error keeps
// its exitUsage whenever the signal came: the command line (or the ranks'
// disagreement) is wrong either way, and a script that reads 130 would
// rerun it as it was.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	code := runCommand(ctx, args, stdout, stderr)
	if code != exitOK && code != exitUsage && interrupted(ctx) {
		fmt.Fprintln(stderr, "mrbench: interrupted")
		return interrupt.ExitStatus(ctx)
	}
	return code
}

// runCommand is run before the interruption's exit status.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "sim" {
		return runSim(ctx, args[1:], stdout, stderr)
	}
	o, err := parseOptions(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		// Every flag found wrong, one line each, each marked as ours.
		lines := printError(stderr, "mrbench", err)
		tellRefusal(ctx, refusedFlag, strings.Join(lines, "; "), 0, stderr)
		return exitUsage
	}
	// refuse reports err, found before the first table, and tells the
	// other ranks of a launched job (tellRefusal).
	refuse := func(err error, code int) int {
		printError(stderr, "mrbench", err)
		tellRefusal(ctx, refusedFlag, err.Error(), o.Timeout, stderr)
		return code
	}
	var l launcher
	var tables []string
	switch {
	case o.Netlab:
		var hl *hostLauncher
		hl, err = newNetlabLauncher(o)
		if errors.Is(err, errNetlabUsage) {
			return refuse(err, exitUsage)
		}
		if hl != nil {
			defer func() {
				if err := hl.lab.Close(); err != nil {
					fmt.Fprintf(stderr, "mrbench: tearing down the netlab fabric: %v\n", err)
				}
			}()
		}
		l, tables = hl, o.Transports
	case o.Backend == backendRCCL:
		l, err = newRCCLLauncher(o, stderr)
		tables = []string{backendRCCL}
	default:
		l, err = newHostLauncher(o)
		tables = o.Transports
	}
	if err != nil {
		if errors.As(err, new(configError)) {
			return refuse(err, exitUsage)
		}
		// A failure, not a refusal: the other ranks fail with it too,
		// rather than as a usage error of this rank's.
		fmt.Fprintf(stderr, "mrbench: %v\n", err)
		tellRefusal(ctx, failedFlag, err.Error(), o.Timeout, stderr)
		return exitFail
	}
	if jobRank(l) == 0 {
		// Rank 0 alone, as for the job's other notes (announceJob).
		for _, n := range o.ignoredFlags() {
			fmt.Fprintf(stderr, "mrbench: %s\n", n)
		}
	}
	if err := checkSecret(o, tables); err != nil {
		return refuse(err, exitUsage)
	}
	if b := bootOf(l); b != nil {
		announceJob(o, b, stderr)
	} else if !o.Netlab && o.Backend == backendHost {
		noteUnreadJobVars(stderr, o.Ranks)
	}
	// The rank count is known before any connection, from -np or from
	// the launcher's variables: check what depends on it now. A launched
	// job is checked on every rank alike (they share the flags and the
	// count), so that each exits with the same usage error rather than
	// connect and then fail, or run a sweep without a row and report it
	// OK; rank 0 alone names the skipped sizes.
	ranks, local := o.Ranks, o.Ranks
	if b := bootOf(l); b != nil {
		ranks, local = b.NRanks, max(b.LocalSize, 1)
	}
	if err := checkRanks(o, ranks, local, stderr, jobRank(l) == 0); err != nil {
		return refuse(err, exitUsage)
	}
	if jobRank(l) == 0 {
		// Only rank 0 writes files; on other hosts the directory need
		// not exist.
		if err := checkOutputs(map[string]string{"json": o.JSON, "csv": o.CSV, "plot": o.Plot}); err != nil {
			return refuse(err, exitUsage)
		}
		// As for -e 0 (options.finish), but where the rank count
		// skips every size above 0: found now, not once the sweep
		// has run and its plot cannot be drawn.
		if o.Plot != "" && !newSweep(o).plottable(ranks) {
			return refuse(fmt.Errorf("--plot %q: -b %d to -e %d over %d ranks runs no %v above size 0 (it needs at least %s), and the size axis is logarithmic, with no place for size 0: raise -e, or leave --plot out",
				o.Plot, o.MinBytes, o.MaxBytes, ranks, o.Collective, minElements(o.Collective)), exitUsage)
		}
	}
	rep := &Report{Schema: SchemaID, Command: append([]string{"mrbench"}, args...),
		Start: time.Now().UTC().Format(time.RFC3339), Collective: o.Collective.String(),
		Params: o.params(), Env: baseEnv()}
	rep.Env.Launcher = l.source()
	// Known before any connection: a table whose setup fails never
	// counts them on a communicator, and its report still names them.
	rep.Env.Ranks = ranks
	rows, _ := newSweep(o).fits(ranks) // the rows it prints, not those skipped as too small
	prog := newProgress(stderr, len(tables)*rows)
	code := exitOK
	printed := false
	for _, tr := range tables {
		t, isRoot, err := runTable(ctx, o, l, tr, &rep.Env, stdout, prog)
		prog.clear()
		if se := (settingsError{}); errors.As(err, &se) {
			// Ranks started with different flags, found before
			// the first table: every rank says so, as a usage error.
			fmt.Fprintf(stderr, "mrbench: %v\n", se)
			return exitUsage
		}
		if msg, ok := libraryDisagreement(err); ok {
			// The same, for the flags the library compares itself.
			fmt.Fprintf(stderr, "mrbench: %s\n", msg)
			return exitUsage
		}
		if err != nil && !isRoot && jobRank(l) == 0 {
			// Rank 0's process, whose table failed before rank 0 ran
			// (connection setup): the files still record the failure.
			isRoot = true
			t.Ranks = ranks // no communicator counted them (schema.json: at least 1)
			fmt.Fprintf(stdout, "# %s: FAILED: %s\n#\n", tr, strings.ReplaceAll(err.Error(), "\n", " "))
		}
		printed = printed || isRoot
		if isRoot {
			rep.Tables = append(rep.Tables, t)
			if t.Wrong != 0 || t.OutOfBounds != 0 {
				code = exitFail
			}
		}
		if err != nil {
			if err != errInterrupted {
				fmt.Fprintf(stderr, "mrbench: %s: %v\n", tr, err)
			}
			code = exitFail
			if isRoot {
				rep.Tables[len(rep.Tables)-1].fail(err)
			}
			// A launched job stops at its first failed table: a rank
			// that died would otherwise keep the next table's bootstrap
			// waiting for it until the timeout.
			if ctx.Err() != nil || launched(l) {
				break
			}
		}
	}
	if !printed {
		return code // a rank other than 0 of a launched job: rank 0 writes files
	}
	if err := writeFiles(o, rep); err != nil {
		printError(stderr, "mrbench", err)
		code = exitFail
	}
	return code
}

// writeFiles writes the --json, --csv and --plot files that were asked for.
func writeFiles(o *options, rep *Report) error {
	var errs []error
	if o.JSON != "" {
		errs = append(errs, writeJSON(o.JSON, rep))
	}
	if o.CSV != "" {
		errs = append(errs, writeCSV(o.CSV, rep.Tables))
	}
	if o.Plot != "" && len(rep.Tables) > 0 {
		t := rep.Tables[0]
		title := fmt.Sprintf("%s, %d ranks, out-of-place", rep.Collective, t.Ranks)
		if len(t.Rows) > 0 && len(seriesOf(t.Rows)) == 1 {
			// One kind of row: the title names its type; with several
			// (-d all, -o all) the legend does.
			title = fmt.Sprintf("%s %s, %d ranks, out-of-place", rep.Collective, t.Rows[0].Type, t.Ranks)
		}
		errs = append(errs, writePlot(o.Plot, title, rep.Tables))
	}
	return errors.Join(errs...)
}

// runTable runs one sweep over transport and prints it. isRoot reports
// whether rank 0 ran in this process (and so printed the table).
func runTable(ctx context.Context, o *options, l launcher, transport string, env *Env, out io.Writer, prog *progress) (t Table, isRoot bool, err error) {
	t = Table{Transport: transport, Backend: o.Backend, Collective: o.Collective.String(), Rows: []Row{}}
	sw := newSweep(o)
	var mu sync.Mutex
	var peers []PeerSummary
	err = l.launch(ctx, transport, func(r rankEnv) error {
		infos, err := gatherRankInfo(ctx, r.comm, o.Timeout)
		if err != nil {
			return fmt.Errorf("rank %d: exchanging host names: %w", r.comm.Rank(), err)
		}
		root := r.comm.Rank() == 0
		if root {
			isRoot = true
			t.Ranks = r.comm.Size()
			t.PathsPerPlane = r.pathsPerPlane
			env.Ranks = t.Ranks
			env.Hosts = countHosts(infos)
			datapath := ""
			if r.datapath != nil {
				datapath = r.datapath()
			}
			writeHeader(out, o, env, transport, r.describe, datapath, infos)
			writeTableHeader(out)
		}
		// The bar names the row that runs, from its start, and counts
		// it once it has printed.
		onStart := func(row Row) {
			prog.show(fmt.Sprintf("%s %s %s", transport, row.Type, bytesize.Format(row.Bytes)))
		}
		onRow := func(row Row) {
			t.Rows = append(t.Rows, row)
			prog.clear() // stdout and stderr may share a terminal
			fmt.Fprintln(out, formatRow(row))
			prog.step()
		}
		if !root {
			onStart, onRow = nil, nil
		}
		res, err := sw.run(ctx, r.comm, onStart, onRow)
		if root {
			t.OutOfBounds = res.OutOfBounds
		}
		if err == nil && r.stats != nil {
			if o.Verbose {
				s := r.stats()
				mu.Lock()
				peers = append(peers, s...)
				mu.Unlock()
			}
			// A rank that returns closes its communicator, and its peers'
			// connection counters vanish with the connection: hold every
			// connection open until all ranks have their snapshot. The
			// ranks wait here with or without -v, which can then
			// differ between a launched job's ranks (agree.go).
			bctx, cancel := context.WithTimeout(ctx, o.Timeout)
			err = r.comm.Barrier(bctx)
			cancel()
			if err != nil {
				err = fmt.Errorf("rank %d: barrier after the counters: %w", r.comm.Rank(), err)
			}
		}
		return err
	})
	if err != nil && interrupted(ctx) {
		err = errInterrupted
	}
	t.finish()
	if !isRoot {
		return t, false, err
	}
	prog.clear()
	if err == nil {
		writeTableFooter(out, &t)
	} else {
		fmt.Fprintf(out, "# FAILED: %s\n#\n", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if o.Verbose {
		sort.Slice(peers, func(i, j int) bool {
			if peers[i].Rank != peers[j].Rank {
				return peers[i].Rank < peers[j].Rank
			}
			return peers[i].Peer < peers[j].Peer
		})
		t.Peers = peers
		writePeerSummary(out, transport, peers)
	}
	return t, true, err
}

// countHosts is the number of distinct host names among the ranks.
func countHosts(infos []rankInfo) int {
	seen := map[string]bool{}
	for _, i := range infos {
		seen[i.Host] = true
	}
	return len(seen)
}

// gpuSummary runs GPU discovery once per process: it may open libcuda.
var gpuSummary = sync.OnceValue(func() string {
	rep, err := gpu.Discover(gpu.Options{})
	if err != nil {
		return "discovery failed: " + err.Error()
	}
	s := strings.TrimPrefix(rep.Summary(), "gpu: ")
	if n := strings.TrimPrefix(rep.FallbackNotice(), "gpu: "); n != "" && n != s {
		s += "; " + n
	}
	return s
})

// baseEnv fills the fields of Env known before any rank starts.
func baseEnv() Env {
	return Env{CPU: reduce.Features(), GPU: gpuSummary(), GoVersion: runtime.Version(), Version: version}
}

// params copies the sweep settings into the report. Loss is the drop
// probability the run applied, not the flag as typed: --loss drops
// MetaRoCE's datagrams only, so a run without a MetaRoCE table
// (--transport tcp, --backend rccl) records 0, as its header says ("loss:
// none"), and no seed; the report's command keeps the flag as typed.
// Paths is --paths as given where a MetaRoCE table ran, and 0 (absent)
// where none did or --paths was left to the library; each table records
// the count it ran with (Table.PathsPerPlane).
func (o *options) params() Params {
	p := Params{MinBytes: o.MinBytes, MaxBytes: o.MaxBytes, StepFactor: o.StepFactor, StepBytes: o.StepBytes,
		Iters: o.Iters, Warmup: o.Warmup, Check: o.Check, Average: o.Average, Blocking: o.Blocking,
		Root: o.Root, Channels: o.Channels, ChunkBytes: o.ChunkBytes, A2AFlight: o.AllToAllInFlight, GroupSize: o.GroupSize, TimeoutS: o.Timeout.Seconds()}
	if o.runsMetaRoCE() {
		p.Paths = o.PathsPerPlane
	}
	if o.dropsMetaRoCE() {
		p.Loss = o.Loss
		p.Seed = o.Seed // what the drops of MetaRoCE's driver follow
	}
	return p
}

// dropsMetaRoCE reports whether --loss drops anything in this run: it asks
// for loss, and the host backend runs a MetaRoCE table, whose driver is
// the only one that drops (the rccl backend runs neither of the host
// transports).
func (o *options) dropsMetaRoCE() bool {
	return o.Loss > 0 && o.runsMetaRoCE()
}

// runsMetaRoCE reports whether this run has a MetaRoCE table, the only one
// that --loss, --seed and --paths shape: the host backend runs one unless
// --transport tcp, the rccl backend none.
func (o *options) runsMetaRoCE() bool {
	return o.Backend == backendHost && slices.Contains(o.Transports, transportMetaRoCE)
}

// ignoredFlags returns a note for each flag given explicitly that has no
// effect in this run, one line each, without the "mrbench: " prefix; flags
// ignored for the same reason (--loss, --seed and --paths where no
// MetaRoCE table runs) share one note, which names them all. Such
// a flag is accepted, as -z on the host backend is (whose header says so)
// and -np under a launcher is, so that one command line serves several
// runs; the note keeps a user from reading its absent effect into the
// results. --loss drops MetaRoCE's datagrams only, and --seed seeds those
// drops; --paths sets the paths of MetaRoCE's connections only (--paths 0,
// the library's default, changes nothing anywhere and gets no note, as
// --loss 0 does not); --transport selects the host backend's transports,
// of which the rccl backend runs neither.
func (o *options) ignoredFlags() []string {
	var notes []string
	seedIgnored := o.set["seed"] && !o.dropsMetaRoCE()
	typedSeed := o.Seed
	if o.SeedDrawn {
		typedSeed = 0 // Seed is the one drawn for it
	}
	if (o.Loss > 0 || o.PathsPerPlane > 0) && !o.runsMetaRoCE() {
		// The header's "loss: none" records --loss with the results;
		// the note says it on stderr as the run starts. --seed, given
		// with --loss, and --paths are ignored for the same reason, and
		// named in the same line rather than in more that repeat it.
		noTable, way := "--transport tcp", "use --transport metaroce or both"
		if o.Backend == backendRCCL {
			noTable, way = "--backend rccl", "leave out --backend rccl"
		}
		var flags, what []string
		goal := "to set them"
		if o.Loss > 0 {
			flags = append(flags, fmt.Sprintf("--loss %g", o.Loss))
			seeds := ""
			if seedIgnored {
				flags = append(flags, fmt.Sprintf("--seed %d", typedSeed))
				seeds = " (--seed seeds those drops)"
			}
			what = append(what, "--loss drops MetaRoCE datagrams only"+seeds)
			goal = "to drop some"
		}
		if o.PathsPerPlane > 0 {
			flags = append(flags, fmt.Sprintf("--paths %d", o.PathsPerPlane))
			what = append(what, "--paths sets the paths of MetaRoCE connections only")
			if o.Loss > 0 {
				goal = "for them to take effect"
			}
		}
		notes = append(notes, fmt.Sprintf("%s ignored: %s runs no MetaRoCE table, and %s; %s %s",
			andList(flags), noTable, andList(what), way, goal))
	}
	if seedIgnored && o.Loss == 0 {
		// No --loss at all (with one, the note above names --seed).
		notes = append(notes, fmt.Sprintf("--seed %d ignored: no --loss is given, and it seeds only --loss's drops of MetaRoCE datagrams; add --loss P to drop some", typedSeed))
	}
	if o.set["transport"] && o.Backend == backendRCCL {
		typed := transportBoth
		if len(o.Transports) == 1 {
			typed = o.Transports[0]
		}
		notes = append(notes, fmt.Sprintf("--transport %s ignored: --backend rccl measures RCCL/NCCL over its own transports, not the host backend's MetaRoCE or TCP; leave out --backend rccl to measure those", typed))
	}
	return notes
}

// andList joins xs as a sentence lists them: "a", "a and b", "a, b and c".
func andList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// averageNames explains the -a modes in the header's timing line, where
// "over N iterations" follows: -a 0 reports rank 0's own mean, the others
// combine every rank's.
var averageNames = [...]string{"rank 0's mean", "average over ranks of each rank's mean",
	"minimum over ranks of each rank's mean", "maximum over ranks of each rank's mean"}

// checkRanks checks what depends on the job's rank count n before any
// connection: a broadcast root that is no rank, a group size that does not
// divide the ranks, a sweep that prints no row, and the memory of the
// local ranks (those of the n that run on this host, at least 1), each
// holding sw.rankMemory(n). When note is set it names on stderr the sizes
// too small for the collective over the ranks, as they print no row.
func checkRanks(o *options, n, local int, stderr io.Writer, note bool) error {
	if o.Collective == sched.Broadcast && o.Root >= n {
		return fmt.Errorf("-r %d: the root must be a rank, 0 to %d", o.Root, n-1)
	}
	if g := o.GroupSize; g > 0 && n%g != 0 {
		return fmt.Errorf("--group-size %d does not divide the %d ranks", g, n)
	}
	sw := newSweep(o)
	if avail, ok := availableMemory(); ok {
		if need := int64(local) * sw.rankMemory(n); need > avail {
			return fmt.Errorf("-e %s over %d local ranks needs about %.1f GiB of memory, %.1f GiB available: lower -e, or run fewer ranks on this host (-np, or the launcher's ranks per host)",
				bytesize.Format(o.MaxBytes), local, float64(need)/(1<<30), float64(avail)/(1<<30))
		}
	}
	rows, skipped := sw.fits(n)
	if rows == 0 {
		return fmt.Errorf("no row to run: %v over %d ranks needs at least %s, and -b %d to -e %d gives none",
			o.Collective, n, minElements(o.Collective), o.MinBytes, o.MaxBytes)
	}
	if len(skipped) > 0 && note {
		fmt.Fprintf(stderr, "mrbench: skipped, less than %s for %v over %d ranks: %s\n", minElements(o.Collective), o.Collective, n, strings.Join(skipped, ", "))
	}
	return nil
}

// minElements says what a call of collective c needs at the least to run
// (layoutFor): one element per rank's block for the collectives whose
// buffers hold a block per rank, one element for the others.
func minElements(c sched.Collective) string {
	switch c {
	case sched.ReduceScatter, sched.AllGather, sched.AllToAll:
		return "one element per rank"
	}
	return "one element"
}

// bootOf is the launched job's bootstrap of l, nil where this process
// runs every rank itself.
func bootOf(l launcher) *collectives.Bootstrap {
	switch l := l.(type) {
	case *hostLauncher:
		return l.boot
	case *rcclLauncher:
		return l.boot
	}
	return nil
}

// jobRank is this process's rank in a launched job, and 0 where the
// process runs every rank itself.
func jobRank(l launcher) int {
	if b := bootOf(l); b != nil {
		return b.Rank
	}
	return 0
}

// announceJob prepares b, this process's rank of a launched job, and tells
// rank 0's stderr where the job's layout came from. A launcher's variables
// left in the environment of a plain run (an sbatch script without srun, a
// shell inside torchrun) make mrbench rank 0 of a job whose other ranks
// never start: the line names those variables at once, and every few
// seconds the rendezvous says which ranks it still waits for (on rank 0)
// or that rank 0 has not answered (elsewhere), until its timeout.
//
// An explicit -np that is not the job's size is ignored with a warning
// rather than refused: -np counts the ranks this process runs itself,
// which under a launcher is one (the help says it is ignored there), and
// scripts that pass one command line to several launchers must keep
// working; the warning says how to run the -np ranks instead.
func announceJob(o *options, b *collectives.Bootstrap, stderr io.Writer) {
	b.ProgressEvery = rendezvousProgressEvery
	b.Progress = func(line string) { fmt.Fprintf(stderr, "mrbench: %s\n", line) }
	if b.Rank != 0 {
		return
	}
	fmt.Fprintf(stderr, "mrbench: %s\n", b.Describe())
	if o.set["np"] && o.Ranks != b.NRanks {
		vars := "its variables"
		if b.Vars.Rank != "" {
			vars = b.Vars.Rank + " and " + b.Vars.NRanks
		}
		fmt.Fprintf(stderr, "mrbench: -np %d ignored: the %s environment makes this process rank %d of a job of %d; to run %d ranks in this process, unset %s\n",
			o.Ranks, b.Source, b.Rank, b.NRanks, o.Ranks, vars)
	}
}

// launched reports whether the ranks are processes of a launcher's job
// (torchrun, mpirun, srun, or METAROCE_* variables), not goroutines of
// this process.
func launched(l launcher) bool {
	s := l.source()
	return s != launcherLocal && s != launcherNetlab
}

// writeHeader prints nccl-tests' opening lines, then ours: the run, the
// transport, the CPU and the GPU, each a "#" line.
func writeHeader(w io.Writer, o *options, env *Env, transport, describe, datapath string, infos []rankInfo) {
	// validation is -c as given, the number of checked iterations per
	// size (0: none), as nccl-tests prints its own -c there.
	fmt.Fprintf(w, "# nThread 1 nGpus 1 minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: 1 validation: %d graph: 0\n",
		o.MinBytes, o.MaxBytes, o.stepLabel(), o.Warmup, o.Iters, o.Check)
	fmt.Fprintf(w, "#\n# Using devices\n")
	for r, in := range infos {
		dev := "[host] host memory"
		if o.Backend == backendRCCL {
			dev = "[gpu] device memory"
		}
		fmt.Fprintf(w, "#  Rank %2d Group  0 Pid %6d on %10s device %2d %s\n", r, in.Pid, in.Host, -1, dev)
	}
	fmt.Fprintf(w, "#\n")
	fmt.Fprintf(w, "# mrbench %s, %s %s/%s\n", env.Version, env.GoVersion, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "# collective: %s, %d ranks on %d host(s), launcher: %s\n", o.Collective, env.Ranks, env.Hosts, env.Launcher)
	fmt.Fprintf(w, "# transport: %s\n", describe)
	if datapath != "" {
		fmt.Fprintf(w, "# datapath: %s\n", datapath)
	}
	switch {
	case o.Loss > 0 && transport == transportMetaRoCE:
		seed := fmt.Sprintf("seed %d", o.Seed)
		if o.SeedDrawn {
			seed = fmt.Sprintf("seed %d, drawn at random: --seed %d repeats it", o.Seed, o.Seed)
		}
		fmt.Fprintf(w, "# loss: driver drops each MetaRoCE datagram with probability %g (%s)\n", o.Loss, seed)
	case o.Loss > 0:
		fmt.Fprintf(w, "# loss: none (--loss drops MetaRoCE datagrams only)\n")
	}
	fmt.Fprintf(w, "# cpu: %s\n", env.CPU)
	fmt.Fprintf(w, "# gpu: %s\n", env.GPU)
	fmt.Fprintf(w, "# timing: %s\n", timingNote(o))
	fmt.Fprintf(w, "#\n")
}

// timingNote is the header's timing line: how the reported time combines
// the ranks (-a), over how many iterations, and what a collective's time
// includes (-z).
func timingNote(o *options) string {
	return fmt.Sprintf("%s over %d iterations after %d warm-up; %s", averageNames[o.Average], o.Iters, o.Warmup, blockingNote(o))
}

func blockingNote(o *options) string {
	if o.Backend == backendRCCL {
		if o.Blocking == 1 {
			return "each collective waited for (-z 1)"
		}
		return "collectives queued, then the stream waited for (-z 0)"
	}
	return "host collectives return when complete (-z has no effect)"
}

// writePeerSummary prints the -v counters as "#" lines after a table.
func writePeerSummary(w io.Writer, transport string, peers []PeerSummary) {
	if len(peers) == 0 {
		why := "the transport keeps none"
		if transport == transportMetaRoCE {
			why = "no rank has a peer to count"
		}
		fmt.Fprintf(w, "# %s: no per-peer counters (%s)\n#\n", transport, why)
		return
	}
	fmt.Fprintf(w, "# %s per-peer counters:\n", transport)
	fmt.Fprintf(w, "# %5s %5s %12s %12s %8s %8s %8s %8s %8s %8s %8s %10s %9s\n", "rank", "peer", "pkts-sent", "pkts-recv", "retrans", "lost", "timeouts", "spur-to", "tailprb", "ecn", "pathchg", "acks-sent", "rtt(us)")
	for _, p := range peers {
		fmt.Fprintf(w, "# %5d %5d %12d %12d %8d %8d %8d %8d %8d %8d %8d %10d %9.1f\n", p.Rank, p.Peer, p.PacketsSent, p.PacketsRecv,
			p.Retransmits, p.Lost, p.Timeouts, p.SpuriousTO, p.TailProbes, p.ECNMarks, p.PathChanges, p.AcksSent, p.RTTUs)
		for _, q := range p.Paths {
			state := "active"
			if !q.Active {
				state = "idle"
			}
			fmt.Fprintf(w, "#   path plane %d entropy %5d %-6s packets %10d lost %6d ecn %6d changes %4d rtt %7.1f us\n",
				q.Plane, q.Entropy, state, q.Packets, q.Lost, q.ECNMarks, q.PathChanges, q.RTTUs)
		}
	}
	fmt.Fprintf(w, "#\n")
}
