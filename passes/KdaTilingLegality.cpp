//===- KdaTilingLegality.cpp - KDA chunk size under the decay bound -------===//
//
// --k3-kda-tiling-legality. The factorized chunk form (spec §4.4) scales keys
// by Γ = exp(G) and Γ⁻¹ = exp(-G) with G the cumulative gate from a
// reference row, so over T tokens with g >= g_min the exponents reach
// ±T·|g_min|. Both must stay finite and normal in the dtype holding them,
// with a margin of 2^4 for the products they enter:
//
//     T·|g_min| <= min(ln(max finite), -ln(min normal)) - ln(16)
//
// bf16/f32: min(88.72, 87.34) - 2.77 = 84.57; f16: min(11.09, 9.70) - 2.77 =
// 6.93. The kernels form Γ⁻¹ over one 16-token tile at most (the tensor-core
// M tile): a chunk of C = 16 is one tile; a longer chunk (C = 32 or 64,
// chunk-size) forms its intra-chunk products per 16-token sub-block, each
// referenced to its row tile's first token (q_i k_j exp(G_i - G_j) =
// (q_i exp(G_i - G_b)) (k_j exp(G_b - G_j)), b the first row of i's tile:
// the second factor is at most exp(16·|g_min|) for j in that tile and at
// most 1 before it). So the bound applies to T = 16 whatever C: legal at
// g_min = -5 in bf16/f32 (80), not in f16. An unbounded gate (Kimi Linear's
// softplus form) takes the pairwise path: exp(G_i - G_j) with i >= j is
// always <= 1, so no Γ⁻¹ is formed.
//
// C is 16 unless chunk-size forces 32 or 64: the tensor-core recurrence
// takes 16-token chunks; longer ones run the chunk's prep at that size
// (fewer, larger sequential steps) and the exact FMA recurrence.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <optional>

namespace mlir::k3 {
#define GEN_PASS_DEF_K3KDATILINGLEGALITYPASS
#include "passes/Passes.h.inc"
} // namespace mlir::k3

using namespace mlir;
using namespace mlir::k3;

namespace {

constexpr int64_t kMmaTile = 16;
constexpr double kMarginLog = 2.772588722239781; // ln(16)

/// The exponent bound B of a dtype: C·|g_min| <= B.
double exponentBound(FloatType t) {
  const llvm::fltSemantics &sem = t.getFloatSemantics();
  double maxLog = std::log(llvm::APFloat::getLargest(sem).convertToDouble());
  double minLog = -std::log(llvm::APFloat::getSmallestNormalized(sem).convertToDouble());
  return std::min(maxLog, minLog) - kMarginLog;
}

/// The gate's lower bound if `g` comes from a bounded k3.kda_gate (looked for
/// through kernel boundaries: fused IR is decided as before its fusion).
std::optional<double> gateLowerBound(Value g) {
  auto gate = throughKernels(g).getDefiningOp<KdaGateOp>();
  if (!gate || gate.getGateForm() != GateForm::bounded_sigmoid || !gate.getLowerBound())
    return std::nullopt;
  return gate.getLowerBound()->convertToDouble();
}

struct K3KdaTilingLegalityPass
    : mlir::k3::impl::K3KdaTilingLegalityPassBase<K3KdaTilingLegalityPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    FloatType gamma;
    if (gammaType == "bf16")
      gamma = BFloat16Type::get(ctx);
    else if (gammaType == "f16")
      gamma = Float16Type::get(ctx);
    else if (gammaType == "f32")
      gamma = Float32Type::get(ctx);
    else {
      getOperation().emitError() << "--k3-kda-tiling-legality: gamma-type must be bf16, f16 "
                                    "or f32, got '"
                                 << gammaType << "'";
      return signalPassFailure();
    }
    const double bound = exponentBound(gamma);
    const int64_t forced = chunkSize;
    if (forced != 0 && forced != kMmaTile && forced != 2 * kMmaTile && forced != 4 * kMmaTile) {
      getOperation().emitError() << "--k3-kda-tiling-legality: chunk-size " << forced
                                 << " is not 16, 32 or 64 (multiples of the tensor-core tile "
                                 << kMmaTile << " whose chunk prep fits shared memory)";
      return signalPassFailure();
    }
    const int64_t chunk = forced ? forced : kMmaTile;
    bool failedAny = false;
    getOperation().walk([&](DeltaRuleOp op) {
      Builder b(ctx);
      std::optional<double> gmin = gateLowerBound(op.getG());
      ChunkPath path;
      if (!gmin) {
        // Unbounded gate: the pairwise path is safe for any C.
        path = ChunkPath::pairwise;
        op.emitRemark() << "KDA gate has no lower bound (softplus form): chunk size " << chunk
                        << " uses the pairwise path (exp(G_i - G_j), no Γ⁻¹), since "
                           "exp(C·|g|) is unbounded";
      } else {
        path = ChunkPath::factorized;
        // Γ⁻¹ spans one 16-token tile whatever the chunk (sub-blocks past it).
        const double a = std::fabs(*gmin);
        if (kMmaTile * a > bound) {
          op.emitError() << "no legal chunk tiling for gate lower bound " << *gmin
                         << " with Γ held in " << gamma << ": a " << kMmaTile
                         << "-token tile gives T·|g_min| = " << kMmaTile * a
                         << " above the bound " << bound
                         << " (exp(T·|g_min|) must stay finite and normal in " << gamma
                         << " with a 2^4 margin); hold Γ in a wider type (gamma-type=f32)";
          failedAny = true;
          return;
        }
      }
      op.setChunkSizeAttr(b.getI64IntegerAttr(chunk));
      op.setTileAttr(b.getI64IntegerAttr(kMmaTile));
      op.setGammaTypeAttr(TypeAttr::get(gamma));
      op.setPathAttr(ChunkPathAttr::get(ctx, path));
      op.setVarlenMasked(true);
    });
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
