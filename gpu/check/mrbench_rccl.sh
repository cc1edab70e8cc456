#!/usr/bin/env bash
# mrbench_rccl.sh runs mrbench's rccl backend with two ranks on ONE NVIDIA GPU,
# the two processes told apart with NCCL_HOSTID so that NCCL treats them as two
# hosts and carries their traffic over its network transport (NCCL sockets;
# the PyTorch preflight may use the metaroce plugin instead). See README.md.
#
# Usage: gpu/check/mrbench_rccl.sh [--torch-only]
#   --torch-only  only run the PyTorch preflight (two processes, one GPU,
#                 all-reduce) and stop; needs no mrbench.
#
# Environment (all optional):
#   MRBENCH          mrbench binary                    (default: build/mrbench, else mrbench on PATH)
#   MRBENCH_ARGS     extra mrbench arguments           (default: -b 4K -e 64M -f 4 --op allreduce -c 1)
#   METAROCE_PLUGIN  metaroce net plugin .so for the preflight (default: none, NCCL sockets)
#   OUT_DIR          where logs go                     (default: ./mrbench-rccl-out)
#   TIMEOUT_S        per-process limit in seconds      (default: 300)
#   PORT             bootstrap TCP port on 127.0.0.1   (default: 29517)
#
# Without an NVIDIA GPU (no nvidia-smi, or one that lists no GPU) it prints
# a SKIP line and exits 0. Exit status otherwise: 0 ok, 1 a rank failed or
# mrbench reported wrong values, 2 a missing prerequisite or bad usage,
# 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP (the ranks are stopped
# first).
set -euo pipefail

die() { echo "mrbench_rccl.sh: $*" >&2; exit 2; }
fail() { echo "mrbench_rccl.sh: $*" >&2; exit 1; }
skip() { echo "SKIP: mrbench_rccl.sh: $*"; exit 0; }

TORCH_ONLY=0
case "${1:-}" in
--torch-only) TORCH_ONLY=1 ;;
"") ;;
*) die "unknown argument $1 (only --torch-only is accepted)" ;;
esac

OUT_DIR=${OUT_DIR:-./mrbench-rccl-out}
TIMEOUT_S=${TIMEOUT_S:-300}
PORT=${PORT:-29517}

command -v nvidia-smi >/dev/null || skip "nvidia-smi not found: this check needs an NVIDIA GPU and its driver"
gpus=$(nvidia-smi -L 2>&1) || skip "nvidia-smi -L failed, so no usable NVIDIA GPU: $(printf '%s' "$gpus" | head -n 2)"
case "$gpus" in
"GPU "*) ;;
*) skip "nvidia-smi -L lists no GPU: $(printf '%s' "$gpus" | head -n 2)" ;;
esac
printf '%s\n' "$gpus" | sed -n 1p
command -v python3 >/dev/null || die "python3 not found: PyTorch provides NCCL and the CUDA runtime here"
python3 -c 'import torch' 2>/dev/null ||
	die "python3 cannot import torch: install PyTorch built for CUDA (pip install torch), which brings NCCL and the CUDA runtime"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
	die "PyTorch cannot see the GPU that nvidia-smi lists (python3 -c 'import torch; print(torch.cuda.is_available())'): a CPU-only build?"

# Find the NCCL and CUDA runtime libraries that PyTorch loads: the pip wheels
# keep them under site-packages/nvidia/*, older builds under torch/lib.
find_lib() { # $1: glob relative to site-packages
	python3 - "$1" <<'PY'
import glob, os, site, sys, torch
roots = site.getsitepackages() + [site.getusersitepackages(), os.path.dirname(os.path.dirname(torch.__file__))]
for r in roots:
    hits = sorted(glob.glob(os.path.join(r, sys.argv[1])))
    if hits:
        print(hits[0])
        break
PY
}
: "${METAROCE_RCCL_LIB:=$(find_lib 'nvidia/nccl/lib/libnccl.so*')}"
[ -n "$METAROCE_RCCL_LIB" ] || METAROCE_RCCL_LIB=$(find_lib 'torch/lib/libnccl*.so*')
: "${METAROCE_CUDART_LIB:=$(find_lib 'nvidia/cuda_runtime/lib/libcudart.so*')}"
[ -n "$METAROCE_CUDART_LIB" ] || METAROCE_CUDART_LIB=$(find_lib 'nvidia/cu13/lib/libcudart.so*')
[ -n "$METAROCE_CUDART_LIB" ] || METAROCE_CUDART_LIB=$(find_lib 'torch/lib/libcudart*.so*')
[ -n "$METAROCE_RCCL_LIB" ] || die "no libnccl found next to PyTorch: set METAROCE_RCCL_LIB to libnccl.so.2"
[ -n "$METAROCE_CUDART_LIB" ] || die "no libcudart found next to PyTorch: set METAROCE_CUDART_LIB to libcudart.so.12"
export METAROCE_RCCL_LIB METAROCE_CUDART_LIB
echo "NCCL:         $METAROCE_RCCL_LIB"
echo "CUDA runtime: $METAROCE_CUDART_LIB"

