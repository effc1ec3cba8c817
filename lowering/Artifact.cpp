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
// SHA-256 of its config and index; the manifest's weight-binding table names
// each weight's checkpoint tensors, their shapes and dtypes and the transform
// (conversion, stacking of experts, MXFP4 repack into #k3.mxfp4_layout) that
// the runtime applies while loading. The schema is support/Manifest.h, shared
// with the runtime.
//
//===----------------------------------------------------------------------===//

#include "lowering/Artifact.h"
#include "lowering/TargetInfo.h"

#include "models/Weights.h"
#include "support/Sha256.h"

#include "dialects/K3/IR/K3Ops.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <filesystem>
#include <fstream>
#include <map>

using namespace mlir;
namespace fs = std::filesystem;

namespace k3c::lowering {


/// A value's type: dtype, shape (-1 dynamic) and, for entry arguments, the
/// symbolic dims: tokens (T), sequences (N), context (S), and for a paged MLA
/// cache (`paged`: the entry takes a block table) its pool's pages.
static void describeType(Type t, artifact::Value &v, bool withDims, bool paged = false) {
  if (auto m = dyn_cast<mlir::k3::MXFP4Type>(t)) {
    v.dtype = "mxfp4";
    v.shape.assign(m.getShape().begin(), m.getShape().end());
    if (auto l = m.getLayout())
      v.layout = artifact::Mxfp4Layout{l.getNTile(), l.getKTile()};
    return;
  }
  auto rt = cast<RankedTensorType>(t);
  v.dtype = dtypeName(rt.getElementType());
  for (auto [i, d] : llvm::enumerate(rt.getShape())) {
    v.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    if (!withDims)
      continue;
    if (!ShapedType::isDynamic(d))
      // The MLA cache's rows are the planned context (capacity.max_context).
      v.dims.push_back(!paged && v.kind == "state" && StringRef(v.name).ends_with("mla_cache") &&
                               i == 1
                           ? "context"
                           : "");
    else if (i == 0)
      v.dims.push_back(v.name == "token_ids"                                    ? "tokens"
                       : paged && v.kind == "state" &&
                               StringRef(v.name).ends_with("mla_cache") ? "pages"
                                                                        : "seqs");
    else
      v.dims.push_back("context");
  }
}

/// The rows of a value with a dynamic leading dimension: "seqs" where they
/// are one a sequence (k3.last_tokens, and the row-wise ops that follow it:
/// the final norm and lm_head, a linear), else "tokens". Inside a kernel, a block
/// argument takes the class of the kernel input it stands for (`outer`).
/// Only these ops keep a sequence's rows; anything else is "tokens", the
/// larger of the two, so an activation is never sized below its rows (the
/// runtime checks that too, at every launch).
static StringRef rowClass(Value v, const llvm::DenseMap<Value, StringRef> &outer) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (auto k = dyn_cast<mlir::k3::KernelOp>(arg.getOwner()->getParentOp()))
      return outer.lookup(k.getInputs()[arg.getArgNumber()]) == "seqs" ? "seqs" : "tokens";
    return outer.lookup(v) == "seqs" ? "seqs" : "tokens";
  }
  Operation *def = v.getDefiningOp();
  if (isa<mlir::k3::LastTokensOp>(def))
    return "seqs";
  if (isa<mlir::k3::RMSNormOp, mlir::k3::LmHeadOp, mlir::k3::LinearOp>(def))
    return rowClass(def->getOperand(0), outer);
  return "tokens";
}

