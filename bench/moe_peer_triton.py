#!/usr/bin/env python3
"""Peer for the K3 MoE grouped GEMM: the same MXFP4-weight / bf16-activation
mixture-of-experts layer through OpenAI's `triton_kernels` (the package in
python/triton_kernels of triton-lang/triton), on one Hopper GPU.

Per case: bf16 activations x[T, L], a uniform random top-k routing (each token
picks k distinct experts at random, fixed seed; gate weights random positive,
normalised per token), a fused gate|up weight W13[E, L, 2I] and a down weight
W2[E, I, L], both quantised to MXFP4 by triton_kernels' own downcast_to_mxfp
and laid out with its default Hopper value/scale swizzles. Timed with CUDA
events (median of --reps after warmup, bench_common.median_ms):

  up    matmul(x, W13, gather_indx=routing)         -> h[T*k, 2I] bf16 (expert-sorted rows)
  down  matmul(a, W2, scatter_indx=routing, gammas=gates) -> [T*k, L]
        + the top-k combine (triton_kernels.reduce over k) -> y[T, L]
  total up + torch elementwise act = silu(h[:, :I]) * h[:, I:] (bf16) + down

TFLOP/s = 2*pairs*(2*I*L + I*L) / total; GB/s = MXFP4 bytes (values + e8m0
scales, unpadded) of the experts that got at least one token / total.

The triton_kernels tree is not installed: it is looked up as a folder
(`--peers DIR`, holding triton_kernels/triton_kernels/__init__.py); by default
`peers` beside this script (so a copy in .dev/ finds .dev/peers) or .dev/peers
of the checkout this script sits in.

usage: moe_peer_triton.py [--cases e256_t8,e896] [--quick] [--peers DIR]
"""
import argparse
import dataclasses
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

# name, E, top-k, L (hidden), I (expert intermediate), T (tokens)
CASES = [("e256_t%d" % t, 256, 16, 3584, 3072, t) for t in (8, 16, 64, 1024, 2340, 8192)] + \
        [("e896_t%d" % t, 896, 16, 3584, 3072, t) for t in (8, 64, 8192)]
QUICK_CASES = ("e256_t8", "e256_t1024")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="",
                   help="comma list of case names (%s) or prefixes such as e256, e896; default all"
                   % ", ".join(c[0] for c in CASES))
    p.add_argument("--quick", action="store_true",
                   help="fewer repetitions; without --cases only %s" % ", ".join(QUICK_CASES))
    p.add_argument("--peers", default=None, help="folder holding triton_kernels/ (the python/triton_kernels tree)")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (default 20, --quick 5)")
    p.add_argument("--warmup", type=int, default=None, help="warmup calls (default 3, --quick 2)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--scale-warps", default="auto", choices=["auto", "4", "8"],
                   help="num_warps baked into the Hopper MXFP4 scale swizzle (the kernel then uses it); "
                        "auto: 4 if T <= 512 else 8, as triton_kernels' bench_mlp.py does")
    p.add_argument("--no-check", action="store_true",
                   help="skip the layout self-test and the per-case check of a few tokens against torch")
    return p.parse_args()


def find_peers(arg):
    if arg:
        return os.path.abspath(arg)
    for cand in (os.path.join(HERE, "peers"), os.path.join(os.path.dirname(HERE), ".dev", "peers")):
        if os.path.isdir(cand):
            return cand
    return os.path.join(HERE, "peers")


ARGS = parse_args()
PEERS = find_peers(ARGS.peers)
# the package lives at <peers>/triton_kernels/triton_kernels
for pth in (PEERS, os.path.join(PEERS, "triton_kernels")):
    if os.path.isdir(pth) and pth not in sys.path:
        sys.path.insert(0, pth)
# bench_common: next to this script, or in the checkout's bench/
for pth in (os.path.join(os.path.dirname(HERE), "bench"), HERE):
    if os.path.isfile(os.path.join(pth, "bench_common.py")) and pth not in sys.path:
        sys.path.insert(0, pth)

try:
    import torch
    import triton
    import triton_kernels
    from triton_kernels.matmul import matmul, PrecisionConfig
    from triton_kernels.numerics_details.mxfp import downcast_to_mxfp, upcast_from_mxfp
    from triton_kernels.tensor import FP4, Storage, Tensor, convert_layout, wrap_torch_tensor
    from triton_kernels.tensor import make_ragged_tensor_metadata
    from triton_kernels.tensor_details import layout as tk_layout
