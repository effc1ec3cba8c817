//===- ManifestTest.cpp - the artifact manifest's schema (support/) ------===//
//
// Round trip of every struct through JSON, one test per validation error
// (each a single edit of a valid manifest, the error naming the field), the
// kernel signature, and the weight-binding tables models/Weights.h makes for
// the shipped configs.
//
//===----------------------------------------------------------------------===//

#include "models/Config.h"
#include "models/Weights.h"
#include "support/Common.h"
#include "support/Manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

using namespace k3c;
using namespace k3c::artifact;
using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

namespace {

KernelArg arg(const char *kind, int64_t index, std::vector<int64_t> shape,
              std::vector<std::pair<int64_t, int64_t>> dyn) {
  KernelArg a;
  a.kind = kind;
  a.index = index;
  a.dtype = "f32";
  a.shape = std::move(shape);
  a.dynamicFrom = std::move(dyn);
  return a;
}

Value value(int64_t id, const char *kind, const char *name, const char *dtype,
            std::vector<int64_t> shape, std::vector<std::string> dims) {
  Value v;
  v.id = id;
  v.kind = kind;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.dims = std::move(dims);
  return v;
}

/// A small manifest that passes every check: one kernel, an input, an MLA
/// cache, an activation, a bf16 weight and a stacked MXFP4 expert weight.
Manifest valid() {
  Manifest m;
  m.compiler = "k3c test";
  m.target = "host";
  m.model = {"kimi_linear", 16, 8, 1, "language_model.", 2, "bf16", 64};
  m.capacity = {16, 2, 64};
  m.checkpoint.path = "/ckpt";
  m.checkpoint.hasSha256 = true;
  m.checkpoint.sha256["config.json"] = std::string(64, 'a');
  m.hostLibrary = FileEntry{"kernels_host.so", std::string(64, 'b'), ""};
  m.cudaLibrary = FileEntry{"kernels_cuda.so", std::string(64, 'c'), "sm_90a"};
  Kernel k;
  k.name = "k3_add_0";
  k.family = "add";
  k.hostSymbol = "k3k_k3_add_0";
  k.flopsPerToken = 8;
  k.resultAliases = {-1};
  k.args = {arg("input", 0, {-1, 8}, {{0, 0}}), arg("output", 0, {-1, 8}, {{0, 0}}),
            arg("scratch", -1, {-1, 8}, {{0, 0}})};
  k.args[2].deviceOnly = true;
  m.kernels.push_back(k);
  Entry e;
  e.values = {value(0, "input", "x", "f32", {-1, 8}, {"tokens", ""}),
              value(1, "state", "layers.0.mla_cache", "bf16", {-1, 64, 8}, {"seqs", "context", ""}),
              value(2, "activation", "", "f32", {-1, 8}, {}),
              value(3, "weight", "w", "bf16", {8, 8}, {"", ""}),
              value(4, "weight", "experts.w1", "mxfp4", {4, 16, 64}, {})};
  e.values[2].trace = "layers.0";
  e.values[4].layout = Mxfp4Layout{8, 64};
  e.launches = {{"k3_add_0", {0}, {2}}};
  e.returns = {2};
  m.prefill = e;
  m.decode = e;
  WeightBinding w;
  w.name = "w";
  w.transform = "convert";
  w.dtype = "bf16";
  w.shape = {8, 8};
  w.sources = {{"language_model.w.weight", {"bf16", "f32"}, {{8, 8}}}};
  m.weights.push_back(w);
  WeightBinding x;
  x.name = "experts.w1";
  x.transform = "mxfp4_stack";
  x.dtype = "mxfp4";
  x.shape = {4, 16, 64};
  x.layout = Mxfp4Layout{8, 64};
  x.shard = "experts";
  x.sources = {{"experts.{expert}.w1.weight_packed", {"u8"}, {{16, 32}}},
               {"experts.{expert}.w1.weight_scale", {"u8"}, {{16, 2}}}};
  m.weights.push_back(x);
  return m;
}

/// The error fromJson gives for `valid()` with one edit of its JSON.
std::string errorOf(const std::function<void(json &)> &edit) {
  json j = json::parse(valid().toJson().dump());
  edit(j);
  try {
    Manifest::fromJson(j, "A");
  } catch (const Error &e) {
    return e.what();
  }
  return "(accepted)";
}

} // namespace

