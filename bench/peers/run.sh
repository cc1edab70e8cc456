#!/usr/bin/env bash
# run.sh measures, side by side in one run on this machine, the bus bandwidth
# of all-reduce (float32 sum) and all-to-all (float32) with mrbench over
# MetaRoCE and over kernel TCP, and with what users would pick instead: Open
# MPI with its default transports and with `--mca btl tcp,self`, and PyTorch's
# gloo backend. Every peer runs the same sizes and rank counts, and reports
# bus bandwidth with nccl-tests' formulas (all-reduce size/time*2(n-1)/n,
# all-to-all size/time*(n-1)/n). Each peer runs each collective and size in
# a process of its own, as mrbench does, so that no measurement starts on
# connections another collective warmed up. The machine is noisy: read the
# ratios, and use --rounds to take medians over interleaved rounds.
#
# A virtual machine's CPUs can also sit close together for minutes and far
# apart for the next minutes, as the host moves them, and every benchmark
# that crosses CPUs runs two to three times slower in the far state, peers
# and ours alike. bench/hostprobe measures that state (a UDP stream from
# one CPU to another) before and after every measurement, and the table's
# medians keep the measurements taken with both probes at 60% or more of
# the readings' 90th percentile (the slow state reads about a third of
# it); --no-probe takes every measurement instead.
#
# Needs: go, and for the peers Debian's openmpi-bin, libopenmpi-dev, gcc and
# libc6-dev (Open MPI) and python3-torch (gloo). Missing packages are named,
# with the command that installs them, and installed only with --install (as
# root, with apt-get). A peer whose tools are missing, or fail to install, is
# reported as skipped; the table still has the others.
set -euo pipefail

usage() {
	cat <<'EOF'
Usage: bench/peers/run.sh [--install] [--ranks "2 4"] [--sizes "1M 16M 64M"]
                          [--iters N] [--warmup N] [--min-bytes SIZE]
                          [--rounds N] [--peers LIST] [--raw FILE]
                          [--no-probe] [--table FILE]

  --install   install the missing Debian packages of the selected peers
              (Open MPI, python3-torch) with apt-get; needs root
  --ranks     rank counts to run (default "2 4")
  --sizes     buffer sizes, bytes with K/M/G suffixes (default "1M 16M 64M")
  --iters     timed iterations per size, at least (default 10)
  --warmup    warm-up iterations per size, at least (default 2)
  --min-bytes a size's timed iterations move at least this many bytes per
              rank: more iterations for small sizes, so that a 1 MiB cell
              is not over in a few milliseconds (default 256M; 0: --iters)
  --rounds    interleaved rounds, every other one running the peers in
              reverse order; the table shows medians (default 1)
  --peers     subset of: metaroce mrbench-tcp ompi ompi-tcp gloo (default all)
  --raw       also write every measurement (peer ranks collective bytes busbw
              probe-before probe-after; the probes in GB/s, "-" without)
  --no-probe  do not probe the host: the medians take every measurement
  --table     print the table of a --raw FILE again, running nothing
EOF
}

install=0
ranks="2 4"
sizes="1M 16M 64M"
iters=10
warmup=2
min_bytes=256M
rounds=1
peers="metaroce mrbench-tcp ompi ompi-tcp gloo"
raw=""
probe=1
table=""
while [ $# -gt 0 ]; do
	case "$1" in
	--install) install=1 ;;
	--ranks) ranks="$2"; shift ;;
	--sizes) sizes="$2"; shift ;;
	--iters) iters="$2"; shift ;;
	--warmup) warmup="$2"; shift ;;
	--min-bytes) min_bytes="$2"; shift ;;
	--rounds) rounds="$2"; shift ;;
	--peers) peers="$2"; shift ;;
	--raw) raw="$2"; shift ;;
	--no-probe) probe=0 ;;
	--table) table="$2"; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
for v in "$iters" "$rounds" "$warmup"; do
	case "$v" in '' | *[!0-9]*) echo "run.sh: --iters, --warmup and --rounds take whole numbers, got '$v'" >&2; exit 2 ;; esac
