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
//
// # Using a communicator
//
// A process joins a job with New, given its Bootstrap: BootstrapFromEnv
// reads it from torchrun, Open MPI, Slurm or METAROCE_* variables, and
// LaunchLocal runs several ranks in one process (tests, one-host runs).
// Every rank then makes the same calls in the same order, as with NCCL,
// and Close ends the communicator.
//
// Buffers. A call reads send and writes recv only while it runs: once it
// returns, both are the caller's again. Out of place, send is not
// written; in place (send nil, or the layouts each call names) only the
// part of recv that receives the result is written. After a failed call
// the contents of recv, and of an in-place buffer, are undefined. A call
// of zero bytes returns at once without talking to the other ranks.
//
// Errors. A call refused for its arguments wraps ErrInvalidArgument; it
// sent nothing and the communicator stays usable, while the other ranks
// wait for this rank's call. So does a call whose context was already
// done (its error wraps the context's). Any other failure (a lost peer, a
// timeout, a mismatch between the ranks' calls, a context ended during the
// call) breaks the communicator: the calls after it wrap ErrBroken and the
// first failure, and the communicator must be closed. Calls cut short by
// Close, and made after it, wrap ErrClosed. A transfer's
// failure is a *PeerError naming the rank it was with, wrapping
// ErrPeerLost when the connection to that rank was lost; ErrMismatch
// marks ranks that called different collectives or counts. Code that
// retries on context.DeadlineExceeded must test for ErrBroken first: a
// broken communicator's later calls wrap the deadline that broke it.
//
// Concurrency. A Comm is used by one goroutine at a time; a call made while
// another is in progress fails with ErrConcurrentUse and closes the
// communicator's link, breaking it (see ErrConcurrentUse). Close may be called from any
// goroutine, also during a call, which then fails with ErrClosed.
package collectives
