"""Read bandwidth of the expert weights' access patterns on the GPU machine.

The decode expert GEMM (experts_*_mxfp4_mma_16) has each block read, per
128-column k chunk, one 512-byte fragment run block of each of its 16
weight tiles (each tile's chunks contiguous, the tiles 14 KB apart: 16
interleaved streams a block). This times the same pattern as a plain read
(Triton, cp.async-pipelined) next to one contiguous 8 KB piece a block per
step and torch's copy, on the same number of bytes, to tell whether the
pattern itself costs bandwidth.

    python3 stream_pattern.py [--gb 2.6]
"""
import argparse

import torch
import triton
import triton.language as tl


@triton.jit
def streams(x, out, C: tl.constexpr, G: tl.constexpr, W: tl.constexpr, STAGES: tl.constexpr,
            CONTIG: tl.constexpr):
    pid = tl.program_id(0)
    g = tl.arange(0, G)[:, None]
    w = tl.arange(0, W)[None, :]
    if CONTIG:  # the block's G pieces side by side: one G * W piece a step
        base = pid.to(tl.int64) * (C * G * W) + g * W + w
        step = G * W
    else:  # G streams of C pieces each, a piece of each per step
        base = (pid * G + g).to(tl.int64) * (C * W) + w
        step = W
    acc = tl.zeros([G, W], dtype=tl.int32)
    for c in tl.range(0, C, num_stages=STAGES):
        acc ^= tl.load(x + base + c * step)
    tl.store(out + pid, tl.sum(acc))


def timed(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = []
    for _ in range(3):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        best.append(start.elapsed_time(end) / reps)
    return min(best)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--gb', type=float, default=2.6, help='bytes read per pass, GB')
    args = ap.parse_args()
    C, G = 28, 16
    print(f'# {torch.cuda.get_device_name()}  triton {triton.__version__}')
    print(f'{"pattern":44s} {"ms":>8s} {"GB/s":>8s}')
    for piece in (256, 512, 1024, 2048):
        W = piece // 4
        programs = int(args.gb * 1e9) // (C * G * piece)
        n = programs * C * G * W
        x = torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int32, device='cuda')
        out = torch.empty(programs, dtype=torch.int32, device='cuda')
        for contig in (0, 1):
            for stages in (3, 4):
                ms = timed(lambda: streams[(programs,)](x, out, C, G, W, stages, contig, num_warps=4))
                name = (f'{G} x {piece} B contiguous a step' if contig else
                        f'{G} streams, {piece} B a stream a step') + f', {stages} stages'
                print(f'{name:44s} {ms:8.3f} {n * 4 / ms / 1e6:8.0f}')
        y = torch.empty_like(x)
        ms = timed(lambda: y.copy_(x))
        print(f'{"torch copy (read + write)":44s} {ms:8.3f} {2 * n * 4 / ms / 1e6:8.0f}')
        del x, y, out
        torch.cuda.empty_cache()


if __name__ == '__main__':
    main()
