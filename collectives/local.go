package collectives

import (
	"context"
	"fmt"
	"net"

	"golang.org/x/sync/errgroup"
)

// LaunchLocal runs fn on n in-process ranks, each with its own endpoint on
// loopback (or cfg.UDP.Addrs), joined through a rendezvous on a free local
// port. It returns the first error of any rank; a rank that fails makes the
// others fail within cfg.Timeout rather than hang.
func LaunchLocal(ctx context.Context, n int, cfg Config, fn func(c *Comm) error) error {
	if n < 1 {
		return fmt.Errorf("collectives: %d local ranks, want at least 1", n)
	}
	root, err := freeLocalAddr()
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for r := 0; r < n; r++ {
		g.Go(func() error {
			b := Bootstrap{Rank: r, NRanks: n, Root: root, Source: "local"}
			c, err := New(gctx, b, cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			return fn(c)
		})
	}
	return g.Wait()
}

// freeLocalAddr returns a loopback TCP address that was free a moment ago.
func freeLocalAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("collectives: finding a free port for the rendezvous: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
