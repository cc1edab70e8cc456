// Package baseline holds the baselines MetaRoCE is measured against, as plain
// Go functions that benchmarks and mrbench call: a raw UDP blaster and sink
// (the same datagram sizes, batching and GSO/GRO as the datapath, without any
// protocol), a kernel TCP single stream, and UDP and TCP ping-pong round trips.
//
// Every function takes a context and stops when it is done; none asserts
// speed. Throughput is received bytes over the receiver's elapsed time, so UDP
// loss lowers the figure instead of failing the run.
package baseline
