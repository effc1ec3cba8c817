//===- HostModel.h - the runtime's model: types shared by its parts -------===//
//
// Internal to runtime/ (not installed): the buffers, kernel and schedule
// specs read from manifest.json and the HostModel class, whose member
// functions live by responsibility in
//   Runtime.cpp      Model::load, the sampler
//   ArtifactLoad.cpp HostModel::load: manifest, libraries, kernels, memory plan
//   WeightStore.cpp  HostModel::loadWeights: the weight-binding table (checkpoint
//                    tensors, conversion, expert stacking, MXFP4 repack)
//   Executor.cpp     HostModel::run / launch*: schedules, CUDA graphs, dumps
//   EpExchange.cpp   expert parallelism: the routed pairs' all-to-all
//
//===----------------------------------------------------------------------===//

#ifndef K3C_RUNTIME_HOSTMODEL_H
#define K3C_RUNTIME_HOSTMODEL_H

#include "runtime/Runtime.h"
#include "runtime/ExpertParallel.h"
#include "runtime/Cuda.h"

#include "models/MXFP4Layout.h"
#include "models/Safetensors.h"
#include "support/Manifest.h"
#include "support/Sha256.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <exception>
#include <thread>


namespace k3c::rt::detail {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline int64_t dtypeBytes(const std::string &d) {
  if (int64_t n = artifact::dtypeSizeOrZero(d))
    return n;
  throw Error("artifact: unknown dtype '" + d + "'");
}

/// A buffer on the host or the device: capacity-sized storage plus the dims
/// of its current value. `data` is what kernels get (a device address on
/// the GPU).
struct Buffer {
  std::string dtype;
  std::vector<int64_t> capacity; ///< dims the storage holds
  std::vector<int64_t> dims;     ///< dims of the current contents
  void *data = nullptr;
  int64_t bytes = 0;
  bool device = false;
  /// Growable (device only; the paged MLA cache's pools): address space for
  /// the whole buffer, memory mapped as clearAt reaches it (the first
  /// `initial` bytes at once).
  std::unique_ptr<cuda::GrowableMemory> grow;
  void allocate(bool onDevice, const std::string &what, int64_t initial = -1) {
    device = onDevice;
    bytes = dtypeBytes(dtype);
    for (int64_t d : capacity)
      bytes *= d;
    if (device && initial >= 0) {
      grow = std::make_unique<cuda::GrowableMemory>();
      if (grow->reserve(static_cast<size_t>(bytes))) {
        grow->ensure(static_cast<size_t>(std::max<int64_t>(initial, 1)), what);
        data = reinterpret_cast<void *>(grow->base);
        return;
      }
      grow.reset(); // no virtual memory management: allocated whole below
    }
    if (device) {
      cuda::CUdeviceptr p = cuda::alloc(bytes, what);
      cuda::zero(p, bytes);
      data = reinterpret_cast<void *>(p);
      return;
    }
    // calloc: zeroed (fresh state) without touching pages that stay unused.
    data = std::calloc(std::max<int64_t>(bytes, 1), 1);
    if (!data)
      throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes for " + what);
  }
  void write(const void *src, size_t n) {
    if (n == 0) // a step without sequences uploads nothing
      return;
    if (n > static_cast<size_t>(bytes))
      throw Error("an upload of " + std::to_string(n) + " bytes into a buffer of " +
                  std::to_string(bytes) + " (the artifact's buffer plan is inconsistent)");
    if (device)
      cuda::upload(reinterpret_cast<cuda::CUdeviceptr>(data), src, n);
    else
      std::memcpy(data, src, n);
  }
  /// Copies [src, src + n) to [dst, dst + n) within the buffer (on the
  /// runtime's stream on the GPU, ordered with the launches).
  void copyWithin(size_t dst, size_t src, size_t n) {
    if (n == 0)
      return;
    if (grow)
      grow->ensure(std::max(dst, src) + n, "the paged MLA cache's pool");
    if (device)
      cuda::copyAsync(reinterpret_cast<cuda::CUdeviceptr>(data) + dst,
                      reinterpret_cast<cuda::CUdeviceptr>(data) + src, n);
    else
      std::memmove(static_cast<uint8_t *>(data) + dst, static_cast<uint8_t *>(data) + src, n);
  }
  void clearAt(size_t off, size_t n) {
    if (grow)
      grow->ensure(off + n, "the paged MLA cache's pool");
    if (device)
      cuda::zero(reinterpret_cast<cuda::CUdeviceptr>(data) + off, n);
    else
      std::memset(static_cast<uint8_t *>(data) + off, 0, n);
  }
  /// Gives back the device memory of a growable buffer past its first `n`
  /// bytes (whole growths; after the runtime's stream has drained). Nothing
  /// elsewhere (the host's calloc, a buffer allocated whole).
  void shrink(size_t n, const std::string &what) {
    if (grow)
      grow->shrink(n, what);
  }
  void read(void *dst, size_t n) const {
    if (grow && n > grow->mapped) { // unmapped memory reads as zeros
      std::memset(static_cast<uint8_t *>(dst) + grow->mapped, 0, n - grow->mapped);
      n = grow->mapped;
    }
    if (n == 0)
      return;
    if (device)
      cuda::download(dst, reinterpret_cast<cuda::CUdeviceptr>(data), n);
    else
      std::memcpy(dst, data, n);
  }
  void clear() {
    if (device)
      cuda::zero(reinterpret_cast<cuda::CUdeviceptr>(data),
                 grow ? grow->mapped : static_cast<size_t>(bytes));
    else
      std::memset(data, 0, bytes);
  }
  bool owns = true; ///< false for a view of another buffer's storage
  ~Buffer() {
    if (!owns || grow)
      return; // a growable buffer's memory goes with `grow`
    if (device)
      cuda::release(reinterpret_cast<cuda::CUdeviceptr>(data));
    else
      std::free(data);
  }
};

/// A kernel argument as manifest.json describes it (one schema: support/Manifest.h).
using ArgSpec = artifact::KernelArg;

/// A kernel of the artifact: its manifest entry plus the loaded entry point
/// and its capacity-sized scratch buffers.
struct KernelSpec : artifact::Kernel {
  void (*fn)(void **) = nullptr;
  std::vector<std::unique_ptr<Buffer>> scratch; // per scratch arg position
};

/// A value of an entry: its manifest description plus its storage.
struct Value : artifact::Value {
  bool mxfp4() const { return dtype == "mxfp4"; }
  /// A paged MLA cache's pool (shared by all sequences, not sized by them).
  bool paged() const { return kind == "state" && !dims.empty() && dims[0] == "pages"; }
  // Storage: activations own one; weights/states/inputs are shared by name.
  Buffer *buf = nullptr, *scales = nullptr;
};

struct Launch {
  KernelSpec *kernel;
  std::vector<int64_t> inputs, outputs;
};

struct Entry {
  std::vector<Value> values;
  std::vector<Launch> launches;
  std::vector<int64_t> returns;
};

/// Row-major memref descriptor words: allocated, aligned, offset, sizes, strides.
struct Descriptor {
  std::vector<int64_t> words;
  void set(void *data, const std::vector<int64_t> &dims) {
    size_t r = dims.size();
    words.assign(3 + 2 * r, 0);
    words[0] = reinterpret_cast<int64_t>(data);
    words[1] = reinterpret_cast<int64_t>(data);
    int64_t stride = 1;
    for (size_t i = r; i-- > 0;) {
      words[3 + i] = dims[i];
      words[3 + r + i] = stride;
      stride *= dims[i];
    }
  }
};

inline float toF32(const uint8_t *p, DType t) {
  switch (t) {
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bf16ToFloat(h);
  }
  case DType::F16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16ToFloat(h);
  }
  case DType::F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  default:
    throw Error("not a float dtype");
  }
}

