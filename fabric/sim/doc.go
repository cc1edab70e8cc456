// Package sim is a discrete-event simulator of a multi-plane leaf/spine RoCE
// fabric that runs real transport endpoints (the MetaRoCE core and the RoCEv2
// baseline) on its hosts.
//
// The engine is single-threaded and goroutine-free: events sit in a min-heap
// ordered by virtual time (int64 nanoseconds) and then by insertion sequence,
// so two runs with the same seed execute the same events in the same order.
// Every random choice (link loss, ECN marking, ECMP seeds) draws from one
// seeded math/rand/v2 source owned by the Sim.
//
// The fabric model: hosts own one NIC port per plane; each plane is a two-tier
// Clos of leaves and spines; every link is a pair of egress ports with a rate,
// a propagation delay and a random loss probability; switch egress queues
// drop tail at a byte limit and mark ECN CE with a RED-style ramp on the
// instantaneous queue; ECMP hashes the UDP 5-tuple with a per-switch seed;
// links and whole planes fail and recover at scheduled times: a failure
// drops at once the packets queued at both ends of the link and loses those
// on its wire, a switch drops what it forwards to a down port, and nothing
// that reached a link before it failed is delivered after it comes back;
// PFC pauses an upstream port when the bytes held for one ingress port
// cross XOFF and resumes it under XON (a failure releases the bytes it
// drops and clears the failed link's pauses).
// Links serialise at their exact rate (a whole number of bits per second).
// Packets carry a header and a payload length but no payload bytes; a
// packet delivered to a host says when its last link serialised it and how
// much of its payload the host's transport placed (Packet.TxStart, TxEnd,
// Placed), from which goodput is measured against what the link can carry.
package sim
