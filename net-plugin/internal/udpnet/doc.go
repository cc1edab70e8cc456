// Package udpnet is the MetaRoCE Backend of the net plugin: it carries NCCL
// traffic over the MetaRoCE datapath (package transport/udp).
//
// Mapping:
//
//   - One udp.Endpoint per plugin device. The device aggregates every
//     selected interface as one plane, so a connection sprays over all of
//     them. The endpoint is opened on first use.
//   - One MetaRoCE connection per (local device, remote endpoint), shared by
//     every NCCL comm between the two and reference counted: it closes when
//     the last comm on it closes. Connections are used in both directions, so
//     a connection accepted from a peer also carries our comms to it.
//   - Each NCCL sendComm/recvComm pair is one ordered flow of that
//     connection. Listen allocates a fresh flow id and a random nonce and
//     writes both, with the endpoint's per-plane addresses, into the listen
//     handle. The dialer announces the flow on the connection's control flow
//     (flow 0); the listening side answers accept or reject, so a connect
//     completes only when the receiver knows the flow. On the connection the
//     comm's data travel on twice the listener's flow id, plus one when the
//     listener's side dialed the connection: both sides number their
//     listeners alike, and this keeps every comm's flow unique on the
//     shared connection, so that closing a comm releases its flow.
//   - connect/accept never block: Dial and the announcement run in a
//     goroutine that Dialer.Step polls; announcements land in the listener's
//     queue that Listener.Accept polls.
//   - isend/irecv are Conn.Send/Conn.Recv on the comm's flow (grouped, with
//     tags); test is Request.Test plus Request.Sizes. A send completes when
//     the receiver acknowledged every byte.
//
// Closing a comm whose requests are still in flight waits a short grace
// period, then closes the whole shared connection, because the datapath may
// otherwise still read or write the caller's buffers after the close.
package udpnet
