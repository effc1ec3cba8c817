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

std::vector<TensorData> generateWeights(const ModelConfig &c, uint64_t seed,
                                        bool progress = false);

/// Generates the weights of `configPath`'s model and writes config.json (a
/// copy of the input) and `shards` safetensors shards with an index to `dir`.
void writeGeneratedCheckpoint(const std::string &configPath, const std::string &dir,
                              uint64_t seed, int shards, bool progress = false);

} // namespace k3c

#endif // K3C_MODELS_GENERATOR_H
