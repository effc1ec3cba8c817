//===- Dense.cpp - linear, norms, activations, AttnRes, gathers -----------===//
//
// Kernel contracts: docs/kernels.md. Every output element is one parallel
// iteration; reductions run in index order in fp32; results round once to
// their storage type (the reference's rounding points, spec §4.1).
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {


std::optional<LogicalResult> lowerDenseFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  if (auto lin = dyn_cast<LinearOp>(op)) {
    // y[t, o] = sum_i x[t, i] W[o, i]
    Value x = st.get(lin.getInput()), w = st.get(lin.getWeight()), y = st.get(lin.getResult());
    Value K = kb.dim(w, 1);
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value acc = kb.sum(kb.idx(0), K, [&](Value i) {
        return kb.fmul(kb.loadF32(x, {iv[0], i}), kb.loadF32(w, {iv[1], i}));
      });
      kb.storeF32(acc, y, {iv[0], iv[1]});
    });
    return success();
  }
  if (auto norm = dyn_cast<RMSNormOp>(op)) {
    // KimiRMSNorm: x * rsqrt(mean x^2 + eps), rounded to x's type, times w.
    Value x = st.get(norm.getInput()), w = st.get(norm.getWeight()), y = st.get(norm.getResult());
    Type xt = cast<MemRefType>(x.getType()).getElementType();
    Value D = kb.dim(x, 1);
    int64_t d = cast<MemRefType>(x.getType()).getDimSize(1);
    kb.parallel({kb.dim(x, 0), D}, [&](ValueRange iv) {
      Value ss = kb.sum(kb.idx(0), D, [&](Value i) {
        Value v = kb.loadF32(x, {iv[0], i});
        return kb.fmul(v, v);
      });
      Value inv = kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(d))),
                                   kb.f32(norm.getEps().convertToDouble())));
      Value xn = kb.round(kb.fmul(kb.loadF32(x, {iv[0], iv[1]}), inv), xt);
      kb.storeF32(kb.fmul(xn, kb.loadF32(w, {iv[1]})), y, {iv[0], iv[1]});
    });
    return success();
  }
  if (auto glu = dyn_cast<GluOp>(op)) {
    Value a = st.get(glu.getGate()), b = st.get(glu.getUp()), y = st.get(glu.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value v = kb.glu(glu.getActivation(), glu.getSituBeta(), glu.getSituLinearBeta(),
                           kb.loadF32(a, iv), kb.loadF32(b, iv));
      kb.storeF32(v, y, iv);
    });
    return success();
  }
  if (auto addf = dyn_cast<arith::AddFOp>(op)) {
    Value a = st.get(addf.getLhs()), b = st.get(addf.getRhs()), y = st.get(addf.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      kb.storeF32(kb.fadd(kb.loadF32(a, iv), kb.loadF32(b, iv)), y, iv);
    });
    return success();
  }
  if (auto emb = dyn_cast<EmbeddingOp>(op)) {
    // The runtime checks ids against the vocabulary before launching.
    Value ids = st.get(emb.getIds()), table = st.get(emb.getTable()), y = st.get(emb.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value row = kb.toIndex(kb.load(ids, {iv[0]}));
      kb.storeF32(kb.loadF32(table, {row, iv[1]}), y, iv);
    });
    return success();
  }
  if (auto last = dyn_cast<LastTokensOp>(op)) {
    Value x = st.get(last.getInput()), lens = st.get(last.getSeqLens()),
          y = st.get(last.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value row = kb.sub(kb.add(kb.seqOffset(lens, iv[0]), kb.seqLen(lens, iv[0])), kb.idx(1));
      kb.store(kb.load(x, {row, iv[1]}), y, iv);
    });
    return success();
  }
  if (auto mix = dyn_cast<AttnResOp>(op)) {
    // Spec §4.6: scores of the RMS-normalized sources against w_norm * w_proj,
    // softmax over sources in fp32, mix of the raw sources.
    SmallVector<Value> src;
    for (Value v : mix.getSources())
      src.push_back(st.get(v));
    Value wn = st.get(mix.getNormWeight()), wp = st.get(mix.getProjWeight()),
          y = st.get(mix.getResult());
    int64_t d = cast<MemRefType>(y.getType()).getDimSize(1);
    Value D = kb.idx(d), eps = kb.f32(mix.getEps().convertToDouble());
    kb.parallel({kb.dim(y, 0), D}, [&](ValueRange iv) {
      SmallVector<Value> scores;
      for (Value s : src) {
        Value ss = kb.sum(kb.idx(0), D, [&](Value i) {
          Value v = kb.loadF32(s, {iv[0], i});
          return kb.fmul(v, v);
        });
        Value inv = kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(d))), eps));
        Value dot = kb.sum(kb.idx(0), D, [&](Value i) {
          Value q = kb.fmul(kb.loadF32(wn, {i}), kb.loadF32(wp, {kb.idx(0), i}));
          return kb.fmul(kb.fmul(kb.loadF32(s, {iv[0], i}), inv), q);
        });
        scores.push_back(dot);
      }
      Value mx = kb.f32(-INFINITY);
      for (Value s : scores)
        mx = kb.fmax(mx, s);
      Value z = kb.f32(0.0), acc = kb.f32(0.0);
      SmallVector<Value> e;
      for (Value s : scores) {
        e.push_back(kb.exp(kb.fsub(s, mx)));
        z = kb.fadd(z, e.back());
      }
      for (auto [w, s] : llvm::zip(e, src))
        acc = kb.fadd(acc, kb.fmul(kb.fdiv(w, z), kb.loadF32(s, {iv[0], iv[1]})));
      kb.storeF32(acc, y, {iv[0], iv[1]});
    });
    return success();
  }
  return std::nullopt;
}

} // namespace k3c::lowering
