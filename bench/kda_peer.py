#!/usr/bin/env python3
"""Peer benchmark: fla's KDA kernels on the shapes k3c runs.

Times flash-linear-attention's (fla-org/flash-linear-attention) Kimi Delta
Attention kernels with CUDA events (warm-up, then the median of repeats, in
torch.inference_mode()) and measures their error against a float64 reference
recurrence:

  chunk             chunk_kda prefill, B=1: q, k L2-normalized beforehand (bf16),
                    g = -5*sigmoid(z) precomputed in fp32 (K3's bounded gate),
                    beta = sigmoid(N(0,1)) (bf16), fp32 zero initial state,
                    output_final_state=True, safe_gate=True, lower_bound=-5.
  chunk_gate_norm   the same with the gate and the q/k L2 norm done by fla
                    (use_gate_in_kernel with A_log=0, dt_bias=0, lower_bound=-5,
                    which is exactly -5*sigmoid(z); use_qk_l2norm_in_kernel).
  short_conv        fla's Triton causal_conv1d_fwd (fla.modules.conv.triton) on
                    the q, k, v channels of the same shape, [1, T, 3*H*K] bf16,
                    kernel 4, SiLU: the short convolutions k3c's conv/gate
                    family also runs (chunk_gate_norm has no convolution), its
                    output checked against torch's conv1d in fp32 (max rel in
                    the note); GB/s counts x read and y written. --no-conv
                    skips it.
  f_b_linear        torch's bf16 linear (cuBLAS) of the gate's low-rank up
                    projection, [T, K] x [H*K, K]^T: the input
                    chunk_gate_norm's in-kernel gate takes (fla's f_proj[1]);
                    k3c computes it in the same tile as the gate.
  out_norm          fla's rms_norm_gated (activation sigmoid, fla's KDA
                    o_norm) on [T*H, V] bf16 with a bf16 gate, checked
                    against torch fp32 (max rel in the note).
  layer_graph       the sum of the graph rows short_conv, f_b_linear,
                    chunk_gate_norm and out_norm: the KDA layer between its
                    input and output projections, what k3c's launches of
                    kda_conv_gate, kda_chunk and kda_out's per-head norm do.
  recurrent_seq     fused_recurrent_kda over a whole sequence (check cases only:
                    fla's token-sequential kernel, an accuracy floor).
  decode            fused_recurrent_kda, one token per sequence, batch B, fp32
                    state [B, H, K, V]; GB/s counts the state read + written.
  decode_gate_norm  decode with gate and q/k L2 norm inside fla's kernel.
  *_graph           the same calls replayed from a CUDA graph: GPU time without
                    fla's Python/launch overhead (which the eager rows include;
                    it dominates small prefills and every eager decode).

The recurrence (per head, fla's state S is [K, V]; k3c's is its transpose):
  S <- S * exp(g_t)[:, None]          (decay per key channel)
  u  = beta_t * (v_t - k_t S)
  S <- S + k_t^T u
  o_t = (scale * q_t) S               (scale defaults to 1/sqrt(K), as in fla)

Numerics (the --check cases): RMS(o_fla - o_ref)/RMS(o_ref) and the same for
the final state. For the --dump case the inputs and outputs are written as
.npy into --out in k3c's layouts, so another program can run the identical
inputs:
  q, k, g        [T, H*K]  float32 (token-major, channel h*K + c); g is the
                           log-decay -5*sigmoid(z), gate_logit is z
  v              [T, H*V]  float32
  beta           [T, H]    float32 (post-sigmoid)
  S0, S, S_ref   [H, V, K] float32 (k3c's [h, j(value), c(key)], i.e. fla's
                           [K, V] state transposed)
  o, o_ref       [T, H*V]  float32 (o: fla's chunk_kda output; o_ref: fp64
                           reference rounded to fp32)
  meta.json      shapes, scale, gate bound, fla commit
--compare DIR loads DIR/{q,k,v,g,beta,S0,o,S}.npy in those layouts (o may be
[T, H, V]), runs reference_kda and prints the RMS ratios; --compare on the
--out directory reproduces fla's own numbers.

fla is imported from --fla DIR (the directory holding the `fla` package;
default: <dir of this script>/peers/fla, else <repo>/.dev/peers/fla) without
running the package __init__ files of fla, fla.ops and fla.modules: those
import every layer/model/op (transformers, einops, causal_conv1d, ...), while
fla.ops.kda itself needs only torch, triton and packaging. If `packaging` is
missing, a minimal packaging.version (parse and comparisons) is installed.
einops is not needed on this path (fla uses it only in docstrings there).

usage:
  python3 kda_peer.py [--fla DIR] [--csv FILE] [--out DIR]
  python3 kda_peer.py --compare DIR
"""
import argparse
import csv
import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import logging
import math
import os
import re
import statistics
import sys
import types

