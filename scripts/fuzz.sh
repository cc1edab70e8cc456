#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 3s).
# Usage: scripts/fuzz.sh [FUZZTIME]
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-${FUZZTIME:-3s}}"
fail=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
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
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort)
exit $fail
