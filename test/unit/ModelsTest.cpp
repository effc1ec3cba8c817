//===- ModelsTest.cpp - configs, safetensors, MXFP4, KDA math, reference --===//

#include "support/Common.h"
#include "models/Config.h"
#include "models/Generator.h"
#include "models/KdaMath.h"
#include "models/MXFP4.h"
#include "models/MXFP4Layout.h"
#include "models/Reference.h"
#include "models/Safetensors.h"
#include "models/Weights.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string configPath(const std::string &name) {
  return std::string(K3C_SOURCE_DIR) + "/models/configs/" + name;
}

json readJson(const std::string &path) {
  std::ifstream in(path);
  return json::parse(in);
}

/// Expects `f` to throw k3c::Error whose message contains `needle`.
template <typename F> void expectError(F f, const std::string &needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << needle;
  } catch (const k3c::Error &e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
}

fs::path tempDir(const std::string &name) {
  fs::path p = fs::temp_directory_path() / ("k3c-test-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

//===----------------------------------------------------------------------===//
// Configs
//===----------------------------------------------------------------------===//

TEST(Config, PublishedK3) {
  k3c::ModelConfig c = k3c::loadConfig(configPath("k3.json"));
  EXPECT_EQ(c.modelType, "kimi_k3");
  EXPECT_EQ(c.weightPrefix, "language_model.");
  EXPECT_EQ(c.numLayers, 93);
  EXPECT_EQ(c.count(k3c::AttnKind::KDA), 69);
  EXPECT_EQ(c.count(k3c::AttnKind::MLA), 24);
  EXPECT_EQ(c.count(k3c::FfnKind::Dense), 1);
  EXPECT_EQ(c.count(k3c::FfnKind::MoE), 92);
  for (int64_t li = 0; li < 92; ++li)
    EXPECT_EQ(c.attn[li] == k3c::AttnKind::MLA, (li + 1) % 4 == 0) << "layer " << li;
  EXPECT_EQ(c.attn[92], k3c::AttnKind::MLA);
  EXPECT_EQ(c.ffn[0], k3c::FfnKind::Dense);
  EXPECT_EQ(*c.gateLowerBound, -5.0);
  EXPECT_TRUE(c.fullRankGate && c.mlaOutputGate && c.expertsMxfp4);
  EXPECT_EQ(c.latentDim, 3584);
  EXPECT_EQ(c.sharedWidth(), 6144);
  EXPECT_EQ(c.aLogPaddedSize(), 128);
  EXPECT_EQ(c.attnResBlockSize, 12);
  // Spec §1: 2.7795 T parameters.
  EXPECT_NEAR(static_cast<double>(k3c::parameterCount(c)) / 1e12, 2.7795, 0.0005);
}

TEST(Config, ReducedAndKimiLinear) {
  k3c::ModelConfig tiny = k3c::loadConfig(configPath("k3-tiny.json"));
  EXPECT_EQ(tiny.weightPrefix, "");
  std::vector<int64_t> mla;
  for (int64_t li = 0; li < tiny.numLayers; ++li)
    if (tiny.attn[li] == k3c::AttnKind::MLA)
      mla.push_back(li);
  EXPECT_EQ(mla, (std::vector<int64_t>{3, 7, 11, 12}));
  // Spec §7.1: 3.05 M parameters.
  EXPECT_NEAR(static_cast<double>(k3c::parameterCount(tiny)) / 1e6, 3.05, 0.01);
  k3c::ModelConfig small = k3c::loadConfig(configPath("k3-small.json"));
  EXPECT_EQ(small.numExperts, 256);
  EXPECT_NEAR(static_cast<double>(k3c::parameterCount(small)) / 1e9, 111.7, 0.1);
  k3c::ModelConfig kl = k3c::loadConfig(configPath("kimi-linear-48b-a3b.json"));
  EXPECT_FALSE(kl.gateLowerBound.has_value());
  EXPECT_FALSE(kl.fullRankGate);
  EXPECT_EQ(kl.qLoraRank, 0);
  EXPECT_FALSE(kl.mlaOutputGate);
  EXPECT_EQ(kl.act, k3c::Act::SwiGLU);
  EXPECT_EQ(kl.routedScalingFactor, 2.446);
  EXPECT_FALSE(kl.hasAttnRes());
  EXPECT_EQ(kl.latentDim, 0);
  EXPECT_EQ(kl.count(k3c::AttnKind::MLA), 7);
  EXPECT_EQ(kl.attn[26], k3c::AttnKind::MLA);
}

/// Applies `edit` to the tiny config and expects a config error naming `needle`.
void expectConfigError(const std::function<void(json &)> &edit, const std::string &needle) {
  json j = readJson(configPath("k3-tiny.json"));
  edit(j);
  expectError([&] { k3c::parseConfig(j.dump(), "tiny.json"); }, needle);
}

TEST(Config, ErrorsNameFieldAndValue) {
  expectConfigError([](json &j) { j["model_type"] = "llama"; },
                    "config field 'model_type' is 'llama'");
  expectConfigError([](json &j) { j.erase("hidden_size"); },
                    "config field 'hidden_size' is missing");
  expectConfigError([](json &j) { j["hidden_size"] = "128"; },
                    "'hidden_size' must be an integer, got \"128\"");
  expectConfigError([](json &j) { j["linear_attn_config"]["num_heads"] = -4; },
                    "'linear_attn_config.num_heads' must be positive, got -4");
  expectConfigError([](json &j) { j["linear_attn_config"]["kda_layers"].push_back(4); },
                    "'linear_attn_config.full_attn_layers' lists layer 4 twice or also in the other layer list");
  expectConfigError([](json &j) { j["linear_attn_config"]["full_attn_layers"] = {4, 8, 12}; },
                    "layer 13 is in neither");
  expectConfigError([](json &j) { j["linear_attn_config"]["kda_layers"].push_back(14); },
                    "lists layer 14, outside 1..13");
  expectConfigError([](json &j) { j["num_experts_per_token"] = 17; },
                    "'num_experts_per_token' = 17 exceeds num_experts = 16");
  expectConfigError([](json &j) { j["linear_attn_config"]["gate_lower_bound"] = 2.0; },
                    "'linear_attn_config.gate_lower_bound' (g_min) must be <= 0 and finite, got 2");
  expectConfigError([](json &j) { j["num_expert_group"] = 8; },
                    "'num_expert_group' = 8 is not supported");
  expectConfigError([](json &j) { j["moe_intermediate_size"] = 48; },
                    "'moe_intermediate_size' = 48 must be a multiple of 32 for MXFP4 experts");
  expectConfigError([](json &j) { j["quantization_config"]["quant_method"] = "gptq"; },
                    "quant_method 'gptq'");
  expectConfigError([](json &j) { j["num_nextn_predict_layers"] = 1; },
                    "'num_nextn_predict_layers' = 1 is not supported");
  expectConfigError([](json &j) { j["hidden_act"] = "gelu"; }, "'hidden_act' is 'gelu'");
  expectConfigError([](json &j) { j["num_key_value_heads"] = 2; },
                    "'num_key_value_heads' = 2 must equal num_attention_heads = 4");
  expectConfigError([](json &j) { j["mla_use_nope"] = false; }, "'mla_use_nope' = false");
  // Found by fuzz_config: fields read as strings must be strings.
  expectConfigError([](json &j) { j["model_type"] = 999999304; },
                    "config field 'model_type' must be a string, got 999999304");
  expectConfigError([](json &j) { j["quantization_config"] = 7; },
                    "config field 'quantization_config' must be an object");
  expectConfigError([](json &j) { j["quantization_config"]["format"] = 1; },
                    "config field 'quantization_config.format' must be a string, got 1");
  expectError([] { k3c::parseConfig("{\"model_type\": ", "x.json"); }, "x.json: not valid JSON");
  json k3 = readJson(configPath("k3.json"));
  k3["text_config"]["routed_expert_hidden_size"] = 3585;
  expectError([&] { k3c::parseConfig(k3.dump(), "k3.json"); },
              "config field 'text_config.routed_expert_hidden_size' = 3585 must be a multiple of 32");
  expectError([] { k3c::loadConfig("/nonexistent/config.json"); }, "cannot open config");
}

//===----------------------------------------------------------------------===//
// Safetensors
//===----------------------------------------------------------------------===//

void writeRaw(const fs::path &p, const std::string &header, const std::string &data,
              uint64_t claimedLen = UINT64_MAX) {
  std::ofstream out(p, std::ios::binary);
  uint64_t n = claimedLen == UINT64_MAX ? header.size() : claimedLen;
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>(n >> (8 * i)));
  out << header << data;
}

TEST(Safetensors, RoundTrip) {
  fs::path dir = tempDir("st-roundtrip");
  k3c::TensorData a{"a", k3c::DType::BF16, {2, 3}, std::vector<uint8_t>(12)};
  k3c::TensorData b{"b.weight", k3c::DType::F32, {4}, std::vector<uint8_t>(16)};
  k3c::TensorData c{"c", k3c::DType::U8, {3, 1}, {7, 8, 9}};
  for (size_t i = 0; i < a.bytes.size(); ++i)
    a.bytes[i] = static_cast<uint8_t>(i * 3);
  float fv[4] = {1.5f, -2.0f, 3.25f, 0.0f};
  std::memcpy(b.bytes.data(), fv, 16);
  k3c::writeSafetensors((dir / "m.safetensors").string(), {&a, &b, &c}, {{"format", "pt"}});
  auto f = k3c::SafetensorsFile::open((dir / "m.safetensors").string());
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const k3c::TensorInfo *tb = f->find("b.weight");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->dtype, k3c::DType::F32);
  EXPECT_EQ(tb->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(std::memcmp(f->data(*tb), fv, 16), 0);
  EXPECT_EQ(std::memcmp(f->data(*f->find("a")), a.bytes.data(), 12), 0);
  EXPECT_EQ(f->data(*f->find("c"))[2], 9);
  fs::remove_all(dir);
}

TEST(Safetensors, MalformedFilesGetClearErrors) {
  fs::path dir = tempDir("st-bad");
  auto check = [&](const std::string &name, const std::string &header, const std::string &data,
                   const std::string &needle, uint64_t claimed = UINT64_MAX) {
    fs::path p = dir / (name + ".safetensors");
    writeRaw(p, header, data, claimed);
    expectError([&] { k3c::SafetensorsFile::open(p.string()); }, needle);
  };
  {
    std::ofstream(dir / "short.safetensors") << "abc";
    expectError([&] { k3c::SafetensorsFile::open((dir / "short.safetensors").string()); },
                "truncated: 3 bytes");
  }
  std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  check("huge", ok, std::string(8, '\0'), "exceeds the 100 MB limit", 1ull << 40);
  check("pastend", ok, std::string(8, '\0'), "runs past the end of the file", ok.size() + 100);
  check("json", "{\"x\": [", "", "header is not valid JSON");
  check("range", R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
        std::string(8, '\0'), "outside the data buffer of 8 bytes");
  check("mismatch", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
        std::string(8, '\0'), "F32 [3] needs 12 bytes but data_offsets span 8");
  check("overlap",
        R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
        std::string(12, '\0'), "overlaps the tensor before it");
  check("gap", R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0'),
        "gap in the data buffer before tensor 'x'");
  check("dup",
        R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
        std::string(8, '\0'), "tensor name 'x' appears twice");
  check("dtype", R"({"x":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", std::string(1, '\0'),
        "unknown dtype \"Q4\"");
  check("negshape", R"({"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})",
        std::string(1, '\0'), "shape entries must be non-negative integers");
  check("overflow", R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
        std::string(8, '\0'), "needs more bytes than any file holds");
  check("tail", ok, std::string(12, '\0'), "data buffer has 12 bytes but the tensors cover 8");
  expectError([&] { k3c::SafetensorsFile::open((dir / "absent.safetensors").string()); },
              "cannot open");
  fs::remove_all(dir);
}

