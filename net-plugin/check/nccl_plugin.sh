#!/usr/bin/env bash
# nccl_plugin.sh - end-to-end check of the MetaRoCE net plugin under real NCCL.
#
# Needs: one NVIDIA GPU, Python with PyTorch (CUDA build), Go and gcc.
# Runs two processes on the same GPU that NCCL treats as two hosts
# (different NCCL_HOSTID), with P2P and SHM disabled so that all traffic
# goes through the network plugin, does an all_reduce, checks the result
# and greps NCCL's INFO log for proof that MetaRoCE carried the traffic.
#
# usage: net-plugin/check/nccl_plugin.sh [LIBRARY]
#   LIBRARY defaults to a fresh build in a temporary folder.
#
# Without python3, PyTorch, a CUDA device PyTorch can see or PyTorch's NCCL
# it prints one SKIP line saying which, and exits 0.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The prerequisites come first, before the plugin is built, and quietly: on
# most machines a missing PyTorch is the expected case, and Python's
# traceback for it read as a failure above the SKIP line. The exit status
# of the probe says what is missing; for an import that fails, the last line
# of Python's message (the exception) goes into the reason.
skip() { echo "SKIP: PyTorch with CUDA and one GPU required: $*"; exit 0; }
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
probe=0
python3 - >/dev/null 2>"$work/probe.err" <<'PY' || probe=$?
import sys
import torch
import torch.distributed as dist
if not torch.cuda.is_available():
    sys.exit(3)
if not dist.is_available() or not dist.is_nccl_available():
    sys.exit(4)
PY
case "$probe" in
0) ;;
3) skip "PyTorch sees no CUDA device (no NVIDIA GPU or driver, or a CPU-only build of PyTorch)" ;;
4) skip "this PyTorch has no NCCL (torch.distributed.is_nccl_available() is false)" ;;
*)
  why=$(tail -n 1 "$work/probe.err" 2>/dev/null || true)
  skip "python3 cannot import torch (${why:-exit status $probe})"
  ;;
esac

lib=${1:-}
if [[ -z "$lib" ]]; then
  lib="$work/libnccl-net-metaroce.so"
  (cd "$root" && go build -buildmode=c-shared \
    -ldflags="-extldflags '-Wl,-soname,libnccl-net-metaroce.so \"-Wl,--version-script=$root/net-plugin/exports.map\"'" \
    -o "$lib" ./net-plugin)
fi
lib=$(realpath "$lib")

cat >"$work/allreduce.py" <<'PY'
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"]); world = int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=rank, world_size=world)
for n in (1, 1000, 1 << 20, 16 << 20):  # elements: tiny, LL, LL128, SIMPLE
    x = torch.full((n,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    want = world * (world + 1) / 2
    assert torch.all(x == want).item(), f"rank {rank}: all_reduce of {n} wrong"
torch.cuda.synchronize()
dist.destroy_process_group()
print(f"rank {rank}: all_reduce OK")
PY

port=$((20000 + RANDOM % 20000))
common=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2
  NCCL_NET_PLUGIN="$lib" NCCL_NET=MetaRoCE
  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
  METAROCE_IFNAMES=lo)
pids=()
for r in 0 1; do
  env "${common[@]}" RANK=$r NCCL_HOSTID="metaroce-check-host-$r" \
    timeout 300 python3 "$work/allreduce.py" >"$work/rank$r.log" 2>&1 &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
cat "$work/rank0.log" "$work/rank1.log"

grep -q "MetaRoCE net plugin" "$work/rank0.log" || { echo "FAIL: plugin init line missing"; fail=1; }
grep -Eq "Using network MetaRoCE" "$work/rank0.log" || { echo "FAIL: NCCL did not select MetaRoCE"; fail=1; }
grep -Eq "via NET/MetaRoCE" "$work/rank0.log" || { echo "FAIL: no channel went over NET/MetaRoCE"; fail=1; }
grep -q "all_reduce OK" "$work/rank0.log" && grep -q "all_reduce OK" "$work/rank1.log" || fail=1
if [[ $fail -ne 0 ]]; then echo "FAIL"; exit 1; fi
echo "PASS: all_reduce over the MetaRoCE net plugin"