np = torch = None  # imported in main(), so that --help works without them

GATE_LOWER_BOUND = -5.0  # K3's bounded gate: g = -5 * sigmoid(z)
WARMUP, REPS = 3, 10


# --------------------------------------------------------------------------
# Importing fla.ops.kda without the heavy package __init__ files
# --------------------------------------------------------------------------

def _ensure_packaging():
    """Installs a minimal `packaging.version` if the real one is missing.

    fla.utils and fla.ops.utils.cache only do
    `version.parse(s) >= version.parse("3.4.0")` style checks on the versions
    of torch, triton, Python and fla, so parse() plus ordering is enough.
    """
    try:
        import packaging.version  # noqa: F401
        return False
    except ImportError:
        pass

    @functools.total_ordering
    class Version:
        _re = re.compile(r'\s*v?(\d+(?:\.\d+)*)(.*)')

        def __init__(self, text):
            m = self._re.match(str(text))
            if not m:
                raise ValueError(f'unparsable version {text!r}')
            release = [int(x) for x in m.group(1).split('.')]
            while len(release) > 1 and release[-1] == 0:
                release.pop()
            tail = m.group(2).lstrip('.-_').lower()
            # a1, b2, rc1, dev0 sort before the release; +local and post after
            self._key = (tuple(release), 0 if re.match(r'(a|b|c|rc|alpha|beta|pre|preview|dev)\d', tail) else 1)
            self.public = m.group(1)
            self.release = tuple(release)

        def __eq__(self, other):
            return self._key == _as_version(other)._key

        def __lt__(self, other):
            return self._key < _as_version(other)._key

        def __hash__(self):
            return hash(self._key)

        def __str__(self):
            return self.public

    def _as_version(x):
        return x if isinstance(x, Version) else Version(x)

    version = types.ModuleType('packaging.version')
    version.Version = Version
    version.parse = Version
    version.InvalidVersion = ValueError
    pkg = types.ModuleType('packaging')
    pkg.__path__ = []
    pkg.version = version
    sys.modules['packaging'] = pkg
    sys.modules['packaging.version'] = version
    return True


def _stub_package(name, path):
    """Registers package `name` (files under `path`) without running its __init__."""
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [path]
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    parent, _, child = name.rpartition('.')
    if parent:
        setattr(sys.modules[parent], child, mod)
    return mod


def default_fla_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, 'peers', 'fla'),
                 os.path.join(here, '..', '.dev', 'peers', 'fla')):
        if os.path.isdir(os.path.join(cand, 'fla', 'ops', 'kda')):
            return os.path.normpath(cand)
    return os.path.join(here, 'peers', 'fla')


def import_fla_kda(fla_dir):
    """Returns the fla.ops.kda module from `fla_dir` (the directory holding `fla`)."""
    root = os.path.join(os.path.abspath(fla_dir), 'fla')
    if not os.path.isfile(os.path.join(root, 'ops', 'kda', '__init__.py')):
        sys.exit(f'error: no fla/ops/kda under {fla_dir} (pass --fla DIR)')
    if 'fla' in sys.modules:
        sys.exit('error: a package `fla` is already imported')
    shimmed = _ensure_packaging()
    sys.path.insert(0, os.path.abspath(fla_dir))
    # fla/__init__ imports fla.layers and fla.models (transformers),
    # fla/ops/__init__ every op, fla/modules/__init__ einops, transformers and
    # causal_conv1d users; the kda path needs none of that.
    fla = _stub_package('fla', root)
    with open(os.path.join(root, '__init__.py')) as fh:
        m = re.search(r'__version__\s*=\s*["\']([^"\']+)', fh.read())
    fla.__version__ = m.group(1) if m else '0.0.0'  # fla.utils._decorators reads it
    _stub_package('fla.ops', os.path.join(root, 'ops'))
    _stub_package('fla.modules', os.path.join(root, 'modules'))
    kda = importlib.import_module('fla.ops.kda')
    return kda, shimmed


def import_fla_conv():
    """fla's Triton short convolution (fla.modules.conv.triton.ops, after
    import_fla_kda): causal_conv1d_fwd(x, weight, bias, residual, ...,
    activation). fla.modules.conv's __init__ (long convolutions, layers) is
    not run; einops, imported there but used only for inputs whose last
    dimension is not the weight's, is stubbed when missing."""
    root = os.path.dirname(sys.modules['fla.modules'].__path__[0])
    try:
        import einops  # noqa: F401
    except ImportError:
        e = types.ModuleType('einops')

        def rearrange(*a, **k):
            raise NotImplementedError('einops stub (kda_peer.py)')
        e.rearrange = rearrange
        sys.modules['einops'] = e
    _stub_package('fla.modules.conv', os.path.join(root, 'modules', 'conv'))
    return importlib.import_module('fla.modules.conv.triton.ops').causal_conv1d_fwd


