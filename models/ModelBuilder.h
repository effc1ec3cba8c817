//===- ModelBuilder.h - model config -> k3 IR --------------------*- C++ -*-===//
//
// Emits one `k3` module per model: `@prefill` and `@decode` entry functions
// (token ids, per-sequence lengths, cache lengths, KDA/conv states and MLA
// caches in -> last-token logits and the new states out). Weights are function
// arguments carrying their checkpoint name in `k3.weight`; routed experts of
// a layer are one stacked argument (`!k3.mxfp4<E x N x K>` or a bf16 tensor).
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_MODELBUILDER_H
#define K3C_MODELS_MODELBUILDER_H

#include "models/Config.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace k3c {

struct BuildOptions {
  /// MLA cache capacity in tokens per sequence; 0 leaves it dynamic.
  int64_t maxContext = 0;
  /// Paged MLA cache: tokens a page (0: one contiguous `[N, maxContext]`
  /// cache a sequence). The caches become pools `[pages, P, R + rope]` and
  /// the entries take a `block_table` input `[N, ceil(maxContext / P)]`
  /// (needs maxContext > 0).
  int64_t mlaPage = 0;
  /// Activation (and conv window / MLA cache) dtype: bf16 (the model's
  /// contract) or f32 (for checking kernels against the fp32 reference at 1e-5).
  bool f32Activations = false;
  /// KDA recurrent state dtype: f32 (the reference's) or bf16 (FlashKDA's:
  /// half the state bytes a decode step reads and writes; the kernels update
  /// it in f32 and round it where they store it). Needs bf16 activations.
  bool bf16KdaState = false;
};

/// Registers the dialects the builder emits into `ctx`.
void loadBuilderDialects(mlir::MLIRContext &ctx);

/// Builds and verifies the model module. Diagnostics go through the context.
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext &ctx, const ModelConfig &config,
                                             const BuildOptions &options = {});

} // namespace k3c

#endif // K3C_MODELS_MODELBUILDER_H