//===----------------------------------------------------------------------===//
// Checkpoints: generation, sharding, binding by name
//===----------------------------------------------------------------------===//

struct TinyCheckpoint : ::testing::Test {
  static void SetUpTestSuite() {
    dir = tempDir("tiny").string();
    k3c::writeGeneratedCheckpoint(configPath("k3-tiny.json"), dir, {/*seed=*/7}, /*shards=*/3);
  }
  static void TearDownTestSuite() { fs::remove_all(dir); }
  static std::string dir;
};
std::string TinyCheckpoint::dir;

TEST_F(TinyCheckpoint, LoadsByNameWithShardsAndIndex) {
  k3c::ModelConfig c = k3c::loadConfig(dir + "/config.json");
  k3c::CheckpointFiles ckpt = k3c::CheckpointFiles::open(dir);
  EXPECT_NO_THROW(k3c::bindCheckpoint(c, ckpt));
  EXPECT_TRUE(fs::exists(dir + "/model-00003-of-00003.safetensors"));
  const k3c::TensorInfo *p = ckpt.find("model.layers.1.block_sparse_moe.experts.15.w2.weight_packed");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->dtype, k3c::DType::U8);
  EXPECT_EQ(p->shape, (std::vector<int64_t>{64, 16}));
  const k3c::TensorInfo *s = ckpt.find("model.layers.1.block_sparse_moe.experts.15.w2.weight_scale");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->shape, (std::vector<int64_t>{64, 1}));
  EXPECT_EQ(ckpt.find("model.layers.0.self_attn.q_conv1d.weight")->dtype, k3c::DType::F32);
  EXPECT_EQ(ckpt.find("model.layers.0.self_attn.A_log")->shape, (std::vector<int64_t>{128}));
  // Same seed, same bytes.
  std::string again = tempDir("tiny-again").string();
  k3c::writeGeneratedCheckpoint(configPath("k3-tiny.json"), again, {7}, 3);
  for (const char *f : {"model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors"}) {
    std::ifstream a(dir + "/" + f, std::ios::binary), b(again + "/" + f, std::ios::binary);
    std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
    EXPECT_TRUE(sa == sb) << f;
  }
  fs::remove_all(again);
}

