//===- Kda.cpp - KDA: short conv, gate, L2 norm, delta rule, gated norm ---===//
//
// Kernel contracts: docs/kernels.md. Sequences of a varlen batch are laid out
// one after another (seq_lens); state tensors are updated in place.
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include <deque>

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

/// The vector width of a per-head row: the widest 16-byte-or-less vector
/// every tensor in `vecOf` allows with d a multiple of 32 vw (1 on the host).
static int64_t perHeadVw(KernelBuilder &kb, int64_t d, ArrayRef<Value> vecOf) {
  if (!kb.gpu())
    return 1;
  for (int64_t w : {8, 4, 2}) {
    bool ok = d % (32 * w) == 0;
    for (Value v : vecOf)
      ok &= w <= kb.vecWidth(v, cast<MemRefType>(v.getType()).getShape().back());
    if (ok)
      return w;
  }
  return 1;
}

/// A lane's columns of a head of d elements (vw each).
static SmallVector<Value> laneCols(KernelBuilder &kb, ThreadBlock &tb, int64_t d, int64_t vw) {
  const int64_t lanes = kb.gpu() ? 32 : 1;
  SmallVector<Value> cols;
  for (int64_t i = 0; i < d / (lanes * vw); ++i)
    cols.push_back(kb.mul(kb.add(tb.lane, kb.idx(i * lanes)), vw));
  return cols;
}

/// A warp per (token, head) row of `d` elements of [T, heads * d] tensors,
/// 8 warps a block on the GPU (a block per row on the host). `body` gets the
/// row, the head's first column and the columns of each vector a lane holds
/// (`vw` elements each, vw the widest 16-byte-or-less vector every tensor in
/// `vecOf` allows with d a multiple of 32 vw; on the host one lane holds all).
static void perHeadRow(KernelBuilder &kb, Value T, int64_t heads, int64_t d,
                       ArrayRef<Value> vecOf,
                       const std::function<void(ThreadBlock &, Value, Value, ArrayRef<Value>,
                                                int64_t)> &body) {
  const int64_t warps = kb.gpu() ? 8 : 1;
  const int64_t vw = perHeadVw(kb, d, vecOf);
  Value rows = kb.mul(T, heads);
  kb.blocks({kb.ceilDiv(rows, warps)}, 32 * warps, [&](ValueRange bid, ThreadBlock &tb) {
    Value p = kb.add(kb.mul(bid[0], warps), tb.warp);
    kb.ifThen(kb.ult(p, rows), [&] {
      Value row = kb.div(p, heads), base = kb.mul(kb.rem(p, heads), d);
      body(tb, row, base, laneCols(kb, tb, d, vw), vw);
    });
  }, 0, "per_head");
}

/// Loads a perHeadRow lane's vectors of x[row, base + cols[i] ..] into
/// `vals` and returns the head's sum of squares (reduced over the warp).
static Value headSumSq(KernelBuilder &kb, ThreadBlock &tb, Value x, Value row, Value base,
                       ArrayRef<Value> cols, int64_t vw, SmallVector<SmallVector<Value>> &vals,
                       bool volatileX = false) {
  Value ss = kb.f32(0.0);
  for (Value c : cols) {
    vals.push_back(volatileX ? kb.unpackVec(kb.loadVecPinnedRaw(x, {row, kb.add(base, c)}, vw))
                             : kb.loadVec(x, {row, kb.add(base, c)}, vw));
    for (Value v : vals.back())
      ss = kb.fadd(ss, kb.fmul(v, v));
  }
  return kb.warpSum(tb, ss);
}

/// The L2 norm's outputs for a lane's values `v` of a head whose sum of
/// squares (over the warp) is `ss`: v / sqrt(ss + eps) * scale (fp32 eps and
/// scale from l2NormConstants). Shared by the norm's own kernel and the short
/// convolution's fused store, which must give the same bits.
static std::pair<Value, Value> l2NormConstants(KernelBuilder &kb, L2NormOp l2) {
  return {kb.f32(l2.getEps().convertToDouble()), kb.f32(l2.getScale().convertToDouble())};
}
/// The inverse norm 1 / sqrt(ss + eps) (k3.l2norm_inv's value).
static Value l2Inv(KernelBuilder &kb, Value eps, Value ss) { return kb.rsqrt(kb.fadd(ss, eps)); }
/// x * inv * scale for a lane's values (k3.l2norm's, given the inverse norm).
static SmallVector<Value> l2Apply(KernelBuilder &kb, Value inv, Value scale, ArrayRef<Value> v) {
  SmallVector<Value> out;
  for (Value x : v)
    out.push_back(kb.fmul(kb.fmul(x, inv), scale));
  return out;
}
static SmallVector<Value> l2Scaled(KernelBuilder &kb, std::pair<Value, Value> epsScale, Value ss,
                                   ArrayRef<Value> v) {
  auto [eps, scale] = epsScale;
  return l2Apply(kb, l2Inv(kb, eps, ss), scale, v);
}

/// One head of the gated RMSNorm by a warp: x[xRow, base + cols ..] and the
/// gate's, normalized over the head's d = |w| elements, into y[yRow, ...].
/// volatileX: x read by volatile loads (past L1: rows other blocks of the
/// same launch wrote).
static void gatedNormHead(KernelBuilder &kb, ThreadBlock &tb, Value x, Value gate, Value w,
                          Value y, Value xRow, Value yRow, Value base, ArrayRef<Value> cols,
                          int64_t vw, double eps, bool volatileX = false) {
  int64_t d = cast<MemRefType>(w.getType()).getDimSize(0);
  SmallVector<SmallVector<Value>> vals;
  Value ss = headSumSq(kb, tb, x, xRow, base, cols, vw, vals, volatileX);
  Value inv = kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(d))), kb.f32(eps)));
  for (size_t i = 0; i < cols.size(); ++i) {
    SmallVector<Value> wv = kb.loadVec(w, {cols[i]}, vw);
    SmallVector<Value> gv = kb.loadVec(gate, {xRow, kb.add(base, cols[i])}, vw);
    SmallVector<Value> out;
    for (int64_t e = 0; e < vw; ++e)
      out.push_back(kb.fmul(kb.fmul(kb.fmul(vals[i][e], inv), wv[e]), kb.sigmoid(gv[e])));
    kb.storeVec(out, y, {yRow, kb.add(base, cols[i])});
  }
}

void gatedNormRow(KernelBuilder &kb, ThreadBlock &tb, Value x, Value gate, Value w, Value y,
                  Value xRow, Value yRow, double eps) {
  int64_t d = cast<MemRefType>(w.getType()).getDimSize(0);
  int64_t heads = cast<MemRefType>(x.getType()).getDimSize(1) / d;
  const int64_t vw = perHeadVw(kb, d, {x, gate, w, y});
  SmallVector<Value> cols = laneCols(kb, tb, d, vw);
  kb.loopStep(tb.warp, kb.idx(heads), kb.idx(tb.warps), [&](Value h) {
    gatedNormHead(kb, tb, x, gate, w, y, xRow, yRow, kb.mul(h, d), cols, vw, eps);
  });
}

//===----------------------------------------------------------------------===//
// The delta rule (spec §4.4)
//===----------------------------------------------------------------------===//
//
// Prefill runs the chunked form in two launches. Per chunk of C tokens
// (rows r, in-chunk cumulative gate G_r, G_l its last row):
//   Kd = k e^G, Qd = q e^G, Kr = k e^(G_l - G),
//   L[i][j] = beta_i Kd_i . (k_j e^-G_j)  (j < i),  M[i][j] = Qd_i . (k_j e^-G_j)  (j <= i)
//   (the exponent per pair, e^(G_i - G_j), on the pairwise path),
//   W^ = (I + L)^-1 diag(beta) Kd,  U^ = (I + L)^-1 diag(beta) V,
// and with the state S [d_v, d_k] entering the chunk:
//   U = U^ - W^ S^T,  o = Qd S^T + M U,  S <- diag(e^G_l) S + U^T Kr.
// Launch 1 (kda_prep, every (chunk, head) at once) computes W^, U^, Qd, Kr,
// M and e^G_l into per-token scratch; launch 2 (the recurrence, one block
// per (sequence, head, value-row block)) walks a sequence's chunks with its
// state tile on chip: on tensor cores in the bf16 build on the GPU (the
// state in mma accumulators, which are also the B fragments of the next
// chunk's products, its chunk inputs double-buffered by cp.async), fp32 FMA
// otherwise. Decode (at most two tokens a sequence on average) runs the
// token recurrence instead: a warp per state row, each row read and written
// once with 16-byte accesses.

/// Scratch of the chunked form, per token row (KdaScratch order).
enum KdaScratch { kWHat, kQd, kKr, kUHat, kMRow, kGLast, kKdaScratchCount };

/// Shared-memory bytes of a buffer (rounded to 16 bytes: the allocation
/// plans below place buffers back to back in dynamic shared memory).
static int64_t smemBytes(ArrayRef<int64_t> shape, int64_t eltBytes = 4) {
  int64_t n = eltBytes;
  for (int64_t d : shape)
    n *= d;
  return (n + 15) / 16 * 16;
}

/// The prep's shared buffers for chunks of C (prepSmem's, in its order).
static SmallVector<SmallVector<int64_t>> prepSmemShapes(int64_t C, int64_t dk, int64_t pad = 1) {
  const int64_t w = dk + pad;
  return {{C, w}, {C, w}, {C, w}, {C, w}, {C, w}, {C, C}, {C}};
}
static int64_t prepSmemTotal(int64_t C, int64_t dk, bool invS, int64_t pad = 1) {
  int64_t n = invS ? smemBytes({2, C}) : 0;
  for (auto &shape : prepSmemShapes(C, dk, pad))
    n += smemBytes(shape);
  return n;
}
/// The FMA recurrence's staged chunk (kdaRecurrenceFma's buffers).
static SmallVector<SmallVector<int64_t>> fmaSmemShapes(int64_t C, int64_t dk, int64_t dv) {
  return {{C, dk}, {C, dk}, {C, dk}, {C, dv}, {C, C}, {dk}};
}
static int64_t fmaSmemTotal(int64_t C, int64_t dk, int64_t dv) {
  int64_t n = 0;
  for (auto &shape : fmaSmemShapes(C, dk, dv))
    n += smemBytes(shape);
  return n;
}

/// The chunk length the kernels use: the tiling pass's chunk size (16 by
/// default; 32 or 64 when forced), or its 16-token tile when the chunk's
/// prep or FMA recurrence buffers exceed the shared memory a block can
/// have (kMaxSharedBytes, past 48 KB as dynamic shared memory on the GPU;
/// the same rule on every target: the scratch's shapes, part of the
/// kernels' calling convention, follow C); 0 for the token recurrence.
static int64_t kdaChunk(DeltaRuleOp rule) {
  if (!rule.getChunkSize())
    return 0;
  int64_t C = *rule.getChunkSize(), dk = rule.getKeyDim(), dv = rule.getValueDim();
  auto fits = [&](int64_t c) {
    return prepSmemTotal(c, dk, /*invS=*/true) <= kMaxSharedBytes &&
           fmaSmemTotal(c, dk, dv) <= kMaxSharedBytes;
  };
  if (!fits(C) && rule.getTile())
    C = *rule.getTile();
  return fits(C) ? C : 0;
}

/// Whether the chunk's intra-chunk products are formed pair by pair with
/// exp(G_i - G_j) (the pairwise path, and chunks longer than the 16-token
/// tile on the factorized path: Γ⁻¹ must not span more than a tile, see
/// k3-kda-tiling-legality) rather than as (k e^G)(k e^-G) products.
static bool kdaExactPairs(DeltaRuleOp rule, int64_t C) {
  const bool pairwise = rule.getPath() && *rule.getPath() == ChunkPath::pairwise;
  return pairwise || C > rule.getTile().value_or(16);
}

/// The prep's row padding: one element where phase B reads a column of
/// several rows at once (its FMA loop; the factorized MMA form too, as
/// measured so far), four with the pairwise MMA form (kdaPairsMma), where a
/// tf32 fragment's lanes read rows g = 0..7 at columns q = 0..3: bank 4g + q,
/// all 32 distinct (with one, g + q: 2.8-way conflicts on the H100, 63 % of
/// the shared-load wavefronts, the pairwise prep bound by them: session 48).
/// K3C_KDA_PREP_PAD (1..8) overrides it, for comparisons.
/// (`mmaB`: phase B on tensor cores, on either path.)
static int64_t prepPad(DeltaRuleOp rule, int64_t C, bool mmaB) {
  const bool pairMma = mmaB && kdaExactPairs(rule, C);
  const int64_t pad = intFromEnv("K3C_KDA_PREP_PAD", pairMma ? 4 : 1);
  if (pad < 1 || pad > 8)
    llvm::report_fatal_error("k3c: K3C_KDA_PREP_PAD must be 1..8, got " + llvm::Twine(pad),
                             /*gen_crash_diag=*/false);
  return pad;
}

/// Whether `v` (a delta rule's q or k) holds L2-normalized rows: made by an
/// L2 norm in the same kernel, or by one in the kernel whose result feeds
/// this kernel's argument.
static bool fromL2Norm(Value v) { return throughKernels(v).getDefiningOp<L2NormOp>() != nullptr; }

/// The L2 norm that makes a delta rule's q or k inside the rule's own kernel
/// (k3-fuse-kernels' kda-norm-in-chunk), else null: the rule then loads the
/// norm's input rows (the convolution's output, in the activation dtype)
/// and normalizes them itself, as the norm's kernel would (v / sqrt(sum of
/// squares + eps) * scale); the norm has no launch and no buffer.
static L2NormOp kdaNormOnLoad(Value v) {
  auto l2 = v.getDefiningOp<L2NormOp>();
  if (!l2 || !l2.getResult().hasOneUse())
    return {};
  auto rule = dyn_cast<DeltaRuleOp>(*l2.getResult().getUsers().begin());
  if (!rule || rule->getBlock() != l2->getBlock() || l2.getHeadDim() != rule.getKeyDim())
    return {};
  return l2;
}
bool kdaNormedOnLoad(Operation *op) {
  auto l2 = dyn_cast<L2NormOp>(op);
  return l2 && kdaNormOnLoad(l2.getResult());
}

/// The KDA gate that makes a delta rule's g inside the rule's own kernel
/// (k3-fuse-kernels' kda-gate-in-chunk), else null: the rule then loads the
/// gate's logits (f_b's output, in the activation dtype) and forms each gate
/// value as it loads it, with the gate kernel's arithmetic (kdaGateValue:
/// the same values, bit for bit); the gate has no launch and no buffer, and
/// f_b's store writes its logits instead of fp32 gates.
static KdaGateOp kdaGateOnLoad(Value g) {
  auto gate = g.getDefiningOp<KdaGateOp>();
  if (!gate || !gate.getResult().hasOneUse())
    return {};
  auto rule = dyn_cast<DeltaRuleOp>(*gate.getResult().getUsers().begin());
  if (!rule || rule->getBlock() != gate->getBlock() || rule.getG() != gate.getResult())
    return {};
  return gate;
}
bool kdaGatedOnLoad(Operation *op) {
  auto gate = dyn_cast<KdaGateOp>(op);
  return gate && kdaGateOnLoad(gate.getResult());
}

static Value kdaGateValue(KernelBuilder &kb, KdaGateOp gate, Value a, Value zz);
/// exp(A_log) of the head of gate column col (d columns a head): the `a` of
/// kdaGateValue, one definition for the gate's launch, its linear's store
/// map and the delta rule's loads.
static Value kdaGateHeadA(KernelBuilder &kb, Value alog, Value col, int64_t d) {
  return kb.exp(kb.loadF32(alog, {kb.div(col, kb.idx(d))}));
}

/// A delta rule's g as its kernels load it: the buffer (g, or with
/// kdaGateOnLoad the gate's logits) and what turns a loaded element of
/// column col into g's value there.
struct GateSource {
  Value buf;
  KdaGateOp gate;
  Value alog, dt;
  int64_t d = 1; ///< the gate's columns a head
  /// exp(A_log) of col's head (once per head a caller may keep it).
  Value headA(KernelBuilder &kb, Value col) const {
    return kdaGateHeadA(kb, alog, col, d);
  }
  /// g at column col from the loaded element x (x itself without a gate).
  Value at(KernelBuilder &kb, Value x, Value col, Value a) const {
    if (!gate)
      return x;
    return kdaGateValue(kb, gate, a, kb.fadd(x, kb.loadF32(dt, {col})));
  }
};
static GateSource gateSource(Value g, LowerState &st) {
  GateSource s;
  if (KdaGateOp gate = kdaGateOnLoad(g)) {
    s.buf = st.get(gate.getLogits());
    s.gate = gate;
    s.alog = st.get(gate.getALog());
    s.dt = st.get(gate.getDtBias());
    s.d = cast<MemRefType>(s.dt.getType()).getDimSize(0) / gate.getNumHeads();
    return s;
  }
  s.buf = st.get(g);
  return s;
}

/// The gated output norm lowered with its delta rule (k3-fuse-kernels'
/// kda-out-norm-in-chunk): the rule's only use, in the rule's kernel; else
/// null.
static GatedRMSNormOp ruleOutNorm(DeltaRuleOp rule) {
  if (!rule.getResult().hasOneUse())
    return {};
  auto norm = dyn_cast<GatedRMSNormOp>(*rule.getResult().getUsers().begin());
  if (!norm || norm->getBlock() != rule->getBlock() || norm.getInput() != rule.getResult())
    return {};
  return norm;
}
bool kdaOutNormFused(Operation *op) {
  auto norm = dyn_cast<GatedRMSNormOp>(op);
  if (!norm)
    return false;
  auto rule = norm.getInput().getDefiningOp<DeltaRuleOp>();
  return rule && ruleOutNorm(rule) == norm;
}

/// A delta rule's q or k as its kernels load it: the buffer, and the L2 norm
/// to apply on load (kdaNormOnLoad) or null; with a split norm
/// (k3-split-l2norms) also its inverse norms [T, H] f32, so that loading
/// is scaling: x * inv[t, h] * scale, the values the norm's own kernel (or
/// the convolution's store) would give, bit for bit.
struct QKSource {
  Value buf;
  L2NormOp norm;
  Value inv;
};
static QKSource qkSource(Value v, LowerState &st) {
  if (L2NormOp l2 = kdaNormOnLoad(v))
    return {st.get(l2.getInput()), l2, l2.getInvNorm() ? st.get(l2.getInvNorm()) : Value()};
  return {st.get(v), {}, {}};
}

/// K3C_KDA_SCRATCH_F16=MASK (bf16 build, C = 16, q and k L2-normalized):
/// which of the prep's key-width rows go to fp16 scratch instead of fp32,
/// with the bits of K3C_KDA_3XTF32 (1: W^, 2: Qd, 4: Kr); a value outside
/// 0..7 is refused by name. Their values are bounded by |q| and |k| (decays
/// <= 1; W^'s rows by the WY form's contraction), far inside fp16's range,
/// and fp16 holds the 10 mantissa bits a tf32 hi word has: the GPU
/// recurrence reads them as exact tf32 (its products with them lose the lo
/// terms) and moves fewer bytes. Off by default (kKdaHalfScratch): W^ and
/// Kr feed the state's update, whose error fp16 raises ~100x (with 7 the
/// k3-tiny softplus check fails at 1.01 of its bound on the H200); Qd
/// alone (2) costs O nothing (O = Qd S^T is a plain tf32 product,
/// kKda3xTf32, and an fp16 Qd rounds where the tf32 split truncates) but
/// gained nothing either. The same on every target (scratch is part of the
/// kernel's calling convention, which the host and GPU lowerings share):
/// the host recurrence widens them.
static unsigned kdaHalfScratch(DeltaRuleOp rule) {
  const int64_t mask = intFromEnv("K3C_KDA_SCRATCH_F16", kKdaHalfScratch);
  if (mask < 0 || mask > 7)
    llvm::report_fatal_error("k3c: K3C_KDA_SCRATCH_F16 must be a mask in 0..7 (1 W^, 2 Qd, "
                             "4 Kr), got " + llvm::Twine(mask),
                             /*gen_crash_diag=*/false);
  if (kdaChunk(rule) != 16 ||
      !cast<ShapedType>(rule.getV().getType()).getElementType().isBF16() ||
      !fromL2Norm(rule.getQ()) || !fromL2Norm(rule.getK()))
    return 0;
  return static_cast<unsigned>(mask);
}

