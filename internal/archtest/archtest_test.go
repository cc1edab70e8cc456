package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goCmd runs the go command in dir and returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	cmd := exec.Command(gobin, args...)
	cmd.Dir = dir
	// CGO_ENABLED=1 so that files importing "C" are listed (go list does
	// not compile anything, so no C compiler is needed).
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// loadModule lists every package of the module and its dependencies.
func loadModule(t *testing.T) *Graph {
	t.Helper()
	gomod := strings.TrimSpace(string(goCmd(t, ".", "env", "GOMOD")))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside a module")
	}
	root := filepath.Dir(gomod)
	module := strings.TrimSpace(string(goCmd(t, root, "list", "-m", "-f", "{{.Path}}")))
	out := goCmd(t, root, "list", "-e", "-deps", "-json=ImportPath,Imports,Deps,Standard,Error", "./...")
	type listed struct {
		Package
		Error *struct{ Err string }
	}
	var pkgs []*Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		if p.Error != nil {
			// Another package failing to load is that package's test's
			// business; its imports are still listed.
			t.Logf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, &p.Package)
	}
	return NewGraph(module, pkgs)
}

// TestLayering checks the whole module against Rules.
func TestLayering(t *testing.T) {
	g := loadModule(t)
	if _, ok := g.Pkgs[g.Module+"/transport/wire"]; !ok {
		t.Fatalf("go list did not report %s/transport/wire: wrong directory or module?", g.Module)
	}
	vs, skipped := Check(g, Rules)
	for _, r := range skipped {
		t.Logf("rule %q: no such package yet, skipped", r.Pkg)
	}
	for _, v := range vs {
		t.Error(v)
	}
}

// TestRulesWellFormed guards the table itself: every pattern is a clean
// module-relative path or an import path, and no package is named twice.
func TestRulesWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rules {
		if seen[r.Pkg] {
			t.Errorf("rule for %q twice", r.Pkg)
		}
		seen[r.Pkg] = true
		if r.Why == "" {
			t.Errorf("rule %q gives no reason", r.Pkg)
		}
		for _, p := range slices.Concat([]string{r.Pkg}, r.Ours, r.OnlyOurs) {
			if p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, ".") || strings.Contains(p, "github.com") {
				t.Errorf("rule %q: %q is not a module-relative path", r.Pkg, p)
			}
		}
	}
}

// synthetic builds a graph from "pkg: import import …" lines; module packages
// start with "m/". Deps are computed from the imports.
func synthetic(lines ...string) *Graph {
	imports := map[string][]string{}
	for _, l := range lines {
		pkg, imps, _ := strings.Cut(l, ":")
		imports[strings.TrimSpace(pkg)] = strings.Fields(imps)
	}
	var pkgs []*Package
	for path, imps := range imports {
		seen := map[string]bool{}
		var walk func(string)
		walk = func(p string) {
			for _, i := range imports[p] {
				if !seen[i] {
					seen[i] = true
					walk(i)
				}
			}
		}
		walk(path)
		var deps []string
		for d := range seen {
			deps = append(deps, d)
		}
		slices.Sort(deps)
		first, _, _ := strings.Cut(path, "/")
		pkgs = append(pkgs, &Package{ImportPath: path, Imports: imps, Deps: deps,
			Standard: path != "C" && !strings.Contains(first, ".") && first != "m"})
	}
	g := NewGraph("m", pkgs)
	return g
}

// TestCheckerCatchesViolations runs the real rule table on a synthetic module
// that breaks each rule once, next to imports that are allowed.
func TestCheckerCatchesViolations(t *testing.T) {
	g := synthetic(
		// std: fmt reaches os and time indirectly; that must not count.
		"fmt: os errors", "os: time syscall", "time: errors", "syscall:", "errors:", "net:", "math/rand:",
		"math/rand/v2:", "encoding/binary:", "C:", "golang.org/x/sys/unix: syscall", "golang.org/x/net/ipv4: net",
		"example.com/lib: fmt",
		// allowed
		"m/transport/wire: fmt encoding/binary",
		"m/transport/cc: math/rand/v2 fmt",
		// violations
		"m/transport/wire/bad: m/transport/cc example.com/lib",
		"m/transport: m/transport/wire m/transport/cc time m/transport/helper",
		"m/transport/helper: golang.org/x/sys/unix",
		"m/transport/cc/bad: math/rand C",
		"m/transport/rocev2: m/transport/wire m/transport/cc m/internal/eventq m/transport",
		"m/internal/eventq: time",
		"m/transport/udp: m/transport net golang.org/x/net/ipv4",
		"m/collectives: m/transport/udp",
		"m/fabric/sim: m/collectives m/transport",
		"m/collectives/reduce: m/transport/wire",
		"m/collectives/sched/ring: fmt",
	)
	vs, skipped := Check(g, Rules)
	got := map[string]bool{}
	for _, v := range vs {
		k := v.Pkg + " -> " + v.Import
		if got[k] {
			t.Errorf("violation %s reported twice", k)
		}
		got[k] = true
		t.Log(v)
	}
	want := []string{
		"m/transport/wire/bad -> m/transport/cc",
		"m/transport/wire/bad -> example.com/lib",
		"m/transport -> time",
		"m/transport -> golang.org/x/sys/unix",
		"m/transport/cc/bad -> math/rand",
		"m/transport/cc/bad -> C",
		"m/transport/rocev2 -> m/transport",
		"m/transport/rocev2 -> m/transport/helper",
		"m/transport/rocev2 -> golang.org/x/sys/unix",
		"m/fabric/sim -> m/transport/udp",
		"m/collectives/reduce -> m/transport/wire",
		"m/internal/eventq -> time",
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("missed violation %s", w)
		}
		delete(got, w)
	}
	for extra := range got {
		t.Errorf("false violation %s", extra)
	}
	if len(skipped) != 0 {
		t.Errorf("skipped %d rules, every rule has a package here", len(skipped))
	}

	// The chain names the way in.
	for _, v := range vs {
		if v.Pkg == "m/fabric/sim" {
			if want := []string{"m/fabric/sim", "m/collectives", "m/transport/udp"}; !slices.Equal(v.Via, want) {
				t.Errorf("chain %v, want %v", v.Via, want)
			}
		}
	}

	// A module without any of the ruled packages skips every rule.
	_, skipped = Check(synthetic("m/other: fmt", "fmt:"), Rules)
	if len(skipped) != len(Rules) {
		t.Errorf("skipped %d of %d rules", len(skipped), len(Rules))
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"net", "net", true}, {"net", "net/netip", false}, {"net/...", "net", true},
		{"net/...", "net/netip", true}, {"net/...", "network", false}, {"math/rand", "math/rand/v2", false},
		{"transport/...", "transport", true}, {"transport", "transport/wire", false},
	} {
		if got := match(c.pattern, c.path); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.pattern, c.path, got)
		}
	}
}