// Tensors over GenerateOptions::chunkValues values are filled in parallel
// chunks, one stream each: tensors up to a chunk keep the tensor's stream
// (the same bytes as one chunk of any size), a larger tensor's first chunk
// too; its later chunks are new values (no repeated stream) with the same
// statistics, and the bytes repeat run to run.
TEST(Generator, ChunkedStreams) {
  k3c::ModelConfig c = k3c::loadConfig(configPath("k3-tiny.json"));
  k3c::GenerateOptions whole{5}, chunked{5};
  whole.chunkValues = int64_t(1) << 40;
  chunked.chunkValues = 4096;
  std::vector<k3c::TensorData> a = k3c::generateWeights(c, whole),
                               b = k3c::generateWeights(c, chunked),
                               again = k3c::generateWeights(c, chunked);
  ASSERT_EQ(a.size(), b.size());
  int large = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].name);
    ASSERT_EQ(a[i].name, b[i].name);
    EXPECT_TRUE(b[i].bytes == again[i].bytes);
    if (a[i].dtype == k3c::DType::U8)
      continue; // MXFP4 payload and scales: quantized from the values, per row block
    const size_t elt = a[i].dtype == k3c::DType::F32 ? 4 : 2, n = a[i].bytes.size() / elt;
    if (n <= 4096) {
      EXPECT_TRUE(a[i].bytes == b[i].bytes);
      continue;
    }
    ++large;
    const size_t head = elt * 4096;
    EXPECT_TRUE(std::equal(a[i].bytes.begin(), a[i].bytes.begin() + head, b[i].bytes.begin()));
    const size_t next = std::min(head, b[i].bytes.size() - head);
    EXPECT_FALSE(std::equal(b[i].bytes.begin(), b[i].bytes.begin() + next,
                            b[i].bytes.begin() + head)); // chunk 1 is not chunk 0 again
    EXPECT_FALSE(a[i].bytes == b[i].bytes);
    // The same spread: the chunked values' RMS within 5 % of the whole's.
    auto rms = [&](const std::vector<uint8_t> &bytes) {
      double ss = 0;
      for (size_t j = 0; j < n; ++j) {
        double v;
        if (elt == 4) {
          float f;
          std::memcpy(&f, &bytes[4 * j], 4);
          v = f;
        } else {
          uint16_t h;
          std::memcpy(&h, &bytes[2 * j], 2);
          v = k3c::bf16ToFloat(h);
        }
        ss += v * v;
      }
      return std::sqrt(ss / n);
    };
    EXPECT_NEAR(rms(b[i].bytes) / rms(a[i].bytes), 1.0, 0.05);
  }
  EXPECT_GT(large, 10);
  k3c::GenerateOptions bad{5};
  bad.chunkValues = 0;
  expectError([&] { k3c::generateWeights(c, bad); },
              "generator chunk must be at least one value, got 0");
}

TEST_F(TinyCheckpoint, BindingListsEveryProblemByName) {
  k3c::ModelConfig c = k3c::loadConfig(configPath("k3-tiny.json"));
  std::vector<k3c::TensorData> t = k3c::generateWeights(c, {1});
  std::vector<k3c::TensorData> edited;
  for (auto &x : t) {
    if (x.name == "model.layers.5.self_attn.b_proj.weight")
      continue; // missing
    if (x.name == "model.layers.3.self_attn.kv_b_proj.weight")
      x.shape = {x.shape[1], x.shape[0]}; // mis-shaped (same bytes)
    edited.push_back(x);
  }
  edited.push_back({"model.layers.0.self_attn.extra.weight", k3c::DType::BF16, {2}, {0, 0, 0, 0}});
  edited.push_back({"vision_tower.patch.weight", k3c::DType::BF16, {1}, {0, 0}}); // ignored
  fs::path bad = tempDir("tiny-bad");
  k3c::writeCheckpointShards(bad.string(), edited, 2);
  k3c::CheckpointFiles ckpt = k3c::CheckpointFiles::open(bad.string());
  try {
    k3c::bindCheckpoint(c, ckpt);
    ADD_FAILURE() << "binding should fail";
  } catch (const k3c::Error &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("1 missing, 1 unexpected, 1 mis-shaped"), std::string::npos) << m;
    EXPECT_NE(m.find("missing: model.layers.5.self_attn.b_proj.weight [4, 128]"), std::string::npos) << m;
    EXPECT_NE(m.find("unexpected: model.layers.0.self_attn.extra.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("mis-shaped: model.layers.3.self_attn.kv_b_proj.weight: BF16 [32, 128] in the "
                     "checkpoint, expected BF16/F16/F32 [128, 32]"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("vision_tower"), std::string::npos) << m;
  }
  fs::remove_all(bad);
}

