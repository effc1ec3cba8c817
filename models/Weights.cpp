//===- Weights.cpp - checkpoint tensor names, binding and loading ---------===//

#include "models/Weights.h"
#include "support/Common.h"
#include "models/MXFP4.h"

#include <cstdio>
#include <set>

namespace k3c {

std::string layerName(int64_t li, const std::string &rest) {
  return "model.layers." + std::to_string(li) + "." + rest;
}

std::string expertName(int64_t li, int64_t e, const char *w, const char *suffix) {
  return layerName(li, "block_sparse_moe.experts." + std::to_string(e) + "." + w + "." + suffix);
}

std::vector<WeightSpec> expectedWeights(const ModelConfig &c) {
  std::vector<WeightSpec> out;
  auto add = [&](const std::string &name, std::vector<int64_t> shape, int64_t layer,
                 DType store = DType::BF16) {
    WeightSpec s;
    s.name = name;
    s.shapes = {std::move(shape)};
    s.storeType = store;
    s.layer = layer;
    out.push_back(std::move(s));
    return &out.back();
  };
  const int64_t d = c.hiddenSize;
  add("model.embed_tokens.weight", {c.vocabSize, d}, -1);
  for (int64_t li = 0; li < c.numLayers; ++li) {
    auto L = [&](const std::string &rest) { return layerName(li, rest); };
    add(L("input_layernorm.weight"), {d}, li);
    add(L("post_attention_layernorm.weight"), {d}, li);
    if (c.hasAttnRes()) {
      add(L("self_attention_res_norm.weight"), {d}, li);
      add(L("self_attention_res_proj.weight"), {1, d}, li);
      add(L("mlp_res_norm.weight"), {d}, li);
      add(L("mlp_res_proj.weight"), {1, d}, li);
    }
    if (c.attn[li] == AttnKind::KDA) {
      int64_t p = c.kdaProjDim(), h = c.kdaHeads, r = c.gateRank();
      for (const char *x : {"q", "k", "v"}) {
        add(L(std::string("self_attn.") + x + "_proj.weight"), {p, d}, li);
        add(L(std::string("self_attn.") + x + "_conv1d.weight"), {p, 1, c.convKernel}, li,
            DType::F32);
      }
      add(L("self_attn.f_a_proj.weight"), {r, d}, li);
      add(L("self_attn.f_b_proj.weight"), {p, r}, li);
      add(L("self_attn.dt_bias"), {p}, li, DType::F32);
      WeightSpec *alog = add(L("self_attn.A_log"), {c.gateLowerBound ? c.aLogPaddedSize() : h},
                             li, DType::F32);
      // Accepted layouts: K3's zero-padded [ceil(H/128)*128], plain [H], and
      // Kimi Linear's [1, 1, H, 1].
      for (std::vector<int64_t> s :
           {std::vector<int64_t>{h}, {c.aLogPaddedSize()}, {1, 1, h, 1}})
        if (s != alog->shapes.front())
          alog->shapes.push_back(s);
      add(L("self_attn.b_proj.weight"), {h, d}, li);
      if (c.fullRankGate) {
        add(L("self_attn.g_proj.weight"), {p, d}, li);
      } else {
        add(L("self_attn.g_a_proj.weight"), {r, d}, li);
        add(L("self_attn.g_b_proj.weight"), {p, r}, li);
      }
      add(L("self_attn.o_norm.weight"), {c.kdaHeadDim}, li, DType::F32);
      add(L("self_attn.o_proj.weight"), {d, p}, li);
    } else {
      int64_t h = c.mlaHeads;
      if (c.qLoraRank) {
        add(L("self_attn.q_a_proj.weight"), {c.qLoraRank, d}, li);
        add(L("self_attn.q_a_layernorm.weight"), {c.qLoraRank}, li);
        add(L("self_attn.q_b_proj.weight"), {h * c.qkHeadDim(), c.qLoraRank}, li);
      } else {
        add(L("self_attn.q_proj.weight"), {h * c.qkHeadDim(), d}, li);
      }
      add(L("self_attn.kv_a_proj_with_mqa.weight"), {c.mlaCacheDim(), d}, li);
      add(L("self_attn.kv_a_layernorm.weight"), {c.kvLoraRank}, li);
      add(L("self_attn.kv_b_proj.weight"), {h * (c.qkNopeHeadDim + c.vHeadDim), c.kvLoraRank},
          li);
      if (c.mlaOutputGate)
        add(L("self_attn.g_proj.weight"), {h * c.vHeadDim, d}, li);
      add(L("self_attn.o_proj.weight"), {d, h * c.vHeadDim}, li);
    }
    if (c.ffn[li] == FfnKind::Dense) {
      add(L("mlp.gate_proj.weight"), {c.intermediateSize, d}, li);
      add(L("mlp.up_proj.weight"), {c.intermediateSize, d}, li);
      add(L("mlp.down_proj.weight"), {d, c.intermediateSize}, li);
    } else {
      int64_t e = c.numExperts, w = c.expertWidth(), in = c.moeIntermediateSize;
      add(L("block_sparse_moe.gate.weight"), {e, d}, li);
      if (c.routerBias)
        add(L("block_sparse_moe.gate.e_score_correction_bias"), {e}, li, DType::F32);
      if (c.latentDim) {
        add(L("block_sparse_moe.routed_expert_down_proj.weight"), {w, d}, li);
        add(L("block_sparse_moe.routed_expert_norm.weight"), {w}, li);
        add(L("block_sparse_moe.routed_expert_up_proj.weight"), {d, w}, li);
      }
      for (int64_t x = 0; x < e; ++x)
        for (const char *which : {"w1", "w2", "w3"}) {
          bool down = std::string(which) == "w2";
          int64_t rows = down ? w : in, cols = down ? in : w;
          if (c.expertsMxfp4) {
            add(expertName(li, x, which, "weight_packed"), {rows, cols / 2}, li, DType::U8)->kind =
                WeightKind::MXFP4Packed;
            add(expertName(li, x, which, "weight_scale"), {rows, cols / mxfp4::kBlock}, li,
                DType::U8)
                ->kind = WeightKind::MXFP4Scale;
          } else {
            add(expertName(li, x, which, "weight"), {rows, cols}, li);
          }
        }
      if (c.numSharedExperts) {
        int64_t s = c.sharedWidth();
        add(L("block_sparse_moe.shared_experts.gate_proj.weight"), {s, d}, li);
        add(L("block_sparse_moe.shared_experts.up_proj.weight"), {s, d}, li);
        add(L("block_sparse_moe.shared_experts.down_proj.weight"), {d, s}, li);
      }
    }
  }
  add("model.norm.weight", {d}, -1);
  if (c.hasAttnRes()) {
    add("model.output_attn_res_norm.weight", {d}, -1);
    add("model.output_attn_res_proj.weight", {1, d}, -1);
  }
  add("lm_head.weight", {c.vocabSize, d}, -1);
  return out;
}

std::vector<artifact::WeightBinding> weightBindings(const ModelConfig &c) {
  const std::vector<std::string> floats = {"bf16", "f16", "f32"}, bytes = {"u8"};
  std::vector<artifact::WeightBinding> out;
  for (const WeightSpec &s : expectedWeights(c)) {
    if (s.kind == WeightKind::MXFP4Scale)
      continue; // the payload's binding reads it
    artifact::WeightBinding b;
    size_t ex = s.name.find(".experts.");
    if (ex == std::string::npos) {
      b.name = s.name;
      b.transform = s.shapes.size() > 1 ? "flatten" : "convert";
      b.dtype = s.storeType == DType::F32 ? "f32" : "bf16";
      b.shape = s.shapes.front();
      b.sources.push_back({c.weightPrefix + s.name, floats, s.shapes});
      out.push_back(std::move(b));
      continue;
    }
    // "<layer>.block_sparse_moe.experts.<e>.<w>.<suffix>": one binding per
    // (layer, w), from expert 0's entry.
    size_t dot = s.name.find('.', ex + 9);
    if (s.name.compare(ex + 9, dot - ex - 9, "0") != 0)
      continue;
    size_t dot2 = s.name.find('.', dot + 1);
    std::string base = s.name.substr(0, ex) + ".experts.",
                which = s.name.substr(dot + 1, dot2 - dot - 1);
    std::string pattern = c.weightPrefix + base + "{expert}." + which + ".";
    b.name = base + which;
    b.shard = "experts";
    const std::vector<int64_t> &rc = s.shapes.front();
    if (s.kind == WeightKind::MXFP4Packed) {
      const int64_t rows = rc[0], cols = rc[1] * 2;
      b.transform = "mxfp4_stack";
      b.dtype = "mxfp4";
      b.shape = {c.numExperts, rows, cols};
      b.sources.push_back({pattern + "weight_packed", bytes, {{rows, cols / 2}}});
      b.sources.push_back({pattern + "weight_scale", bytes, {{rows, cols / mxfp4::kBlock}}});
    } else {
      b.transform = "stack";
      b.dtype = "bf16";
      b.shape = {c.numExperts, rc[0], rc[1]};
      b.sources.push_back({pattern + "weight", floats, {rc}});
    }
    out.push_back(std::move(b));
  }
  return out;
}

namespace {
bool isFloat(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

std::string listProblems(const char *what, const std::vector<std::string> &items) {
  std::string s;
  size_t shown = std::min<size_t>(items.size(), 25);
  for (size_t i = 0; i < shown; ++i)
    s += std::string("\n  ") + what + ": " + items[i];
  if (items.size() > shown)
    s += "\n  ... and " + std::to_string(items.size() - shown) + " more " + what;
  return s;
}
} // namespace

void bindCheckpoint(const ModelConfig &c, const CheckpointFiles &ckpt) {
  std::vector<WeightSpec> specs = expectedWeights(c);
  std::set<std::string> expected;
  std::vector<std::string> missing, unexpected, misshaped;
  for (const WeightSpec &s : specs) {
    std::string full = c.weightPrefix + s.name;
    expected.insert(full);
    const TensorInfo *t = ckpt.find(full);
    if (!t) {
      missing.push_back(full + " " + shapeStr(s.shapes.front()));
      continue;
    }
    bool shapeOk = false;
    for (const auto &shape : s.shapes)
      shapeOk |= t->shape == shape;
    bool typeOk = s.kind == WeightKind::Float ? isFloat(t->dtype) : t->dtype == DType::U8;
    if (!shapeOk || !typeOk)
      misshaped.push_back(full + ": " + dtypeName(t->dtype) + " " + shapeStr(t->shape) +
                          " in the checkpoint, expected " +
                          (s.kind == WeightKind::Float ? "BF16/F16/F32 " : "U8 ") +
                          shapeStr(s.shapes.front()));
  }
  for (const std::string &name : ckpt.names()) {
    if (expected.count(name))
      continue;
    if (name.rfind("vision_tower.", 0) == 0 || name.rfind("mm_projector.", 0) == 0)
      continue;
    unexpected.push_back(name);
  }
  if (missing.empty() && unexpected.empty() && misshaped.empty())
    return;
  throw Error("checkpoint '" + ckpt.directory() + "' does not match config '" + c.source +
              "': " + std::to_string(missing.size()) + " missing, " +
              std::to_string(unexpected.size()) + " unexpected, " +
              std::to_string(misshaped.size()) + " mis-shaped tensors" +
              listProblems("missing", missing) + listProblems("unexpected", unexpected) +
              listProblems("mis-shaped", misshaped));
}

F32Tensor readFloat(const CheckpointFiles &ckpt, const TensorInfo &t) {
  if (t.dtype != DType::BF16 && t.dtype != DType::F16 && t.dtype != DType::F32)
    throw Error("tensor '" + t.name + "' has dtype " + dtypeName(t.dtype) +
                ", expected a float type");
  F32Tensor out;
  out.shape = t.shape;
  const int64_t n = t.numel();
  out.data.resize(n);
  const uint8_t *p = ckpt.data(t);
  float *o = out.data.data();
  // Converted over the cores in blocks of 1M elements (a full-width
  // checkpoint's tensors are GBs).
  constexpr int64_t kBlock = int64_t{1} << 20;
  const DType dt = t.dtype;
  parallelFor(static_cast<size_t>((n + kBlock - 1) / kBlock), [&](size_t blk) {
    const int64_t i0 = static_cast<int64_t>(blk) * kBlock, i1 = std::min(n, i0 + kBlock);
    if (dt == DType::F32) {
      std::memcpy(o + i0, p + 4 * i0, 4 * (i1 - i0));
      return;
    }
    for (int64_t i = i0; i < i1; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      o[i] = dt == DType::BF16 ? bf16ToFloat(h) : f16ToFloat(h);
    }
  });
  return out;
}

WeightsF32 loadWeightsF32(const ModelConfig &c, const CheckpointFiles &ckpt, bool progress) {
  bindCheckpoint(c, ckpt);
  WeightsF32 w;
  std::vector<WeightSpec> specs = expectedWeights(c);
  size_t done = 0;
  ProgressLine bar("loading weights (tensors)", specs.size(), progress);
  for (const WeightSpec &s : specs) {
    bar.update(++done);
    if (s.kind == WeightKind::MXFP4Scale)
      continue;
    const TensorInfo *t = ckpt.find(c.weightPrefix + s.name);
    if (s.kind == WeightKind::MXFP4Packed) {
      std::string base = s.name.substr(0, s.name.size() - std::string("weight_packed").size());
      const TensorInfo *sc = ckpt.find(c.weightPrefix + base + "weight_scale");
      int64_t rows = t->shape[0], cols = t->shape[1] * 2;
      F32Tensor f;
      f.shape = {rows, cols};
      f.data.resize(rows * cols);
      mxfp4::dequantize(ckpt.data(*t), ckpt.data(*sc), rows, cols, f.data.data());
      w[base + "weight"] = std::move(f);
      continue;
    }
    F32Tensor f = readFloat(ckpt, *t);
    if (s.name.size() > 5 && s.name.compare(s.name.size() - 5, 5, "A_log") == 0) {
      f.data.resize(c.kdaHeads); // padded entries are not used
      f.shape = {c.kdaHeads};
    }
    w[s.name] = std::move(f);
  }
  return w;
}

} // namespace k3c
