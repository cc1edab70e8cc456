// Package tcpnet is the kernel-TCP Backend of the net plugin, in the spirit of
// NCCL's own socket transport: each connection uses a few TCP sockets
// (Config.Socks); message k of a connection travels whole on socket k mod
// Socks behind a 16-byte header carrying its size and tag; one goroutine per
// socket and side moves the bytes straight between the socket and the
// caller's buffers, except that Isend writes a message of at most 16 KiB
// itself when its socket has nothing queued (inlineMax).
//
// Both ends derive the socket of every message from its index alone, so no
// per-message negotiation is needed, and grouped receives are matched by
// index: receive group g covers the next n message indices in posting order.
package tcpnet
