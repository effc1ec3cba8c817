//===- Config.cpp - Kimi K3 / Kimi Linear model configuration -------------===//

#include "models/Config.h"
#include "support/Common.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <cstdlib>
#include <filesystem>

using json = nlohmann::json;

namespace k3c {

namespace {

constexpr int64_t kMaxField = (int64_t(1) << 31) - 1;

/// Field access with messages that name the field path and the bad value.
struct Reader {
  const json &j;
  std::string path; // e.g. "text_config." or "text_config.linear_attn_config."
  const std::string &source;

  [[noreturn]] void fail(const std::string &field, const std::string &what) const {
    throw Error(source + ": config field '" + path + field + "' " + what);
  }
  bool has(const char *f) const { return j.contains(f) && !j.at(f).is_null(); }
  int64_t integer(const char *f) const {
    if (!has(f))
      fail(f, "is missing");
    const json &v = j.at(f);
    if (!v.is_number_integer())
      fail(f, "must be an integer, got " + v.dump());
    // No size of a real model comes near 2^31; larger values only overflow
    // the size arithmetic downstream.
    if (v.is_number_unsigned() ? v.get<uint64_t>() > kMaxField : std::llabs(v.get<int64_t>()) > kMaxField)
      fail(f, "= " + v.dump() + " exceeds the largest supported value " + std::to_string(kMaxField));
    return v.get<int64_t>();
  }
  /// A positive integer at most `max` (the field's own bound).
  int64_t bounded(const char *f, int64_t max) const {
    int64_t v = positive(f);
    if (v > max)
      fail(f, "= " + std::to_string(v) + " exceeds the largest supported value " +
                  std::to_string(max));
    return v;
  }
  int64_t integer(const char *f, int64_t dflt) const { return has(f) ? integer(f) : dflt; }
  int64_t positive(const char *f) const {
    int64_t v = integer(f);
    if (v <= 0)
      fail(f, "must be positive, got " + std::to_string(v));
    return v;
  }
  int64_t nonNegative(const char *f, int64_t dflt) const {
    int64_t v = integer(f, dflt);
    if (v < 0)
      fail(f, "must be >= 0, got " + std::to_string(v));
    return v;
  }
  double number(const char *f) const {
    if (!has(f))
      fail(f, "is missing");
    const json &v = j.at(f);
    if (!v.is_number())
      fail(f, "must be a number, got " + v.dump());
    return v.get<double>();
  }
  double number(const char *f, double dflt) const { return has(f) ? number(f) : dflt; }
  bool boolean(const char *f, bool dflt) const {
    if (!has(f))
      return dflt;
    const json &v = j.at(f);
    if (!v.is_boolean())
      fail(f, "must be true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string string(const char *f, const std::string &dflt) const {
    if (!has(f))
      return dflt;
    const json &v = j.at(f);
    if (!v.is_string())
      fail(f, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  std::vector<int64_t> intList(const char *f) const {
    if (!has(f))
      fail(f, "is missing");
    const json &v = j.at(f);
    if (!v.is_array())
      fail(f, "must be a list of layer numbers, got " + v.dump());
    std::vector<int64_t> out;
    for (const json &e : v) {
      if (!e.is_number_integer())
        fail(f, "must hold integers, got " + e.dump());
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
};

std::string fmt(double d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

} // namespace

int64_t ModelConfig::count(AttnKind k) const {
  int64_t n = 0;
  for (AttnKind a : attn)
    n += a == k;
  return n;
}

int64_t ModelConfig::count(FfnKind k) const {
  int64_t n = 0;
  for (FfnKind f : ffn)
    n += f == k;
  return n;
}

int64_t ModelConfig::attnIndex(int64_t li) const {
  int64_t n = 0;
  for (int64_t i = 0; i < li; ++i)
    n += attn[i] == attn[li];
  return n;
}

ModelConfig parseConfig(const std::string &text, const std::string &source) {
  json root;
  // Duplicate keys are an error (JSON parsers disagree on which one wins).
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  json::parser_callback_t noDuplicates = [&](int, json::parse_event_t ev, json &parsed) {
    if (ev == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (ev == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (ev == json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    root = json::parse(text, noDuplicates);
  } catch (const json::exception &e) {
    throw Error(source + ": not valid JSON: " + e.what());
  }
  if (!duplicate.empty())
    throw Error(source + ": config key '" + duplicate + "' appears twice in one object");
  if (!root.is_object())
    throw Error(source + ": config must be a JSON object");

  ModelConfig c;
  c.source = source;
  // A string field or "" when absent; any other type is an error naming it.
  auto stringField = [&](const json &obj, const char *key, const std::string &where) {
    if (!obj.contains(key))
      return std::string();
    if (!obj[key].is_string())
      throw Error(source + ": config field '" + where + key + "' must be a string, got " +
                  obj[key].dump());
    return obj[key].get<std::string>();
  };
  std::string top = stringField(root, "model_type", "");
  const json *tj = &root;
  std::string path;
  if (top == "kimi_k3") {
    if (!root.contains("text_config") || !root["text_config"].is_object())
      throw Error(source + ": config field 'text_config' is missing (model_type kimi_k3)");
    tj = &root["text_config"];
    path = "text_config.";
    c.weightPrefix = "language_model.";
    std::string inner = stringField(*tj, "model_type", "text_config.");
    if (inner != "kimi_linear")
      throw Error(source + ": config field 'text_config.model_type' must be 'kimi_linear', got '" +
                  inner + "'");
  } else if (top != "kimi_linear") {
    throw Error(source + ": config field 'model_type' is '" + top +
                "'; supported: 'kimi_k3' (wrapper with text_config) and 'kimi_linear'");
  }
  c.modelType = top;
  Reader r{*tj, path, source};

  c.vocabSize = r.bounded("vocab_size", int64_t(1) << 24);
  c.hiddenSize = r.bounded("hidden_size", int64_t(1) << 20);
  c.numLayers = r.bounded("num_hidden_layers", 4096);
  c.rmsNormEps = r.number("rms_norm_eps", 1e-5);
  if (!(c.rmsNormEps > 0))
    r.fail("rms_norm_eps", "must be positive, got " + fmt(c.rmsNormEps));
  c.maxPositions = r.integer("max_position_embeddings", 4096);
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings", false);
  if (c.tieWordEmbeddings)
    r.fail("tie_word_embeddings", "= true is not supported (K3 and Kimi Linear keep a separate lm_head)");
  c.bosTokenId = r.integer("bos_token_id", -1);
  c.eosTokenId = r.integer("eos_token_id", -1);
  c.padTokenId = r.integer("pad_token_id", -1);

  std::string act = r.string("hidden_act", "silu");
  if (act == "situ") {
    c.act = Act::SiTU;
    c.situBeta = r.number("activation_situ_beta", 4.0);
    c.situLinearBeta = r.number("activation_situ_linear_beta", 25.0);
    if (!(c.situBeta > 0))
      r.fail("activation_situ_beta", "must be positive, got " + fmt(c.situBeta));
    if (!(c.situLinearBeta > 0))
      r.fail("activation_situ_linear_beta", "must be positive, got " + fmt(c.situLinearBeta));
  } else if (act == "silu" || act == "swiglu") {
    c.act = Act::SwiGLU;
  } else {
    r.fail("hidden_act", "is '" + act + "'; supported: 'situ', 'silu'");
  }

  // --- linear attention (KDA) and the layer schedule
  if (!r.has("linear_attn_config") || !tj->at("linear_attn_config").is_object())
    r.fail("linear_attn_config", "is missing");
  Reader la{tj->at("linear_attn_config"), path + "linear_attn_config.", source};
  c.kdaHeads = la.positive("num_heads");
  c.kdaHeadDim = la.positive("head_dim");
  c.convKernel = la.integer("short_conv_kernel_size", 4);
  if (c.convKernel < 1)
    la.fail("short_conv_kernel_size", "must be >= 1, got " + std::to_string(c.convKernel));
  if (la.has("gate_lower_bound")) {
    double g = la.number("gate_lower_bound");
    if (!(g <= 0) || !std::isfinite(g))
      la.fail("gate_lower_bound", "(g_min) must be <= 0 and finite, got " + fmt(g));
    c.gateLowerBound = g;
  }
  c.fullRankGate = la.boolean("use_full_rank_gate", false);
  std::vector<int64_t> kda = la.intList("kda_layers");
  std::vector<int64_t> full = la.intList("full_attn_layers");
  c.attn.assign(c.numLayers, AttnKind::KDA);
  std::vector<int> seen(c.numLayers, 0);
  auto mark = [&](const std::vector<int64_t> &list, const char *field, AttnKind kind) {
    for (int64_t l : list) {
      if (l < 1 || l > c.numLayers)
        la.fail(field, "lists layer " + std::to_string(l) + ", outside 1.." +
                           std::to_string(c.numLayers) + " (1-based)");
      if (seen[l - 1])
        la.fail(field, "lists layer " + std::to_string(l) +
                           " twice or also in the other layer list");
      seen[l - 1] = 1;
      c.attn[l - 1] = kind;
    }
  };
  mark(kda, "kda_layers", AttnKind::KDA);
  mark(full, "full_attn_layers", AttnKind::MLA);
  for (int64_t i = 0; i < c.numLayers; ++i)
    if (!seen[i])
      la.fail("kda_layers", "and full_attn_layers together must cover layers 1.." +
                                std::to_string(c.numLayers) + "; layer " +
                                std::to_string(i + 1) + " is in neither");

  // --- MLA
  c.mlaHeads = r.positive("num_attention_heads");
  int64_t kvHeads = r.integer("num_key_value_heads", c.mlaHeads);
  if (kvHeads != c.mlaHeads)
    r.fail("num_key_value_heads", "= " + std::to_string(kvHeads) +
                                      " must equal num_attention_heads = " +
                                      std::to_string(c.mlaHeads) + " (MLA)");
  c.qLoraRank = r.nonNegative("q_lora_rank", 0);
  c.kvLoraRank = r.positive("kv_lora_rank");
  c.qkNopeHeadDim = r.positive("qk_nope_head_dim");
  c.qkRopeHeadDim = r.nonNegative("qk_rope_head_dim", 0);
  c.vHeadDim = r.positive("v_head_dim");
  if (!r.boolean("mla_use_nope", true))
    r.fail("mla_use_nope", "= false (rotary MLA) is not supported: K3 and Kimi Linear use NoPE");
  c.mlaOutputGate = r.boolean("mla_use_output_gate", false);

  // --- FFN / MoE
  c.firstKDenseReplace = r.nonNegative("first_k_dense_replace", 0);
  c.moeLayerFreq = r.integer("moe_layer_freq", 1);
  if (c.moeLayerFreq < 1)
    r.fail("moe_layer_freq", "must be >= 1, got " + std::to_string(c.moeLayerFreq));
  c.ffn.assign(c.numLayers, FfnKind::Dense);
  c.numExperts = r.nonNegative("num_experts", 0);
  if (c.numExperts > 65536)
    r.fail("num_experts", "= " + std::to_string(c.numExperts) +
                              " exceeds the largest supported value 65536");
  if (c.numExperts > 0) {
    for (int64_t i = 0; i < c.numLayers; ++i)
      if (i >= c.firstKDenseReplace && i % c.moeLayerFreq == 0)
        c.ffn[i] = FfnKind::MoE;
  }
  if (c.count(FfnKind::Dense) > 0)
    c.intermediateSize = r.positive("intermediate_size");
  if (c.count(FfnKind::MoE) > 0) {
    c.topK = r.positive("num_experts_per_token");
    if (c.topK > c.numExperts)
      r.fail("num_experts_per_token", "= " + std::to_string(c.topK) +
                                          " exceeds num_experts = " +
                                          std::to_string(c.numExperts));
    c.numSharedExperts = r.nonNegative("num_shared_experts", 0);
    c.moeIntermediateSize = r.positive("moe_intermediate_size");
    c.latentDim = r.nonNegative("routed_expert_hidden_size", 0);
    c.latentNorm = r.boolean("latent_moe_use_norm", false);
    if (c.latentNorm && !c.latentDim)
      r.fail("latent_moe_use_norm", "= true needs routed_expert_hidden_size");
    if (c.latentDim && !c.latentNorm)
      r.fail("latent_moe_use_norm", "= false is not supported with a latent (Stable LatentMoE normalizes)");
    c.routerScore = r.string("moe_router_activation_func", "sigmoid");
    if (c.routerScore != "sigmoid" && c.routerScore != "softmax")
      r.fail("moe_router_activation_func", "is '" + c.routerScore +
                                               "'; supported: 'sigmoid', 'softmax'");
    c.renormalize = r.boolean("moe_renormalize", true);
    c.routedScalingFactor = r.number("routed_scaling_factor", 1.0);
    if (!(c.routedScalingFactor > 0))
      r.fail("routed_scaling_factor", "must be positive, got " + fmt(c.routedScalingFactor));
    for (const char *f : {"num_expert_group", "topk_group"}) {
      int64_t v = r.integer(f, 1);
      if (v != 1)
        r.fail(f, "= " + std::to_string(v) + " is not supported (group-limited routing; only 1)");
    }
    std::string method = r.string("topk_method", "noaux_tc");
    if (method != "noaux_tc" && method != "greedy")
      r.fail("topk_method", "is '" + method + "'; supported: 'noaux_tc', 'greedy'");
    c.routerBias = method == "noaux_tc";
  }
  c.attnResBlockSize = r.nonNegative("attn_res_block_size", 0);
  int64_t mtp = r.nonNegative("num_nextn_predict_layers", 0);
  if (mtp != 0)
    r.fail("num_nextn_predict_layers", "= " + std::to_string(mtp) +
                                           " is not supported (no MTP layers)");

  // --- quantization
  if (r.has("quantization_config")) {
    const json &q = tj->at("quantization_config");
    if (!q.is_object())
      throw Error(source + ": config field '" + path + "quantization_config' must be an object");
    std::string qpath = path + "quantization_config.";
    std::string method = stringField(q, "quant_method", qpath);
    std::string format = stringField(q, "format", qpath);
    if (method != "compressed-tensors" || format != "mxfp4-pack-quantized")
      throw Error(source + ": config field '" + path +
                  "quantization_config' has quant_method '" + method + "' and format '" +
                  format + "'; only compressed-tensors mxfp4-pack-quantized is supported");
    c.expertsMxfp4 = c.count(FfnKind::MoE) > 0;
  }
  if (c.expertsMxfp4) {
    if (c.expertWidth() % 32 != 0)
      r.fail(c.latentDim ? "routed_expert_hidden_size" : "hidden_size",
             "= " + std::to_string(c.expertWidth()) +
                 " must be a multiple of 32 for MXFP4 experts");
    if (c.moeIntermediateSize % 32 != 0)
      r.fail("moe_intermediate_size", "= " + std::to_string(c.moeIntermediateSize) +
                                          " must be a multiple of 32 for MXFP4 experts");
  }
  return c;
}

ModelConfig loadConfig(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw Error("config '" + path + "' is not a regular file");
  std::ifstream in(path);
  if (!in)
    throw Error("cannot open config '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parseConfig(ss.str(), path);
}

int64_t parameterCount(const ModelConfig &c) {
  int64_t d = c.hiddenSize, total = 2 * c.vocabSize * d + d;
  if (c.hasAttnRes())
    total += 2 * d;
  for (int64_t li = 0; li < c.numLayers; ++li) {
    total += 2 * d; // input / post-attention norms
    if (c.hasAttnRes())
      total += 4 * d;
    if (c.attn[li] == AttnKind::KDA) {
      int64_t p = c.kdaProjDim(), h = c.kdaHeads, r = c.gateRank();
      total += 3 * p * d + 3 * p * c.convKernel + r * d + p * r + p + c.aLogPaddedSize() +
               h * d + c.kdaHeadDim + d * p;
      total += c.fullRankGate ? p * d : r * d + p * r;
    } else {
      int64_t h = c.mlaHeads, qk = c.qkHeadDim();
      total += c.qLoraRank ? c.qLoraRank * d + c.qLoraRank + h * qk * c.qLoraRank : h * qk * d;
      total += c.mlaCacheDim() * d + c.kvLoraRank +
               h * (c.qkNopeHeadDim + c.vHeadDim) * c.kvLoraRank + d * h * c.vHeadDim;
      if (c.mlaOutputGate)
        total += h * c.vHeadDim * d;
    }
    if (c.ffn[li] == FfnKind::Dense) {
      total += 3 * c.intermediateSize * d;
    } else {
      int64_t w = c.expertWidth();
      total += c.numExperts * d + (c.routerBias ? c.numExperts : 0);
      if (c.latentDim)
        total += 2 * c.latentDim * d + c.latentDim;
      total += c.numExperts * 3 * c.moeIntermediateSize * w;
      total += 3 * c.sharedWidth() * d;
    }
  }
  return total;
}

} // namespace k3c
