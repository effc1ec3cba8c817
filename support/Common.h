//===- Common.h - project-wide helpers (support/) ----------------*- C++ -*-===//
//
// Error type, bf16 conversion and a portable seeded RNG. Nothing here depends
// on LLVM/MLIR: every library (the runtime included) may use it.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_SUPPORT_COMMON_H
#define K3C_SUPPORT_COMMON_H

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cstring>
#include <stdexcept>
#include <string>

namespace k3c {

/// Rows of the routed experts' grouping scratch (i32 [rows, E + 1]): row 0
/// the group (expert) row offsets, then the token-tile offsets and tail
/// starts the expert GEMMs read, and last the chained launch's counts and
/// work queue (lowering/families/Moe.cpp). The runtime's profile finds the
/// group offsets by this shape.
inline constexpr int64_t kMoeGroupScratchRows = 11;

/// The one error type of the models library: the message names the file,
/// field, tensor or value that is wrong. Tools print it and exit non-zero.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

/// A 0/1 switch from the environment: unset or empty gives `dflt`, "0" off,
/// "1" on; any other value is an Error naming the variable (a typo such as
/// "off" or "yes" must not silently pick one side).
inline bool envSwitch(const char *var, bool dflt) {
  const char *v = std::getenv(var);
  if (!v || !*v)
    return dflt;
  const std::string s(v);
  if (s != "0" && s != "1")
    throw Error(std::string(var) + " must be 0 or 1, got '" + s + "'");
  return s == "1";
}

/// bf16 <-> fp32, round to nearest even; NaN stays NaN (quiet).
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float roundBf16(float f) { return bf16ToFloat(floatToBf16(f)); }

/// IEEE half -> fp32 (for F16 checkpoints).
inline float f16ToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

/// SplitMix64: the same stream on every platform (std::normal_distribution
/// is implementation-defined, so checkpoints would differ between libcs).
class Rng {
public:
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Standard normal (Box-Muller; both values of a pair are used).
  double normal() {
    if (haveSpare) {
      haveSpare = false;
      return spare;
    }
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300)
      u1 = 1e-300;
    double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    spare = r * std::sin(a);
    haveSpare = true;
    return r * std::cos(a);
  }

private:
  uint64_t state;
  double spare = 0;
  bool haveSpare = false;
};

/// A progress line on stderr: redrawn in place on a terminal, otherwise one
/// line per quarter of the work (so logs stay short).
class ProgressLine {
public:
  ProgressLine(const char *what, size_t total, bool enabled)
      : what(what), total(total), enabled(enabled && total > 0),
        tty(isatty(fileno(stderr)) != 0) {}
  void update(size_t done) {
    if (!enabled)
      return;
    if (tty) {
      if (done == total || done % 64 == 0)
        std::fprintf(stderr, "\r%s: %zu/%zu", what, done, total);
      if (done == total)
        std::fprintf(stderr, "\n");
      return;
    }
    size_t quarter = done * 4 / total;
    if (quarter > lastQuarter || done == total) {
      lastQuarter = quarter;
      std::fprintf(stderr, "%s: %zu/%zu (%zu%%)\n", what, done, total, done * 100 / total);
    }
  }

private:
  const char *what;
  size_t total;
  bool enabled, tty;
  size_t lastQuarter = 0;
};

/// Runs body(i) for every i in [0, n) on up to min(cores, 32) threads (one
/// thread when n < minParallel), items handed out in order; the first
/// exception a body throws is rethrown once every thread has stopped.
inline void parallelFor(size_t n, const std::function<void(size_t)> &body,
                        size_t minParallel = 2) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr failure;
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> g(mu);
        if (!failure)
          failure = std::current_exception();
        next = n; // the others stop after their current item
      }
    }
  };
  unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 32));
  if (n < minParallel)
    threads = 1;
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (auto &t : pool)
    t.join();
  if (failure)
    std::rethrow_exception(failure);
}

} // namespace k3c

#endif // K3C_SUPPORT_COMMON_H