def fla_commit(fla_dir):
    try:
        return open(os.path.join(fla_dir, 'COMMIT')).read().strip()
    except OSError:
        return 'unknown'


# --------------------------------------------------------------------------
# float64 reference (k3c layouts)
# --------------------------------------------------------------------------

def reference_kda(q, k, v, g, beta, S0, scale=None, device=None):
    """Token-by-token KDA recurrence in float64, in k3c's layouts.

    q, k, g: [T, H*K] (g: log-decay per key channel, <= 0)
    v:       [T, H*V]
    beta:    [T, H]   (post-sigmoid)
    S0:      [H, V, K] (k3c state [h, j(value), c(key)] = fla's [K, V] transposed)
    scale:   multiplies q (fla's convention), default 1/sqrt(K)
    Accepts numpy arrays or torch tensors; returns (o [T, H*V], S [H, V, K]) as
    float64 torch tensors on `device` (default: cuda if available).
    """
    if device is None:
        device = 'cuda' if torch.cuda.is_available() else 'cpu'

    def f64(x):
        return torch.as_tensor(x).to(device=device, dtype=torch.float64)

    S = f64(S0).clone()
    H, V, K = S.shape
    T = q.shape[0]
    if scale is None:
        scale = K ** -0.5
    q = f64(q).reshape(T, H, K) * scale
    k = f64(k).reshape(T, H, K)
    v = f64(v).reshape(T, H, V)
    decay = torch.exp(f64(g).reshape(T, H, K))
    beta = f64(beta).reshape(T, H)
    o = torch.empty(T, H, V, dtype=torch.float64, device=device)
    for t in range(T):
        kt = k[t].unsqueeze(2)                                   # [H, K, 1]
        S.mul_(decay[t].unsqueeze(1))                            # S[h,j,c] *= exp(g[t,h,c])
        kS = torch.bmm(S, kt).squeeze(2)                         # [H, V]: sum_c S[h,j,c] k[h,c]
        u = beta[t].unsqueeze(1) * (v[t] - kS)                   # [H, V]
        S.baddbmm_(u.unsqueeze(2), kt.transpose(1, 2))           # S[h,j,c] += u[h,j] k[h,c]
        o[t] = torch.bmm(S, q[t].unsqueeze(2)).squeeze(2)        # o[h,j] = sum_c S[h,j,c] q[h,c]
    return o.reshape(T, H * V), S


def rms_ratio(x, ref):
    x = torch.as_tensor(x).to(device=ref.device, dtype=torch.float64).reshape(ref.shape)
    den = ref.pow(2).mean().sqrt().item()
    return (x - ref).pow(2).mean().sqrt().item() / den if den > 0 else float('nan')


# --------------------------------------------------------------------------
# fla layouts <-> k3c layouts
# --------------------------------------------------------------------------

def tok_major(x):
    """fla [B, T, H, D] (or [B, T, H]) -> k3c [B*T, H*D] (or [B*T, H])."""
    return x.reshape(x.shape[0] * x.shape[1], -1)


def state_to_k3c(S, v_first):
    """fla state [N, H, K, V] (or [N, H, V, K] when state_v_first) -> [N*H, V, K]."""
    S = S if v_first else S.transpose(-1, -2)
    return S.reshape(-1, S.shape[-2], S.shape[-1])


def state_from_k3c(S, N, v_first):
    """[N*H, V, K] -> fla's state layout, contiguous fp32."""
    S = S.reshape(N, -1, S.shape[-2], S.shape[-1])
    return (S if v_first else S.transpose(-1, -2)).contiguous().float()


# --------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------

def median_ms(fn, calls=1):
    """Median over REPS of one fn() (which makes `calls` kernel calls), per call."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / calls)
    return statistics.median(times)


def graph_ms(fn, calls=1):
    """Like median_ms, but fn() is captured once in a CUDA graph and replayed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return median_ms(graph.replay, calls)


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------

