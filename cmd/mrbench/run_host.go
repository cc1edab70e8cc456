package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/netlab"
)

// This file is the host backend's one contact with package collectives: the
// launcher (in-process ranks or a launched job's rank) and the adapter from
// collectives.Comm to the sweep's comm.

// hostLauncher runs tables over collectives.Comm.
type hostLauncher struct {
	o *options
	// boot is this process's rank of a launched job; nil launches o.Ranks
	// ranks in this process.
	boot *collectives.Bootstrap
	// lab, when set, is the namespace fabric the two local ranks run on
	// (--netlab): rank r lives in host r+1.
	lab *netlab.Lab
	// noSpin turns the MetaRoCE event loops' polling off (the job's ranks
	// on this host outnumber its CPUs); share says what applyCPUShare did,
	// for the header ("" when nothing).
	noSpin bool
	share  string
	// agreed records that the launched job's ranks compared their
	// settings (agreeSettings), which they do before the first table.
	agreed bool
}

// newHostLauncher joins the job of mpirun, torchrun or srun when their
// environment is present, and otherwise prepares local ranks.
func newHostLauncher(o *options) (*hostLauncher, error) {
	b, ok, err := collectives.BootstrapFromEnv()
	if err != nil {
		return nil, configError{fmt.Errorf("launcher environment: %w", err)}
	}
	l := &hostLauncher{o: o}
	if ok {
		l.boot = &b
		if host := collectives.HostCPUs(); runtime.NumCPU() >= host {
			// Not pinned to a subset by the launcher (mpirun binds
			// each rank to its own core unless oversubscribed).
			l.applyCPUShare(host, os.Getenv("GOMAXPROCS") != "")
		}
	}
	return l, nil
}

// applyCPUShare fits this rank's process to its share of a host of ncpu
// CPUs that the launcher says it shares with other ranks (see
// collectives.Bootstrap.CPUShare for why and what it gains): it lowers
// GOMAXPROCS, unless the user set it (userProcs), and turns spinning off
// when the ranks outnumber the CPUs.
func (l *hostLauncher) applyCPUShare(ncpu int, userProcs bool) {
	procs, spin := l.boot.CPUShare(ncpu)
	var notes []string
	if !userProcs && procs < runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(procs)
		notes = append(notes, fmt.Sprintf("GOMAXPROCS %d", procs))
	}
	hint := ""
	if !spin {
		l.noSpin = true
		notes = append(notes, "no event-loop spinning")
		if ncpu > 1 {
			// Pinned, they spin and yield the CPU instead
			// (collectives' fitSpin), which measured faster
			// (docs/results.md); on one CPU, pinned or not, they
			// share it alike.
			hint = " (ranks pinned to cores run faster" + pinHint(l.boot.Source) + ")"
		}
	}
	if len(notes) > 0 {
		cpus := fmt.Sprintf("%d CPUs", ncpu)
		if ncpu == 1 {
			cpus = "1 CPU"
		}
		l.share = fmt.Sprintf("; %d ranks on this host share %s: %s per rank%s", l.boot.LocalSize, cpus, strings.Join(notes, ", "), hint)
	}
}

// pinHint names the launcher's way to pin each rank to a core, for the
// launcher whose Bootstrap.Source is source ("" when it has none to name).
func pinHint(source string) string {
	switch source {
	case "openmpi":
		return ": mpirun --bind-to core:overload-allowed"
	case "slurm":
		return ": srun --cpu-bind=cores"
	}
	return ""
}

func (l *hostLauncher) source() string {
	if l.lab != nil {
		return launcherNetlab
	}
	if l.boot != nil {
		return l.boot.Source
	}
	return launcherLocal
}

// The launchers whose ranks are goroutines of this process.
const (
	launcherLocal  = "local"
	launcherNetlab = "netlab"
)

// config is the collectives configuration of one table. --loss, --seed and
// --paths set the MetaRoCE datapath only, and only its table's.
func (l *hostLauncher) config(transport string) collectives.Config {
	cfg := collectives.Config{Transport: transport, Channels: l.o.Channels, ChunkBytes: l.o.ChunkBytes,
		AllToAllInFlight: l.o.AllToAllInFlight, GroupSize: l.o.GroupSize, Timeout: l.o.Timeout,
		TimeoutSetting: timeoutFlag}
	if transport == transportMetaRoCE {
		// 0 leaves the choice to the library (collectives.Config.UDP).
		cfg.UDP.Core.PathsPerPlane = l.o.PathsPerPlane
	}
	if transport == transportMetaRoCE && l.o.Loss > 0 {
		cfg.UDP.DropProb = l.o.Loss
		cfg.UDP.Seed = l.o.Seed
	}
	if l.noSpin {
		cfg.UDP.Spin, cfg.UDP.WaitSpin = -1, -1
	}
	return cfg
}

