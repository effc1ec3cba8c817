//===- Moe.cpp - router, grouped expert MLP (MXFP4), combine --------------===//
//
// Kernel contracts: docs/kernels.md. The router keeps its fp32 scores in a
// scratch buffer and selects top-k on score + bias (ties: lower expert id),
// slots in descending order; the expert MLP dequantizes MXFP4 weights in
// registers from the #k3.mxfp4_layout bytes.
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

SmallVector<ScratchNeed> scratchNeeds(Operation *op) {
  MLIRContext *ctx = op->getContext();
  if (auto r = dyn_cast<MoeRouterOp>(op)) {
    int64_t e = cast<RankedTensorType>(r.getWeight().getType()).getDimSize(0);
    return {ScratchNeed{{-1, e}, Float32Type::get(ctx)}};
  }
  if (auto x = dyn_cast<ExpertMlpOp>(op)) {
    auto res = cast<RankedTensorType>(x.getResult().getType());
    int64_t k = res.getDimSize(1), inter;
    if (auto m = dyn_cast<MXFP4Type>(x.getW1().getType()))
      inter = m.getShape()[1];
    else
      inter = cast<RankedTensorType>(x.getW1().getType()).getDimSize(1);
    return {ScratchNeed{{-1, k, inter}, res.getElementType()}};
  }
  return {};
}


