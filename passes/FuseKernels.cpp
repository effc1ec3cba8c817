//===- FuseKernels.cpp - group core ops into k3.kernel regions -------------===//
//
// --k3-fuse-kernels. Forms one region per future kernel launch (docs/fusion.md):
//
//   norm_proj   [attn_res] + rmsnorm + every k3.linear reading the norm
//               (KDA: q,k,v,f_a,b,g; MLA: q_a|q, kv_a, g; MoE: latent down,
//               shared gate/up; dense: gate/up; final: last_tokens + lm head)
//               + the gated activation of a gate/up pair (fuse-glu)
//   kda_conv_gate  3 x short_conv + 2 x l2norm (or, split, 2 x l2norm_inv) + f_b linear
//               + kda_gate
//   kda_chunk   the chunked delta rule (+ the 2 l2norms with kda-norm-in-chunk, or
//               their scaling halves when split by k3-split-l2norms; + kda_gate
//               with kda-gate-in-chunk)
//   kda_out     gated_rmsnorm + o_proj (+ the residual add); the norm in
//               kda_chunk with kda-out-norm-in-chunk
//   mla_q_up    q_a RMSNorm + q_b
//   mla_attn    latent norm + cache append + attention + output gate
//   mla_out     o_proj (+ the residual add)
//   moe_router  router GEMM + top-k + renormalize
//   moe_experts grouped w1/w3 GEMM + SiTU + w2 GEMM, MXFP4 dequant in registers
//   moe_shared  shared-expert down projection (+ its activation without fuse-glu)
//   moe_out     weighted combine + RMSNorm + up projection + shared add (+ residual)
//   mlp_down    down projection (+ residual; + the activation without fuse-glu)
//   embed       embedding gather
// The block is then re-sorted topologically, each group is outlined into a
// k3.kernel (inputs = values from outside, results = values used outside),
// and kernels with identical bodies get the same name.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

namespace mlir::k3 {
#define GEN_PASS_DEF_K3FUSEKERNELSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::k3

using namespace mlir;
using namespace mlir::k3;

namespace {

struct Group {
  std::string family;
  llvm::SetVector<Operation *> ops;
};

class Fuser {
public:
  Fuser(Block &block, bool fuseGlu, bool normInChunk, bool outNormInChunk, bool gateInChunk)
      : block(block), fuseGlu(fuseGlu), normInChunk(normInChunk),
        outNormInChunk(outNormInChunk), gateInChunk(gateInChunk) {}

  LogicalResult run(bool report);

private:
  Group *groupOf(Operation *op) {
    auto it = owner.find(op);
    return it == owner.end() ? nullptr : it->second;
  }
  Group *newGroup(StringRef family) {
    groups.push_back(std::make_unique<Group>());
    groups.back()->family = family.str();
    return groups.back().get();
  }
  void add(Group *g, Operation *op) {
    if (!op || groupOf(op) || op->getBlock() != &block)
      return;
    g->ops.insert(op);
    owner[op] = g;
  }
  template <typename OpTy> OpTy def(Value v) {
    return v ? v.getDefiningOp<OpTy>() : OpTy();
  }
  static bool singleUse(Value v) { return v.hasOneUse(); }

  void formGroups();
  LogicalResult outline(Group &g);

