#!/usr/bin/env python3
"""The MLA prefill's peer: torch scaled_dot_product_attention on the same
up-projected heads (q, k [1, H, T, nope + rope], v [1, H, T, v], causal,
scale 1/sqrt(nope + rope)), per backend: flash (FlashAttention-2; it needs
v's head dim equal to q's, so v is zero-padded to 192 as the K3 reference
does), cuDNN and memory-efficient with v at 128. CUDA-event medians after a
warm-up; TFLOP/s count the useful causal FLOPs 2 H T(T+1)/2 (qk + v).

usage: mla_peer.py [--tokens 1024,8192,32768] [--heads 96] [--csv FILE]
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench_common import median_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="1024,8192,32768")
    ap.add_argument("--heads", type=int, default=96)
    ap.add_argument("--qk", type=int, default=192)
    ap.add_argument("--v", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--csv")
    a = ap.parse_args()
    rows = []
    H, qk, dv = a.heads, a.qk, a.v
    scale = 1.0 / math.sqrt(qk)
    print("%-8s %-34s %10s %9s" % ("T", "torch SDPA backend", "ms", "TFLOP/s"))
    for T in map(int, a.tokens.split(",")):
        g = torch.Generator(device="cuda").manual_seed(T)
        q = torch.randn(1, H, T, qk, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(1, H, T, qk, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(1, H, T, dv, device="cuda", dtype=torch.bfloat16, generator=g)
        vpad = F.pad(v, (0, qk - dv))
        flops = 2.0 * H * T * (T + 1) / 2 * (qk + dv)
        cases = [("flash (v padded to %d)" % qk, SDPBackend.FLASH_ATTENTION, vpad),
                 ("cudnn", SDPBackend.CUDNN_ATTENTION, v),
                 ("efficient", SDPBackend.EFFICIENT_ATTENTION, v)]
        for name, backend, vv in cases:
            try:
                with sdpa_kernel(backend):
                    fn = lambda: F.scaled_dot_product_attention(q, k, vv, is_causal=True,
                                                                scale=scale)
                    ms = median_ms(fn, a.reps)
            except Exception as e:  # a backend that does not take the shape
                print("%-8d %-34s %s" % (T, name, str(e).splitlines()[0][:60]))
                continue
            print("%-8d %-34s %10.3f %9.1f" % (T, name, ms, flops / ms / 1e9))
            rows.append((T, name, ms, flops / ms / 1e9))
        del q, k, v, vpad
        torch.cuda.empty_cache()
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("tokens,backend,ms,tflops\n")
            for r in rows:
                f.write("%d,%s,%.4f,%.2f\n" % r)


if __name__ == "__main__":
    main()
