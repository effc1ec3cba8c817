//===- Reference.cpp - the golden CPU reference executor ------------------===//

#include "models/Reference.h"
#include "support/Common.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

namespace k3c {

namespace {
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
std::vector<float> toFloat(const std::vector<double> &v) {
  return std::vector<float>(v.begin(), v.end());
}
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
} // namespace

Reference::Reference(ModelConfig config, WeightsF32 w, Precision p)
    : cfg(std::move(config)), weights(std::move(w)), precision(p) {}

double Reference::R(double x) const {
  switch (precision) {
  case Precision::BF16:
    return roundBf16(static_cast<float>(x));
  case Precision::F32:
    return static_cast<float>(x);
  case Precision::F64:
    break;
  }
  return x;
}

double Reference::F(double x) const {
  return precision == Precision::F64 ? x : static_cast<double>(static_cast<float>(x));
}

const F32Tensor &Reference::w(const std::string &name) const {
  auto it = weights.find(name);
  if (it == weights.end())
    throw Error("reference: weight '" + name + "' was not loaded");
  return it->second;
}

SequenceState Reference::newSequence() const {
  SequenceState s;
  for (int64_t li = 0; li < cfg.numLayers; ++li) {
    if (cfg.attn[li] == AttnKind::KDA) {
      s.kda.emplace_back(cfg.kdaHeads * cfg.kdaHeadDim * cfg.kdaHeadDim, 0.0f);
      s.conv.emplace_back((cfg.convKernel - 1) * 3 * cfg.kdaProjDim(), 0.0f);
    } else {
      s.mla.emplace_back();
    }
  }
  return s;
}

// y[t, o] = sum_i x[t, i] W[o, i], fp64 accumulation. Large products run
// over the cores in blocks of 64 outputs (each output's sum is the same
// sequential loop whichever thread runs it: results do not depend on the
// thread count).
Reference::Vec Reference::linear(const Vec &x, int64_t rows, const F32Tensor &W,
                                 bool round) const {
  int64_t out = W.shape[0], in = W.shape[1];
  Vec y(rows * out);
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (out + kBlock - 1) / kBlock;
  // Small products (k3-tiny's) stay on the calling thread.
  const size_t minParallel =
      rows * out * in >= (int64_t{1} << 22) ? 2 : static_cast<size_t>(blocks) + 1;
  parallelFor(
      static_cast<size_t>(blocks),
      [&](size_t blk) {
        const int64_t o0 = static_cast<int64_t>(blk) * kBlock,
                      o1 = std::min(out, o0 + kBlock);
        for (int64_t t = 0; t < rows; ++t)
          for (int64_t o = o0; o < o1; ++o) {
            const double *xr = &x[t * in];
            const float *wr = &W.data[o * in];
            double acc = 0;
            for (int64_t i = 0; i < in; ++i)
              acc += xr[i] * wr[i];
            y[t * out + o] = round ? R(acc) : F(acc);
          }
      },
      minParallel);
  return y;
}

// KimiRMSNorm: normalize in fp32, round to the activation dtype, then scale.
Reference::Vec Reference::rmsnorm(const Vec &x, int64_t rows, const F32Tensor &weight,
                                  double eps) const {
  int64_t n = weight.shape[0];
  Vec y(rows * n);
  for (int64_t t = 0; t < rows; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i)
      ss += x[t * n + i] * x[t * n + i];
    double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; ++i)
      y[t * n + i] = R(R(x[t * n + i] * inv) * weight.data[i]);
  }
  return y;
}

Reference::Vec Reference::glu(const Vec &a, const Vec &b) const {
  Vec h(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    double x = a[i], y = b[i];
    double v;
    if (cfg.act == Act::SiTU) {
      double b1 = cfg.situBeta, b2 = cfg.situLinearBeta;
      v = (b1 * std::tanh(x / b1) * sigmoid(x)) * (b2 * std::tanh(y / b2));
    } else {
      v = silu(x) * y;
    }
    h[i] = R(v);
  }
  return h;
}

