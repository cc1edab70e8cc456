package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/internal/bytesize"
)

// The processes of a launched job each parse their own command line, and
// nothing makes the launcher give every rank the same one (separate
// shells with METAROCE_RANK, an MPMD mpirun, a script that varies a flag
// per host). Ranks with different sweeps call different collectives, or the
// same ones with different counts: they fail as transport errors, hang
// until the timeout, or worse, check their results against different
// expectations and report a table that is not what was run. So before the
// first table the ranks compare the settings that change what is sent or
// checked, and on any difference every rank exits with the same usage
// error, naming the flag and the values.
//
// The comparison runs on a kernel-TCP communicator of fixed settings, the
// same one the rccl backend sets up for NCCL's unique id: the table's own
// communicator cannot be the channel, because package collectives refuses
// to set one up at all when the ranks disagree on its transport, channels,
// chunk size or group size, and its error names its Config fields rather
// than mrbench's flags. Ranks in one process (-np, --netlab) share one
// command line and are not compared.
//
// What is compared (agreedSettings) is every flag that changes the calls,
// their checks or the conditions and figures of the measurement: the
// backend, the collective, the sizes, data types, reduction and root, the
// iteration counts, -c, -a and -z, and the host transport's --transport,
// --a2a-inflight, --paths and --loss (--channels, --chunk and --group-size
// the collectives compare themselves, after their defaults), each in a
// canonical form, so that two spellings
// of one sweep agree (-b 1024 and -b 1K; -f 1 -i 1K and -i 1K) and a flag
// that the sweep does not use (-r of an all-reduce, -o of an all-gather,
// -i under a step factor, --paths and --loss under --transport tcp) is not
// compared. What may differ:
//   - -T: each rank's own deadlines; a rank on a slower host may be given
//     longer;
//   - --seed: every rank's MetaRoCE driver takes its own random choices
//     anyway (the seed is mixed with the rank), and with --seed 0 every
//     rank takes the seed rank 0 drew (hostLauncher.agree);
//   - -v, --json, --csv and --plot: rank 0 alone prints and writes files
//     (every rank waits in the barrier that keeps -v's counters alive
//     after each table, given -v or not, so that -v changes no call);
//   - -np, which a launched rank ignores, --netlab, which it refuses, and
//     the nccl-tests flags accepted for compatibility, which do nothing.

// setting is one value on which every rank of a launched job must agree:
// the flag as the help names it, and its value in a canonical form that
// holds no tab or newline.
type setting struct{ flag, value string }

// agreedSettings lists o's settings that every rank must share, in the
// order in which a disagreement is reported: the broader ones first, so
// that ranks running different collectives hear about --op rather than
// about a flag that the collective makes moot.
func (o *options) agreedSettings() []setting {
	unused := func(why string) string { return unusedPrefix + why + ")" }
	s := []setting{
		{"--backend", o.Backend},
		{"--op", o.Collective.String()},
		{"-b", bytesize.Format(o.MinBytes)},
		{"-e", bytesize.Format(o.MaxBytes)},
	}
	factor, step := unused("-b equals -e"), unused("-b equals -e")
	if o.MinBytes != o.MaxBytes {
		if o.StepFactor > 1 {
			factor, step = strconv.FormatFloat(o.StepFactor, 'g', -1, 64), unused("-f steps")
		} else {
			factor, step = "none (steps by -i)", bytesize.Format(o.StepBytes)
		}
	}
	s = append(s, setting{"-f", factor}, setting{"-i", step},
		setting{"-d", namesOrAll(o.DTypes, reduce.AllDTypes())})
	ops := unused("--op " + o.Collective.String() + " does not reduce")
	if o.Collective.Reduces() {
		ops = namesOrAll(o.Ops, reduce.AllOps())
	}
	root := unused("--op " + o.Collective.String() + " has no root")
	if o.Collective == sched.Broadcast {
		root = strconv.Itoa(o.Root)
	}
	s = append(s, setting{"-o", ops}, setting{"-r", root},
		setting{"-n", strconv.Itoa(o.Iters)}, setting{"-w", strconv.Itoa(o.Warmup)},
		setting{"-c", strconv.Itoa(o.Check)}, setting{"-a", strconv.Itoa(o.Average)},
		setting{"-z", strconv.Itoa(o.Blocking)})

	// The host transport's flags; the rccl backend reads none of them.
	// --channels, --chunk and --group-size are not compared here: the
	// collectives compare them when the table's communicator is set up,
	// after their defaults are applied (0 and the default's value agree
	// there, where this comparison of the flags as given called them a
	// disagreement).
	host := func(v string) string {
		if o.Backend != backendHost {
			return unused("--backend " + o.Backend)
		}
		return v
	}
	transport := transportBoth
	if len(o.Transports) == 1 {
		transport = o.Transports[0]
	}
	orDefault := func(v int64, format func(int64) string, def string) string {
		if v == 0 {
			return "0 (" + def + ")"
		}
		return format(v)
	}
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	inflight := unused("--op " + o.Collective.String())
	if o.Collective == sched.AllToAll {
		inflight = orDefault(int64(o.AllToAllInFlight), itoa, "by message size")
	}
	// --paths and --loss shape the MetaRoCE table alone. --paths is
	// compared as given, 0 as the library's default: what that resolves
	// to depends on the rank's addresses (one path per plane on loopback,
	// collectives.LoopbackPathsPerPlane), which the flags do not show.
	paths, loss := unused("--transport tcp"), unused("--transport tcp")
	if slices.Contains(o.Transports, transportMetaRoCE) {
		paths = orDefault(int64(o.PathsPerPlane), itoa, "the library default")
		loss = strconv.FormatFloat(o.Loss, 'g', -1, 64)
	}
	return append(s,
		setting{"--transport", host(transport)},
		setting{"--a2a-inflight", host(inflight)},
		setting{"--paths", host(paths)},
		setting{"--loss", host(loss)})
}

