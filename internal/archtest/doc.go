// Package archtest enforces the layering of the repository: which of our
// packages may import which, and which standard or external packages the
// sans-I/O layers may use. The rules are a table (Rules) so that a new
// package gets its rule in one line; the checker (Check) works on the import
// graph that `go list -deps -json` reports, and the package's test runs it on
// the whole module.
//
// The separation it protects is the one the architecture rests on: the
// protocol core never imports a driver, the packet formats import nothing of
// ours, and the simulator never imports the UDP driver, so that one core runs
// unchanged under every driver.
package archtest
