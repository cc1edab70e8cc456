package gpu

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/metaroce/metaroce/gpu/internal/dl"
)

// LibSearch says where one GPU library (RCCL/NCCL, the HIP or CUDA runtime)
// may be, when neither a path nor its METAROCE_*_LIB variable names it.
// Places turns it into the ordered search.
type LibSearch struct {
	// Names are the library's file names, sonames first ("librccl.so",
	// "libnccl.so.2"), looked for in the directories of LD_LIBRARY_PATH and
	// in $CONDA_PREFIX/lib.
	Names []string
	// Python are paths below a site-packages directory, globs allowed, where
	// pip wheels keep the library: PyTorch's own copies under torch/lib,
	// NVIDIA's wheels (nvidia-nccl-cu12, ...) under nvidia/*/lib.
	Python []string
	// System are the machine's own places, in order: the dynamic linker's
	// search by soname (a Place without directories) and vendor directories
	// such as /opt/rocm/lib.
	System []dl.Place
}

// Variables the search reads, besides each library's METAROCE_*_LIB.
const (
	EnvLDLibraryPath  = "LD_LIBRARY_PATH"
	EnvVirtualEnv     = "VIRTUAL_ENV"
	EnvCondaPrefix    = "CONDA_PREFIX"
	EnvPythonUserBase = "PYTHONUSERBASE"
)

// Linker is the place for names left to the dynamic linker's own search:
// LD_LIBRARY_PATH as the process started with it, then ld.so.cache and the
// system library directories, where distribution packages install.
func Linker(names ...string) dl.Place {
	return dl.Place{Why: "the dynamic linker's path", Files: names}
}

// systemSitePackages are where a Python installed for the whole machine
// keeps packages, in the order searched: the distribution's Python (Debian's
// dist-packages, others' site-packages; lib64 is where Fedora and RHEL put
// packages with compiled code, such as PyTorch), then pip run as root
// (/usr/local), then a conda installed as the system's Python (/opt/conda,
// as in PyTorch's Docker images).
var systemSitePackages = []string{
	"/usr/lib/python3*/site-packages",
	"/usr/lib/python3/dist-packages",
	"/usr/lib64/python3*/site-packages",
	"/usr/local/lib/python3*/dist-packages",
	"/usr/local/lib/python3*/site-packages",
	"/usr/local/lib64/python3*/site-packages",
	"/opt/conda/lib/python3*/site-packages",
}

// sitePackages is the site-packages directory pattern of a Python prefix (a
// virtualenv, a conda environment, the user base): prefix/lib/python3.X/.
func sitePackages(prefix string) string {
	return filepath.Join(globQuote(prefix), "lib", "python3*", "site-packages")
}

// globQuote escapes the glob metacharacters of a directory taken from the
// environment, which the search matches as a pattern: a path with '[' or
// '*' in it would otherwise match nothing, or other directories.
func globQuote(dir string) string {
	// Byte by byte: the metacharacters are ASCII, and a directory name
	// need not be UTF-8.
	var b strings.Builder
	for i := 0; i < len(dir); i++ {
		if strings.IndexByte(`*?[\`, dir[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(dir[i])
	}
	return b.String()
}

// Places returns the search, most specific first: what the user set for
// this process, then the Python environment that is active, then the user's
// own packages, then the machine's. The environment is read at each call.
//
//  1. The directories of LD_LIBRARY_PATH, for Names: the user's explicit
//     choice of libraries. The dynamic linker searches them too, but only
//     together with the system's directories, after the places below.
//  2. $VIRTUAL_ENV's site-packages, for Python: an activated virtualenv is
//     where most users have PyTorch, and its wheels' libraries are the ones
//     that PyTorch itself loads in that shell.
//  3. $CONDA_PREFIX's site-packages, for Python, then $CONDA_PREFIX/lib, for
//     Names: an activated conda environment holds pip wheels in the first
//     and conda's own nccl, rccl and cudatoolkit packages in the second.
//     A virtualenv made inside a conda environment comes first: its Python
//     is the one on PATH.
//  4. The user's site-packages ($PYTHONUSERBASE, by default ~/.local), for
//     Python: where "pip install --user" puts PyTorch.
//  5. System, in its order: the dynamic linker's search by soname and the
//     vendor directories (/opt/rocm/lib, ...), as before these places were
//     added, so that a machine with system libraries, no environment and
//     no user packages finds the same library as before. (A caller that
//     prefers one library to another anywhere, as RCCL to NCCL, searches
//     all places for the first before any for the second.)
//  6. The system Python's site-packages (systemSitePackages), for Python.
//
// Places whose variable is unset or empty are left out; a directory already
// searched earlier (CONDA_PREFIX=/opt/conda) is searched once.
func (s LibSearch) Places() []dl.Place {
	var out []dl.Place
	if v := os.Getenv(EnvLDLibraryPath); v != "" {
		var dirs []string
		for _, d := range strings.Split(v, ":") {
			// An empty entry is the current directory to the dynamic
			// linker; nothing is loaded from there unasked.
			if d != "" {
				dirs = append(dirs, globQuote(d))
			}
		}
		if len(dirs) > 0 {
			out = append(out, dl.Place{Why: EnvLDLibraryPath, Dirs: dirs, Files: s.Names})
		}
	}
	if v := os.Getenv(EnvVirtualEnv); v != "" {
		out = append(out, dl.Place{Why: "$" + EnvVirtualEnv, Dirs: []string{sitePackages(v)}, Files: s.Python})
	}
	if v := os.Getenv(EnvCondaPrefix); v != "" {
		out = append(out,
			dl.Place{Why: "$" + EnvCondaPrefix, Dirs: []string{sitePackages(v)}, Files: s.Python},
			dl.Place{Why: "$" + EnvCondaPrefix, Dirs: []string{filepath.Join(globQuote(v), "lib")}, Files: s.Names})
	}
	if base := userBase(); base != "" {
		out = append(out, dl.Place{Why: "user site-packages", Dirs: []string{sitePackages(base)}, Files: s.Python})
	}
	out = append(out, s.System...)
	out = append(out, dl.Place{Dirs: systemSitePackages, Files: s.Python})
	return out
}

// userBase is Python's user base directory, as site.getuserbase() finds it
// on Linux: $PYTHONUSERBASE, else ~/.local; empty without either.
func userBase() string {
	if v := os.Getenv(EnvPythonUserBase); v != "" {
		return v
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local")
	}
	return ""
}