TEST(Manifest, RoundTrip) {
  Manifest m = valid();
  ASSERT_NO_THROW(m.validate("A"));
  ojson once = m.toJson();
  Manifest back = Manifest::fromJson(json::parse(once.dump()), "A");
  EXPECT_EQ(back.toJson().dump(), once.dump());
  EXPECT_EQ(back.formatVersion, kFormatVersion);
  EXPECT_EQ(back.model.weightPrefix, "language_model.");
  EXPECT_EQ(back.capacity.maxContext, 64);
  EXPECT_EQ(back.checkpoint.sha256.at("config.json"), std::string(64, 'a'));
  ASSERT_TRUE(back.cudaLibrary);
  EXPECT_EQ(back.cudaLibrary->arch, "sm_90a");
  EXPECT_FALSE(back.cudaLibrary->gridDependency); // absent: plain launches
  Manifest pdl = m;
  pdl.cudaLibrary->gridDependency = true;
  ojson pdlJson = pdl.toJson();
  EXPECT_EQ(pdlJson["files"]["cuda_library"]["grid_dependency"], true);
  EXPECT_TRUE(Manifest::fromJson(json::parse(pdlJson.dump()), "A").cudaLibrary->gridDependency);
  ASSERT_EQ(back.kernels.size(), 1u);
  EXPECT_TRUE(back.kernels[0].args[2].deviceOnly);
  EXPECT_EQ(back.kernels[0].args[1].dynamicFrom, (std::vector<std::pair<int64_t, int64_t>>{{0, 0}}));
  EXPECT_EQ(back.prefill.values[2].trace, "layers.0");
  ASSERT_TRUE(back.prefill.values[4].layout);
  EXPECT_EQ(back.prefill.values[4].layout->kTile, 64);
  ASSERT_EQ(back.weights.size(), 2u);
  EXPECT_EQ(back.weights[1].shard, "experts");
  EXPECT_EQ(back.weights[1].sources[1].shapes, (std::vector<std::vector<int64_t>>{{16, 2}}));
  EXPECT_EQ(kernelSignature(back.kernels[0]), kernelSignature(m.kernels[0]));
}

TEST(Manifest, KernelSignature) {
  Kernel k = valid().kernels[0];
  EXPECT_EQ(kernelSignature(k), "k3c-sig-1;input:0:f32:[-1,8,]<0.0,;output:0:f32:[-1,8,]<0.0,;"
                                "scratch:-1:f32:[-1,8,]<0.0,@dev;aliases:-1,");
  Kernel halved = k;
  halved.args[2].shape[1] = 4;
  EXPECT_NE(kernelSignature(halved), kernelSignature(k));
}

struct Case {
  const char *what;
  std::function<void(json &)> edit;
  const char *message;
};

