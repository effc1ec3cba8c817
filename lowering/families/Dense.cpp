//===- Dense.cpp - linear, norms, activations, AttnRes, gathers -----------===//
//
// Kernel contracts: docs/kernels.md. The linear layer is a tiled block
// program (lowerLinear); row reductions (RMSNorm, AttnRes) run one block per
// row with block-wide reductions; elementwise ops are one parallel
// iteration per element. Reductions accumulate in fp32; results round once
// to their storage type (the reference's rounding points, spec §4.1).
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"

#include "llvm/ADT/MapVector.h"
#include <cstdlib>
#include <numeric>

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

Value rowInvRms(KernelBuilder &kb, ThreadBlock &tb, Value x, Value row, int64_t d, Value eps,
                Value red) {
  // 16-byte loads on the GPU (a 7168-wide bf16 row is 3.5 loads a thread of
  // 256, not 28 dependent scalar ones: a decode step's norms are latency).
  const int64_t vw = kb.vecWidth(x, d);
  Value part = kb.loopStep(kb.mul(tb.tid, vw), kb.idx(d), kb.idx(tb.threads * vw),
                           ValueRange{kb.f32(0.0)}, [&](Value i, ValueRange a) {
                             Value acc = a[0];
                             for (Value v : kb.loadVec(x, {row, i}, vw))
                               acc = kb.fadd(acc, kb.fmul(v, v));
                             return SmallVector<Value>{acc};
                           })[0];
  Value ss = kb.blockSum(tb, part, red);
  return kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(d))), eps));
}

/// KimiRMSNorm of x[xRow] into y[yRow] by one block: x * rsqrt(mean x^2 +
/// eps), rounded to x's type, times w (the block's row of the tensors in the
/// row launch, row 0 of a shared row in a GEMV prologue: the same code).
static void rmsNormRow(KernelBuilder &kb, ThreadBlock &tb, Value x, Value xRow, Value w, Value y,
                       Value yRow, double epsValue) {
  Type xt = cast<MemRefType>(x.getType()).getElementType();
  int64_t d = cast<MemRefType>(x.getType()).getDimSize(1);
  const int64_t vw = std::min({kb.vecWidth(x, d), kb.vecWidth(w, d), kb.vecWidth(y, d)});
  Value red = kb.shared(tb, {tb.warps}, kb.b.getF32Type());
  Value inv = rowInvRms(kb, tb, x, xRow, d, kb.f32(epsValue), red);
  kb.loopStep(kb.mul(tb.tid, vw), kb.idx(d), kb.idx(tb.threads * vw), [&](Value i) {
    SmallVector<Value> xv = kb.loadVec(x, {xRow, i}, vw), wv = kb.loadVec(w, {i}, vw), out;
    for (int64_t j = 0; j < vw; ++j)
      out.push_back(kb.fmul(kb.round(kb.fmul(xv[j], inv), xt), wv[j]));
    kb.storeVec(out, y, {yRow, i});
  });
}

/// Block attention residuals (spec §4.6) of row `row` of the sources into
/// y[yRow] by one block: per source the sum of squares and the dot product
/// with w_norm * w_proj in one pass and one block exchange, the score
/// (dot * rsqrt(mean + eps)), softmax over sources in fp32, the mix of the
/// raw sources.
static void attnResRow(KernelBuilder &kb, ThreadBlock &tb, ArrayRef<Value> src, Value row,
                       Value wn, Value wp, Value y, Value yRow, double epsValue) {
  int64_t d = cast<MemRefType>(y.getType()).getDimSize(1);
  Value D = kb.idx(d), eps = kb.f32(epsValue);
  int64_t vw = std::min({kb.vecWidth(y, d), kb.vecWidth(wn, d), kb.vecWidth(wp, d)});
  for (Value v : src)
    vw = std::min(vw, kb.vecWidth(v, d));
  const int64_t n = static_cast<int64_t>(src.size());
  Value red = kb.shared(tb, {tb.warps * 2 * n}, kb.b.getF32Type());
  SmallVector<Value> init(2 * n, kb.f32(0.0));
  SmallVector<Value> parts = kb.loopStep(
      kb.mul(tb.tid, vw), D, kb.idx(tb.threads * vw), init, [&](Value i, ValueRange a) {
        SmallVector<Value> nv = kb.loadVec(wn, {i}, vw), pv = kb.loadVec(wp, {kb.idx(0), i}, vw);
        SmallVector<Value> out(a);
        for (int64_t s = 0; s < n; ++s) {
          SmallVector<Value> sv = kb.loadVec(src[s], {row, i}, vw);
          for (int64_t j = 0; j < vw; ++j) {
            out[2 * s] = kb.fadd(out[2 * s], kb.fmul(sv[j], sv[j]));
            out[2 * s + 1] = kb.fadd(out[2 * s + 1], kb.fmul(sv[j], kb.fmul(nv[j], pv[j])));
          }
        }
        return out;
      });
  SmallVector<Value> sums = kb.blockSums(tb, parts, red);
  SmallVector<Value> scores;
  for (int64_t s = 0; s < n; ++s) {
    Value inv = kb.rsqrt(kb.fadd(kb.fdiv(sums[2 * s], kb.f32(static_cast<double>(d))), eps));
    scores.push_back(kb.fmul(sums[2 * s + 1], inv));
  }
  Value mx = kb.f32(-INFINITY);
  for (Value sc : scores)
    mx = kb.fmax(mx, sc);
  Value z = kb.f32(0.0);
  SmallVector<Value> e;
  for (Value sc : scores) {
    e.push_back(kb.exp(kb.fsub(sc, mx)));
    z = kb.fadd(z, e.back());
  }
  SmallVector<Value> coef;
  for (Value w : e)
    coef.push_back(kb.fdiv(w, z));
  kb.loopStep(kb.mul(tb.tid, vw), D, kb.idx(tb.threads * vw), [&](Value i) {
    SmallVector<Value> acc(vw, kb.f32(0.0));
    for (auto [c, sv0] : llvm::zip(coef, src)) {
      SmallVector<Value> sv = kb.loadVec(sv0, {row, i}, vw);
      for (int64_t j = 0; j < vw; ++j)
        acc[j] = kb.fadd(acc[j], kb.fmul(c, sv[j]));
    }
    kb.storeVec(acc, y, {yRow, i});
  });
}