/// `b`'s current contents as fp32, read as elements of `dtype` (the value's
/// or kernel argument's: a pooled activation buffer's own may be stale);
/// bf16/f16/f32/i32 widened; only the leading dimension's first `rows` when
/// rows >= 0 (a paged pool: the pages in reach).
inline std::vector<float> readAsF32(const Buffer &b, const std::string &dtype, int64_t rows = -1) {
  int64_t n = 1;
  for (size_t i = 0; i < b.dims.size(); ++i)
    n *= i == 0 && rows >= 0 ? std::min(rows, b.dims[0]) : b.dims[i];
  const int64_t es = dtypeBytes(dtype);
  std::vector<uint8_t> raw(n * es);
  b.read(raw.data(), raw.size());
  std::vector<float> f(n);
  // (the dtype decided once: a pool's dump converts billions of elements)
  const uint8_t *p = raw.data();
  if (dtype == "i32") {
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, p + i * 4, 4);
      f[i] = static_cast<float>(v);
    }
  } else if (dtype == "i64") {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, p + i * 8, 8);
      f[i] = static_cast<float>(v);
    }
  } else if (es == 1) { // i8: raw bytes (MXFP4 payload and scales) as 0..255
    for (int64_t i = 0; i < n; ++i)
      f[i] = static_cast<float>(p[i]);
  } else {
    const DType t = dtype == "bf16" ? DType::BF16 : dtype == "f16" ? DType::F16 : DType::F32;
    for (int64_t i = 0; i < n; ++i)
      f[i] = toF32(p + i * es, t);
  }
  return f;
}