# Settings shared by both ranks: one GPU; no shared-memory or peer-to-peer
# shortcut, so the bytes go through the network transport being measured.
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# The plugin goes to the PyTorch processes only: it is a Go c-shared library,
# and mrbench, a Go program, cannot host a second Go runtime.
TORCH_PLUGIN=none
if [ -n "${METAROCE_PLUGIN:-}" ]; then
	[ -f "$METAROCE_PLUGIN" ] || die "METAROCE_PLUGIN=$METAROCE_PLUGIN does not exist"
	TORCH_PLUGIN=$METAROCE_PLUGIN
fi
echo "net plugin:   $TORCH_PLUGIN for the preflight, none for mrbench"

# Each rank runs under timeout, which gives it a process group of its own
# (so that a timeout ends the rank's children too) that a Ctrl-C at the
# terminal does not reach. On SIGINT, SIGTERM or SIGHUP the script ends the
# running ranks' groups and waits for them before it exits; a second signal
# while it waits kills them outright.
running=()
signal_running() { # $1: signal
	local p
	for p in "${running[@]}"; do
		kill -"$1" -- "-$p" 2>/dev/null || kill -"$1" "$p" 2>/dev/null || true
	done
}
on_signal() { # $1: signal name, $2: exit status
	trap 'signal_running KILL' INT TERM HUP
	echo "mrbench_rccl.sh: interrupted by SIG$1: stopping the ranks" >&2
	signal_running TERM
	local p
	for p in "${running[@]}"; do
		while kill -0 "$p" 2>/dev/null; do wait "$p" 2>/dev/null || true; done
	done
	exit "$2"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

# run_pair CMD... starts rank 0 and rank 1 of CMD (RANK is set for each) with
# distinct NCCL_HOSTIDs, waits for both under TIMEOUT_S, and fails if either
# does; logs go to $OUT_DIR/<tag>-rank<r>.log.
run_pair() {
	local tag=$1 pids=() r rc=0
	shift
	for r in 0 1; do
		RANK=$r NCCL_HOSTID="metaroce-check-host$r" timeout "$TIMEOUT_S" "$@" >"$OUT_DIR/$tag-rank$r.log" 2>&1 &
		pids+=($!)
		running=("${pids[@]}")
	done
	for r in 0 1; do
		if ! wait "${pids[$r]}"; then
			echo "$tag rank $r failed (exit status 124 means it hit TIMEOUT_S); last lines:" >&2
			tail -n 20 "$OUT_DIR/$tag-rank$r.log" >&2
			rc=1
		fi
	done
	running=()
	return $rc
}

# The mrbench binary, found before the preflight's minutes rather than
# after them. A binary named by MRBENCH must run; only the default falls back
# to PATH. -f as well as -x: a directory's search bit passes -x.
if [ "$TORCH_ONLY" = 0 ]; then
	if [ -n "${MRBENCH:-}" ]; then
		[ -f "$MRBENCH" ] && [ -x "$MRBENCH" ] || die "MRBENCH=$MRBENCH is not an executable file"
	else
		MRBENCH=build/mrbench
		[ -x "$MRBENCH" ] || MRBENCH=$(command -v mrbench || true)
		[ -n "$MRBENCH" ] || die "mrbench not found: build it (make build, which writes build/mrbench) or set MRBENCH"
	fi
fi

mkdir -p "$OUT_DIR"

# Preflight: PyTorch's own NCCL all-reduce across the two fake hosts.
cat >"$OUT_DIR/preflight.py" <<'PY'
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + os.environ["PORT"], rank=rank, world_size=2)
x = torch.full((1 << 20,), float(rank + 1), device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
assert float(x[0]) == 3.0 and float(x[-1]) == 3.0, float(x[0])
print("preflight ok on rank", rank, "NCCL", torch.cuda.nccl.version())
dist.destroy_process_group()
PY
NCCL_NET_PLUGIN=$TORCH_PLUGIN PORT=$PORT run_pair preflight python3 "$OUT_DIR/preflight.py" || fail "PyTorch preflight failed: fix NCCL on this machine first"
cat "$OUT_DIR"/preflight-rank0.log
[ "$TORCH_ONLY" = 1 ] && exit 0

# mrbench with the rccl backend.
read -r -a EXTRA <<<"${MRBENCH_ARGS:--b 4K -e 64M -f 4 --op allreduce -c 1}"
# Each rank re-reads the extra arguments from the environment, because an
# array does not cross into the child shell.
export MRBENCH PORT EXTRA_STR="${EXTRA[*]}"
# The two processes join one job through mrbench's own launcher variables.
NCCL_NET_PLUGIN=none run_pair mrbench bash -c 'read -r -a EXTRA <<<"$EXTRA_STR"; METAROCE_RANK=$RANK METAROCE_NRANKS=2 METAROCE_ROOT="127.0.0.1:$((PORT + 1))" exec "$MRBENCH" --backend rccl "${EXTRA[@]}"' ||
	fail "mrbench --backend rccl failed; logs in $OUT_DIR"
grep -q "Out of bounds values : 0 OK" "$OUT_DIR/mrbench-rank0.log" ||
	fail "mrbench reported wrong results; see $OUT_DIR/mrbench-rank0.log"
cat "$OUT_DIR"/mrbench-rank0.log
echo "mrbench_rccl.sh: ok (logs in $OUT_DIR)"