TEST_F(TinyCheckpoint, IndexAndShardErrors) {
  fs::path bad = tempDir("tiny-index");
  for (const auto &e : fs::directory_iterator(dir))
    fs::copy_file(e.path(), bad / e.path().filename());
  fs::remove(bad / "model-00002-of-00003.safetensors");
  expectError([&] { k3c::CheckpointFiles::open(bad.string()); },
              "model-00002-of-00003.safetensors' (named by the index) is missing");
  // A truncated shard.
  fs::copy_file(fs::path(dir) / "model-00002-of-00003.safetensors",
                bad / "model-00002-of-00003.safetensors");
  fs::resize_file(bad / "model-00002-of-00003.safetensors", 1000);
  expectError([&] { k3c::CheckpointFiles::open(bad.string()); }, "model-00002-of-00003.safetensors'");
  fs::remove_all(bad);
  expectError([&] { k3c::CheckpointFiles::open("/nonexistent-ckpt"); }, "does not exist");
}

//===----------------------------------------------------------------------===//
// MXFP4 (OCP MX v1.0)
//===----------------------------------------------------------------------===//

TEST(MXFP4, AllSixteenCodes) {
  const float expect[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -.5f, -1, -1.5f, -2, -3, -4, -6};
  for (uint8_t c = 0; c < 16; ++c) {
    float v = k3c::mxfp4::decodeE2M1(c);
    EXPECT_EQ(v, expect[c]) << int(c);
    EXPECT_EQ(std::signbit(v), c >= 8) << int(c);
    EXPECT_EQ(k3c::mxfp4::encodeE2M1(v), c) << int(c); // every code round-trips, -0 too
  }
}

TEST(MXFP4, BothNibbles) {
  // Byte 0x4A holds code 0xA (-1.0) for the even column, 0x4 (2.0) for the odd one.
  uint8_t packed[1] = {0x4A}, scale[1] = {127}, codes[2];
  std::vector<float> out(32);
  uint8_t row[16] = {};
  row[0] = 0x4A;
  std::vector<uint8_t> sc(1, 127);
  k3c::mxfp4::dequantize(row, sc.data(), 1, 32, out.data());
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(out[2], 0.0f);
  k3c::mxfp4::unpackCodes(packed, 1, 2, codes);
  EXPECT_EQ(codes[0], 0xA);
  EXPECT_EQ(codes[1], 0x4);
  uint8_t repacked;
  k3c::mxfp4::packCodes(codes, 1, 2, &repacked);
  EXPECT_EQ(repacked, 0x4A);
  (void)scale;
  // Random codes survive pack -> unpack for both nibble positions.
  k3c::Rng rng(3);
  std::vector<uint8_t> c(8 * 64), p(8 * 32), back(8 * 64);
  for (auto &x : c)
    x = rng.next() & 0xF;
  k3c::mxfp4::packCodes(c.data(), 8, 64, p.data());
  k3c::mxfp4::unpackCodes(p.data(), 8, 64, back.data());
  EXPECT_EQ(c, back);
}

TEST(MXFP4, ScaleExtremesAndNaN) {
  EXPECT_EQ(k3c::mxfp4::decodeE8M0(0x00), std::ldexp(1.0f, -127));
  EXPECT_EQ(k3c::mxfp4::decodeE8M0(0xFE), std::ldexp(1.0f, 127));
  EXPECT_EQ(k3c::mxfp4::decodeE8M0(127), 1.0f);
  EXPECT_TRUE(std::isnan(k3c::mxfp4::decodeE8M0(0xFF)));
  uint8_t row[16];
  for (auto &b : row)
    b = 0x21; // codes 1 (0.5) and 2 (1.0)
  std::vector<float> out(32);
  uint8_t s = 0x00;
  k3c::mxfp4::dequantize(row, &s, 1, 32, out.data());
  EXPECT_EQ(out[0], std::ldexp(0.5f, -127));
  EXPECT_EQ(out[1], std::ldexp(1.0f, -127));
  s = 0xFE;
  k3c::mxfp4::dequantize(row, &s, 1, 32, out.data());
  EXPECT_EQ(out[0], std::ldexp(0.5f, 127));
  s = 0xFF;
  for (auto &b : row)
    b = 0x00;
  k3c::mxfp4::dequantize(row, &s, 1, 32, out.data());
  for (float v : out)
    EXPECT_TRUE(std::isnan(v)); // NaN scale: every element NaN, even code 0
  // A block holding NaN quantizes to the NaN scale.
  float in[32] = {};
  in[5] = NAN;
  uint8_t codes[32], scale;
  k3c::mxfp4::quantizeBlock(in, codes, scale);
  EXPECT_EQ(scale, 0xFF);
}

TEST(MXFP4, ZeroBlock) {
  float in[32] = {};
  uint8_t codes[32], scale = 1;
  k3c::mxfp4::quantizeBlock(in, codes, scale);
  EXPECT_EQ(scale, 0x00);
  for (uint8_t c : codes)
    EXPECT_EQ(c, 0);
}

