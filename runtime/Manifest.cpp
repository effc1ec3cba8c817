//===- Manifest.cpp - validateManifest ------------------------------------===//

#include "runtime/Manifest.h"

#include "support/Common.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace k3c::rt {

using json = nlohmann::json;

namespace {

/// Bounds (docs/artifact.md): far above any real model, far below what
/// would overflow the runtime's size arithmetic.
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxTokens = int64_t(1) << 24;
constexpr int64_t kMaxSeqs = int64_t(1) << 16;
constexpr int64_t kMaxContext = int64_t(1) << 24;
constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr int64_t kMaxBufferBytes = int64_t(1) << 46; // 64 TiB
constexpr size_t kMaxRank = 8;

struct Checker {
  std::string where; // "artifact 'DIR': manifest.json"

  [[noreturn]] void fail(const std::string &field, const std::string &problem) const {
    throw Error(where + ": " + field + ": " + problem);
  }
  const json &get(const json &obj, const std::string &key, const std::string &field) const {
    if (!obj.is_object())
      fail(field, "must be an object");
    auto it = obj.find(key);
    if (it == obj.end())
      fail(field + "." + key, "missing");
    return *it;
  }
  int64_t integer(const json &v, const std::string &field, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer())
      fail(field, "must be an integer, got " + v.dump());
    int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)
                    ? INT64_MAX
                    : v.get<int64_t>();
    if (x < lo || x > hi)
      fail(field, std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
    return x;
  }
  const std::string &string(const json &v, const std::string &field) const {
    if (!v.is_string())
      fail(field, "must be a string, got " + v.dump());
    return v.get_ref<const std::string &>();
  }
  const json &array(const json &v, const std::string &field) const {
    if (!v.is_array())
      fail(field, "must be an array");
    return v;
  }
  std::vector<int64_t> ints(const json &v, const std::string &field, int64_t lo, int64_t hi) const {
    std::vector<int64_t> out;
    for (size_t i = 0; i < array(v, field).size(); ++i)
      out.push_back(integer(v[i], field + "[" + std::to_string(i) + "]", lo, hi));
    return out;
  }
  void sha256(const json &v, const std::string &field) const {
    const std::string &s = string(v, field);
    if (s.size() != 64 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail(field, "is not a SHA-256 (64 lowercase hex digits)");
  }
  /// A path the artifact (or checkpoint) directory contains: relative,
  /// no "..", not empty, no NUL.
  void relativePath(const std::string &p, const std::string &field) const {
    if (p.empty() || p[0] == '/' || p.find('\0') != std::string::npos)
      fail(field, "'" + p + "' must be a relative path inside the directory");
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = p.find('/', start);
      if (end == std::string::npos)
        end = p.size();
      std::string part = p.substr(start, end - start);
      if (part == "..")
        fail(field, "'" + p + "' leaves the directory (\"..\")");
      start = end + 1;
    }
  }
};

} // namespace

int64_t dtypeSizeOrZero(const std::string &d) {
  if (d == "bf16" || d == "f16")
    return 2;
  if (d == "f32" || d == "i32")
    return 4;
  if (d == "i64")
    return 8;
  if (d == "i8")
    return 1;
  return 0;
}

