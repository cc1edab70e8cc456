package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// nccl-tests flags that mrbench has no use for. Scripts written for
// nccl-tests pass them with their neutral values, which mrbench accepts
// (the header already prints "nThread 1 nGpus 1 ... agg iters: 1 ...
// graph: 0"); any other value gets an error that says what to do instead,
// rather than "flag provided but not defined" and the whole usage.
type compatFlag struct {
	names   []string // short, then nccl-tests' long name
	neutral []int    // values accepted without effect
	why     string   // the error for any other value
}

var compatFlags = []compatFlag{
	{[]string{"g", "ngpus"}, []int{1}, "one rank drives one device here: start more ranks with -np N or a launcher (mpirun, torchrun, srun)"},
	{[]string{"t", "nthreads"}, []int{1}, "one thread per rank here: start more ranks with -np N or a launcher"},
	{[]string{"m", "agg_iters"}, []int{1}, "aggregated iterations are not supported"},
	{[]string{"G", "cudagraph"}, []int{0}, "CUDA graphs are not used: host collectives have no graph to capture"},
	{[]string{"N", "run_cycles"}, []int{1}, "one cycle per run: run mrbench again"},
	{[]string{"C", "report_cputime"}, []int{0}, "CPU time is not reported"},
	{[]string{"p", "parallel_init"}, []int{0, 1}, "want 0 or 1, as nccl-tests (ranks start in parallel here whatever it says)"},
	{[]string{"R", "local_register"}, []int{0, 1, 2}, "want 0, 1 or 2, as nccl-tests (host buffers need no registration here)"},
}

// registerCompat defines the compatibility flags on fs; check reports the
// first one given a value it does not accept.
func registerCompat(fs *flag.FlagSet) (check func() error) {
	vals := make([]int, len(compatFlags))
	for i, cf := range compatFlags {
		vals[i] = cf.neutral[0]
		for _, n := range cf.names {
			fs.IntVar(&vals[i], n, cf.neutral[0], "nccl-tests compatibility: accepted as "+neutralList(cf.neutral))
		}
	}
	return func() error {
		for i, cf := range compatFlags {
			ok := false
			for _, v := range cf.neutral {
				ok = ok || vals[i] == v
			}
			if !ok {
				return fmt.Errorf("-%s %d: %s", cf.names[0], vals[i], cf.why)
			}
		}
		return nil
	}
}

func neutralList(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, " or ")
}

// secondsFlag is a duration that also takes a bare number of seconds, as
// nccl-tests' -T/--timeout does, and must be above zero. nccl-tests reads
// -T 0 as "no limit"; here the deadline is also what ends a wait for a
// rank that stopped or never started, and without one such a run would
// hang, so 0 (or a number of seconds too small to make a nanosecond) is
// refused with the value as typed, and a long deadline is the way out.
type secondsFlag struct{ p *time.Duration }

// errNoTimeout explains why secondsFlag takes no deadline of 0 or less.
var errNoTimeout = errors.New("want a deadline above 0: a duration (30s, 2m) or seconds; there is no 0 for no limit, as a rank that stopped would then hang the run: give a long one, such as 1h")

func (f secondsFlag) String() string {
	if f.p == nil {
		return ""
	}
	return f.p.String()
}

// maxSeconds is the largest number of seconds a time.Duration holds (about
// 292 years). A bare number beyond it, or NaN, would convert to a
// wrapped-around duration that names no value the user gave.
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

func (f secondsFlag) Set(s string) error {
	if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		if math.IsNaN(v) || math.Abs(v) >= maxSeconds {
			return fmt.Errorf("want a number of seconds below %.0f, or a duration (30s, 2m)", maxSeconds)
		}
		d := time.Duration(v * float64(time.Second))
		if d <= 0 {
			return errNoTimeout
		}
		*f.p = d
		return nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want a duration (30s, 2m) or seconds")
	}
	if d <= 0 {
		return errNoTimeout
	}
	*f.p = d
	return nil
}
