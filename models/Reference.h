//===- Reference.h - the golden CPU reference executor ----------*- C++ -*-===//
//
// Runs a config + checkpoint by the spec's math (spec §3-§4), written for
// clarity and independent of the compiler's lowering code: KDA token by
// token, MLA as plain softmax attention over the recomputed cache, AttnRes,
// router top-k, SiTU, dequantized experts. Dot products accumulate in fp64.
//
// Precision::BF16 rounds to bf16 at the spec's rounding points (the model's
// contract); Precision::F32 keeps every intermediate in fp32 (for comparing
// fp32 kernels at 1e-5).
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

enum class Precision { BF16, F32 };

/// Everything a sequence carries between forwards.
struct SequenceState {
  std::vector<std::vector<float>> kda;  ///< per KDA layer: [H, dv, dk] (Sᵀ layout)
  std::vector<std::vector<float>> conv; ///< per KDA layer: [W-1, 3*P] (q | k | v)
  std::vector<std::vector<float>> mla;  ///< per MLA layer: [length, R + rope]
  int64_t length = 0;                   ///< tokens seen so far
};

/// Called with (layer, "attn" | "ffn", sublayer output [T, D]) and (layer,
/// "stream", the residual stream / running block sum after the layer).
using TraceFn = std::function<void(int64_t, const char *, const std::vector<float> &)>;

class Reference {
public:
  Reference(ModelConfig config, WeightsF32 weights, Precision precision = Precision::BF16);

  const ModelConfig &config() const { return cfg; }
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
  using Vec = std::vector<float>;
  float R(double x) const;
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
};

/// Convenience: open a checkpoint directory (config.json + safetensors) and
/// build its reference executor.
Reference loadReference(const std::string &checkpointDir, Precision precision,
                        bool progress = false);

} // namespace k3c

#endif // K3C_MODELS_REFERENCE_H
