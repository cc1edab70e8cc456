package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/metaroce/metaroce/fabric/sim/scenarios"
	"github.com/metaroce/metaroce/internal/bytesize"
	"github.com/metaroce/metaroce/internal/cli"
)

// runSim is `mrbench sim SCENARIO [flags]`: one scenario of the fabric
// simulator, printed as text tables, optionally written as JSON, CSV and
// PNG plots.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mrbench sim", flag.ContinueOnError)
	var opts scenarios.Options
	var jsonPath, csvPath, plotPath string
	var sizes, losses, ops string
	var verbose bool
	fs.Uint64Var(&opts.Seed, "seed", 1, "random seed of the simulation, 1 or more")
	fs.BoolVar(&opts.Smoke, "smoke", false, "small, fast variant (16 hosts or fewer, short runs)")
	fs.Float64Var(&opts.LinkGbps, "link-gbps", 0, fmt.Sprintf("link rate in Gb/s, %g to %g (0: the scenario's default, 400)", scenarios.MinLinkGbps, scenarios.MaxLinkGbps))
	fs.IntVar(&opts.MTU, "mtu", 0, fmt.Sprintf("payload bytes per packet, %d to %d (0: 4096)", scenarios.MinMTU, scenarios.MaxMTU))
	fs.StringVar(&sizes, "sizes", "", fmt.Sprintf("collective: comma-separated sizes per rank, each a multiple of 1K from 1K to %s, K/M/G suffixes (default 1M,16M; with --smoke 256K,2M)",
		bytesize.Format(scenarios.MaxCollectiveBytes)))
	fs.StringVar(&losses, "losses", "", "collective: comma-separated loss percentages across spines, each at least 0 and under 100 (default 0,0.1,1; with --smoke 0,1)")
	fs.StringVar(&ops, "ops", "", "collective: comma-separated operations, allreduce and/or alltoall (default both)")
	fs.StringVar(&jsonPath, "json", "", "write the result as JSON to this file (see SCHEMA.md)")
	fs.StringVar(&csvPath, "csv", "", "write the result's tables as CSV to this file")
	fs.StringVar(&plotPath, "plot", "", "write the scenario's plots as PNG (NAME.png, NAME-2.png, ...)")
	fs.BoolVar(&verbose, "v", false, "progress and simulator speed on stderr")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mrbench sim SCENARIO [flags]   (flags may also come before SCENARIO)\n\nScenarios: %s\n\n"+
			"Rates are in bits per second, as links are quoted: columns ending in\n"+
			"_gbit_s are Gb/s and _tbit_s Tb/s (mrbench's own tables are GB/s, bytes).\n\nFlags:\n",
			strings.Join(scenarios.Names(), " "))
		fs.PrintDefaults()
	}
	// The scenario's name may come before the flags, after them or among
	// them (`mrbench sim --smoke loss`): the flags up to the name, the
	// name, then the flags after it.
	if err := cli.ParseFlags(fs, args, stdout, "mrbench sim"); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		printError(stderr, "mrbench sim", err)
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "mrbench sim: name a scenario: %s\n", strings.Join(scenarios.Names(), " "))
		return exitUsage
	}
	name := fs.Arg(0)
	if err := cli.ParseFlags(fs, fs.Args()[1:], stdout, "mrbench sim"); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		printError(stderr, "mrbench sim", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mrbench sim: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if opts.Seed == 0 {
		// The scenarios read a zero seed as "the default", 1: a run asked
		// for seed 0 would print and be seed 1's.
		fmt.Fprintf(stderr, "mrbench sim: --seed 0: seeds start at 1\n")
		return exitUsage
	}
	if plotPath != "" && plotFormat(plotPath) != "png" {
		fmt.Fprintf(stderr, "mrbench sim: --plot %q: the simulator's plots are PNG files\n", plotPath)
		return exitUsage
	}
	if plotPath != "" {
		if err := checkPlotName(plotPath); err != nil {
			fmt.Fprintf(stderr, "mrbench sim: --plot %q: %v\n", plotPath, err)
			return exitUsage
		}
	}
	if err := checkOutputs(map[string]string{"json": jsonPath, "csv": csvPath, "plot": plotPath}); err != nil {
		printError(stderr, "mrbench sim", err)
		return exitUsage
	}
	if err := checkFurtherPlots(plotPath, map[string]string{"json": jsonPath, "csv": csvPath}); err != nil {
		printError(stderr, "mrbench sim", err)
		return exitUsage
	}
	if err := parseSimRows(&opts, sizes, losses, ops); err != nil {
		printError(stderr, "mrbench sim", err)
		return exitUsage
	}
	if verbose {
		opts.Log = stderr
	} else {
		opts.Progress = stderr
	}
	// The scenario stops within milliseconds of ctx's end (a signal), so
	// it is waited for: none of it goes on running after runSim returns.
	res, err := scenarios.RunContext(ctx, name, opts)
	if err != nil {
		usage := errors.Is(err, scenarios.ErrUsage)
		if !usage && interrupted(ctx) {
			return exitFail // run says so, and exits with the signal's status
		}
		printError(stderr, "mrbench sim", err)
		if usage {
			return exitUsage
		}
		return exitFail
	}
	if err := res.WriteText(stdout); err != nil {
		printError(stderr, "mrbench sim", err)
		return exitFail
	}
	if err := writeSimFiles(res, jsonPath, csvPath, plotPath); err != nil {
		printError(stderr, "mrbench sim", err)
		return exitFail
	}
	if !verbose {
		// The simulator's speed, on stderr: wall-clock figures stay out
		// of the seeded, byte-identical output (-v prints them per run).
		p := res.Perf
		fmt.Fprintf(stderr, "mrbench sim %s: %.1f M events in %.1f s, %.2f M events/s\n",
			name, float64(p.Events)/1e6, p.WallSeconds, p.EventsPerSec()/1e6)
	}
	return exitOK
}

