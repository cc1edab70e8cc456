#!/usr/bin/env python3
"""gloo_bench times torch.distributed all_reduce (float32 sum) and
all_to_all_single (float32) over the gloo backend the way nccl-tests times
NCCL: warm-up calls, a barrier, a timed batch; each rank's mean time per call
is averaged over the ranks and turned into bus bandwidth with nccl-tests'
factors (all-reduce 2(n-1)/n, all-to-all (n-1)/n; size is the bytes of one
rank's buffer).

Usage: gloo_bench.py [-np N] [-n ITERS] [-w WARMUP] [-c allreduce|alltoall] SIZE...
(SIZE in bytes, K/M/G suffix; -c runs that collective alone, both without it)
Under torchrun (RANK and WORLD_SIZE set) it joins that job; otherwise it
spawns N processes with torch.multiprocessing on a free loopback port.
Output, rank 0 only, one line per collective and size:
    RESULT <collective> <bytes> <time_us> <algbw GB/s> <busbw GB/s> <wrong>
"""

import argparse
import os
import socket
import sys
import time


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = s.strip().upper().rstrip("B")
    mult = 1
    if t and t[-1] in units:
        mult = units[t[-1]]
        t = t[:-1]
    if not t.isdigit() or int(t) <= 0:
        raise argparse.ArgumentTypeError("bad size %r (want bytes with K/M/G suffix)" % s)
    return int(t) * mult


def bench(rank, n, args):
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=rank, world_size=n,
                                init_method="tcp://127.0.0.1:%d" % args.port)
    torch.set_num_threads(1)
    for coll in args.colls:
        factor = 2.0 * (n - 1) / n if coll == "allreduce" else (n - 1) / n
        for size in args.sizes:
            count = size // 4
            if coll == "alltoall":
                count -= count % n
            idx = torch.arange(count, dtype=torch.int64)
            inp = (rank + 1 + idx % 7).to(torch.float32)
            out = torch.empty_like(inp)

            def once():
                if coll == "allreduce":
                    out.copy_(inp)  # all_reduce is in place
                    dist.all_reduce(out, op=dist.ReduceOp.SUM)
                else:
                    dist.all_to_all_single(out, inp)

            for _ in range(args.warmup):
                once()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                once()
            us = (time.perf_counter() - t0) / args.iters * 1e6
            if coll == "allreduce":
                want = (n * (n + 1) // 2 + n * (idx % 7)).to(torch.float32)
            else:
                block = count // n
                src = torch.arange(n, dtype=torch.int64).repeat_interleave(block)
                gi = rank * block + torch.arange(block, dtype=torch.int64).repeat(n)
                want = (src + 1 + gi % 7).to(torch.float32)
            stats = torch.tensor([us, float((out != want).sum().item())], dtype=torch.float64)
            dist.all_reduce(stats, op=dist.ReduceOp.SUM)
            if rank == 0:
                mean_us = stats[0].item() / n
                algbw = count * 4 / (mean_us * 1e3)
                print("RESULT %s %d %.2f %.3f %.3f %d" % (coll, count * 4, mean_us, algbw, algbw * factor,
                                                           int(stats[1].item())), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description="gloo all-reduce and all-to-all bus bandwidth")
    p.add_argument("-np", type=int, default=2, help="processes to spawn (ignored under torchrun)")
    p.add_argument("-n", dest="iters", type=int, default=10, help="timed iterations per size")
    p.add_argument("-w", dest="warmup", type=int, default=2, help="warm-up iterations per size")
    p.add_argument("-c", dest="coll", choices=("allreduce", "alltoall"),
                   help="run this collective alone (default: both, all-reduce first)")
    p.add_argument("sizes", nargs="+", type=parse_size, help="sizes in bytes (K/M/G suffixes)")
    args = p.parse_args()
    args.colls = (args.coll,) if args.coll else ("allreduce", "alltoall")
    if args.iters < 1 or args.warmup < 0 or args.np < 1:
        p.error("want -n >= 1, -w >= 0, -np >= 1")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        import torch.distributed as dist
        dist.init_process_group("gloo")  # env:// from torchrun
        bench(dist.get_rank(), dist.get_world_size(), args)
        return
    import torch.multiprocessing as mp
    args.port = free_port()
    mp.spawn(bench, args=(args.np, args), nprocs=args.np, join=True)


if __name__ == "__main__":
    sys.exit(main())
