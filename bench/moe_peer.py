#!/usr/bin/env python3
"""torch's grouped GEMM on bf16 (dequantized) expert weights: the fallback MoE peer.

For each case (E experts, top k, latent L, width I, T tokens) with a uniform
random top-k routing (seeded): the routed expert MLP as a serving stack without
MXFP4 kernels runs it: pairs sorted by expert, x rows gathered, one grouped GEMM
for gate|up (W13 [E, 2I, L] bf16), SiTU-GLU (beta 4, 25) in torch, one grouped
GEMM for down (W2 [E, L, I]), outputs scattered back per pair. Grouped GEMMs
by torch._grouped_mm (CUTLASS, sm_90) when it runs, else a loop of torch.mm
per routed expert. Times (CUDA events, median of 20): the two GEMMs alone, and
the whole routed MLP. TFLOP/s count 2 * pairs * 3 * I * L; GB/s the bf16
bytes of the routed experts' weights (4x the MXFP4 bytes k3c reads).

usage: moe_peer.py [--cases slice,k3] [--tokens 8,16,64,1024,2340,8192]
"""
import argparse

import torch

from bench_common import median_ms


def situ(a, b):
    return (4.0 * torch.tanh(a / 4.0) * torch.sigmoid(a)) * (25.0 * torch.tanh(b / 25.0))


def run_case(name, E, K, L, I, T, grouped):
    g = torch.Generator(device="cuda").manual_seed(T)
    x = torch.randn(T, L, device="cuda", dtype=torch.bfloat16, generator=g)
    ids = torch.rand(T, E, device="cuda", generator=g).topk(K, dim=1).indices
    w13 = (torch.randn(E, 2 * I, L, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02)
    w2 = (torch.randn(E, L, I, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    routed = int((counts > 0).sum())
    P = T * K
    xs = x[order // K].contiguous()
    w13t, w2t = w13.transpose(-2, -1), w2.transpose(-2, -1)

    def gemms_grouped(a):
        h = torch._grouped_mm(a, w13t, offs=offs)
        hh = situ(h[:, :I].float(), h[:, I:].float()).to(torch.bfloat16)
        return torch._grouped_mm(hh, w2t, offs=offs)

    cuts = [0] + offs.tolist()
    live = [e for e in range(E) if cuts[e + 1] > cuts[e]]

    def gemms_loop(a):
        out = torch.empty(P, L, device="cuda", dtype=torch.bfloat16)
        for e in live:
            s, t = cuts[e], cuts[e + 1]
            h = a[s:t] @ w13[e].T
            hh = situ(h[:, :I].float(), h[:, I:].float()).to(torch.bfloat16)
            out[s:t] = hh @ w2[e].T
        return out

    gemms = gemms_grouped if grouped else gemms_loop
    y = torch.empty(T * K, L, device="cuda", dtype=torch.bfloat16)

    def whole():
        o = torch.argsort(ids.reshape(-1), stable=True)
        a = x[o // K]
        y[o] = gemms(a)

    ms_gemm = median_ms(lambda: gemms(xs))
    ms_all = median_ms(whole)
    flops = 2.0 * P * 3 * I * L
    wbytes = routed * 3 * I * L * 2
    print("| %s | %d | %d | %d | %s | %.3f | %.3f | %.0f | %.0f |"
          % (name, T, P, routed, "grouped_mm" if grouped else "mm loop", ms_gemm, ms_all,
             flops / ms_all / 1e9, wbytes / ms_all / 1e6))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="slice,k3")
    ap.add_argument("--tokens", default="8,16,64,1024,2340,8192")
    a = ap.parse_args()
    shapes = {"slice": (256, 16, 3584, 3072), "k3": (896, 16, 3584, 3072)}
    grouped = hasattr(torch, "_grouped_mm")
    print("torch %s, %s" % (torch.__version__, torch.cuda.get_device_name()))
    print("| case | T | pairs | experts routed | GEMM | GEMMs ms | whole ms | TFLOP/s | GB/s (bf16 weights) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in a.cases.split(","):
        E, K, L, I = shapes[name]
        for T in [int(t) for t in a.tokens.split(",")]:
            try:
                run_case(name, E, K, L, I, T, grouped)
            except Exception as ex:  # noqa: BLE001 - report and try the loop form
                print("| %s | %d | grouped_mm failed: %s |" % (name, T, str(ex).splitlines()[0][:120]))
                try:
                    run_case(name, E, K, L, I, T, False)
                except Exception as ex2:  # noqa: BLE001
                    print("| %s | %d | failed: %s |" % (name, T, str(ex2).splitlines()[0][:120]))
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
