// Package reduce implements the elementwise reduction kernels of the host-memory
// collectives: dst = dst op src over byte buffers that hold elements of one data
// type in host byte order.
//
// Every data type × operation pair is supported:
//
//	types: int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double
//	ops:   sum prod min max avg
//
// Integer sum and prod wrap around (two's complement), as NCCL's do. Float min and
// max follow Go's built-in min and max: a NaN operand gives NaN, and -0 is smaller
// than +0, so the result never depends on the order of the operands. half and
// bfloat16 are widened to float32, combined, and rounded back to nearest-even, so
// a chain of reductions rounds once per step.
//
// Avg is not an elementwise operation: Reduce treats OpAvg as OpSum. As in
// NCCL, a floating-point average scales every rank's input by 1/nranks first
// (PreMultiply; the scalar rounded to the type) and then sums, so that it
// cannot overflow where the mean fits the type; its result depends on the
// order of reduction through rounding, within PreMulSumTolerance. An integer
// average sums and then divides once (DivideBy), with truncation toward zero,
// which matches NCCL's integer average.
//
// Kernels: a scalar reference covers every pair (reference.go); fast paths cover
// the hot pairs (float32/float64/int32/int64 sum, min and max, and the float
// products) with unrolled loops over the byte buffers reinterpreted as typed
// slices, and AVX2 assembly where the CPU has it (selected once at start-up
// with cpuid): the integer and float sums, the float products, the integer
// min and max, half sum and product through F16C, bfloat16 sum and product
// widened by a shift and rounded to nearest even with integer vector
// operations, and PreMultiply for the four float types. The fast paths are
// checked against the reference bit for bit (NaN payloads aside).
package reduce
