// Package pluginbuild gives the one go build command line of the NCCL net
// plugin, for the tests and tools that build it outside the Makefile (whose
// plugin rule passes the same flags), so that every copy under test has the
// Makefile's symbols and SONAME.
package pluginbuild

import (
	"path/filepath"
	"strings"
)

// Args returns the arguments of `go build` (after "go") that build the
// c-shared plugin of the module at root into out, with SONAME soname and
// the dynamic symbols of net-plugin/exports.map only.
func Args(root, soname, out string) []string {
	script := filepath.Join(root, "net-plugin", "exports.map")
	// go build splits -ldflags, and the linker -extldflags, on spaces,
	// keeping a field that quotes surround whole: quote the script's
	// path for the inner split, the whole list for the outer one.
	ext := "-Wl,-soname," + soname + " " + quote("-Wl,--version-script="+script)
	return []string{"build", "-buildmode=c-shared", "-ldflags=-extldflags " + quote(ext), "-o", out, "./net-plugin"}
}

// quote surrounds s with the quote character it does not contain, if it
// has a space (a field without one needs none).
func quote(s string) string {
	if !strings.ContainsAny(s, " \t\n\r") {
		return s
	}
	if strings.Contains(s, `"`) {
		return "'" + s + "'"
	}
	return `"` + s + `"`
}
