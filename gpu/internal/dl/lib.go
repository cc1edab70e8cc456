// Package dl opens shared libraries with dlopen and resolves their symbols, so
// that the GPU packages build and test on machines without any GPU SDK: every
// vendor library is found at run time, never at link time.
//
// Finding is apart from loading: Candidates turns the places of a search
// into the paths and sonames Open hands to dlopen, so the search order is
// tested on fake directory trees without loading anything.
//
// Failures are reported as *LoadError and *SymbolError, whose messages name the
// library, the places searched, the symbol and the remedy (what to install,
// which variable to set).
//
// dlopen is a C function, so loading needs cgo. A program built without it
// (CGO_ENABLED=0, as on a machine without a C compiler) still compiles and
// links this package: Open then fails with a *LoadError wrapping ErrNoCgo,
// and the GPU paths report that they are unavailable while host memory works.
package dl

import (
	"os"
	"unsafe"
)

// Spec describes a library to find: what it is for, where it may live, and
// how the user can help when it is not found.
type Spec struct {
	// What names the library in messages, e.g. "RCCL/NCCL".
	What string
	// Env is the environment variable that names the library's path; when it
	// is set, only that path is tried.
	Env string
	// Search returns, in order, the places to look when neither a path nor
	// Env names the library (see Candidates). It is called at each Open, so
	// that places taken from the environment ($VIRTUAL_ENV, LD_LIBRARY_PATH,
	// ...) are those of the moment. Nil searches nowhere.
	Search func() []Place
	// Install says what to install when nothing is found, e.g. "ROCm's rccl
	// package or NVIDIA's libnccl2".
	Install string
}

// Lib is an opened shared library. Handles are never closed: vendor GPU
// libraries keep driver state and threads that do not survive dlclose, and
// the dynamic linker reference-counts repeated opens of one path anyway.
type Lib struct {
	h    unsafe.Pointer
	path string
	spec Spec
}

// Path is the path or soname the library was opened with.
func (l *Lib) Path() string { return l.path }

// Open loads the library described by s. An explicit path (non-empty) wins
// over the environment variable, which wins over the search: the first of
// Candidates(s.Search()) that dlopen accepts.
func Open(s Spec, path string) (*Lib, error) {
	explicit := path != "" || (s.Env != "" && os.Getenv(s.Env) != "")
	lerr := &LoadError{What: s.What, Env: s.Env, Install: s.Install, Explicit: explicit}
	if !Available {
		// Listing every candidate with the same reason, and ending with
		// "install ...", would send the user after a library that is not
		// what is missing.
		lerr.Err = ErrNoCgo
		return nil, lerr
	}
	var tries []string
	switch {
	case path != "":
		tries = []string{path}
	case s.Env != "" && os.Getenv(s.Env) != "":
		tries = []string{os.Getenv(s.Env)}
	default:
		if s.Search != nil {
			lerr.Searched = clean(s.Search())
		}
		tries = Candidates(lerr.Searched)
	}
	for _, p := range tries {
		h, msg := open(p)
		if h != nil {
			return &Lib{h: h, path: p, spec: s}, nil
		}
		lerr.Tried = append(lerr.Tried, Attempt{Path: p, Reason: msg})
	}
	return nil, lerr
}

// Has reports whether the library exports name; used for optional entry
// points such as ncclAllToAll, which RCCL has and NCCL lacks.
func (l *Lib) Has(name string) bool {
	_, err := l.Sym(name)
	return err == nil
}

// Syms resolves every name in order and stores the addresses through the
// matching pointers; the first missing symbol is returned as the error.
func (l *Lib) Syms(names []string, into []*unsafe.Pointer) error {
	if len(names) != len(into) {
		panic("dl: Syms: names and targets differ in length")
	}
	for i, n := range names {
		p, err := l.Sym(n)
		if err != nil {
			return err
		}
		*into[i] = p
	}
	return nil
}