func (l *hostLauncher) launch(ctx context.Context, transport string, fn func(r rankEnv) error) error {
	if l.lab == nil && l.boot != nil && !l.agreed {
		// Before the configuration: agree may take rank 0's seed.
		if err := l.agree(ctx); err != nil {
			return err
		}
		l.agreed = true
	}
	cfg := l.config(transport)
	if l.lab != nil {
		return l.launchNetlab(ctx, transport, cfg, fn)
	}
	if l.boot == nil {
		return collectives.LaunchLocal(ctx, l.o.Ranks, cfg, func(c *collectives.Comm) error {
			return fn(hostEnv(c, transport, cfg, nil))
		})
	}
	c, err := collectives.New(ctx, *l.boot, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	env := hostEnv(c, transport, cfg, nil)
	env.describe += l.share
	return fn(env)
}

// agree compares the launched job's settings on a communicator of its own
// (agreedComm), closed before the table's is set up. Where --seed 0 drew
// a seed in every process, every rank then takes rank 0's, the one rank
// 0's header and report give, so that --seed with it repeats the run.
func (l *hostLauncher) agree(ctx context.Context) error {
	c, err := agreedComm(ctx, *l.boot, l.o)
	if err != nil {
		return err
	}
	defer c.Close()
	// Every rank joins the gather, whatever its --seed (which may differ
	// between ranks): a rank that skipped it would leave the others
	// waiting in it.
	seeds, err := allGatherBytes(ctx, hostComm{c}, binary.LittleEndian.AppendUint64(nil, l.o.Seed), l.o.Timeout)
	if err != nil {
		return fmt.Errorf("rank %d: taking rank 0's seed: %w", c.Rank(), err)
	}
	if l.o.SeedDrawn {
		l.o.Seed = binary.LittleEndian.Uint64(seeds)
	}
	return nil
}

// hostEnv wraps one rank's communicator for the sweep. inNS, when set, runs
// a function inside the rank's network namespace (--netlab), where the
// datapath probe must look at interfaces.
func hostEnv(c *collectives.Comm, transport string, cfg collectives.Config, inNS func(func() error) error) rankEnv {
	if inNS == nil {
		inNS = func(f func() error) error { return f() }
	}
	datapath := func() string {
		var d datapathInfo
		err := inNS(func() error {
			d = probeDatapath(c.LinkInfo(), c.PeerStats())
			return nil
		})
		if err != nil {
			return err.Error()
		}
		return d.String()
	}
	return rankEnv{comm: hostComm{c}, describe: c.Describe(), datapath: datapath,
		pathsPerPlane: c.LinkInfo().PathsPerPlane, // 0 for TCP
		stats:         func() []PeerSummary { return peerSummaries(c) }}
}

// hostComm adapts collectives.Comm to the sweep.
type hostComm struct{ c *collectives.Comm }

func (h hostComm) Rank() int { return h.c.Rank() }
func (h hostComm) Size() int { return h.c.Size() }

func (h hostComm) Barrier(ctx context.Context) error { return h.c.Barrier(ctx) }

func (h hostComm) Collective(ctx context.Context, k call, send, recv []byte) error {
	return h.c.Run(ctx, sched.Config{Collective: k.Coll, Count: k.Count, DType: k.DType, Op: k.Op, Root: k.Root, InPlace: k.InPlace}, send, recv)
}

// peerSummaries converts the communicator's per-peer counters.
func peerSummaries(c *collectives.Comm) []PeerSummary {
	var out []PeerSummary
	for _, p := range c.PeerStats() {
		s := PeerSummary{Rank: c.Rank(), Peer: p.Rank,
			PacketsSent: p.Conn.PacketsSent, PacketsRecv: p.Conn.PacketsRecv,
			Retransmits: p.Conn.Retransmits, Lost: p.Conn.Lost, Timeouts: p.Conn.Timeouts, SpuriousTO: p.Conn.SpuriousTimeouts, TailProbes: p.Conn.TailProbes,
			ECNMarks: p.Conn.ECNMarks, PathChanges: p.Conn.PathChanges, AcksSent: p.Conn.AcksSent, RTTUs: float64(p.Conn.RTT) / 1e3}
		for _, q := range p.Paths {
			s.Paths = append(s.Paths, PathSummary{Plane: int(q.Plane), Entropy: int(q.Entropy), Active: q.Active,
				Packets: q.PacketsSent, Lost: q.Lost, ECNMarks: q.ECNMarks, PathChanges: q.PathChanges,
				RTTUs: float64(q.RTT) / 1e3})
		}
		out = append(out, s)
	}
	return out
}
