//===- Generator.cpp - seeded random checkpoints for test configs ---------===//

#include "models/Generator.h"
#include "support/Common.h"
#include "models/MXFP4.h"
#include "models/Weights.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace fs = std::filesystem;

namespace k3c {

namespace {

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Values a bf16 conversion thread takes.
constexpr int64_t kChunkValues = int64_t(1) << 24;

/// The stream of chunk `chunk` of a tensor (GenerateOptions::chunkValues: the
/// embedding and lm_head of full-width configs hold 1.2G values each).
Rng chunkRng(uint64_t tensorSeed, int64_t chunk) {
  return chunk == 0 ? Rng(tensorSeed)
                    : Rng(Rng(tensorSeed ^ (0xd1b54a32d192ed03ull * uint64_t(chunk))).next());
}

/// fp32 values for one tensor, by role; `tensorSeed` seeds its stream(s).
std::vector<float> initValues(const WeightSpec &s, const std::vector<int64_t> &shape,
                              const ModelConfig &c, uint64_t tensorSeed, int64_t chunkValues) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v(n);
  const std::string &name = s.name;
  auto fill = [&](auto f) { // f(rng): one value
    const int64_t chunks = (n + chunkValues - 1) / chunkValues;
    parallelFor(static_cast<size_t>(chunks), [&](size_t j) {
      Rng rng = chunkRng(tensorSeed, static_cast<int64_t>(j));
      const int64_t end = std::min(n, static_cast<int64_t>(j + 1) * chunkValues);
      for (int64_t i = static_cast<int64_t>(j) * chunkValues; i < end; ++i)
        v[i] = static_cast<float>(f(rng));
    });
  };
  if (endsWith(name, "A_log")) {
    Rng rng(tensorSeed);
    for (int64_t i = 0; i < n; ++i) // real heads small random, padding exactly 0
      v[i] = i < c.kdaHeads ? static_cast<float>(rng.uniform(-0.5, 0.5)) : 0.0f;
  } else if (endsWith(name, "dt_bias")) {
    fill([](Rng &rng) { return std::log(std::expm1(rng.uniform(1e-3, 1e-1))); });
  } else if (endsWith(name, "e_score_correction_bias")) {
    fill([](Rng &rng) { return 0.01 * rng.normal(); });
  } else if (endsWith(name, "_res_proj.weight")) {
    fill([](Rng &rng) { return 0.05 * rng.normal(); });
  } else if (endsWith(name, "conv1d.weight")) {
    fill([](Rng &rng) { return 0.5 * rng.normal(); });
  } else if (shape.size() == 1 || endsWith(name, "norm.weight") || endsWith(name, "layernorm.weight")) {
    fill([](Rng &rng) { return 1.0 + 0.05 * rng.normal(); });
  } else if (endsWith(name, "embed_tokens.weight")) {
    fill([](Rng &rng) { return rng.normal(); });
  } else {
    // A linear map [out, in]: unit gain.
    double std = 1.0 / std::sqrt(static_cast<double>(shape.back()));
    fill([std](Rng &rng) { return std * rng.normal(); });
  }
  return v;
}

std::vector<uint8_t> toBytes(const std::vector<float> &v, DType t) {
  std::vector<uint8_t> out;
  if (t == DType::F32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  } else {
    out.resize(v.size() * 2);
    const size_t chunks = (v.size() + kChunkValues - 1) / kChunkValues;
    parallelFor(chunks, [&](size_t j) {
      const size_t end = std::min(v.size(), (j + 1) * size_t(kChunkValues));
      for (size_t i = j * size_t(kChunkValues); i < end; ++i) {
        uint16_t h = floatToBf16(v[i]);
        std::memcpy(&out[2 * i], &h, 2);
      }
    });
  }
  return out;
}

} // namespace

std::vector<TensorData> generateWeights(const ModelConfig &c, const GenerateOptions &o) {
  if (!(o.routerSkew >= 0) || o.routerSkew > 10)
    throw Error("router skew must be in [0, 10], got " + std::to_string(o.routerSkew));
  if (o.chunkValues < 1)
    throw Error("generator chunk must be at least one value, got " +
                std::to_string(o.chunkValues));
  std::vector<WeightSpec> specs = expectedWeights(c);
  // One random stream per tensor (seed and tensor index mixed; per chunk of
  // a tensor over o.chunkValues values), so tensors and chunks are generated
  // in parallel and the bytes do not depend on the thread count. Slot 2i holds tensor i, 2i+1 its MXFP4 scale.
  std::vector<TensorData> slots(2 * specs.size());
  std::atomic<size_t> done{0};
  std::mutex mu;
  ProgressLine bar("generating weights (tensors)", specs.size(), o.progress);
  parallelFor(specs.size(), [&](size_t i) {
    const WeightSpec &s = specs[i];
    if (s.kind != WeightKind::MXFP4Scale) { // scales come with their payload
      const uint64_t tensorSeed = Rng(o.seed ^ (0x51ed270b27a1f3c5ull * (i + 1))).next();
      TensorData t;
      t.name = c.weightPrefix + s.name;
      t.shape = s.shapes.front();
      if (s.kind == WeightKind::MXFP4Packed) {
        std::vector<int64_t> logical = {t.shape[0], t.shape[1] * 2};
        std::vector<float> w = initValues(s, logical, c, tensorSeed, o.chunkValues);
        TensorData scale;
        mxfp4::quantize(w.data(), logical[0], logical[1], t.bytes, scale.bytes);
        t.dtype = DType::U8;
        scale.name = c.weightPrefix + s.name.substr(0, s.name.size() - 13) + "weight_scale";
        scale.dtype = DType::U8;
        scale.shape = {logical[0], logical[1] / mxfp4::kBlock};
        slots[2 * i + 1] = std::move(scale);
      } else {
        t.dtype = s.storeType;
        std::vector<float> v = initValues(s, t.shape, c, tensorSeed, o.chunkValues);
        if (o.routerSkew > 0 && endsWith(s.name, "e_score_correction_bias"))
          for (size_t e = 0; e < v.size(); ++e) // Zipf-like: low expert ids are hot
            v[e] -= static_cast<float>(o.routerSkew * std::log1p(static_cast<double>(e)) /
                                       std::log(static_cast<double>(v.size()) + 1.0));
        t.bytes = toBytes(v, t.dtype);
      }
      slots[2 * i] = std::move(t);
    }
    size_t d = ++done;
    std::lock_guard<std::mutex> g(mu);
    bar.update(d);
  });
  std::vector<TensorData> out;
  out.reserve(specs.size());
  for (TensorData &t : slots)
    if (!t.name.empty())
      out.push_back(std::move(t));
  return out;
}

void writeGeneratedCheckpoint(const std::string &configPath, const std::string &dir,
                              const GenerateOptions &o, int shards) {
  ModelConfig c = loadConfig(configPath);
  std::vector<TensorData> tensors = generateWeights(c, o);
  fs::create_directories(dir);
  fs::path dst = fs::path(dir) / "config.json";
  if (!fs::exists(dst) || !fs::equivalent(configPath, dst))
    fs::copy_file(configPath, dst, fs::copy_options::overwrite_existing);
  writeCheckpointShards(dir, tensors, shards);
}

} // namespace k3c
