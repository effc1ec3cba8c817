//===- Pipelines.cpp - the k3c pipeline and the cost model -----------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::k3;

void mlir::k3::buildK3Pipeline(OpPassManager &pm, const PipelineOptions &o) {
  pm.addPass(createK3DecomposeLayersPass());
  K3KdaTilingLegalityPassOptions tiling;
  tiling.chunkSize = o.chunkSize;
  tiling.gammaType = o.gammaType;
  pm.addPass(createK3KdaTilingLegalityPass(tiling));
  pm.addPass(createK3MXFP4LayoutPass());
  if (o.splitL2Norms)
    pm.addPass(createK3SplitL2NormsPass());
  K3FuseKernelsPassOptions fuse;
  fuse.report = o.report;
  fuse.kdaNormInChunk = o.kdaNormInChunk;
  fuse.kdaOutNormInChunk = o.kdaOutNormInChunk;
  fuse.kdaGateInChunk = o.kdaGateInChunk;
  pm.addPass(createK3FuseKernelsPass(fuse));
}

namespace {
struct CLPipelineOptions : PassPipelineOptions<CLPipelineOptions> {
  Option<int64_t> chunkSize{*this, "chunk-size",
                            llvm::cl::desc("Force the KDA chunk size (0: choose)"),
                            llvm::cl::init(0)};
  Option<std::string> gammaType{*this, "gamma-type",
                                llvm::cl::desc("Dtype holding Γ: bf16, f16, f32"),
                                llvm::cl::init("bf16")};
  Option<bool> report{*this, "report", llvm::cl::desc("Remark per fused kernel"),
                      llvm::cl::init(false)};
  Option<bool> kdaNormInChunk{
      *this, "kda-norm-in-chunk",
      llvm::cl::desc("KDA's q/k L2 norms in the delta rule's kernel (k3-fuse-kernels)"),
      llvm::cl::init(false)};
  Option<bool> kdaOutNormInChunk{
      *this, "kda-out-norm-in-chunk",
      llvm::cl::desc("KDA's gated output norm in the delta rule's kernel (k3-fuse-kernels)"),
      llvm::cl::init(false)};
  Option<bool> kdaGateInChunk{
      *this, "kda-gate-in-chunk",
      llvm::cl::desc("KDA's gate in the delta rule's kernel (k3-fuse-kernels)"),
      llvm::cl::init(false)};
  Option<bool> splitL2Norms{
      *this, "split-l2norms",
      llvm::cl::desc("Split KDA's widening q/k L2 norms before the fusion (k3-split-l2norms)"),
      llvm::cl::init(false)};
};
} // namespace

void mlir::k3::registerK3Pipelines() {
  PassPipelineRegistration<CLPipelineOptions>(
      "k3-pipeline",
      "The k3c pipeline: decompose layers, KDA tiling legality, MXFP4 layout, kernel fusion",
      [](OpPassManager &pm, const CLPipelineOptions &o) {
        PipelineOptions opts;
        opts.chunkSize = o.chunkSize;
        opts.gammaType = o.gammaType;
        opts.report = o.report;
        opts.kdaNormInChunk = o.kdaNormInChunk;
        opts.kdaOutNormInChunk = o.kdaOutNormInChunk;
        opts.kdaGateInChunk = o.kdaGateInChunk;
        opts.splitL2Norms = o.splitL2Norms;
        buildK3Pipeline(pm, opts);
      });
}

//===----------------------------------------------------------------------===//
// Cost model (estimates for the fusion report).
//===----------------------------------------------------------------------===//

static int64_t eltBytes(Type t) {
  if (auto m = dyn_cast<MXFP4Type>(t))
    return 0; // handled by valueStaticBytes
  Type e = getElementTypeOrSelf(t);
  return std::max<int64_t>(1, e.getIntOrFloatBitWidth() / 8);
}

int64_t mlir::k3::valueBytesPerToken(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || rt.getRank() == 0 || !ShapedType::isDynamic(rt.getDimSize(0)))
    return 0;
  // Per-sequence state ([N, ...] with dynamic N) is also charged per token:
  // decode reads and writes it once per generated token.
  int64_t n = eltBytes(t);
  for (int64_t d : rt.getShape().drop_front())
    n *= ShapedType::isDynamic(d) ? 1 : d;
  return n;
}

int64_t mlir::k3::valueStaticBytes(Type t) {
  if (auto m = dyn_cast<MXFP4Type>(t))
    return m.getStorageBytes();
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || !rt.hasStaticShape())
    return 0;
  return rt.getNumElements() * eltBytes(t);
}

static int64_t dim(Value v, unsigned i) {
  if (auto t = dyn_cast<RankedTensorType>(v.getType()))
    return ShapedType::isDynamic(t.getDimSize(i)) ? 1 : t.getDimSize(i);
  if (auto m = dyn_cast<MXFP4Type>(v.getType()))
    return m.getShape()[i];
  return 1;
}

