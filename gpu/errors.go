package gpu

import "strings"

// errPrefix begins every error of the package, once.
const errPrefix = "gpu: "

// unprefixed is an error of this package read without its "gpu: " prefix,
// so that a gpu error that wraps another one ("gpu: <file>: <cause>")
// carries the prefix once instead of once per level. errors.Is and
// errors.As still reach the error it holds.
type unprefixed struct{ err error }

// withoutPrefix returns err for wrapping with %w under a message that has
// the package's prefix already.
func withoutPrefix(err error) error { return unprefixed{err} }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), errPrefix) }

func (u unprefixed) Unwrap() error { return u.err }
