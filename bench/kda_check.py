#!/usr/bin/env python3
"""The compiled delta rule against an fp64 recurrence, on its exact inputs.

Reads a kernel dump (K3C_DUMP_KERNEL=kda_chunk@MIN_TOKENS:DIR, see
docs/runtime.md): the k3.delta_rule kernel's inputs q, k, v, g (log decay),
beta (logits), the state S [N, H, d_v, d_k] before and after, seq_lens, and
the output o. Recomputes every sequence token by token in float64
(spec §4.4):
    S <- S * exp(g_t);  u = sigmoid(beta_t) (v_t - S k_t);  S <- S + u k_t^T;
    o_t = S q_t
and prints RMS(error) / RMS(reference) and max |error| / max |reference|
for o and the final state (FlashKDA's bar: RMS ratio <= 5e-3). Exits 1 when
a ratio exceeds --rms-tol or NaN/inf positions differ.

usage: kda_check.py DUMP_DIR [--rms-tol 5e-3] [--l2norm] [--gate bounded=LB|softplus]

A dump of a split-norm kernel (k3-compile --kda-split-norms: q and k each
followed by its inverse norms [T, H]) is recognised by the second input's
width: its rows are normalized here and its inverse norms are checked too.
A dump of a kernel with the gated output norm (k3-compile
--kda-out-norm-in-chunk: two more inputs, the gate rows and the norm's
weight [d_v]; the output is the normalized o) is compared with the fp64
norm of the fp64 o: o / sqrt(mean(o^2) + 1e-5) * w * sigmoid(gate), per
head (spec: FusedRMSNormGated).
A dump of a kernel that forms the gate itself (k3-compile
--kda-gate-in-chunk: inputs f_b's logits [T, H d_k], a_log (its first H
values) and dt_bias [H d_k] in place of g, then q, k, v, beta, state,
seq_lens) takes the gate's form from --gate (bounded=LB: g = LB
sigmoid(exp(a_log[h]) (z + dt_bias)), K3's LB = -5; softplus: g =
-exp(a_log[h]) softplus(z + dt_bias), Kimi Linear's) and forms g in fp64
from the logits the kernel read.
"""
import argparse
import json
import sys

import numpy as np

from bench_common import ratios