TEST(Manifest, EveryCheckNamesTheField) {
  auto pre = [](json &j) -> json & { return j["entries"]["prefill"]; };
  auto kern = [](json &j) -> json & { return j["kernels"][0]; };
  const std::vector<Case> cases = {
      {"not an object", [](json &j) { j = json::array(); }, "(top level): must be an object"},
      {"format", [](json &j) { j["format"] = "zip"; }, "format: is not \"k3c-artifact\""},
      {"version float", [](json &j) { j["format_version"] = 1.5; },
       "format_version: must be an integer, got 1.5 (built by an incompatible k3c?"},
      {"version other", [](json &j) { j["format_version"] = 1; },
       "artifact 'A' has format version 1; this k3c reads version 5 (built by an incompatible k3c"},
      {"missing field", [](json &j) { j.erase("capacity"); }, "(top level).capacity: missing"},
      {"string type", [](json &j) { j["target"] = 3; }, "target: must be a string, got 3"},
      {"no files", [](json &j) { j["files"] = json::object(); },
       "files: must name the kernel libraries"},
      {"file role", [](json &j) { j["files"]["other"] = j["files"]["host_library"]; },
       "files.other: unknown file role"},
      {"lib outside", [](json &j) { j["files"]["host_library"]["path"] = "a/../../k.so"; },
       "files.host_library.path: 'a/../../k.so' leaves the directory"},
      {"lib absolute", [](json &j) { j["files"]["cuda_library"]["path"] = "/etc/passwd"; },
       "files.cuda_library.path: '/etc/passwd' must be a relative path inside the directory"},
      {"lib hash", [](json &j) { j["files"]["host_library"]["sha256"] = "abc"; },
       "files.host_library.sha256: is not a SHA-256"},
      {"ckpt outside", [](json &j) { j["checkpoint"]["sha256"]["../x"] = std::string(64, '0'); },
       "checkpoint.sha256 entry: '../x' leaves the directory"},
      {"grid_dependency type", [](json &j) { j["files"]["cuda_library"]["grid_dependency"] = 1; },
       "files.cuda_library.grid_dependency: must be a boolean"},
      {"grid_dependency host",
       [](json &j) { j["files"]["host_library"]["grid_dependency"] = true; },
       "files.host_library.grid_dependency: applies to the cuda_library only"},
      {"from_config", [](json &j) { j["checkpoint"]["from_config"] = "yes"; },
       "checkpoint.from_config: must be a boolean"},
      {"vocab", [](json &j) { j["model"]["vocab_size"] = 0; },
       "model.vocab_size: 0 is outside [1, 16777216]"},
      {"eos", [](json &j) { j["model"]["eos_token_id"] = 16; },
       "model.eos_token_id: 16 is outside [-1, 15]"},
      {"activation dtype", [](json &j) { j["model"]["activation_dtype"] = "f64"; },
       "model.activation_dtype: must be bf16 or f32, got 'f64'"},
      {"huge capacity", [](json &j) { j["capacity"]["max_tokens"] = uint64_t(1) << 61; },
       "capacity.max_tokens: 2305843009213693952 is outside [1, 16777216]"},
      {"unsigned overflow", [](json &j) { j["capacity"]["max_seqs"] = uint64_t(1) << 63; },
       "capacity.max_seqs: 9223372036854775807 is outside [1, 65536]"},
      {"seqs > tokens", [](json &j) { j["capacity"]["max_seqs"] = 32; },
       "capacity: max_seqs 32 > max_tokens 16"},
      {"duplicate kernel", [&](json &j) { j["kernels"].push_back(kern(j)); },
       "kernel k3_add_0: defined twice"},
      {"symbol", [&](json &j) { kern(j)["host_symbol"] = "system"; },
       "kernel k3_add_0.host_symbol: 'system' is not a k3k_ kernel symbol"},
      {"arg dtype", [&](json &j) { kern(j)["args"][0]["dtype"] = "f128"; },
       "kernel k3_add_0.args[0].dtype: unknown dtype 'f128'"},
      {"arg kind", [&](json &j) { kern(j)["args"][0]["kind"] = "inout"; },
       "kernel k3_add_0.args[0].kind: must be input, output or scratch, got 'inout'"},
      {"rank", [&](json &j) { kern(j)["args"][0]["shape"] = std::vector<int>(9, 1); },
       "kernel k3_add_0.args[0].shape: rank 9 > 8"},
      {"component", [&](json &j) { kern(j)["args"][0]["component"] = "bits"; },
       "kernel k3_add_0.args[0].component: must be payload or scales"},
      {"device_only", [&](json &j) { kern(j)["args"][0]["device_only"] = true; },
       "kernel k3_add_0.args[0].device_only: must be a boolean, on a scratch argument"},
      {"dynamic_from count", [&](json &j) { kern(j)["args"][0]["dynamic_from"] = json::array(); },
       "kernel k3_add_0.args[0].dynamic_from: has 0 entries for 1 dynamic dimensions"},
      {"dynamic_from later", [&](json &j) { kern(j)["args"][1]["dynamic_from"][0][0] = 2; },
       "kernel k3_add_0.args[1].dynamic_from[0]: refers to a later argument"},
      {"dynamic_from dim", [&](json &j) { kern(j)["args"][1]["dynamic_from"][0][1] = 2; },
       "kernel k3_add_0.args[1].dynamic_from[0][1]: 2 is outside [0, 1]"},
      {"alias", [&](json &j) { kern(j)["result_aliases"][0] = 99; },
       "kernel k3_add_0.result_aliases[0]: 99 is outside [-1, 0]"},
      {"result without output", [&](json &j) { kern(j)["result_aliases"].push_back(-1); },
       "kernel k3_add_0.result_aliases: result 1 has neither an output argument nor an alias"},
      {"value id", [&](json &j) { pre(j)["values"][2]["id"] = 7; },
       "entries.prefill.values[2].id: must equal the value's position 2"},
      {"value kind", [&](json &j) { pre(j)["values"][2]["kind"] = "constant"; },
       "entries.prefill.values[2].kind: unknown kind 'constant'"},
      {"unnamed", [&](json &j) { pre(j)["values"][0].erase("name"); },
       "entries.prefill.values[0]: a input needs a name"},
      {"mxfp4 activation", [&](json &j) { pre(j)["values"][2]["dtype"] = "mxfp4"; },
       "entries.prefill.values[2].dtype: mxfp4 is for weights only"},
      {"dims", [&](json &j) { pre(j)["values"][0]["dims"][1] = "heads"; },
       "entries.prefill.values[0].dims[1]: unknown dimension 'heads'"},
      {"context", [](json &j) { j["capacity"]["max_context"] = 1024; },
       "entries.prefill.values[1].shape[1]: the compiled context of 64 differs from "
       "capacity.max_context 1024"},
      {"buffer bound", [&](json &j) { pre(j)["values"][1]["shape"][2] = int64_t(1) << 40; },
       "entries.prefill.values[1].shape: a buffer of this shape at the artifact's capacity "
       "exceeds 64 TiB"},
      {"layout", [&](json &j) { pre(j)["values"][4]["layout"]["k_tile"] = 48; },
       "entries.prefill.values[4].layout.k_tile: must be 32, 64 or 128, got 48"},
      {"unknown kernel", [&](json &j) { pre(j)["launches"][0]["kernel"] = "k3_nope"; },
       "entries.prefill.launches[0].kernel: unknown kernel 'k3_nope'"},
      {"input index", [&](json &j) { pre(j)["launches"][0]["inputs"][0] = 99999; },
       "entries.prefill.launches[0].inputs[0]: 99999 is outside [0, 4]"},
      {"arity", [&](json &j) { pre(j)["launches"][0]["inputs"].push_back(0); },
       "entries.prefill.launches[0]: passes 2 inputs and 1 outputs to k3_add_0, which takes 1 and 1"},
      {"transposed value", [&](json &j) { pre(j)["launches"][0]["inputs"][0] = 1; },
       "entries.prefill.launches[0]: value 1 of shape [-1,64,8] passed as input 0 of k3_add_0, "
       "which takes [-1,8]"},
      {"read before write", [&](json &j) { pre(j)["launches"][0]["inputs"][0] = 2; },
       "entries.prefill.launches[0].inputs: reads value 2 before any launch writes it"},
      {"writes a weight", [&](json &j) { pre(j)["launches"][0]["outputs"][0] = 3; },
       "entries.prefill.launches[0].outputs: writes the weight value 3"},
      {"written twice", [&](json &j) { pre(j)["launches"].push_back(pre(j)["launches"][0]); },
       "entries.prefill.launches[1].outputs: writes value 2 a second time"},
      {"no returns", [&](json &j) { pre(j)["returns"] = json::array(); },
       "entries.prefill.returns: is empty"},
      {"never written", [&](json &j) { pre(j)["launches"] = json::array(); },
       "entries.prefill.returns: value 2 is never written"},
      {"unbound weight", [](json &j) { j["weights"].erase(0); },
       "entries.prefill.values[3]: weight 'w' has no entry in the weight-binding table (weights)"},
      {"binding shape", [](json &j) {
         j["weights"][0]["shape"] = {4, 16};
         j["weights"][0]["sources"][0]["shapes"][0] = {4, 16};
       },
       "entries.prefill.values[3]: weight 'w' is bf16 [8, 8]; its binding makes bf16 [4, 16]"},
      {"binding layout", [](json &j) { j["weights"][1].erase("layout"); },
       "entries.prefill.values[4]: weight 'experts.w1' has another MXFP4 layout than its binding"},
      {"bound twice", [](json &j) { j["weights"].push_back(j["weights"][0]); },
       "weights[2]: 'w' is bound twice"},
      {"unused binding", [](json &j) {
         j["weights"].push_back(j["weights"][0]);
         j["weights"][2]["name"] = "v";
       },
       "weights[2]: 'v' is not a weight of either entry"},
      {"transform", [](json &j) { j["weights"][0]["transform"] = "transpose"; },
       "weights[0].transform: unknown transform 'transpose' (convert, flatten, stack, mxfp4_stack)"},
      {"source count", [](json &j) { j["weights"][1]["sources"].erase(1); },
       "weights[1].sources: a mxfp4_stack binding reads 2 tensor(s), got 1"},
      {"shard", [](json &j) { j["weights"][0]["shard"] = "experts"; },
       "weights[0].shard: only a stacked binding is sharded by expert"},
      {"transposed source", [](json &j) { j["weights"][1]["sources"][1]["shapes"][0] = {2, 16}; },
       "weights[1].sources[1].shapes[0]: [2, 16] does not make the mxfp4_stack weight [4, 16, 64] "
       "(expected [16, 2])"},
      {"no {expert}", [](json &j) { j["weights"][1]["sources"][0]["tensor"] = "experts.0.w1"; },
       "weights[1].sources[0].tensor: 'experts.0.w1' must hold {expert} once"},
      {"{expert} unstacked", [](json &j) { j["weights"][0]["sources"][0]["tensor"] = "w.{expert}"; },
       "weights[0].sources[0].tensor: 'w.{expert}' holds {expert} but the binding is not stacked"},
      {"source dtype", [](json &j) { j["weights"][0]["sources"][0]["dtypes"] = {"u8"}; },
       "weights[0].sources[0].dtypes: 'u8' is not a checkpoint dtype this transform reads"},
      {"weight dtype", [](json &j) {
         j["weights"][0]["dtype"] = "i32";
       },
       "weights[0].dtype: a convert binding makes a bf16 or f32 weight, not 'i32'"},
      {"source shapes", [](json &j) { j["weights"][0]["sources"][0]["shapes"] = json::array(); },
       "weights[0].sources[0].shapes: is empty"},
      {"source dims", [](json &j) { j["weights"][0]["sources"][0]["shapes"][0] = {0, 8}; },
       "weights[0].sources[0].shapes[0][0]: 0 is outside [1, 1099511627776]"},
      {"two shapes", [](json &j) { j["weights"][0]["sources"][0]["shapes"].push_back({8, 8}); },
       "weights[0].sources[0].shapes: a convert binding accepts one shape"},
  };
  for (const Case &c : cases) {
    std::string err = errorOf(c.edit);
    EXPECT_NE(err.find(c.message), std::string::npos)
        << c.what << ": got \"" << err << "\", want \"" << c.message << "\"";
    if (std::string(c.what) != "version other") {
      EXPECT_EQ(err.rfind("artifact 'A': manifest.json: ", 0), 0u) << c.what << ": " << err;
    }
  }
}

