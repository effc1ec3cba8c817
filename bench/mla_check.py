#!/usr/bin/env python3
"""The compiled MLA attention core against fp64 attention, on its exact inputs.

Reads a kernel dump (K3C_DUMP_KERNEL=mla_attn@MIN_TOKENS:DIR, see
docs/runtime.md) of the k3.mla_attention kernel: inputs q [T, H (nope + rope)],
kv [T, R + rope] (raw latent c, then k_pe), kv_norm [R], the cache
[N, S_max, R + rope] before and after (paged: a pool [pages, P, R + rope]
and the block table [N, S_max / P] after the gate), cache_lens, seq_lens,
kv_b_proj [H (nope + v), R] and the optional gate [T, H v]; the output [T, H v].

Checks, per the spec (§4.5, up-projected form, in float64):
  * the cache rows the kernel appended: RMSNorm(c) (rounded to the cache
    type, as the reference rounds the norm) and the raw k_pe;
  * the output: for every new token t of sequence n and head h,
      K = [c_s W_UK[h]^T | k_pe,s],  V = c_s W_UV[h]^T  over the visible
      positions s <= past_n + t (c_s, k_pe,s read from the cache after the
      kernel), A = softmax(q_t K^T scale) V, out = A * sigmoid(gate).
Prints RMS(error) / RMS(reference) and max |error| / max |reference| and
exits 1 when a ratio exceeds --rms-tol or NaN/inf positions differ.

usage: mla_check.py DUMP_DIR [--rms-tol 5e-3] [--head-stride K] [--scale S] [--eps E]
"""
import argparse
import json
import sys

import numpy as np

from bench_common import ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="K3C_DUMP_KERNEL directory of an mla_attn kernel")
    ap.add_argument("--rms-tol", type=float, default=5e-3)
    ap.add_argument("--scale", type=float, default=None,
                    help="softmax scale (default 1/sqrt(nope + rope), the spec's)")
    ap.add_argument("--eps", type=float, default=1e-6, help="latent RMSNorm eps (spec: 1e-6)")
    ap.add_argument("--head-stride", type=int, default=1,
                    help="check heads 0, K, 2K, ... (fp64 attention of many heads is slow)")
    a = ap.parse_args()
    meta = json.load(open(a.dump + "/args.json"))
    inp = lambda i: np.load("%s/arg%d_in.npy" % (a.dump, i))
    out = lambda i: np.load("%s/arg%d_out.npy" % (a.dump, i))
    ins = {m["index"]: i for i, m in enumerate(meta) if m["kind"] == "input"}
    o_arg = next(i for i, m in enumerate(meta) if m["kind"] == "output" and m["index"] == 0)
    q, kv, kv_norm, cache0 = (inp(ins[j]) for j in range(4))
    cache_lens, lens, kvb = inp(ins[4]), inp(ins[5]), inp(ins[6])
    # After kv_b_proj: the optional gate, then, for a paged cache
    # (k3-compile --mla-page), the block table [N, pages] (i32).
    extra = [j for j in (7, 8) if j in ins]
    table = next((inp(ins[j]).astype(np.int64) for j in extra if meta[ins[j]]["dtype"] == "i32"),
                 None)  # (dumps hold every value as a float)
    gate = next((inp(ins[j]) for j in extra if meta[ins[j]]["dtype"] != "i32"), None)
    cache = out(ins[3])
    # Rows [a, b) of sequence n: cache[n, a:b], or through the block table
    # (position p in row p % P of page table[n, p // P]).
    def seq_rows(n, a, b):
        if table is None:
            return cache[n, a:b]
        pos = np.arange(a, b)
        P = cache.shape[1]
        return cache[table[n, pos // P], pos % P]
    lens = [int(x) for x in lens]
    past = [int(x) for x in cache_lens]
    T = sum(lens)
    R = kvb.shape[1]
    cd = kv.shape[1]
    rope = cd - R
    o_got = out(o_arg)[:T].astype(np.float64)
    Hdv = o_got.shape[1]
    # Heads, nope and v from the shapes: q has H (nope + rope) columns, kv_b
    # H (nope + v) rows and the output H v columns.
    Hq, Hkv = q.shape[1], kvb.shape[0]
    H = (Hq - Hkv + Hdv) // rope if rope else 0
    nope, dv = Hq // H - rope, Hdv // H
    scale = a.scale if a.scale is not None else 1.0 / np.sqrt(nope + rope)
    eps = a.eps
    print("kernel %s: %d sequences (cached %s), %d new tokens, %d heads, latent %d + %d, "
          "nope %d, v %d, out dtype %s"
          % (meta[0]["kernel"], len(lens), ",".join(map(str, past)), T, H, R, rope, nope, dv,
             meta[o_arg]["dtype"]))
    f = lambda x: x.astype(np.float64)
    W = f(kvb).reshape(H, nope + dv, R)
    W_uk, W_uv = W[:, :nope], W[:, nope:]
    ok = True

    # The appended cache rows.
    c = f(kv[:T, :R])
    inv = 1.0 / np.sqrt(np.mean(c * c, axis=1, keepdims=True) + eps)
    rounded = lambda x: x.astype(cache.dtype).astype(np.float64) if cache.dtype != np.float64 else x
    cn_ref = rounded(c * inv) * f(kv_norm)[None, :]
    got_rows, start = [], 0
    for n, L in enumerate(lens):
        got_rows.append(seq_rows(n, past[n], past[n] + L))
        start += L
    got_rows = f(np.concatenate(got_rows)) if got_rows else np.zeros((0, cd))
    ref_rows = np.concatenate([cn_ref, f(kv[:T, R:])], axis=1)
    rms, mx = ratios(got_rows, ref_rows)
    good = rms <= a.rms_tol
    ok &= good
    print("  cache rows vs fp64: RMS ratio %.3e, max ratio %.3e -> %s"
          % (rms, mx, "PASS" if good else "FAIL"))

    # Attention, per sequence and checked head.
    heads = list(range(0, H, max(1, a.head_stride)))
    o_ref = np.zeros((T, H, dv))
    start = 0
    for n, L in enumerate(lens):
        S = past[n] + L
        C = f(seq_rows(n, 0, S))
        vis = past[n] + np.arange(L)[:, None] >= np.arange(S)[None, :]
        for h in heads:
            K = np.concatenate([C[:, :R] @ W_uk[h].T, C[:, R:]], axis=1)
            V = C[:, :R] @ W_uv[h].T
            Q = f(q[start:start + L, h * (nope + rope):(h + 1) * (nope + rope)])
            s = np.where(vis, Q @ K.T * scale, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            o_ref[start:start + L, h] = (s / s.sum(axis=1, keepdims=True)) @ V
        start += L
    if gate is not None:
        o_ref = o_ref * (1.0 / (1.0 + np.exp(-f(gate[:T]).reshape(T, H, dv))))
    got = o_got.reshape(T, H, dv)[:, heads]
    ref = o_ref[:, heads]
    same_nonfinite = bool((~np.isfinite(got) == ~np.isfinite(ref)).all())
    rms, mx = ratios(np.nan_to_num(got), np.nan_to_num(ref))
    good = rms <= a.rms_tol and same_nonfinite
    ok &= good
    print("  out (%d heads) vs fp64: RMS ratio %.3e, max ratio %.3e, NaN/inf positions equal %s"
          " -> %s" % (len(heads), rms, mx, same_nonfinite, "PASS" if good else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