TEST(MXFP4, RoundsBetweenGridPointsToNearestEven) {
  struct Case {
    float in, out;
  } cases[] = {{0.25f, 0.0f}, {0.3f, 0.5f},  {0.75f, 1.0f}, {1.25f, 1.0f}, {1.75f, 2.0f},
               {2.5f, 2.0f},  {2.6f, 3.0f},  {3.5f, 4.0f},  {5.0f, 4.0f},  {5.1f, 6.0f},
               {7.0f, 6.0f},  {-2.5f, -2.0f}, {-0.74f, -0.5f}, {1e9f, 6.0f}};
  for (const Case &c : cases)
    EXPECT_EQ(k3c::mxfp4::decodeE2M1(k3c::mxfp4::encodeE2M1(c.in)), c.out) << c.in;
  // Scale selection: amax 6 -> 2^0; amax 1 -> 2^-2 (1.0 becomes code 6 = 4.0).
  float in[32] = {};
  in[0] = 6.0f;
  in[1] = 0.75f;
  uint8_t codes[32], scale;
  k3c::mxfp4::quantizeBlock(in, codes, scale);
  EXPECT_EQ(scale, 127);
  EXPECT_EQ(codes[0], 7);
  EXPECT_EQ(codes[1], 2); // 0.75 ties to 1.0
  in[0] = 1.0f;
  k3c::mxfp4::quantizeBlock(in, codes, scale);
  EXPECT_EQ(scale, 125);
  EXPECT_EQ(codes[0], 6);
  EXPECT_EQ(codes[1], 5); // 0.75 / 0.25 = 3 exactly
}

TEST(MXFP4, GridValuesRoundTripExactly) {
  k3c::Rng rng(11);
  const int64_t rows = 4, cols = 96;
  std::vector<float> w(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 32; ++b) {
      int e = static_cast<int>(rng.next() % 20) - 10;
      for (int64_t i = 0; i < 32; ++i)
        w[r * cols + b * 32 + i] =
            std::ldexp(k3c::mxfp4::decodeE2M1(rng.next() & 0xF), e);
      w[r * cols + b * 32] = std::ldexp(6.0f, e); // pin amax so the scale is 2^e
    }
  std::vector<uint8_t> packed, scales;
  k3c::mxfp4::quantize(w.data(), rows, cols, packed, scales);
  std::vector<float> back(rows * cols);
  k3c::mxfp4::dequantize(packed.data(), scales.data(), rows, cols, back.data());
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_EQ(back[i], w[i]) << i;
}

//===----------------------------------------------------------------------===//
// MXFP4 kernel layout (#k3.mxfp4_layout): one description, exact round trip
//===----------------------------------------------------------------------===//

TEST(MXFP4Layout, RoundTripIsBitExactForEveryCodeAndScale) {
  for (int64_t K : {32, 64, 128, 256}) {
    const int64_t E = 3, N = 16;
    k3c::mxfp4::KernelLayout l{8, k3c::mxfp4::chooseKTile(K)};
    EXPECT_EQ(l.kTile, K == 32 ? 32 : K == 64 ? 64 : 128);
    std::vector<uint8_t> codes(E * N * K), packed(E * N * K / 2), scales(E * N * K / 32);
    for (size_t i = 0; i < codes.size(); ++i)
      codes[i] = static_cast<uint8_t>((i * 7 + i / 16) % 16); // every code, both nibbles
    for (size_t i = 0; i < scales.size(); ++i)
      scales[i] = static_cast<uint8_t>(i * 37 % 256); // every scale byte incl. 0x00/0xFE/0xFF
    for (int64_t e = 0; e < E; ++e)
      k3c::mxfp4::packCodes(codes.data() + e * N * K, N, K, packed.data() + e * N * K / 2);
    std::vector<uint8_t> kp(packed.size()), ks(scales.size()), bp(packed.size()), bs(scales.size());
    k3c::mxfp4::repackToKernel(l, E, N, K, packed.data(), scales.data(), kp.data(), ks.data());
    k3c::mxfp4::repackToCheckpoint(l, E, N, K, kp.data(), ks.data(), bp.data(), bs.data());
    EXPECT_EQ(bp, packed) << "K = " << K;
    EXPECT_EQ(bs, scales) << "K = " << K;
    EXPECT_NE(kp, packed) << "the kernel layout permutes bytes";
    // Dequantizing from either layout gives identical bits, NaN positions included.
    for (int64_t e = 0; e < E; ++e) {
      std::vector<float> a(N * K), b(N * K);
      k3c::mxfp4::dequantize(packed.data() + e * N * K / 2, scales.data() + e * N * K / 32, N, K,
                             a.data());
      k3c::mxfp4::dequantizeKernel(l, N, K, kp.data() + e * N * K / 2, ks.data() + e * N * K / 32,
                                   b.data());
      for (int64_t i = 0; i < N * K; ++i)
        ASSERT_TRUE(std::memcmp(&a[i], &b[i], 4) == 0 || (std::isnan(a[i]) && std::isnan(b[i])))
            << "K = " << K << " element " << i;
    }
  }
}

TEST(MXFP4Layout, ParallelTiledRepackPlacesEveryNibbleWhereTheLayoutSays) {
  // 40 matrices x 3 row tiles: the repack runs on several threads; every
  // code and scale must sit where kernelPayloadSlot/kernelScaleOffset
  // put it.
  const int64_t E = 40, N = 24, K = 256;
  k3c::mxfp4::KernelLayout l{8, k3c::mxfp4::chooseKTile(K)};
  std::vector<uint8_t> packed(E * N * K / 2), scales(E * N * K / 32);
  for (size_t i = 0; i < packed.size(); ++i)
    packed[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = static_cast<uint8_t>(i * 91 + 7);
  std::vector<uint8_t> kp(packed.size()), ks(scales.size());
  k3c::mxfp4::repackToKernel(l, E, N, K, packed.data(), scales.data(), kp.data(), ks.data());
  for (int64_t e = 0; e < E; ++e)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) {
        uint8_t b = packed[e * N * K / 2 + n * K / 2 + k / 2];
        uint8_t code = k % 2 ? b >> 4 : b & 0xF;
        k3c::mxfp4::PayloadSlot slot = k3c::mxfp4::kernelPayloadSlot(l, N, K, n, k);
        const uint8_t *w = &kp[e * N * K / 2 + slot.wordByte];
        uint32_t word = w[0] | w[1] << 8 | w[2] << 16 | static_cast<uint32_t>(w[3]) << 24;
        ASSERT_EQ(k3c::mxfp4::fragment::codeAt(word, slot.pair, slot.elem), code)
            << e << " " << n << " " << k;
      }
      for (int64_t blk = 0; blk < K / 32; ++blk)
        ASSERT_EQ(ks[e * N * K / 32 + k3c::mxfp4::kernelScaleOffset(l, N, K, n, blk)],
                  scales[e * N * K / 32 + n * K / 32 + blk]);
    }
}