/// The row ops of a one-token prologue chain computed by the GEMV block into
/// shared rows (row 0 of each), inputs from earlier links or the kernel's
/// buffers at row 0. Returns the last link's row.
static Value chainRow(KernelBuilder &kb, ThreadBlock &tb, ArrayRef<Operation *> chain,
                      const LowerState &st) {
  DenseMap<Value, Value> local;
  auto get = [&](Value v) {
    Value l = local.lookup(v);
    return l ? l : st.get(v);
  };
  Value zero = kb.idx(0), last;
  for (Operation *op : chain) {
    auto rt = cast<RankedTensorType>(op->getResult(0).getType());
    Value row = kb.shared(tb, {1, rt.getDimSize(1)}, rt.getElementType());
    if (auto norm = dyn_cast<RMSNormOp>(op)) {
      rmsNormRow(kb, tb, get(norm.getInput()), zero, get(norm.getWeight()), row, zero,
                 norm.getEps().convertToDouble());
    } else if (auto mix = dyn_cast<AttnResOp>(op)) {
      SmallVector<Value> src;
      for (Value v : mix.getSources())
        src.push_back(get(v));
      attnResRow(kb, tb, src, zero, get(mix.getNormWeight()), get(mix.getProjWeight()), row, zero,
                 mix.getEps().convertToDouble());
    } else {
      auto g = cast<GatedRMSNormOp>(op);
      gatedNormRow(kb, tb, get(g.getInput()), get(g.getGate()), get(g.getWeight()), row, zero,
                   zero, g.getEps().convertToDouble());
    }
    if (op != chain.back())
      kb.barrier(tb); // the next link reads the whole row (the GEMV's own barrier follows the last)
    local[op->getResult(0)] = row;
    last = row;
  }
  return last;
}

/// The prologue of a linear whose input `x` a chain of row ops computes
/// (oneTokenChains), or none.
static XPrologue prologueFor(KernelBuilder &kb, const LowerState &st, Value x) {
  auto it = st.oneTokenChain.find(x);
  if (it == st.oneTokenChain.end())
    return {};
  SmallVector<Operation *> chain = it->second;
  return [&kb, &st, chain](ThreadBlock &tb) { return chainRow(kb, tb, chain, st); };
}

/// y[T, O] = x[T, K] W[O, K]^T, tiled: a block computes kTokTile tokens x
/// (kRowsPerWarp * warps) output rows through gemmTile: the block stages its
/// tokens' x in shared memory, kChunkBytes at a time (16-byte loads); each
/// warp owns kRowsPerWarp rows of W and its lanes split K, reading W 16 bytes
/// at a time (each row streamed once per token tile), then reduce by
/// shuffles (the host's tile, and the f32 build's on the GPU above kTokTile
/// tokens). On the host: one thread
/// per block, the same loop nest.
static void lowerLinearFma(KernelBuilder &kb, Value x, Value w, Value y, Value residual) {
  auto xt = cast<MemRefType>(x.getType());
  int64_t K = xt.getDimSize(1), O = cast<MemRefType>(w.getType()).getDimSize(0);
  int64_t vw = std::min(kb.vecWidth(x, K), kb.vecWidth(w, K));
  Value T = kb.dim(x, 0);
  int64_t warps = kb.gpu() ? kLinearThreads / 32 : 1, rowsPerBlock = kRowsPerWarp * warps;
  kb.blocks({kb.ceilDiv(T, kTokTile), kb.idx((O + rowsPerBlock - 1) / rowsPerBlock)},
            kLinearThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value r0 = kb.add(kb.mul(bid[1], rowsPerBlock), kb.mul(tb.warp, kRowsPerWarp));
    // Rows past O read row O-1 and are not stored.
    SmallVector<Value> rows;
    for (int64_t r = 0; r < kRowsPerWarp; ++r)
      rows.push_back(kb.minu(kb.add(r0, r), kb.idx(O - 1)));
    Value t0 = kb.mul(bid[0], kTokTile);
    SmallVector<Value> acc = gemmTile(
        kb, tb, x, K, vw, kRowsPerWarp,
        [&](Value tt) {
          Value t = kb.add(t0, tt);
          return ActRow{kb.ult(t, T), {t}};
        },
        [&](int64_t r, Value k, int64_t width) { return kb.loadVec(w, {rows[r], k}, width); });
    for (int64_t r = 0; r < kRowsPerWarp; ++r)
      for (int64_t tt = 0; tt < kTokTile; ++tt) {
        Value v = kb.warpSum(tb, acc[r * kTokTile + tt]);
        Value t = kb.add(t0, kb.idx(tt)), o = kb.add(r0, kb.idx(r));
        Value ok = kb.andi(kb.andi(kb.ieq(tb.lane, kb.idx(0)), kb.ult(t, T)),
                           kb.ult(o, kb.idx(O)));
        kb.ifThen(ok, [&] { kb.storeF32(addResidual(kb, y, residual, {t, o}, v), y, {t, o}); });
      }
  }, 0, "linear_fma");
}

/// y = x W^T as the GEMM layer plans it (tile/Gemm.h): on the GPU one token
/// takes the GEMV (both builds), the f32 build the FMA tile above that, the
/// bf16 build tensor cores from plan.mmaFrom tokens (a host-side branch on T
/// picks the launch). The host runs the FMA tile.
/// The tensor-core tiles of `plan` for T >= plan.mmaFrom tokens: the small
/// mma.sync tile up to plan.smallUpTo, the medium one (warpgroup MMA on
/// sm_90a) up to plan.mediumUpTo, the large one above. `mma` and `wgmma` emit
/// one launch with a tile; `large`, when given, replaces the large branch.
static void tensorCoreTiles(KernelBuilder &kb, const LinearPlan &plan, Value T,
                            const std::function<void(const MmaTile &)> &mma,
                            const std::function<void(const WgmmaTile &)> &wgmma,
                            const std::function<void()> &large = {}) {
  auto tile = [&](const MmaTile &m, const WgmmaTile &w) {
    if (plan.useWgmma)
      wgmma(w);
    else
      mma(m);
  };
  // A medium tile equal to the large one (the wide batched-decode tile) is
  // one branch: one kernel, not two identical ones under two names.
  const bool sameTile = plan.useWgmma ? plan.wgmmaMedium.name() == plan.wgmma.name() &&
                                            plan.wgmmaMedium.cluster == plan.wgmma.cluster
                                      : plan.medium.name() == plan.large.name();
  if (sameTile && !large) {
    kb.ifThenElse(kb.ule(T, kb.idx(plan.smallUpTo)), [&] { mma(plan.small); },
                  [&] { tile(plan.large, plan.wgmma); });
    return;
  }
  kb.ifThenElse(
      kb.ule(T, kb.idx(plan.smallUpTo)), [&] { mma(plan.small); },
      [&] {
        kb.ifThenElse(
            kb.ule(T, kb.idx(plan.mediumUpTo)), [&] { tile(plan.medium, plan.wgmmaMedium); },
            [&] {
              if (large)
                large();
              else
                tile(plan.large, plan.wgmma);
            });
      });
}

