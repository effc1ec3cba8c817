//===- LowerKernels.cpp - --k3-lower-kernels ------------------------------===//
//
// The kernel lowering of lowering/ as a pass: every distinct k3.kernel of
// the module becomes a loop function for the chosen target, and the module
// holds only those functions afterwards (what k3-compile --emit=loops
// prints), so k3-opt can lower and FileCheck one kernel at a time.
//
//===----------------------------------------------------------------------===//

#include "lowering/Lowering.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::k3 {
#define GEN_PASS_DEF_K3LOWERKERNELSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::k3

using namespace mlir;

namespace {

struct K3LowerKernelsPass : k3::impl::K3LowerKernelsPassBase<K3LowerKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    k3c::lowering::Target t;
    if (target == "host")
      t = k3c::lowering::Target::Host;
    else if (target == "sm_90a")
      t = k3c::lowering::Target::Gpu;
    else {
      module.emitError() << "--k3-lower-kernels: unknown target '" << target
                         << "' (expected host or sm_90a)";
      return signalPassFailure();
    }
    bool any = false;
    module.walk([&](k3::KernelOp) {
      any = true;
      return WalkResult::interrupt();
    });
    if (!any) {
      module.emitError() << "--k3-lower-kernels: the module holds no k3.kernel (run "
                            "--k3-pipeline or --k3-fuse-kernels first)";
      return signalPassFailure();
    }
    std::vector<k3c::lowering::KernelInfo> kernels;
    auto loops = k3c::lowering::lowerKernelsToLoops(module, kernels, t);
    if (failed(loops))
      return signalPassFailure();
    Block *body = module.getBody();
    for (Operation &op : llvm::make_early_inc_range(*body))
      op.erase();
    body->getOperations().splice(body->end(), (*loops)->getBody()->getOperations());
    // The calling convention's family on each function, for readers.
    for (const auto &k : kernels)
      if (auto fn = module.lookupSymbol<func::FuncOp>(k.name))
        fn->setAttr("k3.family", StringAttr::get(&getContext(), k.family));
  }
};

} // namespace