// unusedPrefix starts the value of a setting that the sweep does not use,
// followed by the reason (another setting) and a parenthesis.
const unusedPrefix = "unused ("

// namesOrAll is the canonical value of -d or -o: "all" when xs is every
// value there is (what the flag's "all" gives), else the names, comma
// separated.
func namesOrAll[T fmt.Stringer](xs, all []T) string {
	if len(xs) == len(all) && len(all) > 1 {
		return "all"
	}
	return strings.ReplaceAll(joinNames(xs), " ", ",")
}

// encodeSettings is the canonical encoding of s: one "flag<TAB>value"
// line per setting, in order.
func encodeSettings(s []setting) []byte {
	var b bytes.Buffer
	for _, x := range s {
		b.WriteString(x.flag + "\t" + x.value + "\n")
	}
	return b.Bytes()
}

// decodeSettings undoes encodeSettings; a line without a tab (from a build
// that encodes otherwise) becomes a flag without a value.
func decodeSettings(b []byte) []setting {
	var s []setting
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f, v, _ := strings.Cut(line, "\t")
		s = append(s, setting{f, v})
	}
	return s
}

// settingsError is a disagreement between the ranks' settings: a usage
// error, which every rank reports alike (exitUsage).
type settingsError struct{ msg string }

func (e settingsError) Error() string { return e.msg }

// Sizes of the comparison's messages.
const (
	// agreeRecordBytes is each rank's record in the first all-gather:
	// the length of its encoding (uint64, little endian) and the
	// encoding's SHA-256.
	agreeRecordBytes = 8 + sha256.Size
	// maxSettingsBytes bounds an encoding that a rank announces (ours
	// are some 400 bytes), so that a record from a build that lays it out
	// otherwise cannot make the second all-gather allocate without limit.
	maxSettingsBytes = 64 << 10
	// maxNamedRanks is how many differing ranks an error names; the
	// others are counted.
	maxNamedRanks = 8
)

// agreeSettings compares this rank's settings (mine) with every other
// rank's over c, whose ranks must all call it. The common case costs one
// all-gather of a fixed-size record (the encoding's length and digest);
// only when the records differ does a second all-gather carry every
// rank's encoding, padded to the longest, so that every rank can name the
// flag and the values. Every rank then holds the same data and returns the
// same settingsError. Each all-gather is bounded by timeout.
func agreeSettings(ctx context.Context, c comm, mine []setting, timeout time.Duration) error {
	enc := encodeSettings(mine)
	rec := make([]byte, agreeRecordBytes)
	binary.LittleEndian.PutUint64(rec, uint64(len(enc)))
	sum := sha256.Sum256(enc)
	copy(rec[8:], sum[:])
	recs, err := allGatherBytes(ctx, c, rec, timeout)
	if err != nil {
		return fmt.Errorf("rank %d: comparing the ranks' settings: %w", c.Rank(), err)
	}
	n := c.Size()
	longest, same := 0, true
	for r := 0; r < n; r++ {
		got := recs[r*agreeRecordBytes : (r+1)*agreeRecordBytes]
		same = same && bytes.Equal(got, rec)
		l := binary.LittleEndian.Uint64(got)
		if l > maxSettingsBytes {
			return settingsError{fmt.Sprintf("rank %d announced %d bytes of settings, more than the %d an mrbench sends: the ranks run different builds of mrbench", r, l, maxSettingsBytes)}
		}
		longest = max(longest, int(l))
	}
	if same {
		return nil
	}
	padded := make([]byte, longest)
	copy(padded, enc)
	all, err := allGatherBytes(ctx, c, padded, timeout)
	if err != nil {
		return fmt.Errorf("rank %d: exchanging the ranks' settings: %w", c.Rank(), err)
	}
	byRank := make([][]setting, n)
	for r := range byRank {
		l := binary.LittleEndian.Uint64(recs[r*agreeRecordBytes:])
		byRank[r] = decodeSettings(all[r*longest : r*longest+int(l)])
	}
	if msg, usage := refusals(byRank); msg != "" {
		if !usage {
			return errors.New(msg)
		}
		return settingsError{msg}
	}
	return settingsError{disagreement(byRank)}
}