/// Whether `other` joins `first`'s projection set (gemvGroups: linears of
/// one x lowered together): the same weight element type and depth and the
/// same output element type.
static bool sameProjectionSet(LinearOp first, LinearOp other) {
  auto wt = dyn_cast<RankedTensorType>(first.getWeight().getType());
  auto w = dyn_cast<RankedTensorType>(other.getWeight().getType());
  return wt && w && w.getElementType() == wt.getElementType() &&
         w.getDimSize(1) == wt.getDimSize(1) &&
         other.getType().getElementType() == first.getType().getElementType();
}

SmallVector<ScratchNeed> linearSplitNeed(Operation *op) {
  auto lin = cast<LinearOp>(op);
  auto xt = cast<RankedTensorType>(lin.getInput().getType());
  auto wt = dyn_cast<RankedTensorType>(lin.getWeight().getType());
  if (!wt || !xt.getElementType().isBF16() || !wt.getElementType().isBF16() ||
      !intFromEnv("K3C_SPLITK", 1))
    return {};
  const int64_t K = wt.getDimSize(1), O = wt.getDimSize(0);
  // K3C_SPLITK_MIN_K lowers the depth bound, so small models (k3-tiny)
  // exercise the split against the reference executor.
  if (K < intFromEnv("K3C_SPLITK_MIN_K", 4096) || O > 16384 || O % 2)
    return {};
  // Lowered with others: a GLU's projections.
  for (Operation *u : lin.getResult().getUsers())
    if (isa<GluOp>(u))
      return {};
  // A projection set (other linears of the same x in the block, as
  // gemvGroups gathers them): with K3C_SPLITK_SETS (lowerLinearSet), its
  // first linear holds the workspace for all of its columns where their
  // split tiles fit one wave, the others none.
  const int64_t bn = splitKTile().bn;
  int64_t cols = O, tiles = (O + bn - 1) / bn;
  bool others = false;
  for (Operation *u : lin.getInput().getUsers()) {
    auto l = dyn_cast<LinearOp>(u);
    if (!l || u == op || u->getBlock() != op->getBlock() || !sameProjectionSet(lin, l))
      continue;
    if (u->isBeforeInBlock(op))
      return {};
    const int64_t o = cast<RankedTensorType>(l.getWeight().getType()).getDimSize(0);
    if (o % 2)
      return {};
    others = true;
    cols += o;
    tiles += (o + bn - 1) / bn;
  }
  if (others && (!intFromEnv("K3C_SPLITK_SETS", 0) || tiles > TargetInfo::get(Target::Gpu).smCount))
    return {};
  return {ScratchNeed{{std::max(splitKWays(), kSplitNarrowWays) * kSplitRows, cols},
                      Float32Type::get(op->getContext()),
                      /*deviceOnly=*/true}};
}

void lowerLinear(KernelBuilder &kb, Value x, Value w, Value y, Value residual,
                 bool oneTokenElsewhere, const XPrologue &prologue, Value splitWs,
                 const LinearMap *map) {
  auto xt = cast<MemRefType>(x.getType());
  LinearPlan plan = linearPlan(kb.info(), xt.getElementType(),
                               cast<MemRefType>(w.getType()).getElementType(), xt.getDimSize(1),
                               cast<MemRefType>(w.getType()).getDimSize(0));
  Value T = kb.dim(x, 0);
  // Decode at batch 1 on the GPU: a GEMV over all threads of O / kGemvRows
  // blocks; the FMA tile for the other token counts below plan.mmaFrom.
  auto fewTokensLinear = [&] {
    if (!kb.gpu()) {
      lowerLinearFma(kb, x, w, y, residual);
      return;
    }
    if (oneTokenElsewhere) { // T = 1 is the caller's (gemvMulti)
      if (plan.mmaFrom != 2)
        lowerLinearFma(kb, x, w, y, residual);
      return;
    }
    if (plan.mmaFrom == 2) {
      gemvLinear(kb, x, w, y, T, 1, residual, {}, prologue);
      return;
    }
    kb.ifThenElse(
        kb.ieq(T, kb.idx(1)), [&] { gemvLinear(kb, x, w, y, T, 1, residual, {}, prologue); },
        [&] { lowerLinearFma(kb, x, w, y, residual); });
  };
  // K3C_GEMV_MAP=1 (opt-in until measured; session 62): the map (the KDA
  // gate of f_b's logits) in the one-token GEMV's store instead of its own
  // launch after the GEMV (the tensor-core tiles do it already; the same
  // rounding and the same gate code, so the same values); the FMA tile's
  // token counts keep the launch.
  const bool gemvMap = map && !residual && kb.gpu() && !oneTokenElsewhere &&
                       intFromEnv("K3C_GEMV_MAP", 0);
  auto fewTokens = [&] {
    if (gemvMap) {
      auto gemv = [&] { gemvLinear(kb, x, w, map->y, T, 1, {}, {}, prologue, &map->ep); };
      auto fma = [&] {
        lowerLinearFma(kb, x, w, y, residual);
        map->unfused();
      };
      if (plan.mmaFrom == 2)
        gemv();
      else
        kb.ifThenElse(kb.ieq(T, kb.idx(1)), gemv, fma);
      return;
    }
    fewTokensLinear();
    if (map)
      map->unfused();
  };
  // The tensor-core tiles store y, or the map's result with its map.
  Value yt = map ? map->y : y;
  StoreEpilogue ep = map ? map->ep : StoreEpilogue(residual);
  if (!plan.mmaFrom) {
    fewTokens();
    return;
  }
  kb.ifThenElse(kb.ult(T, kb.idx(plan.mmaFrom)), fewTokens, [&] {
    tensorCoreTiles(
        kb, plan, T, [&](const MmaTile &t) { mmaLinear(kb, x, w, yt, T, t, ep); },
        [&](const WgmmaTile &t) {
          // Split-K where the output's column tiles alone leave SMs idle
          // (O = 7168 in 64-column tiles: 112 blocks on 132 SMs) and the
          // tokens fit one row tile of the workspace (linearSplitNeed): the
          // wide split tile (plan.wgmmaSplit, 128 x 256, 4 ways) where it
          // gives at least 3/4 of the SMs a block, else this tile 2 ways.
          // The wide tile reads each x tile for 256 output columns instead of
          // 64 (at 128 tokens x is half the bytes of the weights it meets).
          // H200, slice (docs/perf.md, session 32): mlp_down's two launches
          // at 128 / 64 tokens 394 / 372 -> 308 / 287 us, the decode step
          // 3.01-3.05 / 2.48 -> 2.88-2.92 / 2.38 ms.
          const int64_t O = cast<MemRefType>(w.getType()).getDimSize(0);
          const int64_t sms = kb.info().smCount;
          auto columnTiles = [&](const WgmmaTile &x) { return (O + x.bn - 1) / x.bn; };
          const int64_t wideWays = splitKWays();
          const int64_t wideTiles = columnTiles(plan.wgmmaSplit);
          const bool useWide = plan.wgmmaSplit.bm >= kSplitRows && wideTiles <= sms &&
                               4 * wideTiles * wideWays >= 3 * sms;
          const WgmmaTile &s = useWide ? plan.wgmmaSplit : t;
          if (splitWs && t.name() == plan.wgmmaMedium.name() && s.bm >= kSplitRows &&
              columnTiles(s) <= sms)
            kb.ifThenElse(
                kb.ule(T, kb.idx(kSplitRows)),
                [&] {
                  wgmmaLinear(kb, x, w, yt, T, s, ep, {}, {}, splitWs,
                              useWide ? wideWays : kSplitNarrowWays);
                },
                [&] { wgmmaLinear(kb, x, w, yt, T, t, ep); });
          else
            wgmmaLinear(kb, x, w, yt, T, t, ep);
        });
  });
}

