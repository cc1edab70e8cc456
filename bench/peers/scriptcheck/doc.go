// Package scriptcheck tests the side-by-side benchmark in its parent
// directory, which holds no Go: run.sh builds mrbench and the two peer
// benchmarks there (mpi_bench.c for Open MPI, gloo_bench.py for PyTorch's
// gloo backend), runs all-reduce and all-to-all at the same sizes and rank
// counts with each, and prints one table of bus bandwidths (nccl-tests
// formulas) with MetaRoCE's figure as a ratio to each peer's. (The tests live
// in a directory of their own because Go refuses a package directory holding
// C sources without cgo.)
//
// The tests check that the script parses and rejects bad arguments, that on
// a fresh machine it installs nothing unless --install asks, naming instead
// the missing packages and the command that installs them, that with
// --install it refreshes the package lists before installing and carries
// on, the peers skipped, when an install fails (apt-get and the rest are
// stubs there), that the C benchmark compiles where mpicc exists, that
// the Python one parses, that a signal stops the run, and that the table's
// medians leave out what was measured while the host probe
// (bench/hostprobe) read the host slow.
package scriptcheck