// disagreement words the difference between the ranks' settings (by rank):
// the first of rank 0's flags on which some rank differs, rank 0's value
// and each differing rank's (the first maxNamedRanks), then the other
// flags that differ, less those that some rank does not use: they differ
// because of a flag named before them (-o after --op), and agree or not
// once that one does.
func disagreement(byRank [][]setting) string {
	value := func(s []setting, flag string) (string, bool) {
		for _, x := range s {
			if x.flag == flag {
				return x.value, true
			}
		}
		return "", false
	}
	var first string
	var others []string
	for _, x := range byRank[0] {
		var diff []string
		n := 0
		moot := strings.HasPrefix(x.value, unusedPrefix)
		for r := 1; r < len(byRank); r++ {
			v, ok := value(byRank[r], x.flag)
			if ok && v == x.value {
				continue
			}
			moot = moot || strings.HasPrefix(v, unusedPrefix)
			if !ok {
				v = "no such setting (another build of mrbench)"
			}
			if n < maxNamedRanks {
				diff = append(diff, fmt.Sprintf("rank %d has %s", r, v))
			}
			n++
		}
		switch {
		case n == 0:
		case first == "":
			more := ""
			if n > len(diff) {
				more = fmt.Sprintf(" and %d more ranks differ", n-len(diff))
			}
			first = fmt.Sprintf("the ranks disagree on %s: rank 0 has %s, %s%s", x.flag, x.value, strings.Join(diff, ", "), more)
		case !moot:
			others = append(others, x.flag)
		}
	}
	if first == "" {
		// Every flag of rank 0's matches: another rank lists more.
		return "the ranks list different settings: they run different builds of mrbench"
	}
	if len(others) > 0 {
		first += "; they also disagree on " + strings.Join(others, ", ")
	}
	return first
}

// allGatherBytes gathers every rank's send (the same length on every rank)
// into one buffer, in rank order, within timeout.
func allGatherBytes(ctx context.Context, c comm, send []byte, timeout time.Duration) ([]byte, error) {
	recv := make([]byte, c.Size()*len(send))
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := c.Collective(cctx, call{Coll: sched.AllGather, Count: int64(len(send)), DType: reduce.Uint8}, send, recv)
	return recv, err
}