/// The elementwise gated activation y = act(a, b) (one launch).
static void lowerGluElementwise(KernelBuilder &kb, GluOp glu, Value a, Value b, Value y) {
  kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
    Value v = kb.glu(glu.getActivation(), glu.getSituBeta(), glu.getSituLinearBeta(),
                     kb.loadF32(a, iv), kb.loadF32(b, iv));
    kb.storeF32(v, y, iv);
  });
}

/// glu(linear(x, Wg), linear(x, Wu)) as one GEMM where the GEMM layer can
/// (GluPair: the GEMV at one token, the tensor-core tiles from plan.mmaFrom
/// tokens; y only is written); elsewhere (the host, the f32 build's FMA
/// tile) the two projections into their buffers, then the activation.
static void lowerLinearGlu(KernelBuilder &kb, GluOp glu, LinearOp gate, LinearOp up,
                           LowerState &st) {
  Value x = st.get(gate.getInput()), wg = st.get(gate.getWeight()), wu = st.get(up.getWeight());
  Value yg = st.get(gate.getResult()), yu = st.get(up.getResult()), y = st.get(glu.getResult());
  auto xt = cast<MemRefType>(x.getType());
  int64_t K = xt.getDimSize(1), O = cast<MemRefType>(wg.getType()).getDimSize(0);
  LinearPlan plan = linearPlan(kb.info(), xt.getElementType(),
                               cast<MemRefType>(wg.getType()).getElementType(), K, 2 * O);
  GluPair pair;
  pair.up = wu;
  pair.roundTo = cast<MemRefType>(yg.getType()).getElementType();
  pair.act = [&kb, glu](Value g, Value u) mutable {
    return kb.glu(glu.getActivation(), glu.getSituBeta(), glu.getSituLinearBeta(), g, u);
  };
  Value T = kb.dim(x, 0);
  const bool paired = intFromEnv("K3C_GLU_PAIR", 1) != 0;
  XPrologue prologue = prologueFor(kb, st, gate.getInput());
  // Separately: with pairing on the GPU, the FMA tile for both projections
  // (the only strategy reachable there: below the tensor-core tiles, above
  // one token); else (the host, K3C_GLU_PAIR=0) the whole linear plan.
  auto separate = [&] {
    if (kb.gpu() && paired) {
      lowerLinearFma(kb, x, wg, yg, {});
      lowerLinearFma(kb, x, wu, yu, {});
    } else {
      lowerLinear(kb, x, wg, yg, {}, false, prologue);
      lowerLinear(kb, x, wu, yu, {}, false, prologue);
    }
    lowerGluElementwise(kb, glu, yg, yu, y);
  };
  // The tiles need whole 8-row blocks of gate and up (O % 8).
  const bool tiles = paired && plan.mmaFrom && O % 8 == 0;
  if (!kb.gpu() || !paired) {
    separate();
    return;
  }
  auto fewTokens = [&] {
    if (tiles && plan.mmaFrom == 2) {
      gemvLinear(kb, x, wg, y, T, 1, {}, pair, prologue);
      return;
    }
    kb.ifThenElse(
        kb.ieq(T, kb.idx(1)), [&] { gemvLinear(kb, x, wg, y, T, 1, {}, pair, prologue); },
        separate);
  };
  if (!tiles) {
    fewTokens();
    return;
  }
  kb.ifThenElse(kb.ult(T, kb.idx(plan.mmaFrom)), fewTokens, [&] {
    tensorCoreTiles(
        kb, plan, T, [&](const MmaTile &t) { mmaLinear(kb, x, wg, y, T, t, {}, pair); },
        [&](const WgmmaTile &t) { wgmmaLinear(kb, x, wg, y, T, t, {}, pair); });
  });
}

DenseMap<Operation *, std::pair<Operation *, Operation *>> fuseGluPairs(Block &body) {
  DenseMap<Operation *, std::pair<Operation *, Operation *>> out;
  for (Operation &op : body.without_terminator()) {
    auto glu = dyn_cast<GluOp>(op);
    if (!glu)
      continue;
    auto gate = glu.getGate().getDefiningOp<LinearOp>();
    auto up = glu.getUp().getDefiningOp<LinearOp>();
    if (!gate || !up || gate == up || gate->getBlock() != &body || up->getBlock() != &body ||
        gate.getInput() != up.getInput() || gate.getWeight().getType() != up.getWeight().getType() ||
        !gate.getResult().hasOneUse() || !up.getResult().hasOneUse())
      continue;
    out[&op] = {gate, up};
  }
  return out;
}

