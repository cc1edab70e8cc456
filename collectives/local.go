package collectives

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/metaroce/metaroce/transport"
)

// LaunchLocal runs fn on n in-process ranks, each with its own endpoint on
// loopback (or cfg.UDP.Addrs), joined through a rendezvous on a free local
// port. It returns the error of the rank that failed first (see
// firstCause); a rank that fails makes the others fail within cfg.Timeout
// rather than hang.
func LaunchLocal(ctx context.Context, n int, cfg Config, fn func(c *Comm) error) error {
	if n < 1 {
		return fmt.Errorf("collectives: %d local ranks, want at least 1", n)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("collectives: opening the rendezvous listener on loopback: %w", err)
	}
	// Rank 0's rendezvous takes ln over and closes it; this Close is for
	// a rank 0 that failed before it got there.
	defer ln.Close()
	root := ln.Addr().String()
	err = launchRanks(ctx, n, func(ctx context.Context, r int) (*Comm, error) {
		b := Bootstrap{Rank: r, NRanks: n, LocalSize: n, Root: root, Source: sourceLocal}
		if r == 0 {
			b.listener = ln
		}
		return New(ctx, b, cfg)
	}, func(c *Comm, _ int) error { return fn(c) })
	return starved(err, n, runtime.NumCPU())
}

// launchRanks runs n ranks at once: open sets rank r's communicator up
// (under a context that ends when any rank fails), body runs on it, and
// the communicator is closed. It returns the error of the rank that
// failed first (firstCause), or nil.
func launchRanks(ctx context.Context, n int, open func(ctx context.Context, r int) (*Comm, error), body func(c *Comm, r int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	var cause firstCause
	for r := 0; r < n; r++ {
		g.Go(func() error {
			c, err := open(gctx, r)
			if err != nil {
				return cause.note(err)
			}
			defer c.Close()
			return cause.note(body(c, r))
		})
	}
	return cause.or(g.Wait())
}

// firstCause keeps the first error a rank's own function returned, noted
// before the rank closes its communicator. The first error to reach the
// errgroup is often another's: the failed rank's Close tells its peers
// that it left, and a MetaRoCE close waits for their answers, so a peer
// blocked in a call with it may return "rank 1 closed its connections"
// before rank 1's own error gets there, and the cause would be lost.
type firstCause struct {
	mu  sync.Mutex
	err error
}

// note records err if it is the first, and returns it.
func (f *firstCause) note(err error) error {
	if err != nil {
		f.mu.Lock()
		if f.err == nil {
			f.err = err
		}
		f.mu.Unlock()
	}
	return err
}

// or returns the first error noted, or err when none was.
func (f *firstCause) or(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	return err
}

// starved adds to err, the error of n in-process ranks on cpus CPUs, that
// a rank which stopped answering was starved of CPU (or skipped the call),
// when the ranks outnumber the CPUs and err is a dead peer or a missed
// deadline: every rank is a goroutine here, none died, and the errors' "a
// peer may have died" would send the user looking for one.
//
// A rendezvous error that already advises a longer deadline for in-process
// ranks (deadlineHint) is left as it is.
func starved(err error, n, cpus int) error {
	if err == nil || n <= cpus || !(errors.Is(err, transport.ErrPeerDead) || errors.Is(err, context.DeadlineExceeded)) || errors.As(err, new(*deadlineHint)) {
		return err
	}
	return fmt.Errorf("%w (all %d ranks run in this process, on %d CPUs: none died; a rank that stopped answering was starved of CPU, or did not make the call; run fewer ranks or give them a longer timeout)", err, n, cpus)
}

// sourceLocal is Bootstrap.Source of LaunchLocal's ranks, and
// sourceHosts LaunchOn's.
const (
	sourceLocal = "local"
	sourceHosts = "hosts"
)

// RankHost places one rank of LaunchOn: the address its endpoint uses and a
// function that runs code inside the rank's network namespace (for ranks
// spread over the hosts of a netlab fabric; nil runs in the caller's).
type RankHost struct {
	Addr netip.Addr
	Run  func(func() error) error
}

func (h RankHost) run(f func() error) error {
	if h.Run == nil {
		return f()
	}
	return h.Run(f)
}

// LaunchOn runs fn on len(hosts) in-process ranks, rank r with address
// hosts[r].Addr inside hosts[r]'s namespace, joined through a rendezvous on
// hosts[0]. Each communicator is created inside its namespace, so every
// socket it opens lives there and keeps it when other goroutines drive it.
// Like LaunchLocal it returns the error of the rank that failed first.
func LaunchOn(ctx context.Context, hosts []RankHost, cfg Config, fn func(c *Comm, h RankHost) error) error {
	n := len(hosts)
	if n < 1 {
		return fmt.Errorf("collectives: no hosts to launch ranks on")
	}
	// The listener is opened inside hosts[0]'s namespace, where it stays
	// when rank 0's rendezvous takes it over (and closes it).
	var ln net.Listener
	err := hosts[0].run(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(hosts[0].Addr, 0).String())
		return err
	})
	if err != nil {
		return fmt.Errorf("collectives: opening the rendezvous listener on %v: %w", hosts[0].Addr, err)
	}
	defer ln.Close()
	root := ln.Addr().String()
	return launchRanks(ctx, n, func(ctx context.Context, r int) (*Comm, error) {
		rc := cfg
		rc.UDP.Addrs = []netip.Addr{hosts[r].Addr}
		b := Bootstrap{Rank: r, NRanks: n, Root: root, Source: sourceHosts}
		if r == 0 {
			b.listener = ln
		}
		var c *Comm
		err := hosts[r].run(func() error {
			var err error
			c, err = New(ctx, b, rc)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("rank %d on %v: %w", r, hosts[r].Addr, err)
		}
		return c, nil
	}, func(c *Comm, r int) error { return fn(c, hosts[r]) })
}
