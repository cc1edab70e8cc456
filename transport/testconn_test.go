package transport

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// testConn returns an endpoint with one connection established by hand
// (no network): the peer announced one path and a max_dgram of maxDgram.
func testConn(t *testing.T, cfg Config, maxDgram uint16) (*Endpoint, *Conn) {
	t.Helper()
	e := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
	c, err := e.newConn(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	c.setupPaths(0)
	c.established(&wire.Hello{SrcConn: 7, SrcTok: 9, Planes: 1, Paths: 1, MaxDgram: maxDgram})
	return e, c
}

// lastClosed returns the error of the latest EvClosed of e, and whether
// there was one.
func lastClosed(e *Endpoint) (error, bool) {
	var err error
	found := false
	for {
		ev, ok := e.PollEvent()
		if !ok {
			return err, found
		}
		if ev.Kind == EvClosed {
			err, found = ev.Err, true
		}
	}
}
