//===- DeploymentPlan.cpp - per-rank memory of an EP deployment -----------===//

#include "passes/DeploymentPlan.h"

#include "dialects/K3/IR/K3Ops.h"
#include "passes/Passes.h"
#include "runtime/ExpertParallel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>

using namespace mlir;
using namespace mlir::k3;

namespace {

bool contains(StringRef s, StringRef part) { return s.find(part) != StringRef::npos; }

/// Bytes of one element of a tensor type (bf16: 2, f32: 4).
int64_t elementBytes(RankedTensorType t) {
  return std::max<int64_t>(1, t.getElementType().getIntOrFloatBitWidth() / 8);
}

/// Product of the static dims from `from` on, times the element size.
int64_t bytesFrom(RankedTensorType t, unsigned from) {
  int64_t n = elementBytes(t);
  for (unsigned i = from; i < t.getRank(); ++i)
    n *= ShapedType::isDynamic(t.getDimSize(i)) ? 1 : t.getDimSize(i);
  return n;
}

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", bytes / 1e9);
  return buf;
}

std::string rankRange(int64_t a, int64_t b) {
  return a == b ? "rank " + std::to_string(a)
                : "ranks " + std::to_string(a) + "-" + std::to_string(b);
}

} // namespace

LogicalResult mlir::k3::measureModel(ModuleOp module, ModelMemory &m, std::string &err) {
  auto fn = module.lookupSymbol<func::FuncOp>("prefill");
  if (!fn) {
    err = "the module has no @prefill entry";
    return failure();
  }
  m = ModelMemory();
  if (auto t = module->getAttrOfType<StringAttr>("k3.model_type"))
    m.modelType = t.getValue().str();
  if (auto n = module->getAttrOfType<IntegerAttr>("k3.num_layers"))
    m.layers = n.getInt();
  llvm::DenseSet<StringRef> moeLayers;
  // A paged MLA cache's pools are [pages, page size, width]: dim 1 is no
  // context then.
  bool paged = false;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto in = fn.getArgAttrOfType<StringAttr>(i, "k3.input"))
      paged |= in.getValue() == "block_table";
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    Type t = fn.getArgument(i).getType();
    if (auto w = fn.getArgAttrOfType<StringAttr>(i, "k3.weight")) {
      StringRef name = w.getValue();
      int64_t bytes = valueStaticBytes(t);
      if (size_t ex = name.find(".experts."); ex != StringRef::npos) {
        // One stacked [E, rows, cols] argument per (layer, w1|w2|w3).
        int64_t e = isa<MXFP4Type>(t) ? cast<MXFP4Type>(t).getShape()[0]
                                      : cast<RankedTensorType>(t).getDimSize(0);
        if (m.experts && e != m.experts) {
          err = "MoE layers with different expert counts (" + std::to_string(m.experts) +
                " and " + std::to_string(e) + ")";
          return failure();
        }
        m.experts = e;
        m.expertBytes += bytes / e;
        m.expertDtype = isa<MXFP4Type>(t) ? "mxfp4" : "bf16";
        moeLayers.insert(name.take_front(ex));
      } else if (name == "model.embed_tokens.weight") {
        m.embedding += bytes;
      } else if (name == "lm_head.weight") {
        m.lmHead += bytes;
      } else if (contains(name, ".self_attn.")) {
        m.attention += bytes;
      } else if (contains(name, ".mlp.") || contains(name, ".block_sparse_moe.")) {
        m.dense += bytes;
      } else {
        m.other += bytes;
      }
    } else if (auto s = fn.getArgAttrOfType<StringAttr>(i, "k3.state")) {
      auto rt = cast<RankedTensorType>(t);
      StringRef name = s.getValue();
      if (name.ends_with("kda_state")) {
        m.kdaStatePerSeq += bytesFrom(rt, 1);
        m.kdaStateDtype = rt.getElementType().isBF16() ? "bf16" : "f32";
      } else if (name.ends_with("conv_state")) {
        m.convStatePerSeq += bytesFrom(rt, 1);
      } else if (name.ends_with("mla_cache")) {
        m.mlaCachePerToken += bytesFrom(rt, 2);
        if (!paged && !ShapedType::isDynamic(rt.getDimSize(1)))
          m.staticContext = rt.getDimSize(1);
      } else {
        err = "unknown state argument '" + name.str() + "'";
        return failure();
      }
    }
  }
  m.moeLayers = static_cast<int64_t>(moeLayers.size());
  return success();
}

