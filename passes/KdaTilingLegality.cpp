//===- KdaTilingLegality.cpp - KDA chunk size under the decay bound -------===//
//
// --k3-kda-tiling-legality. The factorized chunk form (spec §4.4) scales keys
// by Γ = exp(G) and Γ⁻¹ = exp(-G) with G the within-chunk cumulative gate, so
// over a chunk of C tokens with g >= g_min the exponents reach ±C·|g_min|.
// Both must stay finite and normal in the dtype holding them, with a margin
// of 2^4 for the products they enter:
//
//     C·|g_min| <= min(ln(max finite), -ln(min normal)) - ln(16)
//
// bf16/f32: min(88.72, 87.34) - 2.77 = 84.57, so C = 16 is legal at g_min = -5
// (80) and C = 32 is not (160); f16: min(11.09, 9.70) - 2.77 = 6.93, so no
// multiple of 16 is legal at g_min = -5. C must be a multiple of the tensor
// core M tile (16). An unbounded gate (Kimi Linear's softplus form) takes the
// pairwise path: exp(G_i - G_j) with i >= j inside 16-token tiles is always
// <= 1, so no Γ⁻¹ is formed.
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
    if (forced < 0 || (forced > 0 && forced % kMmaTile != 0)) {
      getOperation().emitError() << "--k3-kda-tiling-legality: chunk-size " << forced
                                 << " is not a positive multiple of the tensor-core tile "
                                 << kMmaTile;
      return signalPassFailure();
    }
    bool failedAny = false;
    getOperation().walk([&](DeltaRuleOp op) {
      Builder b(ctx);
      std::optional<double> gmin = gateLowerBound(op.getG());
      int64_t chunk;
      ChunkPath path;
      if (!gmin) {
        // Unbounded gate: the pairwise path is safe for any C; tiles of 16.
        path = ChunkPath::pairwise;
        chunk = forced ? forced : 64;
        op.emitRemark() << "KDA gate has no lower bound (softplus form): chunk size " << chunk
                        << " uses the pairwise path (exp(G_i - G_j) inside " << kMmaTile
                        << "-token tiles, no Γ⁻¹), since exp(C·|g|) is unbounded";
      } else {
        double a = std::fabs(*gmin);
        path = ChunkPath::factorized;
        if (forced) {
          chunk = forced;
          if (chunk * a > bound) {
            op.emitError() << "chunk size " << chunk << " is illegal for gate lower bound "
                           << *gmin << " with Γ held in " << gamma << ": C·|g_min| = "
                           << chunk * a << " exceeds the bound " << bound
                           << " (exp(C·|g_min|) must stay finite and normal in " << gamma
                           << " with a 2^4 margin)";
            failedAny = true;
            return;
          }
        } else {
          chunk = 0;
          for (int64_t c : {64, 32, 16})
            if (c * a <= bound) {
              chunk = c;
              break;
            }
          if (!chunk) {
            op.emitError() << "no legal chunk size for gate lower bound " << *gmin
                           << " with Γ held in " << gamma << ": even C = " << kMmaTile
                           << " gives C·|g_min| = " << kMmaTile * a << " above the bound "
                           << bound << "; hold Γ in a wider type (gamma-type=f32)";
            failedAny = true;
            return;
          }
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