SmallVector<ScratchNeed> kdaScratchNeeds(Operation *op) {
  auto rule = dyn_cast<DeltaRuleOp>(op);
  if (!rule || !kdaChunk(rule))
    return {};
  int64_t H = rule.getNumHeads(), dk = rule.getKeyDim(), dv = rule.getValueDim(),
          C = kdaChunk(rule);
  // fp32 by default in every build: the host and the exact f32 build read
  // them as they are, the bf16 build's tensor-core recurrence rounds them to
  // tf32 (W^, Qd, Kr in fp16: kdaHalfScratch).
  Type f32 = Float32Type::get(rule.getContext());
  unsigned half = kdaHalfScratch(rule);
  auto key = [&](unsigned bit) {
    return half & bit ? Type(Float16Type::get(rule.getContext())) : f32;
  };
  return {ScratchNeed{{-1, H * dk}, key(1)}, ScratchNeed{{-1, H * dk}, key(2)},
          ScratchNeed{{-1, H * dk}, key(4)}, ScratchNeed{{-1, H * dv}, f32},
          ScratchNeed{{-1, H * C}, f32},  ScratchNeed{{-1, H * dk}, f32}};
}

ChunkSlot findChunk(KernelBuilder &kb, ThreadBlock &tb, Value lens, Value slot,
                           int64_t C) {
  Value zero = kb.idx(0), one = kb.idx(1), N = kb.dim(lens, 0);
  // Carried: found, n, start, len, t0, chunks before, tokens before.
  SmallVector<Value> init{zero, zero, zero, zero, zero, zero, zero};
  SmallVector<Value> r;
  if (!tb.launch) {
    r = kb.loop(zero, N, init, [&](Value n, ValueRange a) {
      Value len = kb.seqLen(lens, n), chunks = kb.ceilDiv(len, C);
      Value hit = kb.andi(kb.ieq(a[0], zero), kb.ult(slot, kb.add(a[5], chunks)));
      return SmallVector<Value>{kb.select(hit, one, a[0]), kb.select(hit, n, a[1]),
                                kb.select(hit, a[6], a[2]), kb.select(hit, len, a[3]),
                                kb.select(hit, kb.mul(kb.sub(slot, a[5]), C), a[4]),
                                kb.add(a[5], chunks), kb.add(a[6], len)};
    });
  } else {
    r = kb.loopStep(zero, N, kb.idx(32), init, [&](Value base, ValueRange a) {
      Value s = kb.add(base, tb.lane), ok = kb.ult(s, N);
      Value len = kb.select(ok, kb.seqLen(lens, kb.minu(s, kb.sub(N, one))), zero);
      Value chunks = kb.ceilDiv(len, C);
      Value preC = kb.warpPrefixIndex(tb, chunks), preT = kb.warpPrefixIndex(tb, len);
      Value last = kb.idx(31);
      Value totC = kb.warpBroadcastIndex(tb, preC, last);
      Value totT = kb.warpBroadcastIndex(tb, preT, last);
      // Lanes wholly before the slot; their count is the slot's lane.
      Value before = kb.select(kb.ule(kb.add(a[5], preC), slot), one, zero);
      Value lane = kb.minu(kb.warpSumIndex(tb, before), last);
      Value hit = kb.andi(kb.ieq(a[0], zero), kb.ult(slot, kb.add(a[5], totC)));
      Value exC = kb.warpBroadcastIndex(tb, kb.sub(preC, chunks), lane);
      Value exT = kb.warpBroadcastIndex(tb, kb.sub(preT, len), lane);
      Value lenL = kb.warpBroadcastIndex(tb, len, lane);
      return SmallVector<Value>{
          kb.select(hit, one, a[0]), kb.select(hit, kb.add(base, lane), a[1]),
          kb.select(hit, kb.add(a[6], exT), a[2]), kb.select(hit, lenL, a[3]),
          kb.select(hit, kb.mul(kb.sub(slot, kb.add(a[5], exC)), C), a[4]),
          kb.add(a[5], totC), kb.add(a[6], totT)};
    });
  }
  return {kb.ieq(r[0], one), r[1], r[2], r[3], r[4]};
}

/// K3C_KDA_PREP_MMA (default kKdaPrepMma; with the tensor-core recurrence,
/// factorized path):
/// the prep's phase B as two tf32 MMA products (kdaPrepPhases) instead of a
/// d_k-long loop a pair; the same sums to ~2^-19 of their terms (3xTF32),
/// not the same bits.
/// K3C_KDA_PAIR_MMA (default kKdaPairMma), the pairwise path's: phase B's
/// pairs across 4-row blocks on tensor cores (kdaPrepPhases), the pairs
/// inside a block on CUDA cores.
static bool kdaPrepMma(DeltaRuleOp rule) {
  bool pairwise = rule.getPath() && *rule.getPath() == ChunkPath::pairwise;
  if (rule.getKeyDim() % 8)
    return false;
  return pairwise ? intFromEnv("K3C_KDA_PAIR_MMA", kKdaPairMma)
                  : intFromEnv("K3C_KDA_PREP_MMA", kKdaPrepMma);
}

/// The hi and lo words of an fp32 operand for a 3xTF32 product, without
/// conversions: hi = v with its 13 low mantissa bits cleared (the tensor
/// core reads the top 19 bits of a .tf32 register and ignores the rest), lo
/// = v - hi (exact), passed as its raw bits.
static std::pair<Value, Value> tf32Words(KernelBuilder &kb, Value v) {
  OpBuilder &b = kb.b;
  Type i32 = b.getI32Type();
  Value hi = arith::AndIOp::create(b, kb.loc, arith::BitcastOp::create(b, kb.loc, i32, v),
                                   kb.i32Const(int32_t(0xffffe000)));
  Value lo = kb.fsub(v, arith::BitcastOp::create(b, kb.loc, b.getF32Type(), hi));
  return {hi, arith::BitcastOp::create(b, kb.loc, i32, lo)};
}

/// Where the prep phases of one (chunk, head) read their inputs and put
/// their products: the prep launch's global rows and scratch, or the fused
/// kernel's shared-memory stages (kdaChunkFused).
struct PrepIO {
  /// Input `which` (0 q, 1 k, 2 g: head column c; 3 v: the substitution's
  /// value column c) of chunk row r, 0 past the chunk's end.
  std::function<SmallVector<Value>(int which, Value c)> rows;
  /// sigmoid(beta) of chunk row r (0 past the end).
  std::function<Value(Value r)> beta;
  /// Products at chunk row r (rows past the chunk's end hold zeros):
  /// Qd and Kr at key column c, M at (r, j), W^ at key column c, U^ at the
  /// substitution's value column j; e^G_l at key column c.
  std::function<void(Value r, Value c, Value v)> qd, kr, m, w, u;
  std::function<void(Value c, Value v)> gLast;
  int64_t uCols = 0; ///< value columns the substitution produces
  /// Phase B on tensor cores (kdaPrepPhases; GPU, C = 16; both paths).
  bool mmaB = false;
};

/// The prep phases' shared buffers: G, Kd, Qd, Ke (k e^-G; raw k on the
/// pairwise path), Qr (raw q, pairwise), L [C][C], beta [C]. Rows padded by
/// one element: phase B's threads read one column of several rows at once,
/// which then fall in distinct banks.
struct PrepSmem {
  Value G, Kd, Qd, Ke, Qr, L, B;
};

static PrepSmem prepSmem(KernelBuilder &kb, int64_t C, int64_t dk, int64_t pad,
                         const std::function<Value(ArrayRef<int64_t>)> &alloc) {
  SmallVector<Value> v;
  for (auto &shape : prepSmemShapes(C, dk, pad))
    v.push_back(alloc(shape));
  return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
}

/// The pairwise path's phase B on tensor cores (C = 16, 4 warps at least):
/// L[i][j] = beta_i sum_c k_i k_j e^(G_i - G_j) (j < i) and M[i][j] = sum_c
/// q_i k_j e^(G_i - G_j) (j <= i), with each exponent split at the first row
/// b = 4I of row i's 4-row block I: e^(G_i - G_b) e^(G_b - G_j). For j < b
/// <= i both factors are at most 1 (the gate is a decay), so neither can
/// overflow and one that underflows belongs to a term below fp32's range
/// anyway. Warp w takes one (block I, 8-column tile) of those pairs (I = 1,
/// 2, 3 over columns 0..7, I = 3 over 8..15) as two m16n8k8 products in
/// 3xTF32, A = q or k times its row's factor (phase A's, in Qd's buffer), B =
/// k_j e^(G_b - G_j) formed as it loads; it keeps the rows of block I. The
/// pairs inside a block (j <= i, both in I: 40, of them 16 on the diagonal)
/// stay exact, two lanes a pair over alternate key columns (warps 0-2);
/// every other thread writes the zeros above the diagonal.
static void kdaPairsMma(KernelBuilder &kb, ThreadBlock &tb, int64_t C, int64_t dk,
                        const PrepSmem &sm, const PrepIO &io) {
  assert(C == 16 && dk % 8 == 0 && tb.warps >= 4 && "the pairwise MMA form");
  auto split = [&](Value v) { return tf32Words(kb, v); };
  Value g = kb.div(tb.lane, 4), q = kb.rem(tb.lane, 4), zero = kb.f32(0.0);
  kb.ifThen(kb.ult(tb.warp, kb.idx(4)), [&] {
    // Warps 0, 1, 2: block I = w + 1, columns 0..7; warp 3: I = 3, 8..15.
    Value isLast = kb.ieq(tb.warp, kb.idx(3));
    Value I = kb.select(isLast, kb.idx(3), kb.add(tb.warp, kb.idx(1)));
    Value j0 = kb.select(isLast, kb.idx(8), kb.idx(0)), b = kb.mul(I, 4);
    Value j = kb.add(j0, g), jIn = kb.ult(j, b);
    // Two accumulator sets a product (alternate k steps): L's, M's.
    SmallVector<Value> acc(16, zero);
    for (int64_t kk = 0; kk < dk / 8; ++kk) {
      SmallVector<Value> kh, kl, qh, ql, bh, bl;
      for (int64_t half = 0; half < 2; ++half)
        for (int64_t hh = 0; hh < 2; ++hh) {
          Value r = kb.add(g, 8 * hh), c = kb.add(q, 8 * kk + 4 * half);
          Value f = kb.load(sm.Qd, {r, c});
          auto [k1, k2] = split(kb.fmul(kb.load(sm.Ke, {r, c}), f));
          auto [q1, q2] = split(kb.fmul(kb.load(sm.Qr, {r, c}), f));
          kh.push_back(k1), kl.push_back(k2), qh.push_back(q1), ql.push_back(q2);
        }
      for (int64_t half = 0; half < 2; ++half) {
        Value c = kb.add(q, 8 * kk + 4 * half);
        Value d = kb.exp(kb.fsub(kb.load(sm.G, {b, c}), kb.load(sm.G, {j, c})));
        auto [h, l] = split(kb.select(jIn, kb.fmul(kb.load(sm.Ke, {j, c}), d), zero));
        bh.push_back(h), bl.push_back(l);
      }
      const int64_t s = 4 * (kk % 2);
      for (int64_t prod = 0; prod < 2; ++prod) {
        MutableArrayRef<Value> set = MutableArrayRef<Value>(acc).slice(8 * prod + s, 4);
        ArrayRef<Value> ah = prod ? qh : kh, al = prod ? ql : kl;
        mmaTf32(kb, ah, bh, set);
        mmaTf32(kb, ah, bl, set);
        mmaTf32(kb, al, bh, set);
      }
    }
    for (int64_t e = 0; e < 4; ++e) {
      Value i = kb.add(g, 8 * (e / 2)), jj = kb.add(j0, kb.add(kb.mul(q, 2), kb.idx(e % 2)));
      Value own = kb.andi(kb.ieq(kb.div(i, kb.idx(4)), I), kb.ult(jj, b));
      Value l = kb.fadd(acc[e], acc[4 + e]), m = kb.fadd(acc[8 + e], acc[12 + e]);
      kb.ifThen(own, [&] {
        kb.store(kb.fmul(kb.load(sm.B, {i}), l), sm.L, {i, jj});
        io.m(i, jj, m);
      });
    }
  });
  // The pairs inside the blocks: p = 0..39, block p / 10, its t = p % 10-th
  // pair (ii, jj) in row order (ii = [t >= 1] + [t >= 3] + [t >= 6]).
  kb.ifThen(kb.ult(tb.warp, kb.idx(3)), [&] {
    Value p = kb.div(tb.tid, 2), part = kb.rem(tb.tid, 2);
    Value active = kb.ult(p, kb.idx(40)), pc = kb.minu(p, kb.idx(39));
    Value blk = kb.div(pc, 10), t = kb.rem(pc, 10);
    auto ge = [&](int64_t n) { return kb.select(kb.ule(kb.idx(n), t), kb.idx(1), kb.idx(0)); };
    Value ii = kb.add(kb.add(ge(1), ge(3)), ge(6));
    Value jjl = kb.sub(t, kb.div(kb.mul(ii, kb.add(ii, kb.idx(1))), 2));
    Value i = kb.add(kb.mul(blk, 4), ii), j = kb.add(kb.mul(blk, 4), jjl);
    auto pair = kb.loopStep(part, kb.idx(dk), kb.idx(2), ValueRange{zero, zero},
                            [&](Value c, ValueRange a) {
                              Value d = kb.exp(kb.fsub(kb.load(sm.G, {i, c}),
                                                       kb.load(sm.G, {j, c})));
                              Value kj = kb.fmul(kb.load(sm.Ke, {j, c}), d);
                              return SmallVector<Value>{
                                  kb.fadd(a[0], kb.fmul(kb.load(sm.Ke, {i, c}), kj)),
                                  kb.fadd(a[1], kb.fmul(kb.load(sm.Qr, {i, c}), kj))};
                            });
    Value l = kb.fadd(pair[0], kb.shuffle(pair[0], kb.idx(1), gpu::ShuffleMode::XOR));
    Value m = kb.fadd(pair[1], kb.shuffle(pair[1], kb.idx(1), gpu::ShuffleMode::XOR));
    kb.ifThen(kb.andi(active, kb.ieq(part, kb.idx(0))), [&] {
      kb.store(kb.select(kb.ult(j, i), kb.fmul(kb.load(sm.B, {i}), l), zero), sm.L, {i, j});
      io.m(i, j, m);
    });
  });
  // Above the diagonal: zeros (L on the diagonal is the block pairs').
  kb.strided(tb, kb.idx(0), kb.idx(C * C), [&](Value p) {
    Value i = kb.div(p, C), j = kb.rem(p, C);
    kb.ifThen(kb.ult(i, j), [&] {
      kb.store(zero, sm.L, {i, j});
      io.m(i, j, zero);
    });
  });
}