/// The routed experts' exchange (EP) running on a worker thread while the
/// launches that do not read its result (the shared experts) run on the
/// caller's (on the GPU: enqueued on the same stream from both threads).
struct PendingExchange {
  std::thread thread;
  std::exception_ptr error;
  std::vector<int64_t> outputs;
  bool feeds(const Launch &l) const {
    for (int64_t in : l.inputs)
      if (std::find(outputs.begin(), outputs.end(), in) != outputs.end())
        return true;
    return false;
  }
  void join() {
    if (!thread.joinable())
      return;
    thread.join();
    outputs.clear();
    if (error)
      std::rethrow_exception(std::exchange(error, nullptr));
  }
};

class HostModel : public Model {
public:
  HostModel(const std::string &dir, const LoadOptions &o) : dir(dir), opts(o) { load(); }
  ~HostModel() override {
    if (logitsPinned)
      cuda::unpinHost(logitsHost.data());
    dropGraphs();
    if (lib)
      dlclose(lib);
  }

  int64_t vocabSize() const override { return vocab; }
  int64_t eosTokenId() const override { return eos; }
  std::string checkpointPath() const override { return ckptPath; }
  std::string activationDtype() const override { return actDtype; }
  std::string deviceName() const override {
    return gpu ? "cuda: " + cuda::deviceName() + " (sm_90a kernels" +
                     (cuda::gridDependencyAllowed() ? ", programmatic dependent launch)" : ")")
               : "cpu (host kernel library)";
  }
  const MemoryPlan &memoryPlan() const override { return plan; }
  const std::vector<int64_t> &lengths() const override { return lens; }
  void enableProfiling(bool on) override { profiling = on; }
  void enableTracing(bool on) override { tracing = on; }
  const std::map<std::string, std::vector<float>> &trace() const override { return traces; }
  void recordRouting(bool on) override { routingOn = on; }
  std::vector<RoutingRecord> takeRouting() override { return std::move(routing); }
  const EpStats &epStats() const override { return ep; }
  double lastGraphSeconds() const override { return graphTimed ? graphTimer.seconds() : 0; }
  void skipFamilies(const std::set<std::string> &families) override {
    for (const std::string &f : families)
      if (f == "moe_router")
        throw Error("the kernel family moe_router cannot be left out: its expert ids index "
                    "the expert kernels' loads");
    std::set<std::string> all; // the model's families
    for (auto &[name, e] : entries)
      for (const Launch &l : e.launches)
        all.insert(l.kernel->family);
    for (const std::string &f : families) {
      if (!all.count(f)) {
        std::string list;
        for (const std::string &a : all)
          list += (list.empty() ? "" : ", ") + a;
        throw Error("no launch of this model has the kernel family '" + f +
                    "' (its families: " + list + ")");
      }
    }
    if (!families.empty() && opts.ep)
      throw Error("kernel families cannot be left out under expert parallelism: the other "
                  "ranks would wait for this rank's exchanges");
    if (families == skipped)
      return;
    skipped = families;
    // Every captured graph holds the old launches (none still running).
    if (gpu)
      cuda::synchronize("the step before kernel families are left out or restored");
    dropGraphs();
    lastDecodeN = -1;
  }
  std::vector<KernelProfile> profile() const override {
    std::vector<KernelProfile> out;
    for (auto &[name, p] : prof)
      out.push_back(p);
    std::sort(out.begin(), out.end(),
              [](const KernelProfile &a, const KernelProfile &b) { return a.seconds > b.seconds; });
    return out;
  }

