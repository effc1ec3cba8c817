//===- DeploymentPlan.h - per-rank memory of an EP deployment ---*- C++ -*-===//
//
// What each rank of an expert-parallel group holds, in bytes, read from a
// k3 module's entry arguments (the weights and states the compiler hands
// the runtime: their dtypes, MXFP4 storage at 4.25 bits per weight with the
// E8M0 scales, bf16 or f32 elsewhere) and laid out as the runtime lays it
// out: the routed experts sharded over the ranks in home blocks of ⌈E/R⌉
// plus as many replica slots (runtime/ExpertParallel.h, expertSlots); every
// other weight replicated; per-sequence states for the artifact's capacity
// (sequences × context). `k3-compile --plan` / `--report --ep R` print it
// (docs/runtime.md, "Deployment plan").
//
//===----------------------------------------------------------------------===//

#ifndef K3C_PASSES_DEPLOYMENTPLAN_H
#define K3C_PASSES_DEPLOYMENTPLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::k3 {

/// The model's bytes by kind, from the @prefill entry's arguments.
struct ModelMemory {
  std::string modelType;
  int64_t layers = 0, moeLayers = 0;
  int64_t experts = 0;         ///< routed experts per MoE layer (E)
  int64_t expertBytes = 0;     ///< one expert of every MoE layer (w1 + w2 + w3)
  std::string expertDtype;     ///< "mxfp4" or "bf16"
  int64_t embedding = 0, lmHead = 0;
  int64_t attention = 0;       ///< KDA and MLA weights (self_attn.*)
  int64_t dense = 0;           ///< dense MLP, shared experts, router, latent projections
  int64_t other = 0;           ///< norms, AttnRes
  int64_t kdaStatePerSeq = 0;  ///< recurrent state
  std::string kdaStateDtype = "f32"; ///< its element type (f32 or bf16)
  int64_t convStatePerSeq = 0; ///< short-conv window
  int64_t mlaCachePerToken = 0; ///< latent cache, per sequence and token of context
  int64_t staticContext = 0;   ///< the MLA cache's compiled context (0: dynamic)
  int64_t replicated() const { return embedding + lmHead + attention + dense + other; }
};

/// Fails (with a message in `err`) when the module has no @prefill entry.
LogicalResult measureModel(ModuleOp module, ModelMemory &out, std::string &err);

/// One rank's bytes.
struct RankMemory {
  int64_t rank = 0;
  int64_t homeExperts = 0, replicaSlots = 0; ///< per MoE layer
  int64_t homeBytes = 0, replicaBytes = 0;   ///< routed experts, all MoE layers
  int64_t embedding = 0, lmHead = 0, attention = 0, dense = 0, other = 0;
  int64_t kdaState = 0, convState = 0, mlaCache = 0;
  int64_t weights() const {
    return homeBytes + replicaBytes + embedding + lmHead + attention + dense + other;
  }
  int64_t states() const { return kdaState + convState + mlaCache; }
  int64_t total() const { return weights() + states(); }
};

/// `cacheTokens` > 0: a paged MLA cache's pool of that many tokens instead
/// of seqs × context.
RankMemory planRank(const ModelMemory &m, int64_t ranks, int64_t rank, int64_t seqs,
                    int64_t context, int64_t cacheTokens = 0);

struct PlanOptions {
  int64_t ranks = 0;                 ///< per-rank detail for this R (0: none)
  std::vector<int64_t> table;        ///< summary rows for these R
  int64_t seqs = 16, context = 4096; ///< per rank
  int64_t cacheTokens = 0;           ///< a paged MLA cache's pool per rank (0: seqs x context)
  double capacity = 141e9;           ///< bytes per GPU
};

/// Prints the plan; fails (message in `err`) on a module without @prefill or
/// a rank count below 1.
LogicalResult printDeploymentPlan(ModuleOp module, const PlanOptions &o, llvm::raw_ostream &os,
                                  std::string &err);

} // namespace mlir::k3

#endif // K3C_PASSES_DEPLOYMENTPLAN_H
