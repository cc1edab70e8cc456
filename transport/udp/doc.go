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
// The loop owns the sockets and drives the core. It waits in epoll
// (sockio.Poller, whose epoll instance is registered with the Go runtime's
// network poller, so a waiting loop parks its goroutine and holds no thread
// or P that the process's other goroutines need), reads with recvmmsg batches (GRO-coalesced where the kernel
// offers it), passes each datagram's ECN bits to the core, copies placed
// payload straight into the user's posted buffer (the only copy on the
// receive side), turns PollTransmit output into sendmmsg batches (a large
// datagram's payload is gathered from the user's message by the kernel, not
// copied; equal-sized small datagrams to one destination coalesce into UDP
// GSO sends where the kernel offers it), and arms a timerfd for NextTimeout
// so that sub-millisecond timers are honoured.
//
// # Caller-runs
//
// A loop turn runs under the endpoint's drive lock, and so may a user
// goroutine: Send and Recv queue their command and, when the lock is free
// or freed within 10 µs, apply it themselves instead of waking the loop. A
// Recv runs the whole turn (apply, read the listening sockets, transmit); a
// Send applies and transmits and leaves the sockets to the loop or a
// waiter, since in a ping-pong that read finds nothing. Request.Wait keeps
// running turns while they make progress, for up to Config.WaitSpin
// without any, before it blocks. On a small, busy host the hand-off to a
// sleeping loop and the channel wake-up back each cost a thread wake-up,
// tens to hundreds of microseconds; a waiter that reads its own answer pays
// neither (docs/results.md, UDP datapath). While a goroutine spins in Wait the loop parks off the poller, so
// datagrams for it wake no thread, and a waiter whose request completes in
// the reading half of a turn returns at once, leaving the rest (the
// acknowledgement it owes, typically) to the loop it wakes. Commands that
// find the lock taken are left to its holder or the loop, which checks the
// queue before it sleeps. The loop spins for Config.Spin after work, which
// keeps a bulk transfer's pipeline free of thread wake-ups. A caller that
// tests its requests instead of waiting (the NCCL plugin's test(), on
// NCCL's proxy thread) calls Request.Poll between tests: one turn each, and
// the loop parks for Config.WaitSpin after the last poll, as for a waiter.
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