class Bench:
    def __init__(self, kda, args):
        self.kda = kda
        self.conv = None
        if not args.no_conv:
            try:
                self.conv = import_fla_conv()
            except Exception as e:  # the peer's module layout may differ
                print(f'# short_conv skipped: {type(e).__name__}: {e}')
        self.args = args
        self.svf = args.state_v_first
        self.rows = []
        params = set(inspect.signature(kda.chunk_kda).parameters)
        # chunk_kda takes **kwargs, so an unknown flag would be swallowed:
        # check the ones this benchmark relies on by name.
        self.has_safe_gate = {'safe_gate', 'lower_bound'} <= params
        self.has_fused = {'use_gate_in_kernel', 'use_qk_l2norm_in_kernel', 'lower_bound'} <= params
        self.has_beta_sigmoid = 'use_beta_sigmoid_in_kernel' in params
        self.has_svf = 'state_v_first' in params
        rparams = set(inspect.signature(kda.fused_recurrent_kda).parameters)
        self.rec_fused = {'use_gate_in_kernel', 'use_qk_l2norm_in_kernel', 'lower_bound', 'A_log', 'dt_bias'} <= rparams
        if self.svf and not (self.has_svf and 'state_v_first' in rparams):
            sys.exit('error: this fla has no state_v_first')

    # common keyword arguments -------------------------------------------
    def _common(self):
        kw = {'scale': self.args.scale, 'output_final_state': True}
        if self.has_svf:
            kw['state_v_first'] = self.svf
        return kw

    def _chunk_kw(self):
        kw = self._common()
        if self.has_safe_gate:
            kw.update(safe_gate=True, lower_bound=GATE_LOWER_BOUND)
        return kw

    # inputs ---------------------------------------------------------------
    def inputs(self, B, T, H, seed, s0_std=0.0):
        K = V = self.args.head_dim
        gen = torch.Generator(device='cuda').manual_seed(seed)

        def randn(*shape):
            return torch.randn(*shape, generator=gen, device='cuda', dtype=torch.float32)

        def l2n(x):
            return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True))

        q_raw, k_raw = randn(B, T, H, K), randn(B, T, H, K)
        x = {
            'q': l2n(q_raw).bfloat16(), 'k': l2n(k_raw).bfloat16(),
            'q_raw': q_raw.bfloat16(), 'k_raw': k_raw.bfloat16(),
            'v': randn(B, T, H, V).bfloat16(),
        }
        del q_raw, k_raw
        x['z'] = randn(B, T, H, K)                                # gate logit
        x['g'] = GATE_LOWER_BOUND * torch.sigmoid(x['z'])         # log-decay in (-5, 0)
        x['beta_logit'] = randn(B, T, H)
        x['beta'] = torch.sigmoid(x['beta_logit']).bfloat16()
        if self.args.fuse_beta:
            # with --fuse-beta the reference must see the same beta fla makes
            x['beta_logit'] = x['beta_logit'].bfloat16()
        S0 = randn(B * H, V, K) * s0_std                         # k3c layout
        x['S0_k3c'] = S0
        x['S0'] = state_from_k3c(S0, B, self.svf)
        x['A_log'] = torch.zeros(H, device='cuda', dtype=torch.float32)       # exp(A_log) = 1
        x['dt_bias'] = torch.zeros(H * K, device='cuda', dtype=torch.float32)
        return x

    # fla calls ------------------------------------------------------------
    def chunk(self, x):
        return self.kda.chunk_kda(x['q'], x['k'], x['v'], x['g'], x['beta'],
                                  initial_state=x['S0'], **self._chunk_kw())

    def chunk_gate_norm(self, x):
        kw = self._chunk_kw()
        kw.update(use_gate_in_kernel=True, use_qk_l2norm_in_kernel=True,
                  lower_bound=GATE_LOWER_BOUND, A_log=x['A_log'], dt_bias=x['dt_bias'])
        beta = x['beta']
        if self.args.fuse_beta:
            if not self.has_beta_sigmoid:
                raise NotImplementedError('chunk_kda has no use_beta_sigmoid_in_kernel')
            kw['use_beta_sigmoid_in_kernel'] = True
            beta = x['beta_logit']
        return self.kda.chunk_kda(x['q_raw'], x['k_raw'], x['v'], x['z'], beta,
                                  initial_state=x['S0'], **kw)

    def recurrent(self, x):
        return self.kda.fused_recurrent_kda(x['q'], x['k'], x['v'], x['g'], x['beta'],
                                            initial_state=x['S0'], **self._common())

    def recurrent_gate_norm(self, x):
        kw = self._common()
        kw.update(use_gate_in_kernel=True, use_qk_l2norm_in_kernel=True,
                  lower_bound=GATE_LOWER_BOUND, A_log=x['A_log'], dt_bias=x['dt_bias'])
        return self.kda.fused_recurrent_kda(x['q_raw'], x['k_raw'], x['v'], x['z'], x['beta'],
                                            initial_state=x['S0'], **kw)

    # reference ------------------------------------------------------------
    def reference(self, x, raw=False, beta_logits=False):
        """fp64 reference on exactly what fla was given. B sequences are folded
        into the head axis (they are independent), so T stays per sequence.
        raw: fla got q_raw, k_raw and the gate logit z (the gate+norm variants);
        beta_logits: fla got beta_logit and applied the sigmoid itself."""
        T = x['q'].shape[1]
        if raw:  # inputs of the gate+norm variants: normalize / gate in fp64
            def n(t):
                t = t.double()
                return t / t.pow(2).sum(-1, keepdim=True).sqrt()
            q, k = n(x['q_raw']), n(x['k_raw'])
            g = GATE_LOWER_BOUND * torch.sigmoid(x['z'].double())
        else:
            q, k, g = x['q'], x['k'], x['g']
        beta = torch.sigmoid(x['beta_logit'].double()) if beta_logits else x['beta']

        def fold(t):  # [B, T, H, D] -> [T, B*H*D]
            return t.transpose(0, 1).reshape(T, -1)
        return reference_kda(fold(q), fold(k), fold(x['v']), fold(g), fold(beta),
                             x['S0_k3c'], scale=self.args.scale, device='cuda')

    def errors(self, out, ref):
        o, S = out
        o_ref, S_ref = ref
        T = o.shape[1]
        return (rms_ratio(o.transpose(0, 1).reshape(T, -1), o_ref),
                rms_ratio(state_to_k3c(S, self.svf), S_ref))

    # rows -----------------------------------------------------------------
    def add(self, case, t_or_b, H, ms, gbs=None, rms=(None, None), note=''):
        self.rows.append(dict(case=case, T_or_B=t_or_b, H=H, ms=ms, gbs=gbs,
                              rms_o=rms[0], rms_state=rms[1], note=note))
        print_row(self.rows[-1])

    def graph_row(self, case, t_or_b, H, fn, calls=1, nbytes=None, note=''):
        """A row timed from a CUDA graph replay: the GPU time without fla's
        Python/launch overhead, which the eager rows include."""
        if self.args.no_graph:
            return
        try:
            ms = graph_ms(fn, calls)
        except Exception as e:  # capture is best effort
            self.add(case, t_or_b, H, None, note=f'skipped: {type(e).__name__}: {e}')
            return
        self.add(case, t_or_b, H, ms, gbs=nbytes / (ms * 1e-3) / 1e9 if nbytes else None, note=note)

    def prefill(self, T, H, check, dump):
        x = self.inputs(1, T, H, seed=self.args.seed + T + H)
        ms = median_ms(lambda: self.chunk(x))
        rms, ref = (None, None), None
        if check:
            out = self.chunk(x)
            ref = self.reference(x)
            rms = self.errors(out, ref)
            if dump:
                self.dump(x, out, ref)
        self.add('chunk', T, H, ms, rms=rms)
        self.graph_row('chunk_graph', T, H, lambda: self.chunk(x))

        if not self.has_fused:
            self.add('chunk_gate_norm', T, H, None, note='skipped: no use_gate_in_kernel/'
                     'use_qk_l2norm_in_kernel/lower_bound in chunk_kda')
        else:
            try:
                ms = median_ms(lambda: self.chunk_gate_norm(x))
                rms = (None, None)
                if check:
                    rms = self.errors(self.chunk_gate_norm(x),
                                      self.reference(x, raw=True, beta_logits=self.args.fuse_beta))
                self.add('chunk_gate_norm', T, H, ms, rms=rms,
                         note='+beta sigmoid' if self.args.fuse_beta else '')
                self.graph_row('chunk_gate_norm_graph', T, H, lambda: self.chunk_gate_norm(x))
            except (TypeError, ValueError, AssertionError, NotImplementedError) as e:
                self.add('chunk_gate_norm', T, H, None, note=f'skipped: {type(e).__name__}: {e}')

        if self.conv is not None:
            self.short_conv(T, H)
        self.f_b_linear(T, H)
        self.out_norm(T, H)
        parts = {}
        for r in self.rows:
            if r['T_or_B'] == T and r['H'] == H and r['ms'] is not None:
                parts[r['case']] = r['ms']
        need = ('short_conv_graph', 'f_b_linear_graph', 'chunk_gate_norm_graph', 'out_norm_graph')
        if all(n in parts for n in need):
            self.add('layer_graph', T, H, sum(parts[n] for n in need),
                     note=' + '.join(f'{parts[n]:.3f}' for n in need))

        if check:  # fla's token-sequential kernel on the same sequence
            ms = median_ms(lambda: self.recurrent(x))
            self.add('recurrent_seq', T, H, ms, rms=self.errors(self.recurrent(x), ref))
        del x
        torch.cuda.empty_cache()

    def f_b_linear(self, T, H):
        """The gate's low-rank up projection, [T, K] x [H*K, K]^T in bf16 (cuBLAS)."""
        K = self.args.head_dim
        gen = torch.Generator(device='cuda').manual_seed(self.args.seed + 7 * T + H)
        a = torch.randn(T, K, generator=gen, device='cuda').bfloat16()
        w = (torch.randn(H * K, K, generator=gen, device='cuda') / math.sqrt(K)).bfloat16()

        def run():
            return torch.nn.functional.linear(a, w)
        ms = median_ms(run)
        nbytes = (T * K + H * K * K + T * H * K) * 2
        note = f'{T} x {H * K} x {K} bf16, {2 * T * H * K * K / (ms * 1e-3) / 1e12:.0f} TFLOP/s'
        self.add('f_b_linear', T, H, ms, gbs=nbytes / (ms * 1e-3) / 1e9, note=note)
        self.graph_row('f_b_linear_graph', T, H, run, nbytes=nbytes, note=note)
        del a, w

    def out_norm(self, T, H):
        """fla's gated RMS norm of the output (KDA's o_norm: sigmoid gate)."""
        V = self.args.head_dim
        try:
            rms_norm_gated = importlib.import_module('fla.modules.fused_norm_gate').rms_norm_gated
        except Exception as e:  # the peer's module layout may differ
            self.add('out_norm', T, H, None, note=f'skipped: {type(e).__name__}: {e}')
            return
        gen = torch.Generator(device='cuda').manual_seed(self.args.seed + 11 * T + H)
        o = torch.randn(T * H, V, generator=gen, device='cuda').bfloat16()
        g = torch.randn(T * H, V, generator=gen, device='cuda').bfloat16()
        w = (1 + 0.1 * torch.randn(V, generator=gen, device='cuda')).bfloat16()
        eps = 1e-5

        def run():
            return rms_norm_gated(o, g, w, None, activation='sigmoid', eps=eps)
        try:
            y = run().float()
        except Exception as e:
            self.add('out_norm', T, H, None, note=f'skipped: {type(e).__name__}: {e}')
            return
        of = o.float()
        ref = of * torch.rsqrt(of.pow(2).mean(-1, keepdim=True) + eps) * w.float() * torch.sigmoid(g.float())
        err = ((y - ref).abs().max() / ref.abs().max()).item()
        ms = median_ms(run)
        nbytes = 3 * T * H * V * 2
        note = f'{T * H} rows of {V}, sigmoid gate, max rel vs torch fp32 {err:.1e}'
        self.add('out_norm', T, H, ms, gbs=nbytes / (ms * 1e-3) / 1e9, note=note)
        self.graph_row('out_norm_graph', T, H, run, nbytes=nbytes, note=note)
        del o, g, w, y, ref

    def short_conv(self, T, H):
        """fla's causal_conv1d_fwd on [1, T, 3 H K] (q | k | v), kernel 4, SiLU."""
        D = 3 * H * self.args.head_dim
        gen = torch.Generator(device='cuda').manual_seed(self.args.seed + 5 * T + H)
        x = torch.randn(1, T, D, generator=gen, device='cuda').bfloat16()
        w = (torch.randn(D, 4, generator=gen, device='cuda') * 0.5).bfloat16()

        def run():
            return self.conv(x, w, None, None, activation='silu')[0]
        try:
            y = run().float()
        except Exception as e:
            self.add('short_conv', T, H, None, note=f'skipped: {type(e).__name__}: {e}')
            return
        ref = torch.nn.functional.conv1d(x.float().transpose(1, 2), w.float().unsqueeze(1),
                                         padding=3, groups=D)[..., :T].transpose(1, 2)
        ref = torch.nn.functional.silu(ref)
        err = ((y - ref).abs().max() / ref.abs().max()).item()
        ms = median_ms(run)
        nbytes = 2 * T * D * 2
        note = f'{D} channels, silu, max rel vs torch fp32 {err:.1e}'
        self.add('short_conv', T, H, ms, gbs=nbytes / (ms * 1e-3) / 1e9, note=note)
        self.graph_row('short_conv_graph', T, H, run, nbytes=nbytes, note=note)
        del x, w, y, ref

    def decode(self, B, H):
        K = V = self.args.head_dim
        state_bytes = 2 * B * H * K * V * 4          # fp32 state read + written
        # Rotate through enough input sets that the state does not sit in L2.
        n_rot = max(1, math.ceil(self.args.rotate_mb * 2**20 / (state_bytes / 2)))
        xs = [self.inputs(B, 1, H, seed=self.args.seed + 7 * i + B, s0_std=1.0) for i in range(n_rot)]
        calls = max(n_rot, 8)
        order = [xs[i % n_rot] for i in range(calls)]
        note = f'{n_rot} state sets rotated'

        def run(call):
            def fn():
                for x in order:
                    call(x)
            return fn

        variants = [('decode', self.recurrent, False)]
        if self.rec_fused:
            variants.append(('decode_gate_norm', self.recurrent_gate_norm, True))
        else:
            self.add('decode_gate_norm', B, H, None, note='skipped: fused_recurrent_kda lacks the gate flags')
        for case, call, raw in variants:
            ms = median_ms(run(call), calls)
            rms = self.errors(call(xs[0]), self.reference(xs[0], raw=raw))
            self.add(case, B, H, ms, gbs=state_bytes / (ms * 1e-3) / 1e9, rms=rms, note=note)
        self.graph_row('decode_graph', B, H, run(self.recurrent), calls, state_bytes, note)
        del xs, order
        torch.cuda.empty_cache()

    # .npy dump --------------------------------------------------------------
    def dump(self, x, out, ref):
        d = self.args.out
        os.makedirs(d, exist_ok=True)
        _, T, H, K = x['q'].shape
        V = x['v'].shape[-1]

        def save(name, t):
            np.save(os.path.join(d, name + '.npy'), t.detach().float().cpu().numpy())

        for name in ('q', 'k', 'v', 'g', 'beta'):
            save(name, tok_major(x[name]))
        save('gate_logit', tok_major(x['z']))
        save('S0', x['S0_k3c'])
        o, S = out
        save('o', tok_major(o))
        save('S', state_to_k3c(S, self.svf))
        save('o_ref', ref[0])
        save('S_ref', ref[1])
        meta = {
            'T': T, 'H': H, 'K': K, 'V': V, 'scale': self.args.scale or K ** -0.5,
            'gate': f'g = {GATE_LOWER_BOUND} * sigmoid(gate_logit)',
            'layouts': {'q,k,g,gate_logit': '[T, H*K]', 'v,o,o_ref': '[T, H*V]', 'beta': '[T, H]',
                        'S0,S,S_ref': '[H, V, K]'},
            'o,S': 'fla chunk_kda outputs', 'fla_commit': fla_commit(self.args.fla),
        }
        with open(os.path.join(d, 'meta.json'), 'w') as fh:
            json.dump(meta, fh, indent=1)
        print(f'# wrote inputs/outputs of T={T} H={H} to {d}')


