//===- Weights.h - checkpoint tensor names, binding and loading -*- C++ -*-===//
//
// The one place that knows K3 / Kimi Linear checkpoint tensor names (spec
// §8). `expectedWeights` lists every tensor a config needs; `bindCheckpoint`
// matches a checkpoint against it and reports every missing, unexpected or
// mis-shaped tensor in one error; `loadWeightsF32` reads them as fp32
// (MXFP4 experts dequantized) for the reference executor.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_WEIGHTS_H
#define K3C_MODELS_WEIGHTS_H

#include "models/Config.h"
#include "models/Safetensors.h"
#include "support/Manifest.h"

#include <map>
#include <string>
#include <vector>

namespace k3c {

enum class WeightKind { Float, MXFP4Packed, MXFP4Scale };

struct WeightSpec {
  std::string name;                           ///< without the weight prefix
  std::vector<std::vector<int64_t>> shapes;   ///< accepted shapes (first = canonical)
  WeightKind kind = WeightKind::Float;
  DType storeType = DType::BF16;              ///< dtype the generator writes
  int64_t layer = -1;                         ///< decoder layer, -1 for globals
};

/// Every tensor the config needs, in a stable order.
std::vector<WeightSpec> expectedWeights(const ModelConfig &c);

/// Layer-local names (prefix "model.layers.<li>.").
std::string layerName(int64_t li, const std::string &rest);
std::string expertName(int64_t li, int64_t e, const char *w, const char *suffix);

/// The weight-binding table of an artifact (support/Manifest.h): one entry
/// per weight argument of the model's IR (models/ModelBuilder.cpp: routed
/// experts stacked into one "<layer>.block_sparse_moe.experts.w1|w2|w3"
/// argument), naming its checkpoint tensors (weight prefix included; "{expert}"
/// for the expert's number), their accepted shapes and dtypes, and the
/// transform that makes the argument from them. dtype and shape are the
/// canonical ones; the artifact writer takes them (and the MXFP4 layout)
/// from the compiled IR.
std::vector<artifact::WeightBinding> weightBindings(const ModelConfig &c);

/// Checks that the checkpoint holds exactly the expected tensors with
/// accepted shapes and dtypes. Tensors under vision_tower./mm_projector. are
/// ignored (text-only compilation). Throws one k3c::Error listing every problem.
void bindCheckpoint(const ModelConfig &c, const CheckpointFiles &ckpt);

/// A dense fp32 tensor.
struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

/// All weights as fp32, by name (without prefix). MXFP4 experts are stored
/// dequantized under "<...>.experts.<e>.w1.weight". A_log is trimmed to H.
using WeightsF32 = std::map<std::string, F32Tensor>;
WeightsF32 loadWeightsF32(const ModelConfig &c, const CheckpointFiles &ckpt,
                          bool progress = false);

/// Reads one float tensor (BF16/F16/F32) into fp32.
F32Tensor readFloat(const CheckpointFiles &ckpt, const TensorInfo &t);

} // namespace k3c

#endif // K3C_MODELS_WEIGHTS_H
