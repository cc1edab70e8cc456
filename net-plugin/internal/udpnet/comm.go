package udpnet

import "github.com/metaroce/metaroce/transport/udp"

// drain ends a closing comm's use of its flow. Requests still in flight
// (NCCL closes a comm with requests outstanding only when it aborts) are
// aborted: they fail at once and, once drain returns, the datapath touches
// none of their buffers again; the peer's requests on the flow fail too,
// and the connection, shared with the other comms to that peer, carries
// on. Either way the flow is released (peer.dataFlow: no other comm ever
// uses it, and a connection that outlives many comms must not keep them
// all; aborting releases it too), and the comm's reference on p dropped.
func drain(p *peer, flow uint32, inflight []*udp.Request) {
	if len(inflight) > 0 {
		p.d.logf("NET/MetaRoCE : udpnet: comm on flow %d to peer %s closed with %d request(s) in flight: aborting them", flow, p.name, len(inflight))
		p.conn.AbortFlow(flow)
	} else {
		_ = p.conn.ReleaseFlow(flow)
	}
	p.d.release(p)
}
