package collectives

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unicode"
)

// BootstrapFromEnv reads the rank layout from the environment a launcher
// left behind, in this order: our own METAROCE_RANK/METAROCE_NRANKS
// (METAROCE_LOCAL_RANK, METAROCE_LOCAL_SIZE, METAROCE_ROOT); torchrun
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT); Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE); Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and the step's own
// SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID, else SLURM_NTASKS_PER_NODE:
// slurmStepLocalSize). The local rank and size are optional. The job's identity (Bootstrap.Job)
// comes from METAROCE_JOB under any launcher, else from the launcher whose
// variables are set: torchrun's TORCHELASTIC_RUN_ID, Open MPI's
// OMPI_MCA_ess_base_jobid (else PMIX_NAMESPACE), Slurm's
// SLURM_HET_JOB_ID or SLURM_JOB_ID, with SLURM_STEP_ID. The rendezvous
// address comes from METAROCE_ROOT, else MASTER_ADDR at the port after
// MASTER_PORT, else (single-host jobs) 127.0.0.1 at DefaultRootPort, moved
// by the job's identity (RootPort). Bootstrap.Vars names the variables
// it used, and an error names the variable and value at fault: among them
// a negative local rank, a local rank outside the host's ranks
// (checkLocal), a Slurm node count (SLURM_STEP_NUM_NODES, else
// SLURM_NNODES, which tell whether the job spans hosts) that is no number
// of 1 or more (slurmNodes), a rank without a rank count or the reverse
// where both always come together (METAROCE_*, Open MPI), and a
// rendezvous address no rank could reach (see rootFrom): METAROCE_ROOT
// with port 0 or none, a MASTER_PORT outside 1..65534, and MASTER_ADDR
// without MASTER_PORT or MASTER_PORT without MASTER_ADDR. torchrun always
// sets both and PyTorch's env:// initialisation needs both, so either
// half alone is a mistake, refused rather than read as a single-host job
// (METAROCE_ROOT, when set, takes precedence and the pair is not read).
// A variable set to "" counts as unset, in every family above: a job
// script's `export RANK=$RANK` in a shell that has none, or an env file's
// `METAROCE_RANK=` that clears a value, says nothing about the layout.
// These errors come before any rank listens or dials. It reports false
// when no launcher is found.
func BootstrapFromEnv() (Bootstrap, bool, error) {
	return bootstrapFrom(os.LookupEnv)
}

// DefaultRootPort is the first rendezvous port used when a launcher gives
// none, and RootPortSpan the number of ports from it that RootPort picks
// among. All of them lie below Linux's default ephemeral range
// (32768-60999), where an outgoing connection could hold the port.
const (
	DefaultRootPort = 29517
	RootPortSpan    = 2048
)

// RootPort returns the rendezvous port of a single-host job without an
// address of its own: DefaultRootPort when the job's identity is unknown
// (""), else one of RootPortSpan ports picked by a hash of it. Two jobs
// started side by side on one host by mpirun or srun then rendezvous on
// different ports (unless their hashes meet, 1 in RootPortSpan), where on
// one port the second job's rank 0 could not listen.
func RootPort(job string) int {
	if job == "" {
		return DefaultRootPort
	}
	// FNV-1a alone spreads ids that differ in their last digit over few
	// ports (a byte's change reaches only some bits of each half): the
	// tag goes through a 64-bit finalizer (MurmurHash3's fmix64) first.
	h := jobTag(job)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return DefaultRootPort + int(h%RootPortSpan)
}

