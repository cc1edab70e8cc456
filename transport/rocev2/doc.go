// Package rocev2 is the RoCEv2 baseline the simulator runs beside MetaRoCE:
// a sans-I/O model of reliable-connected queue pairs as RDMA NICs implement
// them.
//
//   - One path per queue pair: the UDP source port (ECMP entropy) and plane
//     are fixed when the QP is created.
//   - In-order receive: a packet beyond the expected PSN is dropped and
//     answered with one NAK per gap; the sender goes back to the NAKed PSN
//     and resends everything after it (go-back-N).
//   - A retransmission timer of 4.096 µs × 2^t (IB local ACK timeout t) with
//     a retry limit; exceeding it fails the connection.
//   - DCQCN per QP: the receiver (notification point) answers CE-marked
//     packets with at most one CNP per QP per 50 µs; the sender (reaction
//     point) runs cc.DCQCN and paces the QP at its rate.
//   - Optionally several QPs per connection (NCCL_IB_QPS_PER_CONNECTION):
//     each message is striped over them in MTU-aligned contiguous pieces.
//   - Optionally NCCL's rendezvous (Config.Rendezvous): a send waits for
//     the CTS of its receive, which the receiver sends on a QP of its own,
//     so that the CTS does not queue behind the receiver's own sends.
//
// Packets use this package's own compact header (header.go) rather than the
// InfiniBand BTH/RETH bit layout: the simulator needs the fields, not the
// encoding, and the header length is close to BTH+RETH+ICRC.
package rocev2