RankMemory mlir::k3::planRank(const ModelMemory &m, int64_t ranks, int64_t rank, int64_t seqs,
                              int64_t context, int64_t cacheTokens) {
  RankMemory r;
  r.rank = rank;
  if (m.experts) {
    k3c::rt::ExpertSlots s = k3c::rt::expertSlots(m.experts, ranks, rank);
    r.homeExperts = s.home;
    r.replicaSlots = s.replicas();
    r.homeBytes = s.home * m.expertBytes;
    r.replicaBytes = s.replicas() * m.expertBytes;
  }
  r.embedding = m.embedding;
  r.lmHead = m.lmHead;
  r.attention = m.attention;
  r.dense = m.dense;
  r.other = m.other;
  r.kdaState = seqs * m.kdaStatePerSeq;
  r.convState = seqs * m.convStatePerSeq;
  r.mlaCache = (cacheTokens > 0 ? cacheTokens : seqs * context) * m.mlaCachePerToken;
  return r;
}

LogicalResult mlir::k3::printDeploymentPlan(ModuleOp module, const PlanOptions &o,
                                            llvm::raw_ostream &os, std::string &err) {
  ModelMemory m;
  if (failed(measureModel(module, m, err)))
    return failure();
  for (int64_t r : o.table)
    if (r < 1) {
      err = "a deployment plan needs at least 1 rank, got " + std::to_string(r);
      return failure();
    }
  if (o.ranks < 0 || (o.ranks == 0 && o.table.empty())) {
    err = "a deployment plan needs --ep R >= 1 or --plan-ranks";
    return failure();
  }
  os << "k3c deployment plan: " << m.modelType << ", " << m.layers << " layers";
  if (m.experts)
    os << " (" << m.moeLayers << " MoE layers x " << m.experts << " routed experts, "
       << m.expertDtype << ", " << m.expertBytes << " bytes per expert over the MoE layers)";
  os << "\nper rank: " << o.seqs << " sequences x " << o.context << " tokens of context";
  if (o.cacheTokens > 0)
    os << " (a paged MLA cache of " << o.cacheTokens << " tokens)";
  os << "; GPU capacity " << llvm::format("%.0f", o.capacity) << " bytes ("
     << gb(o.capacity) << " GB; 1 GB = 1e9 bytes). Not counted: activations and scratch (they grow with "
        "--max-tokens; k3-run prints its memory plan), NCCL's buffers\n";

  auto ranksOf = [&](int64_t R) {
    std::vector<RankMemory> all;
    for (int64_t r = 0; r < R; ++r)
      all.push_back(planRank(m, R, r, o.seqs, o.context, o.cacheTokens));
    return all;
  };
  auto largest = [](const std::vector<RankMemory> &all) {
    return *std::max_element(all.begin(), all.end(), [](const RankMemory &a, const RankMemory &b) {
      return a.total() < b.total();
    });
  };

  if (o.ranks > 0) {
    const int64_t R = o.ranks;
    std::vector<RankMemory> all = ranksOf(R);
    // Ranks with the same layout share a column.
    std::vector<std::pair<int64_t, int64_t>> groups; // first, last
    for (int64_t r = 0; r < R; ++r)
      if (!groups.empty() && all[r].homeExperts == all[groups.back().first].homeExperts &&
          all[r].replicaSlots == all[groups.back().first].replicaSlots)
        groups.back().second = r;
      else
        groups.push_back({r, r});
    os << "\nEP over " << R << " ranks (routed experts sharded; every other weight replicated)\n";
    os << llvm::format("%-34s", "");
    for (auto [a, b] : groups)
      os << llvm::format("  %26s", rankRange(a, b).c_str());
    os << "\n";
    auto count = [&](const char *label, int64_t RankMemory::*f) {
      os << llvm::format("%-34s", label);
      for (auto [a, b] : groups)
        os << llvm::format("  %26lld", static_cast<long long>(all[a].*f));
      os << "\n";
    };
    auto row = [&](const std::string &label, auto get) {
      os << llvm::format("%-34s", label.c_str());
      for (auto [a, b] : groups) {
        int64_t v = get(all[a]);
        os << llvm::format("  %16lld %6s GB", static_cast<long long>(v), gb(v).c_str());
      }
      os << "\n";
    };
    count("home experts per MoE layer", &RankMemory::homeExperts);
    count("replica slots per MoE layer", &RankMemory::replicaSlots);
    row("routed experts: home", [](const RankMemory &r) { return r.homeBytes; });
    row("routed experts: replica slots", [](const RankMemory &r) { return r.replicaBytes; });
    row("embedding (replicated)", [](const RankMemory &r) { return r.embedding; });
    row("lm_head (replicated)", [](const RankMemory &r) { return r.lmHead; });
    row("attention: KDA, MLA (replicated)", [](const RankMemory &r) { return r.attention; });
    row("dense FFN, shared experts, router", [](const RankMemory &r) { return r.dense; });
    row("norms, AttnRes", [](const RankMemory &r) { return r.other; });
    row("KDA state (" + m.kdaStateDtype + ")", [](const RankMemory &r) { return r.kdaState; });
    row("conv window", [](const RankMemory &r) { return r.convState; });
    row("MLA latent cache", [](const RankMemory &r) { return r.mlaCache; });
    row("total", [](const RankMemory &r) { return r.total(); });
    os << llvm::format("%-34s", "fits in the GPU");
    for (auto [a, b] : groups) {
      double free = o.capacity - static_cast<double>(all[a].total());
      std::string verdict = free >= 0 ? "yes, " + gb(free) + " GB free"
                                      : "no, " + gb(-free) + " GB over";
      if (std::abs(free) < 1e8) // GB would round it away
        verdict = (free >= 0 ? "yes, " : "no, ") + std::to_string(std::llabs(
                                                       static_cast<long long>(free))) +
                  (free >= 0 ? " bytes free" : " bytes over");
      os << llvm::format("  %26s", verdict.c_str());
    }
    os << "\n";
    RankMemory big = largest(all);
    os << "R = " << R << (o.capacity >= static_cast<double>(big.total()) ? " fits" : " does not fit")
       << " in " << llvm::format("%.0f", o.capacity) << " bytes per GPU (largest rank "
       << big.rank << ": " << big.total() << " bytes)\n";
  }

  if (!o.table.empty()) {
    os << "\nper rank (the largest), GB; what-ifs: home-only = no replica slots, sharded = the "
          "replicated weights split R ways, both = the two together\n";
    os << llvm::format("%-6s %13s %10s %11s %8s %9s %9s %-5s %10s %9s %9s\n", "ranks",
                       "experts/rank", "routed", "replicated", "states", "total", "free", "fits",
                       "home-only", "sharded", "both");
    int64_t fitR = 0, fitHomeOnly = 0, fitSharded = 0, fitBoth = 0;
    for (int64_t R : o.table) {
      RankMemory r = largest(ranksOf(R));
      double total = static_cast<double>(r.total());
      double homeOnly = total - static_cast<double>(r.replicaBytes);
      double sharded = total - static_cast<double>(m.replicated()) +
                       static_cast<double>(m.replicated()) / static_cast<double>(R);
      double both = sharded - static_cast<double>(r.replicaBytes);
      bool fits = total <= o.capacity;
      if (both <= o.capacity && !fitBoth)
        fitBoth = R;
      if (fits && !fitR)
        fitR = R;
      if (homeOnly <= o.capacity && !fitHomeOnly)
        fitHomeOnly = R;
      if (sharded <= o.capacity && !fitSharded)
        fitSharded = R;
      std::string experts = std::to_string(r.homeExperts) + "+" + std::to_string(r.replicaSlots);
      os << llvm::format("%-6lld %13s %10s %11s %8s %9s %9s %-5s %10s %9s %9s\n",
                         static_cast<long long>(R), experts.c_str(),
                         gb(static_cast<double>(r.homeBytes + r.replicaBytes)).c_str(),
                         gb(static_cast<double>(m.replicated())).c_str(),
                         gb(static_cast<double>(r.states())).c_str(), gb(total).c_str(),
                         gb(o.capacity - total).c_str(), fits ? "yes" : "no",
                         gb(homeOnly).c_str(), gb(sharded).c_str(), gb(both).c_str());
    }
    auto which = [](int64_t R) { return R ? "R = " + std::to_string(R) : std::string("none"); };
    os << "smallest R that fits, as the runtime lays the model out: " << which(fitR)
       << "; with home experts only: " << which(fitHomeOnly)
       << "; with the replicated weights sharded: " << which(fitSharded) << "; both: "
       << which(fitBoth) << "\n";
    os << "replicated on every rank: " << gb(static_cast<double>(m.replicated()))
       << " GB (embedding " << gb(static_cast<double>(m.embedding)) << ", lm_head "
       << gb(static_cast<double>(m.lmHead)) << ", attention "
       << gb(static_cast<double>(m.attention)) << ", dense FFN/shared experts/router "
       << gb(static_cast<double>(m.dense)) << ", norms " << gb(static_cast<double>(m.other))
       << ")\n";
  }
  return success();
}
