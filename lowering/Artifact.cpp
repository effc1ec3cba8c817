//===- Artifact.cpp - the ahead-of-time artifact: manifest + kernels ------===//
//
// An artifact is a directory (docs/artifact.md):
//   manifest.json      kernels, calling conventions, buffers, the prefill and
//                      decode schedules, state layouts, the weight map,
//                      capacities, content hashes, the compiler version
//   manifest.sha256    the SHA-256 of manifest.json (sha256sum format)
//   kernels_host.so    the host target's kernels (k3k_<name>(void **args),
//                      each with its calling-convention signature k3k_<name>_sig)
//   model.fused.mlir   the fused module the schedules were read from
// Weights stay in the checkpoint, referenced by path and verified by the
// SHA-256 of its config and index/shard headers; the runtime repacks MXFP4
// experts into #k3.mxfp4_layout while loading.
//
//===----------------------------------------------------------------------===//

#include "lowering/Artifact.h"

#include "support/Sha256.h"

#include "dialects/K3/IR/K3Ops.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using namespace mlir;
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace k3c::lowering {


/// Symbolic dims of entry arguments: tokens (T), sequences (N), context (S).
static ojson describeType(Type t, StringRef kind, StringRef name) {
  ojson v;
  if (auto m = dyn_cast<mlir::k3::MXFP4Type>(t)) {
    v["dtype"] = "mxfp4";
    v["shape"] = std::vector<int64_t>(m.getShape().begin(), m.getShape().end());
    if (auto l = m.getLayout())
      v["layout"] = {{"n_tile", l.getNTile()}, {"k_tile", l.getKTile()}};
    return v;
  }
  auto rt = cast<RankedTensorType>(t);
  v["dtype"] = dtypeName(rt.getElementType());
  std::vector<int64_t> shape;
  std::vector<std::string> dims;
  for (auto [i, d] : llvm::enumerate(rt.getShape())) {
    shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    if (!ShapedType::isDynamic(d))
      // The MLA cache's rows are the planned context (capacity.max_context).
      dims.push_back(kind == "state" && name.ends_with("mla_cache") && i == 1 ? "context" : "");
    else if (i == 0)
      dims.push_back(name == "token_ids" ? "tokens" : "seqs");
    else
      dims.push_back("context");
  }
  v["shape"] = shape;
  v["dims"] = dims;
  (void)kind;
  return v;
}

static ojson scheduleOf(func::FuncOp fn) {
  ojson entry;
  llvm::DenseMap<Value, int64_t> id;
  ojson values = ojson::array();
  auto addValue = [&](Value v, ojson desc) {
    id[v] = static_cast<int64_t>(values.size());
    desc["id"] = id[v];
    values.push_back(std::move(desc));
  };
  for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
    ojson d;
    for (StringRef key : {"k3.input", "k3.state", "k3.weight"})
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, key)) {
        d["kind"] = key.drop_front(3).str();
        d["name"] = name.getValue().str();
      }
    ojson t = describeType(arg.getType(), d.value("kind", ""), d.value("name", ""));
    for (auto it = t.begin(); it != t.end(); ++it)
      d[it.key()] = it.value();
    addValue(arg, d);
  }
  ojson launches = ojson::array();
  for (Operation &op : fn.getBody().front()) {
    if (auto k = dyn_cast<mlir::k3::KernelOp>(op)) {
      ojson l;
      l["kernel"] = k.getSymName().str();
      std::vector<int64_t> ins, outs;
      for (Value v : k.getInputs())
        ins.push_back(id.lookup(v));
      auto yield = cast<mlir::k3::YieldOp>(k.getBody().front().getTerminator());
      for (auto [ri, r] : llvm::enumerate(k.getResults())) {
        ojson d;
        d["kind"] = "activation";
        // The residual stream after a layer (for k3-run --check per layer).
        if (Operation *def = yield.getValues()[ri].getDefiningOp())
          if (auto nl = dyn_cast<NameLoc>(def->getLoc())) {
            StringRef n = nl.getName().getValue();
            if (n.ends_with(".ffn_accumulate") || n.ends_with(".ffn_residual"))
              d["trace"] = n.rsplit('.').first.str(); // "layers.N"
          }
        auto rt = cast<RankedTensorType>(r.getType());
        d["dtype"] = dtypeName(rt.getElementType());
        std::vector<int64_t> shape;
        for (int64_t s : rt.getShape())
          shape.push_back(ShapedType::isDynamic(s) ? -1 : s);
        d["shape"] = shape;
        addValue(r, d);
        outs.push_back(id[r]);
      }
      l["inputs"] = ins;
      l["outputs"] = outs;
      launches.push_back(l);
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<int64_t> r;
      for (Value v : ret.getOperands())
        r.push_back(id.lookup(v));
      entry["returns"] = r;
    }
  }
  entry["values"] = values;
  entry["launches"] = launches;
  return entry;
}

