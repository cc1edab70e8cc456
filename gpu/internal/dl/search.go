package dl

import (
	"path/filepath"
	"strings"
)

// Place is one location searched for a library: a group of directories and
// the file names looked for in each, or, without directories, sonames left to
// the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache, the system
// library directories).
type Place struct {
	// Why names the place in the not-found message: the variable it comes
	// from ("$VIRTUAL_ENV", "LD_LIBRARY_PATH") or what it is ("the dynamic
	// linker's path"). Empty for places whose directories say it all.
	Why string
	// Dirs are directories or glob patterns of directories
	// ("/usr/lib/python3*/site-packages"), searched in order.
	Dirs []string
	// Files are file names, or paths and glob patterns relative to each of
	// Dirs ("nvidia/nccl/lib/libnccl.so*"). Without Dirs they are sonames
	// handed to dlopen as they are.
	Files []string
}

// Candidates returns, in order, what Open hands to dlopen when neither a path
// nor the variable names the library: the sonames of places without
// directories as given, and for the others the files that exist, each glob
// expanded in lexical order. A path is listed once, at its first place.
//
// Finding is kept apart from loading so that the search order can be
// checked against fake directory trees, without loading anything.
func Candidates(places []Place) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range clean(places) {
		if len(p.Dirs) == 0 {
			for _, f := range p.Files {
				if !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
			}
			continue
		}
		for _, d := range p.Dirs {
			for _, f := range p.Files {
				// Glob of a pattern without metacharacters reports the
				// path only if it exists; the error is only
				// ErrBadPattern, which leaves nothing to try.
				m, _ := filepath.Glob(filepath.Join(d, f))
				for _, c := range m {
					if !seen[c] {
						seen[c] = true
						out = append(out, c)
					}
				}
			}
		}
	}
	return out
}

// clean drops empty places and every directory already searched for the same
// files by an earlier place, e.g. $CONDA_PREFIX's site-packages when the
// environment is the system's /opt/conda, so that neither the search nor its
// message repeats a directory.
func clean(places []Place) []Place {
	var out []Place
	seen := map[string]bool{}
	for _, p := range places {
		if len(p.Files) == 0 {
			continue
		}
		if len(p.Dirs) == 0 {
			out = append(out, p)
			continue
		}
		files := strings.Join(p.Files, "\x00")
		q := Place{Why: p.Why, Files: p.Files}
		for _, d := range p.Dirs {
			if d == "" || seen[d+"\x00"+files] {
				continue
			}
			seen[d+"\x00"+files] = true
			q.Dirs = append(q.Dirs, d)
		}
		if len(q.Dirs) > 0 {
			out = append(out, q)
		}
	}
	return out
}

// describe renders places compactly for the not-found message: places that
// look for the same files share one clause, "for F1, F2 in P1, P2", in the
// order of their first place; within a clause places keep their order.
func describe(places []Place) string {
	type clause struct {
		files  []string
		places []string
	}
	var clauses []*clause
	byFiles := map[string]*clause{}
	for _, p := range clean(places) {
		key := strings.Join(p.Files, "\x00")
		c := byFiles[key]
		if c == nil {
			c = &clause{files: p.Files}
			byFiles[key] = c
			clauses = append(clauses, c)
		}
		var s string
		switch {
		case len(p.Dirs) == 0:
			s = p.Why
		case p.Why == "":
			s = strings.Join(p.Dirs, ", ")
		default:
			s = p.Why + " (" + strings.Join(p.Dirs, ", ") + ")"
		}
		c.places = append(c.places, s)
	}
	var b strings.Builder
	for i, c := range clauses {
		if i == 0 {
			b.WriteString("looked for ")
		} else {
			b.WriteString("; for ")
		}
		b.WriteString(strings.Join(c.files, ", "))
		b.WriteString(" in ")
		b.WriteString(strings.Join(c.places, ", "))
	}
	return b.String()
}

// notFound reports whether dlopen's reason for p only says that no file of
// that name exists, which the list of places searched already tells.
func notFound(p, reason string) bool {
	return strings.HasPrefix(reason, p+": ") && strings.HasSuffix(reason, "No such file or directory")
}
