// Package collectives is the host-memory collective-communication runtime
// over MetaRoCE: a communicator of ranks with one connection per peer,
// collective channels mapped to ordered flows on that connection (C channels
// → C flows, all under the connection's one congestion controller), a small
// TCP rendezvous to exchange endpoint addresses, and an executor that runs
// the schedules of collectives/sched over the transport.
//
// A kernel-TCP link (one socket per peer and channel, in the spirit of NCCL's
// socket transport) sits behind the same interface as a baseline, so users
// compare the two on their own network with the same schedules.
package collectives