Reference::Vec Reference::attnRes(const std::vector<const Vec *> &src, int64_t T,
                                  const std::string &normName,
                                  const std::string &projName) const {
  int64_t d = cfg.hiddenSize, n = static_cast<int64_t>(src.size());
  const F32Tensor &wn = w(normName), &wp = w(projName);
  Vec out(T * d);
  std::vector<double> score(n);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      const double *v = &(*src[i])[t * d];
      double ss = 0;
      for (int64_t j = 0; j < d; ++j)
        ss += v[j] * v[j];
      double inv = 1.0 / std::sqrt(ss / d + cfg.rmsNormEps), s = 0;
      for (int64_t j = 0; j < d; ++j)
        s += v[j] * inv * (static_cast<double>(wn.data[j]) * wp.data[j]);
      score[i] = s;
    }
    double mx = *std::max_element(score.begin(), score.end()), z = 0;
    for (double &s : score)
      z += (s = std::exp(s - mx));
    for (int64_t j = 0; j < d; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < n; ++i)
        acc += score[i] / z * (*src[i])[t * d + j];
      out[t * d + j] = R(acc);
    }
  }
  return out;
}

Reference::Vec Reference::kda(int64_t li, const Vec &x, int64_t T, SequenceState &st) const {
  auto L = [&](const std::string &rest) { return w(layerName(li, "self_attn." + rest)); };
  const int64_t H = cfg.kdaHeads, dh = cfg.kdaHeadDim, P = cfg.kdaProjDim(),
                W = cfg.convKernel, ki = cfg.attnIndex(li);
  std::vector<double> &S = st.kda[ki], &win = st.conv[ki];

  // Projections, then causal depthwise conv + SiLU on q, k, v.
  Vec proj[3] = {linear(x, T, L("q_proj.weight")), linear(x, T, L("k_proj.weight")),
                 linear(x, T, L("v_proj.weight"))};
  const char *convNames[3] = {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"};
  Vec act[3];
  for (int which = 0; which < 3; ++which) {
    const F32Tensor &cw = L(convNames[which]);
    act[which].resize(T * P);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < P; ++c) {
        double u = 0;
        for (int64_t j = 0; j < W; ++j) {
          int64_t src = t - (W - 1) + j; // token index; < 0 reads the window
          double in = src >= 0 ? proj[which][src * P + c]
                               : win[(W - 1 + src) * 3 * P + which * P + c];
          u += cw.data[c * W + j] * in;
        }
        act[which][t * P + c] = R(silu(u));
      }
    // New window: the last W-1 pre-conv inputs.
    std::vector<double> old(win);
    for (int64_t r = 0; r < W - 1; ++r) {
      int64_t src = T - (W - 1) + r;
      for (int64_t c = 0; c < P; ++c)
        win[r * 3 * P + which * P + c] =
            src >= 0 ? proj[which][src * P + c] : old[(W - 1 + src) * 3 * P + which * P + c];
    }
  }

  // Gate, beta.
  Vec z = linear(linear(x, T, L("f_a_proj.weight")), T, L("f_b_proj.weight"));
  const F32Tensor &alog = L("A_log"), &dt = L("dt_bias");
  Vec b = linear(x, T, L("b_proj.weight"));
  Vec gate = cfg.fullRankGate
                 ? linear(x, T, L("g_proj.weight"))
                 : linear(linear(x, T, L("g_a_proj.weight")), T, L("g_b_proj.weight"));
  const F32Tensor &onorm = L("o_norm.weight");

  Vec o(T * P);
  std::vector<double> q(dh), k(dh), g(dh), pred(dh), ov(dh);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double qn = 0, kn = 0;
      for (int64_t i = 0; i < dh; ++i) {
        q[i] = act[0][t * P + h * dh + i];
        k[i] = act[1][t * P + h * dh + i];
        qn += q[i] * q[i];
        kn += k[i] * k[i];
      }
      qn = 1.0 / std::sqrt(qn + 1e-6);
      kn = 1.0 / std::sqrt(kn + 1e-6);
      for (int64_t i = 0; i < dh; ++i) {
        q[i] = F(q[i] * qn * scale);
        k[i] = F(k[i] * kn);
        double zz = static_cast<double>(z[t * P + h * dh + i]) + dt.data[h * dh + i];
        double gi = cfg.gateLowerBound
                        ? *cfg.gateLowerBound * sigmoid(std::exp(alog.data[h]) * zz)
                        : -std::exp(alog.data[h]) * softplus(zz);
        g[i] = F(gi);
      }
      double beta = sigmoid(b[t * H + h]);
      // State Sᵀ: element (v = j, k = i) at S[h][j][i].
      double *Sh = &S[h * dh * dh];
      for (int64_t j = 0; j < dh; ++j)
        for (int64_t i = 0; i < dh; ++i)
          Sh[j * dh + i] = F(Sh[j * dh + i] * std::exp(g[i]));
      for (int64_t j = 0; j < dh; ++j) {
        double s = 0;
        for (int64_t i = 0; i < dh; ++i)
          s += Sh[j * dh + i] * k[i];
        pred[j] = s;
      }
      for (int64_t j = 0; j < dh; ++j) {
        double vj = act[2][t * P + h * dh + j];
        double u = beta * (vj - pred[j]);
        for (int64_t i = 0; i < dh; ++i)
          Sh[j * dh + i] = F(Sh[j * dh + i] + k[i] * u);
      }
      double ss = 0;
      for (int64_t j = 0; j < dh; ++j) {
        double s = 0;
        for (int64_t i = 0; i < dh; ++i)
          s += Sh[j * dh + i] * q[i];
        ov[j] = R(s); // the kernels hand o back in the dtype of v
        ss += ov[j] * ov[j];
      }
      // Gated per-head RMSNorm, fp32 inside.
      double inv = 1.0 / std::sqrt(ss / dh + cfg.rmsNormEps);
      for (int64_t j = 0; j < dh; ++j)
        o[t * P + h * dh + j] =
            R(ov[j] * inv * onorm.data[j] * sigmoid(gate[t * P + h * dh + j]));
    }
  if (kdaStateBf16 && precision == Precision::BF16)
    for (double &v : S)
      v = R(v);
  return linear(o, T, L("o_proj.weight"));
}

