//go:build !cgo

package dl

import "unsafe"

// Available is false without cgo: dlopen and dlsym cannot be called, so Open
// fails with ErrNoCgo before it tries any path.
const Available = false

// open exists so that Open compiles in both builds; Open does not reach it
// here.
func open(string) (unsafe.Pointer, string) { return nil, ErrNoCgo.Error() }

// Sym resolves name in the library. Without cgo no Lib is ever opened, so
// this only answers the (impossible) call with the reason.
func (l *Lib) Sym(name string) (unsafe.Pointer, error) {
	return nil, &SymbolError{What: l.spec.What, Path: l.path, Symbol: name, Reason: ErrNoCgo.Error(), Env: l.spec.Env, Install: l.spec.Install}
}