/// Several projections of one x from two tokens up (a gemvMulti launch takes
/// one token): one tile launch for all of them on tensor cores
/// (MoreProjections), each its own FMA tile below the tensor-core tiles (the
/// f32 build) or where a projection does not fit the tiles.
static void lowerLinearSet(KernelBuilder &kb, Value x, ArrayRef<Value> ws, ArrayRef<Value> ys,
                           Value splitWs) {
  auto xt = cast<MemRefType>(x.getType());
  const int64_t K = xt.getDimSize(1);
  int64_t outputsGcd = 0;
  for (Value w : ws)
    outputsGcd = std::gcd(outputsGcd, cast<MemRefType>(w.getType()).getDimSize(0));
  LinearPlan plan = linearPlan(kb.info(), xt.getElementType(),
                               cast<MemRefType>(ws[0].getType()).getElementType(), K,
                               cast<MemRefType>(ws[0].getType()).getDimSize(0), outputsGcd);
  bool tiles = plan.mmaFrom && intFromEnv("K3C_TILE_MULTI", 1);
  for (Value w : ws)
    tiles &= cast<MemRefType>(w.getType()).getDimSize(0) % 2 == 0;
  if (!tiles) {
    for (auto [w, y] : llvm::zip(ws, ys))
      lowerLinear(kb, x, w, y, {}, /*oneTokenElsewhere=*/true);
    return;
  }
  // A set whose outputs make about two full waves of 128 x 192 tiles (KDA's
  // q/k/v/gate/beta projections, 49376 outputs: 258 tiles on 132 SMs) takes
  // that tile at batched decode instead of 128 x 64 (2.92 waves at two
  // blocks an SM): x is read once per 192 columns instead of per 64. On the
  // H200 (slice, two rounds alternating, session 33): kda_in 270 -> 221 us
  // at 128 tokens, 257 -> 213 at 64, the graph-replayed step 2.850-2.869 ->
  // 2.804-2.823 ms at 128 and 2.382-2.401 -> 2.335-2.362 at 64, logits
  // bit-identical. K3C_WGMMA_SET_TILE192=0 keeps 128 x 64. The plan's own
  // choice stands where it is already wide, or was overridden.
  if (plan.useWgmma && plan.wgmmaMedium.bn < 192 && !std::getenv("K3C_WGMMA_MEDIUM_TILE") &&
      intFromEnv("K3C_WGMMA_SET_TILE192", 1)) {
    // K3C_WGMMA_SET_TILE: another tile for these sets (its width counted).
    WgmmaTile t = wgmmaTileFromEnv("K3C_WGMMA_SET_TILE", WgmmaTile{128, 192, 4, 1});
    int64_t tiles192 = 0;
    for (Value w : ws)
      tiles192 += (cast<MemRefType>(w.getType()).getDimSize(0) + t.bn - 1) / t.bn;
    const int64_t sms = kb.info().smCount;
    if (20 * tiles192 >= 19 * 2 * sms && tiles192 <= 2 * sms) {
      if (std::string why = t.check(kb.info()); !why.empty())
        llvm::report_fatal_error("k3c: bad K3C_WGMMA_SET_TILE: " + llvm::Twine(why),
                                 /*gen_crash_diag=*/false);
      plan.wgmmaMedium = t;
    }
  }
  MoreProjections more;
  more.ws.assign(ws.begin() + 1, ws.end());
  more.ys.assign(ys.begin() + 1, ys.end());
  Value T = kb.dim(x, 0);
  auto onTensorCores = [&] {
    // Prefill tiles: one launch while the row tiles are few (one
    // projection's grid would leave SMs idle), a launch each from
    // K3C_TILE_MULTI_UPTO tokens (measured on the H200: the shared grid ran
    // kda_in 14 % slower at 2048 tokens and 33 % at 8192, 26 % faster at 512).
    auto large = [&](const MoreProjections &m, Value w, Value y) {
      if (plan.useWgmma)
        wgmmaLinear(kb, x, w, y, T, plan.wgmma, {}, {}, m);
      else
        mmaLinear(kb, x, w, y, T, plan.large, {}, {}, m);
    };
    // Split-K at batched decode (the set's first linear holds a workspace
    // for all of its columns, linearSplitNeed) where the set's column tiles
    // on the wide split tile fill less than a wave: ways = SMs / tiles (at
    // most splitKWays()), used where that gives 3/4 of the SMs a block.
    // mla_in's 1536 + 576 + 12288 outputs: 57 tiles of 256 split 2 ways,
    // 114 blocks, x read once per 256 columns instead of per 64.
    // Opt-in (K3C_SPLITK_SETS=1; 2 splits every set with a workspace, for
    // small models against the reference executor): on the H200 (slice, 128
    // tokens, docs/perf.md, session 35) mla_in 92.8 -> 89.9 us, but the
    // mla_q_up launch after it 37.8 -> 39.6 and the step within its noise;
    // the 2-way split changes mla_in's sums (not bit-identical).
    int64_t setTiles = 0, cols = 0;
    for (Value w : ws) {
      int64_t o = cast<MemRefType>(w.getType()).getDimSize(0);
      setTiles += (o + plan.wgmmaSplit.bn - 1) / plan.wgmmaSplit.bn;
      cols += o;
    }
    const int64_t sms = kb.info().smCount, setsMode = intFromEnv("K3C_SPLITK_SETS", 0);
    if (setsMode < 0 || setsMode > 2)
      llvm::report_fatal_error("k3c: K3C_SPLITK_SETS must be 0, 1 or 2, got " +
                                   llvm::Twine(setsMode),
                               /*gen_crash_diag=*/false);
    const int64_t setWays =
        std::min(splitKWays(), std::max<int64_t>(setsMode == 2 ? 2 : 0,
                                                 sms / std::max<int64_t>(setTiles, 1)));
    const bool setSplit = splitWs && plan.useWgmma && setsMode &&
                          plan.wgmmaSplit.bm >= kSplitRows && setWays >= 2 &&
                          (setsMode == 2 || 4 * setTiles * setWays >= 3 * sms) &&
                          cast<MemRefType>(splitWs.getType()).getDimSize(1) >= cols &&
                          cast<MemRefType>(splitWs.getType()).getDimSize(0) >= setWays * kSplitRows;
    tensorCoreTiles(
        kb, plan, T,
        [&](const MmaTile &t) { mmaLinear(kb, x, ws[0], ys[0], T, t, {}, {}, more); },
        [&](const WgmmaTile &t) {
          if (setSplit && t.name() == plan.wgmmaMedium.name())
            kb.ifThenElse(
                kb.ule(T, kb.idx(kSplitRows)),
                [&] {
                  wgmmaLinear(kb, x, ws[0], ys[0], T, plan.wgmmaSplit, {}, {}, more, splitWs,
                              setWays);
                },
                [&] { wgmmaLinear(kb, x, ws[0], ys[0], T, t, {}, {}, more); });
          else
            wgmmaLinear(kb, x, ws[0], ys[0], T, t, {}, {}, more);
        },
        [&] {
          kb.ifThenElse(
              kb.ule(T, kb.idx(intFromEnv("K3C_TILE_MULTI_UPTO", 1024))),
              [&] { large(more, ws[0], ys[0]); },
              [&] {
                for (auto [w, y] : llvm::zip(ws, ys))
                  large({}, w, y);
              });
        });
  };
  if (plan.mmaFrom == 2) {
    onTensorCores();
    return;
  }
  kb.ifThenElse(
      kb.ult(T, kb.idx(plan.mmaFrom)),
      [&] {
        for (auto [w, y] : llvm::zip(ws, ys))
          lowerLinearFma(kb, x, w, y, {});
      },
      onTensorCores);
}