// The tensor-core kernel's fragment decode (mxfp4::fragment, emitted step by
// step by lowering/tile/Gemm.cpp), run on the host with bf16 arithmetic
// emulated (bf16 x bf16 is exact in fp32; the result must then be a bf16
// value): for every pair p of a run word, every pair of codes (with the
// word's other 24 bits set to varying garbage, which the masks must drop)
// and every scale byte, the exact path equals OCP MX v1.0's E2M1 x 2^(s -
// 127) (NaN for 0xFF) bit for bit, and so does the folded path for every
// scale below 0x80.
TEST(MXFP4Fragment, DecodeIsExactForEveryPairNibblesAndScale) {
  using namespace k3c::mxfp4::fragment;
  auto half = [](uint32_t pair, int h) {
    uint32_t bits = (pair >> (16 * h)) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  auto isBf16 = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return std::isnan(f) || (bits & 0xFFFF) == 0;
  };
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  int64_t checked = 0;
  for (int p = 0; p < 4; ++p)
    for (uint32_t nibs = 0; nibs < 256; ++nibs) {
      // Code nibs & 15 = the low element of pair p, nibs >> 4 the high one
      // (format 5 as docs/mxfp4-layout.md tabulates it, written here bit by
      // bit: code bit i (m, e0, e1, s) of the low element at word bit
      // kWordBit[p][i], the high element's 16 further, mod 32); the other
      // pairs' bits take bits of a scrambled counter.
      static const int kWordBit[4][4] = {{6, 7, 8, 15}, {10, 11, 12, 19}, {0, 1, 2, 9},
                                         {4, 5, 14, 13}};
      uint32_t garbage = (nibs * 2654435761u + static_cast<uint32_t>(p) * 40503u) ^ 0xA5C3F00Fu;
      uint32_t mask = 0, placed = 0;
      for (int h = 0; h < 2; ++h) {
        uint32_t nib = (nibs >> (4 * h)) & 15;
        for (int bit = 0; bit < 4; ++bit) {
          int at = (kWordBit[p][bit] + 16 * h) % 32;
          ASSERT_EQ(at, codeBit(p, bit, h));
          mask |= 1u << at;
          placed |= ((nib >> bit) & 1u) << at;
        }
      }
      ASSERT_EQ(mask, pairMask(p));
      ASSERT_EQ(placed, placeCode(nibs & 15, p, 0) | placeCode(nibs >> 4, p, 1));
      uint32_t word = (garbage & ~mask) | placed;
      ASSERT_EQ(codeAt(word, p, 0), nibs & 15);
      ASSERT_EQ(codeAt(word, p, 1), nibs >> 4);
      uint32_t code = codeBits(word, p);
      for (uint32_t s = 0; s < 256; ++s)
        for (int h = 0; h < 2; ++h) {
          uint32_t nib = (nibs >> (4 * h)) & 15;
          float want = (nib & 8 ? -1.0f : 1.0f) * e2m1[nib & 7];
          want = s == 255 ? NAN : std::ldexp(want, static_cast<int>(s) - 127);
          float c = half(code, h);
          float exact = c * half(kTwo126, h);
          ASSERT_TRUE(isBf16(exact)) << p << " " << nibs << " " << s;
          exact *= half(scalePair(s), h);
          ASSERT_TRUE(isBf16(exact) || std::isinf(exact)) << p << " " << nibs << " " << s;
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(exact)) << p << " " << nibs << " " << s;
          } else {
            ASSERT_EQ(exact, want) << "pair " << p << " nibbles " << nibs << " scale " << s
                                   << " half " << h;
            ASSERT_EQ(std::signbit(exact), std::signbit(want)) << p << " " << nibs << " " << s;
          }
          if (s < 0x80) {
            float folded = c * half(scalePairFolded(s), h);
            ASSERT_TRUE(isBf16(folded)) << p << " " << nibs << " " << s;
            ASSERT_EQ(folded, want) << "folded: pair " << p << " nibbles " << nibs << " scale "
                                    << s;
            ASSERT_EQ(std::signbit(folded), std::signbit(want)) << p << " " << nibs << " " << s;
          }
          ++checked;
        }
    }
  EXPECT_EQ(checked, 4 * 256 * 256 * 2);
  // The emitted steps (lowering/tile/Gemm.cpp, mxfpFragment) as the GPU runs
  // them: a mask a piece (a second piece's mask and the merge are one lop3),
  // a shift or rotation (one funnel shift) a moved piece: 9 a word.
  int ops = 0;
  for (int p = 0; p < 4; ++p)
    for (int k = 0; k < rotCount(p); ++k)
      ops += 1 + (moveOf(pieceMask(p, rotAt(p, k)), rotAt(p, k)) != Move::None);
  EXPECT_EQ(ops, 9);
}

TEST(MXFP4Layout, EachThreadHoldsItsMmaFragment) {
  // K = 128: thread t of a tile owns 16 bytes = the B-fragment columns
  // 16s + 2c + {0, 1, 8, 9} (s = 0..7) of row r = t / 4, c = t % 4. Register
  // P = 2s + (0 for 2c, 2c + 1; 1 for 2c + 8, 2c + 9) is pair P % 4 of the
  // run's word P / 4: the lower column element 0, the higher element 1.
  const int64_t N = 8, K = 128;
  k3c::mxfp4::KernelLayout l{8, 128};
  for (int64_t t = 0; t < 32; ++t) {
    int64_t r = t / 4, c = t % 4;
    for (int64_t s = 0; s < 8; ++s)
      for (int64_t off : {0, 1, 8, 9}) {
        int64_t P = 2 * s + off / 8, elem = off % 2;
        k3c::mxfp4::PayloadSlot slot =
            k3c::mxfp4::kernelPayloadSlot(l, N, K, r, 16 * s + 2 * c + off);
        EXPECT_EQ(slot.wordByte, t * 16 + 4 * (P / 4))
            << "thread " << t << " step " << s << " col " << off;
        EXPECT_EQ(slot.pair, P % 4) << "thread " << t << " step " << s << " col " << off;
        EXPECT_EQ(slot.elem, elem) << "thread " << t << " step " << s << " col " << off;
      }
  }
  // The row's four block scales are contiguous.
  for (int64_t b = 0; b < 4; ++b)
    EXPECT_EQ(k3c::mxfp4::kernelScaleOffset(l, N, K, 5, b), 5 * 4 + b);
}