except Exception as exc:  # noqa: BLE001 - any import failure is fatal here
    print("moe_peer_triton: cannot import triton_kernels (looked in %s): %s: %s"
          % (PEERS, type(exc).__name__, exc), file=sys.stderr)
    print("  expected <peers>/triton_kernels/triton_kernels/__init__.py (python/triton_kernels of "
          "triton-lang/triton); pass --peers DIR", file=sys.stderr)
    sys.exit(2)

try:
    from triton_kernels.reduce import reduce as tk_reduce
except Exception:  # noqa: BLE001
    tk_reduce = None

from bench_common import median_ms


def kcommit():
    try:
        return open(os.path.join(PEERS, "triton_kernels", "K3C_COMMIT.txt")).read().strip()[:12]
    except OSError:
        return "?"


# ---------------------------------------------------------------- weights

def gen_bf16(tag, c0, c, K, N, seed):
    """Deterministic random bf16 weights of experts [c0, c0+c): regenerated
    identically by the check."""
    g = torch.Generator(device="cuda")
    g.manual_seed(seed * 1000003 + tag * 7919 + c0)
    w = torch.randn((c, K, N), generator=g, device="cuda", dtype=torch.float32)
    return w.mul_(0.02).to(torch.bfloat16)


def cat_dim0(parts):
    """torch.cat along dim 0 that keeps the parts' memory order (the swizzled
    storages are transposed views; a plain cat would make them row-major)."""
    d0 = parts[0]
    order = sorted(range(d0.ndim), key=lambda i: (-d0.stride(i), i))
    if order[0] != 0:
        raise RuntimeError("cannot concatenate swizzled storage: dim 0 is not outermost (strides %s)"
                           % (tuple(d0.stride()), ))
    full = torch.cat([p.permute(order) for p in parts], dim=0)
    inv = [order.index(i) for i in range(d0.ndim)]
    return full.permute(inv)


def cat_tk_tensors(parts, layout_cls, layout_opts):
    """Concatenate triton_kernels Tensors converted chunk by chunk (experts on
    dim 0) into one Tensor whose layout object describes the full shape."""
    if len(parts) == 1:
        return parts[0]
    data = cat_dim0([p.storage.data for p in parts])
    init = list(parts[0].storage.layout.initial_shape)
    init[0] = sum(p.storage.layout.initial_shape[0] for p in parts)
    new_layout = layout_cls(torch.Size(init), **layout_opts)
    shape = list(parts[0].shape)
    shape[0] = sum(p.shape[0] for p in parts)
    shape_max = list(parts[0].shape_max)
    shape_max[0] = sum(p.shape_max[0] for p in parts)
    return Tensor(Storage(data, new_layout), dtype=parts[0].dtype, shape=shape, shape_max=shape_max)


def layouts(num_warps):
    vl, vo = tk_layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
    sl, so = tk_layout.make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=num_warps)
    return vl, vo, sl, so


def quantize_chunk(w, num_warps):
    """bf16 [c, K, N] -> (MXFP4 values, e8m0 scales), quantised along K, Hopper layout."""
    vl, vo, sl, so = layouts(num_warps)
    wq, ws = downcast_to_mxfp(w, torch.uint8, axis=1)
    wq = convert_layout(wrap_torch_tensor(wq, dtype=FP4), vl, **vo)
    ws = convert_layout(wrap_torch_tensor(ws), sl, **so)
    return wq, ws


