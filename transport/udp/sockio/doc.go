// Package sockio is the socket layer of the UDP datapath: non-blocking UDP sockets
// (IPv4 and IPv6) with batched I/O, ECN marking and reading, UDP GSO/GRO where the
// kernel offers them, an epoll-based readiness poller and a fault-injecting wrapper
// for tests.
//
// # Sockets and source ports
//
// MetaRoCE spreads a connection over paths, and a path is a plane (a local
// interface address) times a UDP source port: the fabric's ECMP hash picks a link
// from the 5-tuple, so every source port is a unit of path entropy. Linux chooses
// the source port of a datagram from the socket that sends it, so sockio opens
// one socket per (plane local address, source port): a [Pool] is the set of
// sockets of one plane, all shared by every connection, and the datapath receives
// on every one of them (a peer answers to the port it heard from). One socket per
// plane with per-datagram source ports is not possible without raw sockets.
//
// # Concurrency
//
// A [Conn] may be used by one writer goroutine and one reader goroutine at the
// same time (they own separate scratch space); two concurrent writers, or two
// concurrent readers, must be serialised by the caller. The intended use is one
// event loop per endpoint that owns every socket and blocks in [Poller.Wait].
//
// # Allocation
//
// [Conn.WriteBatch] and [Conn.ReadBatch] allocate nothing per call in steady
// state: headers, addresses and control-message space are preallocated per Conn
// for up to [MaxBatch] messages.
package sockio
