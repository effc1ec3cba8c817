//===- Reference.h - the golden CPU reference executor ----------*- C++ -*-===//
//
// Runs a config + checkpoint by the spec's math (spec §3-§4), written for
// clarity and independent of the compiler's lowering code: KDA token by
// token, MLA as plain softmax attention over the recomputed cache, AttnRes,
// router top-k, SiTU, dequantized experts. Dot products accumulate in fp64.
//
// Precision::BF16 rounds to bf16 at the spec's rounding points (the model's
// contract); Precision::F32 keeps every intermediate in fp32; Precision::F64
// rounds nothing (every intermediate stays fp64: the exact math that
// k3-run --check holds f32 builds to, at 1e-5 of the logits' scale).
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_REFERENCE_H
#define K3C_MODELS_REFERENCE_H

#include "models/Config.h"
#include "models/Weights.h"

#include <functional>
#include <string>
#include <vector>

namespace k3c {

enum class Precision { BF16, F32, F64 };

/// Everything a sequence carries between forwards.
/// Values are held in fp64 and rounded to the precision's dtype where the
/// model rounds (an F64 reference keeps them exact).
struct SequenceState {
  std::vector<std::vector<double>> kda;  ///< per KDA layer: [H, dv, dk] (Sᵀ layout)
  std::vector<std::vector<double>> conv; ///< per KDA layer: [W-1, 3*P] (q | k | v)
  std::vector<std::vector<double>> mla;  ///< per MLA layer: [length, R + rope]
  int64_t length = 0;                   ///< tokens seen so far
};

/// Called with (layer, "attn" | "ffn", sublayer output [T, D]) and (layer,
/// "stream", the residual stream / running block sum after the layer).
using TraceFn = std::function<void(int64_t, const char *, const std::vector<float> &)>;

/// For k3-run --check: the compiled model's expert ids for the
/// n-th MoE layer of a forward call with T tokens ([T, top-k]; empty: none).
using RoutingHint = std::function<std::vector<int32_t>(int64_t moeCall, int64_t T)>;

class Reference {
public:
  Reference(ModelConfig config, WeightsF32 weights, Precision precision = Precision::BF16);

  /// With a hint, a token whose compiled expert set differs from the
  /// reference's own takes the compiled one when every compiled expert
  /// scores (with the correction bias) within `tieTolerance` (relative to
  /// the k-th best score) of the reference's k-th best: a near tie that the
  /// build's rounding (bf16, or f32's summation orders) may flip either way.
  /// Anything further apart keeps the
  /// reference's own choice (and shows up as a difference).
  void setRoutingHint(RoutingHint hint, double tieTolerance = 5e-2) {
    routingHint = std::move(hint);
    tieTol = tieTolerance;
  }
  /// Tokens (per MoE layer) that took the compiled choice, and those whose
  /// compiled choice was too far from a tie to take.
  int64_t routingForced() const { return forced; }
  int64_t routingRefused() const { return refused; }
  /// The widest tie followed so far: the largest gap between a followed
  /// compiled expert's score and the reference's k-th best, relative to the
  /// k-th best (as the tolerance is).
  double routingWidestTie() const { return widestTie; }

  const ModelConfig &config() const { return cfg; }
  /// The rounding mode of later forward calls (one set of weights serves
  /// both: k3-run --check runs a bf16 build against both references).
  void setPrecision(Precision p) { precision = p; }
  /// The KDA state in bf16 (an artifact built with --kda-state-dtype=bf16):
  /// the BF16 reference rounds each layer's state to bf16 at the end of
  /// every forward call, where the kernels store it (they update it in
  /// fp32: after a decode token, at the end of a prefill launch); F32 and
  /// F64 keep it unrounded.
  void setKdaStateBf16(bool on) { kdaStateBf16 = on; }
  SequenceState newSequence() const;

  /// Runs `ids` (one sequence) after whatever `state` holds; returns logits
  /// [T, vocab] for every position. Throws k3c::Error on an out-of-vocabulary
  /// id or a sequence longer than max_position_embeddings.
  std::vector<float> forward(const std::vector<int64_t> &ids, SequenceState &state,
                             const TraceFn &trace = nullptr) const;

  /// Greedy generation: prefill `prompt`, then `steps` decode steps. Returns
  /// the generated ids; `logits` (if set) receives one [vocab] row per step.
  std::vector<int64_t> generateGreedy(const std::vector<int64_t> &prompt, int64_t steps,
                                      std::vector<std::vector<float>> *logits = nullptr) const;

private:
  using Vec = std::vector<double>;
  /// Rounds to the activation dtype (bf16, fp32, or not at all for F64).
  double R(double x) const;
  /// Rounds an fp32 intermediate of the kernels (the KDA state, normalized
  /// q/k, the gate): fp32 unless F64.
  double F(double x) const;
  const F32Tensor &w(const std::string &name) const;
  Vec linear(const Vec &x, int64_t rows, const F32Tensor &W, bool round = true) const;
  Vec rmsnorm(const Vec &x, int64_t rows, const F32Tensor &weight, double eps) const;
  Vec attnRes(const std::vector<const Vec *> &sources, int64_t T, const std::string &normName,
              const std::string &projName) const;
  Vec kda(int64_t li, const Vec &x, int64_t T, SequenceState &st) const;
  Vec mla(int64_t li, const Vec &x, int64_t T, SequenceState &st) const;
  Vec moe(int64_t li, const Vec &x, int64_t T) const;
  Vec dense(int64_t li, const Vec &x, int64_t T) const;
  Vec glu(const Vec &a, const Vec &b) const;

  ModelConfig cfg;
  WeightsF32 weights;
  Precision precision;
  RoutingHint routingHint;
  double tieTol = 5e-2;
  bool kdaStateBf16 = false;
  mutable int64_t moeCall = 0, forced = 0, refused = 0;
  mutable double widestTie = 0;
};

/// Convenience: open a checkpoint directory (config.json + safetensors) and
/// build its reference executor.
Reference loadReference(const std::string &checkpointDir, Precision precision,
                        bool progress = false);

} // namespace k3c

#endif // K3C_MODELS_REFERENCE_H