/// The chunked form's per-chunk algebra for one head (phases A, B, C, with
/// barriers between them; every thread of `tb` takes part).
static void kdaPrepPhases(DeltaRuleOp rule, KernelBuilder &kb, ThreadBlock &tb, int64_t C,
                          const PrepSmem &sm, const PrepIO &io) {
  const int64_t dk = rule.getKeyDim();
  // Exact pairs (pairwise path; chunks past the 16-token tile): phase B
  // forms exp(G_i - G_j) per term from the raw q, k and G.
  const bool exact = kdaExactPairs(rule, C);
  // beta first where a thread takes one row (GPU): its load is then in
  // flight during phase A instead of after it (the store waits at the end).
  Value betaEarly;
  if (tb.launch && tb.threads >= C)
    betaEarly = kb.ifElse(
        kb.ult(tb.tid, kb.idx(C)), [&] { return io.beta(tb.tid); }, [&] { return kb.f32(0.0); });
  // A. Threads over key channels: the cumulative gate and decayed q/k.
  // The chunk's rows are loaded all at once, so the loads overlap instead
  // of one latency a row.
  // The pairwise phase B on tensor cores (below) keeps, in Qd's buffer
  // (which that path does not otherwise read), the factors
  // e^(G_r - G_4(r/4)) of each row against its 4-row block's first row.
  const bool pairMma = exact && io.mmaB && tb.warps >= 4;
  assert((!io.mmaB || C == 16) && "phase B's MMA forms take 16-token chunks");
  kb.strided(tb, kb.idx(0), kb.idx(dk), [&](Value c) {
    SmallVector<Value> gv = io.rows(2, c), kv = io.rows(1, c), qv = io.rows(0, c);
    SmallVector<Value> cum;
    Value acc = kb.f32(0.0);
    for (int64_t r = 0; r < C; ++r)
      cum.push_back(acc = kb.fadd(acc, gv[r])); // rows past the end add 0
    Value last = cum.back();
    io.gLast(c, kb.exp(last));
    for (int64_t r = 0; r < C; ++r) {
      Value ri = kb.idx(r), e = kb.exp(cum[r]);
      Value qd = kb.fmul(qv[r], e);
      if (exact) // only the exact-pair phase B reads G
        kb.store(cum[r], sm.G, {ri, c});
      kb.store(kb.fmul(kv[r], e), sm.Kd, {ri, c});
      kb.store(!pairMma ? qd : r % 4 ? kb.exp(kb.fsub(cum[r], cum[r / 4 * 4])) : kb.f32(1.0),
               sm.Qd, {ri, c});
      kb.store(exact ? kv[r] : kb.fmul(kv[r], kb.exp(kb.fneg(cum[r]))), sm.Ke, {ri, c});
      if (exact)
        kb.store(qv[r], sm.Qr, {ri, c});
      io.qd(ri, c, qd);
      io.kr(ri, c, kb.fmul(kv[r], kb.exp(kb.fsub(last, cum[r]))));
    }
  });
  if (betaEarly)
    kb.ifThen(kb.ult(tb.tid, kb.idx(C)), [&] { kb.store(betaEarly, sm.B, {tb.tid}); });
  else
    kb.strided(tb, kb.idx(0), kb.idx(C), [&](Value r) { kb.store(io.beta(r), sm.B, {r}); });
  kb.barrier(tb);
  // B. L and M over the (i, j) pairs with j <= i (zeros above the diagonal).
  // mmaB: as two 16 x 16 x d_k products, Kd Ke^T (L before beta) and Qd Ke^T
  // (M), one m16n8 tile a warp (warps 0-3: product w / 2, key rows 8 (w % 2)
  // ..), tf32 mma.sync m16n8k8 in 3xTF32 (hi*hi + hi*lo + lo*hi, two
  // accumulator sets), instead of a d_k-long dependent loop a pair (blocks
  // of at least 4 warps).
  if (pairMma) {
    kdaPairsMma(kb, tb, C, dk, sm, io);
  } else if (io.mmaB && tb.warps >= 4) {
    assert(!exact && C == 16 && dk % 8 == 0 && "phase B's MMA form");
    auto split = [&](Value v) { return tf32Words(kb, v); };
    Value g = kb.div(tb.lane, 4), q = kb.rem(tb.lane, 4);
    kb.ifThen(kb.ult(tb.warp, kb.idx(4)), [&] {
      Value isM = kb.ule(kb.idx(2), tb.warp), j0 = kb.mul(kb.rem(tb.warp, kb.idx(2)), 8);
      SmallVector<Value> acc(8, kb.f32(0.0));
      for (int64_t kk = 0; kk < dk / 8; ++kk) {
        SmallVector<Value> ah, al, bh, bl;
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t hh = 0; hh < 2; ++hh) {
            Value r = kb.add(g, 8 * hh), c = kb.add(q, 8 * kk + 4 * half);
            auto [h, l] = split(kb.select(isM, kb.load(sm.Qd, {r, c}), kb.load(sm.Kd, {r, c})));
            ah.push_back(h);
            al.push_back(l);
          }
        for (int64_t half = 0; half < 2; ++half) {
          auto [h, l] = split(kb.load(sm.Ke, {kb.add(j0, g), kb.add(q, 8 * kk + 4 * half)}));
          bh.push_back(h);
          bl.push_back(l);
        }
        MutableArrayRef<Value> set = MutableArrayRef<Value>(acc).slice(4 * (kk % 2), 4);
        mmaTf32(kb, ah, bh, set);
        mmaTf32(kb, ah, bl, set);
        mmaTf32(kb, al, bh, set);
      }
      for (int64_t e = 0; e < 4; ++e) {
        Value v = kb.fadd(acc[e], acc[4 + e]);
        Value i = kb.add(g, 8 * (e / 2)), j = kb.add(j0, kb.add(kb.mul(q, 2), kb.idx(e % 2)));
        kb.ifThenElse(
            isM, [&] { io.m(i, j, kb.select(kb.ule(j, i), v, kb.f32(0.0))); },
            [&] {
              kb.store(kb.select(kb.ult(j, i), kb.fmul(kb.load(sm.B, {i}), v), kb.f32(0.0)),
                       sm.L, {i, j});
            });
      }
    });
  } else {
    kb.strided(tb, kb.idx(0), kb.idx(C * C), [&](Value p) {
      Value i = kb.div(p, C), j = kb.rem(p, C);
      auto put = [&](Value lij, Value mij) {
        kb.store(lij, sm.L, {i, j});
        io.m(i, j, mij);
      };
      kb.ifThenElse(
          kb.ule(j, i),
          [&] {
            auto pair = kb.loop(
                kb.idx(0), kb.idx(dk), ValueRange{kb.f32(0.0), kb.f32(0.0)},
                [&](Value c, ValueRange a) {
                  Value kj = kb.load(sm.Ke, {j, c}), ki, qi;
                  if (exact) {
                    Value d = kb.exp(kb.fsub(kb.load(sm.G, {i, c}), kb.load(sm.G, {j, c})));
                    kj = kb.fmul(kj, d);
                    ki = kb.load(sm.Ke, {i, c});
                    qi = kb.load(sm.Qr, {i, c});
                  } else {
                    ki = kb.load(sm.Kd, {i, c});
                    qi = kb.load(sm.Qd, {i, c});
                  }
                  return SmallVector<Value>{kb.fadd(a[0], kb.fmul(ki, kj)),
                                            kb.fadd(a[1], kb.fmul(qi, kj))};
                });
            put(kb.select(kb.ult(j, i), kb.fmul(kb.load(sm.B, {i}), pair[0]), kb.f32(0.0)),
                pair[1]);
          },
          [&] { put(kb.f32(0.0), kb.f32(0.0)); });
    });
  }
  kb.barrier(tb);
  // C. Threads over the dk columns of W^ and the uCols columns of U^: the
  // forward substitution u_r = beta_r x_r - sum_{s<r} L[r][s] u_s.
  // Unrolled (GPU, below): a thread takes all its columns (tid + p *
  // threads) in one body, so each L[r][s] is loaded once for them and
  // nothing is loop-invariant; as a loop over columns, LLVM hoists the
  // 136 L / beta loads and 15 row addresses out of it (237 registers a
  // thread on the slice, two blocks an SM). Same operations in the same
  // order per column either way.
  const int64_t nCols = dk + io.uCols;
  auto substitute = [&](ArrayRef<Value> colsIn) {
    const size_t P = colsIn.size();
    SmallVector<Value> col, isK, kcol, valid;
    SmallVector<SmallVector<Value>> vrows, u(P);
    for (Value c0 : colsIn) {
      valid.push_back(kb.ult(c0, kb.idx(nCols)));
      Value c = kb.minu(c0, kb.idx(nCols - 1));
      col.push_back(c);
      isK.push_back(kb.ult(c, kb.idx(dk)));
      kcol.push_back(kb.minu(c, kb.idx(dk - 1)));
      // The column's inputs: Kd from shared memory or V's rows (loaded
      // all at once, like phase A's).
      vrows.push_back(io.rows(3, kb.select(isK.back(), kb.idx(0), kb.sub(c, kb.idx(dk)))));
    }
    for (int64_t r = 0; r < C; ++r) {
      Value ri = kb.idx(r), br = kb.load(sm.B, {ri});
      SmallVector<Value> lr;
      for (int64_t s2 = 0; s2 < r; ++s2)
        lr.push_back(kb.load(sm.L, {ri, kb.idx(s2)}));
      for (size_t p = 0; p < P; ++p) {
        Value x = kb.select(isK[p], kb.load(sm.Kd, {ri, kcol[p]}), vrows[p][r]);
        Value acc = kb.fmul(br, x);
        for (int64_t s2 = 0; s2 < r; ++s2)
          acc = kb.fsub(acc, kb.fmul(lr[s2], u[p][s2]));
        u[p].push_back(acc);
        kb.ifThen(valid[p], [&] {
          kb.ifThenElse(
              isK[p], [&] { io.w(ri, col[p], acc); },
              [&] { io.u(ri, kb.sub(col[p], kb.idx(dk)), acc); });
        });
      }
    }
  };
  // The unrolled form by default (ptxas: 128 registers instead of 237
  // on the slice; with the key split, 4.58 -> 3.30 ms at 8192 tokens on
  // the H200); K3C_KDA_PREP_UNROLL=0 keeps the loop.
  if (tb.launch && intFromEnv("K3C_KDA_PREP_UNROLL", 1)) {
    SmallVector<Value> mine;
    for (int64_t p = 0; p * tb.threads < nCols; ++p)
      mine.push_back(kb.add(tb.tid, kb.idx(p * tb.threads)));
    substitute(mine);
  } else {
    kb.strided(tb, kb.idx(0), kb.idx(nCols), [&](Value c) { substitute({c}); });
  }
}

/// Launch 1 of the chunked form: a block per (chunk, head), its products
/// into per-token scratch.
static void kdaPrep(DeltaRuleOp rule, KernelBuilder &kb, LowerState &st, int64_t C,
                    ArrayRef<Value> sc, bool mmaB) {
  int64_t H = rule.getNumHeads(), dk = rule.getKeyDim(), dv = rule.getValueDim();
  QKSource qs = qkSource(rule.getQ(), st), ks = qkSource(rule.getK(), st);
  GateSource gs = gateSource(rule.getG(), st);
  Value q = qs.buf, k = ks.buf, v = st.get(rule.getV()), g = gs.buf,
        beta = st.get(rule.getBeta()), lens = st.get(rule.getSeqLens());
  Type f32 = kb.b.getF32Type();
  Value slots = kb.add(kb.ceilDiv(kb.dim(q, 0), C), kb.dim(lens, 0));
  // Shared memory past the static 48 KB (chunks of 32 or 64): dynamic, the
  // buffers back to back in prepSmem's order, then the inverse norms.
  const int64_t pad = prepPad(rule, C, mmaB);
  const int64_t smem = prepSmemTotal(C, dk, qs.inv || ks.inv, pad);
  const bool dyn = kb.gpu() && smem > kSharedBudget;
  kb.blocks({slots, kb.idx(H)}, kKdaPrepThreads, [&](ValueRange bid, ThreadBlock &tb) {
    if (mmaB && !kdaExactPairs(rule, C)) // the pairwise prep spills at 5
      kb.minBlocksPerSm(tb, kKdaPrepMinBlocks);
    Value h = bid[1];
    int64_t offset = 0;
    auto alloc = [&](ArrayRef<int64_t> shape) -> Value {
      if (!dyn)
        return kb.shared(tb, shape, f32);
      Value view = kb.dynamicShared(tb, offset, shape, f32);
      offset += smemBytes(shape);
      return view;
    };
    PrepSmem sm = prepSmem(kb, C, dk, pad, alloc);
    ChunkSlot cs = findChunk(kb, tb, lens, bid[0], C);
    kb.ifThen(cs.valid, [&] {
      Value row0 = kb.add(cs.start, cs.t0), nc = kb.minu(kb.idx(C), kb.sub(cs.len, cs.t0));
      Value kbase = kb.mul(h, dk), vbase = kb.mul(h, dv), mbase = kb.mul(h, C);
      Value last1 = kb.sub(nc, kb.idx(1));
      // Rows past the chunk's end clamped and zeroed.
      auto rowLoads = [&](Value buf, Value col) {
        SmallVector<Value> out;
        for (int64_t r = 0; r < C; ++r)
          out.push_back(kb.select(kb.ult(kb.idx(r), nc),
                                  kb.loadF32(buf, {kb.add(row0, kb.minu(kb.idx(r), last1)), col}),
                                  kb.f32(0.0)));
        return out;
      };
      auto guarded = [&](Value r, const std::function<void(Value)> &put) {
        kb.ifThen(kb.ult(r, nc), [&] { put(kb.add(row0, r)); });
      };
      // Normalized on load (kdaNormOnLoad): first the chunk's q / k rows,
      // a warp per row (vector loads, the lanes' squares, the butterfly;
      // the norm kernel's arithmetic), normalized into shared memory: Qr
      // for q, G for k (an exact-pair phase A, kdaExactPairs, reads each
      // column of them before it writes its own values there; the
      // factorized 16-token path has no other use for them). Phase A then
      // reads them from there.
      // A split norm's rows are scaled as they load (io.rows below) by
      // their inverse norms, the chunk's C of each staged in shared memory.
      const L2NormOp norms[2] = {qs.norm, ks.norm};
      const Value normed[2] = {sm.Qr, sm.G}, invs[2] = {qs.inv, ks.inv};
      const bool reduce[2] = {qs.norm && !qs.inv, ks.norm && !ks.inv};
      Value invS = (qs.inv || ks.inv) ? alloc({2, C}) : Value();
      if (invS)
        kb.strided(tb, kb.idx(0), kb.idx(2 * C), [&](Value i) {
          Value which = kb.div(i, kb.idx(C)), r = kb.rem(i, kb.idx(C));
          Value row = kb.add(row0, kb.minu(r, last1));
          Value v = qs.inv && ks.inv ? kb.select(kb.ieq(which, kb.idx(0)),
                                                  kb.loadF32(qs.inv, {row, h}),
                                                  kb.loadF32(ks.inv, {row, h}))
                                     : kb.loadF32(qs.inv ? qs.inv : ks.inv, {row, h});
          kb.store(v, invS, {which, r});
        });
      if (reduce[0] || reduce[1] || invS) {
        const int64_t vw = perHeadVw(kb, dk, {q, k});
        SmallVector<Value> cols = laneCols(kb, tb, dk, vw);
        for (int which = 0; which < 2; ++which) {
          if (!reduce[which])
            continue;
          auto epsScale = l2NormConstants(kb, norms[which]);
          kb.loopStep(tb.warp, kb.idx(C), kb.idx(tb.warps), [&](Value r) {
            SmallVector<SmallVector<Value>> vals;
            Value ss = headSumSq(kb, tb, which ? k : q, kb.add(row0, kb.minu(r, last1)), kbase,
                                 cols, vw, vals);
            for (size_t i = 0; i < cols.size(); ++i) {
              SmallVector<Value> y = l2Scaled(kb, epsScale, ss, vals[i]);
              for (int64_t e = 0; e < vw; ++e)
                kb.store(y[e], normed[which], {r, kb.add(cols[i], kb.idx(e))});
            }
          });
        }
        kb.barrier(tb);
      }
      PrepIO io;
      io.uCols = dv;
      io.mmaB = mmaB;
      io.rows = [&](int which, Value c) {
        Value bufs[] = {q, k, g};
        if (which == 3)
          return rowLoads(v, kb.add(vbase, c));
        if (which == 2 && gs.gate) { // the gate formed on load; rows past the chunk 0
          Value col = kb.add(kbase, c), a = gs.headA(kb, col);
          SmallVector<Value> rows = rowLoads(g, col);
          for (int64_t r = 0; r < C; ++r)
            rows[r] = kb.select(kb.ult(kb.idx(r), nc), gs.at(kb, rows[r], col, a), kb.f32(0.0));
          return rows;
        }
        if (which < 2 && invs[which]) {
          Value scale = l2NormConstants(kb, norms[which]).second;
          SmallVector<Value> rows = rowLoads(bufs[which], kb.add(kbase, c));
          for (int64_t r = 0; r < C; ++r)
            rows[r] = l2Apply(kb, kb.load(invS, {kb.idx(which), kb.idx(r)}), scale, {rows[r]})[0];
          return rows;
        }
        if (which < 2 && norms[which]) {
          SmallVector<Value> rows;
          for (int64_t r = 0; r < C; ++r)
            rows.push_back(kb.select(kb.ult(kb.idx(r), nc),
                                     kb.load(normed[which], {kb.idx(r), c}), kb.f32(0.0)));
          return rows;
        }
        return rowLoads(bufs[which], kb.add(kbase, c));
      };
      io.beta = [&](Value r) {
        return kb.ifElse(
            kb.ult(r, nc), [&] { return kb.sigmoid(kb.loadF32(beta, {kb.add(row0, r), h})); },
            [&] { return kb.f32(0.0); });
      };
      io.gLast = [&](Value c, Value val) { kb.storeF32(val, sc[kGLast], {row0, kb.add(kbase, c)}); };
      io.qd = [&](Value r, Value c, Value val) {
        guarded(r, [&](Value row) { kb.storeF32(val, sc[kQd], {row, kb.add(kbase, c)}); });
      };
      io.kr = [&](Value r, Value c, Value val) {
        guarded(r, [&](Value row) { kb.storeF32(val, sc[kKr], {row, kb.add(kbase, c)}); });
      };
      io.m = [&](Value r, Value j, Value val) {
        guarded(r, [&](Value row) { kb.storeF32(val, sc[kMRow], {row, kb.add(mbase, j)}); });
      };
      io.w = [&](Value r, Value c, Value val) {
        guarded(r, [&](Value row) { kb.storeF32(val, sc[kWHat], {row, kb.add(kbase, c)}); });
      };
      io.u = [&](Value r, Value j, Value val) {
        guarded(r, [&](Value row) { kb.storeF32(val, sc[kUHat], {row, kb.add(vbase, j)}); });
      };
      kdaPrepPhases(rule, kb, tb, C, sm, io);
    });
  }, dyn ? smem : 0, "kda_prep");
}

/// Launch 2, fp32 FMA (host, the exact f32 build): a block per (sequence,
/// head), threads over value rows j of the state, chunk inputs staged in
/// shared memory.
static void kdaRecurrenceFma(DeltaRuleOp rule, KernelBuilder &kb, LowerState &st, int64_t C,
                             ArrayRef<Value> sc) {
  int64_t H = rule.getNumHeads(), dk = rule.getKeyDim(), dv = rule.getValueDim();
  Value S = st.get(rule.getState()), lens = st.get(rule.getSeqLens()),
        o = st.get(rule.getResult());
  Type f32 = kb.b.getF32Type();
  // Chunks of 32 or 64 stage past the static 48 KB: dynamic shared memory.
  const int64_t smem = fmaSmemTotal(C, dk, dv);
  const bool dyn = kb.gpu() && smem > kSharedBudget;
  kb.blocks({kb.dim(lens, 0), kb.idx(H)}, kKdaThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value n = bid[0], h = bid[1];
    SmallVector<Value> bufs;
    int64_t offset = 0;
    for (auto &shape : fmaSmemShapes(C, dk, dv)) {
      if (dyn) {
        bufs.push_back(kb.dynamicShared(tb, offset, shape, f32));
        offset += smemBytes(shape);
      } else {
        bufs.push_back(kb.shared(tb, shape, f32));
      }
    }
    Value Ws = bufs[0], Qs = bufs[1], Ks = bufs[2], Us = bufs[3], Ms = bufs[4], Gs = bufs[5];
    Value start = kb.seqOffset(tb, lens, n), len = kb.seqLen(lens, n);
    Value kbase = kb.mul(h, dk), vbase = kb.mul(h, dv), mbase = kb.mul(h, C);
    kb.loop(kb.idx(0), kb.ceilDiv(len, C), [&](Value ci) {
      Value t0 = kb.mul(ci, C), row0 = kb.add(start, t0);
      Value nc = kb.minu(kb.idx(C), kb.sub(len, t0));
      // Stage the chunk (rows past its end as zeros).
      auto stage = [&](Value src, Value dst, int64_t cols, Value base) {
        kb.strided(tb, kb.idx(0), kb.idx(C * cols), [&](Value i) {
          Value r = kb.div(i, cols), c = kb.rem(i, cols);
          Value val = kb.ifElse(
              kb.ult(r, nc), [&] { return kb.loadF32(src, {kb.add(row0, r), kb.add(base, c)}); },
              [&] { return kb.f32(0.0); });
          kb.store(val, dst, {r, c});
        });
      };
      stage(sc[kWHat], Ws, dk, kbase);
      stage(sc[kQd], Qs, dk, kbase);
      stage(sc[kKr], Ks, dk, kbase);
      stage(sc[kUHat], Us, dv, vbase);
      stage(sc[kMRow], Ms, C, mbase);
      kb.strided(tb, kb.idx(0), kb.idx(dk), [&](Value c) {
        kb.store(kb.loadF32(sc[kGLast], {row0, kb.add(kbase, c)}), Gs, {c});
      });
      kb.barrier(tb);
      kb.strided(tb, kb.idx(0), kb.idx(dv), [&](Value j) {
        // x_r = W^_r . S[j], p_r = Qd_r . S[j] with the entering state.
        SmallVector<Value> zeros(2 * C, kb.f32(0.0));
        SmallVector<Value> xp = kb.loop(kb.idx(0), kb.idx(dk), zeros, [&](Value c, ValueRange a) {
          Value s = kb.loadF32(S, {n, h, j, c});
          SmallVector<Value> out(a);
          for (int64_t r = 0; r < C; ++r) {
            out[r] = kb.fadd(out[r], kb.fmul(kb.load(Ws, {kb.idx(r), c}), s));
            out[C + r] = kb.fadd(out[C + r], kb.fmul(kb.load(Qs, {kb.idx(r), c}), s));
          }
          return out;
        });
        SmallVector<Value> u;
        for (int64_t r = 0; r < C; ++r) {
          u.push_back(kb.fsub(kb.load(Us, {kb.idx(r), j}), xp[r]));
          Value out = xp[C + r];
          for (int64_t s2 = 0; s2 <= r; ++s2)
            out = kb.fadd(out, kb.fmul(kb.load(Ms, {kb.idx(r), kb.idx(s2)}), u[s2]));
          kb.ifThen(kb.ult(kb.idx(r), nc),
                    [&] { kb.storeF32(out, o, {kb.add(row0, kb.idx(r)), kb.add(vbase, j)}); });
        }
        kb.loop(kb.idx(0), kb.idx(dk), [&](Value c) {
          Value acc = kb.fmul(kb.load(Gs, {c}), kb.loadF32(S, {n, h, j, c}));
          for (int64_t r = 0; r < C; ++r)
            acc = kb.fadd(acc, kb.fmul(kb.load(Ks, {kb.idx(r), c}), u[r]));
          kb.storeF32(acc, S, {n, h, j, c});
        });
      });
      kb.barrier(tb); // the next chunk overwrites the staged inputs
    });
  }, dyn ? smem : 0, "kda_chunk_fma");
}

/// The tensor-core recurrence's block shape: value rows a block (bv, a
/// warp per 16 rows), warps a row block sharing its key columns (ks), and
/// whether O = Qd S^T leaves the pair's barrier (deferO).
struct KdaMmaShape {
  int64_t bv, ks;
  bool deferO;
};

static void badRecurrence(const llvm::Twine &msg) {
  llvm::report_fatal_error("k3c: bad KDA chunk recurrence: " + msg, /*gen_crash_diag=*/false);
}