//===----------------------------------------------------------------------===//
// KDA: chunk form (C = 16) == recurrence, fp64
//===----------------------------------------------------------------------===//

TEST(KdaMath, ChunkedEqualsRecurrentFp64) {
  const int64_t dk = 32, dv = 24;
  for (int64_t T : {1, 15, 16, 17, 40, 48}) {
    k3c::Rng rng(100 + T);
    std::vector<double> q(T * dk), k(T * dk), v(T * dv), g(T * dk), beta(T), S0(dk * dv);
    auto l2 = [&](double *x) {
      double n = 0;
      for (int64_t i = 0; i < dk; ++i)
        n += x[i] * x[i];
      for (int64_t i = 0; i < dk; ++i)
        x[i] /= std::sqrt(n + 1e-6);
    };
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < dk; ++i) {
        q[t * dk + i] = rng.normal();
        k[t * dk + i] = rng.normal();
        // Bounded gate: g = -5 sigmoid(.) in (-5, 0), including values near -5.
        g[t * dk + i] = -5.0 / (1.0 + std::exp(-3.0 * rng.normal()));
      }
      l2(&q[t * dk]);
      l2(&k[t * dk]);
      for (int64_t i = 0; i < dk; ++i)
        q[t * dk + i] /= std::sqrt(static_cast<double>(dk));
      for (int64_t j = 0; j < dv; ++j)
        v[t * dv + j] = rng.normal();
      beta[t] = rng.uniform();
    }
    for (double &s : S0)
      s = 0.1 * rng.normal();
    std::vector<double> Sa = S0, Sb = S0, oa(T * dv), ob(T * dv);
    k3c::kdaRecurrentF64(T, dk, dv, q.data(), k.data(), v.data(), g.data(), beta.data(), Sa.data(),
                        oa.data());
    k3c::kdaChunkedF64(T, 16, dk, dv, q.data(), k.data(), v.data(), g.data(), beta.data(),
                      Sb.data(), ob.data());
    double maxErr = 0, maxRef = 0;
    for (int64_t i = 0; i < T * dv; ++i) {
      maxErr = std::max(maxErr, std::fabs(oa[i] - ob[i]));
      maxRef = std::max(maxRef, std::fabs(oa[i]));
    }
    for (int64_t i = 0; i < dk * dv; ++i) {
      maxErr = std::max(maxErr, std::fabs(Sa[i] - Sb[i]));
      maxRef = std::max(maxRef, std::fabs(Sa[i]));
    }
    EXPECT_LE(maxErr, 1e-10 * std::max(1.0, maxRef)) << "T = " << T;
    EXPECT_GT(maxRef, 0.01) << "T = " << T; // the test exercises real values
  }
}

//===----------------------------------------------------------------------===//
// Reference executor
//===----------------------------------------------------------------------===//

TEST_F(TinyCheckpoint, PrefillEqualsPrefillMinusOneThenDecode) {
  for (k3c::Precision p : {k3c::Precision::F64, k3c::Precision::F32, k3c::Precision::BF16}) {
    k3c::Reference ref = k3c::loadReference(dir, p);
    const int64_t V = ref.config().vocabSize;
    for (int64_t T : {1, 16, 17, 40}) {
      std::vector<int64_t> ids(T);
      k3c::Rng rng(T);
      for (auto &x : ids)
        x = static_cast<int64_t>(rng.next() % V);
      k3c::SequenceState full = ref.newSequence();
      std::vector<float> a = ref.forward(ids, full);
      ASSERT_EQ(a.size(), static_cast<size_t>(T * V));
      k3c::SequenceState split = ref.newSequence();
      std::vector<float> b;
      if (T > 1)
        ref.forward(std::vector<int64_t>(ids.begin(), ids.end() - 1), split);
      b = ref.forward({ids.back()}, split);
      double maxErr = 0, maxAbs = 0;
      for (int64_t v = 0; v < V; ++v) {
        ASSERT_TRUE(std::isfinite(a[(T - 1) * V + v]));
        maxErr = std::max(maxErr, static_cast<double>(std::fabs(a[(T - 1) * V + v] - b[v])));
        maxAbs = std::max(maxAbs, static_cast<double>(std::fabs(b[v])));
      }
      EXPECT_LE(maxErr, 1e-5) << "T = " << T;
      EXPECT_GT(maxAbs, 0.1) << "logits are not degenerate";
      EXPECT_EQ(full.length, T);
      EXPECT_EQ(split.length, T);
      // The state after both paths is the same.
      for (size_t i = 0; i < full.kda.size(); ++i)
        for (size_t j = 0; j < full.kda[i].size(); ++j)
          ASSERT_NEAR(full.kda[i][j], split.kda[i][j], 1e-5);
    }
  }
}