func bootstrapFrom(lookup func(string) (string, bool)) (Bootstrap, bool, error) {
	// An empty variable is an unset one (BootstrapFromEnv), here and in
	// everything that reads the environment after this: the rank, the
	// local rank and size, the node count, the rendezvous and the job.
	get := func(k string) (string, bool) {
		v, ok := lookup(k)
		return v, ok && v != ""
	}
	// paired marks the schemes whose rank and rank count are only ever
	// set together: our own variables, and Open MPI's, which mpirun sets
	// for every process it starts. One of them without the other is a
	// broken environment, refused rather than read as no launcher at all,
	// which would run every process of the intended job as a job of its
	// own. torchrun's RANK and WORLD_SIZE are names other software uses
	// too, and a Slurm batch shell has SLURM_PROCID without SLURM_NTASKS
	// unless a task count was asked for: those pairs count only when
	// whole.
	type scheme struct {
		name, rank, size, local, localSize string
		paired                             bool
	}
	schemes := []scheme{
		{"metaroce", "METAROCE_RANK", "METAROCE_NRANKS", "METAROCE_LOCAL_RANK", "METAROCE_LOCAL_SIZE", true},
		{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", false},
		{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", true},
		{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", false},
	}
	for _, s := range schemes {
		rs, ok1 := get(s.rank)
		ns, ok2 := get(s.size)
		if s.paired && ok1 != ok2 {
			have, lack, v := s.rank, s.size, rs
			if ok2 {
				have, lack, v = s.size, s.rank, ns
			}
			return Bootstrap{Source: s.name}, true, fmt.Errorf("collectives: %s=%q is set but %s is not (or is empty): a job's layout needs both (set %s too, or unset %s)",
				have, v, lack, lack, have)
		}
		if !ok1 || !ok2 {
			continue
		}
		b := Bootstrap{Source: s.name}
		var err error
		if b.Rank, err = strconv.Atoi(rs); err != nil {
			return b, true, fmt.Errorf("collectives: %s=%q is not a rank number", s.rank, rs)
		}
		if b.NRanks, err = strconv.Atoi(ns); err != nil {
			return b, true, fmt.Errorf("collectives: %s=%q is not a rank count", s.size, ns)
		}
		b.Vars = BootstrapVars{Rank: s.rank, NRanks: s.size}
		// The rank and the count first, naming the variables: the
		// checks below and Bootstrap.check would name neither.
		if b.NRanks < 1 || b.NRanks > maxRanks {
			return b, true, fmt.Errorf("collectives: %s=%q: want a rank count of 1 to %d", s.size, ns, maxRanks)
		}
		if b.Rank < 0 || b.Rank >= b.NRanks {
			return b, true, fmt.Errorf("collectives: %s=%q is outside 0..%d, the ranks of %s=%d", s.rank, rs, b.NRanks-1, s.size, b.NRanks)
		}
		if ls, ok := get(s.local); ok {
			if b.LocalRank, err = strconv.Atoi(ls); err != nil || b.LocalRank < 0 {
				return b, true, fmt.Errorf("collectives: %s=%q is not a local rank", s.local, ls)
			}
		}
		ls, haveLocalSize := get(s.localSize)
		if n, ok := slurmStepLocalSize(s.name, get); ok {
			b.LocalSize = n // the step's own layout, exact (slurmStepLocalSize)
		} else if haveLocalSize {
			if b.LocalSize, err = parseLocalSize(s.name, ls); err != nil {
				return b, true, fmt.Errorf("collectives: %s=%q is not a rank count", s.localSize, ls)
			}
		}
		if err := checkLocal(s.name, b, s.local, s.localSize, ls); err != nil {
			return b, true, err
		}
		if b.LocalSize > b.NRanks {
			b.LocalSize = b.NRanks // a count of the allocation, not the job (checkLocal)
			b.allocLocal = true
		}
		if s.name == "slurm" {
			// Checked once here; spansHosts reads the count after.
			if _, err := slurmNodes(get); err != nil {
				return b, true, err
			}
		}
		b.SpansHosts = spansHosts(s.name, b, get)
		b.Job = jobFrom(s.name, get)
		if b.Root, b.Vars.Root, err = rootFrom(s.name, b, get); err != nil {
			return b, true, err
		}
		return b, true, b.check()
	}
	return Bootstrap{}, false, nil
}

// rootFrom returns the rendezvous address of a job laid out by the
// launcher of scheme, and the variables it came from (BootstrapVars.Root):
// METAROCE_ROOT as set; else MASTER_ADDR at MASTER_PORT+1, since
// torchrun's own store listens on MASTER_PORT itself; else, for a job on
// one host, 127.0.0.1 at RootPort(b.Job), with from "". An empty variable
// counts as unset. Every address is checked here, before any rank listens
// or dials, and an error names the variable and its value as set:
//
//   - METAROCE_ROOT must be host:port with a port of 1 to 65535
//     (rootAddrError says why);
//   - MASTER_PORT must be a number of 1 to 65534, and MASTER_ADDR a host
//     name or an address without a port (an IPv6 one may keep its
//     brackets), nothing else (hostNameError);
//   - MASTER_ADDR and MASTER_PORT go together: under torchrun, or in a job
//     that spans hosts, either one alone is refused. torchrun always sets
//     both, and PyTorch's env:// initialisation refuses one without the
//     other, so a torchrun user expects no default for the missing half;
//     a job across hosts needs the address, and 127.0.0.1 would leave its
//     ranks waiting for each other until the timeout. Under Open MPI,
//     Slurm or METAROCE_* on one host, half a pair is a leftover of some
//     other setup (a shell's MASTER_PORT from a tutorial) and is not
//     read. METAROCE_ROOT takes precedence, and with it set the pair is
//     not read;
//   - a job that spans hosts (spansHosts) must give an address, and one
//     that names a host the others reach: not loopback or "localhost",
//     nor (but on rank 0, which listens there) an empty or unspecified
//     host (hereOnly).
func rootFrom(scheme string, b Bootstrap, get func(string) (string, bool)) (root, from string, err error) {
	if root, _ := get("METAROCE_ROOT"); root != "" {
		if err := rootAddrError(root); err != nil {
			return "", "", fmt.Errorf("collectives: METAROCE_ROOT=%q: %w", root, err)
		}
		if host, _, _ := net.SplitHostPort(root); hereOnly(b.Rank, host) != "" && spansHosts(scheme, b, get) {
			return "", "", fmt.Errorf("collectives: METAROCE_ROOT=%q names no host the others reach (%s): this %s job's %d ranks span several hosts, and those on other hosts would dial their own until the timeout; give an address of rank 0's host that every host reaches", root, hereOnly(b.Rank, host), scheme, b.NRanks)
		}
		return root, "METAROCE_ROOT", nil
	}
	addr, _ := get("MASTER_ADDR")
	port, _ := get("MASTER_PORT")
	const orRoot = "or set METAROCE_ROOT=host:port, which takes precedence"
	switch {
	case addr != "" && port != "":
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65534 {
			return "", "", fmt.Errorf("collectives: MASTER_PORT=%q is not a port in 1..65534 (the rendezvous listens on the port after it)", port)
		}
		host := addr
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
		if why := pastedHostError(host); why != "" {
			// Before the port check: an IPv6 address pasted with a
			// space or a prefix length has colons too.
			return "", "", fmt.Errorf("collectives: MASTER_ADDR=%q is not a host name or an address: %s (%s)", addr, why, orRoot)
		}
		if _, perr := netip.ParseAddr(host); host == "" || strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && perr != nil) {
			return "", "", fmt.Errorf("collectives: MASTER_ADDR=%q is not a host name or an address: it names rank 0's host alone, and its port goes in MASTER_PORT (%s)", addr, orRoot)
		}
		if why := hostNameError(host); why != "" {
			return "", "", fmt.Errorf("collectives: MASTER_ADDR=%q is not a host name or an address: %s (%s)", addr, why, orRoot)
		}
		if why := hereOnly(b.Rank, host); why != "" && spansHosts(scheme, b, get) {
			return "", "", fmt.Errorf("collectives: MASTER_ADDR=%q names no host the others reach (%s): this %s job's %d ranks span several hosts, and those on other hosts would dial their own until the timeout; give an address of rank 0's host that every host reaches (%s)", addr, why, scheme, b.NRanks, orRoot)
		}
		return net.JoinHostPort(host, strconv.Itoa(p+1)), "MASTER_ADDR:MASTER_PORT+1", nil
	case (addr != "" || port != "") && (scheme == "torchrun" || spansHosts(scheme, b, get)):
		why := "torchrun sets both"
		if scheme != "torchrun" {
			why = fmt.Sprintf("this %s job spans hosts, so its rendezvous needs both", scheme)
		}
		if addr != "" {
			return "", "", fmt.Errorf("collectives: MASTER_ADDR=%q is set but MASTER_PORT is not (or is empty): %s, and the rendezvous listens on the port after MASTER_PORT (set MASTER_PORT too, unset MASTER_ADDR, %s)", addr, why, orRoot)
		}
		return "", "", fmt.Errorf("collectives: MASTER_PORT=%q is set but MASTER_ADDR is not (or is empty): %s, and rank 0's host is not guessed (set MASTER_ADDR too, 127.0.0.1 for a job on this host alone, unset MASTER_PORT, %s)", port, why, orRoot)
	case addr == "" && port == "" && spansHosts(scheme, b, get):
		// 127.0.0.1 would give every host a rendezvous of its own, and
		// every rank would wait for ranks that never come, until the
		// timeout.
		return "", "", fmt.Errorf("collectives: bootstrap (%s): the job's %d ranks span several hosts and no rendezvous address is set: set METAROCE_ROOT=host:port to an address of rank 0's host that every host reaches (or MASTER_ADDR and MASTER_PORT)", scheme, b.NRanks)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(RootPort(b.Job))), "", nil
}

// rootAddrError says why root cannot be a rendezvous address, or returns
// nil when it can. An address is host:port (an IPv6 host in brackets)
// with a decimal port of 1 to 65535, and a host that is empty, an address
// or a host name (hostNameError); the host is not looked up here. Port
// 0 would have rank 0 listen on a port the kernel picks, which no other
// rank learns, so they would all dial port 0 until the timeout; a missing
// port or a service name ("host:rdzv", which every host would have to
// resolve alike) is refused as well, before anyone listens or dials.
func rootAddrError(root string) error {
	_, port, err := net.SplitHostPort(root)
	switch {
	case err != nil:
		return fmt.Errorf("want host:port, an IPv6 host in brackets ([fd00::1]:%d): %w", DefaultRootPort, err)
	case port == "":
		return fmt.Errorf("no port after the host: want host:port with a port of 1 to 65535")
	}
	if strings.Trim(port, "0123456789") != "" {
		return fmt.Errorf("port %q is not a number of 1 to 65535", port)
	}
	p, err := strconv.Atoi(port)
	switch {
	case err != nil || p > 65535:
		return fmt.Errorf("port %s is outside 1 to 65535", port)
	case p == 0:
		return fmt.Errorf("port 0 is no rendezvous port: rank 0 would listen on a port the kernel picks, which the other ranks cannot know; want a port of 1 to 65535")
	}
	if host, _, _ := net.SplitHostPort(root); host != "" {
		if why := hostNameError(host); why != "" {
			return fmt.Errorf("host %q is not a host name or an address: %s", host, why)
		}
	}
	return nil
}

// hostNameError says why host, a rendezvous host without brackets, is
// neither an IP address nor a host name, or returns "" when it may be
// one. A host name has letters, digits, dots, hyphens and underscores
// only, as Go's resolver takes them. Anything else is never found: rank
// 0 fails to listen at once, but every other rank would retry "no such
// host" until the timeout. The usual cause is a value pasted from a
// command's output: `hostname -I` ends its addresses with a space, and
// `ip addr` gives an address with its prefix length (10.0.0.1/24).
func hostNameError(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if why := pastedHostError(host); why != "" {
		return why
	}
	for _, c := range host {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '_':
		default:
			return fmt.Sprintf("%q has no place in a host name, which has letters, digits, '.', '-' and '_' only (an address goes without its prefix length: 10.0.0.1, not 10.0.0.1/24)", c)
		}
	}
	return ""
}

// pastedHostError says why host is a value pasted from a command's
// output rather than one host, or returns "": it contains whitespace
// anywhere, or is an address with its prefix length. Both are looked for
// before anything else, so that an IPv6 address pasted so is told as such
// and not by the first colon it has.
func pastedHostError(host string) string {
	if strings.IndexFunc(host, unicode.IsSpace) >= 0 {
		return "it contains whitespace (`hostname -I` ends its addresses with a space and separates several by spaces): give one address or name, without spaces"
	}
	if a, _, ok := strings.Cut(host, "/"); ok {
		if _, err := netip.ParseAddr(a); err == nil {
			return fmt.Sprintf("an address goes without its prefix length: %s, not %s", a, host)
		}
	}
	return ""
}

// hereOnly says why rank's rendezvous host reaches, wherever it is
// dialled, the dialler's own host alone, or returns "" when it does not:
// an empty host (":port"), an unspecified address (0.0.0.0, ::), a
// loopback address or "localhost". Fine on one host; in a job across
// hosts the ranks elsewhere would reach no rendezvous. Rank 0 only
// listens there, and an empty or unspecified host makes it listen on
// every interface, which the others reach by a name of their own.
func hereOnly(rank int, host string) string {
	a, err := netip.ParseAddr(host)
	wildcard := host == "" || err == nil && a.Unmap().IsUnspecified()
	switch {
	case wildcard && rank == 0:
		return ""
	case host == "":
		return "no host before the port"
	case wildcard:
		return host + " is unspecified"
	case strings.EqualFold(host, "localhost") || err == nil && a.Unmap().IsLoopback():
		return host + " is loopback"
	}
	return ""
}

// checkLocal refuses a local rank outside the host's ranks: torchrun, Open
// MPI and our own variables are set for each process by its launcher, so
// that contradiction is a broken environment, whose CPU share (CPUShare)
// would be wrong. A local size above the job's rank count is not refused
// but read as the job's (bootstrapFrom): Slurm's SLURM_NTASKS_PER_NODE may
// describe the allocation rather than the step (srun -n 2 inside an
// allocation of 4 tasks per node), and job scripts copy it into
// LOCAL_WORLD_SIZE or METAROCE_LOCAL_SIZE. Slurm's own local rank is not
// checked against that count for the same reason. Without a local size,
// the host's ranks are at most the job's, and a local rank beyond those
// is refused all the same.
func checkLocal(scheme string, b Bootstrap, localVar, sizeVar, sizeVal string) error {
	if scheme == "slurm" {
		return nil
	}
	if b.LocalSize == 0 && b.LocalRank >= b.NRanks {
		return fmt.Errorf("collectives: %s=%d is outside 0..%d, the ranks of the job (%s=%d); %s is not set", localVar, b.LocalRank, b.NRanks-1, b.Vars.NRanks, b.NRanks, sizeVar)
	}
	if n := min(b.LocalSize, b.NRanks); n > 0 && b.LocalRank >= n {
		return fmt.Errorf("collectives: %s=%d is outside 0..%d, the ranks on this host (%s=%q, %s=%d)", localVar, b.LocalRank, n-1, sizeVar, sizeVal, b.Vars.NRanks, b.NRanks)
	}
	return nil
}

// parseLocalSize reads a launcher's ranks-on-this-host count. Slurm writes
// SLURM_NTASKS_PER_NODE as "4", as "4(x2)" (4 on each of 2 nodes) or,
// when the nodes differ, as a list: "4,2", "4(x2),2". Only a single count
// applies to every node, so a list reads as unknown (0) rather than
// failing the job; the list is told apart first, since its first item may
// be a repeated count whose node is not this one.
func parseLocalSize(scheme, s string) (int, error) {
	if scheme == "slurm" {
		if strings.Contains(s, ",") {
			return 0, nil
		}
		if i := strings.IndexByte(s, '('); i > 0 {
			s = s[:i]
		}
	}
	n, err := strconv.Atoi(s)
	if err == nil && n < 1 {
		err = fmt.Errorf("%d ranks", n)
	}
	return n, err
}

// slurmStepLocalSize returns the tasks of this Slurm job step on this node,
// from the step's own layout, which srun gives each task:
// SLURM_STEP_TASKS_PER_NODE lists the step's tasks per node, in node
// order, as "4", "4(x2)" (4 on each of 2 nodes) or a list of those
// ("4(x2),2"), and SLURM_NODEID is this node's index among them. srun(1),
// OUTPUT ENVIRONMENT VARIABLES (https://slurm.schedmd.com/srun.html), has
// SLURM_NODEID as "the relative node ID of the current node" and
// SLURM_STEP_TASKS_PER_NODE as the "number of processes per node within
// the step". Relative to the step, not to the allocation: slurmstepd sets
// it to this node's index in the node list of the step it launches, the
// index by which it also takes this node's task count from the step's,
// so that srun -N2 -r2 in an allocation of 4 nodes numbers its nodes 0
// and 1. SLURM_NTASKS_PER_NODE is the count asked for, which an srun
// inside the allocation inherits even where its own tasks sit otherwise:
// srun -n 4 in an allocation of 4 nodes with --ntasks-per-node=4 places
// one task per node, but reads as 4 on this host. ok is false outside
// Slurm, where either variable is missing, and where they do not parse or
// this node is beyond the list: then the requested count is read as
// before (parseLocalSize).
func slurmStepLocalSize(scheme string, get func(string) (string, bool)) (n int, ok bool) {
	if scheme != "slurm" {
		return 0, false
	}
	list, ok1 := get("SLURM_STEP_TASKS_PER_NODE")
	id, ok2 := get("SLURM_NODEID")
	node, err := strconv.Atoi(id)
	if !ok1 || !ok2 || err != nil || node < 0 {
		return 0, false
	}
	for _, item := range strings.Split(list, ",") {
		count, times := item, "1"
		if i := strings.IndexByte(item, '('); i > 0 {
			rep, ok := strings.CutPrefix(item[i:], "(x")
			if !ok || !strings.HasSuffix(rep, ")") {
				return 0, false
			}
			count, times = item[:i], strings.TrimSuffix(rep, ")")
		}
		c, err1 := strconv.Atoi(count)
		m, err2 := strconv.Atoi(times)
		if err1 != nil || err2 != nil || c < 1 || m < 1 {
			return 0, false
		}
		if node < m {
			return c, true
		}
		node -= m
	}
	return 0, false
}

// spansHosts reports whether the launcher says the job runs on more than
// one host: fewer ranks on this host than in the job, or (Slurm) more than
// one node in the step.
func spansHosts(scheme string, b Bootstrap, get func(string) (string, bool)) bool {
	if b.LocalSize > 0 && b.LocalSize < b.NRanks {
		return true
	}
	if scheme == "slurm" {
		n, _ := slurmNodes(get) // refused by bootstrapFrom when not a count
		return n > 1
	}
	return false
}

// slurmNodes returns the node count of a Slurm job step: its own
// (SLURM_STEP_NUM_NODES, which srun sets) when set, else the job's
// (SLURM_NNODES, set in a batch or salloc shell too), else 0 (unknown).
// Slurm writes either as a number of 1 or more; anything else is refused,
// naming the variable, where it used to read as one node: a job across
// hosts would then rendezvous on 127.0.0.1, and each host's ranks wait
// for the others until the timeout.
func slurmNodes(get func(string) (string, bool)) (int, error) {
	for _, k := range []string{"SLURM_STEP_NUM_NODES", "SLURM_NNODES"} {
		v, ok := get(k)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("collectives: %s=%q is not a node count: Slurm sets it to the number of nodes, 1 or more, which says whether the job spans hosts (set it to that number, or unset it for a job on one host)", k, v)
		}
		return n, nil
	}
	return 0, nil
}