/// The key split and the deferred O for `bv` value rows a block (their
/// environment overrides checked against d_k).
static KdaMmaShape kdaShapeFor(DeltaRuleOp rule, int64_t bv, int64_t ksDefault) {
  const int64_t dk = rule.getKeyDim();
  // K3C_KDA_KEY_SPLIT=2: the key columns of a warp's state rows split over
  // two warps (each keeps 16 rows x dk/2 columns, half the dependent MMA
  // chain a chunk, twice the warps an SM); the pair sums its partial X and O
  // through shared memory (one more barrier a chunk), then each warp does
  // M U and the store for one of the two n8 column tiles.
  const int64_t KS = intFromEnv("K3C_KDA_KEY_SPLIT", ksDefault);
  if (KS != 1 && KS != 2)
    badRecurrence("K3C_KDA_KEY_SPLIT must be 1 or 2, got " + llvm::Twine(KS));
  if (dk % (8 * KS))
    badRecurrence("K3C_KDA_KEY_SPLIT=" + llvm::Twine(KS) + " needs d_k a multiple of " +
                  llvm::Twine(8 * KS) + ", got " + llvm::Twine(dk));
  // K3C_KDA_DEFER_O (with the key split; its default): only X = W^ S^T
  // before the pair's barrier; O = Qd S^T is issued after U (off the chain
  // that the barrier waits for), and the pair adds its O partials at the
  // next chunk's barrier (the warp keeps its own sum, with M U, until
  // then). H200, slice at 8192 tokens: 3.32 -> 3.26 ms, bit-identical.
  const bool deferO = intFromEnv("K3C_KDA_DEFER_O", KS == 2);
  if (deferO && KS != 2)
    badRecurrence("K3C_KDA_DEFER_O=1 needs K3C_KDA_KEY_SPLIT=2");
  return {bv, KS, deferO};
}

/// The two-launch form's shape. K3C_KDA_BV: value rows a block (32 where
/// d_v allows, else 16; 16 doubles the blocks of a head, each re-reading
/// the chunk's W^, Qd and Kr); the key split where d_k allows it.
static KdaMmaShape kdaMmaShape(DeltaRuleOp rule) {
  const int64_t dk = rule.getKeyDim(), dv = rule.getValueDim();
  const int64_t BV = intFromEnv("K3C_KDA_BV", dv % 32 == 0 ? 32 : 16);
  if ((BV != 16 && BV != 32 && BV != 64 && BV != 128) || dv % BV)
    badRecurrence("K3C_KDA_BV must be 16, 32, 64 or 128 and divide d_v = " + llvm::Twine(dv) +
                  ", got " + llvm::Twine(BV));
  return kdaShapeFor(rule, BV, BV <= 64 && dk % 16 == 0 ? 2 : 1);
}

/// The fused form's shape: each block runs the chunk's prep for its own
/// value columns, so fewer, wider blocks repeat less of it. K3C_KDA_FUSED_BV
/// (16, 32, 64 or 128 dividing d_v): by default the widest whose blocks a
/// sequence (heads x d_v / bv) still cover 5/8 of the SMs (128 for the
/// slice's 96 heads, 32 for Kimi Linear's 32); a warp per 16 rows, and the
/// key split for blocks of at most 32 rows (wider ones have the warps).
static KdaMmaShape kdaFusedShape(KernelBuilder &kb, DeltaRuleOp rule) {
  const int64_t H = rule.getNumHeads(), dk = rule.getKeyDim(), dv = rule.getValueDim();
  int64_t want = 16;
  for (int64_t bv : {128, 64, 32})
    if (dv % bv == 0 && 8 * H * (dv / bv) >= 5 * kb.info().smCount) {
      want = bv;
      break;
    }
  if (dv % 32 == 0 && want == 16)
    want = 32;
  const int64_t BV = intFromEnv("K3C_KDA_FUSED_BV", want);
  if ((BV != 16 && BV != 32 && BV != 64 && BV != 128) || dv % BV)
    badRecurrence("K3C_KDA_FUSED_BV must be 16, 32, 64 or 128 and divide d_v = " +
                  llvm::Twine(dv) + ", got " + llvm::Twine(BV));
  return kdaShapeFor(rule, BV, BV <= 32 && dk % 16 == 0 ? 2 : 1);
}