  void reset(int64_t n) override {
    if (n < 1 || n > plan.maxSeqs)
      throw Error("batch of " + std::to_string(n) + " sequences exceeds the artifact's capacity of " +
                  std::to_string(plan.maxSeqs) + " (compile with --max-seqs)");
    batch = n;
    lens.assign(n, 0);
    // The batch's slots, 0..n-1, zeroed (one range a state); the others are
    // zeroed when a sequence takes them (reset, restartSequence) and never
    // read before (a kept prefix's slot is only a source of copies: of its
    // first L cache rows and whole KDA / conv states, all written first).
    // Clearing all max_seqs slots cost a contiguous MLA cache's whole
    // capacity (4.9 GB a layer for the bench slice) at every new batch.
    for (auto &[name, b] : states)
      if (std::find(pools.begin(), pools.end(), b) == pools.end())
        b->clearAt(0, static_cast<size_t>(b->bytes / b->capacity[0]) * static_cast<size_t>(n));
    // The paged MLA cache: every page back on the free list (page 0, the
    // zero page, is never handed out; a page is zeroed when handed out, so a
    // reset touches no pool memory).
    // (ascending: a min-heap, the lowest page handed out first)
    freePages.clear();
    for (int64_t p = 1; p < plan.cachePages; ++p)
      freePages.push_back(static_cast<int32_t>(p));
    pageRefs.assign(static_cast<size_t>(plan.cachePages), 0);
    seqPages.assign(n, {});
    plan.pagesInUse = plan.pagesPeak = 0;
    plan.pagesSpan = 1;
    shared = {};
    kept = {};
  }

  int64_t prefillRounds(const std::vector<std::vector<int64_t>> &prompts) const override {
    if (prompts.empty())
      return 0;
    int64_t total = 0, shortest = std::numeric_limits<int64_t>::max();
    for (const auto &p : prompts) {
      if (p.empty())
        throw Error("empty prompt");
      total += static_cast<int64_t>(p.size());
      shortest = std::min<int64_t>(shortest, static_cast<int64_t>(p.size()));
    }
    // Chunked prefill: prompts longer than the artifact's tokens per step run
    // in R rounds, each sequence's prompt cut into R nearly equal pieces (every
    // round gives every sequence at least one token); states and caches carry
    // over between rounds as they do between decode steps.
    int64_t rounds = 1;
    auto fits = [&](int64_t r) {
      int64_t n = 0;
      for (const auto &p : prompts)
        n += (static_cast<int64_t>(p.size()) + r - 1) / r;
      return n <= plan.maxTokens;
    };
    while (!fits(rounds) && rounds < shortest)
      ++rounds;
    if (!fits(rounds))
      throw Error(std::to_string(total) + " prompt tokens over " +
                  std::to_string(prompts.size()) +
                  " sequences cannot be split into steps of at most " +
                  std::to_string(plan.maxTokens) + " tokens with every sequence in every step " +
                  "(compile with --max-tokens, or prefill fewer sequences together)");
    return rounds;
  }

