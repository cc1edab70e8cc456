#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 3s).
# Usage: scripts/fuzz.sh [FUZZTIME]
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-${FUZZTIME:-3s}}"
fail=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		echo "fuzz $pkg $target ($t)"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg" >/tmp/metaroce-fuzz.$$ 2>&1; then
			cat /tmp/metaroce-fuzz.$$
			fail=1
		fi
	done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort)
rm -f /tmp/metaroce-fuzz.$$
exit $fail
