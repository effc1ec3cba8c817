#!/usr/bin/env python3
"""NCCL's own all-to-all on this machine, the peer figure for k3-ep-bench.

torch.distributed.all_to_all_single (NCCL backend) over every visible GPU (one
process each), with the message sizes and the definitions of k3-ep-bench's
device-buffer table: `message bytes` is what each rank sends to each rank
(itself included), `GB/s per rank` is message bytes x ranks / time per
exchange. Run with NCCL_NVLS_ENABLE=0 (NVLink multicast off).

usage: python3 bench/nccl-alltoall.py [--iters N]
"""
import argparse
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [4 << 10, 64 << 10, 1 << 20, 8 << 20, 64 << 20]


def rank_main(rank, world, init_file, iters, out):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="file://" + init_file, rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    rows = []
    for size in SIZES:
        send = torch.empty(size * world, dtype=torch.uint8, device="cuda")
        for d in range(world):
            send[d * size:(d + 1) * size].fill_(7 * rank + d + 1)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)  # warm-up and check
        torch.cuda.synchronize()
        for s in range(world):
            want = 7 * s + rank + 1
            got = recv[s * size:(s + 1) * size]
            if int(got[0]) != want or int(got[-1]) != want:
                raise SystemExit(f"rank {rank}: wrong bytes from rank {s}")
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_to_all_single(recv, send)
        torch.cuda.synchronize()
        sec = (time.perf_counter() - t0) / iters
        rows.append((size, sec))
    if rank == 0:
        out.put(rows)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    world = torch.cuda.device_count()
    if world < 1:
        sys.exit("nccl-alltoall: no CUDA device")
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        print("note: NCCL_NVLS_ENABLE is not 0 (NVLink multicast may be used)")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = tempfile.mktemp(prefix="k3c-nccl-a2a-")
    procs = [ctx.Process(target=rank_main, args=(r, world, init, a.iters, q)) for r in range(world)]
    for p in procs:
        p.start()
    rows = q.get(timeout=300)
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"nccl-alltoall: a rank failed (exit {p.exitcode})")
    print(f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
          f"{world} GPUs, all_to_all_single")
    print(f"{'message bytes':<14} {'us/exchange':>12} {'GB/s per rank':>14}")
    for size, sec in rows:
        print(f"{size:<14} {sec * 1e6:12.1f} {size * world / sec / 1e9:14.2f}")


if __name__ == "__main__":
    main()
