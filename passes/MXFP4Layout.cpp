//===- MXFP4Layout.cpp - MXFP4 expert weights in the kernel layout --------===//
//
// --k3-mxfp4-layout: every MXFP4 argument of a function gets the kernel
// layout #k3.mxfp4_layout<n_tile = 8, k_tile = KT>; uses see the new type.
// The byte permutation itself lives in models/MXFP4Layout.h, shared with the
// runtime's repacker.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "models/MXFP4Layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::k3 {
#define GEN_PASS_DEF_K3MXFP4LAYOUTPASS
#include "passes/Passes.h.inc"
} // namespace mlir::k3

using namespace mlir;
using namespace mlir::k3;

namespace {

struct K3MXFP4LayoutPass : mlir::k3::impl::K3MXFP4LayoutPassBase<K3MXFP4LayoutPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    getOperation().walk([&](func::FuncOp fn) {
      if (fn.isExternal())
        return;
      SmallVector<Type> inputs(fn.getArgumentTypes());
      bool changed = false;
      for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
        auto t = dyn_cast<MXFP4Type>(arg.getType());
        if (!t || t.getLayout())
          continue;
        int64_t k = t.getShape().back();
        auto layout = MXFP4LayoutAttr::get(ctx, 8, k3c::mxfp4::chooseKTile(k));
        auto nt = MXFP4Type::getChecked([&] { return fn.emitError(); }, ctx, t.getShape(),
                                        layout);
        if (!nt)
          return signalPassFailure();
        arg.setType(nt);
        inputs[i] = nt;
        changed = true;
      }
      if (changed)
        fn.setFunctionType(FunctionType::get(ctx, inputs, fn.getResultTypes()));
    });
  }
};

} // namespace