static void scheduleOf(func::FuncOp fn, artifact::Entry &entry) {
  llvm::DenseMap<Value, int64_t> id;
  llvm::DenseMap<Value, StringRef> rows; // dynamic leading dims: "seqs" / "tokens"
  auto addValue = [&](Value v, artifact::Value desc) {
    id[v] = desc.id = static_cast<int64_t>(entry.values.size());
    entry.values.push_back(std::move(desc));
  };
  bool paged = false;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto name = fn.getArgAttrOfType<StringAttr>(i, "k3.input"))
      paged |= name.getValue() == "block_table";
  for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
    artifact::Value d;
    for (StringRef key : {"k3.input", "k3.state", "k3.weight"})
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, key)) {
        d.kind = key.drop_front(3).str();
        d.name = name.getValue().str();
      }
    describeType(arg.getType(), d, /*withDims=*/true, paged);
    if (!d.dims.empty() && (d.dims[0] == "seqs" || d.dims[0] == "tokens"))
      rows[arg] = d.dims[0] == "seqs" ? "seqs" : "tokens";
    addValue(arg, std::move(d));
  }
  for (Operation &op : fn.getBody().front()) {
    if (auto k = dyn_cast<mlir::k3::KernelOp>(op)) {
      artifact::Launch l;
      l.kernel = k.getSymName().str();
      for (Value v : k.getInputs())
        l.inputs.push_back(id.lookup(v));
      auto yield = cast<mlir::k3::YieldOp>(k.getBody().front().getTerminator());
      for (auto [ri, r] : llvm::enumerate(k.getResults())) {
        artifact::Value d;
        // The residual stream after a layer (for k3-run --check per layer).
        if (Operation *def = yield.getValues()[ri].getDefiningOp())
          if (auto nl = dyn_cast<NameLoc>(def->getLoc())) {
            StringRef n = nl.getName().getValue();
            if (n.ends_with(".ffn_accumulate") || n.ends_with(".ffn_residual"))
              d.trace = n.rsplit('.').first.str(); // "layers.N"
          }
        describeType(r.getType(), d, /*withDims=*/false);
        // A per-sequence leading dimension is named, so the buffer is sized
        // by capacity.max_seqs (the logits: [seqs, vocab] f32, not
        // [max_tokens, vocab]); others keep the token capacity.
        if (!d.shape.empty() && d.shape[0] < 0) {
          StringRef cls = rowClass(yield.getValues()[ri], rows);
          rows[r] = cls;
          if (cls == "seqs") {
            d.dims.assign(d.shape.size(), "");
            d.dims[0] = "seqs";
          }
        }
        addValue(r, std::move(d));
        l.outputs.push_back(id[r]);
      }
      entry.launches.push_back(std::move(l));
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        entry.returns.push_back(id.lookup(v));
    }
  }
}

artifact::Kernel kernelManifestEntry(const KernelInfo &k) {
  artifact::Kernel out;
  out.name = k.name;
  out.family = k.family;
  out.hostSymbol = "k3k_" + k.name;
  out.flopsPerToken = k.flopsPerToken;
  out.bytesPerToken = k.bytesPerToken;
  out.weightBytes = k.weightBytes;
  out.resultAliases = k.resultAliases;
  for (const KernelArg &a : k.args) {
    artifact::KernelArg aj;
    aj.kind = a.kind == KernelArg::Kind::Input    ? "input"
              : a.kind == KernelArg::Kind::Output ? "output"
                                                  : "scratch";
    aj.index = a.index;
    aj.component = a.component >= 0 ? (a.component == 0 ? 0 : 1) : -1;
    aj.dtype = a.dtype;
    aj.shape = a.shape;
    aj.dynamicFrom.assign(a.dynamicFrom.begin(), a.dynamicFrom.end());
    aj.deviceOnly = a.deviceOnly;
    out.args.push_back(std::move(aj));
  }
  return out;
}

std::string kernelSignatureOf(const KernelInfo &k) {
  return artifact::kernelSignature(kernelManifestEntry(k));
}

/// The binding table: the model's bindings (models/Weights.h) for the weight
/// arguments of the prefill entry, with the dtype, shape and MXFP4 layout the
/// compiled IR gives them.
static LogicalResult bindWeights(artifact::Manifest &m, const ModelConfig &config,
                                 std::string &error) {
  std::map<std::string, artifact::WeightBinding> byName;
  for (artifact::WeightBinding &b : weightBindings(config))
    byName[b.name] = std::move(b);
  for (const artifact::Value &v : m.prefill.values) {
    if (v.kind != "weight")
      continue;
    auto it = byName.find(v.name);
    if (it == byName.end()) {
      error = "weight argument '" + v.name + "' has no checkpoint binding for model type '" +
              config.modelType + "'";
      return failure();
    }
    artifact::WeightBinding b = std::move(it->second);
    byName.erase(it);
    b.dtype = v.dtype;
    b.shape = v.shape;
    b.layout = v.layout;
    m.weights.push_back(std::move(b));
  }
  return success();
}

