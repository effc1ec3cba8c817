//===- ArtifactLoad.cpp - manifest, libraries, kernels, memory plan ---------===//

#include "runtime/HostModel.h"

#include <cstdlib>

namespace k3c::rt::detail {

/// "[a, b, c]" of a buffer's capacity, for errors.
static std::string shapeText(const std::vector<int64_t> &shape) {
  std::string t = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    t += (i ? ", " : "") + std::to_string(shape[i]);
  return t + "]";
}

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
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception &e) {
    throw Error("artifact '" + dir + "': manifest.json is not valid JSON: " + e.what());
  }
  // Every index, size, path, reference and weight binding is checked before
  // any is used (support/Manifest.h).
  manifest = artifact::Manifest::fromJson(doc, dir);
  const artifact::Manifest &m = manifest;
  bool hasCuda = m.cudaLibrary.has_value(), hasHost = m.hostLibrary.has_value();
  if (opts.device == "cuda" && !hasCuda)
    throw Error("--device cuda: this artifact has no GPU kernels (compiled with --target=" +
                m.target + "; use --target=sm_90a or both)");
  if (opts.device != "cpu" && hasCuda) {
    std::string why;
    gpu = cuda::initialize(why);
    if (!gpu && opts.device == "cuda")
      throw Error("--device cuda: " + why);
  }
  if (!gpu && !hasHost)
    throw Error("artifact '" + dir + "' has no host kernels (compiled with --target=sm_90a) "
                "and no GPU is usable here");
  vocab = m.model.vocabSize;
  eos = m.model.eosTokenId;
  maxPositions = m.model.maxPositionEmbeddings;
  actDtype = m.model.activationDtype;
  plan.maxTokens = m.capacity.maxTokens;
  plan.maxSeqs = opts.maxSeqs > 0 ? std::min<int64_t>(opts.maxSeqs, m.capacity.maxSeqs)
                                  : m.capacity.maxSeqs;
  plan.maxContext = m.capacity.maxContext;
  if (m.capacity.cachePage) {
    // The paged MLA cache's pool: --cache-tokens, else the artifact's default
    // (cut to every sequence's whole context when fewer sequences are asked
    // for); page 0 is the zero page.
    const int64_t P = m.capacity.cachePage, perSeq = (plan.maxContext + P - 1) / P;
    plan.cachePage = P;
    plan.cachePages = opts.cacheTokens > 0 ? (opts.cacheTokens + P - 1) / P + 1
                      : opts.maxSeqs > 0
                          ? std::min(m.capacity.cachePages, plan.maxSeqs * perSeq + 1)
                                         : m.capacity.cachePages;
    if (plan.cachePages > (int64_t(1) << 24))
      throw Error("--cache-tokens " + std::to_string(opts.cacheTokens) +
                  " asks for more than 2^24 pages of " + std::to_string(P) + " tokens");
  }
  ckptPath = opts.checkpoint.empty() ? m.checkpoint.path : opts.checkpoint;
  // Hashes: the kernel library and the checkpoint's config/index.
  const artifact::FileEntry &libj = gpu ? *m.cudaLibrary : *m.hostLibrary;
  fs::path libPath = fs::path(dir) / libj.path;
  if (!fs::exists(libPath))
    throw Error("artifact '" + dir + "': kernel library " + libPath.string() + " is missing");
  if (sha256File(libPath.string()) != libj.sha256)
    throw Error("artifact '" + dir + "': " + libPath.string() +
                " does not match its SHA-256 in manifest.json (corrupt or replaced)");
  // Programmatic dependent launch where every kernel of the library waits
  // for its predecessors (griddepcontrol); K3C_PDL=0 launches them plainly.
  // (0, 1 or 2 as k3-compile reads it; checked on the host too)
  const char *pdl = std::getenv("K3C_PDL");
  if (pdl && *pdl && std::string(pdl) != "0" && std::string(pdl) != "1" &&
      std::string(pdl) != "2")
    throw Error("K3C_PDL must be 0, 1 or 2, got '" + std::string(pdl) + "'");
  if (gpu)
    cuda::allowGridDependency(libj.gridDependency && !(pdl && std::string(pdl) == "0"));
  if (ckptPath.empty())
    throw Error("artifact '" + dir + "' was compiled from a config alone: give the weights "
                "with --checkpoint DIR (its config.json must be the compiled one)");
  if (!fs::is_directory(ckptPath))
    throw Error("artifact '" + dir + "': its checkpoint '" + ckptPath + "' is not available");
  if (!m.checkpoint.hasSha256)
    throw Error("artifact '" + dir + "': manifest.json names no checkpoint hashes (recompile "
                "it with this k3c)");
  for (const auto &[file, hash] : m.checkpoint.sha256)
    if (sha256File((fs::path(ckptPath) / file).string()) != hash)
      throw Error("checkpoint '" + ckptPath + "': " + file +
                  " changed since the artifact was compiled (SHA-256 mismatch)");
  // The CUDA launch library resolves the mgpu* ABI from this process.
  lib = dlopen(libPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (gpu)
    cuda::checkLaunchError("(loading the kernel modules)");
  if (!lib)
    throw Error("cannot load " + libPath.string() + ": " + dlerror());
  // The run-time switches, each checked here, before any state is
  // allocated: a value other than 0 or 1 is an error naming the variable.
  const bool arenaOn = envSwitch("K3C_SCRATCH_ARENA", true);
  poolTrim = envSwitch("K3C_POOL_TRIM", true);
  for (const char *v : {"K3C_GROWABLE_POOLS", "K3C_PROFILE_LAUNCHES", "K3C_ASYNC_LAUNCHES",
                        "K3C_EP_WARMUP", "K3C_HOST_GREEDY"})
    envSwitch(v, false);
  // The floating-point scratch of every kernel: views into one arena of the
  // largest kernel's bytes, with their offsets there.
  std::vector<std::pair<Buffer *, int64_t>> arenaViews;
  int64_t arenaBytes = 0;
  for (const artifact::Kernel &k : m.kernels) {
    KernelSpec spec;
    static_cast<artifact::Kernel &>(spec) = k;
    spec.fn = reinterpret_cast<void (*)(void **)>(dlsym(lib, spec.hostSymbol.c_str()));
    if (!spec.fn)
      throw Error("kernel library has no symbol '" + spec.hostSymbol + "' (kernel " + spec.name + ")");
    // The entry point must have been built for the arguments this manifest
    // entry describes (a swapped or edited entry would call it with the
    // wrong buffers).
    const char *sig = static_cast<const char *>(dlsym(lib, (spec.hostSymbol + "_sig").c_str()));
    if (!sig)
      throw Error("kernel library has no signature for '" + spec.hostSymbol + "' (kernel " +
                  spec.name + "): built by an incompatible k3c; recompile the artifact");
    if (std::string(sig) != artifact::kernelSignature(k))
      throw Error("kernel " + spec.name + ": library symbol '" + spec.hostSymbol +
                  "' was built for other arguments than manifest.json describes (edited or "
                  "swapped kernel entry); recompile the artifact");
    // Scratch buffers, capacity-sized, reused by every launch of the kernel.
    // Floating-point scratch is a kernel's workspace within one execution
    // (written before it is read, nothing carried to the next), and the
    // kernels of an entry run one after another (griddepcontrol.wait: no
    // launch touches memory before the grids ahead have completed), so
    // those buffers are views into one arena the size of the largest
    // kernel's (below, after every kernel is known). Integer scratch (the
    // grouped GEMM's split counters, which reset themselves and rely on
    // starting at zero; group offsets) and the routed experts' (sized by EP,
    // read back for the profile) keep their own buffers.
    // (K3C_SCRATCH_ARENA: 1 by default, on the GPU since session 41's
    // device call ran the model checks with it; 0 gives each its own buffer.)
    spec.scratch.resize(spec.args.size());
    int64_t arenaNeed = 0;
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
        // The host's kernels never touch device-only scratch: one element
        // stands in for it (a valid pointer, no storage).
        if (spec.args[i].deviceOnly && !gpu)
          cap.assign(cap.size(), 1);
        spec.scratch[i] = std::make_unique<Buffer>();
        spec.scratch[i]->dtype = spec.args[i].dtype;
        spec.scratch[i]->capacity = cap;
        const std::string &t = spec.args[i].dtype;
        if (arenaOn && (t == "f32" || t == "bf16" || t == "f16") && spec.family != "moe_experts") {
          int64_t bytes = dtypeBytes(t);
          for (int64_t d : cap)
            bytes *= d;
          spec.scratch[i]->bytes = bytes;
          spec.scratch[i]->owns = false;
          spec.scratch[i]->device = gpu;
          arenaViews.push_back({spec.scratch[i].get(), arenaNeed}); // addressed below
          arenaNeed += (std::max<int64_t>(bytes, 1) + 255) / 256 * 256;
          continue;
        }
        spec.scratch[i]->allocate(gpu, "scratch of kernel " + spec.name);
        plan.scratchBytes += spec.scratch[i]->bytes;
      }
    arenaBytes = std::max(arenaBytes, arenaNeed);
    kernels[spec.name] = std::move(spec);
  }
  if (arenaBytes > 0) {
    Buffer *arena = newBuffer("i8", {arenaBytes},
                              "the kernels' scratch arena (the largest kernel's workspace; a "
                              "smaller k3-compile --max-tokens shrinks it)");
    plan.scratchBytes += arena->bytes;
    for (auto [view, offset] : arenaViews)
      view->data = static_cast<uint8_t *>(arena->data) + offset;
  }
  for (auto [name, ej] : {std::pair<const char *, const artifact::Entry *>{"prefill", &m.prefill},
                          {"decode", &m.decode}}) {
    Entry e;
    for (const artifact::Value &v : ej->values) {
      Value val;
      static_cast<artifact::Value &>(val) = v;
      e.values.push_back(std::move(val));
    }
    for (const artifact::Launch &l : ej->launches)
      e.launches.push_back({&kernels.at(l.kernel), l.inputs, l.outputs});
    e.returns = ej->returns;
    if (opts.ep)
      overlapSharedExperts(e);
    entries[name] = std::move(e);
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
        cap[i] = d == "seqs"      ? plan.maxSeqs
                 : d == "context" ? plan.maxContext
                 : d == "pages"   ? plan.cachePages
                                  : plan.maxTokens;
      }
    return cap;
  };
  std::vector<Buffer *> pool; // free activation buffers
  for (auto &[name, e] : entries) {
    for (Value &v : e.values) {
      if (v.kind == "input") {
        auto &b = inputs[v.name];
        if (!b)
          b = newBuffer(v.dtype, capOf(v), "input " + v.name);
        v.buf = b;
      } else if (v.kind == "state") {
        auto &b = states[v.name];
        if (!b) {
          // A paged cache's pool grows with the pages handed out (page 0,
          // the zero page, mapped at once).
          std::vector<int64_t> cap = capOf(v);
          int64_t page = v.paged() ? dtypeBytes(v.dtype) * cap[1] * cap[2] : -1;
          b = newBuffer(v.dtype, std::move(cap),
                        "state " + v.name + " (k3-run --max-seqs loads fewer sequence slots)",
                        page);
          plan.stateBytes += b->bytes;
          if (v.paged()) {
            plan.cachePageBytes += b->bytes / plan.cachePages;
            pools.push_back(b);
          } else {
            plan.stateBytesPerSeq += b->bytes / plan.maxSeqs;
          }
          const std::string kda = "kda_state";
          if (v.name.size() >= kda.size() &&
              v.name.compare(v.name.size() - kda.size(), kda.size(), kda) == 0)
            plan.kdaStateDtype = v.dtype;
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
          best = newBuffer(v.dtype, cap,
                           "output " + std::to_string(p) + " of " + l.kernel->name + " (" + name +
                               ", an activation of capacity " + shapeText(cap) +
                               "; k3-run --max-seqs or a smaller k3-compile --max-tokens "
                               "shrinks it)");
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
  loadWeights();
  for (auto &[name, e] : entries)
    for (Value &v : e.values)
      if (v.kind == "weight") {
        v.buf = weights.at(v.name);
        v.scales = v.mxfp4() ? weightScales.at(v.name) : nullptr;
      }
  reset(1);
}


} // namespace k3c::rt::detail
