// Package sched turns a collective call into schedules: one Plan per rank, a
// list of steps that is plain data, so that the in-memory reference executor
// (Execute), the transport executor and the fabric simulator all run the same
// schedule without rewriting it.
//
// # Buffers
//
// A plan addresses three byte buffers of its rank: BufSend (the caller's input),
// BufRecv (the caller's output) and BufScratch (Plan.ScratchBytes bytes that the
// executor provides). Plan.SendBytes and Plan.RecvBytes give the sizes the
// caller's buffers must have at least. Elements are stored in host byte order; a
// Range is a byte range of one buffer whose offset and length are multiples of
// the element size, so no message or reduction ever splits an element.
//
// In-place plans (Plan.InPlace) address BufRecv only, never BufSend, with NCCL's
// in-place layouts (see Config.InPlace); the builder has already resolved every
// aliasing hazard, so the executor need not know whether the call was in place.
//
// # Steps
//
//	send    Src → Peer, on Channel, message number Seq
//	recv    Dst ← Peer, on Channel, message number Seq (length Dst.Len)
//	reduce  Dst = Src op Src2, elementwise, with Plan.DType and Plan.Op
//	        (OpAvg combines as sum); Dst equals Src, equals Src2, or overlaps
//	        neither. Every op is commutative, so an executor may compute
//	        Dst op= other when Dst equals one operand.
//	copy    Dst = Src (disjoint, equal lengths)
//	scale   Dst /= Divisor elementwise (reduce.DivideBy), the end of an
//	        integer average
//	premul  Dst = Src × 1/Divisor elementwise (reduce.PreMultiply), the start
//	        of a floating-point average, which sums the scaled inputs as
//	        NCCL's pre-multiplied sum does; it runs in chunks, so the first
//	        messages leave before the whole input is scaled
//
// Step.Round is the algorithm's step number (ring step, doubling round,
// all-to-all shift, pipeline chunk). It orders nothing; simulators and traces
// use it to label and group steps.
//
// # Ordering
//
// A step may start once all steps in its Deps (indices of earlier steps of the
// same plan) have completed. Steps not ordered by a chain of Deps may run
// concurrently and in any order: the builder derives Deps from the bytes each
// step reads and writes (read-after-write, write-after-read, write-after-write),
// so every order that honours Deps computes the same result as running the steps
// one by one in index order. A send completes when its data has left Src (Src
// may then be overwritten); a recv completes when all of Dst has arrived.
//
// # Messages
//
// Messages are matched by (source rank, destination rank, channel, sequence):
// the k-th send step (in step index order) of rank a to rank b on channel c
// carries Seq k and matches the recv step of rank b from rank a on channel c
// with Seq k; both have the same length. Step.Seq is filled in by the builder.
// An executor may carry each (peer, channel) pair over one ordered flow and
// post sends and receives in Seq order, or tag messages with Seq and post them
// as soon as their dependencies allow. Zero-length messages are never emitted.
//
// Plans are deadlock-free both with eager sends (a send completes without a
// receiver) and with rendezvous sends (a send completes only together with its
// receive, once that receive is ready, as NCCL's net plugin contract requires):
// a recv waits for a send of its own rank only where it reuses a landing area
// that an earlier algorithm step sends from, so every chain of waits leads back
// to the first step. The tests run every collective under both semantics.
//
// # Pipelining and channels
//
// Config.Channels splits the data into that many nearly equal parts (ring
// blocks are split per channel; pipelines deal chunks to channels in turn), and
// Config.ChunkBytes bounds each message, so the chunks of one ring step or
// pipeline hop are independent steps that overlap with each other and with the
// next step's chunks. Each message names its channel; an executor maps channels
// to flows, connections or threads as it likes.
//
// # Algorithms
//
//	allreduce      ring (reduce-scatter + all-gather, chunked, C channels),
//	               recursive doubling, recursive halving and doubling
//	               (Rabenseifner: the ring's traffic in 2·log2(n) chunked
//	               rounds; non-powers of two fold in and out of the last
//	               two), or the hierarchical ring over groups of
//	               Config.GroupSize ranks (rings inside the groups and
//	               across them: the ring's traffic in 2(g-1)+2(n/g-1) steps).
//	               Auto picks recursive doubling up to
//	               AutoRecursiveDoublingMaxBytes; with a grouping, the
//	               hierarchical ring from blocks of
//	               AutoHierarchicalMinBlockBytes; halving for a power of two
//	               of ≥ 4 ranks with blocks up to AutoHalvingMaxBlockBytes
//	               (or any below the hierarchical threshold); the
//	               hierarchical ring over a grouping, or the ring, otherwise
//	reducescatter  ring
//	allgather      ring
//	alltoall       shifted pairwise: in round s rank r sends to (r+s)%n and
//	               receives from (r-s+n)%n, so no rank receives from two senders
//	               in one round; rounds run in lockstep, or overlap while they
//	               carry fewer messages than Config.AllToAllInFlight
//	broadcast      chunked chain pipeline from the root
//	sendrecv, p2p  direct, chunked
//
// BusBWFactor gives nccl-tests' bus-bandwidth factor for each collective.
package sched