LogicalResult writeArtifact(ModuleOp fused, const std::vector<KernelInfo> &kernels,
                            const ArtifactOptions &o, std::string &error) {
  try {
    fs::create_directories(o.dir);
    artifact::Manifest m;
    m.compiler = std::string("k3c ") + kCompilerVersion;
    m.target = o.target;
    m.model.modelType = o.config.modelType;
    m.model.vocabSize = o.config.vocabSize;
    m.model.hiddenSize = o.config.hiddenSize;
    m.model.numLayers = o.config.numLayers;
    m.model.weightPrefix = o.config.weightPrefix;
    m.model.eosTokenId = o.config.eosTokenId;
    m.model.activationDtype = o.activationDtype;
    m.model.maxPositionEmbeddings = o.config.maxPositions;
    m.capacity = {o.maxTokens, o.maxSeqs, o.maxContext};
    artifact::CheckpointRef &ck = m.checkpoint;
    ck.path = o.checkpointDir.empty() ? "" : fs::absolute(o.checkpointDir).string();
    if (!o.checkpointDir.empty()) {
      ck.hasSha256 = true;
      for (const auto &e : fs::directory_iterator(o.checkpointDir)) {
        std::string f = e.path().filename().string();
        if (f == "config.json" || f == "model.safetensors.index.json")
          ck.sha256[f] = sha256File(e.path().string());
      }
    } else if (!o.config.source.empty() && fs::is_regular_file(o.config.source)) {
      // Compiled ahead of time from config.json alone: the weights come with
      // `k3-run --checkpoint DIR`, whose config.json must be this very file.
      ck.hasSha256 = true;
      ck.sha256["config.json"] = sha256File(o.config.source);
      ck.fromConfig = true;
    }
    if (!o.hostLibrary.empty())
      m.hostLibrary = artifact::FileEntry{fs::path(o.hostLibrary).filename().string(),
                                          sha256File(o.hostLibrary), ""};
    if (!o.cudaLibrary.empty())
      m.cudaLibrary = artifact::FileEntry{
          fs::path(o.cudaLibrary).filename().string(), sha256File(o.cudaLibrary), "sm_90a",
          /*gridDependency=*/TargetInfo::get(Target::Gpu).gridDependencyControl()};
    for (const KernelInfo &k : kernels)
      m.kernels.push_back(kernelManifestEntry(k));
    for (auto [name, entry] : {std::pair<StringRef, artifact::Entry *>{"prefill", &m.prefill},
                               {"decode", &m.decode}}) {
      auto fn = fused.lookupSymbol<func::FuncOp>(name);
      if (!fn) {
        error = "the fused module has no @" + name.str() + " entry";
        return failure();
      }
      scheduleOf(fn, *entry);
    }
    if (failed(bindWeights(m, o.config, error)))
      return failure();
    // A paged MLA cache: the page size is the pools' dim 1; the default pool
    // holds every sequence's whole context (--cache-tokens sizes it) plus the
    // runtime's zero page.
    for (const artifact::Value &v : m.prefill.values)
      if (v.kind == "state" && !v.dims.empty() && v.dims[0] == "pages")
        m.capacity.cachePage = v.shape[1];
    if (m.capacity.cachePage) {
      const int64_t P = m.capacity.cachePage, perSeq = (o.maxContext + P - 1) / P;
      m.capacity.cachePages =
          (o.cacheTokens > 0 ? (o.cacheTokens + P - 1) / P : o.maxSeqs * perSeq) + 1;
    }
    // The runtime's checks, here: k3-compile never writes a manifest that
    // its runtime refuses.
    m.validate(o.dir);
    {
      std::ofstream out(fs::path(o.dir) / "manifest.json");
      out << m.toJson().dump(1) << "\n";
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