done
if [ "$iters" -lt 1 ] || [ "$rounds" -lt 1 ]; then
	echo "run.sh: --iters and --rounds must be at least 1" >&2
	exit 2
fi
for r in $ranks; do
	case "$r" in '' | *[!0-9]* | 0 | 1) echo "run.sh: rank count '$r': want 2 or more" >&2; exit 2 ;; esac
done
for p in $peers; do
	case "$p" in metaroce | mrbench-tcp | ompi | ompi-tcp | gloo) ;; *) echo "run.sh: unknown peer '$p'" >&2; exit 2 ;; esac
done

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results="$work/results"
: >"$results"
note() { echo "# $*" >&2; }

# Every benchmark runs under timeout, which puts it in a process group of its
# own so that a timeout ends its children too (mpirun's ranks, gloo's spawned
# processes). A Ctrl-C at the terminal therefore never reaches it: run_timed
# starts it in the background and waits in a way a signal interrupts, and on
# SIGINT, SIGTERM or SIGHUP the script ends that whole group, waits for it
# and exits (130, 143 or 129) instead of going on with the next cell. A
# second signal while it waits kills the group outright.
cur=""
kill_cur() { # $1: signal
	[ -n "$cur" ] || return 0
	kill -"$1" -- "-$cur" 2>/dev/null || kill -"$1" "$cur" 2>/dev/null || true
}
on_signal() { # $1: signal name, $2: exit status
	trap 'kill_cur KILL' INT TERM HUP
	note "interrupted by SIG$1: stopping the running benchmark; no table"
	if [ -n "$cur" ]; then
		kill_cur TERM
		while kill -0 "$cur" 2>/dev/null; do wait "$cur" 2>/dev/null || true; done
	fi
	exit "$2"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

# run_timed OUT CMD...: runs CMD for at most 600 s with its stdout in OUT and
# its stderr in $work/err, and returns its exit status (124: timed out).
run_timed() {
	local out=$1 rc=0
	shift
	timeout 600 "$@" >"$out" 2>"$work/err" </dev/null &
	cur=$!
	wait "$cur" || rc=$?
	cur=""
	if [ "$rc" = 124 ]; then
		echo "timed out after 600 s" >>"$work/err"
	fi
	return "$rc"
}

# bytes converts a size with a K/M/G suffix to bytes.
bytes() {
	local s=${1%[bB]} m=1
	case "$s" in
	*[kK]) m=1024; s=${s%?} ;;
	*[mM]) m=$((1 << 20)); s=${s%?} ;;
	*[gG]) m=$((1 << 30)); s=${s%?} ;;
	esac
	case "$s" in '' | *[!0-9]*) echo "run.sh: bad size '$1'" >&2; exit 2 ;; esac
	echo $((s * m))
}
size_bytes=""
for s in $sizes; do size_bytes="$size_bytes $(bytes "$s")"; done
min_b=$(bytes "$min_bytes")

# iters_for B and warmup_for B: the timed and warm-up iterations of a
# B-byte size: --iters, or enough for --min-bytes where that is more, and
# a tenth of that as warm-up where that is more than --warmup.
iters_for() {
	local b=$1 it=0
	[ "$b" -le 0 ] || it=$(((min_b + b - 1) / b))
	[ "$it" -gt "$iters" ] || it=$iters
	echo "$it"
}
warmup_for() {
	local w=$(($(iters_for "$1") / 10))
	[ "$w" -gt "$warmup" ] || w=$warmup
	echo "$w"
}

