//===- Mla.cpp - gated MLA attention core over the latent cache -----------===//
//
// Kernel contract: docs/kernels.md. Phase 1 appends the new tokens' latent
// (RMSNorm'd c, raw k_pe) to each sequence's cache; phase 2 runs causal
// softmax attention of every new token over its sequence's cache in the
// latent space (kv_b absorbed into the query and the output: k_nope and v are
// never materialized) with an online softmax, and the optional sigmoid
// output gate. The reference rounds k_nope and v to the activation type;
// the absorbed form does not (exact in f32 builds, within bf16 tolerance in
// bf16 builds).
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

std::optional<LogicalResult> lowerMlaFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  auto attn = dyn_cast<MlaAttentionOp>(op);
  if (!attn)
    return std::nullopt;
  Value q = st.get(attn.getQ()), kv = st.get(attn.getKv()), kvNorm = st.get(attn.getKvNorm()),
        cache = st.get(attn.getCache()), cacheLens = st.get(attn.getCacheLens()),
        lens = st.get(attn.getSeqLens()), kvb = st.get(attn.getKvBProj()),
        out = st.get(attn.getResult());
  Value gate = attn.getGate() ? st.get(attn.getGate()) : Value();
  auto kvType = cast<MemRefType>(kv.getType());
  Type act = kvType.getElementType(), outType = cast<MemRefType>(out.getType()).getElementType();
  int64_t H = attn.getNumHeads(), nope = attn.getQkNopeHeadDim(), dv = attn.getVHeadDim();
  int64_t R = cast<MemRefType>(kvb.getType()).getDimSize(1);
  int64_t cd = kvType.getDimSize(1), rope = cd - R, qk = nope + rope;
  Value eps = kb.f32(attn.getNormEps().convertToDouble());
  Value scale = kb.f32(attn.getSoftmaxScale().convertToDouble());

  int64_t vwCache = kb.vecWidth(cache, cd), vwKvb = kb.vecWidth(kvb, R);
  if (R % vwCache)
    vwCache = 1;

  // Phase 1: one block per sequence appends its new tokens' latent (RMSNorm'd
  // c, rounded like the reference's norm, then raw k_pe) to its cache.
  kb.blocks({kb.dim(lens, 0)}, kMlaThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value n = bid[0];
    Value red = kb.shared(tb, {tb.warps}, kb.b.getF32Type());
    Value start = kb.seqOffset(lens, n), len = kb.seqLen(lens, n),
          past = kb.toIndex(kb.load(cacheLens, {n}));
    kb.loop(kb.idx(0), len, [&](Value t) {
      Value row = kb.add(start, t), pos = kb.add(past, t);
      Value inv = rowInvRms(kb, tb, kv, row, R, eps, red);
      kb.strided(tb, kb.idx(0), kb.idx(cd), [&](Value c) {
        Value v = kb.ifElse(
            kb.ult(c, kb.idx(R)),
            [&] {
              Value xn = kb.round(kb.fmul(kb.loadF32(kv, {row, c}), inv), act);
              return kb.fmul(xn, kb.loadF32(kvNorm, {c}));
            },
            [&] { return kb.loadF32(kv, {row, c}); });
        kb.storeF32(v, cache, {n, pos, c});
      });
    });
  });

  // Phase 2: one block per (token, head), absorbed into the latent space:
  //   q_abs = q_nope . W_k (R), scores = [q_abs, q_pe] . cache[s] * scale,
  //   o_lat = softmax-weighted sum of cache[s][:R] (online softmax: each warp
  //   streams its share of the cached positions keeping a running max, sum and
  //   o_lat, then the warps merge), out = W_v . o_lat, times the gate.
  int64_t cw = cd; // q_abs (R) then q_pe (rope)
  kb.blocks({kb.dim(q, 0), kb.idx(H)}, kMlaThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value row = bid[0], h = bid[1];
    Value qa = kb.shared(tb, {cw}, kb.b.getF32Type());
    Value acc = kb.shared(tb, {tb.warps, R}, kb.b.getF32Type());
    Value ml = kb.shared(tb, {2 * tb.warps}, kb.b.getF32Type());
    Value olat = kb.shared(tb, {R}, kb.b.getF32Type());
    // The row's sequence n and its first row.
    Value N = kb.dim(lens, 0);
    auto found = kb.loop(kb.idx(0), N, ValueRange{kb.idx(0), kb.idx(0), kb.idx(0)},
                         [&](Value i, ValueRange a) {
                           Value end = kb.add(a[0], kb.seqLen(lens, i));
                           Value in = kb.andi(kb.ule(a[0], row), kb.ult(row, end));
                           return SmallVector<Value>{end, kb.select(in, i, a[1]),
                                                     kb.select(in, a[0], a[2])};
                         });
    Value n = found[1], start = found[2];
    Value past = kb.toIndex(kb.load(cacheLens, {n}));
    Value visible = kb.add(kb.add(past, kb.sub(row, start)), kb.idx(1));
    Value qBase = kb.mul(h, qk), kRow0 = kb.mul(h, nope + dv), vRow0 = kb.add(kRow0, nope);

    // q_abs[r] = sum_i q_nope[i] W_kv_b[kRow0 + i, r]; q_pe copied.
    kb.strided(tb, kb.idx(0), kb.idx(R), [&](Value r) {
      Value a = kb.sum(kb.idx(0), kb.idx(nope), [&](Value i) {
        return kb.fmul(kb.loadF32(q, {row, kb.add(qBase, i)}),
                       kb.loadF32(kvb, {kb.add(kRow0, i), r}));
      });
      kb.store(a, qa, {r});
    });
    kb.strided(tb, kb.idx(0), kb.idx(rope), [&](Value c) {
      kb.store(kb.loadF32(q, {row, kb.add(kb.add(qBase, nope), c)}), qa, {kb.add(kb.idx(R), c)});
    });
    // Each warp clears its o_lat accumulator row.
    kb.loopStep(tb.lane, kb.idx(R), kb.idx(tb.lanes),
                [&](Value r) { kb.store(kb.f32(0.0), acc, {tb.warp, r}); });
    kb.barrier(tb);

    // Online softmax: warp w takes positions w, w + warps, ...
    auto mlState = kb.loopStep(
        tb.warp, visible, kb.idx(tb.warps), ValueRange{kb.f32(-INFINITY), kb.f32(0.0)},
        [&](Value s, ValueRange a) {
          Value score = kb.fmul(
              kb.warpDot(
                  tb, cd, vwCache, [&](Value c) { return kb.loadVec(cache, {n, s, c}, vwCache); },
                  [&](Value c) { return kb.loadVec(qa, {c}, vwCache); }),
              scale);
          Value m = kb.fmax(a[0], score);
          Value alpha = kb.exp(kb.fsub(a[0], m)), p = kb.exp(kb.fsub(score, m));
          kb.loopStep(kb.mul(tb.lane, vwCache), kb.idx(R), kb.idx(tb.lanes * vwCache),
                      [&](Value r) {
                        SmallVector<Value> cv = kb.loadVec(cache, {n, s, r}, vwCache);
                        for (int64_t j = 0; j < vwCache; ++j) {
                          Value rj = j ? kb.add(r, j) : r;
                          Value o = kb.load(acc, {tb.warp, rj});
                          kb.store(kb.fadd(kb.fmul(o, alpha), kb.fmul(p, cv[j])), acc,
                                   {tb.warp, rj});
                        }
                      });
          return SmallVector<Value>{m, kb.fadd(kb.fmul(a[1], alpha), p)};
        });
    kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
      kb.store(mlState[0], ml, {tb.warp});
      kb.store(mlState[1], ml, {kb.add(tb.warp, tb.warps)});
    });
    kb.barrier(tb);
    // Merge the warps.
    Value M = kb.f32(-INFINITY);
    for (int64_t w = 0; w < tb.warps; ++w)
      M = kb.fmax(M, kb.load(ml, {kb.idx(w)}));
    SmallVector<Value> wScale;
    Value L = kb.f32(0.0);
    for (int64_t w = 0; w < tb.warps; ++w) {
      wScale.push_back(kb.exp(kb.fsub(kb.load(ml, {kb.idx(w)}), M)));
      L = kb.fadd(L, kb.fmul(kb.load(ml, {kb.idx(tb.warps + w)}), wScale.back()));
    }
    kb.strided(tb, kb.idx(0), kb.idx(R), [&](Value r) {
      Value o = kb.f32(0.0);
      for (int64_t w = 0; w < tb.warps; ++w)
        o = kb.fadd(o, kb.fmul(kb.load(acc, {kb.idx(w), r}), wScale[w]));
      kb.store(kb.fdiv(o, L), olat, {r});
    });
    kb.barrier(tb);
    // out[row, h, j] = W_kv_b[vRow0 + j, :] . o_lat, a warp per j.
    kb.loopStep(tb.warp, kb.idx(dv), kb.idx(tb.warps), [&](Value j) {
      Value o = kb.warpDot(
          tb, R, vwKvb, [&](Value r) { return kb.loadVec(kvb, {kb.add(vRow0, j), r}, vwKvb); },
          [&](Value r) { return kb.loadVec(olat, {r}, vwKvb); });
      Value col = kb.add(kb.mul(h, dv), j);
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
        Value v = o;
        if (gate) {
          v = kb.round(v, outType);
          v = kb.fmul(v, kb.round(kb.sigmoid(kb.loadF32(gate, {row, col})), outType));
        }
        kb.storeF32(v, out, {row, col});
      });
    });
  });
  return success();
}

} // namespace k3c::lowering