  void idle(bool prefillStep) override {
    // A step over no sequences: every launch sees zero tokens; under EP the
    // exchanges still run, so this rank computes the pairs others send it.
    int64_t saved = batch;
    std::vector<int64_t> savedLens = lens;
    batch = 0;
    lens.clear();
    struct Restore {
      HostModel &m;
      int64_t b;
      std::vector<int64_t> &l;
      ~Restore() {
        m.batch = b;
        m.lens = std::move(l);
      }
    } restore{*this, saved, savedLens};
    bool wasDecoding = decoding;
    decoding = !prefillStep;
    run(entries[prefillStep ? "prefill" : "decode"], {}, {});
    decoding = wasDecoding;
  }

  const std::vector<float> &prefill(const std::vector<std::vector<int64_t>> &prompts,
                                    int64_t totalRounds) override {
    if (static_cast<int64_t>(prompts.size()) != batch)
      throw Error("prefill got " + std::to_string(prompts.size()) + " prompts for a batch of " +
                  std::to_string(batch) + " (call reset first)");
    int64_t total = 0;
    for (const auto &p : prompts)
      total += static_cast<int64_t>(p.size());
    const int64_t rounds = prefillRounds(prompts);
    if (totalRounds && totalRounds < rounds)
      throw Error("prefill asked for " + std::to_string(totalRounds) + " steps; the prompts need " +
                  std::to_string(rounds));
    const std::vector<float> *logits = nullptr;
    std::vector<std::map<std::string, std::vector<float>>> roundTraces;
    std::vector<std::vector<int64_t>> roundLens;
    for (int64_t r = 0; r < rounds; ++r) {
      std::vector<int64_t> ids, seqLens;
      for (const auto &p : prompts) {
        const int64_t n = static_cast<int64_t>(p.size());
        const int64_t lo = n * r / rounds, hi = n * (r + 1) / rounds;
        ids.insert(ids.end(), p.begin() + lo, p.begin() + hi);
        seqLens.push_back(hi - lo);
      }
      logits = &run(entries["prefill"], ids, seqLens);
      if (tracing && rounds > 1) {
        roundTraces.push_back(traces);
        roundLens.push_back(seqLens);
      }
    }
    for (int64_t r = rounds; r < totalRounds; ++r)
      idle(/*prefillStep=*/true);
    if (tracing && rounds > 1) {
      // The per-layer residual streams of the rounds, back in prompt order
      // (sequence by sequence, all of its tokens).
      for (auto &[name, whole] : traces) {
        const int64_t D = static_cast<int64_t>(roundTraces[0][name].size()) /
                          std::accumulate(roundLens[0].begin(), roundLens[0].end(), int64_t(0));
        std::vector<float> merged;
        merged.reserve(total * D);
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t r = 0; r < rounds; ++r) {
            int64_t before = 0;
            for (int64_t q = 0; q < b; ++q)
              before += roundLens[r][q];
            const auto &v = roundTraces[r][name];
            merged.insert(merged.end(), v.begin() + before * D,
                          v.begin() + (before + roundLens[r][b]) * D);
          }
        whole = std::move(merged);
      }
    }
    mergeSharedPrefix(prompts);
    return *logits;
  }

  void prefillPrefix(const std::vector<int64_t> &prefix) override;
  void restartSequence(int64_t n) override;
  void retireSequence(int64_t n) override;
  void keepPrefix() override;
  void restartFromPrefix(int64_t n) override;

  const std::vector<float> &decode(const std::vector<int64_t> &tokens) override {
    if (static_cast<int64_t>(tokens.size()) != batch)
      throw Error("decode got " + std::to_string(tokens.size()) + " tokens for a batch of " +
                  std::to_string(batch));
    decoding = true;
    shared = {}; // a prefix step not followed by prefill: nothing to merge
    struct Reset {
      bool &flag;
      ~Reset() { flag = false; }
    } reset{decoding};
    return run(entries["decode"], tokens, std::vector<int64_t>(batch, 1), /*graph=*/true);
  }

  const std::vector<int64_t> &prefillGreedy(const std::vector<std::vector<int64_t>> &prompts,
                                            int64_t totalRounds) override {
    LogitsKept off{keepLogits};
    prefill(prompts, totalRounds);
    return greedyIds();
  }
  const std::vector<int64_t> &decodeGreedy(const std::vector<int64_t> &tokens) override {
    LogitsKept off{keepLogits};
    decode(tokens);
    return greedyIds();
  }

