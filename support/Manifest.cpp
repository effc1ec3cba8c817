//===- Manifest.cpp - the artifact manifest: JSON in/out and its checks ---===//

#include "support/Manifest.h"

#include "support/Common.h"

#include <algorithm>
#include <set>

namespace k3c::artifact {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

/// Bounds (docs/artifact.md): far above any real model, far below what
/// would overflow the runtime's size arithmetic.
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxHidden = int64_t(1) << 24;
constexpr int64_t kMaxLayers = int64_t(1) << 16;
constexpr int64_t kMaxTokens = int64_t(1) << 24;
constexpr int64_t kMaxSeqs = int64_t(1) << 16;
constexpr int64_t kMaxContext = int64_t(1) << 24;
constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr int64_t kMaxBufferBytes = int64_t(1) << 46; // 64 TiB
constexpr size_t kMaxRank = 8;
constexpr size_t kMaxNameLength = 1024;
constexpr const char *kExpert = "{expert}";

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Reads the JSON document into the structs: types and presence only; the
/// ranges and cross-references are Checker::manifest's.
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
  const json *opt(const json &obj, const std::string &key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  int64_t integer(const json &v, const std::string &field) const {
    if (!v.is_number_integer())
      fail(field, "must be an integer, got " + v.dump());
    return v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX
                                                                              : v.get<int64_t>();
  }
  int64_t integer(const json &v, const std::string &field, int64_t lo, int64_t hi) const {
    int64_t x = integer(v, field);
    range(x, field, lo, hi);
    return x;
  }
  void range(int64_t x, const std::string &field, int64_t lo, int64_t hi) const {
    if (x < lo || x > hi)
      fail(field, std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  }
  std::string string(const json &v, const std::string &field) const {
    if (!v.is_string())
      fail(field, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  bool boolean(const json &v, const std::string &field) const {
    if (!v.is_boolean())
      fail(field, "must be a boolean, got " + v.dump());
    return v.get<bool>();
  }
  const json &array(const json &v, const std::string &field) const {
    if (!v.is_array())
      fail(field, "must be an array");
    return v;
  }
  const json &object(const json &v, const std::string &field) const {
    if (!v.is_object())
      fail(field, "must be an object");
    return v;
  }
  std::vector<int64_t> ints(const json &v, const std::string &field) const {
    std::vector<int64_t> out;
    for (size_t i = 0; i < array(v, field).size(); ++i)
      out.push_back(integer(v[i], field + "[" + std::to_string(i) + "]"));
    return out;
  }
  void ints(const std::vector<int64_t> &v, const std::string &field, int64_t lo,
            int64_t hi) const {
    for (size_t i = 0; i < v.size(); ++i)
      range(v[i], field + "[" + std::to_string(i) + "]", lo, hi);
  }
  std::vector<std::string> strings(const json &v, const std::string &field) const {
    std::vector<std::string> out;
    for (size_t i = 0; i < array(v, field).size(); ++i)
      out.push_back(string(v[i], field + "[" + std::to_string(i) + "]"));
    return out;
  }
  void sha256(const std::string &s, const std::string &field) const {
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
      if (p.compare(start, end - start, "..") == 0)
        fail(field, "'" + p + "' leaves the directory (\"..\")");
      start = end + 1;
    }
  }
  void shape(const std::vector<int64_t> &s, const std::string &field, int64_t lo) const {
    if (s.size() > kMaxRank)
      fail(field, "rank " + std::to_string(s.size()) + " > " + std::to_string(kMaxRank));
    ints(s, field, lo, kMaxDim);
  }
  /// Elements of a static shape times `bytes`, failing above 64 TiB.
  int64_t bytesOf(const std::vector<int64_t> &s, int64_t bytes, const std::string &field,
                  const std::string &what) const {
    for (int64_t d : s) {
      if (d != 0 && bytes > kMaxBufferBytes / d)
        fail(field, what + " exceeds " + std::to_string(kMaxBufferBytes >> 40) + " TiB");
      bytes *= d;
    }
    return bytes;
  }

  Mxfp4Layout layout(const json &v, const std::string &field) const {
    Mxfp4Layout l;
    l.nTile = integer(get(v, "n_tile", field), field + ".n_tile");
    l.kTile = integer(get(v, "k_tile", field), field + ".k_tile");
    return l;
  }
  void checkLayout(const Mxfp4Layout &l, const std::vector<int64_t> &shape,
                   const std::string &field) const {
    if (l.nTile != 8)
      fail(field + ".n_tile", "must be 8, got " + std::to_string(l.nTile));
    if (l.kTile != 32 && l.kTile != 64 && l.kTile != 128)
      fail(field + ".k_tile", "must be 32, 64 or 128, got " + std::to_string(l.kTile));
    if (shape.size() == 3 && (shape[1] % l.nTile || shape[2] % l.kTile))
      fail(field, "tiles of " + std::to_string(l.nTile) + " x " + std::to_string(l.kTile) +
                      " do not divide the weight " + shapeStr(shape));
  }

  void manifest(const Manifest &m) const;
  void kernel(const Kernel &k, const std::string &kf) const;
  using KernelIndex = std::map<std::string, const Kernel *>;
  using BindingIndex = std::map<std::string, const WeightBinding *>;
  void entry(const Manifest &m, const Entry &e, const std::string &ef, const KernelIndex &kernels,
             const BindingIndex &bindings) const;
  void binding(const WeightBinding &b, const std::string &bf) const;
};

void Checker::kernel(const Kernel &k, const std::string &kf) const {
  const std::string &sym = k.hostSymbol;
  if (sym.rfind("k3k_", 0) != 0 ||
      sym.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
          std::string::npos)
    fail(kf + ".host_symbol", "'" + sym + "' is not a k3k_ kernel symbol");
  range(k.flopsPerToken, kf + ".flops_per_token", 0, int64_t(1) << 60);
  range(k.bytesPerToken, kf + ".bytes_per_token", 0, int64_t(1) << 60);
  range(k.weightBytes, kf + ".weight_bytes", 0, int64_t(1) << 60);
  int64_t maxOut = -1;
  for (size_t ai = 0; ai < k.args.size(); ++ai) {
    const KernelArg &a = k.args[ai];
    std::string af = kf + ".args[" + std::to_string(ai) + "]";
    if (!dtypeSizeOrZero(a.dtype))
      fail(af + ".dtype", "unknown dtype '" + a.dtype + "'");
    shape(a.shape, af + ".shape", -1);
    range(a.index, af + ".index", -1, 1 << 20);
    if (a.kind == "output")
      maxOut = std::max(maxOut, a.index);
    else if (a.kind != "input" && a.kind != "scratch")
      fail(af + ".kind", "must be input, output or scratch, got '" + a.kind + "'");
    if (a.kind != "scratch" && a.index < 0)
      fail(af + ".index", "must be >= 0 for an " + a.kind);
    if (a.deviceOnly && a.kind != "scratch")
      fail(af + ".device_only", "must be a boolean, on a scratch argument");
    if (a.component != -1 && a.component != 0 && a.component != 1)
      fail(af + ".component", "must be payload or scales");
  }
  // dynamic_from: one (argument, dimension) pair per dynamic dimension.
  for (size_t ai = 0; ai < k.args.size(); ++ai) {
    const KernelArg &a = k.args[ai];
    std::string af = kf + ".args[" + std::to_string(ai) + "]";
    size_t nDyn = std::count(a.shape.begin(), a.shape.end(), -1);
    if (a.dynamicFrom.size() != nDyn)
      fail(af + ".dynamic_from", "has " + std::to_string(a.dynamicFrom.size()) + " entries for " +
                                     std::to_string(nDyn) + " dynamic dimensions");
    for (size_t d = 0; d < a.dynamicFrom.size(); ++d) {
      std::string pf = af + ".dynamic_from[" + std::to_string(d) + "]";
      auto [src, dim] = a.dynamicFrom[d];
      range(src, pf + "[0]", -1, static_cast<int64_t>(k.args.size()) - 1);
      // Outputs and scratch take their sizes from arguments before them.
      if (a.kind != "input" && src > static_cast<int64_t>(ai))
        fail(pf, "refers to a later argument");
      range(dim, pf + "[1]", 0,
            src >= 0 ? static_cast<int64_t>(k.args[src].shape.size()) - 1 : int64_t(kMaxRank));
    }
  }
  // One result per alias entry: -1 for a result the kernel writes into its
  // own output argument, else the input it updates in place.
  ints(k.resultAliases, kf + ".result_aliases", -1, k.numInputs() - 1);
  if (maxOut >= k.numResults())
    fail(kf + ".args", "output " + std::to_string(maxOut) + " but only " +
                           std::to_string(k.numResults()) + " results");
  for (int64_t p = 0; p < k.numResults(); ++p) {
    bool has = false;
    for (const KernelArg &a : k.args)
      has |= a.kind == "output" && a.index == p;
    if (k.resultAliases[p] < 0 && !has)
      fail(kf + ".result_aliases",
           "result " + std::to_string(p) + " has neither an output argument nor an alias");
  }
}

void Checker::entry(const Manifest &m, const Entry &e, const std::string &ef,
                    const KernelIndex &kernels, const BindingIndex &bindings) const {
  const Capacity &cap = m.capacity;
  for (size_t vi = 0; vi < e.values.size(); ++vi) {
    const Value &v = e.values[vi];
    std::string vf = ef + ".values[" + std::to_string(vi) + "]";
    range(v.id, vf + ".id", 0, INT64_MAX);
    if (v.id != static_cast<int64_t>(vi))
      fail(vf + ".id", "must equal the value's position " + std::to_string(vi));
    if (v.kind != "input" && v.kind != "state" && v.kind != "weight" && v.kind != "activation")
      fail(vf + ".kind", "unknown kind '" + v.kind + "'");
    if (v.kind != "activation" && v.name.empty())
      fail(vf, "a " + v.kind + " needs a name");
    if (v.name.size() > kMaxNameLength)
      fail(vf + ".name", "longer than " + std::to_string(kMaxNameLength) + " characters");
    bool mx = v.dtype == "mxfp4";
    if (!mx && !dtypeSizeOrZero(v.dtype))
      fail(vf + ".dtype", "unknown dtype '" + v.dtype + "'");
    if (mx && v.kind != "weight")
      fail(vf + ".dtype", "mxfp4 is for weights only");
    shape(v.shape, vf + ".shape", -1);
    if (v.layout && !mx)
      fail(vf + ".layout", "only an mxfp4 weight has a layout");
    if (mx) {
      if (v.shape.size() != 3 || std::count(v.shape.begin(), v.shape.end(), -1))
        fail(vf + ".shape", "an mxfp4 weight is a static [experts, N, K]");
      if (v.shape[2] % 32)
        fail(vf + ".shape[2]", std::to_string(v.shape[2]) + " is not a multiple of 32");
      if (v.layout)
        checkLayout(*v.layout, v.shape, vf + ".layout");
    }
    if (v.kind == "weight" && std::count(v.shape.begin(), v.shape.end(), -1))
      fail(vf + ".shape", "a weight has static dimensions");
    if (!v.dims.empty() && v.dims.size() != v.shape.size())
      fail(vf + ".dims", "must name each of the " + std::to_string(v.shape.size()) + " dimensions");
    for (size_t i = 0; i < v.dims.size(); ++i) {
      const std::string &d = v.dims[i];
      if (d != "" && d != "tokens" && d != "seqs" && d != "context" && d != "pages")
        fail(vf + ".dims[" + std::to_string(i) + "]", "unknown dimension '" + d + "'");
      if (d == "pages") {
        if (!cap.cachePage)
          fail(vf + ".dims[" + std::to_string(i) + "]",
               "a paged cache needs capacity.cache_page");
        if (v.kind != "state" || i != 0 || v.shape.size() != 3 || v.shape[1] != cap.cachePage)
          fail(vf + ".shape", "a paged cache is a state [pages, capacity.cache_page = " +
                                  std::to_string(cap.cachePage) + ", width]");
      }
      if (d == "context" && v.shape[i] >= 0 && v.shape[i] != cap.maxContext)
        fail(vf + ".shape[" + std::to_string(i) + "]",
             "the compiled context of " + std::to_string(v.shape[i]) +
                 " differs from capacity.max_context " + std::to_string(cap.maxContext));
    }
    // The capacity-sized buffer, with checked arithmetic.
    std::vector<int64_t> sized = v.shape;
    for (size_t i = 0; i < sized.size(); ++i)
      if (sized[i] < 0) {
        const std::string d = i < v.dims.size() ? v.dims[i] : "";
        sized[i] = d == "seqs"      ? cap.maxSeqs
                   : d == "context" ? cap.maxContext
                   : d == "pages"   ? cap.cachePages
                                    : cap.maxTokens;
      }
    if (v.kind == "input" && v.name == "block_table") {
      const int64_t per = cap.cachePage ? (cap.maxContext + cap.cachePage - 1) / cap.cachePage : 0;
      if (!cap.cachePage || v.shape.size() != 2 || v.shape[1] != per || v.dtype != "i32")
        fail(vf, "the block table is an i32 input [seqs, ceil(max_context / cache_page)]" +
                     (cap.cachePage ? " = [seqs, " + std::to_string(per) + "]"
                                    : std::string(" and needs capacity.cache_page")));
    }
    bytesOf(sized, mx ? 1 : dtypeSizeOrZero(v.dtype), vf + ".shape",
            "a buffer of this shape at the artifact's capacity");
  }
  // Launches: known kernels, indices in range, activations written once and
  // read only after they are written.
  std::vector<char> written(e.values.size(), 0);
  for (size_t vi = 0; vi < e.values.size(); ++vi)
    written[vi] = e.values[vi].kind != "activation";
  const int64_t last = static_cast<int64_t>(e.values.size()) - 1;
  for (size_t li = 0; li < e.launches.size(); ++li) {
    const Launch &l = e.launches[li];
    std::string lf = ef + ".launches[" + std::to_string(li) + "]";
    auto kit = kernels.find(l.kernel);
    if (kit == kernels.end())
      fail(lf + ".kernel", "unknown kernel '" + l.kernel + "'");
    const Kernel *k = kit->second;
    ints(l.inputs, lf + ".inputs", 0, last);
    ints(l.outputs, lf + ".outputs", 0, last);
    if (static_cast<int64_t>(l.inputs.size()) != k->numInputs() ||
        static_cast<int64_t>(l.outputs.size()) != k->numResults())
      fail(lf, "passes " + std::to_string(l.inputs.size()) + " inputs and " +
                   std::to_string(l.outputs.size()) + " outputs to " + k->name + ", which takes " +
                   std::to_string(k->numInputs()) + " and " + std::to_string(k->numResults()));
    for (int64_t i : l.inputs)
      if (!written[i])
        fail(lf + ".inputs", "reads value " + std::to_string(i) +
                                 " before any launch writes it (launches out of order?)");
    for (int64_t o : l.outputs) {
      const std::string &kind = e.values[o].kind;
      if (kind == "input" || kind == "weight")
        fail(lf + ".outputs", "writes the " + kind + " value " + std::to_string(o));
      if (kind == "activation" && written[o])
        fail(lf + ".outputs", "writes value " + std::to_string(o) + " a second time");
      written[o] = 1;
    }
    // Each argument's value has the argument's shape exactly: its rank, its
    // static sizes, and a dynamic dimension (-1) where the argument has one
    // (the value's buffer is sized by the capacity there, while the kernel
    // writes and reads as many rows as the step has: a static 0 or 1 in the
    // value would be overrun), and no dynamic one where the argument is
    // static (the kernel's static rows could exceed the capacity).
    for (const KernelArg &a : k->args) {
      if (a.kind == "scratch" || a.component >= 0)
        continue;
      int64_t vid = a.kind == "input" ? l.inputs[a.index] : l.outputs[a.index];
      const std::vector<int64_t> &vs = e.values[vid].shape;
      if (vs != a.shape)
        fail(lf, "value " + std::to_string(vid) + " of shape " + json(vs).dump() + " passed as " +
                     a.kind + " " + std::to_string(a.index) + " of " + k->name + ", which takes " +
                     json(a.shape).dump() + " (-1: a dynamic dimension)");
    }
  }
  ints(e.returns, ef + ".returns", 0, last);
  if (e.returns.empty())
    fail(ef + ".returns", "is empty");
  for (int64_t r : e.returns)
    if (!written[r])
      fail(ef + ".returns", "value " + std::to_string(r) + " is never written");
  // Every weight is bound, with the binding's dtype, shape and layout.
  for (size_t vi = 0; vi < e.values.size(); ++vi) {
    const Value &v = e.values[vi];
    if (v.kind != "weight")
      continue;
    std::string vf = ef + ".values[" + std::to_string(vi) + "]";
    auto bit = bindings.find(v.name);
    if (bit == bindings.end())
      fail(vf, "weight '" + v.name + "' has no entry in the weight-binding table (weights)");
    const WeightBinding *b = bit->second;
    if (b->dtype != v.dtype || b->shape != v.shape)
      fail(vf, "weight '" + v.name + "' is " + v.dtype + " " + shapeStr(v.shape) +
                   "; its binding makes " + b->dtype + " " + shapeStr(b->shape));
    if (b->layout.has_value() != v.layout.has_value() || (b->layout && !(*b->layout == *v.layout)))
      fail(vf, "weight '" + v.name + "' has another MXFP4 layout than its binding");
  }
}

void Checker::binding(const WeightBinding &b, const std::string &bf) const {
  const std::string &t = b.transform;
  const std::vector<int64_t> &s = b.shape;
  size_t want = t == "mxfp4_stack" ? 2 : 1;
  if (t != "convert" && t != "flatten" && t != "stack" && t != "mxfp4_stack")
    fail(bf + ".transform", "unknown transform '" + t + "' (convert, flatten, stack, mxfp4_stack)");
  if (b.sources.size() != want)
    fail(bf + ".sources", "a " + t + " binding reads " + std::to_string(want) +
                              " tensor(s), got " + std::to_string(b.sources.size()));
  bool stacked = t == "stack" || t == "mxfp4_stack";
  if (b.shard != "" && b.shard != "experts")
    fail(bf + ".shard", "must be experts or absent, got '" + b.shard + "'");
  if (b.shard == "experts" && !stacked)
    fail(bf + ".shard", "only a stacked binding is sharded by expert");
  shape(s, bf + ".shape", 1);
  if (t == "mxfp4_stack") {
    if (b.dtype != "mxfp4" || s.size() != 3 || s[2] % 32)
      fail(bf, "an mxfp4_stack binding makes an mxfp4 [experts, N, K] weight, K a multiple of 32");
    if (b.layout)
      checkLayout(*b.layout, s, bf + ".layout");
  } else {
    if (b.dtype != "bf16" && b.dtype != "f32")
      fail(bf + ".dtype", "a " + t + " binding makes a bf16 or f32 weight, not '" + b.dtype + "'");
    if (b.layout)
      fail(bf + ".layout", "only an mxfp4 weight has a layout");
  }
  if (stacked && s.size() < 2)
    fail(bf + ".shape", "a stacked weight has the expert dimension and at least one more");
  bytesOf(s, 1, bf + ".shape", "a weight of this shape");
  for (size_t si = 0; si < b.sources.size(); ++si) {
    const WeightSource &src = b.sources[si];
    std::string sf = bf + ".sources[" + std::to_string(si) + "]";
    if (src.tensor.empty() || src.tensor.size() > kMaxNameLength ||
        src.tensor.find('\0') != std::string::npos)
      fail(sf + ".tensor", "must be a tensor name of 1 to " + std::to_string(kMaxNameLength) +
                               " characters");
    size_t at = src.tensor.find(kExpert);
    bool once = at != std::string::npos && src.tensor.find(kExpert, at + 1) == std::string::npos;
    if (stacked != once)
      fail(sf + ".tensor", "'" + src.tensor + "' " +
                               (stacked ? "must hold {expert} once (one tensor per expert)"
                                        : "holds {expert} but the binding is not stacked"));
    if (src.dtypes.empty())
      fail(sf + ".dtypes", "is empty");
    for (const std::string &d : src.dtypes)
      if (t == "mxfp4_stack" ? d != "u8" : d != "bf16" && d != "f16" && d != "f32")
        fail(sf + ".dtypes", "'" + d + "' is not a checkpoint dtype this transform reads (" +
                                 (t == "mxfp4_stack" ? "u8" : "bf16, f16, f32") + ")");
    if (src.shapes.empty())
      fail(sf + ".shapes", "is empty");
    for (size_t i = 0; i < src.shapes.size(); ++i) {
      std::string shf = sf + ".shapes[" + std::to_string(i) + "]";
      shape(src.shapes[i], shf, 1);
      int64_t n = bytesOf(src.shapes[i], 1, shf, "a tensor of this shape");
      // What each transform reads from the tensor.
      std::vector<int64_t> expect;
      if (t == "convert")
        expect = s;
      else if (t == "stack")
        expect.assign(s.begin() + 1, s.end());
      else if (t == "mxfp4_stack")
        expect = {s[1], si == 0 ? s[2] / 2 : s[2] / 32};
      if (t == "flatten" ? n == 0 : src.shapes[i] != expect)
        fail(shf, shapeStr(src.shapes[i]) + " does not make the " + t + " weight " +
                      shapeStr(s) + (expect.empty() ? "" : " (expected " + shapeStr(expect) + ")"));
      if (t != "flatten" && src.shapes.size() != 1)
        fail(sf + ".shapes", "a " + t + " binding accepts one shape");
    }
  }
}

void Checker::manifest(const Manifest &m) const {
  if (m.format != "k3c-artifact")
    fail("format", "is not \"k3c-artifact\" (not a k3c artifact)");
  if (m.formatVersion != kFormatVersion)
    throw Error(where.substr(0, where.size() - std::string(": manifest.json").size()) +
                " has format version " + std::to_string(m.formatVersion) +
                "; this k3c reads version " + std::to_string(kFormatVersion) +
                " (built by an incompatible k3c; recompile the artifact with this one)");
  if (!m.hostLibrary && !m.cudaLibrary)
    fail("files", "must name the kernel libraries");
  for (auto [role, f] : {std::pair<const char *, const std::optional<FileEntry> *>{
                             "host_library", &m.hostLibrary},
                         {"cuda_library", &m.cudaLibrary}})
    if (*f) {
      relativePath((*f)->path, std::string("files.") + role + ".path");
      sha256((*f)->sha256, std::string("files.") + role + ".sha256");
    }

  // Model and capacity.
  range(m.model.vocabSize, "model.vocab_size", 1, kMaxVocab);
  range(m.model.hiddenSize, "model.hidden_size", 1, kMaxHidden);
  range(m.model.numLayers, "model.num_layers", 0, kMaxLayers);
  range(m.model.eosTokenId, "model.eos_token_id", -1, m.model.vocabSize - 1);
  range(m.model.maxPositionEmbeddings, "model.max_position_embeddings", 0, int64_t(1) << 40);
  if (m.model.activationDtype != "bf16" && m.model.activationDtype != "f32")
    fail("model.activation_dtype", "must be bf16 or f32, got '" + m.model.activationDtype + "'");
  range(m.capacity.maxTokens, "capacity.max_tokens", 1, kMaxTokens);
  range(m.capacity.maxSeqs, "capacity.max_seqs", 1, kMaxSeqs);
  range(m.capacity.maxContext, "capacity.max_context", 1, kMaxContext);
  if (m.capacity.maxSeqs > m.capacity.maxTokens)
    fail("capacity", "max_seqs " + std::to_string(m.capacity.maxSeqs) + " > max_tokens " +
                         std::to_string(m.capacity.maxTokens));
  range(m.capacity.cachePage, "capacity.cache_page", 0, m.capacity.maxContext);
  if (m.capacity.cachePage)
    range(m.capacity.cachePages, "capacity.cache_pages", 2, kMaxContext);
  else if (m.capacity.cachePages)
    fail("capacity.cache_pages", "given without capacity.cache_page");

  // Checkpoint: the path is the user's; the hashed files lie inside it.
  for (const auto &[file, hash] : m.checkpoint.sha256) {
    relativePath(file, "checkpoint.sha256 entry");
    sha256(hash, "checkpoint.sha256." + file);
  }

  // Kernels.
  KernelIndex kernelIndex;
  for (size_t ki = 0; ki < m.kernels.size(); ++ki) {
    const Kernel &k = m.kernels[ki];
    if (k.name.empty())
      fail("kernels[" + std::to_string(ki) + "].name", "is empty");
    std::string kf = "kernel " + k.name;
    if (!kernelIndex.emplace(k.name, &k).second)
      fail(kf, "defined twice");
    kernel(k, kf);
  }

  // The weight-binding table.
  BindingIndex bindingIndex;
  std::set<std::string> weightValues;
  for (const Entry *e : {&m.prefill, &m.decode})
    for (const Value &v : e->values)
      if (v.kind == "weight")
        weightValues.insert(v.name);
  for (size_t bi = 0; bi < m.weights.size(); ++bi) {
    const WeightBinding &b = m.weights[bi];
    std::string bf = "weights[" + std::to_string(bi) + "]";
    if (b.name.empty())
      fail(bf + ".name", "is empty");
    if (!bindingIndex.emplace(b.name, &b).second)
      fail(bf, "'" + b.name + "' is bound twice");
    binding(b, bf);
    if (!weightValues.count(b.name))
      fail(bf, "'" + b.name + "' is not a weight of either entry");
  }

  entry(m, m.prefill, "entries.prefill", kernelIndex, bindingIndex);
  entry(m, m.decode, "entries.decode", kernelIndex, bindingIndex);
}

// --- JSON in ----------------------------------------------------------------

Kernel readKernel(const Checker &c, const json &k, const std::string &field) {
  Kernel out;
  out.name = c.string(c.get(k, "name", field), field + ".name");
  std::string kf = "kernel " + out.name;
  out.family = c.string(c.get(k, "family", kf), kf + ".family");
  out.hostSymbol = c.string(c.get(k, "host_symbol", kf), kf + ".host_symbol");
  for (auto [key, dst] : {std::pair<const char *, int64_t *>{"flops_per_token", &out.flopsPerToken},
                          {"bytes_per_token", &out.bytesPerToken},
                          {"weight_bytes", &out.weightBytes}})
    if (const json *v = c.opt(k, key))
      *dst = c.integer(*v, kf + "." + key);
  const json &args = c.array(c.get(k, "args", kf), kf + ".args");
  for (size_t ai = 0; ai < args.size(); ++ai) {
    const json &a = args[ai];
    std::string af = kf + ".args[" + std::to_string(ai) + "]";
    KernelArg arg;
    arg.kind = c.string(c.get(a, "kind", af), af + ".kind");
    arg.dtype = c.string(c.get(a, "dtype", af), af + ".dtype");
    arg.shape = c.ints(c.get(a, "shape", af), af + ".shape");
    arg.index = c.integer(c.get(a, "index", af), af + ".index");
    if (const json *d = c.opt(a, "device_only")) {
      if (!d->is_boolean())
        c.fail(af + ".device_only", "must be a boolean, on a scratch argument");
      arg.deviceOnly = d->get<bool>();
    }
    if (const json *comp = c.opt(a, "component")) {
      if (!comp->is_string() || (*comp != "payload" && *comp != "scales"))
        c.fail(af + ".component", "must be payload or scales");
      arg.component = *comp == "payload" ? 0 : 1;
    }
    const json &dyn = c.array(c.get(a, "dynamic_from", af), af + ".dynamic_from");
    for (size_t d = 0; d < dyn.size(); ++d) {
      std::string pf = af + ".dynamic_from[" + std::to_string(d) + "]";
      if (!dyn[d].is_array() || dyn[d].size() != 2)
        c.fail(pf, "must be an [argument, dimension] pair");
      arg.dynamicFrom.push_back({c.integer(dyn[d][0], pf + "[0]"), c.integer(dyn[d][1], pf + "[1]")});
    }
    out.args.push_back(std::move(arg));
  }
  out.resultAliases = c.ints(c.get(k, "result_aliases", kf), kf + ".result_aliases");
  return out;
}

Entry readEntry(const Checker &c, const json &e, const std::string &ef) {
  Entry out;
  const json &vals = c.array(c.get(e, "values", ef), ef + ".values");
  for (size_t vi = 0; vi < vals.size(); ++vi) {
    const json &v = vals[vi];
    std::string vf = ef + ".values[" + std::to_string(vi) + "]";
    Value val;
    val.id = c.integer(c.get(v, "id", vf), vf + ".id");
    if (const json *k = c.opt(v, "kind"))
      val.kind = c.string(*k, vf + ".kind");
    if (const json *n = c.opt(v, "name"))
      val.name = c.string(*n, vf + ".name");
    if (const json *t = c.opt(v, "trace"))
      val.trace = c.string(*t, vf + ".trace");
    val.dtype = c.string(c.get(v, "dtype", vf), vf + ".dtype");
    val.shape = c.ints(c.get(v, "shape", vf), vf + ".shape");
    if (const json *d = c.opt(v, "dims")) {
      val.dims = c.strings(*d, vf + ".dims");
      if (val.dims.size() != val.shape.size())
        c.fail(vf + ".dims", "must name each of the " + std::to_string(val.shape.size()) +
                                 " dimensions");
    }
    if (const json *l = c.opt(v, "layout"))
      val.layout = c.layout(*l, vf + ".layout");
    out.values.push_back(std::move(val));
  }
  const json &ls = c.array(c.get(e, "launches", ef), ef + ".launches");
  for (size_t li = 0; li < ls.size(); ++li) {
    std::string lf = ef + ".launches[" + std::to_string(li) + "]";
    Launch l;
    l.kernel = c.string(c.get(ls[li], "kernel", lf), lf + ".kernel");
    l.inputs = c.ints(c.get(ls[li], "inputs", lf), lf + ".inputs");
    l.outputs = c.ints(c.get(ls[li], "outputs", lf), lf + ".outputs");
    out.launches.push_back(std::move(l));
  }
  out.returns = c.ints(c.get(e, "returns", ef), ef + ".returns");
  return out;
}

WeightBinding readBinding(const Checker &c, const json &b, const std::string &bf) {
  WeightBinding out;
  out.name = c.string(c.get(b, "name", bf), bf + ".name");
  out.transform = c.string(c.get(b, "transform", bf), bf + ".transform");
  out.dtype = c.string(c.get(b, "dtype", bf), bf + ".dtype");
  out.shape = c.ints(c.get(b, "shape", bf), bf + ".shape");
  if (const json *l = c.opt(b, "layout"))
    out.layout = c.layout(*l, bf + ".layout");
  if (const json *s = c.opt(b, "shard"))
    out.shard = c.string(*s, bf + ".shard");
  const json &srcs = c.array(c.get(b, "sources", bf), bf + ".sources");
  for (size_t si = 0; si < srcs.size(); ++si) {
    std::string sf = bf + ".sources[" + std::to_string(si) + "]";
    WeightSource src;
    src.tensor = c.string(c.get(srcs[si], "tensor", sf), sf + ".tensor");
    src.dtypes = c.strings(c.get(srcs[si], "dtypes", sf), sf + ".dtypes");
    const json &shapes = c.array(c.get(srcs[si], "shapes", sf), sf + ".shapes");
    for (size_t i = 0; i < shapes.size(); ++i)
      src.shapes.push_back(c.ints(shapes[i], sf + ".shapes[" + std::to_string(i) + "]"));
    out.sources.push_back(std::move(src));
  }
  return out;
}

// --- JSON out ---------------------------------------------------------------

ojson valueJson(const Value &v) {
  ojson j;
  j["id"] = v.id;
  j["kind"] = v.kind;
  if (!v.name.empty())
    j["name"] = v.name;
  if (!v.trace.empty())
    j["trace"] = v.trace;
  j["dtype"] = v.dtype;
  j["shape"] = v.shape;
  if (!v.dims.empty())
    j["dims"] = v.dims;
  if (v.layout)
    j["layout"] = {{"n_tile", v.layout->nTile}, {"k_tile", v.layout->kTile}};
  return j;
}

ojson entryJson(const Entry &e) {
  ojson j;
  ojson values = ojson::array(), launches = ojson::array();
  for (const Value &v : e.values)
    values.push_back(valueJson(v));
  for (const Launch &l : e.launches)
    launches.push_back({{"kernel", l.kernel}, {"inputs", l.inputs}, {"outputs", l.outputs}});
  j["values"] = values;
  j["launches"] = launches;
  j["returns"] = e.returns;
  return j;
}

ojson bindingJson(const WeightBinding &b) {
  ojson j;
  j["name"] = b.name;
  j["transform"] = b.transform;
  j["dtype"] = b.dtype;
  j["shape"] = b.shape;
  if (b.layout)
    j["layout"] = {{"n_tile", b.layout->nTile}, {"k_tile", b.layout->kTile}};
  if (!b.shard.empty())
    j["shard"] = b.shard;
  ojson srcs = ojson::array();
  for (const WeightSource &s : b.sources)
    srcs.push_back({{"tensor", s.tensor}, {"dtypes", s.dtypes}, {"shapes", s.shapes}});
  j["sources"] = srcs;
  return j;
}

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

int64_t Kernel::numInputs() const {
  int64_t n = 0;
  for (const KernelArg &a : args)
    if (a.kind == "input")
      n = std::max(n, a.index + 1);
  return n;
}

const Kernel *Manifest::findKernel(const std::string &name) const {
  for (const Kernel &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

const WeightBinding *Manifest::findWeight(const std::string &name) const {
  for (const WeightBinding &b : weights)
    if (b.name == name)
      return &b;
  return nullptr;
}

ojson toJson(const Kernel &k) {
  ojson kj;
  kj["name"] = k.name;
  kj["family"] = k.family;
  kj["host_symbol"] = k.hostSymbol;
  kj["flops_per_token"] = k.flopsPerToken;
  kj["bytes_per_token"] = k.bytesPerToken;
  kj["weight_bytes"] = k.weightBytes;
  kj["result_aliases"] = k.resultAliases;
  ojson args = ojson::array();
  for (const KernelArg &a : k.args) {
    ojson aj;
    aj["kind"] = a.kind;
    aj["index"] = a.index;
    if (a.component >= 0)
      aj["component"] = a.component == 0 ? "payload" : "scales";
    aj["dtype"] = a.dtype;
    aj["shape"] = a.shape;
    ojson dyn = ojson::array();
    for (auto [arg, dim] : a.dynamicFrom)
      dyn.push_back({arg, dim});
    aj["dynamic_from"] = dyn;
    if (a.deviceOnly)
      aj["device_only"] = true;
    args.push_back(aj);
  }
  kj["args"] = args;
  return kj;
}

std::string kernelSignature(const Kernel &k) {
  std::string s = "k3c-sig-1;";
  for (const KernelArg &a : k.args) {
    s += a.kind + ":" + std::to_string(a.index);
    if (a.component >= 0)
      s += a.component == 0 ? ":payload" : ":scales";
    s += ":" + a.dtype + ":[";
    for (int64_t d : a.shape)
      s += std::to_string(d) + ",";
    s += "]<";
    for (auto [arg, dim] : a.dynamicFrom)
      s += std::to_string(arg) + "." + std::to_string(dim) + ",";
    if (a.deviceOnly)
      s += "@dev";
    s += ";";
  }
  s += "aliases:";
  for (int64_t a : k.resultAliases)
    s += std::to_string(a) + ",";
  return s;
}

ojson Manifest::toJson() const {
  ojson m;
  m["format"] = format;
  m["format_version"] = formatVersion;
  m["compiler"] = compiler;
  m["target"] = target;
  m["model"] = {{"model_type", model.modelType},
                {"vocab_size", model.vocabSize},
                {"hidden_size", model.hiddenSize},
                {"num_layers", model.numLayers},
                {"weight_prefix", model.weightPrefix},
                {"eos_token_id", model.eosTokenId},
                {"activation_dtype", model.activationDtype},
                {"max_position_embeddings", model.maxPositionEmbeddings}};
  m["capacity"] = {{"max_tokens", capacity.maxTokens},
                   {"max_seqs", capacity.maxSeqs},
                   {"max_context", capacity.maxContext}};
  if (capacity.cachePage) {
    m["capacity"]["cache_page"] = capacity.cachePage;
    m["capacity"]["cache_pages"] = capacity.cachePages;
  }
  ojson ck;
  ck["path"] = checkpoint.path;
  if (checkpoint.hasSha256) {
    ojson hashes = ojson::object();
    for (const auto &[file, hash] : checkpoint.sha256)
      hashes[file] = hash;
    ck["sha256"] = hashes;
  }
  if (checkpoint.fromConfig)
    ck["from_config"] = true;
  m["checkpoint"] = ck;
  ojson files = ojson::object();
  if (hostLibrary)
    files["host_library"] = {{"path", hostLibrary->path}, {"sha256", hostLibrary->sha256}};
  if (cudaLibrary) {
    files["cuda_library"] = {
        {"path", cudaLibrary->path}, {"sha256", cudaLibrary->sha256}, {"arch", cudaLibrary->arch}};
    if (cudaLibrary->gridDependency)
      files["cuda_library"]["grid_dependency"] = true;
  }
  m["files"] = files;
  ojson ks = ojson::array();
  for (const Kernel &k : kernels)
    ks.push_back(artifact::toJson(k));
  m["kernels"] = ks;
  m["entries"] = {{"prefill", entryJson(prefill)}, {"decode", entryJson(decode)}};
  ojson ws = ojson::array();
  for (const WeightBinding &b : weights)
    ws.push_back(bindingJson(b));
  m["weights"] = ws;
  return m;
}

void Manifest::validate(const std::string &dir) const {
  Checker{"artifact '" + dir + "': manifest.json"}.manifest(*this);
}

Manifest Manifest::fromJson(const json &j, const std::string &dir) {
  Checker c{"artifact '" + dir + "': manifest.json"};
  Manifest m;
  if (!j.is_object())
    c.fail("(top level)", "must be an object");
  if (!j.contains("format") || !j["format"].is_string() || j["format"] != "k3c-artifact")
    c.fail("format", "is not \"k3c-artifact\" (not a k3c artifact)");
  const json &fv = c.get(j, "format_version", "(top level)");
  if (!fv.is_number_integer())
    c.fail("format_version", "must be an integer, got " + fv.dump() +
                                 " (built by an incompatible k3c? recompile with this one)");
  m.formatVersion = c.integer(fv, "format_version");
  if (m.formatVersion != kFormatVersion) // before any field a newer format may have changed
    c.manifest(m);
  m.compiler = c.string(c.get(j, "compiler", "(top level)"), "compiler");
  m.target = c.string(c.get(j, "target", "(top level)"), "target");

  const json &files = c.get(j, "files", "(top level)");
  if (!files.is_object() || files.empty())
    c.fail("files", "must name the kernel libraries");
  for (auto &[key, f] : files.items()) {
    if (key != "host_library" && key != "cuda_library")
      c.fail("files." + key, "unknown file role");
    FileEntry fe;
    fe.path = c.string(c.get(f, "path", "files." + key), "files." + key + ".path");
    fe.sha256 = c.string(c.get(f, "sha256", "files." + key), "files." + key + ".sha256");
    if (const json *a = c.opt(f, "arch"))
      fe.arch = c.string(*a, "files." + key + ".arch");
    if (const json *g = c.opt(f, "grid_dependency")) {
      if (key != "cuda_library")
        c.fail("files." + key + ".grid_dependency", "applies to the cuda_library only");
      fe.gridDependency = c.boolean(*g, "files." + key + ".grid_dependency");
    }
    (key == "host_library" ? m.hostLibrary : m.cudaLibrary) = fe;
  }

  const json &model = c.get(j, "model", "(top level)");
  m.model.modelType = c.string(c.get(model, "model_type", "model"), "model.model_type");
  m.model.vocabSize = c.integer(c.get(model, "vocab_size", "model"), "model.vocab_size");
  m.model.hiddenSize = c.integer(c.get(model, "hidden_size", "model"), "model.hidden_size");
  m.model.numLayers = c.integer(c.get(model, "num_layers", "model"), "model.num_layers");
  if (const json *v = c.opt(model, "eos_token_id"))
    m.model.eosTokenId = c.integer(*v, "model.eos_token_id");
  if (const json *v = c.opt(model, "max_position_embeddings"))
    m.model.maxPositionEmbeddings = c.integer(*v, "model.max_position_embeddings");
  if (const json *v = c.opt(model, "activation_dtype"))
    m.model.activationDtype = c.string(*v, "model.activation_dtype");
  if (const json *v = c.opt(model, "weight_prefix"))
    m.model.weightPrefix = c.string(*v, "model.weight_prefix");

  const json &cap = c.get(j, "capacity", "(top level)");
  m.capacity.maxTokens = c.integer(c.get(cap, "max_tokens", "capacity"), "capacity.max_tokens");
  m.capacity.maxSeqs = c.integer(c.get(cap, "max_seqs", "capacity"), "capacity.max_seqs");
  m.capacity.maxContext =
      c.integer(c.get(cap, "max_context", "capacity"), "capacity.max_context");
  if (const json *v = c.opt(cap, "cache_page"))
    m.capacity.cachePage = c.integer(*v, "capacity.cache_page");
  if (const json *v = c.opt(cap, "cache_pages"))
    m.capacity.cachePages = c.integer(*v, "capacity.cache_pages");

  const json &ck = c.object(c.get(j, "checkpoint", "(top level)"), "checkpoint");
  if (const json *p = c.opt(ck, "path"))
    m.checkpoint.path = c.string(*p, "checkpoint.path");
  if (const json *h = c.opt(ck, "sha256")) {
    c.object(*h, "checkpoint.sha256");
    m.checkpoint.hasSha256 = true;
    for (auto &[file, hash] : h->items())
      m.checkpoint.sha256[file] = c.string(hash, "checkpoint.sha256." + file);
  }
  if (const json *f = c.opt(ck, "from_config"))
    m.checkpoint.fromConfig = c.boolean(*f, "checkpoint.from_config");

  const json &ks = c.array(c.get(j, "kernels", "(top level)"), "kernels");
  for (size_t ki = 0; ki < ks.size(); ++ki)
    m.kernels.push_back(readKernel(c, ks[ki], "kernels[" + std::to_string(ki) + "]"));

  const json &entries = c.get(j, "entries", "(top level)");
  m.prefill = readEntry(c, c.get(entries, "prefill", "entries"), "entries.prefill");
  m.decode = readEntry(c, c.get(entries, "decode", "entries"), "entries.decode");

  const json &ws = c.array(c.get(j, "weights", "(top level)"), "weights");
  for (size_t bi = 0; bi < ws.size(); ++bi)
    m.weights.push_back(readBinding(c, ws[bi], "weights[" + std::to_string(bi) + "]"));

  c.manifest(m);
  return m;
}

} // namespace k3c::artifact