# --------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------

HEADER = f"{'case':<22}{'T/B':>7}{'H':>5}{'ms':>11}{'us':>10}{'GB/s':>9}{'rms_o':>11}{'rms_state':>11}  note"


def _fmt(v, spec):
    return format(v, spec) if v is not None else format('-', spec.split('.')[0].rstrip('fe') or '')


def print_row(r):
    us = r['ms'] * 1e3 if r['ms'] is not None else None
    print(f"{r['case']:<22}{r['T_or_B']:>7}{r['H']:>5}{_fmt(r['ms'], '>11.4f')}{_fmt(us, '>10.1f')}"
          f"{_fmt(r['gbs'], '>9.0f')}{_fmt(r['rms_o'], '>11.2e')}{_fmt(r['rms_state'], '>11.2e')}  {r['note']}",
          flush=True)


def write_csv(path, rows):
    with open(path, 'w', newline='') as fh:
        w = csv.writer(fh)
        w.writerow(['peer', 'case', 'T_or_B', 'H', 'ms', 'gbs', 'rms_o', 'rms_state'])
        for r in rows:
            w.writerow(['fla', r['case'], r['T_or_B'], r['H']] +
                       ['' if r[c] is None else f'{r[c]:.6g}' for c in ('ms', 'gbs', 'rms_o', 'rms_state')])