/// Launch 2 on tensor cores (the bf16 build on the GPU, C = 16): a block per
/// (sequence, head, BV value rows), a warp per 16 value rows j, tf32
/// mma.sync m16n8k8 with fp32 accumulation (operands rounded to tf32, 10
/// mantissa bits, from the fp32 scratch). The warp's state rows S[j, :] stay
/// in m16n8 accumulators (tile t: columns 8t..8t+7, element e at row
/// g + 8(e/2), column 8t + 2q + e%2; g = lane / 4, q = lane % 4) for the
/// whole sequence. They are also the B fragments of W^ S^T and Qd S^T: the
/// k slots q and q + 4 of a k8 step are taken as columns 2q and 2q + 1 for
/// both operands (a dot product does not care in which order its terms
/// come), so no register leaves its thread; U^T Kr adds into them directly.
/// The chunk's W^, Qd, Kr, U^, M and e^G_l are double-buffered in shared
/// memory by cp.async (rows past the chunk's end zero-filled); U goes through
/// a per-warp transposed tile for M U and U^T Kr.
///
/// Fused (`fused`, kdaFusedShape): the block also runs the prep phases of
/// each chunk itself (kdaPrepPhases, its value columns only), from the
/// chunk's raw q, k, g and v rows that cp.async double-buffers in shared
/// memory, into single-buffered W^ / Qd / Kr / U^ / M / e^G_l stages: no
/// scratch round trip (1.6 GB at 8192 tokens on the slice), the prep's
/// loads off the chain.
static void kdaRecurrenceMma(DeltaRuleOp rule, KernelBuilder &kb, LowerState &st,
                             ArrayRef<Value> sc, bool fused = false) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  constexpr int64_t C = 16;
  const int64_t H = rule.getNumHeads(), dk = rule.getKeyDim(), dv = rule.getValueDim();
  const KdaMmaShape shape = fused ? kdaFusedShape(kb, rule) : kdaMmaShape(rule);
  const int64_t BV = shape.bv, rowWarps = BV / 16;
  const int64_t KS = shape.ks;
  const bool deferO = shape.deferO;
  const int64_t warps = rowWarps * KS, threads = 32 * warps;
  const bool bf16x3 = intFromEnv("K3C_KDA_BF16X3", 0);
  if (bf16x3 && (dk / KS) % 16)
    badRecurrence("K3C_KDA_BF16X3=1 needs d_k / key split a multiple of 16, got " +
                  llvm::Twine(dk / KS));
  // Pitches (fp32 elements) that keep each warp's fragment loads free of
  // bank conflicts.
  const int64_t pk = dk + 8, pv = BV + 8, pc = C + 4;
  Value S = st.get(rule.getState()), lens = st.get(rule.getSeqLens()),
        o = st.get(rule.getResult());
  Type f32 = b.getF32Type();
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  // The fused kernel's raw inputs (their own element types) and buffers.
  Value qIn = st.get(rule.getQ()), kIn = st.get(rule.getK()), gIn = st.get(rule.getG()),
        vIn = st.get(rule.getV()), betaIn = st.get(rule.getBeta());
  auto eltOf = [](Value m) { return cast<MemRefType>(m.getType()).getElementType(); };
  // Shared memory: static in the two-launch form; dynamic in the fused one
  // (past 48 KB), laid out by one list of (shape, type) in allocation order
  // so the launch's byte count and the views agree.
  const int64_t stages = fused ? 1 : 2;
  // The fused prep's row padding (its phase B as in the prep launch).
  const int64_t prepPadF = fused ? prepPad(rule, C, kdaPrepMma(rule)) : 1;
  // W^, Qd, Kr stages: fp16 where the prep writes them so (kdaHalfScratch),
  // then exact tf32 operands; fp32 otherwise.
  const Type wT = fused ? f32 : eltOf(sc[kWHat]), qT = fused ? f32 : eltOf(sc[kQd]),
             kT = fused ? f32 : eltOf(sc[kKr]);
  const bool halfW = wT.isF16(), halfQ = qT.isF16(), halfK = kT.isF16();
  SmallVector<std::pair<SmallVector<int64_t>, Type>> plan;
  auto planned = [&](ArrayRef<int64_t> shape, Type t) {
    plan.push_back({SmallVector<int64_t>(shape), t});
  };
  auto bytesOf = [](ArrayRef<int64_t> shape, Type t) {
    return smemBytes(shape, t.getIntOrFloatBitWidth() / 8);
  };
  planned({stages, C, pk}, wT); // W^
  planned({stages, C, pk}, qT); // Qd
  planned({stages, C, pk}, kT); // Kr
  planned({stages, C, pv}, f32); // U^
  planned({stages, C, pc}, f32); // M
  planned({stages, dk}, f32);    // e^G_l
  planned({warps, 16, pc}, f32); // UT
  if (KS == 2)
    planned({warps, 16, 32}, f32); // XP
  if (fused) {
    planned({2, C, dk}, eltOf(qIn));
    planned({2, C, dk}, eltOf(kIn));
    planned({2, C, dk}, eltOf(gIn));
    planned({2, C, BV}, eltOf(vIn));
    for (auto &shape : prepSmemShapes(C, dk, prepPadF)) // G, Kd, Qd, Ke, Qr, L, beta
      planned(shape, f32);
  }
  int64_t dynBytes = 0;
  if (fused)
    for (auto &[shape, t] : plan)
      dynBytes += bytesOf(shape, t);
  kb.blocks({kb.dim(lens, 0), kb.idx(H), kb.idx(dv / BV)}, threads, [&](ValueRange bid,
                                                                       ThreadBlock &tb) {
    Value n = bid[0], h = bid[1], jb = kb.mul(bid[2], BV);
    size_t next = 0;
    int64_t offset = 0;
    auto alloc = [&](ArrayRef<int64_t> shape) -> Value {
      auto &[want, t] = plan[next++];
      assert(ArrayRef<int64_t>(want) == shape && "the shared-memory plan's order");
      if (!fused)
        return kb.shared(tb, shape, t);
      Value view = kb.dynamicShared(tb, offset, shape, t);
      offset += bytesOf(shape, t);
      return view;
    };
    Value Wsm = alloc({stages, C, pk}), Qsm = alloc({stages, C, pk}),
          Ksm = alloc({stages, C, pk}), Usm = alloc({stages, C, pv}),
          Msm = alloc({stages, C, pc}), Gsm = alloc({stages, dk}),
          UT = alloc({warps, 16, pc});
    // Partial X and O of each warp (KS = 2): 16 values a lane.
    Value XP = KS == 2 ? alloc({warps, 16, 32}) : Value();
    Value Rq, Rk, Rg, Rv;
    PrepSmem psm;
    if (fused) {
      Rq = alloc({2, C, dk});
      Rk = alloc({2, C, dk});
      Rg = alloc({2, C, dk});
      Rv = alloc({2, C, BV});
      psm = prepSmem(kb, C, dk, prepPadF, alloc);
    }
    assert(next == plan.size() && "every planned buffer allocated");
    Value start = kb.seqOffset(tb, lens, n), len = kb.seqLen(lens, n);
    Value nChunks = kb.ceilDiv(len, C);
    Value kbase = kb.mul(h, dk), vbase = kb.mul(h, dv), mbase = kb.mul(h, C);
    Value lane = tb.lane, g = kb.div(lane, 4), q = kb.rem(lane, 4), q2 = kb.mul(q, 2);
    Value rw = kb.rem(tb.warp, kb.idx(rowWarps)), kh = kb.div(tb.warp, kb.idx(rowWarps));
    Value wj = kb.mul(rw, 16), jw = kb.add(jb, wj);
    // The warp's first key column (its half with KS = 2).
    Value kc0 = kb.mul(kh, kb.idx(dk / KS));

    // One chunk's inputs into ring slot `slot`: [C, cols] row tiles in
    // 16-byte copies spread over the threads, rows past the chunk zeroed.
    auto issue = [&](Value ci, Value slot) {
      Value row0 = kb.add(start, kb.mul(ci, C));
      Value limit = kb.add(row0, kb.minu(kb.idx(C), kb.sub(len, kb.mul(ci, C))));
      SmallVector<Value> tokens;
      auto rows = [&](Value src, Value base, int64_t cols, Value dst, int64_t nRows) {
        // 16-byte copies: 4 fp32 or 8 bf16 elements.
        const int64_t epc = 128 / eltOf(src).getIntOrFloatBitWidth();
        const int64_t per = cols / epc, total = nRows * per;
        for (int64_t i = 0; i < (total + threads - 1) / threads; ++i) {
          Value lin = kb.add(tb.tid, kb.idx(i * threads));
          auto copy = [&]() {
            Value r = kb.div(lin, per), ch = kb.mul(kb.rem(lin, per), epc);
            Value row = kb.add(row0, r), ok = kb.ult(row, limit);
            return nvgpu::DeviceAsyncCopyOp::create(
                b, loc, tokenType, dst, ValueRange{slot, r, ch}, src,
                ValueRange{kb.select(ok, row, kb.idx(0)), kb.add(base, ch)}, b.getIndexAttr(epc),
                kb.select(ok, kb.idx(epc), kb.idx(0)), b.getUnitAttr());
          };
          if (total % threads == 0)
            tokens.push_back(copy());
          else
            kb.ifThen(kb.ult(lin, kb.idx(total)), [&] { copy(); });
        }
      };
      if (fused) {
        rows(qIn, kbase, dk, Rq, C);
        rows(kIn, kbase, dk, Rk, C);
        rows(gIn, kbase, dk, Rg, C);
        rows(vIn, kb.add(vbase, jb), BV, Rv, C);
        nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens);
        return;
      }
      rows(sc[kWHat], kbase, dk, Wsm, C);
      rows(sc[kQd], kbase, dk, Qsm, C);
      rows(sc[kKr], kbase, dk, Ksm, C);
      rows(sc[kUHat], kb.add(vbase, jb), BV, Usm, C);
      rows(sc[kMRow], mbase, C, Msm, C);
      for (int64_t i = 0; i < (dk / 4 + threads - 1) / threads; ++i) {
        Value lin = kb.add(tb.tid, kb.idx(i * threads));
        kb.ifThen(kb.ult(lin, kb.idx(dk / 4)), [&] {
          Value c = kb.mul(lin, 4);
          nvgpu::DeviceAsyncCopyOp::create(b, loc, tokenType, Gsm, ValueRange{slot, c},
                                           sc[kGLast], ValueRange{row0, kb.add(kbase, c)},
                                           b.getIndexAttr(4), Value(), b.getUnitAttr());
        });
      }
      nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens);
    };
    // tf32 operands. cvt.rna.tf32.f32 has no sm_90 instruction: ptxas
    // emulates it (FSETP, SEL, LOP3, IADD: the profile at 8192 tokens had it
    // at ~8 instructions a conversion, half of the kernel's issue slots).
    // The tensor core reads the top 19 bits of a .tf32 register and ignores
    // the rest (truncation), so by default a split takes hi = v with its low
    // 13 mantissa bits cleared (one LOP3) and lo = v - hi (one FADD, exact),
    // passed as its raw bits: the 3xTF32 product's error is ~2^-19 of its
    // terms (RNA: ~2^-21); K3C_KDA_TF32_RNA=1 keeps the rounded conversion.
    const bool rna = intFromEnv("K3C_KDA_TF32_RNA", 0);
    Type i32 = b.getI32Type();
    auto bits = [&](Value v) -> Value { return arith::BitcastOp::create(b, loc, i32, v).getResult(); };
    auto tf32 = [&](Value v) -> Value {
      if (!rna)
        return bits(v);
      return NVVM::ConvertFloatToTF32Op::create(b, loc, i32, v, NVVM::FPRoundingMode::RNA,
                                                NVVM::SaturationMode::NONE, false)
          .getResult();
    };
    // Products in 3xTF32 (hi*hi + hi*lo + lo*hi: fp32-level) or one tf32
    // MMA; `a` and `b` are the fp32 operand values.
    auto split = [&](Value v) -> std::pair<Value, Value> {
      if (!rna)
        return tf32Words(kb, v);
      Value hi = tf32(v);
      return {hi, tf32(kb.fsub(v, arith::BitcastOp::create(b, loc, f32, hi)))};
    };
    // aExact / bExact: that operand is a tf32 value already (its lo is 0:
    // the term with it is left out).
    auto mmaPrecise = [&](bool three, ArrayRef<Value> a, ArrayRef<Value> bv,
                          MutableArrayRef<Value> acc, bool aExact = false, bool bExact = false) {
      SmallVector<Value> ah, al, bh, bl;
      for (Value v : a) {
        auto [h, l] = split(v);
        ah.push_back(h);
        al.push_back(l);
      }
      for (Value v : bv) {
        auto [h, l] = split(v);
        bh.push_back(h);
        bl.push_back(l);
      }
      mmaTf32(kb, ah, bh, acc);
      if (three && !bExact)
        mmaTf32(kb, ah, bl, acc);
      if (three && !aExact)
        mmaTf32(kb, al, bh, acc);
    };
    // Which state products run in 3xTF32 (bit 0: X = W^ S^T, bit 1:
    // O = Qd S^T, bit 2: the state update U^T Kr); M U always does.
    const int64_t precise = intFromEnv("K3C_KDA_3XTF32", kKda3xTf32);
    const bool preciseX = precise & 1, preciseO = precise & 2, preciseS = precise & 4;
    // K3C_KDA_BF16X3=1: the products as bf16 m16n8k16 MMAs instead of tf32
    // m16n8k8 (half the MMAs for the same k, at twice the rate a k): each
    // fp32 operand pair split into a bf16 hi word and a bf16 word of its
    // remainder, the products marked precise (above; M U always) as hi*hi
    // + hi*lo + lo*hi (~2^-15 of the terms, where 3xTF32 has ~2^-19), the
    // others hi*hi. The fragments keep the tf32 form's
    // property: the state registers are the B words of X and O as they are
    // (k slots 2q, 2q + 1 and 2q + 8, 2q + 9 of a k16 step are the key
    // columns of state tiles 2p and 2p + 1 a thread holds).
    // (bf16x3: K3C_KDA_BF16X3, read before the launch.)
    // A bf16 hi word and lo word of the fp32 pair (x0, x1) (x0 in the low
    // halves).
    // Both words by truncation, no conversions (the bf16 build expands
    // f32 -> bf16 rounding into ~10 integer instructions a value): hi the
    // top halves of x0 and x1 (one byte permute), lo those of the exact
    // remainders x - hi; together 16 of the 24 mantissa bits, the product
    // hi*hi + hi*lo + lo*hi within ~2^-15 of its terms.
    auto topHalves = [&](Value x0, Value x1) -> Value {
      return NVVM::PermuteOp::create(b, loc, i32, bits(x0), bits(x1), kb.i32Const(0x7632),
                                     NVVM::PermuteMode::DEFAULT);
    };
    auto splitPair = [&](Value x0, Value x1) {
      auto rest = [&](Value x) {
        Value hi = arith::BitcastOp::create(
            b, loc, f32,
            arith::AndIOp::create(b, loc, bits(x), kb.i32Const(int32_t(0xffff0000))).getResult());
        return kb.fsub(x, hi);
      };
      return std::make_pair(topHalves(x0, x1), topHalves(rest(x0), rest(x1)));
    };
    struct Words {
      SmallVector<Value> hi, lo;
    };
    auto splitPairs = [&](ArrayRef<std::pair<Value, Value>> pairs) {
      Words w;
      for (auto [x0, x1] : pairs) {
        auto [h, l] = splitPair(x0, x1);
        w.hi.push_back(h);
        w.lo.push_back(l);
      }
      return w;
    };
    auto mmaWords = [&](bool three, const Words &a, const Words &bw,
                        MutableArrayRef<Value> acc) {
      mmaBf16(kb, a.hi, bw.hi, acc);
      if (three) {
        mmaBf16(kb, a.hi, bw.lo, acc);
        mmaBf16(kb, a.lo, bw.hi, acc);
      }
    };
    // A words of a [16][16] fp32 tile at rows (g, g + 8): column pairs c0
    // + 2q (a0, a1) and c1 + 2q (a2, a3).
    auto aWords = [&](Value buf, ValueRange lead, Value c0, Value c1) {
      SmallVector<std::pair<Value, Value>> pairs;
      for (Value c : {c0, c1})
        for (int64_t hh = 0; hh < 2; ++hh) {
          SmallVector<Value> at(lead);
          at.push_back(kb.add(g, 8 * hh));
          at.push_back(c);
          SmallVector<Value> v = kb.loadVec(buf, at, 2);
          pairs.push_back({v[0], v[1]});
        }
      return splitPairs(pairs);
    };

    const int64_t tiles = dk / 8 / KS;
    // Key column of the thread's pair in the warp's tile t.
    auto keyCol = [&](int64_t t) { return kb.add(kc0, kb.add(q2, 8 * t)); };
    SmallVector<Value> init;
    for (int64_t t = 0; t < tiles; ++t)
      for (int64_t hh = 0; hh < 2; ++hh)
        for (Value v : kb.loadVec(S, {n, h, kb.add(jw, kb.add(g, 8 * hh)), keyCol(t)}, 2))
          init.push_back(v);
    // Chunk ci's first row and the end of its rows.
    auto chunkRows = [&](Value ci) {
      Value row0 = kb.add(start, kb.mul(ci, C));
      return std::make_pair(row0, kb.add(row0, kb.minu(kb.idx(C), kb.sub(len, kb.mul(ci, C)))));
    };
    // The warp's O tile(s) of a chunk into o (KS = 2: its n8 tile kh).
    auto storeO = [&](Value row0, Value limit, ArrayRef<Value> vals) {
      for (int64_t u = 0; u < 2 / KS; ++u) {
        Value colU = KS == 2 ? kb.add(q2, kb.mul(kh, kb.idx(8))) : kb.add(q2, 8 * u);
        for (int64_t hh = 0; hh < 2; ++hh)
          storeAccPair(kb, o, kb.add(row0, kb.add(g, 8 * hh)), kb.add(kb.add(vbase, jw), colU),
                       vals[4 * u + 2 * hh], vals[4 * u + 2 * hh + 1], limit, H * dv);
      }
    };
    Value partner = kb.add(rw, kb.mul(kb.sub(kb.idx(1), kh), kb.idx(rowWarps)));
    // deferO: chunk ci - 1's O, the warp's sum plus the partner's partial
    // (stored before this barrier).
    auto finishO = [&](Value ci, ValueRange pending) {
      SmallVector<Value> out;
      for (int64_t e = 0; e < 4; ++e)
        out.push_back(kb.fadd(pending[e], kb.load(XP, {partner, kb.idx(8 + e), lane})));
      auto [row0, limit] = chunkRows(kb.sub(ci, kb.idx(1)));
      storeO(row0, limit, out);
    };
    const int64_t nS = 4 * tiles;
    if (deferO)
      init.append(4, kb.f32(0.0));
    kb.ifThen(kb.ult(kb.idx(0), nChunks), [&] { issue(kb.idx(0), kb.idx(0)); });
    SmallVector<Value> acc = kb.loop(kb.idx(0), nChunks, init, [&](Value ci, ValueRange in) {
      NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
      kb.barrier(tb);
      if (deferO)
        kb.ifThen(kb.ult(kb.idx(0), ci), [&] { finishO(ci, in.drop_front(nS)); });
      Value next = kb.add(ci, 1);
      kb.ifThen(kb.ult(next, nChunks), [&] { issue(next, kb.rem(next, 2)); });
      Value slot = kb.rem(ci, 2);
      auto [row0, limit] = chunkRows(ci);
      if (fused) {
        // The chunk's prep from its raw rows (ring slot `slot`; rows past
        // the chunk's end zero-filled, so its products there are zeros, as
        // the two-launch form's zero-filled copies give) into stage 0.
        Value r0 = row0, nc = kb.sub(limit, row0), rs = slot, z = kb.idx(0);
        PrepIO io;
        io.uCols = BV;
        io.mmaB = kdaPrepMma(rule);
        io.rows = [&](int which, Value c) {
          Value bufs[] = {Rq, Rk, Rg, Rv};
          SmallVector<Value> out;
          for (int64_t r = 0; r < C; ++r)
            out.push_back(kb.loadF32(bufs[which], {rs, kb.idx(r), c}));
          return out;
        };
        io.beta = [&](Value r) {
          return kb.ifElse(
              kb.ult(r, nc), [&] { return kb.sigmoid(kb.loadF32(betaIn, {kb.add(r0, r), h})); },
              [&] { return kb.f32(0.0); });
        };
        io.gLast = [&](Value c, Value val) { kb.store(val, Gsm, {z, c}); };
        io.qd = [&](Value r, Value c, Value val) { kb.store(val, Qsm, {z, r, c}); };
        io.kr = [&](Value r, Value c, Value val) { kb.store(val, Ksm, {z, r, c}); };
        io.m = [&](Value r, Value j, Value val) { kb.store(val, Msm, {z, r, j}); };
        io.w = [&](Value r, Value c, Value val) { kb.store(val, Wsm, {z, r, c}); };
        io.u = [&](Value r, Value j, Value val) { kb.store(val, Usm, {z, r, j}); };
        kdaPrepPhases(rule, kb, tb, C, psm, io);
        kb.barrier(tb);
        slot = z;
      }
      SmallVector<Value> s(in.take_front(nS));
      // X = W^ S^T and O = Qd S^T: rows the chunk's tokens, columns the
      // warp's 16 value rows (two n8 tiles); k step t = state tile t.
      // Two accumulator sets (even and odd k steps) halve the dependent
      // MMA chains; the state is rounded to tf32 one k step at a time.
      SmallVector<Value> X(16, kb.f32(0.0)), O(16, kb.f32(0.0));
      auto aPermuted = [&](Value buf, int64_t t) {
        SmallVector<Value> lo = kb.loadVec(buf, {slot, g, keyCol(t)}, 2);
        SmallVector<Value> hi = kb.loadVec(buf, {slot, kb.add(g, 8), keyCol(t)}, 2);
        return SmallVector<Value>{lo[0], hi[0], lo[1], hi[1]};
      };
      // bf16x3: k16 step p = state tiles 2p and 2p + 1; the state's words
      // of value rows g + 8u.
      auto stateWords = [&](ArrayRef<Value> st, int64_t p, int64_t u) {
        return splitPairs({{st[8 * p + 2 * u], st[8 * p + 2 * u + 1]},
                           {st[8 * p + 4 + 2 * u], st[8 * p + 4 + 2 * u + 1]}});
      };
      auto keyWords = [&](Value buf, int64_t p) {
        return aWords(buf, {slot}, keyCol(2 * p), keyCol(2 * p + 1));
      };
      if (bf16x3) {
        for (int64_t p = 0; p < tiles / 2; ++p) {
          Words aW = keyWords(Wsm, p), aQ;
          if (!deferO)
            aQ = keyWords(Qsm, p);
          int64_t set = 8 * (p % 2);
          for (int64_t u = 0; u < 2; ++u) {
            Words bS = stateWords(s, p, u);
            mmaWords(preciseX, aW, bS, MutableArrayRef<Value>(X).slice(set + 4 * u, 4));
            if (!deferO)
              mmaWords(preciseO, aQ, bS, MutableArrayRef<Value>(O).slice(set + 4 * u, 4));
          }
        }
      } else {
        for (int64_t t = 0; t < tiles; ++t) {
          SmallVector<Value> aW = aPermuted(Wsm, t), aQ;
          if (!deferO)
            aQ = aPermuted(Qsm, t);
          int64_t set = 8 * (t % 2);
          for (int64_t u = 0; u < 2; ++u) {
            SmallVector<Value> bS{s[4 * t + 2 * u], s[4 * t + 2 * u + 1]};
            mmaPrecise(preciseX, aW, bS, MutableArrayRef<Value>(X).slice(set + 4 * u, 4), halfW);
            if (!deferO)
              mmaPrecise(preciseO, aQ, bS, MutableArrayRef<Value>(O).slice(set + 4 * u, 4), halfQ);
          }
        }
      }
      // The two sets of each accumulator added (element by element, the
      // accumulators interleaved).
      auto mergeSets = [&](ArrayRef<SmallVector<Value> *> accs) {
        for (int64_t i = 0; i < 8; ++i)
          for (SmallVector<Value> *A : accs)
            (*A)[i] = kb.fadd((*A)[i], (*A)[8 + i]);
        for (SmallVector<Value> *A : accs)
          A->resize(8);
      };
      if (deferO)
        mergeSets({&X});
      else
        mergeSets({&X, &O});
      if (KS == 2) {
        // The pair's partial sums: mine + the partner's (the same value in
        // both warps: IEEE addition commutes).
        for (int64_t i = 0; i < 8; ++i) {
          kb.store(X[i], XP, {tb.warp, kb.idx(i), lane});
          if (!deferO)
            kb.store(O[i], XP, {tb.warp, kb.idx(8 + i), lane});
        }
        kb.barrier(tb);
        for (int64_t i = 0; i < 8; ++i) {
          Value xo = kb.load(XP, {partner, kb.idx(i), lane});
          Value oo = deferO ? Value() : kb.load(XP, {partner, kb.idx(8 + i), lane});
          X[i] = kb.fadd(X[i], xo);
          if (!deferO)
            O[i] = kb.fadd(O[i], oo);
        }
      }
      // U = U^ - X into the warp's transposed tile UT[j][r].
      for (int64_t u = 0; u < 2; ++u)
        for (int64_t hh = 0; hh < 2; ++hh) {
          Value r = kb.add(g, 8 * hh), jl = kb.add(q2, 8 * u);
          SmallVector<Value> uh = kb.loadVec(Usm, {slot, r, kb.add(wj, jl)}, 2);
          for (int64_t e = 0; e < 2; ++e)
            kb.store(kb.fsub(uh[e], X[4 * u + 2 * hh + e]), UT,
                     {tb.warp, kb.add(jl, e), r});
        }
      NVVM::SyncWarpOp::create(b, loc, kb.i32Const(-1));
      // deferO: the warp's O partial now (the state not yet updated); the
      // partner's half of it is stored after the update.
      SmallVector<Value> other;
      if (deferO) {
        if (bf16x3) {
          for (int64_t p = 0; p < tiles / 2; ++p) {
            Words aQ = keyWords(Qsm, p);
            for (int64_t u = 0; u < 2; ++u)
              mmaWords(preciseO, aQ, stateWords(s, p, u),
                       MutableArrayRef<Value>(O).slice(8 * (p % 2) + 4 * u, 4));
          }
        } else {
          for (int64_t t = 0; t < tiles; ++t) {
            SmallVector<Value> aQ = aPermuted(Qsm, t);
            for (int64_t u = 0; u < 2; ++u) {
              SmallVector<Value> bS{s[4 * t + 2 * u], s[4 * t + 2 * u + 1]};
              mmaPrecise(preciseO, aQ, bS,
                         MutableArrayRef<Value>(O).slice(8 * (t % 2) + 4 * u, 4), halfQ);
            }
          }
        }
        mergeSets({&O});
        for (int64_t e = 0; e < 4; ++e)
          other.push_back(kb.select(kb.ieq(kh, kb.idx(0)), O[4 + e], O[e]));
      }
      // Natural-order fragments of a [16][16] tile at rows (g, g + 8),
      // columns 8kk + (q, q + 4).
      auto aNatural = [&](Value buf, ValueRange lead, int64_t kk) {
        SmallVector<Value> out;
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t hh = 0; hh < 2; ++hh) {
            SmallVector<Value> at(lead);
            at.push_back(kb.add(g, 8 * hh));
            at.push_back(kb.add(q, 8 * kk + 4 * half));
            out.push_back(kb.load(buf, at));
          }
        return out;
      };
      // O += M U in 3xTF32 (hi*hi + hi*lo + lo*hi: fp32-level products;
      // 12 MMAs a chunk): with M and U rounded to tf32 once, the bf16
      // dense k3-tiny batch check drifted to 7.9e-2 in a host emulation and
      // failed on the H200 (5.5e-2), while the state products in plain tf32
      // leave it at the fp32 level. B[k = s][n = j] = UT[j][s].
      if (KS == 2)
        for (int64_t e = 0; e < 4; ++e)
          O[e] = kb.select(kb.ieq(kh, kb.idx(0)), O[e], O[4 + e]);
      // B words of U (k = token s, n = value row j): UT[j][2q..] and
      // UT[j][2q + 8..].
      auto uWords = [&](Value j) {
        SmallVector<Value> lo = kb.loadVec(UT, {tb.warp, j, q2}, 2);
        SmallVector<Value> hi = kb.loadVec(UT, {tb.warp, j, kb.add(q2, 8)}, 2);
        return splitPairs({{lo[0], lo[1]}, {hi[0], hi[1]}});
      };
      if (bf16x3) {
        Words aM = aWords(Msm, {slot}, q2, kb.add(q2, 8));
        for (int64_t u = 0; u < 2 / KS; ++u) {
          Value j = KS == 2 ? kb.add(g, kb.mul(kh, kb.idx(8))) : kb.add(g, 8 * u);
          mmaWords(true, aM, uWords(j), MutableArrayRef<Value>(O).slice(4 * u, 4));
        }
      }
      for (int64_t kk = 0; kk < 2 && !bf16x3; ++kk) {
        SmallVector<Value> aMh, aMl;
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t hh = 0; hh < 2; ++hh) {
            auto [hi, lo] = split(kb.load(Msm, {slot, kb.add(g, 8 * hh),
                                                 kb.add(q, 8 * kk + 4 * half)}));
            aMh.push_back(hi);
            aMl.push_back(lo);
          }
        for (int64_t u = 0; u < 2 / KS; ++u) {
          // KS = 2: the warp's n8 tile is kh (its accumulators moved to
          // O[0..3] below, before this loop).
          Value j = KS == 2 ? kb.add(g, kb.mul(kh, kb.idx(8))) : kb.add(g, 8 * u);
          auto [b0h, b0l] = split(kb.load(UT, {tb.warp, j, kb.add(q, 8 * kk)}));
          auto [b1h, b1l] = split(kb.load(UT, {tb.warp, j, kb.add(q, 8 * kk + 4)}));
          MutableArrayRef<Value> acc4 = MutableArrayRef<Value>(O).slice(4 * u, 4);
          mmaTf32(kb, aMh, {b0h, b1h}, acc4);
          mmaTf32(kb, aMh, {b0l, b1l}, acc4);
          mmaTf32(kb, aMl, {b0h, b1h}, acc4);
        }
      }
      if (!deferO)
        storeO(row0, limit, O);
      // S <- diag(e^G_l) S + U^T Kr; A[m = j][k = r] = UT[j][r],
      // B[k = r][n = c] = Kr[r][c].
      SmallVector<Value> aU0, aU1;
      Words aU;
      if (bf16x3)
        aU = aWords(UT, {tb.warp}, q2, kb.add(q2, 8));
      else
        aU0 = aNatural(UT, {tb.warp}, 0), aU1 = aNatural(UT, {tb.warp}, 1);
      for (int64_t t = 0; t < tiles; ++t) {
        SmallVector<Value> gl = kb.loadVec(Gsm, {slot, keyCol(t)}, 2);
        for (int64_t e = 0; e < 4; ++e)
          s[4 * t + e] = kb.fmul(s[4 * t + e], gl[e % 2]);
        Value c = kb.add(kc0, kb.add(g, 8 * t));
        if (bf16x3) {
          // B[k = r][n = c] = Kr[r][c]: rows 2q, 2q + 1 and 2q + 8, 2q + 9.
          auto kr = [&](Value r) { return kb.loadF32(Ksm, {slot, r, c}); };
          Words bK = splitPairs({{kr(q2), kr(kb.add(q2, 1))},
                                 {kr(kb.add(q2, 8)), kr(kb.add(q2, 9))}});
          mmaWords(preciseS, aU, bK, MutableArrayRef<Value>(s).slice(4 * t, 4));
          continue;
        }
        for (int64_t kk = 0; kk < 2; ++kk) {
          SmallVector<Value> bK{kb.loadF32(Ksm, {slot, kb.add(q, 8 * kk), c}),
                                kb.loadF32(Ksm, {slot, kb.add(q, 8 * kk + 4), c})};
          mmaPrecise(preciseS, kk ? aU1 : aU0, bK, MutableArrayRef<Value>(s).slice(4 * t, 4),
                     false, halfK);
        }
      }
      if (deferO) {
        for (int64_t e = 0; e < 4; ++e)
          kb.store(other[e], XP, {tb.warp, kb.idx(8 + e), lane});
        s.append(O.begin(), O.begin() + 4);
      }
      return s;
    });
    if (deferO) { // the last chunk's O
      kb.barrier(tb);
      kb.ifThen(kb.ult(kb.idx(0), nChunks),
                [&] { finishO(nChunks, ArrayRef<Value>(acc).drop_front(nS)); });
    }
    for (int64_t t = 0; t < tiles; ++t)
      for (int64_t hh = 0; hh < 2; ++hh)
        kb.storeVec({acc[4 * t + 2 * hh], acc[4 * t + 2 * hh + 1]}, S,
                    {n, h, kb.add(jw, kb.add(g, 8 * hh)), keyCol(t)});
  }, dynBytes, std::string(fused ? "kda_chunk_fused" : "kda_chunk") +
                      (bf16x3 ? "_bf16x3_bv" : "_tf32_bv") +
                      std::to_string(BV) + (KS == 2 ? "_ks2" : "") + (deferO ? "_do" : "") +
                      (halfW || halfQ || halfK
                           ? "_h" + std::to_string(halfW + 2 * halfQ + 4 * halfK)
                           : ""));
}

/// The gated RMSNorm's own launch: a warp per (token, head).
static void lowerGatedNorm(GatedRMSNormOp norm, KernelBuilder &kb, LowerState &st) {
  Operation *op = norm.getOperation();
  Value x = st.get(norm.getInput()), gate = st.get(norm.getGate()), w = st.get(norm.getWeight()),
        y = st.get(norm.getResult());
  int64_t d = cast<MemRefType>(w.getType()).getDimSize(0);
  int64_t width = cast<MemRefType>(x.getType()).getDimSize(1);
  double eps = norm.getEps().convertToDouble();
  unlessOneTokenPrologue(kb, st, op, kb.dim(x, 0), [&] {
    perHeadRow(kb, kb.dim(x, 0), width / d, d, {x, gate, w, y},
               [&](ThreadBlock &tb, Value row, Value base, ArrayRef<Value> cols, int64_t vw) {
                 earlyForGemv(kb, tb, op, x);
                 gatedNormHead(kb, tb, x, gate, w, y, row, row, base, cols, vw, eps);
               });
  });
}

/// The token recurrence's vector width: the key columns a lane loads at once
/// (4 or 2 where d_k, the state and q, k, g allow it on the GPU; else 1).
static int64_t tokenVecWidth(DeltaRuleOp rule, KernelBuilder &kb, LowerState &st) {
  if (!kb.gpu())
    return 1;
  Value q = qkSource(rule.getQ(), st).buf, k = qkSource(rule.getK(), st).buf,
        g = gateSource(rule.getG(), st).buf, S = st.get(rule.getState());
  int64_t H = rule.getNumHeads(), dk = rule.getKeyDim();
  for (int64_t w : {4, 2})
    if (dk % (32 * w) == 0 && w <= kb.vecWidth(S, dk) &&
        w <= std::min({kb.vecWidth(q, H * dk), kb.vecWidth(k, H * dk), kb.vecWidth(g, H * dk)}))
      return w;
  return 1;
}