# The table: the median over rounds of each (peer, ranks, collective, size),
# and how many times MetaRoCE's figure is the peer's. With probe readings,
# a measurement counts when both readings are at least 60% of their 90th
# percentile; a cell with no such measurement takes all of its own,
# marked *.
print_table() {
	if [ -n "$table" ]; then
		echo "# table of $table (bench/peers/run.sh --table)"
	else
		local its="" b
		for b in $size_bytes; do its="$its $(iters_for "$b")/$(warmup_for "$b")"; done
		echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, iterations/warm-up per size$its, rounds $rounds; busbw with nccl-tests formulas, float32"
		echo "# command: bench/peers/run.sh --ranks \"$ranks\" --sizes \"$sizes\" --iters $iters --warmup $warmup --min-bytes $min_bytes --rounds $rounds --peers \"$peers\"$([ "$probe_asked" = 1 ] || echo " --no-probe")"
	fi
	awk -v order="$peers" -v probed="$probe" '
function median(key,   n, i, j, t, a, v) {
	v = (key in steady) ? steady[key] : vals[key]
	n = split(v, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
function human(b) {
	if (b % 1048576 == 0) return (b / 1048576) " MiB"
	if (b % 1024 == 0) return (b / 1024) " KiB"
	return b " B"
}
{
	n++
	key[n] = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4; bw[n] = $5; pa[n] = $6; pb[n] = $7
	for (i = 6; i <= 7; i++) if ($i == "-") unprobed++; else {
		rd[++nrd] = $i + 0
		if ($i + 0 > top) top = $i + 0
		if (lo == "" || $i + 0 < lo) lo = $i + 0
	}
	if (!($2 in seenr)) { seenr[$2] = 1; rk[++nr] = $2 }
	if (!($4 in seenb)) { seenb[$4] = 1; bs[++nb] = $4 }
}
END {
	# No probe, or it failed during the run (its later readings are
	# missing, in a --table reprint too): every measurement counts.
	if (probed != 1 || unprobed) top = 0
	# The fast state: the 90th percentile of the readings, robust to a few
	# outliers above it; the slow state reads a third of it.
	for (i = 2; i <= nrd; i++) for (j = i; j > 1 && rd[j-1] > rd[j]; j--) { t = rd[j]; rd[j] = rd[j-1]; rd[j-1] = t }
	fast = nrd ? rd[int(0.9 * nrd + 0.999)] : 0
	for (i = 1; i <= n; i++) {
		vals[key[i]] = vals[key[i]] " " bw[i]
		if (top > 0 && pa[i] != "-" && pb[i] != "-" && pa[i] >= 0.6 * fast && pb[i] >= 0.6 * fast) {
			steady[key[i]] = steady[key[i]] " " bw[i]
			ns++
		}
	}
	if (top > 0) printf "# host probe (bench/hostprobe): %.2f to %.2f GB/s, 90th percentile %.2f; %d of %d measurements had both readings at 60%% of that or more and make the medians; * marks a cell with none, its median over all\n", lo, top, fast, ns, n
	np = split(order, po, " ")
	printf "%-12s %5s %-10s %8s %12s %12s\n", "peer", "ranks", "collective", "size", "busbw GB/s", "metaroce/peer"
	split("allreduce alltoall", colls, " ")
	for (ri = 1; ri <= nr; ri++) for (ci = 1; ci <= 2; ci++) for (bi = 1; bi <= nb; bi++) {
		ours = ""
		mk = "metaroce" SUBSEP rk[ri] SUBSEP colls[ci] SUBSEP bs[bi]
		if (mk in vals) ours = median(mk)
		for (pi = 1; pi <= np; pi++) {
			k = po[pi] SUBSEP rk[ri] SUBSEP colls[ci] SUBSEP bs[bi]
			if (!(k in vals)) continue
			m = median(k)
			ratio = (ours != "" && m > 0) ? sprintf("%.2f", ours / m) : "-"
			mark = (top > 0 && !(k in steady)) ? "*" : ""
			if (top > 0 && (!(mk in steady) || !(k in steady)) && ratio != "-") ratio = ratio "*"
			printf "%-12s %5d %-10s %8s %12.2f%-1s %11s\n", po[pi], rk[ri], colls[ci], human(bs[bi]), m, mark, ratio
		}
	}
}' "$results"
}

if [ -n "$table" ]; then
	[ -r "$table" ] || { echo "run.sh: --table $table: cannot read it" >&2; exit 2; }
	cat "$table" >"$results"
	print_table
	exit 0
fi

# Debian packages of the selected peers. mpicc is a wrapper around gcc, which
# libopenmpi-dev does not pull in (nor, installed without recommends, libc's
# headers): a fresh Debian 12 needs both named. Nothing is installed without
# --install: a benchmark run as root must not change the machine's packages
# unasked, so it names what is missing and how to install it, and skips the
# peers that need it.
selected() { case " $peers " in *" $1 "*) return 0 ;; esac; return 1; }
want=()
mpi_ready() {
	command -v mpirun >/dev/null && command -v mpicc >/dev/null &&
		echo '#include <mpi.h>' | mpicc -x c -E - >/dev/null 2>&1
}
if { selected ompi || selected ompi-tcp; } && ! mpi_ready; then
	want+=(openmpi-bin libopenmpi-dev gcc libc6-dev)
fi
python=""
if selected gloo; then
	for py in python3 /usr/bin/python3; do
		if command -v "$py" >/dev/null && "$py" -c 'import torch.distributed' 2>/dev/null; then
			python=$py
			break
		fi
	done
	[ -n "$python" ] || want+=(python3-torch)
fi
# A fresh image has no package lists: update them first. A failed update or
# install is reported and the run goes on; the peers it was for are then
# skipped below, as the header promises.
if [ ${#want[@]} -gt 0 ]; then
	if [ "$install" = 0 ]; then
		note "missing Debian packages ${want[*]}: the peers that need them are skipped; to install them, run as root"
		note "  apt-get update && apt-get install -y --no-install-recommends ${want[*]}"
		note "or rerun this script with --install as root (make bench-peers PEERSFLAGS=--install)"
	elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		note "installing ${want[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get update >"$work/apt.log" 2>&1 ||
			note "apt-get update failed (trying the install anyway): $(tail -c 300 "$work/apt.log")"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${want[@]}" >"$work/apt.log" 2>&1 ||
			note "apt-get install ${want[*]} failed, the peers that need them are skipped: $(tail -c 300 "$work/apt.log")"
		if selected gloo && [ -z "$python" ] && /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
			python=/usr/bin/python3
		fi
	else
		note "--install cannot install ${want[*]} (not root, or no apt-get): the peers that need them are skipped"
	fi
fi
if selected gloo && [ -z "$python" ]; then
	note "no python3 with torch (Debian: python3-torch): gloo skipped"
fi

# Build mrbench, the host probe and the MPI benchmark.
(cd "$repo" && go build -o "$work/mrbench" ./cmd/mrbench)
[ "$probe" = 0 ] || (cd "$repo" && go build -o "$work/hostprobe" ./bench/hostprobe)
have_mpi=0
if ! selected ompi && ! selected ompi-tcp; then
	: # no Open MPI peer asked for: nothing to build or to report
elif ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
	note "mpicc or mpirun not found (Debian: openmpi-bin libopenmpi-dev gcc libc6-dev): Open MPI skipped"
elif mpicc -O2 -o "$work/mpi_bench" "$here/mpi_bench.c" 2>"$work/mpicc.log"; then
	have_mpi=1
else
	note "mpicc failed ($(head -c 300 "$work/mpicc.log")): Open MPI skipped"
fi
mpirun_flags=(--oversubscribe)
if [ "$(id -u)" = 0 ]; then
	mpirun_flags+=(--allow-run-as-root)
fi

# record PEER RANKS: reads "RESULT coll bytes time algbw busbw wrong" lines
# on stdin and appends "peer ranks coll bytes busbw probe-before
# probe-after" to the results (the readings around the measurement); a line
# with wrong elements is reported and left out.
record() {
	local peer=$1 n=$2 tag coll b us alg bus wrong
	while read -r tag coll b us alg bus wrong; do
		[ "$tag" = RESULT ] || continue
		if [ "$wrong" != 0 ]; then
			note "$peer $n ranks $coll $b bytes: $wrong wrong elements, not counted"
			continue
		fi
		echo "$peer $n $coll $b $bus $before $reading" >>"$results"
	done
}

# mrbench prints nccl-tests rows: size count type redop root time algbw busbw
# #wrong ...; the out-of-place busbw is field 8, #wrong field 9.
run_mrbench() {
	local peer=$1 tr=$2 n=$3 op b
	for op in allreduce alltoall; do
		for b in $size_bytes; do
			measure "$work/out" "$work/mrbench" --transport "$tr" -np "$n" --op "$op" -d float -o sum -b "$b" -e "$b" \
				-n "$(iters_for "$b")" -w "$(warmup_for "$b")" -c 1 ||
				note "$peer $n ranks $op $b: failed: $(tail -c 300 "$work/err")"
			awk -v op="$op" '!/^#/ && NF >= 9 { print "RESULT", op, $1, $6, $7, $8, $9 }' "$work/out" | record "$peer" "$n"
		done
	done
}

run_peer() {
	local peer=$1 n=$2 op b
	case "$peer" in
	metaroce) run_mrbench metaroce metaroce "$n" ;;
	mrbench-tcp) run_mrbench mrbench-tcp tcp "$n" ;;
	ompi | ompi-tcp)
		[ "$have_mpi" = 1 ] || return 0
		local extra=()
		[ "$peer" = ompi-tcp ] && extra=(--mca btl tcp,self)
		for op in allreduce alltoall; do
			for b in $size_bytes; do
				measure "$work/out" mpirun "${mpirun_flags[@]}" "${extra[@]}" -np "$n" "$work/mpi_bench" \
					-c "$op" -n "$(iters_for "$b")" -w "$(warmup_for "$b")" "$b" ||
					note "$peer $n ranks $op $b: failed: $(tail -c 300 "$work/err")"
				record "$peer" "$n" <"$work/out"
			done
		done
		;;
	gloo)
		[ -n "$python" ] || return 0
		for op in allreduce alltoall; do
			for b in $size_bytes; do
				measure "$work/out" "$python" "$here/gloo_bench.py" -np "$n" -c "$op" \
					-n "$(iters_for "$b")" -w "$(warmup_for "$b")" "$b" ||
					note "gloo $n ranks $op $b: failed: $(tail -c 300 "$work/err")"
				record gloo "$n" <"$work/out"
			done
		done
		;;
	esac
}

