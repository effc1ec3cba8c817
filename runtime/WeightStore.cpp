//===- WeightStore.cpp - the weight-binding table, executed ----------------===//
//
// The runtime knows no checkpoint naming rule: manifest.json's `weights`
// table (support/Manifest.h, written by k3-compile from models/Weights.h)
// names every weight's tensors, their accepted shapes and dtypes, and the
// transform that makes the kernel's buffer from them. Each tensor's shape
// and dtype are checked against the table before a byte is copied.
//
//===----------------------------------------------------------------------===//

#include "runtime/HostModel.h"

namespace k3c::rt::detail {

namespace {

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// The artifact's name of a checkpoint dtype ("bf16", "u8", ...).
std::string lower(DType t) {
  std::string s = dtypeName(t);
  for (char &c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The source's tensor name for one expert ("{expert}" replaced).
std::string expertTensor(const std::string &pattern, int64_t expert) {
  std::string s = pattern;
  size_t at = s.find("{expert}");
  if (at != std::string::npos)
    s.replace(at, 8, std::to_string(expert));
  return s;
}

} // namespace

void HostModel::loadWeights() {
  CheckpointFiles ckpt = CheckpointFiles::open(ckptPath);
  const std::vector<artifact::WeightBinding> &table = manifest.weights;
  ProgressLine bar("loading weights (tensors)", table.size(), opts.progress);
  size_t done = 0;
  // A checkpoint tensor the binding reads, its dtype and shape checked.
  auto need = [&](const artifact::WeightBinding &b, const artifact::WeightSource &src,
                  const std::string &name) -> const TensorInfo & {
    const TensorInfo *t = ckpt.find(name);
    if (!t)
      throw Error("checkpoint '" + ckptPath + "' has no tensor '" + name +
                  "' that the artifact needs (weight " + b.name + ")");
    if (std::find(src.shapes.begin(), src.shapes.end(), t->shape) == src.shapes.end()) {
      std::string want;
      for (size_t i = 0; i < src.shapes.size(); ++i)
        want += (i ? " or " : "") + shapeStr(src.shapes[i]);
      throw Error("checkpoint '" + ckptPath + "': tensor '" + name + "' has shape " +
                  shapeStr(t->shape) + "; the artifact expects " + want + " (weight " + b.name +
                  ")");
    }
    if (std::find(src.dtypes.begin(), src.dtypes.end(), lower(t->dtype)) == src.dtypes.end()) {
      std::string want;
      for (size_t i = 0; i < src.dtypes.size(); ++i)
        want += (i ? ", " : "") + src.dtypes[i];
      throw Error("checkpoint '" + ckptPath + "': tensor '" + name + "' is " + lower(t->dtype) +
                  "; the artifact expects " + want + " (weight " + b.name + ")");
    }
    return *t;
  };
  for (const artifact::WeightBinding &b : table) {
    bar.update(++done);
    // Under EP a rank loads its home experts into slots [0, home) of a
    // sharded binding; the replica slots after them are filled per step.
    ExpertSlots es;
    if (b.shard == "experts")
      es = expertSlots(b.shape[0]);
    else
      es.home = es.slots = b.shape[0];
    if (b.transform == "mxfp4_stack") {
      const int64_t N = b.shape[1], K = b.shape[2], S = es.slots;
      const int64_t pb = N * K / 2, sb = N * K / 32;
      Buffer *p = newBuffer("i8", {S * pb}, "weight " + b.name);
      Buffer *s = newBuffer("i8", {S * sb}, "weight " + b.name);
      std::vector<uint8_t> cp(S * pb), cs(S * sb);
      for (int64_t slot = 0; slot < es.home; ++slot) {
        const std::string pn = expertTensor(b.sources[0].tensor, es.first + slot),
                          sn = expertTensor(b.sources[1].tensor, es.first + slot);
        const TensorInfo &tp = need(b, b.sources[0], pn), &ts = need(b, b.sources[1], sn);
        std::memcpy(cp.data() + slot * pb, ckpt.data(tp), pb);
        std::memcpy(cs.data() + slot * sb, ckpt.data(ts), sb);
        // E2M1 codes are all finite; an E8M0 scale byte 0xFF is NaN.
        if (!opts.allowNonFinite) {
          const uint8_t *sc = cs.data() + slot * sb;
          uint8_t any = 0;
          for (int64_t i = 0; i < sb; ++i)
            any |= sc[i] == 0xFF;
          if (any)
            for (int64_t i = 0; i < sb; ++i)
              if (sc[i] == 0xFF)
                throw Error("tensor '" + sn + "' holds a NaN scale (0xFF) at element " +
                            std::to_string(i) + " (k3-run --allow-nonfinite loads it anyway)");
        }
      }
      if (b.layout) { // the one layout definition (models/MXFP4Layout.h)
        mxfp4::KernelLayout l{b.layout->nTile, b.layout->kTile};
        std::vector<uint8_t> kp(cp.size()), ks(cs.size());
        mxfp4::repackToKernel(l, S, N, K, cp.data(), cs.data(), kp.data(), ks.data());
        p->write(kp.data(), kp.size());
        s->write(ks.data(), ks.size());
      } else {
        p->write(cp.data(), cp.size());
        s->write(cs.data(), cs.size());
      }
      weights[b.name] = p;
      weightScales[b.name] = s;
      plan.weightBytes += p->bytes + s->bytes;
      continue;
    }
    // convert, flatten, stack: float tensors into a bf16/f32 buffer.
    const bool stacked = b.transform == "stack";
    std::vector<int64_t> cap = b.shape;
    int64_t n = 1;
    for (int64_t d : b.shape)
      n *= d;
    const int64_t per = stacked ? n / b.shape[0] : n; // elements one tensor fills
    if (stacked)
      cap[0] = es.slots;
    Buffer *buf = newBuffer(b.dtype, cap, "weight " + b.name);
    std::vector<uint8_t> staging(buf->bytes, 0);
    std::vector<std::pair<const TensorInfo *, int64_t>> parts; // tensor, element offset
    if (stacked)
      for (int64_t slot = 0; slot < es.home; ++slot)
        parts.push_back(
            {&need(b, b.sources[0], expertTensor(b.sources[0].tensor, es.first + slot)),
             slot * per});
    else
      parts.push_back({&need(b, b.sources[0], b.sources[0].tensor), 0});
    const int64_t vs = dtypeBytes(b.dtype);
    for (auto [t, off] : parts) {
      // convert and stack: the shape check made the counts equal; flatten
      // fills the buffer from the start with what the tensor has.
      const int64_t count = std::min(per, t->numel());
      const uint8_t *src = ckpt.data(*t);
      const int64_t ts = dtypeSize(t->dtype);
      if (lower(t->dtype) == b.dtype) {
        std::memcpy(staging.data() + off * vs, src, count * vs);
        continue; // same dtype: the bytes as they are
      }
      uint8_t *dst = staging.data() + off * vs;
      for (int64_t i = 0; i < count; ++i) {
        float f = toF32(src + i * ts, t->dtype);
        if (b.dtype == "bf16") { // the schema allows bf16 and f32
          uint16_t h = floatToBf16(f);
          std::memcpy(dst + 2 * i, &h, 2);
        } else {
          std::memcpy(dst + 4 * i, &f, 4);
        }
      }
    }
    if (!opts.allowNonFinite) {
      // NaN/Inf: all exponent bits set. One branch-free pass (vectorized),
      // then the first bad element's tensor and index.
      auto scan = [&](auto bits, uint64_t mask) {
        using W = decltype(bits);
        const W *w = reinterpret_cast<const W *>(staging.data());
        const int64_t count = static_cast<int64_t>(staging.size() / sizeof(W));
        W any = 0;
        for (int64_t i = 0; i < count; ++i)
          any |= static_cast<W>((w[i] & mask) == mask);
        if (!any)
          return;
        for (int64_t i = 0; i < count; ++i)
          if ((w[i] & mask) == mask)
            for (auto [t, off] : parts)
              if (i >= off && i < off + per)
                throw Error("tensor '" + t->name + "' holds a non-finite value (NaN or "
                            "Inf) at element " + std::to_string(i - off) +
                            " (k3-run --allow-nonfinite loads it anyway)");
      };
      if (b.dtype == "bf16")
        scan(uint16_t(0), 0x7F80);
      else if (b.dtype == "f32")
        scan(uint32_t(0), 0x7F800000);
    }
    buf->write(staging.data(), staging.size());
    weights[b.name] = buf;
    plan.weightBytes += buf->bytes;
  }
}

} // namespace k3c::rt::detail
