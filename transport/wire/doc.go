// Package wire defines the MetaRoCE version 1 packet formats: parse into a
// caller-owned struct, append to a caller-owned buffer, and report the encoded
// length. docs/spec.md §2–§4 is the normative description; every type here cites
// the section it implements.
//
// All multi-byte integers are big-endian (network order). Parsing never
// allocates and never retains the input slice except where a field is
// documented as a view into it (DATA payload, HELLO address blob).
//
// This package imports only the standard library: it is shared by the
// protocol core, the simulator and the conformance tester, which must not
// depend on each other.
package wire