  Block &block;
  bool fuseGlu;
  bool normInChunk; ///< kda-norm-in-chunk: the q/k L2 norms in kda_chunk
  bool outNormInChunk; ///< kda-out-norm-in-chunk: the gated output norm in kda_chunk
  bool gateInChunk; ///< kda-gate-in-chunk: the gate in kda_chunk
  std::vector<std::unique_ptr<Group>> groups;
  llvm::DenseMap<Operation *, Group *> owner;
};

void Fuser::formGroups() {
  // KDA: conv + gate, chunk, output.
  block.walk([&](DeltaRuleOp rule) {
    Group *conv = newGroup("kda_conv_gate");
    Group *chunk = newGroup("kda_chunk");
    add(chunk, rule);
    for (Value v : {rule.getQ(), rule.getK()})
      if (auto l2 = def<L2NormOp>(v)) {
        // A split norm (k3-split-l2norms): the reduction with the
        // convolution, the scaling with the rule.
        if (auto inv = def<L2NormInvOp>(l2.getInvNorm())) {
          add(chunk, l2);
          add(conv, inv);
        } else {
          add(normInChunk && singleUse(l2.getResult()) ? chunk : conv, l2);
        }
        add(conv, def<ShortConvOp>(l2.getInput()));
      }
    add(conv, def<ShortConvOp>(rule.getV()));
    if (auto gate = def<KdaGateOp>(rule.getG())) {
      // kda-gate-in-chunk: the gate of the rule's g with the rule (the
      // lowering forms the gate values as the rule loads f_b's logits).
      add(gateInChunk && singleUse(gate.getResult()) ? chunk : conv, gate);
      add(conv, def<LinearOp>(gate.getLogits()));
    }
    // The three convs are chained through the shared state.
    for (Operation *op : llvm::to_vector(conv->ops))
      if (auto c = dyn_cast<ShortConvOp>(op))
        add(conv, def<ShortConvOp>(c.getConvState()));
    for (Operation *user : rule.getResult().getUsers())
      if (auto norm = dyn_cast<GatedRMSNormOp>(user)) {
        Group *out = newGroup("kda_out");
        // kda-out-norm-in-chunk: the norm of the rule's only result use
        // with the rule (the lowering fuses it into the token recurrence).
        add(outNormInChunk && singleUse(rule.getResult()) ? chunk : out, norm);
        for (Operation *u : norm.getResult().getUsers())
          if (isa<LinearOp>(u))
            add(out, u);
      }
  });
  // MLA.
  block.walk([&](MlaAttentionOp attn) {
    Group *g = newGroup("mla_attn");
    add(g, attn);
    if (auto qb = def<LinearOp>(attn.getQ()))
      if (auto norm = def<RMSNormOp>(qb.getInput())) {
        Group *up = newGroup("mla_q_up");
        add(up, norm);
        add(up, qb);
      }
    for (Operation *u : attn.getResult().getUsers())
      if (isa<LinearOp>(u)) {
        Group *out = newGroup("mla_out");
        add(out, u);
      }
  });
  // MoE.
  block.walk([&](MoeRouterOp router) { add(newGroup("moe_router"), router); });
  block.walk([&](ExpertMlpOp experts) { add(newGroup("moe_experts"), experts); });
  block.walk([&](MoeCombineOp combine) {
    Group *out = newGroup("moe_out");
    add(out, combine);
    for (Operation *u : combine.getResult().getUsers())
      if (auto norm = dyn_cast<RMSNormOp>(u)) {
        add(out, norm);
        for (Operation *v : norm.getResult().getUsers())
          if (isa<LinearOp>(v)) {
            add(out, v);
            for (Operation *w : v->getResult(0).getUsers())
              if (isa<arith::AddFOp>(w))
                add(out, w); // + shared experts
          }
      }
  });
  // Activation + down projection (shared experts, dense MLP).
  block.walk([&](GluOp glu) {
    if (groupOf(glu))
      return;
    bool shared = false;
    for (Operation *u : glu.getResult().getUsers())
      for (Operation *w : u->getUsers())
        shared |= isa<arith::AddFOp>(w) && groupOf(w) && groupOf(w)->family == "moe_out";
    Group *g = newGroup(shared ? "moe_shared" : "mlp_down");
    add(g, glu);
    for (Operation *u : glu.getResult().getUsers())
      if (isa<LinearOp>(u))
        add(g, u);
  });
  // Norm + projections (with the AttnRes mix before the norm).
  block.walk([&](RMSNormOp norm) {
    if (groupOf(norm))
      return;
    Group *g = newGroup("norm_proj");
    if (auto last = def<LastTokensOp>(norm.getInput())) {
      g->family = "lm_head";
      add(g, last);
      if (auto mix = def<AttnResOp>(last.getInput()); mix && singleUse(mix.getResult()))
        add(g, mix);
    } else if (auto mix = def<AttnResOp>(norm.getInput()); mix && singleUse(mix.getResult())) {
      add(g, mix);
    }
    add(g, norm);
    bool kda = false, mla = false, moe = false, mlp = false;
    for (Operation *u : norm.getResult().getUsers()) {
      auto lin = dyn_cast<LinearOp>(u);
      if (!lin || groupOf(lin))
        continue;
      add(g, lin);
      for (Operation *w : lin.getResult().getUsers()) {
        kda |= isa<ShortConvOp, DeltaRuleOp, GatedRMSNormOp>(w) ||
               (isa<LinearOp>(w) && groupOf(w) && groupOf(w)->family == "kda_conv_gate");
        mla |= isa<MlaAttentionOp, RMSNormOp>(w);
        moe |= isa<ExpertMlpOp>(w) || (groupOf(w) && groupOf(w)->family == "moe_shared");
        mlp |= groupOf(w) && groupOf(w)->family == "mlp_down";
      }
    }
    for (Operation *u : norm.getResult().getUsers())
      moe |= isa<MoeRouterOp>(u);
    if (g->family == "norm_proj")
      g->family = kda ? "kda_in" : mla ? "mla_in" : moe ? "moe_in" : mlp ? "mlp_in" : "norm_proj";
  });
  // A gated activation whose gate and up projections share a kernel (and
  // are used by nothing else) moves into it: the GEMM tile computes both and
  // stores only the activation (the down projection's kernel keeps the rest).
  if (fuseGlu)
    block.walk([&](GluOp glu) {
      auto gate = def<LinearOp>(glu.getGate()), up = def<LinearOp>(glu.getUp());
      if (!gate || !up || gate == up || !groupOf(gate) || groupOf(gate) != groupOf(up) ||
          gate.getInput() != up.getInput() || gate.getType() != up.getType() ||
          !singleUse(gate.getResult()) || !singleUse(up.getResult()))
        return;
      if (Group *from = groupOf(glu)) {
        from->ops.remove(glu);
        owner.erase(glu);
      }
      add(groupOf(gate), glu);
    });
  // Residual / running-sum adds join the kernel producing their newest operand.
  block.walk([&](arith::AddFOp add_) {
    if (groupOf(add_))
      return;
    Operation *newest = nullptr;
    for (Value v : add_->getOperands())
      if (Operation *d = v.getDefiningOp())
        if (groupOf(d) && (!newest || newest->isBeforeInBlock(d)))
          newest = d;
    if (newest && add_->getOperand(0).getDefiningOp() != add_->getOperand(1).getDefiningOp())
      add(groupOf(newest), add_);
    else
      add(newGroup("add"), add_);
  });
  // Everything else is a kernel of its own.
  for (Operation &op : block.without_terminator())
    if (!groupOf(&op) && op.getDialect() &&
        (isa<K3Dialect>(op.getDialect()) || isa<arith::ArithDialect>(op.getDialect())) &&
        !isa<KernelOp>(op)) {
      std::string fam = op.getName().stripDialect().str();
      if (isa<EmbeddingOp>(op))
        fam = "embed";
      add(newGroup(fam), &op);
    }
}

/// A name shared by kernels with identical bodies: family + FNV-1a hash of
/// every body op's name, attributes, types and operand wiring.
std::string kernelName(KernelOp k) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::DenseMap<Value, unsigned> ids;
  unsigned next = 0;
  for (BlockArgument a : k.getBody().getArguments()) {
    ids[a] = next++;
    os << a.getType() << ";";
  }
  k.getBody().walk([&](Operation *op) {
    os << op->getName() << "(";
    for (Value v : op->getOperands())
      os << ids.lookup(v) << ",";
    os << ")";
    op->getPropertiesAsAttribute().print(os);
    op->getDiscardableAttrDictionary().print(os);
    for (Value r : op->getResults()) {
      ids[r] = next++;
      os << r.getType() << ";";
    }
  });
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : os.str())
    h = (h ^ c) * 1099511628211ull;
  std::string name;
  llvm::raw_string_ostream ns(name);
  ns << "k3_" << k.getFamily() << "_" << llvm::format_hex_no_prefix(h & 0xffffffff, 8);
  return name;
}

