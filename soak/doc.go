// Package soak runs the MetaRoCE collectives for a long time under changing
// faults and checks that they stay correct: every result is compared with a
// reference computed element by element (exact for up to MaxRanks ranks),
// failures must surface as errors within the communicator's deadline, and
// the process must hold no more goroutines or file descriptors after the
// run than before it.
//
// The run is a sequence of rounds. Within a round the ranks run the same
// random sequence of collectives, element types, operations and sizes,
// drawn from the round's seed. Rounds come in three kinds:
//
//   - Driver-level rounds (the default) launch Ranks in-process ranks
//     (collectives.LaunchLocal) on loopback with one fault setting for the
//     whole round, because the datapath's fault options are fixed when an
//     endpoint opens: no fault, random datagram loss (several rates),
//     blackholed source ports, or the death of one rank part-way through,
//     after which every surviving rank must report an error rather than
//     hang: one that names a dead or closed peer, at the dead rank's last
//     collective or later (any other error, or an earlier one, is counted
//     as unexpected).
//   - Netlab rounds (Options.Netlab, root and nftables) run two ranks, one
//     in each host of a namespace fabric with four ECMP spine links
//     (package netlab), and inject real faults with nftables and link
//     state: loss of 1–10 % on one link or on all, a black-holed link, CE
//     marking, link flaps. Some are held for the whole round, others come
//     and go on a timer while the collectives run. With only such faults
//     every collective must succeed; only a killed rank may cause errors.
//   - Plugin rounds (Options.Plugin, gcc) build the NCCL net plugin and its
//     C harness once and run the harness's data scenario in two processes
//     over loopback with the udp backend, and now and then its kill
//     scenario, in which the sender dies mid-transfer and the receiver
//     must report it.
package soak
