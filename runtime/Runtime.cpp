//===- Runtime.cpp - artifact loading, memory plan, host execution --------===//

#include "runtime/Runtime.h"
#include "runtime/ExpertParallel.h"
#include "runtime/Cuda.h"
#include "runtime/Manifest.h"

#include "models/MXFP4Layout.h"
#include "models/Safetensors.h"
#include "models/Sha256.h"

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

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace k3c::rt {

namespace {

int64_t dtypeBytes(const std::string &d) {
  if (int64_t n = dtypeSizeOrZero(d))
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
  void allocate(bool onDevice, const std::string &what) {
    device = onDevice;
    bytes = dtypeBytes(dtype);
    for (int64_t d : capacity)
      bytes *= d;
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
    if (device)
      cuda::upload(reinterpret_cast<cuda::CUdeviceptr>(data), src, n);
    else
      std::memcpy(data, src, n);
  }
  void clearAt(size_t off, size_t n) {
    if (device)
      cuda::zero(reinterpret_cast<cuda::CUdeviceptr>(data) + off, n);
    else
      std::memset(static_cast<uint8_t *>(data) + off, 0, n);
  }
  void read(void *dst, size_t n) const {
    if (device)
      cuda::download(dst, reinterpret_cast<cuda::CUdeviceptr>(data), n);
    else
      std::memcpy(dst, data, n);
  }
  void clear() {
    if (device)
      cuda::zero(reinterpret_cast<cuda::CUdeviceptr>(data), bytes);
    else
      std::memset(data, 0, bytes);
  }
  bool owns = true; ///< false for a view of another buffer's storage
  ~Buffer() {
    if (!owns)
      return;
    if (device)
      cuda::release(reinterpret_cast<cuda::CUdeviceptr>(data));
    else
      std::free(data);
  }
};

struct ArgSpec {
  std::string kind; // input, output, scratch
  int64_t index = 0;
  int component = -1; // MXFP4: 0 payload, 1 scales
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<std::pair<int64_t, int64_t>> dynamicFrom;
};

struct KernelSpec {
  std::string name, family, symbol;
  std::vector<ArgSpec> args;
  std::vector<int64_t> resultAliases;
  int64_t flopsPerToken = 0, bytesPerToken = 0, weightBytes = 0;
  void (*fn)(void **) = nullptr;
  std::vector<std::unique_ptr<Buffer>> scratch; // per scratch arg position
};

struct Value {
  int64_t id;
  std::string kind, name, dtype, trace;
  std::vector<int64_t> shape;
  std::vector<std::string> dims;
  bool mxfp4 = false;
  int64_t nTile = 0, kTile = 0; // MXFP4 layout (0: checkpoint layout)
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

float toF32(const uint8_t *p, DType t) {
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
/// bf16/f16/f32/i32 widened.
std::vector<float> readAsF32(const Buffer &b, const std::string &dtype) {
  int64_t n = 1;
  for (int64_t d : b.dims)
    n *= d;
  const int64_t es = dtypeBytes(dtype);
  std::vector<uint8_t> raw(n * es);
  b.read(raw.data(), raw.size());
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *p = raw.data() + i * es;
    if (dtype == "i32") {
      int32_t v;
      std::memcpy(&v, p, 4);
      f[i] = static_cast<float>(v);
    } else {
      f[i] = toF32(p, dtype == "bf16" ? DType::BF16 : dtype == "f16" ? DType::F16 : DType::F32);
    }
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
    for (auto &[n, g] : decodeGraphs)
      cuda::destroyGraph(g);
    if (lib)
      dlclose(lib);
  }

  int64_t vocabSize() const override { return vocab; }
  int64_t eosTokenId() const override { return eos; }
  std::string checkpointPath() const override { return ckptPath; }
  std::string activationDtype() const override { return actDtype; }
  std::string deviceName() const override {
    return gpu ? "cuda: " + cuda::deviceName() + " (sm_90a kernels)" : "cpu (host kernel library)";
  }
  const MemoryPlan &memoryPlan() const override { return plan; }
  const std::vector<int64_t> &lengths() const override { return lens; }
  void enableProfiling(bool on) override { profiling = on; }
  void enableTracing(bool on) override { tracing = on; }
  const std::map<std::string, std::vector<float>> &trace() const override { return traces; }
  const EpStats &epStats() const override { return ep; }
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
    for (auto &[name, b] : states)
      b->clear();
  }

  const std::vector<float> &prefill(const std::vector<std::vector<int64_t>> &prompts) override {
    if (static_cast<int64_t>(prompts.size()) != batch)
      throw Error("prefill got " + std::to_string(prompts.size()) + " prompts for a batch of " +
                  std::to_string(batch) + " (call reset first)");
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
      throw Error(std::to_string(total) + " prompt tokens over " + std::to_string(batch) +
                  " sequences cannot be split into steps of at most " +
                  std::to_string(plan.maxTokens) + " tokens with every sequence in every step " +
                  "(compile with --max-tokens, or prefill fewer sequences together)");
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
    return *logits;
  }

  const std::vector<float> &decode(const std::vector<int64_t> &tokens) override {
    if (static_cast<int64_t>(tokens.size()) != batch)
      throw Error("decode got " + std::to_string(tokens.size()) + " tokens for a batch of " +
                  std::to_string(batch));
    decoding = true;
    struct Reset {
      bool &flag;
      ~Reset() { flag = false; }
    } reset{decoding};
    return run(entries["decode"], tokens, std::vector<int64_t>(batch, 1), /*graph=*/true);
  }

private:
  void load();
  void loadWeights(Entry &e);
  const std::vector<float> &run(Entry &e, const std::vector<int64_t> &ids,
                                const std::vector<int64_t> &seqLens, bool graph = false);
  /// The last step's logits, kept across steps: a batch of 128 at vocabulary
  /// 163840 is 84 MB that a fresh vector would zero and fault in every step.
  std::vector<float> logitsHost;
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
  /// The routed experts of one MoE layer across the EP group.
  void runExpertsEP(Entry &e, Launch &l, std::vector<Buffer *> &bufOf);
  /// Under EP: a rank stores its home experts in slots [0, home) and up to
  /// min(⌈E/R⌉, E - home) replicas after them.
  struct ExpertSlots {
    int64_t first = 0, home = 0, slots = 0;
  };
  ExpertSlots expertSlots(int64_t E) const {
    ExpertSlots s;
    if (!opts.ep) {
      s.home = s.slots = E;
      return s;
    }
    int64_t R = opts.ep->size(), me = opts.ep->rank(), per = (E + R - 1) / R;
    s.first = std::min(E, me * per);
    s.home = std::min(E, s.first + per) - s.first;
    s.slots = std::max<int64_t>(1, s.home + std::min(per, E - s.home));
    return s;
  }
  Buffer *newBuffer(const std::string &dtype, std::vector<int64_t> cap,
                    const std::string &what = "a buffer") {
    owned.push_back(std::make_unique<Buffer>());
    Buffer *b = owned.back().get();
    b->dtype = dtype;
    b->capacity = std::move(cap);
    b->allocate(gpu, what);
    return b;
  }

  std::string dir;
  LoadOptions opts;
  json manifest;
  void *lib = nullptr;
  int64_t vocab = 0, eos = -1, maxPositions = 0;
  std::string ckptPath, prefix, actDtype;
  MemoryPlan plan;
  std::map<std::string, KernelSpec> kernels;
  std::map<std::string, Entry> entries;
  std::vector<std::unique_ptr<Buffer>> owned;
  std::map<std::string, Buffer *> weights, weightScales, states, inputs;
  int64_t batch = 0;
  std::vector<int64_t> lens;
  bool profiling = false, tracing = false;
  std::map<int64_t, void *> decodeGraphs; // batch size -> executable graph
  bool graphsOk = true;
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

void HostModel::load() {
  fs::path mpath = fs::path(dir) / "manifest.json";
  std::ifstream in(mpath);
  if (!in)
    throw Error("artifact '" + dir + "': no manifest.json");
  {
    // The manifest must be the one k3-compile wrote (manifest.sha256); the
    // schema check below still guards against a hand-made pair.
    std::ifstream hin(fs::path(dir) / "manifest.sha256");
    std::string want;
    if (!hin || !(hin >> want))
      throw Error("artifact '" + dir + "': no manifest.sha256 (built by an older k3c, or "
                  "incomplete; recompile the artifact)");
    if (want != sha256File(mpath.string()))
      throw Error("artifact '" + dir + "': manifest.json does not match manifest.sha256 "
                  "(edited or corrupt; recompile the artifact)");
  }
  try {
    manifest = json::parse(in);
  } catch (const json::exception &e) {
    throw Error("artifact '" + dir + "': manifest.json is not valid JSON: " + e.what());
  }
  // Every index, size, path and reference is checked before any is used.
  validateManifest(manifest, dir);
  try {
    bool hasCuda = manifest.at("files").contains("cuda_library");
    bool hasHost = manifest.at("files").contains("host_library");
    if (opts.device == "cuda" && !hasCuda)
      throw Error("--device cuda: this artifact has no GPU kernels (compiled with --target=" +
                  manifest.value("target", std::string("?")) + "; use --target=sm_90a or both)");
    if (opts.device != "cpu" && hasCuda) {
      std::string why;
      gpu = cuda::initialize(why);
      if (!gpu && opts.device == "cuda")
        throw Error("--device cuda: " + why);
    }
    if (!gpu && !hasHost)
      throw Error("artifact '" + dir + "' has no host kernels (compiled with --target=sm_90a) "
                  "and no GPU is usable here");
    const json &model = manifest.at("model");
    vocab = model.at("vocab_size");
    eos = model.value("eos_token_id", -1);
    maxPositions = model.value("max_position_embeddings", 0);
    prefix = model.value("weight_prefix", "");
    actDtype = model.value("activation_dtype", "bf16");
    const json &cap = manifest.at("capacity");
    plan.maxTokens = cap.at("max_tokens");
    plan.maxSeqs = opts.maxSeqs > 0 ? std::min<int64_t>(opts.maxSeqs, cap.at("max_seqs"))
                                    : int64_t(cap.at("max_seqs"));
    plan.maxContext = cap.at("max_context");
    if (plan.maxSeqs > plan.maxTokens)
      throw Error("artifact capacity: max_seqs > max_tokens");
    ckptPath = opts.checkpoint.empty() ? manifest.at("checkpoint").value("path", "")
                                       : opts.checkpoint;
    // Hashes: the kernel library and the checkpoint's config/index.
    const json &libj = manifest.at("files").at(gpu ? "cuda_library" : "host_library");
    fs::path libPath = fs::path(dir) / libj.at("path").get<std::string>();
    if (!fs::exists(libPath))
      throw Error("artifact '" + dir + "': kernel library " + libPath.string() + " is missing");
    if (sha256File(libPath.string()) != libj.at("sha256").get<std::string>())
      throw Error("artifact '" + dir + "': " + libPath.string() +
                  " does not match its SHA-256 in manifest.json (corrupt or replaced)");
    if (ckptPath.empty())
      throw Error("artifact '" + dir + "' was compiled from a config alone: give the weights "
                  "with --checkpoint DIR (its config.json must be the compiled one)");
    if (!fs::is_directory(ckptPath))
      throw Error("artifact '" + dir + "': its checkpoint '" + ckptPath + "' is not available");
    const json &ck = manifest.at("checkpoint");
    if (!ck.contains("sha256") || !ck.at("sha256").is_object())
      throw Error("artifact '" + dir + "': manifest.json names no checkpoint hashes (recompile "
                  "it with this k3c)");
    for (auto &[file, hash] : ck.at("sha256").items())
      if (sha256File((fs::path(ckptPath) / file).string()) != hash.get<std::string>())
        throw Error("checkpoint '" + ckptPath + "': " + file +
                    " changed since the artifact was compiled (SHA-256 mismatch)");
    // The CUDA launch library resolves the mgpu* ABI from this process.
    lib = dlopen(libPath.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (gpu)
      cuda::checkLaunchError("(loading the kernel modules)");
    if (!lib)
      throw Error("cannot load " + libPath.string() + ": " + dlerror());
    for (const json &k : manifest.at("kernels")) {
      KernelSpec spec;
      spec.name = k.at("name");
      spec.family = k.at("family");
      spec.symbol = k.at("host_symbol");
      spec.resultAliases = k.at("result_aliases").get<std::vector<int64_t>>();
      spec.flopsPerToken = k.value("flops_per_token", int64_t(0));
      spec.bytesPerToken = k.value("bytes_per_token", int64_t(0));
      spec.weightBytes = k.value("weight_bytes", int64_t(0));
      for (const json &a : k.at("args")) {
        ArgSpec as;
        as.kind = a.at("kind");
        as.index = a.at("index");
        if (a.contains("component"))
          as.component = a["component"] == "payload" ? 0 : 1;
        as.dtype = a.at("dtype");
        as.shape = a.at("shape").get<std::vector<int64_t>>();
        for (const json &d : a.at("dynamic_from"))
          as.dynamicFrom.push_back({d[0].get<int64_t>(), d[1].get<int64_t>()});
        spec.args.push_back(as);
      }
      spec.fn = reinterpret_cast<void (*)(void **)>(dlsym(lib, spec.symbol.c_str()));
      if (!spec.fn)
        throw Error("kernel library has no symbol '" + spec.symbol + "' (kernel " + spec.name + ")");
      // The entry point must have been built for the arguments this manifest
      // entry describes (a swapped or edited entry would call it with the
      // wrong buffers).
      const char *sig = static_cast<const char *>(dlsym(lib, (spec.symbol + "_sig").c_str()));
      if (!sig)
        throw Error("kernel library has no signature for '" + spec.symbol + "' (kernel " +
                    spec.name + "): built by an incompatible k3c; recompile the artifact");
      if (std::string(sig) != rt::kernelSignature(k))
        throw Error("kernel " + spec.name + ": library symbol '" + spec.symbol +
                    "' was built for other arguments than manifest.json describes (edited or "
                    "swapped kernel entry); recompile the artifact");
      // Scratch buffers, capacity-sized, reused by every launch of the kernel.
      spec.scratch.resize(spec.args.size());
      for (size_t i = 0; i < spec.args.size(); ++i)
        if (spec.args[i].kind == "scratch") {
          std::vector<int64_t> cap = spec.args[i].shape;
          // Under EP the expert kernel runs on the pairs a rank receives:
          // up to every rank's tokens x slots, one row each.
          int64_t rows = plan.maxTokens;
          if (opts.ep && spec.family == "moe_experts" && cap.size() >= 2)
            rows = plan.maxTokens * cap[1] * opts.ep->size();
          for (int64_t &d : cap)
            if (d < 0)
              d = rows;
          spec.scratch[i] = std::make_unique<Buffer>();
          spec.scratch[i]->dtype = spec.args[i].dtype;
          spec.scratch[i]->capacity = cap;
          spec.scratch[i]->allocate(gpu, "scratch of kernel " + spec.name);
          plan.scratchBytes += spec.scratch[i]->bytes;
        }
      kernels[spec.name] = std::move(spec);
    }
    for (const char *name : {"prefill", "decode"}) {
      const json &ej = manifest.at("entries").at(name);
      Entry e;
      for (const json &v : ej.at("values")) {
        Value val;
        val.id = v.at("id");
        val.kind = v.value("kind", "activation");
        val.name = v.value("name", "");
        val.trace = v.value("trace", "");
        val.dtype = v.at("dtype");
        val.shape = v.at("shape").get<std::vector<int64_t>>();
        if (v.contains("dims"))
          val.dims = v["dims"].get<std::vector<std::string>>();
        if (val.dtype == "mxfp4") {
          val.mxfp4 = true;
          if (v.contains("layout")) {
            val.nTile = v["layout"].at("n_tile");
            val.kTile = v["layout"].at("k_tile");
          }
        }
        e.values.push_back(std::move(val));
      }
      for (const json &l : ej.at("launches")) {
        auto it = kernels.find(l.at("kernel").get<std::string>());
        if (it == kernels.end())
          throw Error("manifest: launch of unknown kernel " + l.at("kernel").get<std::string>());
        e.launches.push_back({&it->second, l.at("inputs").get<std::vector<int64_t>>(),
                              l.at("outputs").get<std::vector<int64_t>>()});
      }
      e.returns = ej.at("returns").get<std::vector<int64_t>>();
      if (opts.ep)
        overlapSharedExperts(e);
      entries[name] = std::move(e);
    }
  } catch (const json::exception &e) {
    throw Error("artifact '" + dir + "': malformed manifest.json: " + e.what());
  }
  // Storage: inputs, states (per sequence slot) and weights are shared by both
  // entries. Activations come from one pool: a buffer is reused once the last
  // launch reading its value has run (entries never interleave, so prefill
  // and decode draw from the same pool).
  auto capOf = [&](const Value &val) {
    std::vector<int64_t> cap = val.shape;
    for (size_t i = 0; i < cap.size(); ++i)
      if (cap[i] < 0) {
        std::string d = i < val.dims.size() ? val.dims[i] : "";
        cap[i] = d == "seqs" ? plan.maxSeqs : d == "context" ? plan.maxContext : plan.maxTokens;
      }
    return cap;
  };
  std::vector<Buffer *> pool; // free activation buffers
  for (auto &[name, e] : entries) {
    for (Value &v : e.values) {
      if (v.kind == "input") {
        auto &b = inputs[v.name];
        if (!b)
          b = newBuffer(v.dtype, capOf(v));
        v.buf = b;
      } else if (v.kind == "state") {
        auto &b = states[v.name];
        if (!b) {
          b = newBuffer(v.dtype, capOf(v), "state " + v.name);
          plan.stateBytes += b->bytes;
          plan.stateBytesPerSeq += b->bytes / plan.maxSeqs;
        }
        v.buf = b;
      }
    }
    std::vector<int64_t> lastUse(e.values.size(), -1);
    for (size_t i = 0; i < e.launches.size(); ++i)
      for (int64_t in : e.launches[i].inputs)
        lastUse[in] = static_cast<int64_t>(i);
    for (int64_t r : e.returns)
      lastUse[r] = static_cast<int64_t>(e.launches.size());
    std::vector<std::pair<int64_t, Buffer *>> live; // (last use, buffer)
    std::vector<Buffer *> used;
    for (size_t i = 0; i < e.launches.size(); ++i) {
      Launch &l = e.launches[i];
      for (auto it = live.begin(); it != live.end();)
        if (it->first < static_cast<int64_t>(i)) {
          pool.push_back(it->second);
          it = live.erase(it);
        } else {
          ++it;
        }
      for (size_t p = 0; p < l.outputs.size(); ++p) {
        if (l.kernel->resultAliases[p] >= 0)
          continue; // a state updated in place
        Value &v = e.values[l.outputs[p]];
        std::vector<int64_t> cap = capOf(v);
        int64_t bytes = dtypeBytes(v.dtype);
        for (int64_t d : cap)
          bytes *= d;
        Buffer *best = nullptr;
        for (Buffer *b : pool)
          if (b->bytes >= bytes && (!best || b->bytes < best->bytes))
            best = b;
        if (best) {
          pool.erase(std::find(pool.begin(), pool.end(), best));
          best->dtype = v.dtype;
          best->capacity = cap;
        } else {
          best = newBuffer(v.dtype, cap);
          plan.activationBytes += best->bytes;
        }
        v.buf = best;
        live.push_back({lastUse[v.id], best});
        used.push_back(best);
      }
    }
    for (auto &[last, b] : live)
      pool.push_back(b);
  }
  loadWeights(entries["prefill"]);
  for (Value &v : entries["decode"].values)
    if (v.kind == "weight") {
      v.buf = weights.at(v.name);
      v.scales = v.mxfp4 ? weightScales.at(v.name) : nullptr;
    }
  reset(1);
}

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

const std::vector<float> &HostModel::run(Entry &e, const std::vector<int64_t> &ids,
                                  const std::vector<int64_t> &seqLens, bool graph) {
  const int64_t T = static_cast<int64_t>(ids.size()), N = batch;
  if (T > plan.maxTokens)
    throw Error(std::to_string(T) + " tokens in one step exceed the artifact's capacity of " +
                std::to_string(plan.maxTokens) + " (compile with --max-tokens)");
  for (int64_t n = 0; n < N; ++n) {
    int64_t total = lens[n] + seqLens[n];
    if (total > plan.maxContext || (maxPositions > 0 && total > maxPositions))
      throw Error("sequence " + std::to_string(n) + " would hold " + std::to_string(total) +
                  " tokens, more than the planned cache of " + std::to_string(plan.maxContext) +
                  " (compile with --max-context)");
  }
  for (int64_t t = 0; t < T; ++t)
    if (ids[t] < 0 || ids[t] >= vocab)
      throw Error("token id " + std::to_string(ids[t]) + " is outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
  // Inputs.
  for (Value &v : e.values) {
    if (v.kind == "input") {
      std::vector<int32_t> host;
      if (v.name == "token_ids") {
        for (int64_t t = 0; t < T; ++t)
          host.push_back(static_cast<int32_t>(ids[t]));
      } else {
        for (int64_t n = 0; n < N; ++n)
          host.push_back(static_cast<int32_t>(v.name == "seq_lens" ? seqLens[n] : lens[n]));
      }
      v.buf->write(host.data(), host.size() * sizeof(int32_t));
      v.buf->dims = {static_cast<int64_t>(host.size())};
    } else if (v.kind == "state") {
      v.buf->dims = v.buf->capacity;
      v.buf->dims[0] = N;
    } else if (v.kind == "weight") {
      v.buf->dims = v.buf->capacity;
      if (v.scales)
        v.scales->dims = v.scales->capacity;
    }
  }
  // Decode on the GPU replays one CUDA graph per batch size: the launches,
  // their buffers and dims are the same every step; only the uploaded inputs
  // (token ids, cache lengths) change.
  // (Not under EP: the exchange between kernels runs on the host.)
  // Kernel dumps (K3C_DUMP_KERNEL) copy buffers to the host between
  // launches, which a capture does not allow.
  bool useGraph = graph && gpu && graphsOk && !profiling && !tracing && !opts.ep &&
                  !std::getenv("K3C_DUMP_KERNEL");
  auto it = decodeGraphs.find(N);
  if (useGraph && it != decodeGraphs.end()) {
    cuda::launchGraph(it->second);
  } else if (useGraph && cuda::beginCapture()) {
    launchAll(e, T);
    void *exec = cuda::endCapture();
    if (exec) {
      decodeGraphs[N] = exec;
      cuda::launchGraph(exec);
    } else {
      graphsOk = false; // capture unsupported here: run eagerly from now on
      launchAll(e, T);
    }
  } else {
    launchAll(e, T);
  }
  for (int64_t n = 0; n < N; ++n)
    lens[n] += seqLens[n];
  Buffer *logits = e.values[e.returns[0]].buf;
  logitsHost.resize(N * vocab);
  logits->read(logitsHost.data(), logitsHost.size() * sizeof(float));
  return logitsHost;
}

void HostModel::overlapSharedExperts(Entry &e) {
  auto &ls = e.launches;
  for (size_t i = 0; i < ls.size(); ++i) {
    if (ls[i].kernel->family != "moe_shared")
      continue;
    for (size_t j = i + 1; j < ls.size(); ++j) {
      bool reads = false;
      for (int64_t in : ls[j].inputs)
        reads |= std::find(ls[i].outputs.begin(), ls[i].outputs.end(), in) != ls[i].outputs.end();
      if (reads)
        break;
      if (ls[j].kernel->family == "moe_experts") {
        Launch shared = ls[i];
        ls.erase(ls.begin() + i);
        ls.insert(ls.begin() + j, shared); // now right after the routed experts
        i = j;
        break;
      }
    }
  }
}

void HostModel::launchAll(Entry &e, int64_t T) {
  std::vector<Buffer *> bufOf(e.values.size());
  for (Value &v : e.values)
    bufOf[v.id] = v.buf;
  PendingExchange pending;
  try {
    for (Launch &l : e.launches)
      launchStep(e, l, T, bufOf, pending);
    pending.join();
  } catch (...) {
    if (pending.thread.joinable()) { // its peers must not wait for this rank
      opts.ep->abort("a kernel launch failed on this rank");
      pending.thread.join();
    }
    throw;
  }
}

void HostModel::launchStep(Entry &e, Launch &l, int64_t T, std::vector<Buffer *> &bufOf,
                           PendingExchange &pending) {
  KernelSpec &k = *l.kernel;
  if (pending.feeds(l))
    pending.join();
  // Outputs aliasing inputs (state updated in place) share their buffer.
  for (size_t p = 0; p < l.outputs.size(); ++p)
    if (k.resultAliases[p] >= 0)
      bufOf[l.outputs[p]] = bufOf[l.inputs[k.resultAliases[p]]];
  if (opts.ep && k.family == "moe_experts") {
    pending.join(); // one exchange at a time
    if (!profiling && !tracing) {
      pending.outputs = l.outputs;
      pending.thread = std::thread([this, &e, &l, &bufOf, &pending] {
        try {
          if (gpu)
            cuda::bindThread();
          runExpertsEP(e, l, bufOf);
        } catch (...) {
          pending.error = std::current_exception();
        }
      });
    } else {
      runExpertsEP(e, l, bufOf);
    }
  } else {
    launchOne(k, argBuffers(e, l, bufOf), T);
  }
  if (tracing)
    for (int64_t out : l.outputs) {
      const Value &v = e.values[out];
      if (v.trace.empty())
        continue;
      traces[v.trace] = readAsF32(*bufOf[out], v.dtype);
    }
}

/// A float32 .npy of `b`'s current contents (readAsF32).
static void dumpNpy(const std::string &path, const Buffer &b, const std::string &dtype) {
  std::vector<float> f = readAsF32(b, dtype);
  const int64_t n = static_cast<int64_t>(f.size());
  std::string shape = "(";
  for (int64_t d : b.dims)
    shape += std::to_string(d) + ",";
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  uint16_t hl = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char *>(&hl), 2);
  out << header;
  out.write(reinterpret_cast<const char *>(f.data()), n * 4);
  if (!out)
    throw Error("K3C_DUMP_KERNEL: cannot write " + path);
}

/// K3C_DUMP_KERNEL=FAMILY[@MIN[-MAX]]:DIR: the first launch of a kernel of
/// FAMILY with MIN..MAX tokens (default 1..any) writes its arguments before
/// (argI_in.npy) and after (argI_out.npy) the launch, as float32, and
/// args.json (kind, index, dtype, dims) into DIR: a kernel's exact inputs
/// and outputs, for checking it against an independent implementation.
struct KernelDump {
  std::string family, dir;
  int64_t minTokens = 1, maxTokens = std::numeric_limits<int64_t>::max();
  bool done = false;
  static KernelDump &get() {
    static KernelDump d = [] {
      KernelDump d;
      const char *v = std::getenv("K3C_DUMP_KERNEL");
      if (!v || !*v)
        return d;
      std::string s(v);
      size_t colon = s.find(':');
      if (colon == std::string::npos)
        throw Error("K3C_DUMP_KERNEL must be FAMILY[@MIN[-MAX]]:DIR, got '" + s + "'");
      d.family = s.substr(0, colon);
      d.dir = s.substr(colon + 1);
      if (size_t at = d.family.find('@'); at != std::string::npos) {
        std::string range = d.family.substr(at + 1);
        d.family.resize(at);
        size_t dash = range.find('-');
        d.minTokens = std::atoll(range.substr(0, dash).c_str());
        if (dash != std::string::npos)
          d.maxTokens = std::atoll(range.substr(dash + 1).c_str());
        if (d.minTokens < 1 || d.maxTokens < d.minTokens)
          throw Error("K3C_DUMP_KERNEL: bad token range '" + range + "'");
      }
      return d;
    }();
    return d;
  }
  bool wants(const KernelSpec &k, int64_t T) const {
    return !done && !family.empty() && k.family == family && T >= minTokens && T <= maxTokens;
  }
};

void HostModel::launchOne(KernelSpec &k, const std::vector<Buffer *> &argBuf, int64_t T) {
  std::vector<Descriptor> desc(k.args.size());
  std::vector<void *> argv(k.args.size(), nullptr);
  std::vector<std::vector<int64_t>> dims(k.args.size());
  for (size_t i = 0; i < k.args.size(); ++i) {
    const ArgSpec &a = k.args[i];
    Buffer *b = argBuf[i];
    if (!b || !b->data)
      throw Error("kernel " + k.name + ": argument " + std::to_string(i) + " has no buffer");
    dims[i] = a.shape;
    size_t dyn = 0;
    for (size_t d = 0; d < dims[i].size(); ++d)
      if (dims[i][d] < 0) {
        auto [src, sd] = a.dynamicFrom[dyn++];
        dims[i][d] = (a.kind == "input" || src < 0 || src == static_cast<int64_t>(i))
                         ? b->dims[d]
                         : dims[src][sd];
      }
    if (a.kind != "input")
      b->dims = dims[i];
    desc[i].set(b->data, dims[i]);
    argv[i] = desc[i].words.data();
  }
  KernelDump &dump = KernelDump::get();
  const bool dumping = dump.wants(k, T);
  if (dumping) {
    std::filesystem::create_directories(dump.dir);
    json meta = json::array();
    for (size_t i = 0; i < k.args.size(); ++i) {
      meta.push_back({{"kind", k.args[i].kind}, {"index", k.args[i].index},
                      {"dtype", k.args[i].dtype}, {"dims", dims[i]}, {"kernel", k.name}});
      dumpNpy(dump.dir + "/arg" + std::to_string(i) + "_in.npy", *argBuf[i], k.args[i].dtype);
    }
    std::ofstream(dump.dir + "/args.json") << meta.dump(1) << "\n";
  }
  auto t0 = std::chrono::steady_clock::now();
  cuda::Timer timer;
  if (profiling && gpu)
    timer.begin();
  k.fn(argv.data());
  if (gpu)
    cuda::checkLaunchError(k.name);
  if (dumping) {
    for (size_t i = 0; i < k.args.size(); ++i)
      dumpNpy(dump.dir + "/arg" + std::to_string(i) + "_out.npy", *argBuf[i], k.args[i].dtype);
    dump.done = true;
  }
  if (profiling) {
    double s = gpu ? timer.endSeconds()
                   : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    KernelProfile &p = prof[k.name];
    p.name = k.name;
    p.family = k.family;
    ++p.launches;
    p.seconds += s;
    p.flops += static_cast<double>(k.flopsPerToken) * T;
    // An embedding gathers T rows of its table, not the whole table.
    p.bytes += static_cast<double>(k.bytesPerToken) * T +
               (k.family == "embed" ? static_cast<double>(k.bytesPerToken) * T
                                    : static_cast<double>(k.weightBytes));
  }
}

/// The stacked routed-expert weights of a launch (MXFP4 payload and scales,
/// or dense [slots, ...] tensors): local slot i's bytes are at
/// [i * size / slots, (i + 1) * size / slots).
static std::vector<Buffer *> expertWeightBuffers(Entry &e, Launch &l) {
  std::vector<Buffer *> out;
  for (size_t i = 2; i < l.inputs.size(); ++i) {
    const auto &v = e.values[l.inputs[i]];
    out.push_back(v.buf);
    if (v.scales)
      out.push_back(v.scales);
  }
  return out;
}

void HostModel::gatherRows(Buffer *src, const std::string &dtype, std::vector<int64_t> srcDims,
                           const std::vector<int32_t> &rows, Buffer *dst) {
  if (rows.empty())
    return;
  // The value's dtype (from the manifest), not the buffer's: a pooled
  // activation buffer may have held a value of another dtype before.
  std::string name = "k3_ep_rows_" + dtype + "_" + std::to_string(srcDims[1]);
  auto it = kernels.find(name);
  if (it == kernels.end())
    throw Error("artifact has no EP row kernel " + name + " (recompile it with this k3c)");
  epRows->write(rows.data(), rows.size() * sizeof(int32_t));
  epRows->dims = {static_cast<int64_t>(rows.size())};
  Buffer view; // src as [rows, width] without owning it
  view.owns = false;
  view.device = src->device;
  view.dtype = dtype;
  view.data = src->data;
  view.dims = std::move(srcDims);
  launchOne(it->second, {&view, epRows, dst}, static_cast<int64_t>(rows.size()));
}

void HostModel::runExpertsEP(Entry &e, Launch &l, std::vector<Buffer *> &bufOf) {
  Transport &tr = *opts.ep;
  const int64_t R = tr.size(), me = tr.rank();
  KernelSpec &k = *l.kernel;
  Buffer *zb = bufOf[l.inputs[0]], *ib = bufOf[l.inputs[1]];
  const int64_t T = zb->dims[0], L = zb->dims[1], K = ib->dims[1];
  const int64_t E = e.values[l.inputs[2]].shape[0];
  // Dtypes of the values (a pooled buffer's own dtype may be stale).
  const std::string zDtype = e.values[l.inputs[0]].dtype, yDtype = e.values[l.outputs[0]].dtype;
  const int64_t zes = dtypeBytes(zDtype), rowBytes = L * zes;
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  ++ep.layers;
  std::vector<int32_t> idx(T * K); // the router's choices (the latents stay on the device)
  if (T > 0)
    ib->read(idx.data(), idx.size() * sizeof(int32_t));
  int64_t sent0 = tr.bytesSent;
  Buffer *yb = bufOf[l.outputs[0]];
  if (!epZ) {
    int64_t cap = plan.maxTokens * K * R, mine = plan.maxTokens * K;
    epZ = newBuffer(zDtype, {cap, L}, "EP received latents");
    epIdx = newBuffer("i32", {cap, K}, "EP received experts");
    epY = newBuffer(yDtype, {cap, K, L}, "EP expert outputs");
    epOut = newBuffer(yDtype, {cap, L}, "EP slot-0 outputs");
    epSend = newBuffer(zDtype, {mine, L}, "EP rows to send");
    epRecv = newBuffer(yDtype, {mine, L}, "EP outputs received");
    epRows = newBuffer("i32", {cap}, "EP row indices");
  }

  // 1. Counts from every rank (fixed size, one round); the same plan
  //    everywhere.
  auto t0 = now();
  std::vector<int64_t> mine = countPairs(idx.data(), T * K, E);
  std::vector<int64_t> out(R * E), all(R * E);
  for (int64_t d = 0; d < R; ++d)
    std::copy(mine.begin(), mine.end(), out.begin() + d * E);
  std::vector<size_t> countBytes(R, E * sizeof(int64_t));
  tr.allToAllBuffers(out.data(), countBytes, all.data(), countBytes, /*device=*/false);
  // cum[s][x]: pairs of expert x on ranks before s (the global pair order is
  // source rank, then the source's order).
  std::vector<std::vector<int64_t>> cum(R + 1, std::vector<int64_t>(E, 0));
  for (int64_t s = 0; s < R; ++s)
    for (int64_t x = 0; x < E; ++x) {
      if (all[s * E + x] < 0)
        throw Error("EP: rank " + std::to_string(s) + " sent a negative pair count");
      cum[s + 1][x] = cum[s][x] + all[s * E + x];
    }
  if (!std::equal(mine.begin(), mine.end(), all.begin() + me * E))
    throw Error("EP: this rank's counts came back changed from the exchange");
  auto t1 = now();
  Placement pl = planPlacement(cum[R], R, opts.epBalance);
  auto t2 = now();
  ep.planSeconds += secs(t1, t2);

  // 2. Replica weights from their home ranks, slot to slot (device to device
  //    over NCCL): every rank derives the same pieces from the plan.
  std::vector<Buffer *> wbufs = expertWeightBuffers(e, l);
  const ExpertSlots es = expertSlots(E);
  auto slotBytes = [&](Buffer *b) { return b->bytes / es.slots; };
  auto slotPtr = [&](Buffer *b, int64_t slot) {
    return static_cast<void *>(static_cast<uint8_t *>(b->data) + slot * slotBytes(b));
  };
  std::vector<int64_t> fetched;
  std::vector<Transport::Piece> wsend, wrecv;
  bool anyReplica = false;
  for (int64_t x = 0; x < E; ++x) {
    int64_t home = homeRank(x, E, R);
    for (auto [d, n] : pl.shares[x]) {
      if (d == home || n == 0)
        continue;
      anyReplica = true;
      if (d == me && (fetched.empty() || fetched.back() != x))
        fetched.push_back(x);
      if (home == me)
        for (Buffer *b : wbufs)
          wsend.push_back({d, slotPtr(b, x - es.first), static_cast<size_t>(slotBytes(b))});
    }
  }
  // Local slots: home experts first, then this step's replicas.
  if (static_cast<int64_t>(fetched.size()) > es.slots - es.home)
    throw Error("EP: the placement gives rank " + std::to_string(me) + " " +
                std::to_string(fetched.size()) + " replicas; it has room for " +
                std::to_string(es.slots - es.home));
  std::vector<int64_t> slotOf(E, -1);
  for (int64_t x = es.first; x < es.first + es.home; ++x)
    slotOf[x] = x - es.first;
  for (size_t j = 0; j < fetched.size(); ++j) {
    int64_t x = fetched[j], slot = es.home + static_cast<int64_t>(j);
    slotOf[x] = slot;
    for (Buffer *b : wbufs)
      wrecv.push_back({homeRank(x, E, R), slotPtr(b, slot), static_cast<size_t>(slotBytes(b))});
  }
  if (anyReplica) // the same answer on every rank: the round is collective
    tr.exchangePieces(wsend, wrecv, gpu);
  ep.replicasFetched += static_cast<int64_t>(fetched.size());

  // 3. Dispatch: each of my pairs goes to the rank whose share holds its
  //    position in the expert's global order, grouped by expert (so the
  //    receiver knows every row's expert from the counts and the plan: no
  //    expert ids travel).
  std::vector<int64_t> seen(E, 0);
  std::vector<std::vector<int32_t>> sentPairs(R);
  for (int64_t p = 0; p < T * K; ++p) {
    int32_t x = idx[p];
    int64_t g = cum[me][x] + seen[x]++, acc = 0, dest = -1;
    for (auto [d, n] : pl.shares[x]) {
      if (g < acc + n) {
        dest = d;
        break;
      }
      acc += n;
    }
    if (dest < 0)
      throw Error("EP: the placement lost a pair of expert " + std::to_string(x));
    sentPairs[dest].push_back(static_cast<int32_t>(p));
    if (dest != me)
      ++ep.pairsSent;
  }
  for (auto &v : sentPairs)
    std::stable_sort(v.begin(), v.end(), [&](int32_t a, int32_t b) { return idx[a] < idx[b]; });
  // What I receive from each source: per expert (ascending), the overlap of
  // the source's pairs with my shares; each row's local expert slot.
  std::vector<int64_t> fromRank(R, 0);
  std::vector<int32_t> rowSlot;
  for (int64_t s = 0; s < R; ++s)
    for (int64_t x = 0; x < E; ++x) {
      int64_t lo = cum[s][x], hi = cum[s + 1][x], acc = 0;
      if (lo == hi)
        continue;
      for (auto [d, n] : pl.shares[x]) {
        int64_t ov = std::min(hi, acc + n) - std::max(lo, acc);
        acc += n;
        if (d != me || ov <= 0)
          continue;
        if (slotOf[x] < 0)
          throw Error("EP: the placement sends pairs of expert " + std::to_string(x) +
                      " to rank " + std::to_string(me) + ", which does not hold it");
        rowSlot.insert(rowSlot.end(), ov, static_cast<int32_t>(slotOf[x]));
        fromRank[s] += ov;
      }
    }
  const int64_t n = static_cast<int64_t>(rowSlot.size());
  // The permute: the rows to send, destination by destination, gathered on
  // the device by the compiled row kernel, then sent buffer to buffer.
  std::vector<int32_t> sendRows;
  for (int64_t d = 0; d < R; ++d)
    for (int32_t p : sentPairs[d])
      sendRows.push_back(static_cast<int32_t>(p / K));
  if (!sendRows.empty())
    gatherRows(zb, zDtype, {T, L}, sendRows, epSend);
  std::vector<size_t> sendBytes(R), recvBytes(R);
  for (int64_t d = 0; d < R; ++d) {
    sendBytes[d] = sentPairs[d].size() * rowBytes;
    recvBytes[d] = fromRank[d] * rowBytes;
  }
  tr.allToAllBuffers(epSend->data, sendBytes, epZ->data, recvBytes, gpu);
  auto t3 = now();

  // 4. The compiled expert kernel on the received pairs: one row each, the
  //    expert's local slot in top-k slot 0 and no expert (-1) in the others.
  ep.pairsComputed += n;
  const int64_t yes = dtypeBytes(yDtype), outRow = L * yes;
  if (n > 0) {
    std::vector<int32_t> ir(n * K, -1);
    for (int64_t r = 0; r < n; ++r)
      ir[r * K] = rowSlot[r];
    epZ->dims = {n, L};
    epIdx->write(ir.data(), ir.size() * sizeof(int32_t));
    epIdx->dims = {n, K};
    // The launch's own buffers, with the received pairs in place of the
    // latents, expert ids and outputs.
    std::vector<Buffer *> argBuf = argBuffers(e, l, bufOf);
    for (size_t i = 0; i < k.args.size(); ++i) {
      const ArgSpec &a = k.args[i];
      if (a.kind == "input" && (a.index == 0 || a.index == 1))
        argBuf[i] = a.index == 0 ? epZ : epIdx;
      else if (a.kind == "output")
        argBuf[i] = epY;
    }
    auto t4 = now();
    launchOne(k, argBuf, n);
    if (gpu)
      cuda::synchronize("the EP expert kernel");
    ep.expertSeconds += secs(t4, now());
    // Slot 0 of every row (the unpermute's first half, on the device).
    std::vector<int32_t> slot0(n);
    for (int64_t r = 0; r < n; ++r)
      slot0[r] = static_cast<int32_t>(r * K);
    gatherRows(epY, yDtype, {n * K, L}, slot0, epOut);
  }
  auto t5 = now();

  // 5. Combine: outputs back to their sources in the order they came
  //    (buffer to buffer), then the unpermute gathers every pair's output row
  //    back into [T, K] order on the device.
  for (int64_t d = 0; d < R; ++d) {
    sendBytes[d] = fromRank[d] * outRow;
    recvBytes[d] = sentPairs[d].size() * outRow;
  }
  tr.allToAllBuffers(epOut->data, sendBytes, epRecv->data, recvBytes, gpu);
  std::vector<int32_t> inverse(T * K, -1);
  int64_t pos = 0;
  for (int64_t d = 0; d < R; ++d)
    for (int32_t p : sentPairs[d])
      inverse[p] = static_cast<int32_t>(pos++);
  if (T > 0)
    gatherRows(epRecv, yDtype, {T * K, L}, inverse, yb);
  yb->dims = {T, K, L};

  // 6. Replicas are dropped after the layer (a later step fetches again).
  for (size_t j = 0; j < fetched.size(); ++j)
    for (Buffer *b : wbufs)
      b->clearAt((es.home + static_cast<int64_t>(j)) * slotBytes(b), slotBytes(b));
  auto tEnd = now();
  ep.exchangeSeconds += secs(t0, t1) + secs(t2, t3) + secs(t5, tEnd);
  ep.moeSeconds += secs(t0, tEnd);
  if (decoding) {
    ++ep.decodeLayers;
    ep.decodeMoeSeconds += secs(t0, tEnd);
  }
  ep.bytesSent += tr.bytesSent - sent0;
}

} // namespace

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
