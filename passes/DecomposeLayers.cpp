//===- DecomposeLayers.cpp - L0 model ops -> L1 core ops ------------------===//
//
// --k3-decompose-layers: one rewrite pattern per model-level op, following
// spec §4 op by op. The reference executor implements the same math
// independently (models/Reference.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::k3 {
#define GEN_PASS_DEF_K3DECOMPOSELAYERSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::k3

using namespace mlir;
using namespace mlir::k3;

namespace {

/// Helpers to build core ops with the right result types.
struct Emitter {
  PatternRewriter &r;
  Location loc;
  int64_t tokens; // dim 0 of the layer input (usually dynamic)

  RankedTensorType act(int64_t width, Type elt) {
    return RankedTensorType::get({tokens, width}, elt);
  }
  Value linear(Value x, Value w, Type elt = nullptr) {
    auto wt = cast<RankedTensorType>(w.getType());
    if (!elt)
      elt = cast<RankedTensorType>(x.getType()).getElementType();
    return LinearOp::create(r, loc, act(wt.getDimSize(0), elt), x, w);
  }
  Value rmsnorm(Value x, Value w, double eps) {
    return RMSNormOp::create(r, loc, x.getType(), x, w, r.getF64FloatAttr(eps));
  }
  IntegerAttr i64(int64_t v) { return r.getI64IntegerAttr(v); }
  FloatAttr f64(double v) { return r.getF64FloatAttr(v); }
};

struct DecomposeKda : OpRewritePattern<KdaOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(KdaOp op, PatternRewriter &r) const override {
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    Emitter e{r, op.getLoc(), inType.getDimSize(0)};
    Value x = op.getInput(), lens = op.getSeqLens();
    int64_t h = op.getNumHeads(), d = op.getHeadDim(), p = h * d;
    // Projections, then causal conv + SiLU on q, k, v sharing one window state.
    Value proj[3] = {e.linear(x, op.getQProj()), e.linear(x, op.getKProj()),
                     e.linear(x, op.getVProj())};
    Value conv[3] = {op.getQConv(), op.getKConv(), op.getVConv()};
    Value state = op.getConvState(), act[3];
    for (int i = 0; i < 3; ++i) {
      auto c = ShortConvOp::create(r, e.loc, proj[i].getType(), state.getType(), proj[i],
                                   conv[i], state, lens, e.i64(i * p));
      act[i] = c.getResult();
      state = c.getNewConvState();
    }
    // Forget gate from the low-rank logits, beta logits.
    Value z = e.linear(e.linear(x, op.getFAProj()), op.getFBProj());
    Value g = KdaGateOp::create(r, e.loc, e.act(p, r.getF32Type()), z, op.getALog(),
                                op.getDtBias(), e.i64(h), op.getGateFormAttr(),
                                op.getGateLowerBoundAttr());
    Value beta = e.linear(x, op.getBProj());
    // q and k are normalized in fp32 and stay fp32 (fla/FlashKDA normalize
    // inside the kernel).
    Value q = L2NormOp::create(r, e.loc, e.act(p, r.getF32Type()), act[0], Value(), e.i64(d),
                               e.f64(1e-6), e.f64(1.0 / std::sqrt(static_cast<double>(d))));
    Value k = L2NormOp::create(r, e.loc, e.act(p, r.getF32Type()), act[1], Value(), e.i64(d),
                               e.f64(1e-6), e.f64(1.0));
    auto rule = DeltaRuleOp::create(r, e.loc, act[2].getType(), op.getState().getType(), q, k,
                                    act[2], g, beta, op.getState(), lens, e.i64(h),
                                    IntegerAttr(), IntegerAttr(), TypeAttr(), ChunkPathAttr(),
                                    UnitAttr());
    Value gate = op.getGProj() ? e.linear(x, op.getGProj())
                               : e.linear(e.linear(x, op.getGAProj()), op.getGBProj());
    Value on = GatedRMSNormOp::create(r, e.loc, rule.getResult().getType(), rule.getResult(),
                                      gate, op.getONorm(), op.getNormEpsAttr());
    Value y = e.linear(on, op.getOProj());
    r.replaceOp(op, {y, rule.getNewState(), state});
    return success();
  }
};

