// Package transport is the MetaRoCE protocol core: endpoints, connections,
// ordered flows above, multiple paths below, selective-repeat loss recovery,
// path health and congestion control (docs/spec.md §3).
//
// The core is sans-I/O. It owns no sockets, goroutines or clock and never
// touches payload bytes: a driver (the UDP runtime in transport/udp, the
// fabric simulator in fabric/sim, the NCCL plugin through transport/udp) feeds
// it datagrams and the current time and moves the bytes it is told to move:
//
//	for {
//		for each received datagram: pl := ep.HandleDatagram(now, d); copy pl.Payload into the buffer of pl.Cookie at pl.Offset
//		if now >= ep.NextTimeout() { ep.HandleTimeout(now) }
//		for { tx, ok := ep.PollTransmit(now, buf); if !ok { break }; send buf[:tx.N] + payload(tx.Payload) on tx.Route }
//		for { ev, ok := ep.PollEvent(); if !ok { break }; deliver ev }
//		sleep until ep.NextTimeout() or the next datagram or user call
//	}
//
// Every random choice draws from the *rand.Rand given to NewEndpoint, so a
// driver with a seeded source and a virtual clock gets byte-identical runs.
package transport
