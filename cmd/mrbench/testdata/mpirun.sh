#!/bin/sh
# mpirun.sh runs mrbench as a 4-process Open MPI job and checks that the job
# joined as one communicator: rank 0 alone prints, both tables are complete,
# and every element was right. It installs nothing; without mpirun it exits
# 0 after saying so.
#
# usage: mpirun.sh [path/to/mrbench]   (default build/mrbench)
set -eu
bin=${1:-build/mrbench}
if ! command -v mpirun >/dev/null 2>&1; then
	echo "mpirun.sh: mpirun not found (Debian: apt-get install openmpi-bin); skipping"
	exit 0
fi
if [ ! -x "$bin" ]; then
	echo "mpirun.sh: $bin is not an executable (make build)" >&2
	exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The rendezvous address: METAROCE_ROOT when set, else a port per run, so
# that concurrent runs do not meet, below Linux's default ephemeral range
# (32768-60999), so that no outgoing connection holds it by chance (with
# ports from 30000 to 49999, rank 0 once found its port taken in 46 runs).
root=${METAROCE_ROOT:-127.0.0.1:$((20000 + $$ % 12000))}
mpirun --allow-run-as-root --oversubscribe -np 4 -x METAROCE_ROOT="$root" \
	"$bin" -b 64 -e 64K -f 32 -n 3 -w 1 --timeout 30s >"$out"
fail() {
	echo "mpirun.sh: $*" >&2
	cat "$out" >&2
	exit 1
}
[ "$(grep -c '^# nThread ' "$out")" -eq 2 ] || fail "want 2 tables (MetaRoCE, TCP) printed once"
[ "$(grep -c '^# Out of bounds values : 0 OK$' "$out")" -eq 2 ] || fail "a table did not finish OK"
grep -q '^#  Rank  3 ' "$out" || fail "rank 3 missing from the device list"
grep -q '^# collective: allreduce, 4 ranks on 1 host(s), launcher: ' "$out" || fail "header does not show 4 ranks"
rows=$(grep -vc '^#' "$out" || true)
[ "$rows" -eq 6 ] || fail "want 6 data rows (64 B, 2 KiB, 64 KiB per table), have $rows"
# Fields 9 and 13 are #wrong (out-of-place, in-place).
bad=$(grep -v '^#' "$out" | awk '$9 != 0 || $13 != 0' | wc -l)
[ "$bad" -eq 0 ] || fail "$bad rows with wrong elements"
echo "mpirun.sh: OK (4 ranks, 2 tables, 6 rows, no wrong elements)"