// parseSimRows fills the collective scenario's row options from the
// comma-separated flags; an empty flag keeps the scenario's default. The
// scenario checks the values' ranges and that it takes them at all.
func parseSimRows(o *scenarios.Options, sizes, losses, ops string) error {
	var err error
	if o.Sizes, err = parseList("--sizes", sizes, func(f string) (uint64, error) {
		n, err := bytesize.Parse(f, maxSweepBytes)
		return uint64(n), err
	}); err != nil {
		return err
	}
	if o.Losses, err = parseList("--losses", losses, func(f string) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "%")), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a percentage", f)
		}
		return v, nil
	}); err != nil {
		return err
	}
	o.Ops, err = parseList("--ops", ops, func(f string) (string, error) { return strings.TrimSpace(f), nil })
	return err
}

// parseList parses the comma-separated value of flag with parse; an empty
// value is nil (the default), and an error names the flag. An empty item
// (a stray or doubled comma) is refused here, alike for every flag, rather
// than read as whatever parse makes of "" (an operation named "").
func parseList[T any](flag, value string, parse func(string) (T, error)) ([]T, error) {
	if value == "" {
		return nil, nil
	}
	var out []T
	for _, f := range strings.Split(value, ",") {
		if strings.TrimSpace(f) == "" {
			return nil, fmt.Errorf("%s %q: an empty item between commas", flag, value)
		}
		v, err := parse(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", flag, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// writeSimFiles writes the files asked for; plot i > 0 goes to NAME-(i+1).png.
func writeSimFiles(res *scenarios.Result, jsonPath, csvPath, plotPath string) error {
	write := func(path string, f func(io.Writer) error) error {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			return err
		}
		return writeFileAtomic(path, b.Bytes())
	}
	if jsonPath != "" {
		if err := write(jsonPath, res.WriteJSON); err != nil {
			return fmt.Errorf("json: %w", err)
		}
	}
	if csvPath != "" {
		if err := write(csvPath, res.WriteCSV); err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	if plotPath != "" {
		for i := range res.Plots {
			// Replaced whole, as the other outputs are: a failed
			// write leaves a previous plot intact.
			png, err := res.PNG(i)
			if err == nil {
				err = writeFileAtomic(simPlotPath(plotPath, i), png)
			}
			if err != nil {
				return fmt.Errorf("plot: %w", err)
			}
		}
	}
	return nil
}

// simPlotPath is the file of a scenario's plot i (from 0) under --plot
// path: path itself, then NAME-2.png, NAME-3.png, ... beside it, NAME
// being path without its extension.
func simPlotPath(path string, i int) string {
	if i == 0 {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(path, ext), i+1, ext)
}

// furtherPlot reports which of --plot path's further plots (2 or more)
// the file named base in path's directory would be, by simPlotPath's
// pattern, or 0 and false: a scenario's count of plots is known only once
// it has run, so every name of the pattern counts.
func furtherPlot(path, base string) (int, bool) {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(filepath.Base(path), ext) + "-"
	k, ok := strings.CutPrefix(base, stem)
	if !ok {
		return 0, false
	}
	if k, ok = strings.CutSuffix(k, ext); !ok || k == "" || k[0] == '0' || strings.Trim(k, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(k)
	if err != nil || n < 2 {
		return 0, false
	}
	return n, true
}

// checkFurtherPlots verifies, before the scenario runs, that the further
// plots of --plot path (NAME-2.png, ...; checkOutputs has checked path and
// its directory) can be written, whichever of them the scenario draws: no
// directory stands at one of their names, and no other output (flag →
// path) is one of them, which the plot would overwrite after it was
// written. Finding either after a run of minutes lost its plot or, for a
// --json or --csv named like a plot, the file itself.
func checkFurtherPlots(path string, others map[string]string) error {
	if path == "" {
		return nil
	}
	absPlot, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("--plot %q: %w", path, err)
	}
	dir := filepath.Dir(absPlot)
	var errs []error
	for _, flag := range slices.Sorted(maps.Keys(others)) {
		p := others[flag]
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil || filepath.Dir(abs) != dir {
			continue // checkOutputs named an error
		}
		if i, ok := furtherPlot(absPlot, filepath.Base(abs)); ok {
			errs = append(errs, fmt.Errorf("--%s %q: --plot %q writes a scenario's plot %d to that file (its further plots go to NAME-2.png, NAME-3.png, ... beside it): name another file", flag, p, path, i))
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("--plot %q: %w", path, err)
	}
	for _, e := range entries {
		i, ok := furtherPlot(absPlot, e.Name())
		if !ok {
			continue
		}
		// Stat follows a link, to a directory as the plot's write would.
		if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && fi.IsDir() {
			errs = append(errs, fmt.Errorf("--plot %q: %s, where a scenario's plot %d goes, is a directory: move it, or name another plot file", path, filepath.Join(filepath.Dir(path), e.Name()), i))
		}
	}
	return errors.Join(errs...)
}
