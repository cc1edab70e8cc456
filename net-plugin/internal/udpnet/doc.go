// Package udpnet is the MetaRoCE Backend of the net plugin: it carries NCCL
// traffic over the MetaRoCE datapath (package transport/udp).
//
// Mapping:
//
//   - One udp.Endpoint per plugin device. Every selected interface is one
//     plane of the device, so a connection sprays over all of them. The
//     endpoint is opened on first use.
//   - One MetaRoCE connection per (local device, remote endpoint), shared by
//     every NCCL comm between the two and reference counted: it closes when
//     the last comm on it closes. Connections are used in both directions, so
//     a connection accepted from a peer also carries our comms to it.
//   - Each NCCL sendComm/recvComm pair is one ordered flow of that
//     connection. Listen allocates a fresh flow id and a random nonce and
//     writes both, with the endpoint's per-plane addresses, into the listen
//     handle. The dialer announces the flow on the connection's control flow
//     (flow 0); the listening side answers accept or reject, so a connect
//     completes only when the receiver knows the flow. A connect that ended
//     (its deadline, an abort) before an accept came back answers that
//     accept with a withdrawal, on which the listener drops the comm it
//     queued for it, and aborts the comm's flow; any other accept that no
//     connect waits for (a duplicate, a faulty peer's) is ignored, since
//     aborting a flow on its word could end a live comm or the control
//     flow. A connection that ends
//     drops at once the comms its listeners queued for it. On the
//     connection the comm's data travel on twice the listener's flow id,
//     plus one when the listener's side dialed the connection: both sides
//     number their listeners alike, and this keeps every comm's flow
//     unique on the shared connection, so that closing a comm releases
//     its flow.
//   - connect/accept never block: Dial and the announcement run in a
//     goroutine that Dialer.Step polls; announcements land in the listener's
//     queue that Listener.Accept polls.
//   - isend/irecv are Conn.Send/Conn.Recv on the comm's flow (grouped, with
//     tags); test is Request.Test plus Request.Sizes. A send completes when
//     the receiver acknowledged every byte.
//
// Closing a comm whose requests are still in flight (an NCCL abort) aborts
// the comm's flow (udp.Conn.AbortFlow): its requests fail at once, the
// datapath touches none of their buffers after the close, the peer's
// requests on that flow fail too, and the shared connection and its other
// comms carry on. deregMr of memory that requests in flight still use
// aborts the comm the same way (backend.SendConn.Abort), since NCCL frees
// an aborted comm's buffers before it closes the comm.
package udpnet
