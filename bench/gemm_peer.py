#!/usr/bin/env python3
"""Peer columns for k3-bench: the same linear shapes through torch (cuBLAS).

Reads the artifact's model.fused.mlir for the k3.linear ops of every kernel
(x[T, K] @ W[O, K]^T), times them with torch at the sizes k3-bench ran (CUDA
events, median of repeats, inputs rotated so L2 does not hold them), and
prints one table per phase next to k3-bench's CSV: k3c time, TFLOP/s (prefill)
or weight GB/s (decode), the torch time for the kernel's linears alone, and
k3c / torch. Also measures the two ceilings: a large device copy and an
8192^3 bf16 GEMM.

usage: gemm_peer.py ARTIFACT_DIR K3_BENCH_CSV
"""
import csv
import re
import sys
from collections import defaultdict

import torch

from bench_common import median_ms


def linear_shapes(fused_mlir):
    shapes = defaultdict(list)  # kernel name -> [(K, O)]
    current = None
    kernel_re = re.compile(r'k3\.kernel "([^"]+)"')
    lin_re = re.compile(r'k3\.linear .*: \(tensor<\?x(\d+)x\w+>, tensor<(\d+)x(\d+)x\w+>\)')
    seen = set()
    for line in open(fused_mlir):
        m = kernel_re.search(line)
        if m:
            # Kernels shared by the prefill and decode entries are defined
            # once per entry: take the first definition only.
            current = None if m.group(1) in seen else m.group(1)
            continue
        m = lin_re.search(line)
        if m and current:
            shapes[current].append((int(m.group(1)), int(m.group(2))))
        if line.strip() == '}' and current:
            seen.add(current)
            current = None
    return shapes


def torch_kernel_ms(shapes, T):
    """All linears of one kernel at T tokens, weights rotated over 3 copies."""
    sets = []
    total_w = sum(o * k for k, o in shapes) * 2
    copies = 1 if total_w * 3 > 24e9 else 3
    for _ in range(copies):
        sets.append([(torch.randn(T, k, device='cuda', dtype=torch.bfloat16),
                      torch.randn(o, k, device='cuda', dtype=torch.bfloat16)) for k, o in shapes])
    i = [0]

    def run():
        for x, w in sets[i[0] % copies]:
            torch.matmul(x, w.t())
        i[0] += 1
    ms = median_ms(run)
    del sets
    torch.cuda.empty_cache()
    return ms


def main():
    art, bench_csv = sys.argv[1], sys.argv[2]
    shapes = linear_shapes(art + '/model.fused.mlir')
    rows = list(csv.DictReader(open(bench_csv)))
    torch.manual_seed(0)

    # Ceilings.
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device='cuda')
    b = torch.empty_like(a)
    copy_ms = median_ms(lambda: b.copy_(a))
    del a, b
    x = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
    gemm_ms = median_ms(lambda: x @ y)
    del x, y
    torch.cuda.empty_cache()
    copy_tbs = 2 * n / copy_ms / 1e9
    peak = 2 * 8192 ** 3 / gemm_ms / 1e9
    print(f"ceilings: device copy {copy_tbs:.2f} TB/s (read + write, 1 GiB), "
          f"torch bf16 GEMM 8192^3 {peak:.0f} TFLOP/s")

    for phase in ('prefill', 'decode'):
        sel = [r for r in rows if r['phase'] == phase]
        if not sel:
            continue
        sizes = sorted({int(r['size']) for r in sel})
        if phase == 'prefill':
            print("\nprefill (one sequence of T tokens): linear kernels, k3c vs torch on the "
                  "same linears")
            print(f"{'T':>6} {'kernel':<26} {'family':<10} {'k3c ms':>9} {'TFLOP/s':>8} "
                  f"{'%peak':>6} {'torch ms':>9} {'TFLOP/s':>8} {'k3c/torch':>9}")
        else:
            print("\ndecode (one token per sequence, B sequences): linear kernels per step")
            print(f"{'B':>6} {'kernel':<26} {'family':<10} {'k3c us':>9} {'W GB/s':>8} "
                  f"{'%copy':>6} {'torch us':>9} {'W GB/s':>8} {'k3c/torch':>9}")
        for size in sizes:
            for r in sel:
                if int(r['size']) != size:
                    continue
                if r['kernel'] == 'TOTAL':
                    label = ('time to first token' if phase == 'prefill' else
                             'decode step, graph on the device' if r['family'] == 'graph' else
                             'decode step (wall, with the logits copy)')
                    print(f"{size:>6} {label:<37} {float(r['ms']):>9.3f} ms")
                    continue
                lin = shapes.get(r['kernel'])
                if not lin:
                    continue
                # Per execution: a kernel shared by several layers runs once each.
                ms = float(r['ms']) / max(1, int(r['launches']))
                m = 1 if (phase == 'prefill' and r['family'] == 'lm_head') else size
                tms = torch_kernel_ms(lin, m)
                flops = sum(2 * m * k * o for k, o in lin)
                wbytes = sum(2 * k * o for k, o in lin)
                name = r['kernel'][:26]
                if phase == 'prefill':
                    tf, ttf = flops / ms / 1e9, flops / tms / 1e9
                    print(f"{size:>6} {name:<26} {r['family']:<10} {ms:>9.3f} {tf:>8.1f} "
                          f"{100 * tf / peak:>5.0f}% {tms:>9.3f} {ttf:>8.1f} {ms / tms:>9.2f}")
                else:
                    gb, tgb = wbytes / ms / 1e6, wbytes / tms / 1e6
                    print(f"{size:>6} {name:<26} {r['family']:<10} {ms * 1e3:>9.1f} {gb:>8.0f} "
                          f"{100 * gb / 1e3 / copy_tbs:>5.0f}% {tms * 1e3:>9.1f} {tgb:>8.0f} "
                          f"{ms / tms:>9.2f}")


if __name__ == '__main__':
    main()
