#!/usr/bin/env python3
"""The compiled routed-expert MLP (moe_experts) against fp64, on its exact inputs.

Reads a kernel dump (K3C_DUMP_KERNEL=moe_experts@MIN:DIR, see docs/runtime.md)
of the k3.expert_mlp kernel: inputs z [T, L] (bf16 or f32), indices [T, K]
(i32) and the stacked MXFP4 weights W1, W3 [E, I, L] and W2 [E, L, I], each a
payload and a scales byte array in the #k3.mxfp4_layout kernel layout
(docs/mxfp4-layout.md); the output y [T, K, L].

The weights are decoded here from the layout's description, independently of
k3c's code: tiles of 8 rows x KT columns (k tile fastest); in a tile, thread
t = 4r + c owns KT/8 bytes: for each 16-column step s, register P = 2s holds
columns 16s + 2c + {0, 1} and P = 2s + 1 columns 16s + 8 + 2c + {0, 1} of row
r; register P is pair p = P % 4 of the run's little-endian 32-bit word P / 4
(format version 5): the even column's E2M1 code bits m, e0, e1, s at bits
BIT[p] = (6, 7, 8, 15), (10, 11, 12, 19), (0, 1, 2, 9), (4, 5, 14, 13), the odd
column's the same 16 bits further (mod 32); scales per tile [row][block].
E2M1 and E8M0 per OCP MX v1.0 (E8M0 0xFF is NaN). Then, for every routed pair (t, slot) of the
checked experts, in float64 (the spec's §4.9 expert MLP):
    a = z_t W1[e]^T, b = z_t W3[e]^T, h = act(a, b), y = h W2[e]^T
with act SiTU-GLU (beta1, beta2) or SwiGLU. Prints RMS(error) / RMS(reference)
and max ratio; exits 1 when the RMS ratio exceeds --rms-tol or NaN/inf
positions differ.

usage: moe_check.py DUMP_DIR [--act situ|swiglu] [--beta1 4] [--beta2 25]
                    [--experts N] [--rms-tol 1e-2]
"""
import argparse
import json
import sys

import numpy as np

from bench_common import ratios

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])


BIT = np.array([[6, 7, 8, 15], [10, 11, 12, 19], [0, 1, 2, 9], [4, 5, 14, 13]])


