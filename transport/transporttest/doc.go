// Package transporttest is a deterministic test bed for the MetaRoCE
// protocol core (package transport): it joins two or more Endpoints over a
// scripted network on virtual time and checks, on every run, the invariants
// the core promises (docs/spec.md §3).
//
// The network is a goroutine-free event heap ordered by time, then by
// insertion. Every random choice (loss, jitter, duplication, the core's own
// choices) draws from math/rand/v2 sources seeded from NetConfig.Seed, so a
// run is reproducible from its seed alone.
//
// What the network models, per directed packet:
//
//   - a path is (sender, receiver, plane, entropy); each path has a fixed
//     one-way delay, BaseDelay plus a per-path share of PathSpread, so
//     different paths reorder against each other while one path never
//     reorders (jitter is added without overtaking, unless ReorderInPath);
//   - random loss, bursty loss (Gilbert-Elliott, per node pair),
//     duplication, and scripted faults (Rule): blackholed paths, dead
//     reverse routes, all from a given time;
//   - each node's egress link serialises at LinkRate, and each node's
//     ingress link (the last switch port before it) is a FIFO at LinkRate
//     that marks CE above MarkThreshold bytes and drops above QueueLimit,
//     so that N→1 incast builds a queue where it would in a fabric.
//
// Payload bytes are real: send buffers are registered by cookie and each
// Placement is copied into a receive buffer surrounded by guard bytes. Check
// then verifies that every message arrived exactly once with identical
// bytes, that completions came in posting order per flow, that nothing was
// written outside a posted buffer, and that the sequenced packets lost by the
// network equal the retransmissions when the run permits no spurious ones.
package transporttest
