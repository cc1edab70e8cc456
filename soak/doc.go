// Package soak runs the MetaRoCE collectives for a long time under changing
// driver-level faults and checks that they stay correct: every result is
// compared with a reference computed element by element, failures must
// surface as errors within the communicator's deadline, and the process must
// hold no more goroutines or file descriptors after the run than before it.
//
// The run is a sequence of rounds. Each round launches Ranks in-process
// ranks (collectives.LaunchLocal) with one fault setting for the whole
// round, because the datapath's fault options are fixed when an endpoint
// opens: no fault, random datagram loss (several rates), blackholed source
// ports, or the death of one rank part-way through, after which every
// surviving rank must report an error rather than hang. Within a round the
// ranks run the same random sequence of collectives, element types,
// operations and sizes, drawn from the round's seed.
package soak
