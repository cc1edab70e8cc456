package dl

import (
	"fmt"
	"strings"
)

// Attempt is one path that dlopen refused, with the dynamic linker's reason.
type Attempt struct {
	Path   string
	Reason string
}

// LoadError reports that no candidate of a library could be opened. Its
// message lists every path tried with the linker's reason and ends with the
// remedy: what to install, or which variable names the library's path.
type LoadError struct {
	What     string
	Env      string
	Install  string
	Explicit bool // the path came from the caller or from Env, not a search
	Tried    []Attempt
}

func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot load the %s library", e.What)
	if len(e.Tried) == 0 {
		b.WriteString(": no candidate path exists")
	}
	for i, a := range e.Tried {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", a.Path, a.Reason)
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
