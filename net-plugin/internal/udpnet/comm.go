package udpnet

import (
	"time"

	"github.com/metaroce/metaroce/transport/udp"
)

// closeGrace bounds how long closing a comm waits for its requests still in
// flight before it closes the whole shared connection.
const closeGrace = 2 * time.Second

// drain waits up to closeGrace for the requests still in flight and, if some
// remain, closes p's connection, which fails them; either way, once it
// returns the datapath no longer touches their buffers. It then releases
// the comm's flow (peer.dataFlow: no other comm ever uses it, and a
// connection that outlives many comms must not keep them all) and drops
// the comm's reference on p.
func drain(p *peer, flow uint32, inflight []*udp.Request) {
	if len(inflight) > 0 {
		t := time.NewTimer(closeGrace)
		defer t.Stop()
	wait:
		for _, r := range inflight {
			select {
			case <-r.Done():
			case <-t.C:
				p.d.kill(p, "a comm on flow "+itoa(flow)+" closed with requests in flight")
				break wait
			}
		}
	}
	_ = p.conn.ReleaseFlow(flow)
	p.d.release(p)
}

func itoa(v uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