def compare(d, scale):
    """--compare: another program's outputs on the dumped inputs vs the reference."""
    a = {n: np.load(os.path.join(d, n + '.npy')) for n in ('q', 'k', 'v', 'g', 'beta', 'S0', 'o', 'S')}
    H, V, K = a['S0'].shape[-3:]
    T = a['q'].shape[0]
    if scale is None and os.path.exists(os.path.join(d, 'meta.json')):
        scale = json.load(open(os.path.join(d, 'meta.json'))).get('scale')
    shapes = ' '.join(f'{n}{list(x.shape)}' for n, x in a.items())
    print(f'# compare {d}: T={T} H={H} K={K} V={V} scale={scale or K ** -0.5:.6g}  ({shapes})')
    o_ref, S_ref = reference_kda(a['q'].reshape(T, -1), a['k'].reshape(T, -1), a['v'].reshape(T, -1),
                                 a['g'].reshape(T, -1), a['beta'].reshape(T, -1),
                                 a['S0'].reshape(H, V, K), scale=scale)
    print(f'rms_o     {rms_ratio(a["o"].reshape(T, -1), o_ref):.3e}')
    print(f'rms_state {rms_ratio(a["S"].reshape(H, V, K), S_ref):.3e}')


def parse_shapes(text):
    """'2048x96,8192x32' -> [(2048, 96), (8192, 32)]"""
    return [tuple(int(v) for v in s.split('x')) for s in text.split(',') if s]