/// The token recurrence (decode, and the rule without a chunk size): a warp
/// per state row S[j, :] (lanes over key channels, 16-byte accesses), rows
/// kept in registers over the sequence's tokens:
///   S[j,:] *= e^g_t;  u = beta_t (v_t[j] - S[j,:] . k_t);  S[j,:] += u k_t;
///   o_t[j] = S[j,:] . q_t.
/// `staged` (GPU, fp32 or bf16 state): the state rows cross through shared memory
/// instead: each lane's 16-byte pieces of its warp's R rows are cp.async
/// copies into its own shared slots (no registers held while they are in
/// flight, no barrier: a lane reads only what it copied), and a row is in
/// registers only while the warp updates it. The bytes a block has in flight
/// are then bounded by shared memory, not by registers and occupancy (the
/// register form holds 64 bytes a lane: Nsight Compute had it memory-latency
/// bound at half occupancy, 83 % of copy bandwidth at batch 128). Same
/// arithmetic in the same order: bit-identical to the register form.
static void kdaTokensKernel(DeltaRuleOp rule, KernelBuilder &kb, LowerState &st, bool staged) {
  QKSource qs = qkSource(rule.getQ(), st), ks = qkSource(rule.getK(), st);
  GateSource gs = gateSource(rule.getG(), st);
  Value q = qs.buf, k = ks.buf, v = st.get(rule.getV()),
        g = gs.buf, beta = st.get(rule.getBeta()), S = st.get(rule.getState()),
        lens = st.get(rule.getSeqLens()), o = st.get(rule.getResult());
  int64_t H = rule.getNumHeads(), dk = rule.getKeyDim(), dv = rule.getValueDim();
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  // Knobs (compile time): K3C_KDA_TOKEN_THREADS threads a block
  // (kKdaThreads), K3C_KDA_TOKEN_ROWS state rows a warp (4; the bytes a lane
  // has in flight); the staged form: K3C_KDA_STAGED_ROWS rows a warp
  // (kKdaStagedRows) and K3C_KDA_STAGED_MIN_BLOCKS blocks an SM
  // (kKdaStagedMinBlocks, .minnctapersm).
  const int64_t threads = kb.gpu() ? intFromEnv("K3C_KDA_TOKEN_THREADS", kKdaThreads) : 1;
  int64_t R = !kb.gpu() ? 1
              : staged  ? intFromEnv("K3C_KDA_STAGED_ROWS", kKdaStagedRows)
                        : intFromEnv("K3C_KDA_TOKEN_ROWS", 4);
  if (kb.gpu() && (threads < 32 || threads > 1024 || threads % 32))
    llvm::report_fatal_error("k3c: bad KDA token kernel: K3C_KDA_TOKEN_THREADS must be a multiple "
                             "of 32 in 32..1024, got " + llvm::Twine(threads),
                             /*gen_crash_diag=*/false);
  if (R < 1 || R > 16)
    llvm::report_fatal_error(llvm::Twine("k3c: bad KDA token kernel: ") +
                                 (staged ? "K3C_KDA_STAGED_ROWS" : "K3C_KDA_TOKEN_ROWS") +
                                 " must be 1..16, got " + llvm::Twine(R),
                             /*gen_crash_diag=*/false);
  const int64_t lanes = kb.gpu() ? 32 : 1, warps = kb.gpu() ? threads / 32 : 1;
  // The staged form's block covers at most the head's d_v rows (k3-tiny's
  // 32-row heads: 4 rows a warp, not 16 with three quarters clamped).
  if (staged)
    R = std::min(R, std::max<int64_t>(1, (dv + warps - 1) / warps));
  const int64_t rowsPerBlock = R * warps;
  const int64_t vw = tokenVecWidth(rule, kb, st);
  const int64_t per = (dk + lanes * vw - 1) / (lanes * vw); // vectors a lane holds
  const int64_t minBlocks = staged ? intFromEnv("K3C_KDA_STAGED_MIN_BLOCKS", kKdaStagedMinBlocks)
                                   : 0;
  if (staged && (minBlocks < 0 || minBlocks > 32))
    llvm::report_fatal_error("k3c: bad KDA token kernel: K3C_KDA_STAGED_MIN_BLOCKS must be "
                             "0..32, got " + llvm::Twine(minBlocks),
                             /*gen_crash_diag=*/false);
  // kda-out-norm-in-chunk: the gated output norm of a (sequence, head) by
  // the last of its blocks to finish. Each block, once its o rows are
  // stored, counts itself on the pair's counter (the rows released first:
  // a barrier and a GPU-scope fence before thread 0's atomic add, the same
  // order as the split-K tiles' partials); the block that counts last
  // (acquire: a fence after the add) normalizes the head's rows of every
  // token of the sequence, a warp a token, reading o by volatile loads
  // (past L1: the rows other blocks stored), with gatedNormHead, the norm
  // launch's own code (the same sums in the same order: bit-identical to
  // it), and resets the counter for the next launch.
  GatedRMSNormOp outNorm = ruleOutNorm(rule);
  const int64_t blocksPerHead = (dv + rowsPerBlock - 1) / rowsPerBlock;
  // The staged form's dynamic shared memory: its state rows, then (with the
  // output norm) the last-block flag.
  // (The state's dtype: f32, or bf16 with --kda-state-dtype=bf16: copied
  // and staged as stored, updated in f32, rounded where a token's update is
  // stored: the register form rounds its rows after every token as the
  // staged form's stores do, so the two stay bit-identical.)
  Type stElt = cast<MemRefType>(S.getType()).getElementType();
  const int64_t stBytes = stElt.getIntOrFloatBitWidth() / 8;
  const int64_t stagedBytes = staged ? rowsPerBlock * per * lanes * vw * stBytes : 0;
  auto outNormLastBlock = [&](ThreadBlock &tb, Value n, Value h, Value vbase, Value start,
                              Value len) {
    Value gate = st.get(outNorm.getGate()), wn = st.get(outNorm.getWeight()),
          yn = st.get(outNorm.getResult());
    Value counts = st.scratch[outNorm.getOperation()][0];
    const double eps = outNorm.getEps().convertToDouble();
    Value flag = staged ? kb.dynamicShared(tb, stagedBytes, {1}, b.getI32Type())
                        : kb.shared(tb, {1}, b.getI32Type());
    kb.barrier(tb);
    kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
      if (kb.gpu())
        NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
      Value old = memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi, kb.i32Const(1),
                                              counts, ValueRange{n, h})
                      .getResult();
      if (kb.gpu())
        NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
      kb.store(old, flag, {kb.idx(0)});
    });
    kb.barrier(tb);
    Value last = kb.ieq(kb.toIndex(kb.load(flag, {kb.idx(0)})), kb.idx(blocksPerHead - 1));
    kb.ifThen(last, [&] {
      const int64_t nvw = perHeadVw(kb, dv, {o, gate, wn, yn});
      SmallVector<Value> ncols = laneCols(kb, tb, dv, nvw);
      kb.loopStep(tb.warp, len, kb.idx(tb.warps), [&](Value t) {
        Value row = kb.add(start, t);
        gatedNormHead(kb, tb, o, gate, wn, yn, row, row, vbase, ncols, nvw, eps,
                      /*volatileX=*/kb.gpu());
      });
      kb.ifThen(kb.ieq(tb.tid, kb.idx(0)),
                [&] { kb.store(kb.i32Const(0), counts, {n, h}); });
    });
  };
  kb.blocks({kb.dim(lens, 0), kb.idx(H), kb.idx(blocksPerHead)},
            kb.gpu() ? 32 * warps : kKdaThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value n = bid[0], h = bid[1];
    if (minBlocks)
      kb.minBlocksPerSm(tb, minBlocks);
    Value j0 = kb.add(kb.mul(bid[2], rowsPerBlock), kb.mul(tb.warp, R));
    Value kbase = kb.mul(h, dk), vbase = kb.mul(h, dv);
    // Lane vector p covers columns c_p .. c_p + vw (valid when c_p < dk).
    // Clamped only where the tiling leaves a remainder (K3's 128 x 128
    // heads have none: a row or column is then its base plus a constant,
    // addresses ptxas folds into immediate offsets instead of holding
    // 64-bit pointers for each row over the kernel).
    Value yes = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
    SmallVector<Value> cols, colOk;
    for (int64_t p = 0; p < per; ++p) {
      Value c = kb.mul(kb.add(tb.lane, kb.idx(p * lanes)), vw);
      bool exact = dk % (lanes * vw) == 0;
      colOk.push_back(exact ? yes : kb.ult(c, kb.idx(dk)));
      cols.push_back(exact ? c : kb.minu(c, kb.idx(dk - vw)));
    }
    SmallVector<Value> rows, rowOk;
    for (int64_t rr = 0; rr < R; ++rr) {
      Value j = kb.add(j0, kb.idx(rr));
      bool exact = dv % rowsPerBlock == 0;
      rowOk.push_back(exact ? yes : kb.ult(j, kb.idx(dv)));
      rows.push_back(exact ? j : kb.minu(j, kb.idx(dv - 1)));
    }
    // The state rows first: their loads depend on the block's indices only,
    // so they are in flight while the warp sums the earlier sequences'
    // lengths (up to N / 32 dependent loads at large batches).
    SmallVector<Value> init;
    Value Ssm, wrow;
    if (staged) {
      // [rows of the block, dk] in the state's dtype; the warp's rows from
      // wrow. Clamped duplicate rows and columns copy in-bounds bytes and are
      // never stored.
      Ssm = kb.dynamicShared(tb, 0, {rowsPerBlock, per * lanes * vw}, stElt);
      wrow = kb.mul(tb.warp, R);
      auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
      SmallVector<Value> tokens;
      for (int64_t rr = 0; rr < R; ++rr)
        for (int64_t p = 0; p < per; ++p)
          tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
              b, loc, tokenType, Ssm,
              ValueRange{kb.add(wrow, kb.idx(rr)), kb.mul(kb.add(tb.lane, kb.idx(p * lanes)), vw)},
              S, ValueRange{n, h, rows[rr], cols[p]}, b.getIndexAttr(vw), Value(),
              vw * stBytes == 16 ? b.getUnitAttr() : UnitAttr()));
      nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens);
    } else {
      for (int64_t rr = 0; rr < R; ++rr)
        for (int64_t p = 0; p < per; ++p)
          for (Value x : kb.loadVec(S, {n, h, rows[rr], cols[p]}, vw))
            init.push_back(x);
    }
    Value start = kb.seqOffset(tb, lens, n), len = kb.seqLen(lens, n);
    if (staged)
      NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
    // Shared slot of the lane's vector p of its warp's row rr.
    auto slot = [&](int64_t rr, int64_t p) -> SmallVector<Value> {
      return {kb.add(wrow, kb.idx(rr)), kb.mul(kb.add(tb.lane, kb.idx(p * lanes)), vw)};
    };
    SmallVector<Value> fin = kb.loop(kb.idx(0), len, init, [&](Value t, ValueRange in) {
      Value row = kb.add(start, t);
      SmallVector<Value> s(in), gv, kv, qv, vv;
      for (int64_t p = 0; p < per; ++p) {
        // Columns past dk (clamped duplicates) count as zero.
        auto masked = [&](SmallVector<Value> xs) {
          for (Value &x : xs)
            x = kb.select(colOk[p], x, kb.f32(0.0));
          return xs;
        };
        {
          // The gate formed on load (kdaGateOnLoad): exp(A_log) once a head.
          Value col0 = kb.add(kbase, cols[p]);
          Value a = gs.gate ? gs.headA(kb, col0) : Value();
          int64_t e = 0;
          for (Value x : kb.loadVec(g, {row, col0}, vw))
            gv.push_back(kb.exp(gs.at(kb, x, kb.add(col0, kb.idx(e++)), a)));
        }
        for (Value x : masked(kb.loadVec(k, {row, kb.add(kbase, cols[p])}, vw)))
          kv.push_back(x);
        for (Value x : masked(kb.loadVec(q, {row, kb.add(kbase, cols[p])}, vw)))
          qv.push_back(x);
      }
      // Normalized on load (kdaNormOnLoad): the head's sum of squares over
      // the lanes' (zero-masked) columns.
      auto normalize = [&](L2NormOp norm, Value inv, SmallVector<Value> &xs) {
        if (!norm)
          return;
        if (inv) { // a split norm: its inverse norm, from the convolution's store
          xs = l2Apply(kb, kb.loadF32(inv, {row, h}), l2NormConstants(kb, norm).second, xs);
          return;
        }
        Value ss = kb.f32(0.0);
        for (Value x : xs)
          ss = kb.fadd(ss, kb.fmul(x, x));
        xs = l2Scaled(kb, l2NormConstants(kb, norm), kb.warpSum(tb, ss), xs);
      };
      normalize(ks.norm, ks.inv, kv);
      normalize(qs.norm, qs.inv, qv);
      // Every input of the token before any store (the o stores could
      // alias v for the compiler and would serialize its loads).
      Value bt = kb.sigmoid(kb.loadF32(beta, {row, h}));
      for (int64_t rr = 0; rr < R; ++rr)
        vv.push_back(kb.loadF32(v, {row, kb.add(vbase, rows[rr])}));
      const int64_t m = per * vw;
      SmallVector<Value> outs;
      for (int64_t rr = 0; rr < R; ++rr) {
        SmallVector<Value> sr;
        if (staged) {
          for (int64_t p = 0; p < per; ++p)
            for (Value x : kb.loadVec(Ssm, slot(rr, p), vw))
              sr.push_back(x);
        } else {
          sr.assign(s.begin() + rr * m, s.begin() + (rr + 1) * m);
        }
        Value pred = kb.f32(0.0);
        for (int64_t i = 0; i < m; ++i) {
          sr[i] = kb.fmul(sr[i], gv[i]);
          pred = kb.fadd(pred, kb.fmul(sr[i], kv[i]));
        }
        pred = kb.warpSum(tb, pred);
        Value u = kb.fmul(bt, kb.fsub(vv[rr], pred));
        Value out = kb.f32(0.0);
        for (int64_t i = 0; i < m; ++i) {
          sr[i] = kb.fadd(sr[i], kb.fmul(u, kv[i]));
          out = kb.fadd(out, kb.fmul(sr[i], qv[i]));
        }
        outs.push_back(kb.warpSum(tb, out));
        if (staged) {
          for (int64_t p = 0; p < per; ++p)
            kb.storeVec(ArrayRef<Value>(sr).slice(p * vw, vw), Ssm, slot(rr, p));
        } else {
          if (!stElt.isF32())
            for (Value &x : sr)
              x = kb.toF32(kb.fromF32(x, stElt));
          std::copy(sr.begin(), sr.end(), s.begin() + rr * m);
        }
      }
      for (int64_t rr = 0; rr < R; ++rr)
        kb.ifThen(kb.andi(kb.ieq(tb.lane, kb.idx(0)), rowOk[rr]),
                  [&] { kb.storeF32(outs[rr], o, {row, kb.add(vbase, rows[rr])}); });
      return s;
    });
    // With the output norm, the block counts itself before it stores its
    // state rows: the GPU-scope fence ahead of the count then waits for the
    // o stores only, not for the state's (64 KB a head) behind them. (After
    // the state stores, the fence made the token kernel 12-13 % slower at
    // 64 and 128 sequences on an H100, docs/perf.md, session 42.)
    if (outNorm)
      outNormLastBlock(tb, n, h, vbase, start, len);
    for (int64_t rr = 0; rr < R; ++rr)
      for (int64_t p = 0; p < per; ++p)
        kb.ifThen(kb.andi(rowOk[rr], colOk[p]), [&] {
          SmallVector<Value> vals = staged ? kb.loadVec(Ssm, slot(rr, p), vw)
                                           : SmallVector<Value>(ArrayRef<Value>(fin).slice(
                                                 (rr * per + p) * vw, vw));
          kb.storeVec(vals, S, {n, h, rows[rr], cols[p]});
        });
  }, staged ? stagedBytes + (outNorm ? 16 : 0) : 0,
     std::string(staged ? "kda_tokens_staged" : "kda_tokens") + (outNorm ? "_onorm" : ""));
}

/// The token recurrence's launch: the staged form (kdaTokensKernel) from
/// K3C_KDA_STAGED_FROM sequences (kKdaStagedFrom; 0 never) where it applies
/// (GPU, fp32 or bf16 state), the register form below that (a host-side
/// branch on the batch: few sequences have few blocks, and the register form
/// splits a head's rows over more of them).
static void kdaTokens(DeltaRuleOp rule, KernelBuilder &kb, LowerState &st) {
  const int64_t from = kb.gpu() ? intFromEnv("K3C_KDA_STAGED_FROM", kKdaStagedFrom) : 0;
  if (from < 0)
    llvm::report_fatal_error("k3c: bad KDA token kernel: K3C_KDA_STAGED_FROM must be >= 0, got " +
                                 llvm::Twine(from),
                             /*gen_crash_diag=*/false);
  auto stateType = cast<MemRefType>(st.get(rule.getState()).getType());
  Type stElt = stateType.getElementType();
  // (cp.async copies 4, 8 or 16 bytes: a bf16 state needs 2+ columns a copy.)
  bool stageable = kb.gpu() && from > 0 &&
                   (stElt.isF32() || (stElt.isBF16() && tokenVecWidth(rule, kb, st) >= 2));
  if (!stageable) {
    kdaTokensKernel(rule, kb, st, /*staged=*/false);
    return;
  }
  Value N = kb.dim(st.get(rule.getSeqLens()), 0);
  kb.ifThenElse(kb.ult(N, kb.idx(from)), [&] { kdaTokensKernel(rule, kb, st, false); },
                [&] { kdaTokensKernel(rule, kb, st, true); });
}

/// The delta rule: the token recurrence for decode-sized batches (at most
/// two tokens a sequence) and rules without a chunk size, else the chunked
/// form (a host-side branch on the token count).
static void lowerDeltaRule(DeltaRuleOp rule, KernelBuilder &kb, LowerState &st) {
  int64_t C = kdaChunk(rule);
  if (!C) {
    kdaTokens(rule, kb, st);
    return;
  }
  ArrayRef<Value> sc = st.scratch[rule.getOperation()];
  assert(sc.size() == kKdaScratchCount && "kdaScratchNeeds' buffers");
  Value T = kb.dim(qkSource(rule.getQ(), st).buf, 0), N = kb.dim(st.get(rule.getSeqLens()), 0);
  // Tensor cores serve the bf16 build; the f32 build keeps the exact path
  // (K3C_KDA_MMA=0: the bf16 build too, for comparisons).
  bool mma = kb.gpu() && kb.info().mmaSync && C == 16 && intFromEnv("K3C_KDA_MMA", 1) &&
             cast<ShapedType>(rule.getV().getType()).getElementType().isBF16() &&
             rule.getKeyDim() % 8 == 0 && rule.getValueDim() % 16 == 0;
  kb.ifThenElse(
      kb.ule(T, kb.mul(N, 2)), [&] { kdaTokens(rule, kb, st); },
      [&] {
        // K3C_KDA_FUSED=1: one launch, each block running its chunks' prep
        // itself (kdaRecurrenceMma's fused form).
        // (It reads q and k as stored: not with kda-norm-in-chunk.)
        if (mma && intFromEnv("K3C_KDA_FUSED", 0) && !kdaNormOnLoad(rule.getQ()) &&
            !kdaNormOnLoad(rule.getK()) && !kdaGateOnLoad(rule.getG())) {
          kdaRecurrenceMma(rule, kb, st, sc, /*fused=*/true);
        } else {
          kdaPrep(rule, kb, st, C, sc, mma && kdaPrepMma(rule));
          if (mma)
            kdaRecurrenceMma(rule, kb, st, sc);
          else
            kdaRecurrenceFma(rule, kb, st, C, sc);
        }
        // kda-out-norm-in-chunk: the gated output norm's own launch after
        // the chunked form (the token form normalizes in its last blocks).
        if (GatedRMSNormOp norm = ruleOutNorm(rule))
          lowerGatedNorm(norm, kb, st);
      });
}

/// The KDA gate of one value (spec: -exp(A) softplus(z) or the bounded
/// form lower_bound * sigmoid(exp(A) z)), a = exp(A_log) of its head and zz
/// = z + dt_bias: one definition for the gate's launch and its linear's
/// store map (bit-identical).
/// K3C_GATE_FAST=1 (GPU, bf16 build: bf16 logits; off by default): the
/// sigmoid's division approximate (rcp.approx, within 2 ulp, as the bf16
/// convolutions' since session 17) instead of the IEEE reciprocal's dozen
/// instructions and slow-path branch, in the gate's launch and in its
/// linear's store map alike (the two stay bit-identical to each other).
static Value kdaGateValue(KernelBuilder &kb, KdaGateOp gate, Value a, Value zz) {
  const bool fastDiv = kb.fastDiv;
  if (kb.gpu() && cast<ShapedType>(gate.getLogits().getType()).getElementType().isBF16() &&
      KernelBuilder::switchFromEnv("K3C_GATE_FAST"))
    kb.fastDiv = true;
  Value r = gate.getGateForm() == GateForm::bounded_sigmoid
                ? kb.fmul(kb.f32(gate.getLowerBound()->convertToDouble()),
                          kb.sigmoid(kb.fmul(a, zz)))
                : kb.fneg(kb.fmul(a, kb.softplus(zz)));
  kb.fastDiv = fastDiv;
  return r;
}