# probe_host reads the host probe, in GB/s ("-" without one).
# It runs under run_timed, as the benchmarks do, so that a signal stops it
# too, and leaves its reading in $reading.
reading=-
probe_host() {
	reading=-
	[ "$probe" = 1 ] || return 0
	if run_timed "$work/probe" "$work/hostprobe"; then
		reading=$(sed -n 's/^PROBE gbps=\([0-9.]*\) .*/\1/p' "$work/probe")
	fi
	if [ -z "$reading" ] || [ "$reading" = - ]; then
		note "host probe failed ($(tail -c 300 "$work/err")): the medians take every measurement"
		reading=-
		probe=0
	fi
}

# measure OUT CMD... is run_timed with the host probe read after CMD. The
# reading before it is the last one taken: nothing runs in between.
before=-
measure() {
	local rc=0
	before=$reading
	run_timed "$@" || rc=$?
	# The probe's own run_timed takes $work/err: keep the benchmark's for
	# the caller's note.
	cat "$work/err" >"$work/err.run"
	probe_host
	cat "$work/err.run" >"$work/err"
	return "$rc"
}

probe_asked=$probe
probe_host
# Every other round runs the peers in reverse order, so that none always
# runs first (on a host just probed, or right after a given other peer).
reversed=""
for peer in $peers; do reversed="$peer $reversed"; done
for round in $(seq 1 "$rounds"); do
	order=$peers
	[ $((round % 2)) = 1 ] || order=$reversed
	for n in $ranks; do
		for peer in $order; do
			note "round $round/$rounds: $peer, $n ranks"
			run_peer "$peer" "$n"
		done
	done
done

[ -z "$raw" ] || cp "$results" "$raw"

print_table
