//===- WeightStore.cpp - checkpoint tensors into the runtime ----------------===//

#include "runtime/HostModel.h"

namespace k3c::rt::detail {

void HostModel::loadWeights(Entry &e) {
  CheckpointFiles ckpt = CheckpointFiles::open(ckptPath);
  std::vector<Value *> ws;
  for (Value &v : e.values)
    if (v.kind == "weight")
      ws.push_back(&v);
  ProgressLine bar("loading weights (tensors)", ws.size(), opts.progress);
  size_t done = 0;
  auto need = [&](const std::string &name) -> const TensorInfo & {
    const TensorInfo *t = ckpt.find(prefix + name);
    if (!t)
      throw Error("checkpoint '" + ckptPath + "' has no tensor '" + prefix + name +
                  "' that the artifact needs");
    return *t;
  };
  for (Value *v : ws) {
    bar.update(++done);
    if (v->mxfp4) {
      // "<layer>.block_sparse_moe.experts.w1" -> experts.<e>.w1.weight_packed/scale
      int64_t E = v->shape[0], N = v->shape[1], K = v->shape[2];
      size_t dot = v->name.rfind('.');
      std::string base = v->name.substr(0, dot), which = v->name.substr(dot + 1);
      // Under EP only the home experts are loaded (slots 0..home-1).
      ExpertSlots es = expertSlots(E);
      const int64_t S = es.slots;
      Buffer *p = newBuffer("i8", {S * N * K / 2}, "weight " + v->name);
      Buffer *s = newBuffer("i8", {S * N * K / 32}, "weight " + v->name);
      std::vector<uint8_t> cp(S * N * K / 2), cs(S * N * K / 32);
      for (int64_t slot = 0; slot < es.home; ++slot) {
        int64_t x = es.first + slot;
        std::string en = base + "." + std::to_string(x) + "." + which + ".";
        const TensorInfo &tp = need(en + "weight_packed"), &ts = need(en + "weight_scale");
        if (tp.numel() != N * K / 2 || ts.numel() != N * K / 32 || tp.dtype != DType::U8 ||
            ts.dtype != DType::U8)
          throw Error("tensor '" + prefix + en + "weight_packed/scale' has the wrong shape or "
                      "dtype for [" + std::to_string(N) + ", " + std::to_string(K) + "] MXFP4");
        std::memcpy(cp.data() + slot * N * K / 2, ckpt.data(tp), N * K / 2);
        std::memcpy(cs.data() + slot * N * K / 32, ckpt.data(ts), N * K / 32);
        // E2M1 codes are all finite; an E8M0 scale byte 0xFF is NaN.
        if (!opts.allowNonFinite) {
          const uint8_t *sc = cs.data() + slot * N * K / 32;
          uint8_t any = 0;
          for (int64_t i = 0; i < N * K / 32; ++i)
            any |= sc[i] == 0xFF;
          if (any)
            for (int64_t i = 0; i < N * K / 32; ++i)
              if (sc[i] == 0xFF)
                throw Error("tensor '" + prefix + en + "weight_scale' holds a NaN scale (0xFF) at "
                            "element " + std::to_string(i) +
                            " (k3-run --allow-nonfinite loads it anyway)");
        }
      }
      if (v->kTile) {
        mxfp4::KernelLayout l{v->nTile, v->kTile};
        std::vector<uint8_t> kp(cp.size()), ks(cs.size());
        mxfp4::repackToKernel(l, S, N, K, cp.data(), cs.data(), kp.data(), ks.data());
        p->write(kp.data(), kp.size());
        s->write(ks.data(), ks.size());
      } else {
        p->write(cp.data(), cp.size());
        s->write(cs.data(), cs.size());
      }
      v->buf = weights[v->name] = p;
      v->scales = weightScales[v->name] = s;
      plan.weightBytes += p->bytes + s->bytes;
      continue;
    }
    bool stacked = v->name.find(".experts.") != std::string::npos;
    std::vector<int64_t> cap = v->shape;
    int64_t n = 1;
    for (int64_t d : v->shape)
      n *= d;
    int64_t perExpert = stacked ? n / v->shape[0] : n;
    ExpertSlots es;
    if (stacked) { // under EP: only the home experts, in slots
      es = expertSlots(v->shape[0]);
      cap[0] = es.slots;
    }
    Buffer *b = newBuffer(v->dtype, cap, "weight " + v->name);
    std::vector<uint8_t> staging(b->bytes, 0);
    std::vector<std::pair<const TensorInfo *, int64_t>> parts; // tensor, element offset
    if (stacked) { // stacked dense experts (Kimi Linear)
      size_t dot = v->name.rfind('.');
      std::string base = v->name.substr(0, dot), which = v->name.substr(dot + 1);
      for (int64_t slot = 0; slot < es.home; ++slot)
        parts.push_back(
            {&need(base + "." + std::to_string(es.first + slot) + "." + which + ".weight"),
             slot * perExpert});
    } else {
      parts.push_back({&need(v->name), 0});
    }
    bool aLog = v->name.size() > 5 && v->name.compare(v->name.size() - 5, 5, "A_log") == 0;
    for (auto [t, off] : parts) {
      int64_t count = perExpert;
      if (t->numel() != count && !(aLog && t->numel() <= count))
        throw Error("tensor '" + prefix + t->name + "' has " + std::to_string(t->numel()) +
                    " elements; the artifact expects " + std::to_string(count));
      const uint8_t *src = ckpt.data(*t);
      int64_t es = dtypeSize(t->dtype);
      if ((v->dtype == "bf16" && t->dtype == DType::BF16) ||
          (v->dtype == "f32" && t->dtype == DType::F32)) {
        std::memcpy(staging.data() + off * es, src, std::min(count, t->numel()) * es);
        continue; // same dtype: the bytes as they are
      }
      for (int64_t i = 0; i < std::min(count, t->numel()); ++i) {
        float f = toF32(src + i * es, t->dtype);
        uint8_t *dst = staging.data();
        if (v->dtype == "bf16") {
          uint16_t h = floatToBf16(f);
          std::memcpy(dst + 2 * (off + i), &h, 2);
        } else if (v->dtype == "f32") {
          std::memcpy(dst + 4 * (off + i), &f, 4);
        } else {
          throw Error("weight '" + v->name + "' has unsupported dtype " + v->dtype);
        }
      }
    }
    if (!opts.allowNonFinite) {
      // NaN/Inf: all exponent bits set. One branch-free pass (vectorized),
      // then the first bad element's tensor and index.
      auto scan = [&](auto bits, uint64_t mask) {
        using W = decltype(bits);
        const W *w = reinterpret_cast<const W *>(staging.data());
        const int64_t n = static_cast<int64_t>(staging.size() / sizeof(W));
        W any = 0;
        for (int64_t i = 0; i < n; ++i)
          any |= static_cast<W>((w[i] & mask) == mask);
        if (!any)
          return;
        for (int64_t i = 0; i < n; ++i)
          if ((w[i] & mask) == mask)
            for (auto [t, off] : parts)
              if (i >= off && i < off + perExpert)
                throw Error("tensor '" + prefix + t->name + "' holds a non-finite value (NaN or "
                            "Inf) at element " + std::to_string(i - off) +
                            " (k3-run --allow-nonfinite loads it anyway)");
      };
      if (v->dtype == "bf16")
        scan(uint16_t(0), 0x7F80);
      else if (v->dtype == "f32")
        scan(uint32_t(0), 0x7F800000);
    }
    b->write(staging.data(), staging.size());
    v->buf = weights[v->name] = b;
    plan.weightBytes += b->bytes;
  }
}


} // namespace k3c::rt::detail