private:
  /// run() leaves the logits on the device while a greedy step runs.
  struct LogitsKept {
    bool &keep;
    bool was;
    explicit LogitsKept(bool &k) : keep(k), was(k) { keep = false; }
    ~LogitsKept() { keep = was; }
  };
  /// The last step's greedy ids (greedyHost) by the artifact's argmax
  /// kernel on its logits (Executor.cpp).
  const std::vector<int64_t> &greedyIds();
  void load();
  /// Executes the manifest's weight-binding table: every weight, built
  /// from its checkpoint tensors, shapes and dtypes checked.
  void loadWeights();
  const std::vector<float> &run(Entry &e, const std::vector<int64_t> &ids,
                                const std::vector<int64_t> &seqLens, bool graph = false);
  /// The last step's logits, kept across steps: a batch of 128 at vocabulary
  /// 163840 is 84 MB that a fresh vector would zero and fault in every step.
  std::vector<float> logitsHost;
  /// On the GPU: logitsHost holds room for max_seqs rows from the first step
  /// on and is page-locked (the 84 MB copy at batch 128 took 9.9 ms pageable
  /// beside a 4.4 ms step; pinned memory copies at PCIe speed).
  bool logitsPinned = false;
  bool logitsPinTried = false;
  void launchAll(Entry &e, int64_t T);
  void launchStep(Entry &e, Launch &l, int64_t T, std::vector<Buffer *> &bufOf,
                  PendingExchange &pending);
  /// Under EP: moves each shared-expert launch after the routed-expert launch
  /// that follows it (when nothing in between reads its result), so the
  /// shared experts compute while the routed pairs are exchanged.
  static void overlapSharedExperts(Entry &e);
  /// The buffer of each argument of launch `l` (MXFP4 scale bytes for scale
  /// components, the kernel's own scratch).
  std::vector<Buffer *> argBuffers(Entry &e, Launch &l, const std::vector<Buffer *> &bufOf) {
    KernelSpec &k = *l.kernel;
    std::vector<Buffer *> argBuf(k.args.size(), nullptr);
    for (size_t i = 0; i < k.args.size(); ++i) {
      const ArgSpec &a = k.args[i];
      if (a.kind == "input")
        argBuf[i] = a.component == 1 ? e.values[l.inputs[a.index]].scales
                                     : bufOf[l.inputs[a.index]];
      else if (a.kind == "output")
        argBuf[i] = bufOf[l.outputs[a.index]];
      else
        argBuf[i] = k.scratch[i].get();
    }
    return argBuf;
  }
  /// One kernel launch with a buffer per argument (inputs carry their dims).
  void launchOne(KernelSpec &k, const std::vector<Buffer *> &argBuf, int64_t T);
  /// One launch's kernel time into the profile (FLOPs, bytes as the kernel
  /// declares them).
  void account(const KernelSpec &k, int64_t T, double seconds, const std::vector<Buffer *> &argBuf);
  /// A decode step through the batch size's profiled graph (captured once).
  void runProfiledGraph(Entry &e, int64_t T, int64_t N);
  /// The routed experts of one MoE layer across the EP group.
  void runExpertsEP(Entry &e, Launch &l, std::vector<Buffer *> &bufOf);
  /// Under EP: a rank stores its home experts in slots [0, home) and up to
  /// min(⌈E/R⌉, E - home) replicas after them.
  ExpertSlots expertSlots(int64_t E) const {
    if (!opts.ep) {
      ExpertSlots s;
      s.home = s.slots = E;
      return s;
    }
    return rt::expertSlots(E, opts.ep->size(), opts.ep->rank());
  }
  bool keepLogits = true;      ///< run() copies the logits to logitsHost
  Entry *lastEntry = nullptr;  ///< the entry the last step ran
  Buffer *greedyBuf = nullptr; ///< the argmax kernel's ids [max_seqs] i32
  std::vector<int64_t> greedyHost;
  /// `growable` >= 0: a growable device buffer with that many bytes mapped
  /// at once (Buffer::grow; the host's calloc grows by itself).
  Buffer *newBuffer(const std::string &dtype, std::vector<int64_t> cap,
                    const std::string &what = "a buffer", int64_t growable = -1) {
    owned.push_back(std::make_unique<Buffer>());
    Buffer *b = owned.back().get();
    b->dtype = dtype;
    b->capacity = std::move(cap);
    b->allocate(gpu, what, growable);
    return b;
  }

  std::string dir;
  LoadOptions opts;
  artifact::Manifest manifest; ///< checked on read (support/Manifest.h)
  void *lib = nullptr;
  int64_t vocab = 0, eos = -1, maxPositions = 0;
  std::string ckptPath, actDtype;
  MemoryPlan plan;
  std::map<std::string, KernelSpec> kernels;
  std::map<std::string, Entry> entries;
  std::vector<std::unique_ptr<Buffer>> owned;
  std::map<std::string, Buffer *> weights, weightScales, states, inputs;
  int64_t batch = 0;
  std::vector<int64_t> lens;
  // The paged MLA cache (plan.cachePage > 0): the layers' pools, the free
  // page ids (a min-heap: the lowest handed out first) and each sequence's
  // pages in order.
  std::vector<Buffer *> pools;
  std::vector<int32_t> freePages;
  std::vector<int32_t> pageRefs; ///< sequences holding each page (shared prefixes: several)
  /// A page off the (non-empty) free list, referenced once.
  int32_t takePage();
  std::vector<std::vector<int32_t>> seqPages;
  std::vector<int32_t> tableUploaded; ///< the block table as last uploaded
  /// Hands each sequence the pages its positions up to lens[n] + seqLens[n]
  /// need (each zeroed in every pool); throws naming the pool when it is
  /// out of pages.
  void reservePages(const std::vector<int64_t> &seqLens);
  /// The block table [batch, ceil(maxContext / P)]: page ids, 0 (the zero
  /// page) past a sequence's pages.
  std::vector<int32_t> blockTable() const;
  /// prefillPrefix's step, for the prefill that follows it: the prefix's
  /// length, its per-layer trace and the routing records it added.
  struct SharedPrefix {
    int64_t length = 0;
    std::map<std::string, std::vector<float>> trace;
    size_t routingFrom = 0, routingCount = 0;
  } shared;
  /// keepPrefix's copy of a shared prefix: its length, the slot holding its
  /// states (max_seqs - 1) and the pages it holds (length 0: none kept).
  struct KeptPrefix {
    int64_t length = 0, slot = -1;
    std::vector<int32_t> pages;
  } kept;
  /// Copies sequence 0's states (the first `length` positions of its MLA
  /// cache) to every other sequence of the batch.
  void forkPrefix(int64_t length);
  /// The pages of a sequence continuing `from`'s first `length` positions:
  /// from's full pages shared (one more reference each), its last partial
  /// page copied to a new page; `who` names the holder in the pool-full
  /// error.
  std::vector<int32_t> prefixPages(const std::vector<int32_t> &from, int64_t length,
                                   const std::string &who);
  /// Copies sequence `from`'s slot of every non-paged state to `to`'s (of a
  /// contiguous MLA cache only the first `positions` rows).
  void copySlot(int64_t from, int64_t to, int64_t positions);
  /// Drops sequence n's hold on its pages (a page returns to the free list
  /// with its last holder), then trimPools.
  void releasePages(int64_t n);
  /// Lowers plan.pagesSpan to the highest held page + 1 and unmaps each
  /// growable pool past it where that gives back half its mapped memory or
  /// more (K3C_POOL_TRIM=0: never unmapped).
  void trimPools();
  /// K3C_POOL_TRIM (default on), read at load.
  bool poolTrim = true;
  /// Zeroes sequence n's slot of every non-paged state (contextOnly: of the
  /// contiguous MLA cache only).
  void clearSlot(int64_t n, bool contextOnly);
  /// After prefill(prompts) continued a shared prefix: the trace and the
  /// routing records as one prefill of prefix + prompt would have made them.
  void mergeSharedPrefix(const std::vector<std::vector<int64_t>> &prompts);
  bool profiling = false, tracing = false;
  bool routingOn = false;
  std::vector<RoutingRecord> routing;
  std::map<int64_t, void *> decodeGraphs; // batch size -> executable graph
  std::set<std::string> skipped;          // kernel families left out (skipFamilies)
  /// The last decode step's batch size (a graph is captured on the second
  /// step in a row at a size).
  int64_t lastDecodeN = -1;
  /// A decode graph with an event node before every kernel and after the
  /// last (profiling): the launches' kernels, token counts and buffers for
  /// the accounting after each replay.
  struct ProfiledGraph {
    void *exec = nullptr;
    std::vector<void *> events;
    struct Marked {
      KernelSpec *kernel;
      int64_t T;
      std::vector<Buffer *> args;
    };
    std::vector<Marked> launches;
  };
  std::map<int64_t, ProfiledGraph> profiledGraphs;
  /// Destroys every captured decode graph (plain and profiled) and their events.
  void dropGraphs() {
    for (auto &[n, g] : decodeGraphs)
      cuda::destroyGraph(g);
    decodeGraphs.clear();
    for (auto &[n, g] : profiledGraphs) {
      cuda::destroyGraph(g.exec);
      for (void *ev : g.events)
        cuda::destroyEvent(ev);
    }
    profiledGraphs.clear();
  }
  ProfiledGraph *marks = nullptr; ///< set while capturing a profiled graph
  bool graphsOk = true;
  /// Events around the last graph replay (its device time, read on demand).
  cuda::Timer graphTimer;
  bool graphTimed = false;
  bool gpu = false;
  std::map<std::string, std::vector<float>> traces;
  std::map<std::string, KernelProfile> prof;
  EpStats ep;
  bool decoding = false; ///< inside decode() (EP statistics split)
  // EP buffers: received pairs (latents, experts, outputs), rows to send,
  // rows received back, slot-0 outputs, row indices for the row kernel.
  Buffer *epZ = nullptr, *epIdx = nullptr, *epY = nullptr, *epSend = nullptr,
         *epRecv = nullptr, *epOut = nullptr, *epRows = nullptr;
  /// dst[i] = src[rows[i]] with the compiled k3_ep_rows kernel.
  void gatherRows(Buffer *src, const std::string &dtype, std::vector<int64_t> srcDims,
                  const std::vector<int32_t> &rows,
                  Buffer *dst);
};


} // namespace k3c::rt::detail

#endif // K3C_RUNTIME_HOSTMODEL_H