def reference(q, k, v, g, beta, S0, lens, H):
    """fp64 token-by-token recurrence, all heads of a token at once."""
    T = q.shape[0]
    dk, dv = q.shape[1] // H, v.shape[1] // H
    f = lambda x, d: x.astype(np.float64).reshape(T, H, d)
    q, k, g, v = f(q, dk), f(k, dk), f(g, dk), f(v, dv)
    b = 1.0 / (1.0 + np.exp(-beta.astype(np.float64)))  # [T, H]
    o = np.zeros((T, H, dv))
    S = S0.astype(np.float64).copy()  # [N, H, dv, dk]
    start = 0
    for n, L in enumerate(lens):
        s = S[n]
        for t in range(start, start + L):
            s = s * np.exp(g[t])[:, None, :]
            u = b[t][:, None] * (v[t] - np.einsum("hjc,hc->hj", s, k[t]))
            s = s + u[:, :, None] * k[t][:, None, :]
            o[t] = np.einsum("hjc,hc->hj", s, q[t])
        S[n] = s
        start += L
    return o.reshape(T, H * dv), S


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="K3C_DUMP_KERNEL directory of a kda_chunk kernel")
    ap.add_argument("--rms-tol", type=float, default=5e-3)
    ap.add_argument("--l2norm", action="store_true",
                    help="q and k are the convolutions' rows, normalized by the kernel itself "
                         "(k3-compile --kda-norm-in-chunk): normalize them here in fp64 "
                         "(per head; eps 1e-6; q scaled by d_k^-1/2, as the model's norms)")
    ap.add_argument("--gate", default=None,
                    help="bounded=LB or softplus: the gate form of a --kda-gate-in-chunk kernel's "
                         "dump (its inputs are f_b's logits, a_log and dt_bias instead of g)")
    a = ap.parse_args()
    meta = json.load(open(a.dump + "/args.json"))
    inp = lambda i: np.load("%s/arg%d_in.npy" % (a.dump, i))
    out = lambda i: np.load("%s/arg%d_out.npy" % (a.dump, i))
    # Kernel arguments: inputs q, k, v, g, beta, state, seq_lens; then o.
    # With split norms (k3-compile --kda-split-norms) q and k are the
    # convolutions' rows, each followed by its inverse norms [T, H]: nine
    # inputs; the rows are normalized here in fp64 (as --l2norm) and the
    # kernel's inverse norms are checked against fp64's too.
    ins = {m["index"]: i for i, m in enumerate(meta) if m["kind"] == "input"}
    # The o output (o normalized with the output norm): the 2-D output.
    o_arg = next(i for i, m in enumerate(meta) if m["kind"] == "output" and len(m["dims"]) == 2)
    # Split norms: the second input is q's inverse norms [T, H], narrower
    # than q; otherwise it is k, as wide as q.
    gic = inp(ins[1]).ndim == 1
    split = not gic and inp(ins[1]).shape[1] < inp(ins[0]).shape[1]
    base = 9 if split or gic else 7
    if gic:
        if not a.gate or not (a.gate == "softplus" or a.gate.startswith("bounded=")):
            sys.exit("error: a --kda-gate-in-chunk kernel's dump (logits, a_log, dt_bias): "
                     "pass --gate bounded=LB or --gate softplus")
        if a.gate != "softplus":
            try:
                float(a.gate.split("=", 1)[1])
            except ValueError:
                sys.exit("error: --gate %s: the lower bound is not a number (e.g. bounded=-5)"
                         % a.gate)
        z, a_log, dt_bias, q, k, v, beta, S0, lens = (inp(ins[j]) for j in range(9))
        state_arg = ins[7]
    elif split:
        q, qinv, k, kinv, v, g, beta, S0, lens = (inp(ins[j]) for j in range(9))
        state_arg = ins[7]
    else:
        q, k, v, g, beta, S0, lens = (inp(ins[j]) for j in range(7))
        state_arg = ins[5]
    out_norm = len(ins) == base + 2
    if len(ins) not in (base, base + 2):
        sys.exit("error: %d inputs: not a delta rule kernel's dump" % len(ins))
    if out_norm:
        gate, w_norm = inp(ins[base]), inp(ins[base + 1])
    lens = [int(x) for x in lens]
    H = S0.shape[1]
    T = sum(lens)
    checks = []
    if gic:
        # g from the logits in fp64, with the gate kernel's formula (spec §4.4).
        dk = S0.shape[3]
        zz = z[:T].astype(np.float64).reshape(T, H, dk) + dt_bias.astype(np.float64).reshape(H, dk)
        ea = np.exp(a_log.astype(np.float64)[:H])[None, :, None]
        if a.gate == "softplus":
            sp = np.where(zz > 20.0, zz, np.log1p(np.exp(np.minimum(zz, 20.0))))
            g = (-ea * sp).reshape(T, H * dk)
        else:
            lb = float(a.gate.split("=", 1)[1])
            g = (lb / (1.0 + np.exp(-ea * zz))).reshape(T, H * dk)
    if a.l2norm or split:
        dk = S0.shape[3]
        def inv_norm(x):
            x = x.astype(np.float64).reshape(x.shape[0], H, dk)
            return 1.0 / np.sqrt((x * x).sum(-1) + 1e-6)
        def l2(x, scale):
            r = inv_norm(x)[:, :, None]
            return (x.astype(np.float64).reshape(x.shape[0], H, dk) * r * scale).reshape(x.shape[0], H * dk)
        if split:
            checks += [("q inv", qinv[:T], inv_norm(q[:T])), ("k inv", kinv[:T], inv_norm(k[:T]))]
        q, k = l2(q, 1.0 / np.sqrt(dk)), l2(k, 1.0)
    o_ref, S_ref = reference(q[:T], k[:T], v[:T], g[:T], beta[:T], S0, lens, H)
    if out_norm:
        dv = S0.shape[2]
        x = o_ref.reshape(T, H, dv)
        gt = gate[:T].astype(np.float64).reshape(T, H, dv)
        x = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w_norm.astype(np.float64)
        o_ref = (x / (1.0 + np.exp(-gt))).reshape(T, H * dv)
    o_got, S_got = out(o_arg)[:T], out(state_arg)
    print("kernel %s: %d sequences, %d tokens, %d heads, d_k %d, d_v %d, o dtype %s%s%s%s"
          % (meta[0]["kernel"], len(lens), T, H, S0.shape[3], S0.shape[2], meta[o_arg]["dtype"],
             ", split norms" if split else "", ", gated output norm" if out_norm else "",
             ", gate formed in the kernel (%s)" % a.gate if gic else ""))
    ok = True
    for name, got, ref in checks + [("o", o_got, o_ref), ("state", S_got, S_ref)]:
        same_nonfinite = bool((~np.isfinite(got) == ~np.isfinite(ref)).all())
        rms, mx = ratios(np.nan_to_num(got), np.nan_to_num(ref))
        good = rms <= a.rms_tol and same_nonfinite
        ok &= good
        print("  %-5s vs fp64: RMS ratio %.3e, max ratio %.3e, NaN/inf positions equal %s -> %s"
              % (name, rms, mx, same_nonfinite, "PASS" if good else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
