//go:build cgo

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

import "unsafe"

// Available reports whether this build can load libraries: true with cgo,
// false without (nocgo.go). Tests of the loading paths skip on false.
const Available = true

// errLen is the size of the buffer that receives dlerror's text, in bytes.
const errLen = 512

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
