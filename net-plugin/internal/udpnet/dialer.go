package udpnet

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// maxAttempts bounds how often a connect starts over on a fresh connection
// when the shared one ends under it (its peer closed it at that moment).
const maxAttempts = 3

// dialer runs one connect in a goroutine: acquire the shared connection,
// announce the flow, wait for the listener's answer. Step only polls.
type dialer struct {
	d      *device
	h      listenHandle
	cancel context.CancelFunc
	done   chan struct{} // closed when run has finished

	sc  *sendConn // result; valid after done
	err error

	// mu guards taken and aborted: Step runs on NCCL's thread that
	// connects (core.Connect, outside the plugin's locks) while Abort may
	// run at the same time on the thread that finalizes the last context,
	// and exactly one of them may own the result.
	mu      sync.Mutex
	taken   bool // Step or Abort consumed the result
	aborted bool // Abort consumed it
}

func (d *device) dial(h listenHandle) *dialer {
	ctx, cancel := context.WithTimeout(context.Background(), d.b.cfg.Timeout)
	dl := &dialer{d: d, h: h, cancel: cancel, done: make(chan struct{})}
	go dl.run(ctx)
	return dl
}

func (dl *dialer) run(ctx context.Context) {
	defer close(dl.done)
	d := dl.d
	for attempt := 1; ; attempt++ {
		p, err := d.acquire(ctx, dl.h.Addrs)
		if err != nil {
			dl.err = dialErr(dl.h, ctx, err)
			return
		}
		retry, err := d.announce(ctx, p, dl.h)
		if err == nil {
			dl.sc = newSendConn(p, dl.h.Flow)
			return
		}
		d.release(p, 0)
		if !retry || attempt == maxAttempts || ctx.Err() != nil {
			dl.err = dialErr(dl.h, ctx, err)
			return
		}
	}
}

// dialErr adds the peer and a hint to a failed connect.
func dialErr(h listenHandle, ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("udpnet: connecting to peer %s (flow %d): no answer within METAROCE_TIMEOUT_MS (%v); is the peer alive and reachable on every plane, and below its METAROCE_MAX_PEERS connections? Do both sides set the same METAROCE_SECRET, or neither? (a peer drops what it cannot authenticate without answering)", peerKey(h.Addrs), h.Flow, err)
	}
	var be bool
	for _, c := range []error{backend.ErrInvalidUsage, backend.ErrRemote, backend.ErrClosed, backend.ErrInternal} {
		be = be || errors.Is(err, c)
	}
	if be {
		return err
	}
	return fmt.Errorf("udpnet: connecting to peer %s (flow %d): %w; is the peer alive and reachable on every plane?", peerKey(h.Addrs), h.Flow, err)
}

// announce asks the listener behind p to accept flow h.Flow and waits for
// its answer. retry reports that the connection ended meanwhile, so a
// fresh one may succeed.
func (d *device) announce(ctx context.Context, p *peer, h listenHandle) (retry bool, err error) {
	key := waitKey{p, h.Flow}
	ch := make(chan ctrlMsg, 1)
	d.mu.Lock()
	switch {
	case p.dead:
		d.mu.Unlock()
		return true, fmt.Errorf("udpnet: connection to peer %s closed: %w", p.name, backend.ErrRemote)
	case p.flows[h.Flow] || d.waiters[key] != nil:
		d.mu.Unlock()
		return false, fmt.Errorf("udpnet: this process already connected to flow %d of peer %s: each listen handle takes one connect: %w", h.Flow, p.name, backend.ErrInvalidUsage)
	}
	d.waiters[key] = ch
	// An earlier connect to this flow that gave up is superseded: its
	// answer, if still to come, goes to this one, as the listener
	// accepts each connection once.
	p.forgetAbandonedLocked(h.Flow)
	hook := d.awaitingAnswer
	d.mu.Unlock()
	forget := func() {
		d.mu.Lock()
		if d.waiters[key] == ch {
			delete(d.waiters, key)
		}
		d.mu.Unlock()
	}
	if err := p.sendCtrl(ctrlMsg{Kind: ctrlAnnounce, Flow: h.Flow, Nonce: h.Nonce}); err != nil {
		forget()
		return true, err
	}
	if hook != nil {
		hook()
	}
	select {
	case m, ok := <-ch:
		return d.answer(p, h, m, ok)
	case <-ctx.Done():
		// An answer handed over before the waiter is taken away here is
		// in ch already (answered fills it under d.mu): the listener
		// holds a comm for an accept, so the connect completes, as it
		// would have had the answer been seen first. A waiter still
		// there has had no answer: it goes, and the announcement is
		// recorded as abandoned, in the same step, so that answered
		// withdraws the accept that comes later, and only that one.
		d.mu.Lock()
		if d.waiters[key] == ch {
			delete(d.waiters, key)
			p.abandonLocked(h.Flow, h.Nonce)
		}
		d.mu.Unlock()
		select {
		case m, ok := <-ch:
			if ok {
				return d.answer(p, h, m, ok)
			}
		default:
		}
		return false, ctx.Err()
	}
}

// answer interprets the listener's answer m to the announcement of h's
// flow on p; ok false means that the connection ended first.
func (d *device) answer(p *peer, h listenHandle, m ctrlMsg, ok bool) (retry bool, err error) {
	if !ok {
		return true, fmt.Errorf("udpnet: connection to peer %s ended while connecting flow %d: %w", p.name, h.Flow, backend.ErrRemote)
	}
	if m.Kind != ctrlAccept || m.Nonce != h.Nonce {
		return false, fmt.Errorf("udpnet: peer %s refused flow %d: it has no such listener (listen handle stale, already used, or from another job): %w", p.name, h.Flow, backend.ErrRemote)
	}
	d.mu.Lock()
	p.flows[h.Flow] = true
	d.mu.Unlock()
	return false, nil
}

// Step returns the connection once the listener accepted the flow.
func (dl *dialer) Step() (backend.SendConn, error) {
	select {
	case <-dl.done:
	default:
		return nil, nil
	}
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.aborted {
		return nil, fmt.Errorf("udpnet: connecting to %s was aborted (the plugin was finalized meanwhile): %w", peerKey(dl.h.Addrs), backend.ErrInternal)
	}
	if dl.taken {
		return nil, fmt.Errorf("udpnet: connection to %s already returned: %w", peerKey(dl.h.Addrs), backend.ErrInternal)
	}
	dl.taken = true
	dl.cancel()
	if dl.err != nil {
		return nil, dl.err
	}
	return dl.sc, nil
}

// Abort cancels the attempt and releases what it holds.
func (dl *dialer) Abort() {
	dl.cancel()
	<-dl.done
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if !dl.taken {
		dl.taken, dl.aborted = true, true
		if dl.sc != nil {
			_ = dl.sc.Close()
		}
	}
}
