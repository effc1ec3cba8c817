//===- Generator.h - seeded random checkpoints for test configs -*- C++ -*-===//
//
// Writes a real HF-layout checkpoint (config.json, sharded safetensors with
// K3 tensor names, MXFP4 experts when the config is quantized) from a seed.
// Initialization keeps activations well scaled through every layer (spec
// §7.1): unit-variance linear maps (std 1/sqrt(in)), norm weights near 1,
// dt_bias = softplus^-1(U[1e-3, 1e-1]), small AttnRes pseudo-queries, router
// bias ~ N(0, 0.01). The same seed gives the same bytes on every machine.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_GENERATOR_H
#define K3C_MODELS_GENERATOR_H

#include "models/Config.h"
#include "models/Safetensors.h"

#include <string>
#include <vector>

namespace k3c {

struct GenerateOptions {
  uint64_t seed = 0;
  bool progress = false;
  /// Skewed routing for EP benchmarks: subtracts s·ln(1+e)/ln(E+1) from the
  /// router's selection bias of expert e, so low expert ids are chosen more
  /// often (Zipf-like). 0: the plain N(0, 0.01) bias.
  double routerSkew = 0;
  /// Values one random stream fills: larger tensors are generated in
  /// parallel chunks of this many values, chunk j > 0 from its own stream
  /// (chunk 0, and every tensor up to this size, from the tensor's stream).
  int64_t chunkValues = int64_t(1) << 24;
};

/// Every tensor of `c`'s checkpoint, generated in parallel (one random stream
/// per tensor, and per 16M-value chunk of a larger tensor, so the bytes do
/// not depend on the thread count).
std::vector<TensorData> generateWeights(const ModelConfig &c, const GenerateOptions &o);

/// Generates the weights of `configPath`'s model and writes config.json (a
/// copy of the input) and `shards` safetensors shards with an index to `dir`.
void writeGeneratedCheckpoint(const std::string &configPath, const std::string &dir,
                              const GenerateOptions &o, int shards);

} // namespace k3c

#endif // K3C_MODELS_GENERATOR_H