void earlyForGemv(KernelBuilder &kb, ThreadBlock &tb, Operation *op, Value rowsOf) {
  if (!gemvEarly(kb))
    return;
  Value v = op->getResult(0);
  Operation *next = op->getNextNode();
  auto lin = dyn_cast_or_null<LinearOp>(next);
  if (!lin || lin.getInput() != v || v.use_empty())
    return;
  for (OpOperand &u : v.getUses())
    if (!isa<LinearOp>(u.getOwner()) || u.getOperandNumber() != 0)
      return;
  kb.launchDependentsIf(tb, kb.ieq(kb.dim(rowsOf, 0), kb.idx(1)));
}

void unlessOneTokenPrologue(KernelBuilder &kb, const LowerState &st, Operation *op, Value rows,
                            const std::function<void()> &emit) {
  if (!st.oneTokenOps.contains(op)) {
    emit();
    return;
  }
  kb.ifThen(kb.ine(rows, kb.idx(1)), emit);
}

DenseMap<Value, SmallVector<Operation *>> oneTokenChains(Block &body) {
  DenseMap<Value, SmallVector<Operation *>> out;
  const int64_t mode = gemvPrologueMode();
  if (!mode)
    return out;
  // Per-block prologues (mode 2) read their chain's input rows in every
  // GEMV block: only small rows, one norm (no AttnRes, whose sources are
  // several model-width rows).
  const int64_t perBlockBytes = intFromEnv("K3C_GEMV_PROLOGUE_BYTES", 4096);
  if (perBlockBytes < 0)
    llvm::report_fatal_error("k3c: K3C_GEMV_PROLOGUE_BYTES must be >= 0, got " +
                                 llvm::Twine(perBlockBytes),
                             /*gen_crash_diag=*/false);
  auto inBody = [&](Operation *o) { return o && o->getBlock() == &body; };
  // Every use is a linear of this body reading the value as its input (each
  // takes the GEMV at one token, and the GEMV takes the prologue).
  auto onlyLinearInputs = [&](Value v) {
    if (v.use_empty())
      return false;
    for (OpOperand &u : v.getUses()) {
      auto lin = dyn_cast<LinearOp>(u.getOwner());
      if (!lin || !inBody(lin) || u.getOperandNumber() != 0 ||
          !isa<FloatType>(cast<RankedTensorType>(lin.getWeight().getType()).getElementType()))
        return false;
    }
    return true;
  };
  auto rowBytes = [](Operation *o) {
    auto t = cast<RankedTensorType>(o->getResult(0).getType());
    return t.getDimSize(1) * (t.getElementTypeBitWidth() / 8);
  };
  for (Operation &op : body.without_terminator()) {
    if (!isa<RMSNormOp, GatedRMSNormOp>(op) || !onlyLinearInputs(op.getResult(0)))
      continue;
    SmallVector<Operation *> chain{&op};
    int64_t bytes = rowBytes(&op);
    if (mode == 2) {
      // The norm's inputs (x, and a gated norm's gate) are what every block reads.
      int64_t in = 0;
      for (Value v : op.getOperands())
        if (auto t = dyn_cast<RankedTensorType>(v.getType()); t && t.getRank() == 2)
          in += t.getDimSize(1) * (t.getElementTypeBitWidth() / 8);
      if (in <= perBlockBytes)
        out[op.getResult(0)] = chain;
      continue;
    }
    if (auto norm = dyn_cast<RMSNormOp>(op)) {
      auto mix = norm.getInput().getDefiningOp<AttnResOp>();
      if (mix && inBody(mix) && mix.getResult().hasOneUse() && bytes + rowBytes(mix) <= 32768) {
        chain.insert(chain.begin(), mix);
        bytes += rowBytes(mix);
      }
    }
    if (bytes <= 32768)
      out[op.getResult(0)] = chain;
  }
  return out;
}

DenseMap<Operation *, SmallVector<Operation *>> gemvGroups(Block &body, const LowerState &st) {
  DenseMap<Operation *, SmallVector<Operation *>> out;
  if (!intFromEnv("K3C_GEMV_MULTI", 1))
    return out;
  llvm::MapVector<Value, SmallVector<Operation *>> byInput;
  for (Operation &op : body.without_terminator()) {
    auto lin = dyn_cast<LinearOp>(op);
    if (!lin || st.fusedAway.contains(&op) || st.residualAdd.count(&op) ||
        st.linearGate.count(&op))
      continue;
    byInput[lin.getInput()].push_back(&op);
  }
  for (auto &[x, lins] : byInput) {
    SmallVector<Operation *> same;
    auto first = cast<LinearOp>(lins.front());
    for (Operation *op : lins)
      if (sameProjectionSet(first, cast<LinearOp>(op)))
        same.push_back(op);
    if (same.size() >= 2)
      out[same.front()] = same;
  }
  return out;
}

DenseMap<Operation *, Operation *> fuseResidualAdds(Block &body) {
  DenseMap<Operation *, Operation *> out;
  if (!intFromEnv("K3C_FUSE_RESIDUAL", 1))
    return out;
  for (Operation &op : body.without_terminator()) {
    auto lin = dyn_cast<LinearOp>(op);
    if (!lin || !lin.getResult().hasOneUse())
      continue;
    auto add = dyn_cast<arith::AddFOp>(*lin.getResult().getUsers().begin());
    if (!add || add->getBlock() != &body || add.getType() != lin.getType())
      continue;
    Value other = add.getLhs() == lin.getResult() ? add.getRhs() : add.getLhs();
    if (other == lin.getResult())
      continue; // y + y
    Operation *def = other.getDefiningOp();
    if (def && (def->getBlock() != &body || !def->isBeforeInBlock(&op)))
      continue;
    out[&op] = add;
  }
  return out;
}

/// Whether `mix` may be computed inside the launch of the op that takes its
/// rows (GPU): its only user, neither a one-token prologue's, the mixed row
/// fitting a block's shared memory (32 KB), K3C_FUSE_ATTNRES_NORM not 0.
static bool mixInUserLaunch(AttnResOp mix, KernelBuilder &kb, const LowerState &st) {
  if (!kb.gpu() || !mix.getResult().hasOneUse() || st.oneTokenOps.contains(mix) ||
      !intFromEnv("K3C_FUSE_ATTNRES_NORM", 1))
    return false;
  auto t = cast<RankedTensorType>(mix.getType());
  return t.getDimSize(1) * t.getElementTypeBitWidth() / 8 <= 32768;
}