Reference::Vec Reference::mla(int64_t li, const Vec &x, int64_t T, SequenceState &st) const {
  auto L = [&](const std::string &rest) { return w(layerName(li, "self_attn." + rest)); };
  const int64_t H = cfg.mlaHeads, nope = cfg.qkNopeHeadDim, rope = cfg.qkRopeHeadDim,
                qk = cfg.qkHeadDim(), dv = cfg.vHeadDim, R_ = cfg.kvLoraRank,
                cd = cfg.mlaCacheDim();
  std::vector<double> &cache = st.mla[cfg.attnIndex(li)];
  Vec q = cfg.qLoraRank
              ? linear(rmsnorm(linear(x, T, L("q_a_proj.weight")), T,
                               L("q_a_layernorm.weight"), cfg.mlaNormEps),
                       T, L("q_b_proj.weight"))
              : linear(x, T, L("q_proj.weight"));
  Vec ckv = linear(x, T, L("kv_a_proj_with_mqa.weight"));
  Vec c(T * R_);
  for (int64_t t = 0; t < T; ++t)
    std::copy(&ckv[t * cd], &ckv[t * cd + R_], &c[t * R_]);
  Vec cn = rmsnorm(c, T, L("kv_a_layernorm.weight"), cfg.mlaNormEps);
  int64_t past = static_cast<int64_t>(cache.size()) / cd;
  for (int64_t t = 0; t < T; ++t) {
    cache.insert(cache.end(), &cn[t * R_], &cn[t * R_] + R_);
    cache.insert(cache.end(), &ckv[t * cd + R_], &ckv[t * cd + cd]);
  }
  int64_t S = past + T;
  Vec latent(S * R_);
  for (int64_t s = 0; s < S; ++s)
    std::copy(&cache[s * cd], &cache[s * cd + R_], &latent[s * R_]);
  Vec kv = linear(latent, S, L("kv_b_proj.weight")); // [S, H*(nope+dv)]
  const double scale = 1.0 / std::sqrt(static_cast<double>(qk));
  Vec a(T * H * dv);
  std::vector<double> score(S);
  for (int64_t t = 0; t < T; ++t) {
    int64_t visible = past + t + 1; // causal: the cache plus tokens up to t
    for (int64_t h = 0; h < H; ++h) {
      const double *qh = &q[t * H * qk + h * qk];
      double mx = -INFINITY;
      for (int64_t s = 0; s < visible; ++s) {
        const double *kh = &kv[s * H * (nope + dv) + h * (nope + dv)];
        const double *kpe = &cache[s * cd + R_];
        double acc = 0;
        for (int64_t i = 0; i < nope; ++i)
          acc += qh[i] * kh[i];
        for (int64_t i = 0; i < rope; ++i)
          acc += qh[nope + i] * kpe[i];
        score[s] = acc * scale;
        mx = std::max(mx, score[s]);
      }
      double z = 0;
      for (int64_t s = 0; s < visible; ++s)
        z += (score[s] = std::exp(score[s] - mx));
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t s = 0; s < visible; ++s)
          acc += score[s] / z * kv[s * H * (nope + dv) + h * (nope + dv) + nope + j];
        a[t * H * dv + h * dv + j] = R(acc);
      }
    }
  }
  if (cfg.mlaOutputGate) {
    Vec g = linear(x, T, L("g_proj.weight"));
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = R(a[i] * R(sigmoid(g[i])));
  }
  return linear(a, T, L("o_proj.weight"));
}