struct DecomposeMla : OpRewritePattern<GatedMlaOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatedMlaOp op, PatternRewriter &r) const override {
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    Emitter e{r, op.getLoc(), inType.getDimSize(0)};
    Value x = op.getInput();
    double eps = op.getNormEps().convertToDouble();
    Value q = op.getQProj()
                  ? e.linear(x, op.getQProj())
                  : e.linear(e.rmsnorm(e.linear(x, op.getQAProj()), op.getQANorm(), eps),
                             op.getQBProj());
    Value kv = e.linear(x, op.getKvAProj());
    Value gate = op.getGProj() ? e.linear(x, op.getGProj()) : Value();
    int64_t hv = op.getNumHeads() * op.getVHeadDim();
    auto attn = MlaAttentionOp::create(
        r, e.loc, e.act(hv, inType.getElementType()), op.getCache().getType(), q, kv,
        op.getKvANorm(), op.getCache(), op.getCacheLens(), op.getSeqLens(), op.getKvBProj(),
        gate, op.getBlockTable(), op.getNumHeadsAttr(), op.getQkNopeHeadDimAttr(),
        op.getVHeadDimAttr(), op.getSoftmaxScaleAttr(), op.getNormEpsAttr());
    Value y = e.linear(attn.getResult(), op.getOProj());
    r.replaceOp(op, {y, attn.getNewCache()});
    return success();
  }
};

struct DecomposeMoe : OpRewritePattern<LatentMoeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LatentMoeOp op, PatternRewriter &r) const override {
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    Emitter e{r, op.getLoc(), inType.getDimSize(0)};
    Value x = op.getInput();
    int64_t k = op.getTopK();
    auto idxType = RankedTensorType::get({e.tokens, k}, r.getI32Type());
    auto router = MoeRouterOp::create(r, e.loc, idxType, e.act(k, r.getF32Type()), x,
                                      op.getRouter(), op.getRouterBias(), op.getTopKAttr(),
                                      op.getScoreAttr(), op.getRenormalizeAttr(),
                                      op.getRoutedScalingFactorAttr());
    Value z = op.getLatentDown() ? e.linear(x, op.getLatentDown()) : x;
    int64_t width = cast<RankedTensorType>(z.getType()).getDimSize(1);
    auto slots = RankedTensorType::get({e.tokens, k, width}, inType.getElementType());
    Value y = ExpertMlpOp::create(r, e.loc, slots, z, router.getIndices(), op.getW1(),
                                  op.getW3(), op.getW2(), op.getActivationAttr(),
                                  op.getSituBetaAttr(), op.getSituLinearBetaAttr());
    Value u = MoeCombineOp::create(r, e.loc, z.getType(), y, router.getWeights());
    Value out = op.getLatentDown()
                    ? e.linear(e.rmsnorm(u, op.getLatentNorm(),
                                         op.getNormEps().convertToDouble()),
                               op.getLatentUp())
                    : u;
    if (op.getSharedGate()) {
      Value a = e.linear(x, op.getSharedGate()), b = e.linear(x, op.getSharedUp());
      Value hsh = GluOp::create(r, e.loc, a.getType(), a, b, op.getActivationAttr(),
                                op.getSituBetaAttr(), op.getSituLinearBetaAttr());
      Value sh = e.linear(hsh, op.getSharedDown());
      out = arith::AddFOp::create(r, e.loc, out, sh);
    }
    r.replaceOp(op, out);
    return success();
  }
};

struct DecomposeMlp : OpRewritePattern<MlpOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MlpOp op, PatternRewriter &r) const override {
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    Emitter e{r, op.getLoc(), inType.getDimSize(0)};
    Value a = e.linear(op.getInput(), op.getGate()), b = e.linear(op.getInput(), op.getUp());
    Value h = GluOp::create(r, e.loc, a.getType(), a, b, op.getActivationAttr(),
                            op.getSituBetaAttr(), op.getSituLinearBetaAttr());
    r.replaceOp(op, e.linear(h, op.getDown()));
    return success();
  }
};

struct DecomposeLmHead : OpRewritePattern<LmHeadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LmHeadOp op, PatternRewriter &r) const override {
    r.replaceOpWithNewOp<LinearOp>(op, op.getLogits().getType(), op.getInput(), op.getWeight());
    return success();
  }
};

struct K3DecomposeLayersPass
    : mlir::k3::impl::K3DecomposeLayersPassBase<K3DecomposeLayersPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposeLayersPatterns(patterns);
    // One sweep suffices: no pattern produces a model-level op.
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     GreedyRewriteConfig().enableFolding(false))))
      return signalPassFailure();
  }
};

} // namespace

void mlir::k3::populateDecomposeLayersPatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeKda, DecomposeMla, DecomposeMoe, DecomposeMlp, DecomposeLmHead>(
      patterns.getContext());
}
