//===- Mla.cpp - gated MLA attention core over the latent cache -----------===//
//
// Kernel contract: docs/kernels.md. Phase 1 appends the new tokens' latent
// (RMSNorm'd c, raw k_pe) to each sequence's cache; phase 2 runs causal
// softmax attention of every new token over its sequence's cache, with k_nope
// and v recomputed from the cached latent through kv_b (rounded to the
// activation type, as the reference's kv_b projection is), and the optional
// sigmoid output gate.
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

  // Phase 1: append (n, channel) over the sequence's new tokens.
  kb.parallel({kb.dim(lens, 0), kb.idx(cd)}, [&](ValueRange iv) {
    Value n = iv[0], c = iv[1];
    Value start = kb.seqOffset(lens, n), len = kb.seqLen(lens, n),
          past = kb.toIndex(kb.load(cacheLens, {n}));
    kb.loop(kb.idx(0), len, [&](Value t) {
      Value row = kb.add(start, t), pos = kb.add(past, t);
      Value v = kb.ifElse(
          kb.ult(c, kb.idx(R)),
          [&] { // latent channel: RMSNorm'd, rounded like the reference's norm
            Value ss = kb.sum(kb.idx(0), kb.idx(R), [&](Value i) {
              Value e = kb.loadF32(kv, {row, i});
              return kb.fmul(e, e);
            });
            Value inv = kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(R))), eps));
            Value xn = kb.round(kb.fmul(kb.loadF32(kv, {row, c}), inv), act);
            return kb.fmul(xn, kb.loadF32(kvNorm, {c}));
          },
          [&] { return kb.loadF32(kv, {row, c}); }); // k_pe: raw
      kb.storeF32(v, cache, {n, pos, c});
    });
  });

  // Phase 2: one iteration per (sequence, head, value channel).
  kb.parallel({kb.dim(lens, 0), kb.idx(H), kb.idx(dv)}, [&](ValueRange iv) {
    Value n = iv[0], h = iv[1], j = iv[2];
    Value start = kb.seqOffset(lens, n), len = kb.seqLen(lens, n),
          past = kb.toIndex(kb.load(cacheLens, {n}));
    Value kRow0 = kb.mul(h, nope + dv), vRow = kb.add(kb.add(kb.mul(h, nope + dv), nope), j);
    // Up-projection of cached latent s through kv_b row `r`, rounded.
    auto up = [&](Value s, Value r) {
      Value acc = kb.sum(kb.idx(0), kb.idx(R), [&](Value i) {
        return kb.fmul(kb.loadF32(cache, {n, s, i}), kb.loadF32(kvb, {r, i}));
      });
      return kb.round(acc, act);
    };
    kb.loop(kb.idx(0), len, [&](Value t) {
      Value row = kb.add(start, t), visible = kb.add(kb.add(past, t), kb.idx(1));
      Value qBase = kb.mul(h, qk);
      auto score = [&](Value s) {
        Value dn = kb.sum(kb.idx(0), kb.idx(nope), [&](Value i) {
          return kb.fmul(kb.loadF32(q, {row, kb.add(qBase, i)}), up(s, kb.add(kRow0, i)));
        });
        Value dr = kb.sum(kb.idx(0), kb.idx(rope), [&](Value i) {
          return kb.fmul(kb.loadF32(q, {row, kb.add(kb.add(qBase, nope), i)}),
                         kb.loadF32(cache, {n, s, kb.add(kb.idx(R), i)}));
        });
        return kb.fmul(kb.fadd(dn, dr), scale);
      };
      Value mx = kb.loop(kb.idx(0), visible, ValueRange{kb.f32(-INFINITY)},
                         [&](Value s, ValueRange a) {
                           return SmallVector<Value>{kb.fmax(a[0], score(s))};
                         })[0];
      auto sums = kb.loop(kb.idx(0), visible, ValueRange{kb.f32(0.0), kb.f32(0.0)},
                          [&](Value s, ValueRange a) {
                            Value p = kb.exp(kb.fsub(score(s), mx));
                            return SmallVector<Value>{kb.fadd(a[0], p),
                                                      kb.fadd(a[1], kb.fmul(p, up(s, vRow)))};
                          });
      Value o = kb.fdiv(sums[1], sums[0]);
      Value col = kb.add(kb.mul(h, dv), j);
      if (gate) {
        o = kb.round(o, outType);
        o = kb.fmul(o, kb.round(kb.sigmoid(kb.loadF32(gate, {row, col})), outType));
      }
      kb.storeF32(o, out, {row, col});
    });
  });
  return success();
}

} // namespace k3c::lowering