Reference::Vec Reference::moe(int64_t li, const Vec &x, int64_t T) const {
  auto L = [&](const std::string &rest) { return w(layerName(li, "block_sparse_moe." + rest)); };
  const int64_t E = cfg.numExperts, K = cfg.topK, D = cfg.hiddenSize, Wd = cfg.expertWidth();
  Vec logits = linear(x, T, L("gate.weight"), /*round=*/false); // fp32 router
  Vec z = cfg.latentDim ? linear(x, T, L("routed_expert_down_proj.weight")) : x;
  Vec u(T * Wd);
  std::vector<int32_t> hint = routingHint ? routingHint(moeCall++, T) : std::vector<int32_t>{};
  std::vector<double> s(E), sel(E);
  std::vector<int64_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    if (cfg.routerScore == "sigmoid") {
      for (int64_t e = 0; e < E; ++e)
        s[e] = sigmoid(logits[t * E + e]);
    } else {
      double mx = *std::max_element(&logits[t * E], &logits[t * E] + E), zsum = 0;
      for (int64_t e = 0; e < E; ++e)
        zsum += (s[e] = std::exp(logits[t * E + e] - mx));
      for (double &v : s)
        v /= zsum;
    }
    for (int64_t e = 0; e < E; ++e)
      sel[e] = s[e] + (cfg.routerBias ? L("gate.e_score_correction_bias").data[e] : 0.0f);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return sel[a] > sel[b]; });
    if (hint.size() == static_cast<size_t>(T * K)) {
      // The compiled model's choice at a near tie (setRoutingHint).
      const int32_t *c = &hint[t * K];
      std::vector<int64_t> mine(order.begin(), order.begin() + K), theirs(c, c + K);
      std::sort(mine.begin(), mine.end());
      std::sort(theirs.begin(), theirs.end());
      if (mine != theirs) {
        const double kth = sel[order[K - 1]], slack = tieTol * std::max(std::abs(kth), 1e-6);
        bool near = std::adjacent_find(theirs.begin(), theirs.end()) == theirs.end();
        for (int64_t e : theirs)
          near = near && e >= 0 && e < E && sel[e] >= kth - slack;
        if (near) {
          std::copy(c, c + K, order.begin());
          ++forced;
          for (int64_t e : theirs)
            widestTie = std::max(widestTie, (kth - sel[e]) / std::max(std::abs(kth), 1e-6));
        } else {
          ++refused;
        }
      }
    }
    double sum = 0;
    for (int64_t k = 0; k < K; ++k)
      sum += s[order[k]];
    std::vector<double> acc(Wd, 0.0);
    Vec zt(z.begin() + t * Wd, z.begin() + (t + 1) * Wd);
    for (int64_t k = 0; k < K; ++k) {
      int64_t e = order[k];
      double wk = s[e];
      if (cfg.renormalize)
        wk /= sum + 1e-20;
      wk *= cfg.routedScalingFactor;
      std::string base = "experts." + std::to_string(e) + ".";
      Vec h = glu(linear(zt, 1, L(base + "w1.weight")), linear(zt, 1, L(base + "w3.weight")));
      Vec y = linear(h, 1, L(base + "w2.weight"));
      for (int64_t j = 0; j < Wd; ++j)
        acc[j] += y[j] * wk;
    }
    for (int64_t j = 0; j < Wd; ++j)
      u[t * Wd + j] = R(acc[j]);
  }
  Vec r = cfg.latentDim
              ? linear(rmsnorm(u, T, L("routed_expert_norm.weight"), cfg.rmsNormEps), T,
                       L("routed_expert_up_proj.weight"))
              : u;
  if (cfg.numSharedExperts) {
    Vec sh = linear(glu(linear(x, T, L("shared_experts.gate_proj.weight")),
                        linear(x, T, L("shared_experts.up_proj.weight"))),
                    T, L("shared_experts.down_proj.weight"));
    for (int64_t i = 0; i < T * D; ++i)
      r[i] = R(r[i] + sh[i]);
  }
  return r;
}

Reference::Vec Reference::dense(int64_t li, const Vec &x, int64_t T) const {
  auto L = [&](const std::string &rest) { return w(layerName(li, "mlp." + rest)); };
  return linear(glu(linear(x, T, L("gate_proj.weight")), linear(x, T, L("up_proj.weight"))), T,
                L("down_proj.weight"));
}

