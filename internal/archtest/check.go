package archtest

import (
	"fmt"
	"slices"
	"strings"
)

// Package is the part of `go list -json` output the checker needs.
type Package struct {
	ImportPath string
	Imports    []string // direct imports of the non-test files
	Deps       []string // the transitive closure of Imports
	Standard   bool     // part of the standard library
}

// Graph is the import graph of a module: its packages and everything they
// depend on, keyed by import path.
type Graph struct {
	Module string // module path, e.g. github.com/metaroce/metaroce
	Pkgs   map[string]*Package
}

// NewGraph indexes pkgs (as listed by `go list -deps`) by import path.
func NewGraph(module string, pkgs []*Package) *Graph {
	g := &Graph{Module: module, Pkgs: make(map[string]*Package, len(pkgs))}
	for _, p := range pkgs {
		g.Pkgs[p.ImportPath] = p
	}
	return g
}

// Violation is one forbidden import.
type Violation struct {
	Pkg    string   // the package the rule applies to
	Import string   // the forbidden package
	Via    []string // an import chain from Pkg to Import, both included
	Rule   Rule
}

func (v Violation) String() string {
	return fmt.Sprintf("%s imports %s (via %s): rule %q: %s",
		v.Pkg, v.Import, strings.Join(v.Via, " -> "), v.Rule.Pkg, v.Rule.Why)
}

// match reports whether path matches pattern ("x" or "x/...").
func match(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// rel returns path relative to the module, and whether it is in the module.
func (g *Graph) rel(path string) (string, bool) {
	if path == g.Module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, g.Module+"/")
	return r, ok
}

// standard reports whether path is a standard-library package. "C" is not:
// it is cgo.
func (g *Graph) standard(path string) bool {
	if p, ok := g.Pkgs[path]; ok {
		return p.Standard
	}
	// Not listed (a synthetic graph): std paths have no dot in the first
	// element.
	first, _, _ := strings.Cut(path, "/")
	return path != "C" && !strings.Contains(first, ".")
}

// Check applies rules to every module package of g and returns the
// violations, and the rules that matched no package (skipped).
func Check(g *Graph, rules []Rule) (vs []Violation, skipped []Rule) {
	var ours []string
	for path := range g.Pkgs {
		if _, ok := g.rel(path); ok {
			ours = append(ours, path)
		}
	}
	slices.Sort(ours)
	for _, r := range rules {
		matched := false
		for _, path := range ours {
			rel, _ := g.rel(path)
			if !match(r.Pkg, rel) {
				continue
			}
			matched = true
			vs = append(vs, g.checkOne(r, g.Pkgs[path])...)
		}
		if !matched {
			skipped = append(skipped, r)
		}
	}
	return vs, skipped
}

func (g *Graph) checkOne(r Rule, p *Package) []Violation {
	var vs []Violation
	reported := map[string]bool{}
	bad := func(imp string) {
		if !reported[imp] {
			reported[imp] = true
			vs = append(vs, Violation{Pkg: p.ImportPath, Import: imp, Via: g.chain(p.ImportPath, imp), Rule: r})
		}
	}
	for _, imp := range p.Imports {
		if imp == "C" || g.standard(imp) {
			if matchAny(r.DirectStd, imp) {
				bad(imp)
			}
		}
	}
	// The closure, plus the direct imports in case Deps is incomplete (a
	// package with errors).
	closure := slices.Clone(p.Deps)
	closure = append(closure, p.Imports...)
	slices.Sort(closure)
	closure = slices.Compact(closure)
	for _, dep := range closure {
		if dep == p.ImportPath {
			continue
		}
		if rel, ok := g.rel(dep); ok {
			if matchAny(r.Ours, rel) || (r.OnlyOurs != nil && !matchAny(r.OnlyOurs, rel)) {
				bad(dep)
			}
			continue
		}
		if g.standard(dep) {
			continue
		}
		if matchAny(r.External, dep) || (r.StdOnly && dep != "C") {
			bad(dep)
		}
	}
	return vs
}

// chain finds a shortest import path from -> to through direct imports, for
// the error message; it falls back to the bare pair when the graph does not
// hold the intermediate packages.
func (g *Graph) chain(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var out []string
			for c := to; c != ""; c = prev[c] {
				out = append(out, c)
			}
			slices.Reverse(out)
			return out
		}
		p, ok := g.Pkgs[cur]
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return []string{from, to}
}