// agreedComm sets up the communicator on which a launched job's ranks
// compare their settings (agreeSettings), and returns it open once they
// agree, for what the caller still has to exchange on it (rank 0's seed,
// NCCL's unique id); the caller closes it. It is kernel TCP with the
// library's defaults, which every rank asks for alike, whatever its flags,
// so that package collectives has nothing to refuse, and the host and rccl
// launchers set up the same one, so that ranks of the two backends meet
// and disagree on --backend.
func agreedComm(ctx context.Context, b collectives.Bootstrap, o *options) (*collectives.Comm, error) {
	c, err := collectives.New(ctx, b, collectives.Config{Transport: collectives.TransportTCP, Timeout: o.Timeout, TimeoutSetting: timeoutFlag})
	if err != nil {
		return nil, fmt.Errorf("joining the job's ranks (over kernel TCP, to compare their flags first): %w", err)
	}
	if err := agreeSettings(ctx, hostComm{c}, o.agreedSettings(), o.Timeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// libraryFlags maps the Config fields that package collectives compares
// across ranks (collectives.SettingsError) to the flags that set them.
var libraryFlags = map[string]string{
	"Config.Transport":  "--transport",
	"Config.Channels":   "--channels",
	"Config.ChunkBytes": "--chunk",
	"Config.GroupSize":  "--group-size",
}

// libraryDisagreement words err, when it is the library's finding that the
// ranks' configurations differ, as the usage error of the flag that sets
// the field: the ranks were started with different flags, as for the
// settings that mrbench compares itself.
func libraryDisagreement(err error) (string, bool) {
	var se *collectives.SettingsError
	if !errors.As(err, &se) {
		return "", false
	}
	flag, ok := libraryFlags[se.Field]
	if !ok {
		return se.Error(), true
	}
	return fmt.Sprintf("the ranks disagree on %s (%v)", flag, se), true
}

// refusedFlag is the flag of the one setting that a rank which refused its
// own command line (or its launcher's environment) sends in the
// comparison, with the error as the value: agreeSettings then fails on
// every other rank with a usage error that names the rank and quotes it.
// Without it the other ranks of a launched job waited in the rendezvous for
// their whole timeout (a minute by default) for a rank that had exited at
// once; mpirun and torchrun end the job when a rank fails, srun and ranks
// started by hand do not.
//
// failedFlag is its twin for a rank that failed to start for a reason
// other than its configuration (the rccl backend's driver failing to
// count the devices; a missing library is a refusal): the others then fail
// with its error, as a failure rather than a usage error.
const (
	refusedFlag = "(refused)"
	failedFlag  = "(failed)"
)

// refusalWait bounds how long a refusing rank waits to tell the others
// (tellRefusal). A launcher starts its ranks within moments of each other,
// and a rank started by hand with a misspelt flag should not hold its
// shell for the whole default -T when nobody else was started: the error
// is printed first, and a wait shows in progress lines.
const refusalWait = 15 * time.Second

// refusalSettings is the settings list of a rank that refuses to run for
// why (flag refusedFlag) or failed to start (failedFlag), on one line.
func refusalSettings(flag, why string) []setting {
	return []setting{{flag, strings.Join(strings.Fields(why), " ")}}
}

// refusals words the ranks of byRank that failed to start or refused to
// run (refusalSettings), "" when none did: the first one's error quoted,
// the others of its kind named. Ranks that failed come first, and make it
// a failure (usage false); ranks that only refused, a usage error.
func refusals(byRank [][]setting) (msg string, usage bool) {
	for _, k := range []struct{ flag, what string }{{failedFlag, "could not start"}, {refusedFlag, "refused to run"}} {
		var ranks []int
		var first string
		for r, s := range byRank {
			if len(s) == 1 && s[0].flag == k.flag {
				if first == "" {
					first = s[0].value
				}
				ranks = append(ranks, r)
			}
		}
		switch len(ranks) {
		case 0:
			continue
		case 1:
			return fmt.Sprintf("rank %d %s: %s", ranks[0], k.what, first), k.flag == refusedFlag
		}
		return fmt.Sprintf("%s %s; rank %d: %s", rankList(ranks), k.what, ranks[0], first), k.flag == refusedFlag
	}
	return "", false
}

// rankList words ranks for refusals: "ranks 1, 2 and 5", the first
// maxNamedRanks of them, the others counted.
func rankList(ranks []int) string {
	words := make([]string, 0, min(len(ranks), maxNamedRanks))
	for _, r := range ranks[:min(len(ranks), maxNamedRanks)] {
		words = append(words, strconv.Itoa(r))
	}
	if n := len(ranks) - len(words); n > 0 {
		return fmt.Sprintf("ranks %s and %d more", strings.Join(words, ", "), n)
	}
	return fmt.Sprintf("ranks %s and %s", strings.Join(words[:len(words)-1], ", "), words[len(words)-1])
}

// tellRefusal is what a rank of a launched job does when it exits on a
// usage error (flag refusedFlag) or fails to start (failedFlag) before its
// first table, after printing the error: it joins the comparison that the
// other ranks wait in (agreedComm's communicator) with
// refusalSettings(flag, why), so that they exit with its error, as a usage
// error or a failure, instead of waiting out their timeout. It waits for
// the job to meet at most refusalWait, or timeout where that is shorter
// (0: the default -T). A run outside a launched job, or a job of one rank,
// has nobody to tell.
func tellRefusal(ctx context.Context, flag, why string, timeout time.Duration, stderr io.Writer) {
	what := "refused to run"
	if flag == failedFlag {
		what = "could not start"
	}
	b, ok, err := collectives.BootstrapFromEnv()
	if err != nil || !ok || b.NRanks < 2 {
		return
	}
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	setting := timeoutFlag
	if timeout > refusalWait {
		timeout, setting = refusalWait, fmt.Sprintf("%s, cut to %v to tell the others", timeoutFlag, refusalWait)
	}
	// Quiet while the job meets at once (every rank of an mpirun with a
	// misspelt flag refuses alike); a wait shows in progress lines.
	b.ProgressEvery = rendezvousProgressEvery
	b.Progress = func(line string) {
		fmt.Fprintf(stderr, "mrbench: telling the other ranks that this one %s: %s\n", what, line)
	}
	c, err := collectives.New(ctx, b, collectives.Config{Transport: collectives.TransportTCP, Timeout: timeout, TimeoutSetting: setting})
	if err != nil {
		fmt.Fprintf(stderr, "mrbench: could not tell the other ranks that this one %s: %v\n", what, err)
		return
	}
	defer c.Close()
	// Every rank gets the same answer; ours is the error already printed.
	_ = agreeSettings(ctx, hostComm{c}, refusalSettings(flag, why), timeout)
}