std::vector<float> Reference::forward(const std::vector<int64_t> &ids, SequenceState &st,
                                      const TraceFn &trace) const {
  const int64_t T = static_cast<int64_t>(ids.size()), D = cfg.hiddenSize;
  if (T == 0)
    return {};
  moeCall = 0; // routing hints are per forward call
  if (cfg.maxPositions > 0 && st.length + T > cfg.maxPositions)
    throw Error("sequence of " + std::to_string(st.length + T) +
                " tokens exceeds max_position_embeddings = " + std::to_string(cfg.maxPositions));
  const F32Tensor &embed = w("model.embed_tokens.weight");
  Vec h(T * D);
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= cfg.vocabSize)
      throw Error("token id " + std::to_string(ids[t]) + " at position " + std::to_string(t) +
                  " is outside the vocabulary [0, " + std::to_string(cfg.vocabSize) + ")");
    std::copy(&embed.data[ids[t] * D], &embed.data[(ids[t] + 1) * D], &h[t * D]);
  }
  auto add = [&](Vec &acc, const Vec &v) {
    for (size_t i = 0; i < acc.size(); ++i)
      acc[i] = R(acc[i] + v[i]);
  };
  std::vector<Vec> blocks;
  Vec prefix = h;
  bool havePrefix = true;
  auto sources = [&]() {
    std::vector<const Vec *> s;
    for (const Vec &b : blocks)
      s.push_back(&b);
    s.push_back(&prefix);
    return s;
  };
  for (int64_t li = 0; li < cfg.numLayers; ++li) {
    Vec x;
    if (cfg.hasAttnRes()) {
      x = blocks.empty() ? prefix
                         : attnRes(sources(), T, layerName(li, "self_attention_res_norm.weight"),
                                   layerName(li, "self_attention_res_proj.weight"));
      if (li % cfg.attnResBlockSize == 0) {
        blocks.push_back(prefix);
        havePrefix = false;
      }
    } else {
      x = h;
    }
    Vec xn = rmsnorm(x, T, w(layerName(li, "input_layernorm.weight")), cfg.rmsNormEps);
    Vec a = cfg.attn[li] == AttnKind::KDA ? kda(li, xn, T, st) : mla(li, xn, T, st);
    if (trace)
      trace(li, "attn", toFloat(a));
    Vec y;
    if (cfg.hasAttnRes()) {
      if (havePrefix)
        add(prefix, a);
      else
        prefix = a;
      havePrefix = true;
      y = attnRes(sources(), T, layerName(li, "mlp_res_norm.weight"),
                  layerName(li, "mlp_res_proj.weight"));
    } else {
      add(h, a);
      y = h;
    }
    Vec yn = rmsnorm(y, T, w(layerName(li, "post_attention_layernorm.weight")), cfg.rmsNormEps);
    Vec m = cfg.ffn[li] == FfnKind::Dense ? dense(li, yn, T) : moe(li, yn, T);
    if (trace)
      trace(li, "ffn", toFloat(m));
    add(cfg.hasAttnRes() ? prefix : h, m);
    if (trace) // the residual stream (running block sum) after this layer
      trace(li, "stream", toFloat(cfg.hasAttnRes() ? prefix : h));
  }
  Vec out = cfg.hasAttnRes() ? attnRes(sources(), T, "model.output_attn_res_norm.weight",
                                       "model.output_attn_res_proj.weight")
                             : h;
  Vec fn = rmsnorm(out, T, w("model.norm.weight"), cfg.rmsNormEps);
  st.length += T;
  return toFloat(linear(fn, T, w("lm_head.weight"), /*round=*/false));
}

std::vector<int64_t> Reference::generateGreedy(const std::vector<int64_t> &prompt, int64_t steps,
                                               std::vector<std::vector<float>> *logits) const {
  SequenceState st = newSequence();
  std::vector<int64_t> out;
  std::vector<float> l = forward(prompt, st);
  const int64_t V = cfg.vocabSize;
  std::vector<float> last(l.end() - V, l.end());
  for (int64_t s = 0; s < steps; ++s) {
    if (logits)
      logits->push_back(last);
    int64_t next = std::max_element(last.begin(), last.end()) - last.begin();
    out.push_back(next);
    if (s + 1 < steps)
      last = forward({next}, st);
  }
  return out;
}

Reference loadReference(const std::string &dir, Precision precision, bool progress) {
  ModelConfig c = loadConfig((std::filesystem::path(dir) / "config.json").string());
  CheckpointFiles ckpt = CheckpointFiles::open(dir);
  WeightsF32 w = loadWeightsF32(c, ckpt, progress);
  return Reference(std::move(c), std::move(w), precision);
}

} // namespace k3c