def main():
    global np, torch, WARMUP, REPS
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog='\n\n'.join(__doc__.split('\n\n')[1:]))
    ap.add_argument('--fla', default=None, metavar='DIR',
                    help='directory holding the fla package (default: %(prog)s dir/peers/fla, '
                         'else <repo>/.dev/peers/fla)')
    ap.add_argument('--csv', metavar='FILE', help='write rows peer,case,T_or_B,H,ms,gbs,rms_o,rms_state')
    ap.add_argument('--out', metavar='DIR', default='kda_peer_out',
                    help='where the --dump case .npy files go (default: %(default)s)')
    ap.add_argument('--compare', metavar='DIR',
                    help='only: load DIR/{q,k,v,g,beta,S0,o,S}.npy and print RMS vs the fp64 reference')
    ap.add_argument('--prefill', default='512x4,2048x96,8192x96,32768x96,8192x32', metavar='TxH,...',
                    help='chunk_kda cases, B=1 (default: %(default)s)')
    ap.add_argument('--check', default='512x4,2048x96', metavar='TxH,...',
                    help='prefill cases with fp64 numerics (default: %(default)s)')
    ap.add_argument('--dump', default='2048x96', metavar='TxH',
                    help='case (checked, added if needed) whose inputs/outputs go to --out '
                         '("" for none; default: %(default)s)')
    ap.add_argument('--decode', default='1,32,128', metavar='B,...',
                    help='fused_recurrent_kda decode batches (default: %(default)s)')
    ap.add_argument('--decode-heads', type=int, default=96)
    ap.add_argument('--head-dim', type=int, default=128, help='K = V (default: %(default)s)')
    ap.add_argument('--scale', type=float, default=None, help='q scale (default: 1/sqrt(K), as fla)')
    ap.add_argument('--state-v-first', action='store_true',
                    help="fla state as [V, K] (k3c's order; what fla's KDA layer uses) instead of [K, V]")
    ap.add_argument('--fuse-beta', action='store_true',
                    help='chunk_gate_norm also takes beta logits (use_beta_sigmoid_in_kernel)')
    ap.add_argument('--rotate-mb', type=float, default=256,
                    help='decode: rotate state sets until they span this many MiB (default: %(default)s)')
    ap.add_argument('--no-graph', action='store_true', help='skip the CUDA-graph rows')
    ap.add_argument('--no-conv', action='store_true', help="skip fla's short convolution rows")
    ap.add_argument('--warmup', type=int, default=WARMUP)
    ap.add_argument('--reps', type=int, default=REPS)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args()
    WARMUP, REPS = args.warmup, args.reps

    import numpy
    import torch as _torch
    np, torch = numpy, _torch

    if args.compare:
        with torch.inference_mode():
            compare(args.compare, args.scale)
        return

    args.fla = args.fla or default_fla_dir()
    if not torch.cuda.is_available():
        sys.exit('error: no CUDA device')
    # Show which backend fla's dispatcher picks (e.g. FlashKDA when installed).
    logging.basicConfig(format='# %(message)s', level=logging.WARNING)
    logging.getLogger('fla.ops.backends').setLevel(logging.INFO)
    kda, shimmed = import_fla_kda(args.fla)
    import triton
    print(f'# fla {sys.modules["fla"].__version__} @ {fla_commit(args.fla)} from {args.fla}'
          f'{" (packaging shim)" if shimmed else ""}')
    print(f'# {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  '
          f'flash_kda {"present" if importlib.util.find_spec("flash_kda") else "absent"}  '
          f'state {"[V, K]" if args.state_v_first else "[K, V]"}  K=V={args.head_dim}')

    bench = Bench(kda, args)
    if not bench.has_safe_gate:
        print('# note: chunk_kda has no safe_gate/lower_bound; timing its unbounded-gate path')
    dump = parse_shapes(args.dump)[0] if args.dump else None
    check = parse_shapes(args.check) + ([dump] if dump else [])
    prefill = parse_shapes(args.prefill)
    prefill += [c for c in check if c not in prefill]
    print(HEADER)
    with torch.inference_mode():
        for T, H in prefill:
            bench.prefill(T, H, (T, H) in check, (T, H) == dump)
        for B in (int(b) for b in args.decode.split(',') if b):
            bench.decode(B, args.decode_heads)
    if args.csv:
        write_csv(args.csv, bench.rows)
        print(f'# wrote {args.csv}')


if __name__ == '__main__':
    main()
