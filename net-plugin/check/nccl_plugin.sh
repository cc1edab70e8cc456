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
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

lib=${1:-}
if [[ -z "$lib" ]]; then
  lib="$work/libnccl-net-metaroce.so"
  (cd "$root" && go build -buildmode=c-shared \
    -ldflags=-extldflags=-Wl,-soname,libnccl-net-metaroce.so -o "$lib" ./net-plugin)
fi
lib=$(realpath "$lib")

python3 - <<'PY' || { echo "SKIP: PyTorch with CUDA and one GPU required"; exit 0; }
import torch, sys
sys.exit(0 if torch.cuda.is_available() and torch.distributed.is_nccl_available() else 1)
PY

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
