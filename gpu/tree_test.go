package gpu

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// loadTree reads a fake filesystem from a testdata file. Lines before the
// first header are a description; each "-- path --" header starts a file
// whose content is the lines up to the next header. Trees live in one file
// rather than as real directories because sysfs names contain ':', which Go
// module archives do not allow in file names.
func loadTree(t *testing.T, name string) fstest.MapFS {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	var cur string
	var body strings.Builder
	flush := func() {
		if cur != "" {
			fsys[cur] = &fstest.MapFile{Data: []byte(body.String()), Mode: 0o444}
		}
		body.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
			flush()
			cur = strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --")
			continue
		}
		if cur != "" {
			body.WriteString(line + "\n")
		}
	}
	flush()
	return fsys
}
