package dl

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoCgo is why every load fails in a program built without cgo
// (CGO_ENABLED=0): dlopen is reached only through C. Callers that want to
// tell this apart from a missing library test for it with errors.Is.
var ErrNoCgo = errors.New("not available: built without cgo (CGO_ENABLED=0), so no shared library can be loaded; rebuild with a C compiler (gcc) and CGO_ENABLED=1")

// Attempt is one path that dlopen refused, with the dynamic linker's reason.
type Attempt struct {
	Path   string
	Reason string
}

// LoadError reports that no candidate of a library could be opened. Its
// message lists the paths that dlopen refused with the linker's reason, then,
// after a search, every place looked in, and ends with the remedy: what to
// install, or which variable names the library's path.
type LoadError struct {
	What     string
	Env      string
	Install  string
	Explicit bool // the path came from the caller or from Env, not a search
	Tried    []Attempt
	// Searched are the places of the search, without repeats; empty when
	// the path was explicit.
	Searched []Place
	// Err, when set, is why no path was tried at all (ErrNoCgo); the
	// message is then that reason instead of the paths and the remedy.
	Err error
}

func (e *LoadError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("cannot load the %s library: %v", e.What, e.Err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cannot load the %s library", e.What)
	sep := ": "
	for _, a := range e.Tried {
		// After a search, a name that matched no file is in the list of
		// places; only a file that exists and failed to load (a missing
		// dependency, the wrong architecture) needs its reason.
		if !e.Explicit && notFound(a.Path, a.Reason) {
			continue
		}
		fmt.Fprintf(&b, "%s%s (%s)", sep, a.Path, a.Reason)
		sep = "; "
	}
	switch {
	case len(e.Searched) > 0:
		if sep == ": " {
			b.WriteString(": none found")
		}
		b.WriteString("; " + describe(e.Searched))
	case len(e.Tried) == 0:
		b.WriteString(": no candidate path exists")
	}
	switch {
	case e.Explicit && e.Env != "":
		fmt.Fprintf(&b, "; check the path given (or %s)", e.Env)
	case e.Env != "":
		fmt.Fprintf(&b, "; install %s or set %s to the library's full path", e.Install, e.Env)
	default:
		fmt.Fprintf(&b, "; install %s", e.Install)
	}
	return b.String()
}

// Unwrap returns the reason no path was tried, nil when paths were tried.
func (e *LoadError) Unwrap() error { return e.Err }

// SymbolError reports that an opened library lacks a symbol, usually because
// it is too old or not the library it was taken for.
type SymbolError struct {
	What    string
	Path    string
	Symbol  string
	Reason  string
	Env     string
	Install string
}

func (e *SymbolError) Error() string {
	msg := fmt.Sprintf("the %s library %s has no symbol %s (%s): it is too old or not a %s library; install a current version of %s",
		e.What, e.Path, e.Symbol, e.Reason, e.What, e.Install)
	if e.Env != "" {
		msg += " or set " + e.Env + " to another library"
	}
	return msg
}