LogicalResult Fuser::outline(Group &g) {
  if (g.ops.empty())
    return success();
  // Program order.
  SmallVector<Operation *> ops(g.ops.begin(), g.ops.end());
  llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  llvm::SetVector<Value> inputs, outputs;
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (!v.getDefiningOp() || !g.ops.contains(v.getDefiningOp()))
        inputs.insert(v);
    for (Value r : op->getResults())
      for (Operation *u : r.getUsers())
        if (!g.ops.contains(u)) {
          outputs.insert(r);
          break;
        }
  }
  Operation *last = ops.back();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  SmallVector<Location> locs;
  for (Operation *op : ops)
    locs.push_back(op->getLoc());
  Location loc = b.getFusedLoc(locs);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto kernel = KernelOp::create(b, loc, resultTypes, inputs.getArrayRef(), "pending", g.family);
  Block &body = kernel.getBody().front();
  IRMapping map;
  for (auto [v, arg] : llvm::zip(inputs, body.getArguments()))
    map.map(v, arg);
  OpBuilder inner = OpBuilder::atBlockEnd(&body);
  for (Operation *op : ops)
    inner.clone(*op, map);
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(map.lookup(v));
  YieldOp::create(inner, loc, yielded);
  for (auto [i, v] : llvm::enumerate(outputs)) {
    Value out = v;
    out.replaceAllUsesWith(kernel.getResult(i));
  }
  for (Operation *op : llvm::reverse(ops))
    op->erase();

  // Cost estimates.
  int64_t flops = 0, bytes = 0, weights = 0;
  body.walk([&](Operation *op) { flops += estimateCost(op).flopsPerToken; });
  for (Value v : kernel.getInputs()) {
    bytes += valueBytesPerToken(v.getType());
    weights += valueStaticBytes(v.getType());
  }
  for (Value v : kernel.getResults())
    bytes += valueBytesPerToken(v.getType());
  kernel.setWeightBytes(weights);
  kernel.setBytesPerToken(bytes);
  kernel.setFlopsPerToken(flops);
  kernel.setSymName(kernelName(kernel));
  return success();
}