def build_mxfp4(E, K, N, tag, seed, num_warps, chunk_bytes=1 << 30):
    """W[E, K, N] (K = reduction dim) as MXFP4, built in expert chunks to bound
    the transient memory of the bf16 source and of the swizzle."""
    chunk = max(1, min(E, chunk_bytes // (K * N * 2)))
    vals, scales = [], []
    for c0 in range(0, E, chunk):
        c = min(chunk, E - c0)
        w = gen_bf16(tag, c0, c, K, N, seed)
        wq, ws = quantize_chunk(w, num_warps)
        del w
        vals.append(wq)
        scales.append(ws)
    vl, vo, sl, so = layouts(num_warps)
    wq = cat_tk_tensors(vals, vl, vo)
    del vals
    ws = cat_tk_tensors(scales, sl, so)
    del scales
    return wq, ws, chunk


def dequant_expert(tag, e, chunk, E, K, N, seed):
    """The exact MXFP4-rounded weights of expert e as bf16 [K, N] (for the
    check): regenerates e's whole chunk (same shape, so the same random
    stream), quantises and dequantises expert e alone (MX blocks run along K
    within one expert, so this matches the chunked quantisation)."""
    c0 = (e // chunk) * chunk
    w = gen_bf16(tag, c0, min(chunk, E - c0), K, N, seed)[e - c0:e - c0 + 1].contiguous()
    wq, ws = downcast_to_mxfp(w, torch.uint8, axis=1)
    return upcast_from_mxfp(wq, ws, torch.bfloat16, axis=1)[0]


def make_pc(w_scale):
    """PrecisionConfig carrying the weight's MX scales; the field is
    `b_mx_scale` in the pinned triton_kernels (`weight_scale` in older ones)."""
    names = {f.name for f in dataclasses.fields(PrecisionConfig)}
    key = "b_mx_scale" if "b_mx_scale" in names else "weight_scale"
    kw = {key: w_scale}
    if "out_dtype" in names:
        kw["out_dtype"] = torch.bfloat16
    return PrecisionConfig(**kw)


def layout_selftest():
    """Chunked quantise+swizzle+concatenate must equal one whole conversion."""
    E, K, N = 4, 256, 512
    w = gen_bf16(99, 0, E, K, N, 7)
    for nw in (4, 8):
        vl, vo, sl, so = layouts(nw)
        whole_q, whole_s = quantize_chunk(w, nw)
        parts = [quantize_chunk(w[i:i + 1].contiguous(), nw) for i in range(E)]
        cq = cat_tk_tensors([p[0] for p in parts], vl, vo)
        cs = cat_tk_tensors([p[1] for p in parts], sl, so)
        for a, b, what in ((whole_q, cq, "values"), (whole_s, cs, "scales")):
            da, db = a.storage.data, b.storage.data
            if tuple(da.shape) != tuple(db.shape) or tuple(da.stride()) != tuple(db.stride()) \
                    or not torch.equal(da, db) or list(a.shape) != list(b.shape):
                raise RuntimeError("layout self-test: chunked %s differ (nw=%d, shapes %s/%s strides %s/%s)"
                                   % (what, nw, tuple(da.shape), tuple(db.shape), da.stride(), db.stride()))
    return "ok (%s / %s)" % (vl.__name__, sl.__name__)


# ---------------------------------------------------------------- routing

def make_routing(T, E, k, seed):
    """Uniform top-k: each token picks k distinct experts uniformly at random;
    gates random positive, normalised to sum 1 per token. Laid out the way
    triton_kernels' single-GPU routing does: rows sorted by expert (stable),
    gather_indx = combine_indx // k, scatter_indx = combine_indx."""
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    experts = torch.rand((T, E), generator=g).argsort(dim=1)[:, :k].contiguous()
    gates = torch.rand((T, k), generator=g) + 0.05
    gates = gates / gates.sum(dim=1, keepdim=True)
    flat = experts.reshape(-1)
    combine = torch.argsort(flat, stable=True).to(torch.int32)  # sorted row j -> token*k + slot
    counts = torch.bincount(flat, minlength=E).to(torch.int32)
    dev = torch.device("cuda")
    r = dict(experts=experts, gates=gates, counts=counts)
    r["combine"] = combine.to(dev)
    r["gather"] = (combine // k).to(torch.int32).to(dev)
    r["scatter"] = r["combine"]
    r["gammas"] = gates.reshape(-1)[combine.long()].to(torch.float32).to(dev)
    r["meta"] = make_ragged_tensor_metadata(counts.to(dev), T * k)
    return r


# ---------------------------------------------------------------- one case

class State:
    key = None
    w = None


def free_weights():
    State.key, State.w = None, None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def expert_bytes(L, I):
    up = L * 2 * I // 2 + (L // 32) * 2 * I
    down = I * L // 2 + (I // 32) * L
    return up + down


def get_weights(E, L, I, nw, seed):
    key = (E, L, I, nw, seed)
    if State.key == key:
        return State.w, 0.0
    free_weights()
    need = E * expert_bytes(L, I) * 1.1 + (2 << 30)
    free, _ = torch.cuda.mem_get_info()
    if need > free:
        raise MemoryError("weights need ~%.1f GB, %.1f GB free" % (need / 1e9, free / 1e9))
    t0 = time.time()
    w13, s13, ch13 = build_mxfp4(E, L, 2 * I, 1, seed, nw)  # up: K = L, N = 2I (gate | up)
    w2, s2, ch2 = build_mxfp4(E, I, L, 2, seed, nw)  # down: K = I, N = L
    torch.cuda.synchronize()
    State.key = key
    State.w = dict(w13=w13, pc13=make_pc(s13), w2=w2, pc2=make_pc(s2), ch13=ch13, ch2=ch2)
    return State.w, time.time() - t0


def run_case(name, E, k, L, I, T, args):
    nw = (4 if T <= 512 else 8) if args.scale_warps == "auto" else int(args.scale_warps)
    W, build_s = get_weights(E, L, I, nw, args.seed)
    pairs = T * k
    need_act = pairs * (2 * I + I + 2 * L) * 2 + T * L * 4
    free, _ = torch.cuda.mem_get_info()
    if need_act > free:
        raise MemoryError("activations need ~%.1f GB, %.1f GB free" % (need_act / 1e9, free / 1e9))
    R = make_routing(T, E, k, args.seed + T)
    g = torch.Generator(device="cuda")
    g.manual_seed(args.seed + 17 * T)
    x = torch.randn((T, L), generator=g, device="cuda", dtype=torch.float32).to(torch.bfloat16)

    w13, pc13, w2, pc2 = W["w13"], W["pc13"], W["w2"], W["pc2"]
    meta, gather, scatter, gammas = R["meta"], R["gather"], R["scatter"], R["gammas"]
    combine_note = ["tk.reduce" if tk_reduce is not None else "torch.sum (no triton_kernels.reduce)"]

    def up():
        return matmul(x, w13, None, meta, gather_indx=gather, precision_config=pc13)

    def act_fn(h):
        return torch.nn.functional.silu(h[:, :I]) * h[:, I:]

    def down_mm(a):
        return matmul(a, w2, None, meta, scatter_indx=scatter, precision_config=pc2, gammas=gammas)

    def combine(y):
        y3 = y.view(T, k, L)
        if combine_note[0] == "tk.reduce":
            try:
                r = tk_reduce(y3, dim=1)
                r = r[0] if isinstance(r, (tuple, list)) else r
                if tuple(r.shape) != (T, L):
                    raise RuntimeError("reduce gave shape %s" % (tuple(r.shape), ))
                return r
            except Exception as exc:  # noqa: BLE001
                msg = (str(exc).strip().splitlines() or [""])[-1][:100]
                combine_note[0] = "torch.sum (tk.reduce failed: %s: %s)" % (type(exc).__name__, msg)
        return y3.sum(dim=1)

    def down(a):
        return combine(down_mm(a))

    def total():
        return down(act_fn(up()))

    h = up()
    a = act_fn(h).contiguous()
    out = down(a)
    torch.cuda.synchronize()
    if tuple(h.shape) != (pairs, 2 * I) or tuple(out.shape) != (T, L):
        raise RuntimeError("unexpected shapes: up %s, out %s" % (tuple(h.shape), tuple(out.shape)))

    chk = None
    if not args.no_check:
        chk = check(x, R, out, E, k, L, I, W, args.seed, T)

    reps, warm = args.reps, args.warmup
    t_up = median_ms(up, reps, warm)
    t_dn = median_ms(lambda: down(a), reps, warm)
    t_dnmm = median_ms(lambda: down_mm(a), reps, warm)
    t_tot = median_ms(total, reps, warm)
    n_active = int((R["counts"] > 0).sum())
    flops = 2.0 * pairs * (2 * I * L + I * L)
    wbytes = n_active * expert_bytes(L, I)
    return dict(name=name, T=T, pairs=pairs, up=t_up, down=t_dn, dnmm=t_dnmm, total=t_tot,
                tflops=flops / (t_tot * 1e-3) / 1e12, gbs=wbytes / (t_tot * 1e-3) / 1e9,
                active=n_active, E=E, nw=nw, chk=chk, build_s=build_s, combine=combine_note[0])


def check(x, R, out, E, k, L, I, W, seed, T):
    """A few tokens against torch on the exact MXFP4-rounded weights: fp32
    matmuls, bf16 rounding where the kernels round (up output, activation)."""
    toks = sorted({0, T // 2, T - 1})
    worst = 0.0
    cache = {}
    for t in toks:
        ref = torch.zeros(L, dtype=torch.float32, device="cuda")
        for j in range(k):
            e = int(R["experts"][t, j])
            if e not in cache:
                cache[e] = (dequant_expert(1, e, W["ch13"], E, L, 2 * I, seed).float(),
                            dequant_expert(2, e, W["ch2"], E, I, L, seed).float())
            w13, w2 = cache[e]
            h = (x[t].float() @ w13).to(torch.bfloat16)
            a = (torch.nn.functional.silu(h[:I]) * h[I:]).to(torch.bfloat16)
            ref += float(R["gates"][t, j]) * (a.float() @ w2)
        got = out[t].float()
        worst = max(worst, float((got - ref).norm() / ref.norm().clamp_min(1e-30)))
    return worst


# ---------------------------------------------------------------- main

def pick_cases(args):
    if not args.cases:
        return [c for c in CASES if (not args.quick or c[0] in QUICK_CASES)]
    want = [s.strip() for s in args.cases.split(",") if s.strip()]
    sel = [c for c in CASES if any(c[0] == w or c[0].startswith(w + "_") for w in want)]
    unknown = [w for w in want if not any(c[0] == w or c[0].startswith(w + "_") for c in CASES)]
    if unknown:
        print("unknown cases: %s (known: %s)" % (", ".join(unknown), ", ".join(c[0] for c in CASES)))
    return sel


def main(args):
    if args.reps is None:
        args.reps = 5 if args.quick else 20
    if args.warmup is None:
        args.warmup = 2 if args.quick else 3
    if not torch.cuda.is_available():
        print("moe_peer_triton: no CUDA device", file=sys.stderr)
        return 2
    cases = pick_cases(args)
    dev = torch.cuda.get_device_name(0)
    cap = torch.cuda.get_device_capability(0)
    print("# triton_kernels %s from %s (commit %s); triton %s; torch %s; %s sm_%d%d"
          % (getattr(triton_kernels, "__file__", "?"), PEERS, kcommit(), triton.__version__, torch.__version__,
             dev, cap[0], cap[1]))
    print("# MXFP4 weights (e2m1 + e8m0 per 32 along K), bf16 activations, bf16 out; "
          "default Hopper value/scale swizzle; median of %d after %d warmup" % (args.reps, args.warmup))
    print("# up = gathered x @ W13[E, L, 2I]; down = (a @ W2[E, I, L]) * gate, scattered, + combine over k; "
          "total = up + torch silu(h[:, :I]) * h[:, I:] (bf16) + down")
    if not args.no_check:
        try:
            print("# layout self-test (chunked == whole convert_layout): %s" % layout_selftest())
        except Exception as exc:  # noqa: BLE001
            print("# layout self-test FAILED: %s: %s" % (type(exc).__name__, exc))
    hdr = "%-10s %6s %7s %8s %8s %8s %8s %8s %8s %5s %3s %9s" % (
        "case", "T", "pairs", "up_ms", "down_ms", "dnmm_ms", "total_ms", "TFLOP/s", "GB/s", "act_E", "nw", "chk_rel")
    print(hdr)
    sys.stdout.flush()
    notes = []
    for name, E, k, L, I, T in cases:
        try:
            r = run_case(name, E, k, L, I, T, args)
            chk = "-" if r["chk"] is None else "%.2e" % r["chk"]
            print("%-10s %6d %7d %8.3f %8.3f %8.3f %8.3f %8.1f %8.1f %5d %3d %9s" % (
                name, T, r["pairs"], r["up"], r["down"], r["dnmm"], r["total"], r["tflops"], r["gbs"],
                r["active"], r["nw"], chk))
            if r["build_s"]:
                notes.append("%s: built E=%d weights (scale num_warps=%d) in %.1f s" % (name, E, r["nw"], r["build_s"]))
            if r["combine"] != "tk.reduce":
                notes.append("%s: combine via %s" % (name, r["combine"]))
            if r["chk"] is not None and not r["chk"] < 5e-2:
                notes.append("%s: CHECK rel err %.3e above 5e-2" % (name, r["chk"]))
        except Exception as exc:  # noqa: BLE001 - one bad case must not end the run
            line = (str(exc).strip().splitlines() or [""])[-1] if str(exc).strip() else ""
            print("%-10s %6d  ERROR %s: %s" % (name, T, type(exc).__name__, line[:300]))
            tb = traceback.extract_tb(exc.__traceback__)
            if tb:
                f = tb[-1]
                notes.append("%s: %s at %s:%d" % (name, type(exc).__name__, os.path.basename(f.filename), f.lineno))
            if isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)):
                free_weights()
        sys.stdout.flush()
    free_weights()
    for n in notes:
        print("# " + n)
    print("# columns: down_ms = matmul+scatter+gates+combine; dnmm_ms = the down matmul alone; "
          "act_E = experts with >=1 token (GB/s counts their MXFP4 values+scales of W13 and W2); "
          "nw = num_warps of the scale swizzle; chk_rel = worst relative L2 error of 3 tokens vs torch on the same "
          "MXFP4 weights")
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