/// The gate's own launch: a thread per `gw` adjacent columns of one head.
static void lowerKdaGate(KdaGateOp gate, KernelBuilder &kb, LowerState &st) {
  Value z = st.get(gate.getLogits()), alog = st.get(gate.getALog()),
        dt = st.get(gate.getDtBias()), y = st.get(gate.getResult());
  int64_t width = cast<MemRefType>(z.getType()).getDimSize(1);
  int64_t d = width / gate.getNumHeads();
  // 16-byte loads and stores on the GPU; the host: an iteration per
  // element.
  int64_t gw = std::min({kb.vecWidth(z, width), kb.vecWidth(dt, width), kb.vecWidth(y, width)});
  while (gw > 1 && d % gw)
    gw /= 2;
  if (gw == 1) {
    kb.parallel({kb.dim(z, 0), kb.idx(width)}, [&](ValueRange iv) {
      Value a = kdaGateHeadA(kb, alog, iv[1], d);
      Value zz = kb.fadd(kb.loadF32(z, iv), kb.loadF32(dt, {iv[1]}));
      kb.storeF32(kdaGateValue(kb, gate, a, zz), y, iv);
    });
    return;
  }
  Value T = kb.dim(z, 0);
  const int64_t perRow = width / gw, threads = kConvThreads;
  Value total = kb.mul(T, kb.idx(perRow));
  kb.blocks({kb.ceilDiv(total, threads)}, threads, [&](ValueRange bid, ThreadBlock &tb) {
    Value i = kb.add(kb.mul(bid[0], threads), tb.tid);
    kb.ifThen(kb.ult(i, total), [&] {
      Value row = kb.div(i, perRow), col = kb.mul(kb.rem(i, perRow), gw);
      Value a = kdaGateHeadA(kb, alog, col, d);
      SmallVector<Value> zv = kb.loadVec(z, {row, col}, gw), dv = kb.loadVec(dt, {col}, gw), out;
      for (int64_t e = 0; e < gw; ++e)
        out.push_back(kdaGateValue(kb, gate, a, kb.fadd(zv[e], dv[e])));
      kb.storeVec(out, y, {row, col});
    });
  }, 0, "kda_gate");
}

/// The decode merge of a short convolution (GPU, K3C_CONV_DECODE_MERGE=1,
/// opt-in until measured): `conv` and the short convolutions right after it
/// in its kernel body that thread its state (each one's conv_state the
/// previous one's new state: K/Q/V's windows in one [N, W - 1, 3C] tensor)
/// over the same seq_lens, with the same types and thread width and
/// disjoint state columns, at most 4. Their decode launches become one
/// (`short_conv_decode_m<n>`): launch overhead and a grid's ramp once a
/// KDA layer instead of three times (full K3: ~70 KDA layers a decode step).
/// The later members are marked fusedAway; `conv`'s lowering emits their
/// prefill and window launches too, after its own, in their order.
static SmallVector<ShortConvOp> decodeConvMerge(ShortConvOp conv, KernelBuilder &kb,
                                                LowerState &st,
                                                function_ref<int64_t(ShortConvOp)> cwOf) {
  SmallVector<ShortConvOp> g{conv};
  if (!kb.gpu() || !intFromEnv("K3C_CONV_DECODE_MERGE", 0))
    return g;
  auto channels = [](ShortConvOp c) {
    return cast<ShapedType>(c.getInput().getType()).getDimSize(1);
  };
  auto disjoint = [&](ShortConvOp c) {
    const int64_t a0 = c.getStateOffset(), a1 = a0 + channels(c);
    return llvm::all_of(g, [&](ShortConvOp o) {
      const int64_t b0 = o.getStateOffset(), b1 = b0 + channels(o);
      return a1 <= b0 || b1 <= a0;
    });
  };
  for (Operation *n = conv->getNextNode(); n && g.size() < 4; n = n->getNextNode()) {
    auto c = dyn_cast<ShortConvOp>(n);
    // (the driver maps a result to its tied operand's buffer as it reaches
    // the op: a member's new state, which the next member reads, here)
    if (c && c.getConvState() == g.back().getNewConvState())
      st.buffer[c.getNewConvState()] = st.get(c.getConvState());
    if (!c || c.getConvState() != g.back().getNewConvState() ||
        c.getSeqLens() != conv.getSeqLens() ||
        c.getInput().getType() != conv.getInput().getType() ||
        c.getWeight().getType() != conv.getWeight().getType() ||
        c.getResult().getType() != conv.getResult().getType() || cwOf(c) != cwOf(conv) ||
        !disjoint(c))
      break;
    g.push_back(c);
  }
  for (size_t i = 1; i < g.size(); ++i)
    st.fusedAway.insert(g[i]);
  return g;
}

