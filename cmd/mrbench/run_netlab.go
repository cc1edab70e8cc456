package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/netlab"
)

// netlabLinks is the number of parallel spine links of the --netlab fabric:
// enough for MetaRoCE's default four paths per plane to find distinct links
// when the switches' hash spreads them.
const netlabLinks = 4

// netlabRanks is the number of ranks of a --netlab run: one per lab host.
const netlabRanks = 2

// errNetlabUsage marks --netlab requests that can never run as given (wrong
// rank count, under a launcher, with the rccl backend, without root or
// nftables): exit code 2.
var errNetlabUsage = errors.New("--netlab")

// newNetlabLauncher builds a one-plane namespace fabric (two hosts, two
// switches, netlabLinks spine links) and returns a launcher that runs rank 0
// in host 1 and rank 1 in host 2. The caller closes l.lab. Without root or
// nftables it returns netlab's explanation.
func newNetlabLauncher(o *options) (*hostLauncher, error) {
	switch {
	case o.Backend != backendHost:
		return nil, fmt.Errorf("%w: runs the host backend only, not --backend %s", errNetlabUsage, o.Backend)
	case o.set["np"] && o.Ranks != netlabRanks:
		return nil, fmt.Errorf("%w: runs %d ranks, one per lab host; -np %d is not possible", errNetlabUsage, netlabRanks, o.Ranks)
	}
	if _, ok, err := collectives.BootstrapFromEnv(); ok || err != nil {
		return nil, fmt.Errorf("%w: runs its own two ranks in this process; start it without mpirun, torchrun or srun", errNetlabUsage)
	}
	if err := netlab.Available(); err != nil {
		// Missing root or tools is the user's to fix, found before
		// anything runs: a usage error too.
		return nil, fmt.Errorf("%w builds a namespace fabric: %w", errNetlabUsage, err)
	}
	lab, err := netlab.New(netlab.Config{Planes: 1, Links: netlabLinks})
	if err != nil {
		return nil, fmt.Errorf("--netlab: %w", err)
	}
	o.Ranks = netlabRanks
	return &hostLauncher{o: o, lab: lab}, nil
}

// launchNetlab runs rank r in lab host r+1. Everything that opens a socket
// (the rendezvous, the MetaRoCE endpoint, the TCP baseline's listener and
// dials) happens inside collectives.New, which runs on a thread in the
// host's namespace; the sockets keep that namespace when the sweep then
// drives them from other threads.
func (l *hostLauncher) launchNetlab(ctx context.Context, transport string, cfg collectives.Config, fn func(r rankEnv) error) error {
	hosts := make([]collectives.RankHost, netlabRanks)
	for r := range hosts {
		host := r + 1
		hosts[r] = collectives.RankHost{Addr: l.lab.Host(host).Addr(0),
			Run: func(f func() error) error { return l.lab.Run(host, f) }}
	}
	return collectives.LaunchOn(ctx, hosts, cfg, func(c *collectives.Comm, h collectives.RankHost) error {
		return fn(hostEnv(c, transport, cfg, h.Run))
	})
}