std::optional<LogicalResult> lowerMoeFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  if (auto router = dyn_cast<MoeRouterOp>(op)) {
    Value x = st.get(router.getInput()), w = st.get(router.getWeight()),
          idx = st.get(router.getIndices()), wts = st.get(router.getWeights());
    Value bias = router.getBias() ? st.get(router.getBias()) : Value();
    Value scores = st.scratch[op][0];
    int64_t E = cast<MemRefType>(w.getType()).getDimSize(0);
    int64_t D = cast<MemRefType>(w.getType()).getDimSize(1), K = router.getTopK();
    bool sigmoid = router.getScore() == RouterScore::sigmoid;
    kb.parallel({kb.dim(x, 0)}, [&](ValueRange iv) {
      Value t = iv[0];
      kb.loop(kb.idx(0), kb.idx(E), [&](Value e) {
        Value l = kb.sum(kb.idx(0), kb.idx(D), [&](Value d) {
          return kb.fmul(kb.loadF32(x, {t, d}), kb.loadF32(w, {e, d}));
        });
        kb.store(sigmoid ? kb.sigmoid(l) : l, scores, {t, e});
      });
      if (!sigmoid) { // softmax over experts
        Value mx = kb.loop(kb.idx(0), kb.idx(E), ValueRange{kb.f32(-INFINITY)},
                           [&](Value e, ValueRange a) {
                             return SmallVector<Value>{kb.fmax(a[0], kb.load(scores, {t, e}))};
                           })[0];
        Value z = kb.sum(kb.idx(0), kb.idx(E), [&](Value e) {
          return kb.exp(kb.fsub(kb.load(scores, {t, e}), mx));
        });
        kb.loop(kb.idx(0), kb.idx(E), [&](Value e) {
          kb.store(kb.fdiv(kb.exp(kb.fsub(kb.load(scores, {t, e}), mx)), z), scores, {t, e});
        });
      }
      Type it = cast<MemRefType>(idx.getType()).getElementType();
      Value total = kb.f32(0.0);
      for (int64_t slot = 0; slot < K; ++slot) {
        auto best = kb.loop(kb.idx(0), kb.idx(E), ValueRange{kb.f32(-INFINITY), kb.idx(0)},
                            [&](Value e, ValueRange a) {
                              Value cand = kb.load(scores, {t, e});
                              if (bias)
                                cand = kb.fadd(cand, kb.loadF32(bias, {e}));
                              Value taken = arith::ConstantIntOp::create(kb.b, kb.loc, kb.b.getI1Type(), 0);
                              for (int64_t p = 0; p < slot; ++p) {
                                Value prev = kb.toIndex(kb.load(idx, {t, kb.idx(p)}));
                                taken = arith::OrIOp::create(kb.b, kb.loc, taken, kb.ieq(prev, e));
                              }
                              Value better = arith::AndIOp::create(
                                  kb.b, kb.loc, kb.fgt(cand, a[0]),
                                  arith::XOrIOp::create(
                                      kb.b, kb.loc, taken,
                                      arith::ConstantIntOp::create(kb.b, kb.loc, kb.b.getI1Type(), 1)));
                              return SmallVector<Value>{kb.select(better, cand, a[0]),
                                                        kb.select(better, e, a[1])};
                            });
        kb.store(arith::IndexCastOp::create(kb.b, kb.loc, it, best[1]), idx, {t, kb.idx(slot)});
        Value s = kb.load(scores, {t, best[1]});
        kb.store(s, wts, {t, kb.idx(slot)});
        total = kb.fadd(total, s);
      }
      Value scaling = kb.f32(router.getRoutedScalingFactor().convertToDouble());
      for (int64_t slot = 0; slot < K; ++slot) {
        Value s = kb.load(wts, {t, kb.idx(slot)});
        if (router.getRenormalize())
          s = kb.fdiv(s, kb.fadd(total, kb.f32(1e-20)));
        kb.store(kb.fmul(s, scaling), wts, {t, kb.idx(slot)});
      }
    });
    return success();
  }
  if (auto experts = dyn_cast<ExpertMlpOp>(op)) {
    Value z = st.get(experts.getInput()), idx = st.get(experts.getIndices()),
          y = st.get(experts.getResult());
    Value hid = st.scratch[op][0];
    auto res = cast<MemRefType>(y.getType());
    int64_t K = res.getDimSize(1), L = res.getDimSize(2);
    int64_t I = cast<MemRefType>(hid.getType()).getDimSize(2);
    // W[e, n, k] from a dense or MXFP4 stacked weight.
    auto weight = [&](Value tensor, Value e, Value n, Value k) -> Value {
      auto it = st.mxfp4.find(tensor);
      if (it != st.mxfp4.end())
        return kb.mxfp4Element(it->second, e, n, k);
      return kb.loadF32(st.get(tensor), {e, n, k});
    };
    Type act = res.getElementType();
    kb.parallel({kb.dim(z, 0), kb.idx(K), kb.idx(I)}, [&](ValueRange iv) {
      Value e = kb.toIndex(kb.load(idx, {iv[0], iv[1]}));
      Value a = kb.round(kb.sum(kb.idx(0), kb.idx(L), [&](Value l) {
        return kb.fmul(kb.loadF32(z, {iv[0], l}), weight(experts.getW1(), e, iv[2], l));
      }), act);
      Value b = kb.round(kb.sum(kb.idx(0), kb.idx(L), [&](Value l) {
        return kb.fmul(kb.loadF32(z, {iv[0], l}), weight(experts.getW3(), e, iv[2], l));
      }), act);
      kb.storeF32(kb.glu(experts.getActivation(), experts.getSituBeta(),
                             experts.getSituLinearBeta(), a, b),
                  hid, iv);
    });
    kb.parallel({kb.dim(z, 0), kb.idx(K), kb.idx(L)}, [&](ValueRange iv) {
      Value e = kb.toIndex(kb.load(idx, {iv[0], iv[1]}));
      Value acc = kb.sum(kb.idx(0), kb.idx(I), [&](Value i) {
        return kb.fmul(kb.loadF32(hid, {iv[0], iv[1], i}), weight(experts.getW2(), e, iv[2], i));
      });
      kb.storeF32(acc, y, iv);
    });
    return success();
  }
  if (auto combine = dyn_cast<MoeCombineOp>(op)) {
    Value x = st.get(combine.getInput()), w = st.get(combine.getWeights()),
          y = st.get(combine.getResult());
    int64_t K = cast<MemRefType>(x.getType()).getDimSize(1);
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value acc = kb.sum(kb.idx(0), kb.idx(K), [&](Value k) {
        return kb.fmul(kb.loadF32(x, {iv[0], k, iv[1]}), kb.load(w, {iv[0], k}));
      });
      kb.storeF32(acc, y, iv);
    });
    return success();
  }
  return std::nullopt;
}

} // namespace k3c::lowering