/// The RMSNorm that takes `mix`'s rows in the same launch on the GPU, or
/// null: the norm is its result's only user, in the same body, neither is
/// a one-token prologue's, and the mixed row fits a block's shared memory
/// (32 KB). That launch (a block per row) mixes the row into shared memory
/// in the result's type, then normalizes it from there: the same values as
/// the two launches, without the second launch or the mixed rows' global
/// round trip. K3C_FUSE_ATTNRES_NORM=0 keeps two launches.
static RMSNormOp attnResNorm(AttnResOp mix, KernelBuilder &kb, const LowerState &st) {
  if (!mixInUserLaunch(mix, kb, st))
    return {};
  auto norm = dyn_cast<RMSNormOp>(*mix.getResult().getUsers().begin());
  if (!norm || norm->getBlock() != mix->getBlock() || st.oneTokenOps.contains(norm))
    return {};
  return norm;
}

/// The RMSNorm that takes the last token rows of `mix` in one launch with
/// it on the GPU (the model's head: AttnRes, last_tokens, RMSNorm), or
/// null: as attnResNorm, with a last_tokens between them that is the mix's
/// only user and the norm's input. That launch has a block per sequence:
/// it finds the sequence's last row (a warp's prefix over the round's
/// lengths), mixes that row alone into shared memory in the result's type
/// and normalizes it into the norm's row: the same values as the three
/// launches, without the two others, the gather, and the mix of every
/// other row (8191 of 8192 in a one-prompt prefill). The default since
/// session 60 (built in session 57; H100: lm_head's launch at 128 sequences
/// 829 -> 811 us, the slice's greedy tokens and --check unchanged):
/// K3C_FUSE_HEAD=0 keeps the three launches (a 0/1 switch; with
/// K3C_FUSE_ATTNRES_NORM=0 off as well).
static bool fuseHead(KernelBuilder &kb) {
  return KernelBuilder::switchFromEnv("K3C_FUSE_HEAD", true) && kb.gpu();
}
static RMSNormOp attnResLastNorm(AttnResOp mix, KernelBuilder &kb, const LowerState &st) {
  if (!fuseHead(kb) || !mixInUserLaunch(mix, kb, st))
    return {};
  auto last = dyn_cast<LastTokensOp>(*mix.getResult().getUsers().begin());
  if (!last || last->getBlock() != mix->getBlock() || last.getInput() != mix.getResult() ||
      !last.getResult().hasOneUse())
    return {};
  auto norm = dyn_cast<RMSNormOp>(*last.getResult().getUsers().begin());
  if (!norm || norm->getBlock() != mix->getBlock() || st.oneTokenOps.contains(norm))
    return {};
  return norm;
}

/// The launch of attnResNorm / attnResLastNorm: block b mixes source row
/// `srcRow(b, tb)` into a shared row, then normalizes it into norm's row b.
static void attnResNormLaunch(KernelBuilder &kb, const LowerState &st, RMSNormOp norm,
                              AttnResOp mix,
                              const std::function<Value(Value, ThreadBlock &)> &srcRow,
                              StringRef name) {
  SmallVector<Value> src;
  for (Value v : mix.getSources())
    src.push_back(st.get(v));
  Value w = st.get(norm.getWeight()), y = st.get(norm.getResult());
  auto t = cast<RankedTensorType>(mix.getType());
  kb.blocks({kb.dim(y, 0)}, kRowThreads, [&](ValueRange bid, ThreadBlock &tb) {
    earlyForGemv(kb, tb, norm, y);
    Value at = srcRow(bid[0], tb);
    Value row = kb.shared(tb, {1, t.getDimSize(1)}, t.getElementType());
    attnResRow(kb, tb, src, at, st.get(mix.getNormWeight()), st.get(mix.getProjWeight()), row,
               kb.idx(0), mix.getEps().convertToDouble());
    kb.barrier(tb);
    rmsNormRow(kb, tb, row, kb.idx(0), w, y, bid[0], norm.getEps().convertToDouble());
  }, 0, name.str());
}

/// The row of sequence n's last token in a round of `lens` tokens a
/// sequence (the warps of the block sum the lengths before it).
static Value lastRowOf(KernelBuilder &kb, ThreadBlock &tb, Value lens, Value n) {
  return kb.sub(kb.add(kb.seqOffset(tb, lens, n), kb.seqLen(lens, n)), kb.idx(1));
}

