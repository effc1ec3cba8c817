//===- SplitL2Norms.cpp - KDA q/k L2 norms as reduction + scaling ---------===//
//
// --k3-split-l2norms: every k3.l2norm that feeds a k3.delta_rule's q or k
// and widens its input (bf16 rows normalized into f32) becomes the pair
//
//   %r = k3.l2norm_inv %x      // [T, H] f32: 1 / sqrt(sum x^2 + eps)
//   %y = k3.l2norm %x, inv_norm %r
//
// with the same values. k3-fuse-kernels then puts the reduction in the
// convolutions' kernel (done in the convolution's store) and the scaling in
// the delta rule's kernel (done as the rule loads x): between the kernels
// cross the narrow rows and one f32 a (token, head) instead of f32 rows.
// Norms whose input is already f32 (the exact f32 build) save no bytes and
// are left alone.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::k3 {
#define GEN_PASS_DEF_K3SPLITL2NORMSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::k3

using namespace mlir;
using namespace mlir::k3;

namespace {

/// Whether `l2` should be split: it has no inverse norms yet, its result is
/// read only as a delta rule's q or k, and its input is narrower than it.
static bool splittable(L2NormOp l2) {
  if (l2.getInvNorm())
    return false;
  auto in = cast<ShapedType>(l2.getInput().getType());
  auto out = cast<ShapedType>(l2.getResult().getType());
  if (in.getElementTypeBitWidth() >= out.getElementTypeBitWidth())
    return false;
  if (l2.getResult().use_empty())
    return false;
  for (OpOperand &use : l2.getResult().getUses()) {
    auto rule = dyn_cast<DeltaRuleOp>(use.getOwner());
    if (!rule || (use.get() != rule.getQ() && use.get() != rule.getK()) ||
        rule.getKeyDim() != l2.getHeadDim())
      return false;
  }
  return true;
}

struct K3SplitL2NormsPass : mlir::k3::impl::K3SplitL2NormsPassBase<K3SplitL2NormsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<L2NormOp> todo;
    getOperation().walk([&](L2NormOp l2) {
      if (splittable(l2))
        todo.push_back(l2);
    });
    for (L2NormOp l2 : todo) {
      OpBuilder b(l2);
      auto in = cast<RankedTensorType>(l2.getInput().getType());
      int64_t heads = ShapedType::isDynamic(in.getDimSize(1))
                          ? ShapedType::kDynamic
                          : in.getDimSize(1) / l2.getHeadDim();
      auto invType = RankedTensorType::get({in.getDimSize(0), heads}, b.getF32Type());
      Value inv = L2NormInvOp::create(b, l2.getLoc(), invType, l2.getInput(),
                                      l2.getHeadDimAttr(), l2.getEpsAttr());
      l2.getInvNormMutable().assign(inv);
    }
  }
};

} // namespace
