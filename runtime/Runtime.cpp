//===- Runtime.cpp - Model::load and the sampler (HostModel.h: the parts) -===//


#include "runtime/HostModel.h"

namespace k3c::rt {

using detail::HostModel;

std::unique_ptr<Model> Model::load(const std::string &artifactDir, const LoadOptions &o) {
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
    throw Error("--device must be auto, cpu or cuda, got '" + o.device + "'");
  return std::make_unique<HostModel>(artifactDir, o);
}

int64_t Sampler::sample(const float *logits, int64_t vocab) {
  if (temperature <= 0)
    return std::max_element(logits, logits + vocab) - logits;
  std::vector<std::pair<double, int64_t>> p(vocab);
  double mx = *std::max_element(logits, logits + vocab), z = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i] = {std::exp((logits[i] - mx) / temperature), i};
    z += p[i].first;
  }
  std::sort(p.begin(), p.end(), [](auto &a, auto &b) { return a.first > b.first; });
  double keep = 0, cut = topP * z;
  size_t n = 0;
  while (n < p.size() && (n == 0 || keep < cut))
    keep += p[n++].first;
  double r = rng.uniform() * keep;
  for (size_t i = 0; i < n; ++i) {
    r -= p[i].first;
    if (r <= 0)
      return p[i].second;
  }
  return p[n - 1].second;
}

} // namespace k3c::rt
