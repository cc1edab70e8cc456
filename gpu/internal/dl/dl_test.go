package dl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenOrderAndMessages(t *testing.T) {
	if !Available {
		t.Skip("built without cgo: nocgo_test.go checks Open's error instead")
	}
	dir := t.TempDir()
	// A file that exists but is no library: dlopen's reason is kept.
	bad := filepath.Join(dir, "c.so")
	require.NoError(t, os.WriteFile(bad, []byte("not an ELF file"), 0o644))
	spec := Spec{What: "Widget", Env: "METAROCE_TEST_WIDGET_LIB", Install: "libwidget",
		Search: func() []Place {
			return []Place{
				{Why: "the dynamic linker's path", Files: []string{"libmetaroce-test-none.so"}},
				{Dirs: []string{"/nonexistent", "/nonexistent/dir*", dir}, Files: []string{"a.so", "c.so"}},
			}
		}}

	t.Setenv(spec.Env, "")
	_, err := Open(spec, "")
	require.Error(t, err)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "cannot load the Widget library: "+bad+" ("), msg)
	require.True(t, strings.HasSuffix(msg, "); looked for libmetaroce-test-none.so in the dynamic linker's path; "+
		"for a.so, c.so in /nonexistent, /nonexistent/dir*, "+dir+
		"; install libwidget or set METAROCE_TEST_WIDGET_LIB to the library's full path"), msg)
	require.NotContains(t, msg, "libmetaroce-test-none.so (", "a soname that matched nothing is in the list, without dlopen's reason")
	var le *LoadError
	require.ErrorAs(t, err, &le)
	require.Equal(t, []string{"libmetaroce-test-none.so", bad}, []string{le.Tried[0].Path, le.Tried[1].Path},
		"sonames go to dlopen as they are; in directories only files that exist are tried")

	t.Setenv(spec.Env, "/nonexistent/env.so")
	_, err = Open(spec, "")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/env.so") || strings.Contains(err.Error(), "a.so") ||
		!strings.HasSuffix(err.Error(), "check the path given (or METAROCE_TEST_WIDGET_LIB)") {
		t.Fatalf("variable failure: %v", err)
	}

	_, err = Open(Spec{What: "Gadget", Install: "libgadget"}, "")
	if err == nil || err.Error() != "cannot load the Gadget library: no candidate path exists; install libgadget" {
		t.Fatalf("empty search: %v", err)
	}
}

func TestGlobAndSymbols(t *testing.T) {
	if !Available {
		t.Skip("built without cgo: no library can be loaded")
	}
	dir := t.TempDir()
	libc := "libc.so.6"
	// A glob that matches: a symlink to libc in a temporary directory.
	l, err := Open(Spec{What: "C"}, libc)
	if err != nil {
		t.Skipf("no %s to test with: %v", libc, err)
	}
	real := ""
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			real = p
			break
		}
	}
	if real != "" {
		if err := os.Symlink(real, filepath.Join(dir, "libc-copy.so")); err != nil {
			t.Fatal(err)
		}
		g, err := Open(Spec{What: "C", Search: func() []Place {
			return []Place{{Dirs: []string{dir}, Files: []string{"libc-*.so"}}}
		}}, "")
		if err != nil || g.Path() != filepath.Join(dir, "libc-copy.so") {
			t.Fatalf("glob candidate: %v, %v", g, err)
		}
	}
	if !l.Has("malloc") || l.Has("no_such_symbol_here") {
		t.Error("Has disagrees with libc's exports")
	}
	_, err = l.Sym("no_such_symbol_here")
	if err == nil || !strings.Contains(err.Error(), "the C library libc.so.6 has no symbol no_such_symbol_here (") {
		t.Fatalf("symbol error: %v", err)
	}

	// The remedy reads as a sentence whatever Install starts with: the
	// specs say "the CUDA runtime (...)" or "ROCm's HIP runtime (...)".
	r, err := Open(Spec{What: "CUDA runtime", Env: "METAROCE_TEST_RT_LIB", Install: "the CUDA runtime (libcudart)"}, libc)
	require.NoError(t, err)
	_, err = r.Sym("cudaMalloc")
	require.ErrorContains(t, err, "it is too old or not a CUDA runtime library; install a current version of the CUDA runtime (libcudart) or set METAROCE_TEST_RT_LIB to another library")
}
