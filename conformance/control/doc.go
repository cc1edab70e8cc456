// Package control defines the line-based control contract through which the
// conformance tester drives an implementation under test (IUT) running as a
// separate process: one request line on the IUT's stdin, one JSON reply line
// on its stdout. docs/conformance.md specifies it; this package parses and
// formats both sides so that the tester (conformance.ProcessIUT) and this
// module's own IUT (cmd/mrpeer) agree by construction. It imports nothing of
// the protocol implementation.
package control