def layout_index(N, K, KT):
    """Run-word byte offset, the four code bits' positions ([4, N, K]) and
    scale offset of every (n, k) of one [N, K] matrix in the kernel layout."""
    n = np.arange(N)[:, None]
    k = np.arange(K)[None, :]
    tile = (n // 8) * (K // KT) + k // KT
    r, kk = n % 8, k % KT
    s, w = kk // 16, kk % 16
    c, half, elem = (w % 8) // 2, w // 8, w % 2
    t = 4 * r + c
    P = 2 * s + half
    word = tile * (8 * KT // 2) + t * (KT // 8) + 4 * (P // 4)
    bits = [np.broadcast_to((BIT[P % 4, i] + 16 * elem) % 32, word.shape) for i in range(4)]
    scale = tile * (8 * KT // 32) + r * (KT // 32) + kk // 32
    return word, bits, scale


def dequant(payload, scales, e, N, K, KT, idx):
    word, bits, scale = idx
    p = payload[e * N * K // 2:(e + 1) * N * K // 2].astype(np.int64)
    s = scales[e * N * K // 32:(e + 1) * N * K // 32].astype(np.int64)
    w = p[word] | p[word + 1] << 8 | p[word + 2] << 16 | p[word + 3] << 24
    code = sum(((w >> bits[i]) & 1) << i for i in range(4))
    sc = s[scale]
    mult = np.where(sc == 255, np.nan, np.ldexp(1.0, (sc - 127).astype(np.int32)))
    return E2M1[code] * mult


def main():
    np.seterr(over="ignore", invalid="ignore")  # NaN/huge scales: compared as such
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="K3C_DUMP_KERNEL directory of a moe_experts kernel")
    ap.add_argument("--act", default="situ", choices=["situ", "swiglu"])
    ap.add_argument("--beta1", type=float, default=4.0)
    ap.add_argument("--beta2", type=float, default=25.0)
    ap.add_argument("--experts", type=int, default=12,
                    help="check the pairs of this many routed experts (the busiest first)")
    ap.add_argument("--rms-tol", type=float, default=1e-2)
    a = ap.parse_args()
    meta = json.load(open(a.dump + "/args.json"))
    load = lambda i, when: np.load("%s/arg%d_%s.npy" % (a.dump, i, when))
    arg = {}  # (operand, part): an MXFP4 operand is its payload (0), then its scales (1)
    for i, m in enumerate(meta):
        if m["kind"] == "input":
            part = 1 if (m["index"], 0) in arg and m["dtype"] == "i8" else 0
            arg[(m["index"], part)] = i
    o = next(i for i, m in enumerate(meta) if m["kind"] == "output" and m["index"] == 0)
    z = load(arg[(0, 0)], "in").astype(np.float64)
    ids = load(arg[(1, 0)], "in").astype(np.int64)
    w = {}
    for j in (2, 3, 4):
        w[j] = (load(arg[(j, 0)], "in").astype(np.uint8), load(arg[(j, 1)], "in").astype(np.uint8))
    y = load(o, "out").astype(np.float64)
    T, K = ids.shape
    L = z.shape[1]
    # The expert width and count from the kernel's scratch shapes (hid
    # [T, K, I]; the grouping's offsets [rows, E + 1], its row count the
    # compiler's (support/Common.h kMoeGroupScratchRows); the order [T, K]).
    scratch = [m["dims"] for m in meta if m["kind"] == "scratch"]
    I = next(d[2] for d in scratch if len(d) == 3)
    E = next(d[1] - 1 for d in scratch if len(d) == 2 and d[1] != K)
    assert w[2][0].size * 2 == E * I * L, "W1 payload size does not match E x I x L"
    kt = lambda k: next(x for x in (128, 64, 32) if k % x == 0)
    KT1, KT2 = kt(L), kt(I)
    y = y[:T]
    print("kernel %s: %d tokens x top %d, %d experts, latent %d, width %d, k_tile %d / %d, "
          "out %s" % (meta[0]["kernel"], T, K, E, L, I, KT1, KT2, meta[o]["dtype"]))
    valid = ids[(ids >= 0) & (ids < E)]
    counts = np.bincount(valid.ravel(), minlength=E)
    routed = counts[counts > 0]
    print("  routing: %d experts with pairs, pairs per expert max %d, mean %.1f"
          % (routed.size, routed.max() if routed.size else 0, routed.mean() if routed.size else 0))
    chosen = np.argsort(-counts, kind="stable")[:a.experts]
    chosen = [e for e in chosen if counts[e] > 0]
    i1, i2 = layout_index(I, L, KT1), layout_index(L, I, KT2)
    got, ref = [], []
    for e in chosen:
        W1 = dequant(*w[2], e, I, L, KT1, i1)
        W3 = dequant(*w[3], e, I, L, KT1, i1)
        W2 = dequant(*w[4], e, L, I, KT2, i2)
        t, slot = np.nonzero(ids == e)
        x = z[t]
        ga, up = x @ W1.T, x @ W3.T
        if a.act == "swiglu":
            h = ga / (1 + np.exp(-ga)) * up
        else:
            h = (a.beta1 * np.tanh(ga / a.beta1) / (1 + np.exp(-ga))) * (a.beta2 * np.tanh(up / a.beta2))
        ref.append(h @ W2.T)
        got.append(y[t, slot])
    got, ref = np.concatenate(got), np.concatenate(ref)
    same_nonfinite = bool((~np.isfinite(got) == ~np.isfinite(ref)).all())
    rms, mx = ratios(np.nan_to_num(got), np.nan_to_num(ref))
    good = rms <= a.rms_tol and same_nonfinite
    print("  %d pairs of %d experts (of %d routed) vs fp64: RMS ratio %.3e, max ratio %.3e, "
          "NaN/inf positions equal %s -> %s"
          % (len(got), len(chosen), int((counts > 0).sum()), rms, mx, same_nonfinite,
             "PASS" if good else "FAIL"))
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
