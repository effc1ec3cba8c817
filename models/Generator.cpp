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

/// fp32 values for one tensor, by role.
std::vector<float> initValues(const WeightSpec &s, const std::vector<int64_t> &shape,
                              const ModelConfig &c, Rng &rng) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v(n);
  const std::string &name = s.name;
  auto fill = [&](auto f) {
    for (auto &x : v)
      x = static_cast<float>(f());
  };
  if (endsWith(name, "A_log")) {
    for (int64_t i = 0; i < n; ++i) // real heads small random, padding exactly 0
      v[i] = i < c.kdaHeads ? static_cast<float>(rng.uniform(-0.5, 0.5)) : 0.0f;
  } else if (endsWith(name, "dt_bias")) {
    fill([&] { return std::log(std::expm1(rng.uniform(1e-3, 1e-1))); });
  } else if (endsWith(name, "e_score_correction_bias")) {
    fill([&] { return 0.01 * rng.normal(); });
  } else if (endsWith(name, "_res_proj.weight")) {
    fill([&] { return 0.05 * rng.normal(); });
  } else if (endsWith(name, "conv1d.weight")) {
    fill([&] { return 0.5 * rng.normal(); });
  } else if (shape.size() == 1 || endsWith(name, "norm.weight") || endsWith(name, "layernorm.weight")) {
    fill([&] { return 1.0 + 0.05 * rng.normal(); });
  } else if (endsWith(name, "embed_tokens.weight")) {
    fill([&] { return rng.normal(); });
  } else {
    // A linear map [out, in]: unit gain.
    double std = 1.0 / std::sqrt(static_cast<double>(shape.back()));
    fill([&] { return std * rng.normal(); });
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
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h = floatToBf16(v[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  }
  return out;
}

} // namespace

std::vector<TensorData> generateWeights(const ModelConfig &c, const GenerateOptions &o) {
  if (!(o.routerSkew >= 0) || o.routerSkew > 10)
    throw Error("router skew must be in [0, 10], got " + std::to_string(o.routerSkew));
  std::vector<WeightSpec> specs = expectedWeights(c);
  // One random stream per tensor (seed and tensor index mixed), so tensors
  // are generated in parallel and the bytes do not depend on the thread
  // count. Slot 2i holds tensor i, 2i+1 its MXFP4 scale.
  std::vector<TensorData> slots(2 * specs.size());
  std::atomic<size_t> done{0};
  std::mutex mu;
  ProgressLine bar("generating weights (tensors)", specs.size(), o.progress);
  parallelFor(specs.size(), [&](size_t i) {
    const WeightSpec &s = specs[i];
    if (s.kind != WeightKind::MXFP4Scale) { // scales come with their payload
      Rng rng(Rng(o.seed ^ (0x51ed270b27a1f3c5ull * (i + 1))).next());
      TensorData t;
      t.name = c.weightPrefix + s.name;
      t.shape = s.shapes.front();
      if (s.kind == WeightKind::MXFP4Packed) {
        std::vector<int64_t> logical = {t.shape[0], t.shape[1] * 2};
        std::vector<float> w = initValues(s, logical, c, rng);
        TensorData scale;
        mxfp4::quantize(w.data(), logical[0], logical[1], t.bytes, scale.bytes);
        t.dtype = DType::U8;
        scale.name = c.weightPrefix + s.name.substr(0, s.name.size() - 13) + "weight_scale";
        scale.dtype = DType::U8;
        scale.shape = {logical[0], logical[1] / mxfp4::kBlock};
        slots[2 * i + 1] = std::move(scale);
      } else {
        t.dtype = s.storeType;
        std::vector<float> v = initValues(s, t.shape, c, rng);
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
