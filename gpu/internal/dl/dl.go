// Package dl opens shared libraries with dlopen and resolves their symbols, so
// that the GPU packages build and test on machines without any GPU SDK: every
// vendor library is found at run time, never at link time.
//
// Failures are reported as *LoadError and *SymbolError, whose messages name the
// library, the symbol and the remedy (what to install, which variable to set).
package dl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// mr_dlopen opens path and, on failure, copies dlerror's text into err in the
// same C call, because dlerror's state belongs to the calling OS thread and a
// goroutine may change threads between two cgo calls.
static void *mr_dlopen(const char *path, char *err, size_t errlen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		strncpy(err, e ? e : "unknown dlopen error", errlen - 1);
		err[errlen - 1] = 0;
	}
	return h;
}

static void *mr_dlsym(void *h, const char *name, char *err, size_t errlen) {
	dlerror();
	void *p = dlsym(h, name);
	if (p == NULL) {
		const char *e = dlerror();
		strncpy(err, e ? e : "symbol resolves to NULL", errlen - 1);
		err[errlen - 1] = 0;
	}
	return p;
}
*/
import "C"

import (
	"os"
	"path/filepath"
	"unsafe"
)

// errLen is the size of the buffer that receives dlerror's text, in bytes.
const errLen = 512

// Spec describes a library to find: what it is for, where it may live, and
// how the user can help when it is not found.
type Spec struct {
	// What names the library in messages, e.g. "RCCL/NCCL".
	What string
	// Env is the environment variable that names the library's path; when it
	// is set, only that path is tried.
	Env string
	// Candidates are tried in order: bare sonames go through the dynamic
	// linker's own search (LD_LIBRARY_PATH, ld.so.cache), absolute paths and
	// glob patterns are tried as given.
	Candidates []string
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
// over the environment variable, which wins over the candidate list.
func Open(s Spec, path string) (*Lib, error) {
	var tries []string
	switch {
	case path != "":
		tries = []string{path}
	case s.Env != "" && os.Getenv(s.Env) != "":
		tries = []string{os.Getenv(s.Env)}
	default:
		tries = expand(s.Candidates)
	}
	lerr := &LoadError{What: s.What, Env: s.Env, Install: s.Install, Explicit: path != "" || (s.Env != "" && os.Getenv(s.Env) != "")}
	for _, p := range tries {
		h, msg := open(p)
		if h != nil {
			return &Lib{h: h, path: p, spec: s}, nil
		}
		lerr.Tried = append(lerr.Tried, Attempt{Path: p, Reason: msg})
	}
	return nil, lerr
}

// expand replaces glob patterns (those containing '*') by their matches in
// lexical order; other candidates pass through unchanged.
func expand(cands []string) []string {
	var out []string
	for _, c := range cands {
		if !containsGlob(c) {
			out = append(out, c)
			continue
		}
		m, _ := filepath.Glob(c) // only ErrBadPattern, impossible for our constants
		out = append(out, m...)
	}
	return out
}

func containsGlob(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '*' {
			return true
		}
	}
	return false
}

func open(path string) (unsafe.Pointer, string) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [errLen]C.char
	h := C.mr_dlopen(cpath, &buf[0], errLen)
	if h == nil {
		return nil, C.GoString(&buf[0])
	}
	return h, ""
}

// Sym resolves name in the library. The result is a C function or data
// address, safe to keep and to pass to C.
func (l *Lib) Sym(name string) (unsafe.Pointer, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var buf [errLen]C.char
	p := C.mr_dlsym(l.h, cname, &buf[0], errLen)
	if p == nil {
		return nil, &SymbolError{What: l.spec.What, Path: l.path, Symbol: name, Reason: C.GoString(&buf[0]), Env: l.spec.Env, Install: l.spec.Install}
	}
	return p, nil
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
