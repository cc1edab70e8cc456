// Package conformance is a black-box tester for MetaRoCE implementations: it
// speaks the version 1 wire format (package transport/wire) over UDP to an
// implementation under test (IUT) and judges what comes back against
// docs/spec.md. It deliberately depends on the wire codec alone, never on the
// protocol core or a driver, because those are what it judges.
//
// The IUT is reached two ways: its UDP listening address (where the tester's
// packets go) and a small control interface (IUT) through which the tester
// asks it to post receives and reports completions. docs/conformance.md
// describes the cases and a line-based control contract for out-of-process
// implementations.
package conformance