LogicalResult Fuser::run(bool report) {
  formGroups();
  // Outline in program order of each group's last op; sort once the graph of
  // groups replaces the ops (a group's inputs may be defined after its first op).
  for (auto &g : groups)
    if (failed(outline(*g)))
      return failure();
  if (!sortTopologically(&block))
    return emitError(block.getParentOp()->getLoc(), "fused kernels form a cycle");
  if (report)
    for (Operation &op : block)
      if (auto k = dyn_cast<KernelOp>(op))
        k.emitRemark() << "kernel " << k.getSymName() << " (" << k.getFamily()
                       << "): " << k.getFlopsPerToken() << " FLOP/token, "
                       << k.getBytesPerToken() << " activation bytes/token, "
                       << k.getWeightBytes() << " weight bytes";
  return success();
}

struct K3FuseKernelsPass : mlir::k3::impl::K3FuseKernelsPassBase<K3FuseKernelsPass> {
  using Base::Base;
  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](func::FuncOp fn) {
      if (fn.isExternal())
        return;
      if (failed(Fuser(fn.getBody().front(), fuseGlu, kdaNormInChunk, kdaOutNormInChunk,
                        kdaGateInChunk)
                      .run(report)))
        ok = false;
    });
    if (!ok)
      signalPassFailure();
  }
};

} // namespace