nlohmann::ordered_json kernelManifestEntry(const KernelInfo &k) {
  ojson kj;
  kj["name"] = k.name;
  kj["family"] = k.family;
  kj["host_symbol"] = "k3k_" + k.name;
  kj["flops_per_token"] = k.flopsPerToken;
  kj["bytes_per_token"] = k.bytesPerToken;
  kj["weight_bytes"] = k.weightBytes;
  kj["result_aliases"] = k.resultAliases;
  ojson args = ojson::array();
  for (const KernelArg &a : k.args) {
    ojson aj;
    aj["kind"] = a.kind == KernelArg::Kind::Input    ? "input"
                 : a.kind == KernelArg::Kind::Output ? "output"
                                                     : "scratch";
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

std::string kernelSignatureOf(const KernelInfo &k) {
  return ::k3c::rt::kernelSignature(nlohmann::json::parse(kernelManifestEntry(k).dump()));
}

LogicalResult writeArtifact(ModuleOp fused, const std::vector<KernelInfo> &kernels,
                            const ArtifactOptions &o, std::string &error) {
  try {
    fs::create_directories(o.dir);
    ojson m;
    m["format"] = "k3c-artifact";
    m["format_version"] = kArtifactFormatVersion;
    m["compiler"] = std::string("k3c ") + kCompilerVersion;
    m["target"] = o.target;
    m["model"] = {{"model_type", o.config.modelType},
                  {"vocab_size", o.config.vocabSize},
                  {"hidden_size", o.config.hiddenSize},
                  {"num_layers", o.config.numLayers},
                  {"weight_prefix", o.config.weightPrefix},
                  {"eos_token_id", o.config.eosTokenId},
                  {"activation_dtype", o.activationDtype},
                  {"max_position_embeddings", o.config.maxPositions}};
    m["capacity"] = {{"max_tokens", o.maxTokens},
                     {"max_seqs", o.maxSeqs},
                     {"max_context", o.maxContext}};
    ojson ck;
    ck["path"] = o.checkpointDir.empty() ? "" : fs::absolute(o.checkpointDir).string();
    if (!o.checkpointDir.empty()) {
      ojson hashes = ojson::object();
      for (const auto &e : fs::directory_iterator(o.checkpointDir)) {
        std::string f = e.path().filename().string();
        if (f == "config.json" || f == "model.safetensors.index.json")
          hashes[f] = sha256File(e.path().string());
      }
      ck["sha256"] = hashes;
    } else if (!o.config.source.empty() && fs::is_regular_file(o.config.source)) {
      // Compiled ahead of time from config.json alone: the weights come with
      // `k3-run --checkpoint DIR`, whose config.json must be this very file.
      ck["sha256"] = ojson{{"config.json", sha256File(o.config.source)}};
      ck["from_config"] = true;
    }
    m["checkpoint"] = ck;

    ojson files = ojson::object();
    if (!o.hostLibrary.empty()) {
      fs::path lib(o.hostLibrary);
      files["host_library"] = {{"path", lib.filename().string()},
                               {"sha256", sha256File(o.hostLibrary)}};
    }
    if (!o.cudaLibrary.empty()) {
      fs::path lib(o.cudaLibrary);
      files["cuda_library"] = {{"path", lib.filename().string()},
                               {"sha256", sha256File(o.cudaLibrary)},
                               {"arch", "sm_90a"}};
    }
    m["files"] = files;

    ojson ks = ojson::array();
    for (const KernelInfo &k : kernels)
      ks.push_back(kernelManifestEntry(k));
    m["kernels"] = ks;
    ojson entries;
    for (StringRef name : {"prefill", "decode"}) {
      auto fn = fused.lookupSymbol<func::FuncOp>(name);
      if (!fn) {
        error = "the fused module has no @" + name.str() + " entry";
        return failure();
      }
      entries[name.str()] = scheduleOf(fn);
    }
    m["entries"] = entries;
    {
      std::ofstream out(fs::path(o.dir) / "manifest.json");
      out << m.dump(1) << "\n";
      if (!out) {
        error = "cannot write " + (fs::path(o.dir) / "manifest.json").string();
        return failure();
      }
    }
    // manifest.sha256 (sha256sum's format): the runtime refuses a manifest
    // that does not match it.
    std::ofstream hash(fs::path(o.dir) / "manifest.sha256");
    hash << sha256File((fs::path(o.dir) / "manifest.json").string()) << "  manifest.json\n";
    if (!hash) {
      error = "cannot write " + (fs::path(o.dir) / "manifest.sha256").string();
      return failure();
    }
  } catch (const std::exception &e) {
    error = e.what();
    return failure();
  }
  return success();
}

} // namespace k3c::lowering
