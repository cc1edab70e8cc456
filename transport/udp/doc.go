// Package udp is the MetaRoCE datapath over real UDP sockets: it drives the
// sans-I/O protocol core (package transport) with one event-loop goroutine per
// [Endpoint] and offers an asynchronous, request-based API on top.
//
// # Sockets, planes and entropies
//
// An endpoint has one local address per plane (Config.Addrs) and, on each
// plane, a pool of Config.PortsPerPlane UDP sockets (package sockio). A core
// transport.Route{Remote, Plane, Entropy} leaves from socket Entropy of plane
// Plane's pool, so each entropy is a distinct UDP source port and therefore a
// distinct ECMP path through the fabric. Every datagram is addressed to the
// peer's listening socket on that plane, which is socket 0 of its pool (the
// port Endpoint.Addrs reports); the endpoint still reads from every socket.
//
// # The event loop
//
// The loop owns the core and every socket. It waits in epoll (sockio.Poller),
// reads with recvmmsg batches (GRO-coalesced where the kernel offers it),
// passes each datagram's ECN bits to the core, copies placed payload straight
// into the user's posted buffer (the only copy on the receive side), turns
// PollTransmit output into sendmmsg batches (coalescing equal-sized datagrams
// to one destination into UDP GSO sends where the kernel offers it), and arms a
// timerfd for NextTimeout so that sub-millisecond timers are honoured. User
// calls never touch the core: they append a command to a mutex-protected queue
// and wake the loop through the poller's eventfd when it sleeps. After doing
// work the loop polls without blocking for Config.Spin before it sleeps, which
// trades a little CPU for round-trip latency.
//
// # Handshake addresses
//
// Each endpoint announces its per-plane listening addresses in the handshake
// (the core's address blob, see EncodeAddrs), so an accepting endpoint learns
// every plane address of the dialer from its HELLO. Peers are identified by
// that address set. Datagrams that are not HELLOs are attributed by their
// exact source address and port through a bounded table, which the core only
// needs to answer packets for connections it no longer knows.
//
// # Allocation
//
// The steady-state send and receive paths allocate nothing per datagram;
// Send and Recv allocate a Request per message.
package udp