// The three precisions nest: F64 rounds nothing (its KDA state holds values
// no float represents), F32 sits within fp32 tolerance of it, BF16 further.
TEST_F(TinyCheckpoint, PrecisionsNestAroundTheExactReference) {
  const std::vector<int64_t> ids{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  std::vector<float> logits[3];
  k3c::SequenceState states[3];
  const k3c::Precision ps[3] = {k3c::Precision::F64, k3c::Precision::F32, k3c::Precision::BF16};
  for (int i = 0; i < 3; ++i) {
    k3c::Reference ref = k3c::loadReference(dir, ps[i]);
    states[i] = ref.newSequence();
    logits[i] = ref.forward(ids, states[i]);
  }
  double scale = 0, d32 = 0, d16 = 0;
  for (size_t v = 0; v < logits[0].size(); ++v) {
    scale = std::max(scale, std::fabs(static_cast<double>(logits[0][v])));
    d32 = std::max(d32, std::fabs(static_cast<double>(logits[1][v]) - logits[0][v]));
    d16 = std::max(d16, std::fabs(static_cast<double>(logits[2][v]) - logits[0][v]));
  }
  ASSERT_GT(scale, 0.1);
  EXPECT_GT(d32, 0) << "F32 rounds nothing?";
  EXPECT_LE(d32, 1e-5 * scale);
  EXPECT_GT(d16, 10 * d32);
  int64_t inexact = 0;
  for (const auto &S : states[0].kda)
    for (double x : S)
      inexact += static_cast<double>(static_cast<float>(x)) != x;
  EXPECT_GT(inexact, 0) << "the F64 reference's KDA state was rounded to fp32";
  for (const auto &S : states[1].kda)
    for (double x : S)
      ASSERT_EQ(static_cast<double>(static_cast<float>(x)), x);
}

// The KDA state in bf16 (setKdaStateBf16, for artifacts built with
// --kda-state-dtype=bf16): the BF16 reference's state is bf16 after every
// forward call (prefill, then a decode token) and differs from the fp32
// state it held before; F32 ignores the switch (bit-identical logits).
TEST_F(TinyCheckpoint, Bf16KdaStateRoundsTheBf16ReferencesState) {
  const std::vector<int64_t> ids{5, 6, 7, 8, 9, 10, 11, 12, 13};
  auto isBf16 = [](double x) { return k3c::roundBf16(static_cast<float>(x)) == x; };
  k3c::Reference plain = k3c::loadReference(dir, k3c::Precision::BF16);
  k3c::Reference ref = k3c::loadReference(dir, k3c::Precision::BF16);
  ref.setKdaStateBf16(true);
  k3c::SequenceState a = plain.newSequence(), b = ref.newSequence();
  plain.forward(ids, a);
  ref.forward(ids, b);
  ASSERT_FALSE(b.kda.empty());
  int64_t notBf16 = 0, changed = 0;
  for (size_t l = 0; l < b.kda.size(); ++l)
    for (size_t i = 0; i < b.kda[l].size(); ++i) {
      ASSERT_TRUE(isBf16(b.kda[l][i])) << "layer " << l << " element " << i;
      notBf16 += !isBf16(a.kda[l][i]);
      changed += a.kda[l][i] != b.kda[l][i];
    }
  EXPECT_GT(notBf16, 0) << "the plain BF16 reference's state is already bf16";
  EXPECT_GT(changed, 0);
  std::vector<float> la = plain.forward({3}, a), lb2 = ref.forward({3}, b);
  for (const auto &S : b.kda)
    for (double x : S)
      ASSERT_TRUE(isBf16(x));
  double d = 0;
  for (size_t v = 0; v < la.size(); ++v)
    d = std::max(d, std::fabs(static_cast<double>(la[v]) - lb2[v]));
  EXPECT_GT(d, 0) << "the rounded state changed no logit of the next token";
  k3c::Reference f32 = k3c::loadReference(dir, k3c::Precision::F32), f32b = f32;
  f32b.setKdaStateBf16(true);
  k3c::SequenceState c = f32.newSequence(), e = f32b.newSequence();
  EXPECT_EQ(f32.forward(ids, c), f32b.forward(ids, e));
}

// Routing hints (k3-run --check of bf16 builds): a compiled choice is taken
// only when it is a near tie. With tolerance 0 a hint naming experts 0..K-1
// for every token is refused wherever the reference's own choice differs,
// and the logits stay bit-identical; with an unbounded tolerance the same
// hint is followed and the logits change.
TEST_F(TinyCheckpoint, RoutingHintsFollowOnlyNearTies) {
  k3c::Reference ref = k3c::loadReference(dir, k3c::Precision::BF16);
  const std::vector<int64_t> ids{5, 6, 7, 8, 9, 10, 11, 12};
  const int64_t K = ref.config().topK;
  ASSERT_GT(ref.config().numExperts, K);
  k3c::SequenceState s0 = ref.newSequence();
  std::vector<float> base = ref.forward(ids, s0);
  int64_t calls = 0;
  auto firstK = [&](int64_t, int64_t T) {
    ++calls;
    std::vector<int32_t> h(T * K);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k)
        h[t * K + k] = static_cast<int32_t>(k);
    return h;
  };
  ref.setRoutingHint(firstK, 0.0);
  k3c::SequenceState s1 = ref.newSequence();
  std::vector<float> refused = ref.forward(ids, s1);
  EXPECT_GT(calls, 0);
  EXPECT_EQ(ref.routingForced(), 0);
  EXPECT_GT(ref.routingRefused(), 0);
  EXPECT_EQ(refused, base);
  ref.setRoutingHint(firstK, 1e9);
  k3c::SequenceState s2 = ref.newSequence();
  std::vector<float> followed = ref.forward(ids, s2);
  EXPECT_GT(ref.routingForced(), 0);
  EXPECT_NE(followed, base);
}

TEST_F(TinyCheckpoint, RejectsBadTokenIds) {
  k3c::Reference ref = k3c::loadReference(dir, k3c::Precision::BF16);
  k3c::SequenceState st = ref.newSequence();
  expectError([&] { ref.forward({1, 512}, st); },
              "token id 512 at position 1 is outside the vocabulary [0, 512)");
  expectError([&] { ref.forward({-3}, st); }, "token id -3");
}

TEST_F(TinyCheckpoint, ActivationsStayWellScaled) {
  k3c::Reference ref = k3c::loadReference(dir, k3c::Precision::F32);
  k3c::SequenceState st = ref.newSequence();
  std::vector<double> rms;
  ref.forward({5, 6, 7, 8, 9, 10, 11, 12}, st,
              [&](int64_t, const char *what, const std::vector<float> &v) {
                if (std::string(what) == "stream")
                  return;
                double s = 0;
                for (float x : v)
                  s += static_cast<double>(x) * x;
                rms.push_back(std::sqrt(s / v.size()));
              });
  ASSERT_EQ(rms.size(), 26u); // attn + ffn per layer
  for (double r : rms) {
    EXPECT_GT(r, 1e-3);
    EXPECT_LT(r, 1e2);
  }
}

} // namespace