TEST(Manifest, WriterChecksToo) {
  Manifest m = valid();
  m.weights[0].sources[0].shapes = {{8, 4}};
  try {
    m.validate("OUT");
    FAIL() << "accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("artifact 'OUT': manifest.json: weights[0].sources[0]"
                                         ".shapes[0]: [8, 4] does not make the convert weight"),
              std::string::npos)
        << e.what();
  }
}

/// The bindings models/Weights.h makes: one per IR weight argument, every
/// checkpoint tensor of the config read by exactly one of them.
TEST(Manifest, BindingTablesOfShippedConfigs) {
  for (const char *name : {"k3-tiny.json", "k3.json", "kimi-linear-48b-a3b.json"}) {
    SCOPED_TRACE(name);
    ModelConfig c = loadConfig(std::string(K3C_SOURCE_DIR) + "/models/configs/" + name);
    std::vector<WeightBinding> table = weightBindings(c);
    std::set<std::string> tensors;
    for (const WeightBinding &b : table)
      for (const WeightSource &s : b.sources) {
        if (b.transform == "stack" || b.transform == "mxfp4_stack") {
          EXPECT_EQ(b.shard, "experts");
          EXPECT_EQ(b.shape[0], c.numExperts);
          for (int64_t e = 0; e < c.numExperts; ++e) {
            std::string t = s.tensor;
            t.replace(t.find("{expert}"), 8, std::to_string(e));
            EXPECT_TRUE(tensors.insert(t).second) << t;
          }
        } else {
          EXPECT_TRUE(tensors.insert(s.tensor).second) << s.tensor;
        }
      }
    std::set<std::string> expected;
    for (const WeightSpec &s : expectedWeights(c))
      expected.insert(c.weightPrefix + s.name);
    EXPECT_EQ(tensors, expected);
    // The table passes the schema's binding checks (in a manifest whose
    // entries hold each weight once).
    Manifest m = valid();
    m.weights = table;
    m.prefill.values.resize(2);
    m.prefill.launches.clear();
    m.prefill.returns = {0};
    m.prefill.values[1].dims = {"seqs", "context", ""};
    for (const WeightBinding &b : table) {
      Value v = value(static_cast<int64_t>(m.prefill.values.size()), "weight", "", "", {}, {});
      v.name = b.name;
      v.dtype = b.dtype;
      v.shape = b.shape;
      if (b.dtype == "mxfp4")
        v.layout = Mxfp4Layout{8, b.shape[2] % 128 == 0 ? 128 : 32};
      m.prefill.values.push_back(v);
    }
    for (WeightBinding &b : m.weights)
      if (b.dtype == "mxfp4")
        b.layout = Mxfp4Layout{8, b.shape[2] % 128 == 0 ? 128 : 32};
    m.decode = m.prefill;
    m.model.vocabSize = c.vocabSize;
    m.model.eosTokenId = -1;
    EXPECT_NO_THROW(m.validate("T"));
  }
}

TEST(Manifest, KimiLinearAlogIsFlattened) {
  ModelConfig c =
      loadConfig(std::string(K3C_SOURCE_DIR) + "/models/configs/kimi-linear-48b-a3b.json");
  for (const WeightBinding &b : weightBindings(c))
    if (b.name.size() > 5 && b.name.compare(b.name.size() - 5, 5, "A_log") == 0) {
      EXPECT_EQ(b.transform, "flatten");
      EXPECT_GE(b.sources[0].shapes.size(), 2u);
      return;
    }
  FAIL() << "no A_log binding";
}
