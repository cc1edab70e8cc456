package udpnet

import "github.com/metaroce/metaroce/transport/udp"

// drain ends a closing comm's use of its flow by aborting it, whether or
// not this side has requests in flight. Requests still in flight here
// (NCCL closes a comm with requests outstanding only when it aborts) fail
// at once and, once drain returns, the datapath touches none of their
// buffers again. The peer is told either way and fails its own requests
// on the flow: a comm closed with nothing in flight here (an aborted
// sender whose GPU never produced the data, say) may still have a
// receive, or a send, posted against it at the peer, and a plain release
// would leave that request waiting for ever, since the connection, shared
// with the other comms to that peer, stays alive. An orderly teardown has
// nothing in flight on either side by then, so the peer fails nothing
// (its sends that this side delivered complete, docs/spec.md §3.4). The
// abort releases the flow (peer.dataFlow: no other comm ever uses it, and
// a connection that outlives many comms must not keep them all), and the
// comm's reference on p, with its connect record (f.connected), is dropped.
func drain(f *flowEnd, inflight []*udp.Request) {
	p, flow := f.p, f.flow
	if len(inflight) > 0 {
		p.d.logf("NET/MetaRoCE : udpnet: comm on flow %d to peer %s closed with %d request(s) in flight: aborting them", flow, p.name, len(inflight))
	}
	p.conn.AbortFlow(flow)
	p.d.release(p, f.connected)
}
