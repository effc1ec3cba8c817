//===- Config.h - Kimi K3 / Kimi Linear model configuration -----*- C++ -*-===//
//
// Reads a Hugging Face `config.json` as published: the K3 wrapper
// (`model_type: kimi_k3` with a `text_config`) or a plain `kimi_linear`
// config. Every field is validated; an inconsistent or unsupported config is
// rejected with an error naming the field and its value.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_CONFIG_H
#define K3C_MODELS_CONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace k3c {

enum class AttnKind { KDA, MLA };
enum class FfnKind { Dense, MoE };
enum class Act { SiTU, SwiGLU };

struct ModelConfig {
  std::string source;       ///< the file it was read from (for messages)
  std::string modelType;    ///< "kimi_k3" or "kimi_linear"
  std::string weightPrefix; ///< "language_model." for the K3 wrapper, else ""

  int64_t vocabSize = 0, hiddenSize = 0, numLayers = 0;
  double rmsNormEps = 1e-5;
  int64_t maxPositions = 0;
  bool tieWordEmbeddings = false;
  int64_t bosTokenId = -1, eosTokenId = -1, padTokenId = -1;

  Act act = Act::SiTU;
  double situBeta = 4.0, situLinearBeta = 25.0;

  // KDA (linear_attn_config)
  int64_t kdaHeads = 0, kdaHeadDim = 0, convKernel = 0;
  std::optional<double> gateLowerBound; ///< set: K3 bounded gate; unset: softplus
  bool fullRankGate = false;            ///< false: low-rank g_a/g_b (rank = head_dim)
  int64_t gateRank() const { return kdaHeadDim; }

  // MLA
  int64_t mlaHeads = 0, qLoraRank = 0 /*0: direct q_proj*/, kvLoraRank = 0;
  int64_t qkNopeHeadDim = 0, qkRopeHeadDim = 0, vHeadDim = 0;
  bool mlaOutputGate = false;
  double mlaNormEps = 1e-6;

  // FFN / MoE
  int64_t firstKDenseReplace = 0, intermediateSize = 0, moeLayerFreq = 1;
  int64_t numExperts = 0, topK = 0, numSharedExperts = 0, moeIntermediateSize = 0;
  int64_t latentDim = 0; ///< routed_expert_hidden_size; 0: experts at full width
  bool latentNorm = false;
  std::string routerScore = "sigmoid";
  bool renormalize = true;
  double routedScalingFactor = 1.0;
  bool routerBias = true; ///< noaux_tc: e_score_correction_bias selects
  bool expertsMxfp4 = false;

  int64_t attnResBlockSize = 0; ///< 0: plain pre-norm residual (Kimi Linear)

  std::vector<AttnKind> attn; ///< per layer, 0-based
  std::vector<FfnKind> ffn;   ///< per layer, 0-based

  // Derived quantities.
  int64_t kdaProjDim() const { return kdaHeads * kdaHeadDim; }
  int64_t qkHeadDim() const { return qkNopeHeadDim + qkRopeHeadDim; }
  int64_t mlaCacheDim() const { return kvLoraRank + qkRopeHeadDim; }
  int64_t expertWidth() const { return latentDim ? latentDim : hiddenSize; }
  int64_t sharedWidth() const { return numSharedExperts * moeIntermediateSize; }
  int64_t count(AttnKind k) const;
  int64_t count(FfnKind k) const;
  bool hasAttnRes() const { return attnResBlockSize > 0; }
  /// A_log entries in the checkpoint: H, or padded to a multiple of 128 (K3).
  int64_t aLogPaddedSize() const { return (kdaHeads + 127) / 128 * 128; }
  /// Index of layer `li` among the KDA (or MLA) layers.
  int64_t attnIndex(int64_t li) const;
};

/// Parses and validates a config.json. Throws k3c::Error naming the field.
ModelConfig loadConfig(const std::string &path);
ModelConfig parseConfig(const std::string &jsonText, const std::string &source);

/// Total parameter count (the checkpoint's logical elements, experts included).
int64_t parameterCount(const ModelConfig &c);

} // namespace k3c

#endif // K3C_MODELS_CONFIG_H
