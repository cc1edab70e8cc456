#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 3s).
# Usage: scripts/fuzz.sh [FUZZTIME]
#
# Targets are found in the *_test.go files of the tree, not through git, so
# that a release tarball (no .git) fuzzes as a checkout does. Directories the
# go command ignores (vendor, testdata, names starting with . or _, and
# nested modules, which are not packages of this one) are skipped. A
# directory find cannot read is reported and the rest still fuzzed. Finding
# no target at all is an error: it means the search is broken, and passing
# then would hide that nothing was fuzzed.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-${FUZZTIME:-3s}}"
fail=0
log=$(mktemp)
findlog=$(mktemp)
trap 'rm -f "$log" "$findlog"' EXIT

# in_nested_module reports whether file (./dir/x_test.go) lies in a module
# of its own below the root: a go.mod in one of its directories.
in_nested_module() {
	local d
	d=$(dirname "$1")
	while [ "$d" != "." ]; do
		if [ -f "$d/go.mod" ]; then
			return 0
		fi
		d=$(dirname "$d")
	done
	return 1
}

# fuzz_files prints, sorted, the test files that declare a fuzz target.
fuzz_files() {
	{
		find . \( -name vendor -o -name testdata -o -name '.?*' -o -name '_*' \) -prune -o \
			-type f -name '*_test.go' -print 2>"$findlog" || true
	} |
		LC_ALL=C sort |
		while IFS= read -r file; do
			if ! in_nested_module "$file" && grep -qE '^func Fuzz[A-Za-z0-9_]+\(' "$file"; then
				echo "${file#./}"
			fi
		done
}

files=$(fuzz_files)
if [ -s "$findlog" ]; then
	echo "fuzz.sh: warning: some directories could not be searched; their targets are not run:" >&2
	cat "$findlog" >&2
fi
if [ -z "$files" ]; then
	echo "fuzz.sh: no fuzz targets (func FuzzXxx in a *_test.go file) found under $(pwd)" >&2
	exit 1
fi
targets=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		targets=$((targets + 1))
		echo "fuzz $pkg $target ($t)"
		for try in 1 2; do
			if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg" >"$log" 2>&1; then
				break
			fi
			# The fuzzing engine itself sometimes stops a short run with
			# "context deadline exceeded" on a loaded machine, with no
			# failing input: that says nothing about the code, so run the
			# target once more. A real finding writes its input.
			if [ "$try" = 1 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
				echo "fuzz $pkg $target: the fuzzing engine timed out without a finding; running it again"
				continue
			fi
			cat "$log"
			fail=1
			break
		done
	done
done <<<"$files"
echo "fuzz.sh: $targets fuzz target(s) run"
exit $fail