OpCost mlir::k3::estimateCost(Operation *op) {
  OpCost c;
  if (auto l = dyn_cast<LinearOp>(op))
    c.flopsPerToken = 2 * dim(l.getWeight(), 0) * dim(l.getWeight(), 1);
  else if (auto s = dyn_cast<ShortConvOp>(op))
    c.flopsPerToken = 2 * dim(s.getWeight(), 0) * dim(s.getWeight(), 2) + 4 * dim(s.getInput(), 1);
  else if (auto g = dyn_cast<KdaGateOp>(op))
    c.flopsPerToken = 8 * dim(g.getLogits(), 1);
  else if (auto n = dyn_cast<L2NormOp>(op))
    c.flopsPerToken = (n.getInvNorm() ? 2 : 3) * dim(n.getInput(), 1);
  else if (auto n = dyn_cast<L2NormInvOp>(op))
    c.flopsPerToken = 2 * dim(n.getInput(), 1);
  else if (auto d = dyn_cast<DeltaRuleOp>(op)) // decay, Sᵀk, rank-1 update, Sᵀq
    c.flopsPerToken = 7 * d.getNumHeads() * d.getKeyDim() * d.getValueDim();
  else if (auto n = dyn_cast<GatedRMSNormOp>(op))
    c.flopsPerToken = 8 * dim(n.getInput(), 1);
  else if (auto m = dyn_cast<MlaAttentionOp>(op)) {
    // Absorbed q/k and output up-projection per token; attention over the
    // cache adds 2·H·(R + rope + R) per cached token (context dependent, not
    // included).
    int64_t h = m.getNumHeads(), r = dim(m.getKvBProj(), 1);
    c.flopsPerToken = 2 * h * (m.getQkNopeHeadDim() + m.getVHeadDim()) * r;
  } else if (auto r = dyn_cast<MoeRouterOp>(op))
    c.flopsPerToken = 2 * dim(r.getWeight(), 0) * dim(r.getWeight(), 1);
  else if (auto e = dyn_cast<ExpertMlpOp>(op))
    c.flopsPerToken = 6 * dim(e.getIndices(), 1) * dim(e.getW1(), 1) * dim(e.getW1(), 2);
  else if (auto m = dyn_cast<MoeCombineOp>(op))
    c.flopsPerToken = 2 * dim(m.getInput(), 1) * dim(m.getInput(), 2);
  else if (auto a = dyn_cast<AttnResOp>(op))
    c.flopsPerToken = 6 * static_cast<int64_t>(a.getSources().size()) * dim(a.getSources()[0], 1);
  else if (auto n = dyn_cast<RMSNormOp>(op))
    c.flopsPerToken = 4 * dim(n.getInput(), 1);
  else if (auto g = dyn_cast<GluOp>(op))
    c.flopsPerToken = 12 * dim(g.getGate(), 1);
  else if (isa<arith::AddFOp>(op))
    c.flopsPerToken = dim(op->getOperand(0), 1);
  return c;
}

//===----------------------------------------------------------------------===//
// Fusion report.
//===----------------------------------------------------------------------===//

/// The decoder layer a kernel belongs to, from its ops' "layers.N.*" locations.
static std::string layerOf(Location loc) {
  std::string found = "-";
  loc->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l)) {
      StringRef name = n.getName().getValue();
      if (name.consume_front("layers.")) {
        found = name.take_until([](char c) { return c == '.'; }).str();
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return found;
}

void mlir::k3::printFusionReport(ModuleOp module, llvm::raw_ostream &os) {
  auto fn = module.lookupSymbol<func::FuncOp>("prefill");
  if (!fn) {
    os << "fusion report: no @prefill entry\n";
    return;
  }
  struct Row {
    std::string family;
    int64_t uses = 0, flops = 0, bytes = 0, weights = 0;
  };
  llvm::MapVector<StringRef, Row> distinct;
  int64_t launches = 0, totalFlops = 0, totalBytes = 0, totalWeights = 0;
  os << "k3c fusion report: @prefill, one launch per line (estimates per token; weights once)\n";
  os << llvm::format("%-6s %-34s %-15s %14s %14s %14s\n", "layer", "kernel", "family",
                     "FLOP/token", "act B/token", "weight bytes");
  fn.walk([&](KernelOp k) {
    ++launches;
    os << llvm::format("%-6s %-34s %-15s %14lld %14lld %14lld\n", layerOf(k.getLoc()).c_str(),
                       k.getSymName().str().c_str(), k.getFamily().str().c_str(),
                       (long long)k.getFlopsPerToken(), (long long)k.getBytesPerToken(),
                       (long long)k.getWeightBytes());
    Row &r = distinct[k.getSymName()];
    r.family = k.getFamily().str();
    ++r.uses;
    r.flops = k.getFlopsPerToken();
    r.bytes = k.getBytesPerToken();
    r.weights = k.getWeightBytes();
    totalFlops += k.getFlopsPerToken();
    totalBytes += k.getBytesPerToken();
    totalWeights += k.getWeightBytes();
  });
  os << "\ndistinct kernels: " << distinct.size() << " for " << launches << " launches\n";
  os << llvm::format("%-34s %-15s %6s %14s %14s %14s\n", "kernel", "family", "uses",
                     "FLOP/token", "act B/token", "weight bytes");
  for (auto &[name, r] : distinct)
    os << llvm::format("%-34s %-15s %6lld %14lld %14lld %14lld\n", name.str().c_str(),
                       r.family.c_str(), (long long)r.uses, (long long)r.flops,
                       (long long)r.bytes, (long long)r.weights);
  os << llvm::format("\ntotal: %.3f GFLOP/token, %.3f MB activations/token, %.3f GB weights\n",
                     totalFlops / 1e9, totalBytes / 1e6, totalWeights / 1e9);
}