void validateManifest(const json &m, const std::string &dir) {
  Checker c{"artifact '" + dir + "': manifest.json"};
  if (!m.is_object())
    c.fail("(top level)", "must be an object");
  if (!m.contains("format") || !m["format"].is_string() || m["format"] != "k3c-artifact")
    c.fail("format", "is not \"k3c-artifact\" (not a k3c artifact)");
  const json &fv = c.get(m, "format_version", "(top level)");
  if (!fv.is_number_integer())
    c.fail("format_version", "must be an integer, got " + fv.dump() +
                                 " (built by an incompatible k3c? recompile with this one)");
  if (fv.get<int64_t>() != kManifestFormatVersion)
    throw Error("artifact '" + dir + "' has format version " + fv.dump() +
                "; this runtime reads version " + std::to_string(kManifestFormatVersion) +
                " (recompile with this k3c)");

  // Files: the kernel libraries, inside the artifact.
  const json &files = c.get(m, "files", "(top level)");
  if (!files.is_object() || files.empty())
    c.fail("files", "must name the kernel libraries");
  for (auto &[key, f] : files.items()) {
    if (key != "host_library" && key != "cuda_library")
      c.fail("files." + key, "unknown file role");
    c.relativePath(c.string(c.get(f, "path", "files." + key), "files." + key + ".path"),
                   "files." + key + ".path");
    c.sha256(c.get(f, "sha256", "files." + key), "files." + key + ".sha256");
  }

  // Model and capacity.
  const json &model = c.get(m, "model", "(top level)");
  int64_t vocab = c.integer(c.get(model, "vocab_size", "model"), "model.vocab_size", 1, kMaxVocab);
  if (model.contains("eos_token_id"))
    c.integer(model["eos_token_id"], "model.eos_token_id", -1, vocab - 1);
  if (model.contains("max_position_embeddings"))
    c.integer(model["max_position_embeddings"], "model.max_position_embeddings", 0,
              int64_t(1) << 40);
  if (model.contains("activation_dtype")) {
    const std::string &a = c.string(model["activation_dtype"], "model.activation_dtype");
    if (a != "bf16" && a != "f32")
      c.fail("model.activation_dtype", "must be bf16 or f32, got '" + a + "'");
  }
  if (model.contains("weight_prefix"))
    c.string(model["weight_prefix"], "model.weight_prefix");
  const json &cap = c.get(m, "capacity", "(top level)");
  int64_t maxTokens = c.integer(c.get(cap, "max_tokens", "capacity"), "capacity.max_tokens", 1,
                                kMaxTokens);
  int64_t maxSeqs = c.integer(c.get(cap, "max_seqs", "capacity"), "capacity.max_seqs", 1, kMaxSeqs);
  int64_t maxContext = c.integer(c.get(cap, "max_context", "capacity"), "capacity.max_context", 1,
                                 kMaxContext);
  if (maxSeqs > maxTokens)
    c.fail("capacity", "max_seqs " + std::to_string(maxSeqs) + " > max_tokens " +
                           std::to_string(maxTokens));

  // Checkpoint: the path is the user's; the hashed files lie inside it.
  const json &ck = c.get(m, "checkpoint", "(top level)");
  if (!ck.is_object())
    c.fail("checkpoint", "must be an object");
  if (ck.contains("path"))
    c.string(ck["path"], "checkpoint.path");
  if (ck.contains("sha256")) {
    if (!ck["sha256"].is_object())
      c.fail("checkpoint.sha256", "must be an object");
    for (auto &[file, hash] : ck["sha256"].items()) {
      c.relativePath(file, "checkpoint.sha256 entry");
      c.sha256(hash, "checkpoint.sha256." + file);
    }
  }

  // Kernels.
  struct KernelArg {
    std::string kind;
    int64_t index;
    bool component;
    std::vector<int64_t> shape;
  };
  struct KernelShape {
    int64_t inputs = 0, outputs = 0;
    std::vector<KernelArg> args;
  };
  std::map<std::string, KernelShape> kernels;
  const json &ks = c.array(c.get(m, "kernels", "(top level)"), "kernels");
  for (size_t ki = 0; ki < ks.size(); ++ki) {
    const json &k = ks[ki];
    std::string kf = "kernels[" + std::to_string(ki) + "]";
    const std::string &name = c.string(c.get(k, "name", kf), kf + ".name");
    kf = "kernel " + name;
    if (kernels.count(name))
      c.fail(kf, "defined twice");
    c.string(c.get(k, "family", kf), kf + ".family");
    const std::string &sym = c.string(c.get(k, "host_symbol", kf), kf + ".host_symbol");
    if (sym.rfind("k3k_", 0) != 0 ||
        sym.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
            std::string::npos)
      c.fail(kf + ".host_symbol", "'" + sym + "' is not a k3k_ kernel symbol");
    for (const char *f : {"flops_per_token", "bytes_per_token", "weight_bytes"})
      if (k.contains(f))
        c.integer(k[f], kf + "." + f, 0, int64_t(1) << 60);
    const json &args = c.array(c.get(k, "args", kf), kf + ".args");
    std::vector<std::vector<int64_t>> shapes;
    KernelShape shape;
    int64_t maxIn = -1, maxOut = -1;
    for (size_t ai = 0; ai < args.size(); ++ai) {
      const json &a = args[ai];
      std::string af = kf + ".args[" + std::to_string(ai) + "]";
      const std::string &kind = c.string(c.get(a, "kind", af), af + ".kind");
      const std::string &dtype = c.string(c.get(a, "dtype", af), af + ".dtype");
      if (!dtypeSizeOrZero(dtype))
        c.fail(af + ".dtype", "unknown dtype '" + dtype + "'");
      std::vector<int64_t> s = c.ints(c.get(a, "shape", af), af + ".shape", -1, kMaxDim);
      if (s.size() > kMaxRank)
        c.fail(af + ".shape", "rank " + std::to_string(s.size()) + " > " +
                                  std::to_string(kMaxRank));
      shapes.push_back(s);
      int64_t index = c.integer(c.get(a, "index", af), af + ".index", -1, 1 << 20);
      shape.args.push_back({kind, index, a.contains("component"), s});
      if (kind == "input")
        maxIn = std::max(maxIn, index);
      else if (kind == "output")
        maxOut = std::max(maxOut, index);
      else if (kind != "scratch")
        c.fail(af + ".kind", "must be input, output or scratch, got '" + kind + "'");
      if (kind != "scratch" && index < 0)
        c.fail(af + ".index", "must be >= 0 for an " + kind);
      if (a.contains("device_only") &&
          (!a["device_only"].is_boolean() || kind != "scratch"))
        c.fail(af + ".device_only", "must be a boolean, on a scratch argument");
      if (a.contains("component")) {
        const json &comp = a["component"];
        if (!comp.is_string() || (comp != "payload" && comp != "scales"))
          c.fail(af + ".component", "must be payload or scales");
      }
    }
    // dynamic_from: one (argument, dimension) pair per dynamic dimension.
    for (size_t ai = 0; ai < args.size(); ++ai) {
      std::string af = kf + ".args[" + std::to_string(ai) + "]";
      const json &dyn = c.array(c.get(args[ai], "dynamic_from", af), af + ".dynamic_from");
      size_t nDyn = std::count(shapes[ai].begin(), shapes[ai].end(), -1);
      if (dyn.size() != nDyn)
        c.fail(af + ".dynamic_from", "has " + std::to_string(dyn.size()) + " entries for " +
                                         std::to_string(nDyn) + " dynamic dimensions");
      size_t d = 0;
      for (const json &p : dyn) {
        std::string pf = af + ".dynamic_from[" + std::to_string(d++) + "]";
        if (!p.is_array() || p.size() != 2)
          c.fail(pf, "must be an [argument, dimension] pair");
        int64_t src = c.integer(p[0], pf + "[0]", -1, static_cast<int64_t>(args.size()) - 1);
        // Outputs and scratch take their sizes from arguments before them.
        if (shape.args[ai].kind != "input" && src > static_cast<int64_t>(ai))
          c.fail(pf, "refers to a later argument");
        if (src >= 0)
          c.integer(p[1], pf + "[1]", 0, static_cast<int64_t>(shapes[src].size()) - 1);
        else
          c.integer(p[1], pf + "[1]", 0, kMaxRank);
      }
    }
    // One result per alias entry: -1 for a result the kernel writes into
    // its own output argument, else the input it updates in place.
    shape.inputs = maxIn + 1;
    std::vector<int64_t> aliases =
        c.ints(c.get(k, "result_aliases", kf), kf + ".result_aliases", -1, shape.inputs - 1);
    shape.outputs = static_cast<int64_t>(aliases.size());
    if (maxOut >= shape.outputs)
      c.fail(kf + ".args", "output " + std::to_string(maxOut) + " but only " +
                               std::to_string(shape.outputs) + " results");
    for (int64_t p = 0; p < shape.outputs; ++p) {
      bool has = false;
      for (const KernelArg &a : shape.args)
        has |= a.kind == "output" && a.index == p;
      if (aliases[p] < 0 && !has)
        c.fail(kf + ".result_aliases", "result " + std::to_string(p) +
                                           " has neither an output argument nor an alias");
    }
    kernels[name] = shape;
  }

  // Entries.
  const json &entries = c.get(m, "entries", "(top level)");
  for (const char *en : {"prefill", "decode"}) {
    std::string ef = std::string("entries.") + en;
    const json &e = c.get(entries, en, "entries");
    const json &vals = c.array(c.get(e, "values", ef), ef + ".values");
    std::vector<std::string> kinds;
    for (size_t vi = 0; vi < vals.size(); ++vi) {
      const json &v = vals[vi];
      std::string vf = ef + ".values[" + std::to_string(vi) + "]";
      if (c.integer(c.get(v, "id", vf), vf + ".id", 0, INT64_MAX) != static_cast<int64_t>(vi))
        c.fail(vf + ".id", "must equal the value's position " + std::to_string(vi));
      std::string kind = v.contains("kind") ? c.string(v["kind"], vf + ".kind") : "activation";
      if (kind != "input" && kind != "state" && kind != "weight" && kind != "activation")
        c.fail(vf + ".kind", "unknown kind '" + kind + "'");
      kinds.push_back(kind);
      if (kind != "activation" && !v.contains("name"))
        c.fail(vf, "a " + kind + " needs a name");
      if (v.contains("name"))
        c.string(v["name"], vf + ".name");
      const std::string &dtype = c.string(c.get(v, "dtype", vf), vf + ".dtype");
      bool mx = dtype == "mxfp4";
      if (!mx && !dtypeSizeOrZero(dtype))
        c.fail(vf + ".dtype", "unknown dtype '" + dtype + "'");
      if (mx && kind != "weight")
        c.fail(vf + ".dtype", "mxfp4 is for weights only");
      std::vector<int64_t> s = c.ints(c.get(v, "shape", vf), vf + ".shape", -1, kMaxDim);
      if (s.size() > kMaxRank)
        c.fail(vf + ".shape", "rank " + std::to_string(s.size()) + " > " +
                                  std::to_string(kMaxRank));
      std::vector<std::string> dims(s.size());
      if (v.contains("dims")) {
        const json &dj = c.array(v["dims"], vf + ".dims");
        if (dj.size() != s.size())
          c.fail(vf + ".dims", "must name each of the " + std::to_string(s.size()) +
                                   " dimensions");
        for (size_t i = 0; i < s.size(); ++i) {
          dims[i] = c.string(dj[i], vf + ".dims[" + std::to_string(i) + "]");
          if (dims[i] != "" && dims[i] != "tokens" && dims[i] != "seqs" && dims[i] != "context")
            c.fail(vf + ".dims[" + std::to_string(i) + "]", "unknown dimension '" + dims[i] + "'");
          if (dims[i] == "context" && s[i] >= 0 && s[i] != maxContext)
            c.fail(vf + ".shape[" + std::to_string(i) + "]",
                   "the compiled context of " + std::to_string(s[i]) +
                       " differs from capacity.max_context " + std::to_string(maxContext));
        }
      }
      // The capacity-sized buffer, with checked arithmetic.
      if (!mx) {
        int64_t bytes = dtypeSizeOrZero(dtype);
        for (size_t i = 0; i < s.size(); ++i) {
          int64_t d = s[i] >= 0                ? s[i]
                      : dims[i] == "seqs"      ? maxSeqs
                      : dims[i] == "context"   ? maxContext
                                               : maxTokens;
          if (d != 0 && bytes > kMaxBufferBytes / d)
            c.fail(vf + ".shape", "a buffer of this shape at the artifact's capacity exceeds " +
                                      std::to_string(kMaxBufferBytes >> 40) + " TiB");
          bytes *= d;
        }
      }
    }
    // Launches: known kernels, indices in range, activations written once
    // and read only after they are written.
    std::vector<char> written(vals.size(), 0);
    for (size_t vi = 0; vi < vals.size(); ++vi)
      written[vi] = kinds[vi] != "activation";
    const json &ls = c.array(c.get(e, "launches", ef), ef + ".launches");
    const int64_t last = static_cast<int64_t>(vals.size()) - 1;
    for (size_t li = 0; li < ls.size(); ++li) {
      const json &l = ls[li];
      std::string lf = ef + ".launches[" + std::to_string(li) + "]";
      const std::string &kn = c.string(c.get(l, "kernel", lf), lf + ".kernel");
      auto it = kernels.find(kn);
      if (it == kernels.end())
        c.fail(lf + ".kernel", "unknown kernel '" + kn + "'");
      std::vector<int64_t> ins = c.ints(c.get(l, "inputs", lf), lf + ".inputs", 0, last);
      std::vector<int64_t> outs = c.ints(c.get(l, "outputs", lf), lf + ".outputs", 0, last);
      if (static_cast<int64_t>(ins.size()) != it->second.inputs ||
          static_cast<int64_t>(outs.size()) != it->second.outputs)
        c.fail(lf, "passes " + std::to_string(ins.size()) + " inputs and " +
                       std::to_string(outs.size()) + " outputs to " + kn + ", which takes " +
                       std::to_string(it->second.inputs) + " and " +
                       std::to_string(it->second.outputs));
      // Each argument's value has the argument's rank and static sizes.
      for (const KernelArg &a : it->second.args) {
        if (a.kind == "scratch" || a.component)
          continue;
        int64_t vid = a.kind == "input" ? ins[a.index] : outs[a.index];
        const json &vs = vals[vid]["shape"];
        bool ok = vs.size() == a.shape.size();
        for (size_t d = 0; ok && d < a.shape.size(); ++d)
          ok = a.shape[d] < 0 || vs[d].get<int64_t>() < 0 || vs[d].get<int64_t>() == a.shape[d];
        if (!ok)
          c.fail(lf, "value " + std::to_string(vid) + " of shape " + vs.dump() + " passed as " +
                         a.kind + " " + std::to_string(a.index) + " of " + kn + ", which takes " +
                         json(a.shape).dump());
      }
      for (int64_t i : ins)
        if (!written[i])
          c.fail(lf + ".inputs", "reads value " + std::to_string(i) +
                                     " before any launch writes it (launches out of order?)");
      for (int64_t o : outs) {
        if (kinds[o] == "input" || kinds[o] == "weight")
          c.fail(lf + ".outputs", "writes the " + kinds[o] + " value " + std::to_string(o));
        if (kinds[o] == "activation" && written[o])
          c.fail(lf + ".outputs", "writes value " + std::to_string(o) + " a second time");
        written[o] = 1;
      }
    }
    std::vector<int64_t> rets = c.ints(c.get(e, "returns", ef), ef + ".returns", 0, last);
    if (rets.empty())
      c.fail(ef + ".returns", "is empty");
    for (int64_t r : rets)
      if (!written[r])
        c.fail(ef + ".returns", "value " + std::to_string(r) + " is never written");
  }
}

} // namespace k3c::rt