// jobFrom returns the job's identity: METAROCE_JOB when set, else what
// the launcher of scheme gives its job, "" when it gives none. torchrun's
// default run id, "none", is no identity. Every process of one job sees
// the same values: a Slurm step's tasks share SLURM_JOB_ID and
// SLURM_STEP_ID (and a heterogeneous job's components SLURM_HET_JOB_ID),
// an mpirun job's processes its job id, a torchrun job's its --rdzv-id.
func jobFrom(scheme string, get func(string) (string, bool)) string {
	v := func(k string) string { s, _ := get(k); return s }
	if id := v("METAROCE_JOB"); id != "" {
		return id
	}
	switch scheme {
	case "torchrun":
		if id := v("TORCHELASTIC_RUN_ID"); id != "none" {
			return id
		}
	case "openmpi":
		if id := v("OMPI_MCA_ess_base_jobid"); id != "" {
			return id
		}
		return v("PMIX_NAMESPACE")
	case "slurm":
		id := v("SLURM_HET_JOB_ID")
		if id == "" {
			id = v("SLURM_JOB_ID")
		}
		if id != "" {
			if step := v("SLURM_STEP_ID"); step != "" {
				return id + "." + step
			}
			return id
		}
	}
	return ""
}

// CPUShare says how a process running one rank of b should use a host of
// ncpu CPUs that it shares with the other b.LocalSize ranks of the job:
// procs is the GOMAXPROCS that gives each rank an equal share (at least 1),
// and spin is false when the ranks outnumber the CPUs. With one process per
// rank and no launcher-reported local size (0) or a single local rank, it
// returns ncpu and true: the rank has the host to itself.
//
// The reason: every process's Go runtime assumes the whole host. Four
// processes with GOMAXPROCS 2 on 2 CPUs run eight Ps whose idle threads,
// and the MetaRoCE event loops that poll a while after each turn
// (udp.Config.Spin), take the CPU that the rank with work needs, and the
// kernel cannot tell them apart as the Go scheduler does within one
// process. Measured with `mpirun --oversubscribe -np 4 mrbench` on 2 CPUs:
// GOMAXPROCS 1 per rank moved the 1 MiB all-reduce from 0.57-0.62 to
// 0.80-0.82 GB/s and the 16 MiB one from 1.01-1.04 to 1.19-1.21; no
// spinning on top, to 0.87-0.90 and 1.23-1.25.
func (b Bootstrap) CPUShare(ncpu int) (procs int, spin bool) {
	if b.LocalSize <= 1 || ncpu < 1 {
		return max(ncpu, 1), true
	}
	return max(ncpu/b.LocalSize, 1), b.LocalSize <= ncpu
}
