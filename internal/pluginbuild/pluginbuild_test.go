package pluginbuild

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestArgs: the SONAME and the version script reach the external linker
// as two fields, with the script's path quoted only where it has a space
// (go build and the linker each split their flags on spaces).
func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		root, ldflags string
	}{
		{"/src/metaroce", `-ldflags=-extldflags "-Wl,-soname,libnccl-net.so -Wl,--version-script=/src/metaroce/net-plugin/exports.map"`},
		{"/home/a b/metaroce", `-ldflags=-extldflags '-Wl,-soname,libnccl-net.so "-Wl,--version-script=/home/a b/metaroce/net-plugin/exports.map"'`},
	} {
		got := Args(tc.root, "libnccl-net.so", "/out/lib.so")
		assert.Equal(t, []string{"build", "-buildmode=c-shared", tc.ldflags, "-o", "/out/lib.so", "./net-plugin"}, got, tc.root)
	}
}
