//===- Passes.h - k3c transformation passes ---------------------*- C++ -*-===//

#ifndef K3C_PASSES_PASSES_H
#define K3C_PASSES_PASSES_H

#include "dialects/K3/IR/K3Ops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Pass/Pass.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace mlir::k3 {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Patterns of --k3-decompose-layers, for reuse in other pipelines.
void populateDecomposeLayersPatterns(RewritePatternSet &patterns);

/// The k3c compilation pipeline: decompose, KDA tiling legality, MXFP4
/// layout, (split L2 norms,) kernel fusion. Registered as --k3-pipeline.
struct PipelineOptions {
  int64_t chunkSize = 0;
  std::string gammaType = "bf16";
  bool report = false;
  bool kdaNormInChunk = false; ///< k3-fuse-kernels' kda-norm-in-chunk
  bool kdaOutNormInChunk = false; ///< k3-fuse-kernels' kda-out-norm-in-chunk
  bool kdaGateInChunk = false; ///< k3-fuse-kernels' kda-gate-in-chunk
  bool splitL2Norms = false;   ///< run k3-split-l2norms before the fusion
};
void buildK3Pipeline(OpPassManager &pm, const PipelineOptions &options = {});
void registerK3Pipelines();

/// Prints, for the @prefill entry of a fused module, every kernel launch per
/// layer with its estimates, then the distinct kernels and their use counts.
void printFusionReport(ModuleOp module, llvm::raw_ostream &os);

/// Cost estimates of one core op (per token of its dynamic dimension).
struct OpCost {
  int64_t flopsPerToken = 0;
};
OpCost estimateCost(Operation *op);

/// Bytes per token and weight bytes crossing a kernel's boundary.
int64_t valueBytesPerToken(Type t);
int64_t valueStaticBytes(Type t);

} // namespace mlir::k3

#endif // K3C_PASSES_PASSES_H
