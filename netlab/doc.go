// Package netlab builds a real multipath Ethernet fabric on one Linux machine
// out of network namespaces, veth pairs, ECMP routes and nftables rules, for
// tests and benchmarks of the UDP datapath.
//
// A lab has P planes. Plane p is host h1 — switch s1 — K parallel spine links —
// switch s2 — host h2. Each host has one interface and one address per plane.
// The switches forward with net.ipv4.fib_multipath_hash_policy=1, so the ECMP
// route hashes the 5-tuple and every UDP source port takes one spine link, as
// on a real fabric. nftables rules on s1's forward hook inject faults on the
// h1→h2 direction of chosen spine links: random loss, black holes, CE marking
// (unconditional or above a rate) and rate caps.
//
// Addressing uses only the benchmarking range 198.18.0.0/15, inside the lab's
// own namespaces:
//
//	h1 plane p:   198.18.p.2/24     (s1 side 198.18.p.1)
//	h2 plane p:   198.18.(128+p).2/24 (s2 side 198.18.(128+p).1)
//	spine p, i:   198.19.p.(4i+1)/30 on s1, 198.19.p.(4i+2)/30 on s2
//
// Namespace names are the lab's ID (a short prefix and a random suffix)
// followed by "-h1", "-h2", "-s1p<p>" and "-s2p<p>". Interfaces are created
// directly inside their namespaces, so their names (p<p> on hosts, h and a<i>
// on s1, h and b<i> on s2) never collide between labs.
//
// Every lab records its owner, the process that built it, in a marker file
// under OwnerDir, written before the first namespace and removed by Close
// after the last. New first deletes the labs whose owner has exited without
// Close (a crash, SIGKILL), and Cleanup deletes the labs of one exact prefix
// that no live process owns; neither touches a lab in use. Namespaces
// without a marker (left by a netlab older than the markers, or another
// program's that fit the naming) have no owner to judge: New leaves them
// alone, and Cleanup, asked for their exact prefix, deletes them.
//
// Building a lab needs root, iproute2 and nftables; Available says which is
// missing so that tests can skip with a clear message.
package netlab