std::optional<LogicalResult> lowerDenseFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  if (auto lin = dyn_cast<LinearOp>(op)) {
    if (auto it = st.gemvGroup.find(op); it != st.gemvGroup.end()) {
      // Several projections of one x: one GEMV launch at one token, one tile
      // launch above (the group's later linears are lowered here).
      Value x = st.get(lin.getInput());
      SmallVector<Value> ws, ys;
      for (Operation *o : it->second) {
        ws.push_back(st.get(cast<LinearOp>(o).getWeight()));
        ys.push_back(st.get(cast<LinearOp>(o).getResult()));
      }
      kb.ifThenElse(
          kb.ieq(kb.dim(x, 0), kb.idx(1)),
          [&] { gemvMulti(kb, x, ws, ys, prologueFor(kb, st, lin.getInput())); },
          [&] {
            Value splitWs; // the set's split-K workspace (linearSplitNeed)
            if (auto sc = st.scratch.find(op); sc != st.scratch.end() && !sc->second.empty())
              splitWs = sc->second[0];
            lowerLinearSet(kb, x, ws, ys, splitWs);
          });
      return success();
    }
    if (st.fusedAway.contains(op))
      return success(); // lowered with its activation or its projection group
    Value splitWs; // linearSplitNeed's workspace, where the linear has one
    if (auto it = st.scratch.find(op); it != st.scratch.end() && !it->second.empty())
      splitWs = it->second[0];
    // A KDA gate done in the store (fuseGateLinears).
    if (auto it = st.linearGate.find(op); it != st.linearGate.end()) {
      LinearMap map = kdaGateLinearMap(kb, it->second, st);
      lowerLinear(kb, st.get(lin.getInput()), st.get(lin.getWeight()), st.get(lin.getResult()),
                  {}, false, prologueFor(kb, st, lin.getInput()), splitWs, &map);
      return success();
    }
    // A residual add fused into the store (KernelsToLoops decides which):
    // the linear writes the sum straight into the add's buffer.
    if (auto it = st.residualAdd.find(op); it != st.residualAdd.end()) {
      auto add = cast<arith::AddFOp>(it->second);
      Value other = add.getLhs() == lin.getResult() ? add.getRhs() : add.getLhs();
      lowerLinear(kb, st.get(lin.getInput()), st.get(lin.getWeight()), st.get(add.getResult()),
                  st.get(other), false, prologueFor(kb, st, lin.getInput()), splitWs);
      return success();
    }
    lowerLinear(kb, st.get(lin.getInput()), st.get(lin.getWeight()), st.get(lin.getResult()), {},
                false, prologueFor(kb, st, lin.getInput()), splitWs);
    return success();
  }
  if (auto norm = dyn_cast<RMSNormOp>(op)) {
    // One block per row: block-wide sum of squares, then the row strided.
    // At one token a GEMV prologue may compute it instead (oneTokenChains).
    Value x = st.get(norm.getInput()), w = st.get(norm.getWeight()), y = st.get(norm.getResult());
    if (auto mix = norm.getInput().getDefiningOp<AttnResOp>(); mix && attnResNorm(mix, kb, st)) {
      attnResNormLaunch(kb, st, norm, mix, [](Value b, ThreadBlock &) { return b; },
                        "attn_res_rmsnorm");
      return success();
    }
    if (auto last = norm.getInput().getDefiningOp<LastTokensOp>()) {
      auto mix = last.getInput().getDefiningOp<AttnResOp>();
      if (mix && attnResLastNorm(mix, kb, st)) {
        Value lens = st.get(last.getSeqLens());
        attnResNormLaunch(kb, st, norm, mix,
                          [&](Value b, ThreadBlock &tb) { return lastRowOf(kb, tb, lens, b); },
                          "attn_res_last_rmsnorm");
        return success();
      }
    }
    unlessOneTokenPrologue(kb, st, op, kb.dim(x, 0), [&] {
      kb.blocks({kb.dim(x, 0)}, kRowThreads, [&](ValueRange bid, ThreadBlock &tb) {
        earlyForGemv(kb, tb, op, x);
        rmsNormRow(kb, tb, x, bid[0], w, y, bid[0], norm.getEps().convertToDouble());
      });
    });
    return success();
  }
  if (auto glu = dyn_cast<GluOp>(op)) {
    if (auto it = st.gluPair.find(op); it != st.gluPair.end()) {
      lowerLinearGlu(kb, glu, cast<LinearOp>(it->second.first), cast<LinearOp>(it->second.second),
                     st);
      return success();
    }
    lowerGluElementwise(kb, glu, st.get(glu.getGate()), st.get(glu.getUp()),
                        st.get(glu.getResult()));
    return success();
  }
  if (auto addf = dyn_cast<arith::AddFOp>(op)) {
    if (st.fusedAway.contains(op))
      return success(); // done by the linear it follows (residualAdd)
    Value a = st.get(addf.getLhs()), b = st.get(addf.getRhs()), y = st.get(addf.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      kb.storeF32(kb.fadd(kb.loadF32(a, iv), kb.loadF32(b, iv)), y, iv);
    });
    return success();
  }
  if (auto emb = dyn_cast<EmbeddingOp>(op)) {
    // The runtime checks ids against the vocabulary before launching.
    Value ids = st.get(emb.getIds()), table = st.get(emb.getTable()), y = st.get(emb.getResult());
    if (KernelBuilder::switchFromEnv("K3C_EMBED_ROWS", true) && kb.gpu()) {
      // The default since session 60 (built in session 57; K3C_EMBED_ROWS=0
      // keeps a thread an element; H100: 11.8 -> 7.3 us at 128 tokens): a block a
      // token, its id read once, the row copied in 16-byte vectors (the
      // default is a thread an element, each reading the id and 2 bytes:
      // 5.3 us at one token and 8.5 at 128 on an H100 for a few KB). The same
      // values (the table's elements, converted to y's type).
      const int64_t D = cast<MemRefType>(y.getType()).getDimSize(1);
      const int64_t vw = std::min(kb.vecWidth(table, D), kb.vecWidth(y, D));
      kb.blocks({kb.dim(y, 0)}, kRowThreads, [&](ValueRange bid, ThreadBlock &tb) {
        Value row = kb.toIndex(kb.load(ids, {bid[0]}));
        kb.loopStep(kb.mul(tb.tid, vw), kb.idx(D), kb.idx(tb.threads * vw), [&](Value c) {
          kb.storeVec(kb.loadVec(table, {row, c}, vw), y, {bid[0], c});
        });
      }, 0, "embed_rows");
      return success();
    }
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value row = kb.toIndex(kb.load(ids, {iv[0]}));
      kb.storeF32(kb.loadF32(table, {row, iv[1]}), y, iv);
    });
    return success();
  }
  if (auto last = dyn_cast<LastTokensOp>(op)) {
    if (auto mix = last.getInput().getDefiningOp<AttnResOp>(); mix && attnResLastNorm(mix, kb, st))
      return success(); // in its norm's launch
    Value x = st.get(last.getInput()), lens = st.get(last.getSeqLens()),
          y = st.get(last.getResult());
    if (kb.gpu() && !fuseHead(kb)) {
      // (The GPU's form with K3C_FUSE_HEAD=0: a thread an element, each
      // summing the lengths before its sequence.)
      kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
        Value row = kb.sub(kb.add(kb.seqOffset(lens, iv[0]), kb.seqLen(lens, iv[0])), kb.idx(1));
        kb.store(kb.load(x, {row, iv[1]}), y, iv);
      });
      return success();
    }
    // A block per sequence: its last row's index once (a warp's prefix over
    // the lengths on the GPU), then the row copied strided.
    kb.blocks({kb.dim(y, 0)}, kRowThreads, [&](ValueRange bid, ThreadBlock &tb) {
      Value row = lastRowOf(kb, tb, lens, bid[0]);
      kb.strided(tb, kb.idx(0), kb.dim(y, 1),
                 [&](Value c) { kb.store(kb.load(x, {row, c}), y, {bid[0], c}); });
    }, 0, "last_tokens");
    return success();
  }
  if (auto mix = dyn_cast<AttnResOp>(op)) {
    if (attnResNorm(mix, kb, st) || attnResLastNorm(mix, kb, st))
      return success(); // in its norm's launch
    // One block per row (attnResRow); at one token maybe a GEMV prologue.
    SmallVector<Value> src;
    for (Value v : mix.getSources())
      src.push_back(st.get(v));
    Value y = st.get(mix.getResult());
    unlessOneTokenPrologue(kb, st, op, kb.dim(y, 0), [&] {
      kb.blocks({kb.dim(y, 0)}, kRowThreads, [&](ValueRange bid, ThreadBlock &tb) {
        attnResRow(kb, tb, src, bid[0], st.get(mix.getNormWeight()), st.get(mix.getProjWeight()),
                   y, bid[0], mix.getEps().convertToDouble());
      });
    });
    return success();
  }
  return std::nullopt;
}

} // namespace k3c::lowering