std::optional<LogicalResult> lowerKdaFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  if (auto conv = dyn_cast<ShortConvOp>(op)) {
    // Launch 1: a block per (kConvTokens-token tile of a sequence, channel
    // block), a thread per `cw` adjacent channels (16-byte loads on the GPU)
    // sliding the causal window over the tile's tokens in registers (the W-1
    // inputs before the tile from the input, or from the state before the
    // sequence's first token). Tokens go kConvUnroll at a time: their loads
    // are issued together, then the window slides over them (a tile is a
    // few dependent load latencies, not kConvTokens).
    // (A later member of a decode merge: lowered with its first.)
    if (st.fusedAway.contains(op))
      return success();
    // At most kConvChannels channels a thread: wider vectors with 8 tokens in
    // flight cost registers (8 x 8 channels: 166 a thread, one block an SM).
    auto cwOf = [&](ShortConvOp c) {
      Value x = st.get(c.getInput()), y = st.get(c.getResult()), s = st.get(c.getConvState());
      const int64_t ch = cast<MemRefType>(x.getType()).getDimSize(1);
      int64_t v = std::min({kb.vecWidth(x, ch), kb.vecWidth(y, ch),
                            kb.vecWidth(s, cast<MemRefType>(s.getType()).getDimSize(2)),
                            intFromEnv("K3C_CONV_CHANNELS", kConvChannels)});
      while (v > 1 && (c.getStateOffset() % v || ch % v))
        v /= 2;
      return v;
    };
    SmallVector<ShortConvOp> merged = decodeConvMerge(conv, kb, st, cwOf);
    Value lens = st.get(conv.getSeqLens());
    const int64_t W = cast<MemRefType>(st.get(conv.getWeight()).getType()).getDimSize(2);
    const int64_t channels = cast<MemRefType>(st.get(conv.getInput()).getType()).getDimSize(1);
    const int64_t cw = cwOf(conv);
    Value Wm1 = kb.idx(W - 1);
    // One convolution's operands and the code of its store, outputs and taps
    // (every member of a merge has its own; the shapes above are shared).
    struct ConvCtx {
      Value x, w, state, y, off;
      std::function<void(ThreadBlock &, ArrayRef<Value>, Value, Value, Value)> emit;
      std::function<Value(ArrayRef<Value>, ArrayRef<Value>, Value)> convOut;
      std::function<SmallVector<Value>(Value)> taps;
    };
    auto makeCtx = [&](ShortConvOp conv) {
      Value x = st.get(conv.getInput()), w = st.get(conv.getWeight()),
            state = st.get(conv.getConvState()), y = st.get(conv.getResult());
      // K3C_CONV_L2NORM=1 (GPU): when the convolution's only user is an L2 norm
      // of heads of 32 * cw channels (a warp's lanes hold a token's head, as in
      // the norm's own kernel), the norm is done in the convolution's store:
      // the silu outputs rounded to y's type as the store and the norm's load
      // would, the squares summed in the same order (a lane's channels, then
      // the warp's butterfly), the normalized f32 rows stored; the norm's
      // launch and the bf16 round trip of its input go away (bit-identical;
      // the default, K3C_CONV_L2NORM=0 keeps the norm's launch).
      // Whether a per-head op of `user` (head_dim d) can run in this kernel's
      // store: same kernel, a warp's lanes x cw channels are one head of
      // every block's channel span, and `vecOf` allow cw-wide vectors.
      const bool storeFusion = kb.gpu() && intFromEnv("K3C_CONV_L2NORM", 1);
      auto inStore = [&, conv](Operation *user, int64_t d, ArrayRef<Value> vecOf) {
        return user->getBlock() == conv->getBlock() && d == 32 * cw &&
               channels % (kConvThreads * cw) == 0 && (kConvThreads * cw) % d == 0 &&
               cw == perHeadVw(kb, d, vecOf);
      };
      L2NormOp norm;
      if (storeFusion && conv.getResult().hasOneUse())
        if (auto l2 = dyn_cast<L2NormOp>(*conv.getResult().getUsers().begin()))
          if (inStore(l2, l2.getHeadDim(), {st.get(l2.getInput()), st.get(l2.getResult())}))
            norm = l2;
      if (norm)
        st.fusedAway.insert(norm);
      Value ny = norm ? st.get(norm.getResult()) : Value();
      // The same for a split norm's reduction (k3-split-l2norms: a
      // k3.l2norm_inv of the convolution's rows in this kernel, the scaling in
      // the delta rule's): y is stored as it is, and one lane of the warp
      // holding a token's head stores the head's inverse norm from the same
      // sum of squares (so the rule's x * inv * scale are the fused norm's
      // bits). K3C_CONV_L2NORM=0 gives the reduction its own launch.
      L2NormInvOp invOp;
      if (!norm && storeFusion)
        for (Operation *u : conv.getResult().getUsers())
          if (auto r = dyn_cast<L2NormInvOp>(u))
            if (inStore(r, r.getHeadDim(), {y}))
              invOp = r;
      if (invOp)
        st.fusedAway.insert(invOp);
      Value invBuf = invOp ? st.get(invOp.getResult()) : Value();
      // One token's cw outputs at (row, c): stored into y, or normalized into
      // the norm's result (every lane of the warp calls it: the sum is a
      // shuffle); `ok`, when given, guards the store.
      auto emit = [&kb, y, norm, ny, invOp, invBuf](ThreadBlock &tb, ArrayRef<Value> out, Value row,
                                                     Value c, Value ok) mutable {
        SmallVector<Value> res(out);
        Value dst = y;
        if (norm) {
          Type yElt = cast<MemRefType>(y.getType()).getElementType();
          Value ss = kb.f32(0.0);
          for (Value &v : res) {
            v = kb.round(v, yElt); // as y's store and the norm's load would
            ss = kb.fadd(ss, kb.fmul(v, v));
          }
          res = l2Scaled(kb, l2NormConstants(kb, norm), kb.warpSum(tb, ss), res);
          dst = ny;
        } else if (invOp) {
          Type yElt = cast<MemRefType>(y.getType()).getElementType();
          Value ss = kb.f32(0.0);
          for (Value v : res) {
            Value r = kb.round(v, yElt); // as y's store and the scaling's load
            ss = kb.fadd(ss, kb.fmul(r, r));
          }
          Value inv = l2Inv(kb, kb.f32(invOp.getEps().convertToDouble()), kb.warpSum(tb, ss));
          Value lane0 = kb.ieq(tb.lane, kb.idx(0));
          kb.ifThen(ok ? kb.andi(ok, lane0) : lane0, [&] {
            kb.storeF32(inv, invBuf, {row, kb.div(c, kb.idx(invOp.getHeadDim()))});
          });
        }
        if (ok)
          kb.ifThen(ok, [&] { kb.storeVec(res, dst, {row, c}); });
        else
          kb.storeVec(res, dst, {row, c});
      };
      // One output: silu(tap W-1 * x + sum_j tap j * window j), in that order.
      // The bf16 build on the GPU (K3C_CONV_FAST, default 1) lets the products
      // fuse into their adds (fma.rn: one rounding where mul.rn + add.rn have
      // two) and the sigmoid's division be approximate (rcp.approx, within 2
      // ulp, where rcp.rn is a dozen instructions with a slow-path branch):
      // ~40 -> ~30 instructions an output on the slice's three convolutions,
      // the family 1.43 -> 1.27 ms at 8192 tokens with the unroll at 4 and
      // native bf16 conversions (docs/perf.md, session 17; logits within 3e-3
      // of the exact form's). The f32 build and the host keep the exact form.
      const bool fastOut = kb.gpu() && intFromEnv("K3C_CONV_FAST", 1) &&
                           cast<MemRefType>(y.getType()).getElementType().isBF16();
      auto convOut = [&kb, fastOut, W](ArrayRef<Value> taps, ArrayRef<Value> window, Value x) {
        const bool contract = kb.contract, fastDiv = kb.fastDiv;
        kb.contract = kb.contract || fastOut;
        kb.fastDiv = kb.fastDiv || fastOut;
        // With the fast form the fused products are explicit (v = fma(t_j,
        // w_j, v) onto t_{W-1} x): left to NVPTX's contraction, which of an
        // add's two products fused into it followed the DAG's shape, and the
        // tap loads' form (K3C_CONV_TAP_VEC) alone changed the roundings (the
        // slice's greedy tokens differed in one of 128 sequences, session 60).
        Value v = kb.fmul(taps[W - 1], x);
        for (int64_t j = 0; j < W - 1; ++j)
          v = fastOut ? LLVM::FMAOp::create(kb.b, kb.loc, taps[j], window[j], v).getResult()
                      : kb.fadd(v, kb.fmul(taps[j], window[j]));
        Value out = kb.silu(v);
        kb.contract = contract;
        kb.fastDiv = fastDiv;
        return out;
      };
      Value off = kb.idx(conv.getStateOffset());
      // A channel's W taps (contiguous: w is [channels, 1, W]) in vector loads
      // on the GPU: the decode kernel reads them once a channel group and
      // token, and as W scalar loads with lanes a channel group (64 bytes)
      // apart each was a warp instruction over 16 cache lines (the L1's
      // wavefronts, not DRAM, bounded the slice's three decode convolutions at
      // 20 us against ~8 us of bytes at 128 sequences). The same values:
      // bit-identical. K3C_CONV_TAP_VEC=0 keeps the scalar loads.
      const int64_t tapVec =
          KernelBuilder::switchFromEnv("K3C_CONV_TAP_VEC", true) ? kb.vecWidth(w, W) : 1;
      auto taps = [&kb, w, W, tapVec](Value ch) {
        SmallVector<Value> t;
        for (int64_t j = 0; j < W; j += tapVec)
          t.append(kb.loadVec(w, {ch, kb.idx(0), kb.idx(j)}, tapVec));
        return t;
      };
      return ConvCtx{x, w, state, y, off, emit, convOut, taps};
    };
    const ConvCtx first = makeCtx(conv);
    Value x = first.x; // (the shapes and the token count the members share)
    const int64_t TB = kConvTokens,
                  U = kb.gpu() ? std::max<int64_t>(1, intFromEnv("K3C_CONV_UNROLL", kConvUnroll)) : 1;
    Value slots = kb.add(kb.ceilDiv(kb.dim(x, 0), TB), kb.dim(lens, 0));
    const int64_t span = kb.gpu() ? kConvThreads * cw : channels; // channels a block
    int64_t cBlocks = (channels + span - 1) / span;
    // Launches of at most one token a sequence on average (decode) take the
    // same kernel without the unroll (`short_conv_decode`: tiles of one or
    // two tokens, 8 tokens' registers and loads would be idle and cap the
    // blocks an SM holds); same sums, same results. K3C_CONV_DECODE=0: one
    // kernel.
    //
    // The decode kernel's blocks take a channel span chosen at launch from
    // the sequence count: enough channel blocks that the slots give every
    // SM about two blocks (K3C_CONV_DECODE_BLOCKS_PER_SM), each thread then
    // looping over its span's channel groups. One 256-channel-group block per
    // (slot, 1024 channels) at 128 sequences was 1584 blocks of 104
    // registers, six waves of a few dependent load latencies each: 43 us a
    // convolution on the H200 for 13 MB of window. Same sums, same results.
    // `ms`: the convolutions of the launch, one, or a decode merge whose
    // members' blocks follow each other along the grid's second dimension
    // (each member's channel blocks, then the next's).
    auto conv1 = [&](int64_t U, const std::string &name, bool spread,
                     ArrayRef<const ConvCtx *> ms) {
      Value spanV = kb.idx(span), cBlocksV = kb.idx(cBlocks);
      const int64_t perSm = intFromEnv("K3C_CONV_DECODE_BLOCKS_PER_SM", 2);
      if (spread && perSm > 0) {
        Value n = kb.dim(lens, 0);
        n = kb.select(kb.ieq(n, kb.idx(0)), kb.idx(1), n);
        Value want = kb.div(kb.idx(perSm * kb.info().smCount), n);
        want = kb.select(kb.ieq(want, kb.idx(0)), kb.idx(1), want);
        want = kb.minu(want, kb.idx(cBlocks));
        // Whole thread sweeps (span multiples of threads x cw channels).
        auto ceilDivV = [&](Value a, Value d) { return kb.div(kb.add(a, kb.sub(d, kb.idx(1))), d); };
        spanV = kb.mul(kb.ceilDiv(ceilDivV(kb.idx(channels), want), span), span);
        cBlocksV = ceilDivV(kb.idx(channels), spanV);
      }
      // The prefill kernel on the GPU (bf16 x, whole channel blocks): the
      // tile's TB input rows of the block's channels go to dynamic shared
      // memory by cp.async at once (16 16-byte copies a thread, zero-filled
      // past the sequence), then the window slides over them from there:
      // the bytes in flight are no longer bounded by the registers a
      // thread's unrolled loads hold (the register form read at ~45 % of
      // DRAM bandwidth, 2 blocks an SM). The same values in the same order
      // (bit-identical): the slice's conv/gate family 1.250 -> 1.105 ms at
      // 8192 tokens on the H200 (docs/perf.md, session 34). No bound on
      // the blocks an SM (119-124 registers, two blocks): held to three (80
      // registers) the convolutions spill 88-188 bytes and the family took
      // the same time (1.08-1.11 ms either way).
      // K3C_CONV_STAGE=0 keeps the register form.
      Type xElt = cast<MemRefType>(x.getType()).getElementType();
      const int64_t xBytes = xElt.getIntOrFloatBitWidth() / 8;
      const bool staged = !spread && kb.gpu() && U > 1 && intFromEnv("K3C_CONV_STAGE", 1) &&
                          xElt.isBF16() && channels % span == 0 && (span * xBytes) % 16 == 0;
      const int64_t stageBytes = staged ? TB * span * xBytes : 0;
      const int64_t nm = static_cast<int64_t>(ms.size());
      Value gridY = nm > 1 ? kb.mul(cBlocksV, kb.idx(nm)) : cBlocksV;
      kb.blocks({slots, gridY}, kConvThreads, [&](ValueRange bid, ThreadBlock &tb) {
        // One member's blocks: its channel block cb of the slot bid[0].
        auto run = [&](const ConvCtx &m, Value cb) {
          Value x = m.x, state = m.state, off = m.off;
          const auto &emit = m.emit;
          const auto &convOut = m.convOut;
          const auto &taps = m.taps;
          ChunkSlot cs = findChunk(kb, tb, lens, bid[0], TB);
          kb.ifThen(cs.valid, [&] {
            Value c0 = kb.mul(cb, spanV);
            Value cEnd = kb.minu(kb.idx(channels), kb.add(c0, spanV));
            Value stage;
            if (staged) {
              stage = kb.dynamicShared(tb, 0, {TB, span}, xElt);
              auto tokenType = nvgpu::DeviceAsyncTokenType::get(kb.b.getContext());
              const int64_t epc = 16 / xBytes, perRow = span / epc, total = TB * perRow;
              Value rowsIn = kb.minu(kb.idx(TB), kb.sub(cs.len, cs.t0));
              SmallVector<Value> toks;
              for (int64_t i = 0; i * kConvThreads < total; ++i) {
                Value lin = kb.add(tb.tid, kb.idx(i * kConvThreads));
                Value r = kb.div(lin, kb.idx(perRow)),
                      ch = kb.mul(kb.rem(lin, kb.idx(perRow)), epc);
                Value ok = kb.ult(r, rowsIn);
                Value src = kb.select(ok, kb.add(kb.add(cs.start, cs.t0), r), cs.start);
                toks.push_back(nvgpu::DeviceAsyncCopyOp::create(
                    kb.b, kb.loc, tokenType, stage, ValueRange{r, ch}, x,
                    ValueRange{src, kb.add(c0, ch)}, kb.b.getIndexAttr(epc),
                    kb.select(ok, kb.idx(epc), kb.idx(0)), kb.b.getUnitAttr()));
              }
              nvgpu::DeviceAsyncCreateGroupOp::create(kb.b, kb.loc, tokenType, toks);
            }
            // The window's inputs: x[row, c] (row = start + position), from
            // the staged tile where there is one.
            auto xLoad = [&](Value row, Value c) {
              if (!stage)
                return kb.loadVec(x, {row, c}, cw);
              return kb.loadVec(stage, {kb.sub(row, kb.add(cs.start, cs.t0)), kb.sub(c, c0)}, cw);
            };
            auto general = [&](Value c) {
              Value sc = kb.add(off, c);
              // Window slot i holds position t0 - (W-1) + i of the sequence:
              // from the state before the sequence's first token, else from x
              // (both addresses clamped in range, the value selected).
              SmallVector<Value> win; // [(W-1) * cw], slot-major
              for (int64_t i = 0; i < W - 1; ++i) {
                Value ps = kb.add(cs.t0, kb.idx(i)); // shifted by W-1
                Value fromState = kb.ult(ps, Wm1);
                Value sRow = kb.select(fromState, ps, kb.idx(0));
                Value xRow = kb.select(fromState, cs.start, kb.add(cs.start, kb.sub(ps, Wm1)));
                SmallVector<Value> sv = kb.loadVec(state, {cs.n, sRow, sc}, cw);
                SmallVector<Value> xv = kb.loadVec(x, {xRow, c}, cw);
                for (int64_t e = 0; e < cw; ++e)
                  win.push_back(kb.select(fromState, sv[e], xv[e]));
              }
              SmallVector<SmallVector<Value>> wt(cw);
              for (int64_t e = 0; e < cw; ++e)
                wt[e] = taps(kb.add(c, kb.idx(e)));
              Value tEnd = kb.minu(cs.len, kb.add(cs.t0, TB));
              Value last = kb.add(cs.start, kb.sub(tEnd, kb.idx(1)));
              if (stage) { // the tile's rows have landed (this thread's and the others')
                NVVM::CpAsyncWaitGroupOp::create(kb.b, kb.loc, kb.b.getI32IntegerAttr(0));
                kb.barrier(tb);
              }
              SmallVector<Value> fin = kb.loopStep(cs.t0, tEnd, kb.idx(U), win,
                                                   [&](Value t, ValueRange a) {
                SmallVector<SmallVector<Value>> in;
                SmallVector<Value> rows, ok;
                for (int64_t u = 0; u < U; ++u) {
                  Value tu = kb.add(t, kb.idx(u));
                  ok.push_back(kb.ult(tu, tEnd));
                  rows.push_back(kb.minu(kb.add(cs.start, tu), last));
                  in.push_back(xLoad(rows.back(), c));
                }
                SmallVector<Value> cur(a.begin(), a.end());
                for (int64_t u = 0; u < U; ++u) {
                  SmallVector<Value> out;
                  for (int64_t e = 0; e < cw; ++e) {
                    SmallVector<Value> window;
                    for (int64_t j = 0; j < W - 1; ++j)
                      window.push_back(cur[j * cw + e]);
                    out.push_back(convOut(wt[e], window, in[u][e]));
                  }
                  emit(tb, out, rows[u], c, ok[u]);
                  SmallVector<Value> next(cur.begin() + cw, cur.end());
                  next.append(in[u].begin(), in[u].end());
                  cur = next;
                }
                return cur;
              });
              // A sequence of one tile (every decode step's): this thread read
              // all of its channels' old window above, so it writes their new
              // window itself (rows as in launch 2, which skips the sequence).
              // One token at a time (U = 1) the window slid over the whole
              // sequence (t0 = 0, len <= TB) ends holding its last W - 1
              // inputs, old window first: the new window, stored from registers
              // with no second round of loads.
              if (U == 1 && spread) {
                kb.ifThen(kb.ule(cs.len, kb.idx(TB)), [&] {
                  for (int64_t r = 0; r < W - 1; ++r)
                    kb.storeVec(ArrayRef<Value>(fin).slice(r * cw, cw), state,
                                {cs.n, kb.idx(r), sc});
                });
                return;
              }
              kb.ifThen(kb.ule(cs.len, kb.idx(TB)), [&] {
                for (int64_t r = 0; r < W - 1; ++r) {
                  Value ci = kb.add(cs.len, kb.idx(r));
                  Value fromOld = kb.ult(ci, Wm1);
                  Value sRow = kb.select(fromOld, ci, kb.idx(0));
                  Value xRow = kb.select(fromOld, cs.start, kb.add(cs.start, kb.sub(ci, Wm1)));
                  SmallVector<Value> sv = kb.loadVec(state, {cs.n, sRow, sc}, cw);
                  SmallVector<Value> xv = kb.loadVec(x, {xRow, c}, cw);
                  SmallVector<Value> v;
                  for (int64_t e = 0; e < cw; ++e)
                    v.push_back(kb.select(fromOld, sv[e], xv[e]));
                  kb.storeVec(v, state, {cs.n, kb.idx(r), sc});
                }
              });
            };
            // The decode kernel's common case, a one-token sequence, in one
            // round of loads: its old window (state rows 0..W-2), its input and
            // the taps together, then y and the new window (old rows 1..W-2,
            // the input). The same products and sums, in the same order, as the
            // general path's one step (bit-identical).
            // K3C_CONV_DECODE_GROUPS=G (1..4; opt-in, 1 by default until
            // measured): a thread's channel groups c, c + stride, ... go G at
            // a time, every group's loads (old window, input) issued before
            // any group's stores: the state's stores could alias the next
            // group's loads for the compiler, so one group a round leaves a
            // thread's rounds serialized on the load latency (at 128
            // sequences each thread of the slice's convolutions sweeps 6
            // groups). Groups past the span load a valid group's bytes and
            // store nothing (uniform over a block: the span is whole thread
            // sweeps). The same sums: bit-identical.
            const int64_t G = spread && U == 1 ? intFromEnv("K3C_CONV_DECODE_GROUPS", 1) : 1;
            if (G < 1 || G > 4)
              llvm::report_fatal_error("k3c: K3C_CONV_DECODE_GROUPS must be 1..4, got " +
                                           llvm::Twine(G),
                                       /*gen_crash_diag=*/false);
            Value stride = kb.idx(tb.threads * cw);
            auto oneTokenGroups = [&](Value c) {
              SmallVector<Value> cg, ok;
              SmallVector<SmallVector<SmallVector<Value>>> sv(G);
              SmallVector<SmallVector<Value>> xv(G);
              for (int64_t g = 0; g < G; ++g) {
                Value cu = g ? kb.add(c, kb.mul(stride, kb.idx(g))) : c;
                ok.push_back(g ? kb.ult(cu, cEnd) : Value());
                cg.push_back(g ? kb.select(ok.back(), cu, c) : c);
                Value sc = kb.add(off, cg.back());
                for (int64_t i = 0; i < W - 1; ++i)
                  sv[g].push_back(kb.loadVec(state, {cs.n, kb.idx(i), sc}, cw));
                xv[g] = kb.loadVec(x, {cs.start, cg.back()}, cw);
              }
              for (int64_t g = 0; g < G; ++g) {
                SmallVector<Value> out;
                for (int64_t e = 0; e < cw; ++e) {
                  SmallVector<Value> tp = taps(kb.add(cg[g], kb.idx(e)));
                  SmallVector<Value> window;
                  for (int64_t j = 0; j < W - 1; ++j)
                    window.push_back(sv[g][j][e]);
                  out.push_back(convOut(tp, window, xv[g][e]));
                }
                emit(tb, out, cs.start, cg[g], ok[g]);
                auto storeWindow = [&, g] {
                  Value sc = kb.add(off, cg[g]);
                  for (int64_t r = 0; r < W - 1; ++r)
                    kb.storeVec(r + 1 < W - 1 ? sv[g][r + 1] : xv[g], state, {cs.n, kb.idx(r), sc});
                };
                if (ok[g])
                  kb.ifThen(ok[g], storeWindow);
                else
                  storeWindow();
              }
            };
            const bool decodeOne = spread && U == 1 && intFromEnv("K3C_CONV_DECODE_ONE", 1);
            Value cFirst = kb.add(c0, kb.mul(tb.tid, cw));
            if (decodeOne && G > 1)
              kb.ifThenElse(
                  kb.ieq(cs.len, kb.idx(1)),
                  [&] { kb.loopStep(cFirst, cEnd, kb.mul(stride, kb.idx(G)), oneTokenGroups); },
                  [&] { kb.loopStep(cFirst, cEnd, stride, general); });
            else
              kb.loopStep(cFirst, cEnd, stride, [&](Value c) {
                if (decodeOne)
                  kb.ifThenElse(kb.ieq(cs.len, kb.idx(1)), [&] { oneTokenGroups(c); },
                                [&] { general(c); });
                else
                  general(c);
              });
          });
        };
        if (nm == 1) {
          run(*ms[0], bid[1]);
          return;
        }
        Value k = kb.div(bid[1], cBlocksV), cb = kb.rem(bid[1], cBlocksV);
        std::function<void(int64_t)> pick = [&](int64_t i) {
          if (i + 1 == nm)
            return run(*ms[i], cb);
          kb.ifThenElse(kb.ieq(k, kb.idx(i)), [&] { run(*ms[i], cb); }, [&] { pick(i + 1); });
        };
        pick(0);
      }, stageBytes, staged ? name + "_staged" : name);
    };
    // A decode merge's members (decodeConvMerge) share the decode launch;
    // every other launch is a member's own, in the members' order.
    std::deque<ConvCtx> ctxs{first};
    for (size_t i = 1; i < merged.size(); ++i)
      ctxs.push_back(makeCtx(merged[i]));
    SmallVector<const ConvCtx *> all;
    for (const ConvCtx &m : ctxs)
      all.push_back(&m);
    auto prefill = [&] {
      for (const ConvCtx *m : all)
        conv1(U, "short_conv", false, {m});
    };
    if (kb.gpu() && U > 1 && intFromEnv("K3C_CONV_DECODE", 1))
      kb.ifThenElse(kb.ule(kb.dim(x, 0), kb.dim(lens, 0)),
                    [&] {
                      conv1(1,
                            all.size() > 1 ? "short_conv_decode_m" + std::to_string(all.size())
                                           : std::string("short_conv_decode"),
                            /*spread=*/true, all);
                    },
                    prefill);
    else
      prefill();
    // Launch 2, after every read of the old window: the new window per
    // (sequence, channel). Row r = position len - (W-1) + r, i.e. index
    // len + r of [old window ++ inputs]; ascending r reads rows
    // len + r >= r + 1 before they are overwritten.
    // A block per (sequence, 256 channels); the sequence's first row summed
    // by the warps' lanes. Sequences of one tile (at most kConvTokens
    // tokens) wrote their window in launch 1.
    // On the GPU the launch is skipped where no sequence can be longer than
    // a tile: every sequence of a step has at least one token (the runtime
    // hands none an empty step, and the decode branch above relies on it
    // too), so the longest has at most T - N + 1; skipped for T - N + 1 <=
    // kConvTokens (decode of any batch, and prefill rounds of short
    // prompts), so the step graph holds no launch of blocks that would all
    // return at once (three a KDA layer: 207 a decode step of full K3).
    const int64_t winBlocks = kb.gpu() ? (channels + kConvThreads - 1) / kConvThreads : 1;
    auto windowLaunch = [&](const ConvCtx &m) {
      Value x = m.x, state = m.state, off = m.off;
      kb.blocks({kb.dim(lens, 0), kb.idx(winBlocks)}, kConvThreads, [&](ValueRange bid,
                                                                       ThreadBlock &tb) {
        Value n = bid[0];
        Value len = kb.seqLen(lens, n);
        kb.ifThen(kb.ult(kb.idx(TB), len), [&] {
          Value start = kb.seqOffset(tb, lens, n);
          const int64_t span = kb.gpu() ? kConvThreads : channels;
          Value c0 = kb.mul(bid[1], span);
          kb.strided(tb, c0, kb.minu(kb.idx(channels), kb.add(c0, span)), [&](Value c) {
            Value sc = kb.add(off, c);
            kb.loop(kb.idx(0), Wm1, [&](Value r) {
              Value ci = kb.add(len, r);
              Value fromOld = kb.ult(ci, Wm1);
              Value v = kb.ifElse(
                  fromOld, [&] { return kb.loadF32(state, {n, ci, sc}); },
                  [&] { return kb.loadF32(x, {kb.add(start, kb.sub(ci, Wm1)), c}); });
              kb.storeF32(v, state, {n, r, sc});
            });
          });
        });
      }, 0, "short_conv_window");
    };
    for (const ConvCtx *m : all) {
      if (kb.gpu())
        kb.ifThen(kb.ult(kb.add(kb.idx(TB), kb.dim(lens, 0)), kb.add(kb.dim(x, 0), kb.idx(1))),
                  [&] { windowLaunch(*m); });
      else
        windowLaunch(*m);
    }
    return success();
  }
  if (auto gate = dyn_cast<KdaGateOp>(op)) {
    // Done by its linear (fuseGateLinears), or by its delta rule's loads.
    if (st.fusedAway.contains(op) || kdaGatedOnLoad(op))
      return success();
    lowerKdaGate(gate, kb, st);
    return success();
  }
  if (auto r = dyn_cast<L2NormInvOp>(op)) {
    // Done in its convolution's store, else a warp per (token, head).
    if (st.fusedAway.contains(op))
      return success();
    Value x = st.get(r.getInput()), inv = st.get(r.getResult());
    int64_t d = r.getHeadDim();
    int64_t width = cast<MemRefType>(x.getType()).getDimSize(1);
    Value eps = kb.f32(r.getEps().convertToDouble());
    perHeadRow(kb, kb.dim(x, 0), width / d, d, {x},
               [&](ThreadBlock &tb, Value row, Value base, ArrayRef<Value> cols, int64_t vw) {
      SmallVector<SmallVector<Value>> vals;
      Value v = l2Inv(kb, eps, headSumSq(kb, tb, x, row, base, cols, vw, vals));
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)),
                [&] { kb.storeF32(v, inv, {row, kb.div(base, kb.idx(d))}); });
    });
    return success();
  }
  if (auto l2 = dyn_cast<L2NormOp>(op)) {
    // Done in its convolution's store, or by its delta rule's loads.
    if (st.fusedAway.contains(op) || kdaNormedOnLoad(op))
      return success();
    Value x = st.get(l2.getInput()), y = st.get(l2.getResult());
    int64_t d = l2.getHeadDim();
    int64_t width = cast<MemRefType>(x.getType()).getDimSize(1);
    if (Value invBuf = l2.getInvNorm() ? st.get(l2.getInvNorm()) : Value()) {
      // The scaling half of a split norm, on its own: x * inv * scale.
      Value scale = l2NormConstants(kb, l2).second;
      perHeadRow(kb, kb.dim(x, 0), width / d, d, {x, y},
                 [&](ThreadBlock &tb, Value row, Value base, ArrayRef<Value> cols, int64_t vw) {
        Value v = kb.loadF32(invBuf, {row, kb.div(base, kb.idx(d))});
        for (Value c : cols)
          kb.storeVec(l2Apply(kb, v, scale, kb.loadVec(x, {row, kb.add(base, c)}, vw)), y,
                      {row, kb.add(base, c)});
      });
      return success();
    }
    // (Constants made outside the kernel become its arguments, so the norms
    // of q and k, which differ only in scale, share one kernel module.)
    auto epsScale = l2NormConstants(kb, l2);
    // A warp per (token, head): the head's values loaded once into
    // registers, the squares reduced by shuffles.
    perHeadRow(kb, kb.dim(x, 0), width / d, d, {x, y},
               [&](ThreadBlock &tb, Value row, Value base, ArrayRef<Value> cols, int64_t vw) {
      SmallVector<SmallVector<Value>> vals;
      Value ss = headSumSq(kb, tb, x, row, base, cols, vw, vals);
      for (size_t i = 0; i < cols.size(); ++i)
        kb.storeVec(l2Scaled(kb, epsScale, ss, vals[i]), y, {row, kb.add(base, cols[i])});
    });
    return success();
  }
  if (auto rule = dyn_cast<DeltaRuleOp>(op)) {
    lowerDeltaRule(rule, kb, st);
    return success();
  }
  if (auto norm = dyn_cast<GatedRMSNormOp>(op)) {
    if (!kdaOutNormFused(op)) // else lowered with its delta rule
      lowerGatedNorm(norm, kb, st);
    return success();
  }
  return std::nullopt;
}

LinearMap kdaGateLinearMap(KernelBuilder &kb, Operation *op, LowerState &st) {
  auto gate = cast<KdaGateOp>(op);
  Value alog = st.get(gate.getALog()), dt = st.get(gate.getDtBias());
  int64_t d = cast<MemRefType>(dt.getType()).getDimSize(0) / gate.getNumHeads();
  LinearMap m;
  m.y = st.get(gate.getResult());
  m.ep.roundTo = cast<MemRefType>(st.get(gate.getLogits()).getType()).getElementType();
  m.ep.name = "gate";
  // Per column: dt_bias and exp(A_log) of its head (a table the warpgroup
  // tile fills once a block; the exp computed once a column).
  m.ep.colValues = 2;
  m.ep.colLoad = [&kb, alog, dt, d](Value col) -> SmallVector<Value> {
    return {kb.loadF32(dt, {col}), kdaGateHeadA(kb, alog, col, d)};
  };
  m.ep.map = [&kb, gate](Value v, Value, ArrayRef<Value> pre) {
    return kdaGateValue(kb, gate, pre[1], kb.fadd(v, pre[0]));
  };
  m.unfused = [&kb, gate, &st] { lowerKdaGate(gate, kb, st); };
  return m;
}

DenseMap<Operation *, Operation *> fuseGateLinears(Block &body) {
  DenseMap<Operation *, Operation *> out;
  // On by default since session 42 (K3C_FUSE_GATE=0: the gate's own
  // launch). The projection f_b's prefill tile is the shallow 128 x 128 one
  // with two blocks an SM since session 17; with it the fused store takes
  // the gate's launch (8192 tokens: 604 MB, 210 us) off for ~40 us more in
  // the tile: kda_conv_gate 1.168 / 1.156 against 1.234 / 1.258 ms (H100,
  // slice, 8192 tokens, two rounds, docs/perf.md, session 42), logits
  // bit-identical. (On the deep 128 x 256 tile, one block an SM, the fused
  // store had lost on the H200: 1.65 against 1.38 ms.)
  if (!KernelBuilder::switchFromEnv("K3C_FUSE_GATE", /*dflt=*/true))
    return out;
  for (Operation &op : body.without_terminator()) {
    auto gate = dyn_cast<KdaGateOp>(op);
    if (!gate)
      continue;
    auto lin = gate.getLogits().getDefiningOp<LinearOp>();
    if (!lin || lin->getBlock() != &body || !lin.getResult().hasOneUse())
      continue;
    // The gate runs where the linear is: its other operands must be there.
    bool ready = llvm::all_of(gate->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return v == lin.getResult() || !def ||
             (def->getBlock() == &body && def->isBeforeInBlock(lin));
    });
    if (ready)
      out[lin] = gate;
  }
  return out;
}

} // namespace k3c::lowering
