//===- Moe.cpp - router, grouped expert MLP (MXFP4), combine --------------===//
//
// Kernel contracts: docs/kernels.md. The router keeps its fp32 scores in a
// scratch buffer and selects top-k on score + bias (ties: lower expert id),
// slots in descending order; the expert MLP groups the routed (token, slot)
// pairs by expert and runs grouped GEMMs that dequantize MXFP4 weights in
// registers from the #k3.mxfp4_layout bytes.
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"
#include "support/Common.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <iterator>

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

/// Token-tile heights of the tensor-core expert GEMM: the grouping writes
/// tile offsets for each (scratch rows 1..3; row 0: the group offsets).
static constexpr int64_t kExpertTileRows[3] = {16, 64, 128};
/// Split-tail tile heights (moeTailHeights picks which serve).
static constexpr int64_t kTailRows[4] = {16, 32, 48, 64};
/// The split-tail rows (moeTailUpTo): the warpgroup GEMM's 128-row tile
/// offsets over each group's head rows, the tile offsets of the tails for
/// each height of kTailRows (at most one tile a group), and where each
/// group's tail starts.
enum : int64_t {
  kHeadTilesRow = 1 + std::size(kExpertTileRows),
  kTailTilesRow0,
  kTailStartRow = kTailTilesRow0 + std::size(kTailRows),
  /// The chained up + down launch's counts (per expert: its up items done;
  /// column E: the work queue), zeroed by the grouping.
  kSyncRow,
  kGroupRows
};
static_assert(kGroupRows == k3c::kMoeGroupScratchRows,
              "the runtime finds the grouping scratch by its rows");

/// K3C_MOE_TAIL_UPTO (0..64): under warpgroup MMA (128-row tiles), a group's
/// last n % 128 rows, when there are at most this many, go to the
/// register-decode mma.sync GEMM (16-row tiles up to 16 rows, else 64)
/// instead of a mostly empty 128-row tile: the weights are then streamed
/// and decoded by the kernel that does so fastest per byte. 0: off.
/// Default 64 (H200, session 25): K3's 896 experts at 8192 tokens (~146
/// pairs an expert) 29.2-29.9 -> 26.5-27.8 ms, the slice at 2340 tokens
/// 7.94 -> 7.34 ms; 16 (7.64) and 32 (7.72) gained less (docs/perf.md).
static constexpr int64_t kMoeTailUpTo = 64;
static int64_t moeTailUpTo() {
  const int64_t t = intFromEnv("K3C_MOE_TAIL_UPTO", kMoeTailUpTo);
  if (t < 0 || t > 64)
    llvm::report_fatal_error("k3c: K3C_MOE_TAIL_UPTO must be in 0..64, got " + llvm::Twine(t),
                             /*gen_crash_diag=*/false);
  return t;
}

/// The split tails of one expert kernel, read once from the switches: the
/// most rows a tail may have (moeTailUpTo; 0: no tails) and the tail heights
/// that serve, ascending (a tail of r rows takes the first >= r): every
/// multiple of 16 up to 64, so a tail's tile does no more row blocks of MMA
/// than it needs (the register decode is bound by its instruction stream, of
/// which the MMAs and A fragments grow with the height); K3C_MOE_TAIL_FINE=0
/// keeps 16 and 64 only. Measured on the H200 (session 29): the slice at
/// 320 / 512 tokens 2.52 / 3.37 -> 2.27 / 2.83 ms, K3's experts at 1536
/// tokens 9.78 -> 8.12 ms, 8192 within 2 %. Heights past upTo are dropped.
struct TailPlan {
  int64_t upTo = 0;
  SmallVector<int64_t> heights;
};
static TailPlan moeTailPlan() {
  TailPlan plan;
  plan.upTo = moeTailUpTo();
  const bool fine = intFromEnv("K3C_MOE_TAIL_FINE", 1) != 0;
  for (int64_t h : kTailRows)
    if (plan.upTo && (fine || h == 16 || h == 64) &&
        (plan.heights.empty() || plan.heights.back() < plan.upTo))
      plan.heights.push_back(h);
  return plan;
}

/// The most base items a chained decode launch splits (MxfpGroupedChain:
/// its partials take 16 KB an item, 32 MB in all).
static constexpr int64_t kMoeSplitItems = 2048;
/// K3C_MOE_SPLITK_BELOW (>= 0, default 0: off): the chained decode launch
/// splits each work item's k chunks over two blocks when it has at most this
/// many base items a block (and at most kMoeSplitItems): decode where an
/// expert has one token (one sequence: 16 experts' 1216 items on the slice,
/// 2.3 a block of 528). Measured on the H200 (session 32, docs/perf.md) with
/// 4: the slice's one-sequence decode 0.1155-0.1160 -> 0.1142-0.1148 ms (1 %),
/// and 1.5-2 % slower at 2-8 sequences, where it does not split (the larger
/// kernel): so off by default; the partials scratch is then one item.
static int64_t moeSplitBelow() {
  const int64_t v = intFromEnv("K3C_MOE_SPLITK_BELOW", 0);
  if (v < 0)
    llvm::report_fatal_error("k3c: K3C_MOE_SPLITK_BELOW must be >= 0, got " + llvm::Twine(v),
                             /*gen_crash_diag=*/false);
  return v;
}

/// The split-K scratch's base items: kMoeSplitItems, or 1 with split-K off.
static int64_t moeSplitItems() { return moeSplitBelow() > 0 ? kMoeSplitItems : 1; }

/// The grouping scratch row of the tail tile offsets for `rows`-row tails.
static int64_t tailTilesRow(int64_t rows) {
  for (size_t i = 0; i < std::size(kTailRows); ++i)
    if (kTailRows[i] == rows)
      return kTailTilesRow0 + static_cast<int64_t>(i);
  llvm_unreachable("not a tail height");
}

SmallVector<ScratchNeed> scratchNeeds(Operation *op) {
  MLIRContext *ctx = op->getContext();
  if (isa<DeltaRuleOp>(op))
    return kdaScratchNeeds(op);
  if (auto norm = dyn_cast<GatedRMSNormOp>(op); norm && kdaOutNormFused(op)) {
    int64_t d = cast<RankedTensorType>(norm.getWeight().getType()).getDimSize(0);
    int64_t width = cast<RankedTensorType>(norm.getInput().getType()).getDimSize(1);
    return {ScratchNeed{{-1, width / d}, IntegerType::get(ctx, 32)}};
  }
  if (isa<MlaAttentionOp>(op))
    return mlaScratchNeeds(op);
  if (isa<LinearOp>(op))
    return linearSplitNeed(op);
  if (auto r = dyn_cast<MoeRouterOp>(op)) {
    int64_t e = cast<RankedTensorType>(r.getWeight().getType()).getDimSize(0);
    return {ScratchNeed{{-1, e}, Float32Type::get(ctx)}};
  }
  if (auto x = dyn_cast<ExpertMlpOp>(op)) {
    auto res = cast<RankedTensorType>(x.getResult().getType());
    int64_t k = res.getDimSize(1), inter;
    if (auto m = dyn_cast<MXFP4Type>(x.getW1().getType()))
      inter = m.getShape()[1];
    else
      inter = cast<RankedTensorType>(x.getW1().getType()).getDimSize(1);
    int64_t experts = isa<MXFP4Type>(x.getW1().getType())
                          ? cast<MXFP4Type>(x.getW1().getType()).getShape()[0]
                          : cast<RankedTensorType>(x.getW1().getType()).getDimSize(0);
    // Hidden activations per (token, slot); expert group offsets; the
    // (token, slot) pairs ordered by expert.
    // Rows: offsets, then tile offsets for the tensor-core tiles of 16, 64
    // and 128 rows (kExpertTileRows), then the split-tail rows.
    // Then the chained decode launch's split-K partials and counts
    // (MxfpGroupedChain; device-only, their shapes fixed so that every
    // target keeps one calling convention).
    const int64_t splits = moeSplitItems();
    return {ScratchNeed{{-1, k, inter}, res.getElementType()},
            ScratchNeed{{kGroupRows, experts + 1}, IntegerType::get(ctx, 32)},
            ScratchNeed{{-1, k}, IntegerType::get(ctx, 32)},
            ScratchNeed{{splits, 2, MxfpGroupedChain::kSplitAccs, MxfpGroupedChain::kSplitThreads},
                        Float32Type::get(ctx), /*deviceOnly=*/true},
            ScratchNeed{{splits}, IntegerType::get(ctx, 32), /*deviceOnly=*/true}};
  }
  return {};
}


/// The grouping scratch row of the tile offsets for `rows`-row tiles; 0
/// for a height the grouping does not tile for (a bad tuning switch, which
/// the expert GEMM's check then reports by name).
static int64_t tileOffsetsRow(int64_t rows) {
  for (size_t i = 0; i < std::size(kExpertTileRows); ++i)
    if (kExpertTileRows[i] == rows)
      return static_cast<int64_t>(i) + 1;
  return 0;
}

/// Launch 1 of the routed experts (one block): groups the (token, slot)
/// pairs by expert in O(pairs): counts by shared-memory atomics, offsets and
/// per-height tile offsets by warp prefix sums, then each pair placed at its
/// expert's cursor. Within a group the order follows the atomics (on the
/// host: token order); every pair's result is independent of its place.
static void groupPairs(KernelBuilder &kb, Value idx, Value groups, Value perm, Value P,
                       int64_t E, int64_t K, const TailPlan &tails) {
  Type i32 = kb.b.getI32Type();
  auto toI32 = [&](Value v) { return arith::IndexCastOp::create(kb.b, kb.loc, i32, v).getResult(); };
  auto expertOf = [&](Value p) { return kb.toIndex(kb.load(idx, {kb.div(p, K), kb.rem(p, K)})); };
  auto atomicInc = [&](Value mem, Value e) {
    return kb.toIndex(memref::AtomicRMWOp::create(kb.b, kb.loc, arith::AtomicRMWKind::addi,
                                                  kb.i32Const(1), mem, ValueRange{e}));
  };
  kb.blocks({kb.idx(1)}, kGroupThreads, [&](ValueRange, ThreadBlock &tb) {
    Value count = kb.shared(tb, {E}, i32), cursor = kb.shared(tb, {E}, i32);
    kb.strided(tb, kb.idx(0), kb.idx(E), [&](Value e) { kb.store(kb.i32Const(0), count, {e}); });
    kb.strided(tb, kb.idx(0), kb.idx(E + 1),
               [&](Value e) { kb.store(kb.i32Const(0), groups, {kb.idx(kSyncRow), e}); });
    kb.barrier(tb);
    // Expert ids outside [0, E) (EP's -1: no expert in that slot) are skipped.
    kb.strided(tb, kb.idx(0), P, [&](Value p) {
      Value e = expertOf(p);
      kb.ifThen(kb.ult(e, kb.idx(E)), [&] { atomicInc(count, e); });
    });
    kb.barrier(tb);
    // The scanned rows of an expert with n pairs: n, its tiles of each
    // height, the split tail's head tiles and its tail tile of each serving
    // height; and its head rows (n minus the tail).
    auto itemsOf = [&](Value n, Value &head) {
      SmallVector<Value> items{n};
      for (int64_t h : kExpertTileRows)
        items.push_back(kb.ceilDiv(n, h));
      // The split tail: r = n % 128 rows when 0 < r <= tails.upTo.
      Value r128 = kb.rem(n, 128);
      Value tail = kb.select(kb.andi(kb.ine(r128, kb.idx(0)), kb.ule(r128, kb.idx(tails.upTo))),
                             r128, kb.idx(0));
      head = kb.sub(n, tail);
      items.push_back(kb.ceilDiv(head, 128));
      // One tile of the first serving height >= tail (rows of heights that
      // do not serve stay 0).
      for (int64_t h : kTailRows) {
        auto at = llvm::find(tails.heights, h);
        if (at == tails.heights.end()) {
          items.push_back(kb.idx(0));
          continue;
        }
        int64_t below = at == tails.heights.begin() ? 0 : *std::prev(at);
        items.push_back(kb.select(kb.andi(kb.ult(kb.idx(below), tail), kb.ule(tail, kb.idx(h))),
                                  kb.idx(1), kb.idx(0)));
      }
      return items;
    };
    auto countOf = [&](Value e, Value ok) {
      return kb.select(ok, kb.toIndex(kb.load(count, {kb.minu(e, kb.idx(E - 1))})), kb.idx(0));
    };
    // Expert e's offsets (`starts`, row r: the exclusive prefix of row r)
    // into groups[r, e], the cursor and the tail's first row (the block scan).
    auto storeStarts = [&](Value e, Value ok, ArrayRef<Value> starts, Value head) {
      kb.ifThen(ok, [&] {
        for (int64_t r = 0; r < kTailStartRow; ++r)
          kb.store(toI32(starts[r]), groups, {kb.idx(r), e});
        kb.store(toI32(starts[0]), cursor, {e});
        kb.store(toI32(kb.add(starts[0], head)), groups, {kb.idx(kTailStartRow), e});
      });
    };
    auto storeTotals = [&](ArrayRef<Value> totals) {
      for (int64_t r = 0; r <= kTailStartRow; ++r)
        kb.store(toI32(totals[r == kTailStartRow ? 0 : r]), groups, {kb.idx(r), kb.idx(E)});
    };
    // On the GPU every warp scans 32 experts of a round of `threads` experts
    // and warp 0 the warps' totals (one round up to 1024 experts);
    // K3C_MOE_GROUP_SCAN=0 (and the host) has warp 0 alone scan in rounds of
    // 32 (the slice's decode 0.3 % slower on the H200, session 29).
    if (tb.launch && intFromEnv("K3C_MOE_GROUP_SCAN", 1) != 0) {
      assert(tb.warps <= tb.lanes && "the warps' totals are one warp's scan");
      Value warpTot = kb.shared(tb, {kTailStartRow, tb.warps}, i32);
      Value warpOff = kb.shared(tb, {kTailStartRow, tb.warps}, i32);
      Value roundTot = kb.shared(tb, {kTailStartRow}, i32);
      Value lastLane = kb.idx(tb.lanes - 1);
      SmallVector<Value> zeros(kTailStartRow, kb.idx(0));
      SmallVector<Value> totals = kb.loopStep(
          kb.idx(0), kb.idx(E), kb.idx(tb.threads), zeros, [&](Value base, ValueRange run) {
            Value e = kb.add(base, tb.tid), ok = kb.ult(e, kb.idx(E)), head;
            SmallVector<Value> items = itemsOf(countOf(e, ok), head);
            SmallVector<Value> incl;
            for (int64_t r = 0; r < kTailStartRow; ++r)
              incl.push_back(kb.warpPrefixIndex(tb, items[r]));
            kb.ifThen(kb.ieq(tb.lane, lastLane), [&] {
              for (int64_t r = 0; r < kTailStartRow; ++r)
                kb.store(toI32(incl[r]), warpTot, {kb.idx(r), tb.warp});
            });
            kb.barrier(tb);
            kb.ifThen(kb.ieq(tb.warp, kb.idx(0)), [&] {
              Value has = kb.ult(tb.lane, kb.idx(tb.warps));
              Value w = kb.minu(tb.lane, kb.idx(tb.warps - 1));
              for (int64_t r = 0; r < kTailStartRow; ++r) {
                Value v = kb.select(has, kb.toIndex(kb.load(warpTot, {kb.idx(r), w})), kb.idx(0));
                Value iw = kb.warpPrefixIndex(tb, v);
                kb.ifThen(has, [&] { kb.store(toI32(kb.sub(iw, v)), warpOff, {kb.idx(r), w}); });
                kb.ifThen(kb.ieq(tb.lane, lastLane),
                          [&] { kb.store(toI32(iw), roundTot, {kb.idx(r)}); });
              }
            });
            kb.barrier(tb);
            SmallVector<Value> starts, next;
            for (int64_t r = 0; r < kTailStartRow; ++r) {
              Value off = kb.toIndex(kb.load(warpOff, {kb.idx(r), tb.warp}));
              starts.push_back(kb.add(run[r], kb.add(off, kb.sub(incl[r], items[r]))));
              next.push_back(kb.add(run[r], kb.toIndex(kb.load(roundTot, {kb.idx(r)}))));
            }
            storeStarts(e, ok, starts, head);
            kb.barrier(tb); // the next round rewrites the warps' totals
            return next;
          });
      kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] { storeTotals(totals); });
    } else {
      kb.ifThen(kb.ieq(tb.warp, kb.idx(0)), [&] {
        Value lanes = kb.idx(tb.lanes), lastLane = kb.idx(tb.lanes - 1);
        SmallVector<Value> zeros(kTailStartRow, kb.idx(0));
        SmallVector<Value> totals = kb.loopStep(
            kb.idx(0), kb.idx(E), lanes, zeros, [&](Value base, ValueRange run) {
              Value e = kb.add(base, tb.lane), ok = kb.ult(e, kb.idx(E)), head;
              SmallVector<Value> items = itemsOf(countOf(e, ok), head);
              SmallVector<Value> starts, next;
              for (int64_t r = 0; r < kTailStartRow; ++r) {
                Value incl = kb.warpPrefixIndex(tb, items[r]);
                starts.push_back(kb.add(run[r], kb.sub(incl, items[r])));
                next.push_back(kb.add(run[r], kb.warpBroadcastIndex(tb, incl, lastLane)));
              }
              storeStarts(e, ok, starts, head);
              return next;
            });
        kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] { storeTotals(totals); });
      });
    }
    kb.barrier(tb);
    kb.strided(tb, kb.idx(0), P, [&](Value p) {
      Value e = expertOf(p);
      kb.ifThen(kb.ult(e, kb.idx(E)), [&] {
        Value pos = atomicInc(cursor, e);
        kb.store(toI32(p), perm, {kb.div(pos, K), kb.rem(pos, K)});
      });
    });
  });
}

/// The routed experts on tensor cores (bf16 activations, every weight MXFP4
/// in the kernel layout, an mma.sync target): after the grouping, the up
/// projection (W1 and W3 tiles of the same hidden rows side by side in a
/// warp, GLU in registers, hid stored at the pair's group position) and the
/// down projection (hid rows contiguous per group, outputs scattered to the
/// pairs), chained in one persistent launch (mxfpGroupedMmaChain; an
/// expert's down items start once its up items are done) or, with
/// K3C_MOE_CHAIN=0 and for the split tails, one mxfpGroupedMma launch each.
/// Measured on the H200 (session 31): decode of 8 / 16 / 64 sequences 6-7.5 %
/// faster chained, on the slice and at K3's 896 experts. Token tiles of 16 rows
/// when the launch has at most K3C_MOE_TILE16_UPTO (default 32; 16 where the
/// warpgroup kernels take over above it) pairs per expert on average
/// (decode: weights streamed once, little padding), else 64.
/// K3C_MOE_TILE128_FROM=N adds 128-row tiles (two row warps sharing each
/// decoded weight tile) from N pairs per expert: measured slower than 64-row
/// tiles on the H200 (docs/perf.md), so off by default.
static bool expertsOnTensorCores(ExpertMlpOp x, KernelBuilder &kb, LowerState &st) {
  if (!kb.gpu() || !kb.info().mmaSync || intFromEnv("K3C_MOE_MMA", 1) == 0)
    return false;
  if (!cast<RankedTensorType>(x.getResult().getType()).getElementType().isBF16() ||
      !cast<RankedTensorType>(x.getInput().getType()).getElementType().isBF16())
    return false;
  for (Value w : {x.getW1(), x.getW3(), x.getW2()}) {
    auto it = st.mxfp4.find(w);
    if (it == st.mxfp4.end())
      return false;
    auto layout = it->second.type.getLayout();
    int64_t kt = layout ? layout.getKTile() : 0;
    if (!layout || layout.getNTile() != 8 || (kt != 32 && kt != 64 && kt != 128) ||
        it->second.type.getShape().back() % kt)
      return false;
  }
  return true;
}

/// K3C_MOE_CHAIN (0 or 1, default 1): the register-decode up and down
/// projections of a step in one chained launch (mxfpGroupedMmaChain): the
/// down items fill the up GEMM's last round and one launch is saved. The
/// slice's decode of 16 sequences 0.922 -> 0.854 ms, K3's experts at 64
/// sequences 3.01 -> 2.79 ms (H200, session 31; docs/perf.md).
static bool moeChain() {
  const int64_t c = intFromEnv("K3C_MOE_CHAIN", 1);
  if (c != 0 && c != 1)
    llvm::report_fatal_error("k3c: K3C_MOE_CHAIN must be 0 or 1, got " + llvm::Twine(c),
                             /*gen_crash_diag=*/false);
  return c == 1;
}

static void lowerExpertsMma(ExpertMlpOp experts, KernelBuilder &kb, LowerState &st, Value P,
                            int64_t K, int64_t L, int64_t I, int64_t E, const TailPlan &tails) {
  Operation *op = experts.getOperation();
  Value z = st.get(experts.getInput()), y = st.get(experts.getResult());
  Value hid = st.scratch[op][0], groups = st.scratch[op][1], perm = st.scratch[op][2];
  const MXFP4Buffers *w1 = &st.mxfp4.find(experts.getW1())->second;
  const MXFP4Buffers *w3 = &st.mxfp4.find(experts.getW3())->second;
  const MXFP4Buffers *w2 = &st.mxfp4.find(experts.getW2())->second;
  const int64_t warps = 4; // column warps of a block (x warpsM row warps)
  auto pairAt = [&](Value pos) { return kb.toIndex(kb.load(perm, {kb.div(pos, K), kb.rem(pos, K)})); };
  // `tail`: the split tails of the warpgroup launch (moeTailUpTo): one tile
  // a group at most, rows from the group's tail start to its end; `bm` one
  // of kExpertTileRows, or of kTailRows for tails.
  auto run = [&](int64_t bm, bool tail) {
    // Knobs (compile time): K3C_MOE_CTAS_<bm> blocks an SM, K3C_MOE_STAGES_<bm>.
    const std::string sfx = "_" + std::to_string(bm);
    const int64_t ctas = intFromEnv(("K3C_MOE_CTAS" + sfx).c_str(),
                                    bm == 16 ? 4 : bm == 32 ? 3 : bm <= 64 ? 2 : 1);
    const int64_t grid = kb.info().smCount * ctas;
    MxfpGroupedMma g;
    g.bm = bm;
    g.warpsM = bm == 128 ? 2 : 1;
    g.stages = intFromEnv(("K3C_MOE_STAGES" + sfx).c_str(), 4);
    // K3C_MOE_LEAN / K3C_MOE_PAIR (MxfpGroupedMma::lean, ::pair): 1 (the
    // default), every height; 0 off; 16, the 16-row tiles only. Measured on
    // the H200: the 16-row tiles in session 28 (the slice's decode of 16 / 64
    // sequences 0.924-0.928 / 1.362 -> 0.891-0.898 / 1.321 ms, logits
    // bit-identical), the taller tails in session 29 (the slice at 8192
    // tokens 23.12 -> 22.42 ms, K3's experts 27.74 -> 27.37 ms).
    auto heightSwitch = [&](const char *name) {
      const int64_t sw = intFromEnv(name, 1);
      if (sw != 0 && sw != 1 && sw != 16)
        llvm::report_fatal_error(llvm::Twine("k3c: ") + name + " must be 0, 1 or 16, got " +
                                     llvm::Twine(sw),
                                 /*gen_crash_diag=*/false);
      return sw == 1 || (sw == 16 && bm == 16);
    };
    g.lean = heightSwitch("K3C_MOE_LEAN");
    g.pair = heightSwitch("K3C_MOE_PAIR");
    g.experts = E;
    g.groupStarts = g.tileStarts = groups;
    g.startsIndex = {kb.idx(0)};
    g.tilesIndex = {kb.idx(tileOffsetsRow(bm))};
    const std::string tailSfx = tail ? "_tail" : "";
    if (tail) {
      g.tilesIndex = {kb.idx(tailTilesRow(bm))};
      g.startsIndex = {kb.idx(kTailStartRow)};
      g.endsIndex = {kb.idx(0)};
      g.endsNext = 1;
    }

    // Up: column tile j = hidden rows [16 warps j, +16 warps); warp w's tiles
    // are W1 rows h, h + 8 and W3 rows h, h + 8 (h = 16 (warps j + w)).
    MxfpGroupedMma up = g;
    up.K = L;
    up.kTile = w1->type.getLayout().getKTile();
    up.nTiles = (I + 16 * warps - 1) / (16 * warps);
    up.a = z;
    up.aRow = [&](Value pos) { return SmallVector<Value>{kb.div(pairAt(pos), K)}; };
    up.wTile = [&](int64_t q, Value warp, Value j, Value e) { // warp: column warp
      Value row0 = kb.add(kb.mul(kb.add(kb.mul(j, warps), warp), 16), kb.idx(8 * (q % 2)));
      return MxfpGroupedMma::WTile{q < 2 ? w1 : w3, e, row0, kb.ult(row0, kb.idx(I))};
    };
    up.epilogue = [&](ArrayRef<Value> acc, Value m0, Value end, Value wn, Value j, Value,
                      ThreadBlock &tb) {
      Value g4 = kb.div(tb.lane, 4), c2 = kb.mul(kb.rem(tb.lane, 4), 2);
      Value h0 = kb.mul(kb.add(kb.mul(j, warps), wn), 16);
      Type act = kb.b.getBF16Type();
      for (int64_t i = 0; i < bm / g.warpsM / 16; ++i)
        for (int64_t q = 0; q < 2; ++q)
          for (int64_t h = 0; h < 2; ++h) {
            Value pos = kb.add(m0, kb.add(g4, kb.idx(16 * i + 8 * h)));
            Value col = kb.add(h0, kb.add(c2, kb.idx(8 * q)));
            SmallVector<Value> v;
            for (int64_t k = 0; k < 2; ++k) {
              Value gate = kb.round(acc[(i * 4 + q) * 4 + 2 * h + k], act);
              Value upv = kb.round(acc[(i * 4 + q + 2) * 4 + 2 * h + k], act);
              v.push_back(kb.glu(experts.getActivation(), experts.getSituBeta(),
                                 experts.getSituLinearBeta(), gate, upv));
            }
            kb.ifThen(kb.andi(kb.ult(pos, end), kb.ult(col, kb.idx(I))), [&] {
              storePair(kb, hid, {kb.div(pos, K), kb.rem(pos, K), col}, v[0], v[1]);
            });
          }
    };
    up.name = "experts_up_mxfp4_mma_" + std::to_string(bm) + tailSfx;

    // Down: column tile j = latent rows [32 warps j, +32 warps), warp w's
    // tiles its four 8-row tiles; the A rows are hid at the group positions.
    MxfpGroupedMma down = g;
    down.K = I;
    down.kTile = w2->type.getLayout().getKTile();
    down.nTiles = (L + 32 * warps - 1) / (32 * warps);
    down.a = hid;
    down.aRow = [&](Value pos) { return SmallVector<Value>{kb.div(pos, K), kb.rem(pos, K)}; };
    down.wTile = [&](int64_t q, Value warp, Value j, Value e) {
      Value row0 = kb.add(kb.mul(kb.add(kb.mul(j, warps), warp), 32), kb.idx(8 * q));
      return MxfpGroupedMma::WTile{w2, e, row0, kb.ult(row0, kb.idx(L))};
    };
    down.epilogue = [&](ArrayRef<Value> acc, Value m0, Value end, Value wn, Value j, Value,
                        ThreadBlock &tb) {
      Value g4 = kb.div(tb.lane, 4), c2 = kb.mul(kb.rem(tb.lane, 4), 2);
      Value n0 = kb.mul(kb.add(kb.mul(j, warps), wn), 32);
      for (int64_t i = 0; i < bm / g.warpsM / 16; ++i)
        for (int64_t h = 0; h < 2; ++h) {
          Value pos = kb.add(m0, kb.add(g4, kb.idx(16 * i + 8 * h)));
          kb.ifThen(kb.ult(pos, end), [&] {
            Value pair = pairAt(pos), t = kb.div(pair, K), slot = kb.rem(pair, K);
            for (int64_t q = 0; q < 4; ++q) {
              Value col = kb.add(n0, kb.add(c2, kb.idx(8 * q)));
              kb.ifThen(kb.ult(col, kb.idx(L)), [&] {
                storePair(kb, y, {t, slot, col}, acc[(i * 4 + q) * 4 + 2 * h],
                          acc[(i * 4 + q) * 4 + 2 * h + 1]);
              });
            }
          });
        }
    };
    down.name = "experts_down_mxfp4_mma_" + std::to_string(bm) + tailSfx;
    // One launch for both (K3C_MOE_CHAIN, default 1): an expert's down items
    // start once its up items are done, so the down items fill the up
    // GEMM's last round. Not for the split tails (several launches a step
    // would share the grouping's counts).
    if (!tail && moeChain()) {
      MxfpGroupedChain c{up, down, groups, {kb.idx(kSyncRow)},
                         "experts_mxfp4_mma_" + std::to_string(bm) + "_chain"};
      c.splitBelow = moeSplitBelow();
      c.partials = st.scratch[op][3]; // [moeSplitItems(), ...]
      c.counts = st.scratch[op][4];
      if (c.splits())
        c.name += "_splitk";
      mxfpGroupedMmaChain(kb, c, grid);
    } else {
      mxfpGroupedMma(kb, up, grid);
      mxfpGroupedMma(kb, down, grid);
    }
  };
  // Warpgroup MMA (sm_90a) above K3C_MOE_WGMMA_FROM pairs per expert on
  // average (default 16, and the 16-row tiles end there: every launch above
  // 16 pairs an expert. With split tails it beat the 64-row mma.sync tiles by
  // 14-19 % at 34-73 pairs an expert (session 26) and the 16-row tiles by 2
  // and 15 % at K3's 18 and 27, 3 % behind them on the 256-expert slice at 20
  // (session 27), docs/perf.md): 128-row token tiles, each
  // weight tile decoded once per block into shared memory
  // (mxfpGroupedWgmma); K3C_MOE_WGMMA=0: off.
  // Knobs (compile time): K3C_MOE_WGMMA_BM (128 or 64 token rows),
  // K3C_MOE_WGMMA_BN (256 or 128 weight rows), _STAGES, _CTAS (blocks an SM).
  // Taller tiles over fewer weight rows (192 x 96, 256 x 128) measured
  // slower at every prefill shape and were removed (docs/perf.md). With
  // split tails (moeTailUpTo, 128-row tiles) the warpgroup launches cover
  // each group's head rows and the register-decode launches (run(h, true))
  // its tail.
  auto runWgmma = [&] {
    const int64_t bm = intFromEnv("K3C_MOE_WGMMA_BM", 128);
    MxfpGroupedWgmma g;
    g.bm = bm;
    g.bn = intFromEnv("K3C_MOE_WGMMA_BN", 256);
    g.stages = intFromEnv("K3C_MOE_WGMMA_STAGES", 4);
    g.experts = E;
    g.groupStarts = g.tileStarts = groups;
    g.startsIndex = {kb.idx(0)};
    g.tilesIndex = {kb.idx(tileOffsetsRow(bm))};
    const bool split = !tails.heights.empty() && bm == 128;
    if (split) {
      g.tilesIndex = {kb.idx(kHeadTilesRow)};
      g.endsIndex = {kb.idx(kTailStartRow)};
    }
    const int64_t grid = kb.info().smCount * intFromEnv("K3C_MOE_WGMMA_CTAS", 1);

    // Up: column tile j = hidden rows [128 j, +128): B tile q is W1 (q even)
    // or W3 (q odd) rows 128 j + 8 (q / 2) ..; GLU of the rounded pair.
    MxfpGroupedWgmma up = g;
    up.K = L;
    up.kTile = w1->type.getLayout().getKTile();
    up.nTiles = (I + g.bn / 2 - 1) / (g.bn / 2);
    up.a = z;
    up.aRow = [&](Value pos) { return SmallVector<Value>{kb.div(pairAt(pos), K)}; };
    up.wTile = [&](int64_t parity, Value q, Value j, Value e) {
      Value row0 = kb.add(kb.mul(j, g.bn / 2), kb.mul(kb.div(q, 2), 8));
      return MxfpGroupedMma::WTile{parity ? w3 : w1, e, row0, kb.ult(row0, kb.idx(I))};
    };
    up.epilogue = [&](const std::function<Value(int64_t)> &accAt, Value rowBase, Value end,
                      Value j, Value, ThreadBlock &tb) {
      Value c2 = kb.mul(kb.rem(tb.lane, 4), 2);
      Type act = kb.b.getBF16Type();
      for (int64_t h = 0; h < 2; ++h) {
        Value pos = kb.add(rowBase, 8 * h);
        kb.ifThen(kb.ult(pos, end), [&] {
          Value t = kb.div(pos, K), slot = kb.rem(pos, K);
          for (int64_t n = 0; n < g.bn / 8; n += 2) {
            Value col = kb.add(kb.add(kb.mul(j, g.bn / 2), kb.idx(4 * n)), c2);
            SmallVector<Value> v;
            for (int64_t k = 0; k < 2; ++k) {
              Value gate = kb.round(accAt(4 * n + 2 * h + k), act);
              Value upv = kb.round(accAt(4 * (n + 1) + 2 * h + k), act);
              v.push_back(kb.glu(experts.getActivation(), experts.getSituBeta(),
                                 experts.getSituLinearBeta(), gate, upv));
            }
            kb.ifThen(kb.ult(col, kb.idx(I)), [&] { storePair(kb, hid, {t, slot, col}, v[0], v[1]); });
          }
        });
      }
    };
    up.name = "experts_up_mxfp4_wgmma_" + std::to_string(bm);
    mxfpGroupedWgmma(kb, up, grid);

    // Down: column tile j = latent rows [256 j, +256), B tile q W2 rows
    // 256 j + 8 q ..; outputs scattered to the pairs.
    MxfpGroupedWgmma down = g;
    down.K = I;
    down.kTile = w2->type.getLayout().getKTile();
    down.nTiles = (L + g.bn - 1) / g.bn;
    down.a = hid;
    down.aRow = [&](Value pos) { return SmallVector<Value>{kb.div(pos, K), kb.rem(pos, K)}; };
    down.wTile = [&](int64_t, Value q, Value j, Value e) {
      Value row0 = kb.add(kb.mul(j, g.bn), kb.mul(q, 8));
      return MxfpGroupedMma::WTile{w2, e, row0, kb.ult(row0, kb.idx(L))};
    };
    down.epilogue = [&](const std::function<Value(int64_t)> &accAt, Value rowBase, Value end,
                        Value j, Value, ThreadBlock &tb) {
      Value c2 = kb.mul(kb.rem(tb.lane, 4), 2);
      for (int64_t h = 0; h < 2; ++h) {
        Value pos = kb.add(rowBase, 8 * h);
        kb.ifThen(kb.ult(pos, end), [&] {
          Value pair = pairAt(pos), t = kb.div(pair, K), slot = kb.rem(pair, K);
          for (int64_t n = 0; n < g.bn / 8; ++n) {
            Value col = kb.add(kb.add(kb.mul(j, g.bn), kb.idx(8 * n)), c2);
            kb.ifThen(kb.ult(col, kb.idx(L)), [&] {
              storePair(kb, y, {t, slot, col}, accAt(4 * n + 2 * h), accAt(4 * n + 2 * h + 1));
            });
          }
        });
      }
    };
    down.name = "experts_down_mxfp4_wgmma_" + std::to_string(bm);
    mxfpGroupedWgmma(kb, down, grid);
    if (split)
      for (int64_t h : tails.heights)
        run(h, true);
  };
  bool wgmma = kb.info().wgmma && intFromEnv("K3C_MOE_WGMMA", 1) && L % 64 == 0 && I % 64 == 0;
  for (const MXFP4Buffers *w : {w1, w3, w2})
    wgmma = wgmma && w->type.getLayout().getKTile() >= 64;
  const int64_t wgmmaFrom = intFromEnv("K3C_MOE_WGMMA_FROM", 16);
  // The 16-row tiles end where the warpgroup kernels begin (at most 32 pairs
  // an expert): on sm_90a above 16 pairs by default, elsewhere above 32.
  const int64_t tile16UpTo = std::max<int64_t>(
      0, intFromEnv("K3C_MOE_TILE16_UPTO", wgmma ? std::min<int64_t>(32, wgmmaFrom) : 32));
  Value upTo16 = kb.idx(tile16UpTo * E);
  const int64_t from128 = intFromEnv("K3C_MOE_TILE128_FROM", 0);
  auto above16 = [&] {
    if (from128 <= 0)
      return run(kExpertTileRows[1], false);
    kb.ifThenElse(
        kb.ult(P, kb.idx(from128 * E)), [&] { run(kExpertTileRows[1], false); },
        [&] { run(kExpertTileRows[2], false); });
  };
  kb.ifThenElse(kb.ule(P, upTo16), [&] { run(kExpertTileRows[0], false); }, [&] {
    if (!wgmma)
      return above16();
    // From the 16-row tiles' end (the default): no 64-row launch.
    if (wgmmaFrom <= tile16UpTo)
      return runWgmma();
    kb.ifThenElse(kb.ult(P, kb.idx(wgmmaFrom * E)), above16, runWgmma);
  });
}

/// The routed experts as grouped GEMMs. Launch 1 groups the (token, slot)
/// pairs by expert (groupPairs). On tensor-core targets with bf16
/// activations and MXFP4 weights, lowerExpertsMma; otherwise (the host, the
/// exact f32 build) the FMA tiles: launch 2, a block per (expert, 32 hidden
/// rows): the expert's tokens in tiles of kTokTile, gathered into shared
/// memory, times W1 and W3 rows dequantized from MXFP4 in registers, GLU,
/// into `hid`. Launch 3, a block per (expert, 32 latent rows): hid times W2.
/// Each weight row is streamed once per token tile of its expert instead of
/// once per token.
static void lowerGroupedExperts(ExpertMlpOp experts, KernelBuilder &kb, LowerState &st) {
  Operation *op = experts.getOperation();
  Value z = st.get(experts.getInput()), idx = st.get(experts.getIndices()),
        y = st.get(experts.getResult());
  Value hid = st.scratch[op][0], groups = st.scratch[op][1], perm = st.scratch[op][2];
  auto res = cast<MemRefType>(y.getType());
  int64_t K = res.getDimSize(1), L = res.getDimSize(2);
  int64_t I = cast<MemRefType>(hid.getType()).getDimSize(2);
  int64_t E = cast<MemRefType>(groups.getType()).getDimSize(1) - 1;
  Type act = res.getElementType();
  Value T = kb.dim(z, 0), P = kb.mul(T, K);

  // 1. Group the pairs by expert.
  const TailPlan tails = moeTailPlan();
  groupPairs(kb, idx, groups, perm, P, E, K, tails);
  if (expertsOnTensorCores(experts, kb, st)) {
    lowerExpertsMma(experts, kb, st, P, K, L, I, E, tails);
    return;
  }

  // W[e, n, k..k+width) from a dense or MXFP4 stacked weight, in fp32.
  auto weights = [&](Value tensor, Value e, Value n, Value k, int64_t width) {
    auto it = st.mxfp4.find(tensor);
    if (it == st.mxfp4.end())
      return kb.loadVec(st.get(tensor), {e, n, k}, width);
    SmallVector<Value> out;
    for (int64_t j = 0; j < width; ++j)
      out.push_back(kb.mxfp4Element(it->second, e, n, j ? kb.add(k, j) : k));
    return out;
  };
  auto denseWidth = [&](Value tensor, int64_t rowLen) {
    return st.mxfp4.count(tensor) ? kb.vecWidth(z, rowLen)
                                  : std::min(kb.vecWidth(z, rowLen),
                                             kb.vecWidth(st.get(tensor), rowLen));
  };
  int64_t warps = kb.gpu() ? kExpertThreads / 32 : 1, rowsPerBlock = kRowsPerWarp * warps;
  // A tile of an expert's group: pair ids of tile rows tt (valid if < end).
  auto pairAt = [&](Value pos) { return kb.toIndex(kb.load(perm, {kb.div(pos, K), kb.rem(pos, K)})); };

  // One grouped GEMM launch: a block per (expert, rowsPerBlock output rows)
  // walks the expert's pairs in tiles of kTokTile, `a`'s rows gathered by
  // `prefix(pair)`, `nRows` weight rows a warp (wLoad), then stores each
  // (row r, tile row tt) result through `store(acc, r, pos, i)`.
  auto groupedGemm = [&](Value a, int64_t inner, int64_t outer, int64_t vw, int64_t nRows,
                         const std::function<SmallVector<Value>(ValueRange)> &prefix,
                         const std::function<SmallVector<Value>(Value, ArrayRef<Value>, int64_t,
                                                                Value, int64_t)> &wLoad,
                         const std::function<void(ArrayRef<Value>, int64_t, int64_t, Value,
                                                  Value, Value)> &store,
                         const std::function<MxRow(Value, ArrayRef<Value>, int64_t)> &mxOf) {
    kb.blocks({kb.idx(E), kb.idx((outer + rowsPerBlock - 1) / rowsPerBlock)}, kExpertThreads,
              [&](ValueRange bid, ThreadBlock &tb) {
      Value e = bid[0];
      Value r0 = kb.add(kb.mul(bid[1], rowsPerBlock), kb.mul(tb.warp, kRowsPerWarp));
      SmallVector<Value> rows;
      for (int64_t r = 0; r < kRowsPerWarp; ++r)
        rows.push_back(kb.minu(kb.add(r0, r), kb.idx(outer - 1)));
      Value begin = kb.toIndex(kb.load(groups, {kb.idx(0), e})),
            end = kb.toIndex(kb.load(groups, {kb.idx(0), kb.add(e, 1)}));
      kb.loopStep(begin, end, kb.idx(kTokTile), [&](Value g0) {
        SmallVector<Value> acc = gemmTile(
            kb, tb, a, inner, vw, nRows,
            [&](Value tt) {
              Value pos = kb.add(g0, tt), ok = kb.ult(pos, end);
              Value pair = pairAt(kb.minu(pos, kb.sub(end, kb.idx(1))));
              return ActRow{ok, prefix({kb.div(pair, K), kb.rem(pair, K)})};
            },
            [&](int64_t r, Value k, int64_t width) { return wLoad(e, rows, r, k, width); },
            kTokTile,
            mxOf ? std::function<MxRow(int64_t)>([&](int64_t r) { return mxOf(e, rows, r); })
                 : std::function<MxRow(int64_t)>());
        for (int64_t r = 0; r < kRowsPerWarp; ++r)
          for (int64_t tt = 0; tt < kTokTile; ++tt) {
            Value pos = kb.add(g0, kb.idx(tt)), i = kb.add(r0, kb.idx(r));
            Value ok = kb.andi(kb.andi(kb.ieq(tb.lane, kb.idx(0)), kb.ult(pos, end)),
                               kb.ult(i, kb.idx(outer)));
            SmallVector<Value> sums;
            for (int64_t q = r; q < nRows; q += kRowsPerWarp)
              sums.push_back(kb.warpSum(tb, acc[q * kTokTile + tt]));
            kb.ifThen(ok, [&] {
              Value pair = pairAt(pos);
              store(sums, r, tt, kb.div(pair, K), kb.rem(pair, K), i);
            });
          }
      });
    });
  };

  // MXFP4 rows for the fragment path of gemmTile: rows r < kRowsPerWarp of
  // `first`, the rest of `second` (W1 / W3 of the up projection), when every
  // weight involved is MXFP4.
  auto mxOf = [&](Value first, Value second) -> std::function<MxRow(Value, ArrayRef<Value>, int64_t)> {
    if (!st.mxfp4.count(first) || (second && !st.mxfp4.count(second)))
      return {};
    const MXFP4Buffers *a = &st.mxfp4.find(first)->second;
    const MXFP4Buffers *b = second ? &st.mxfp4.find(second)->second : a;
    return [a, b](Value e, ArrayRef<Value> rows, int64_t r) {
      int64_t n = static_cast<int64_t>(rows.size());
      return r < n ? MxRow{a, e, rows[r]} : MxRow{b, e, rows[r - n]};
    };
  };

  // 2. hid[pair, i] = act(z W1[e, i], z W3[e, i]) for the expert's pairs.
  int64_t vwUp = std::min(denseWidth(experts.getW1(), L), denseWidth(experts.getW3(), L));
  groupedGemm(
      z, L, I, vwUp, 2 * kRowsPerWarp, [&](ValueRange ts) { return SmallVector<Value>{ts[0]}; },
      [&](Value e, ArrayRef<Value> rows, int64_t r, Value k, int64_t width) {
        return r < kRowsPerWarp ? weights(experts.getW1(), e, rows[r], k, width)
                                : weights(experts.getW3(), e, rows[r - kRowsPerWarp], k, width);
      },
      [&](ArrayRef<Value> sums, int64_t, int64_t, Value t, Value slot, Value i) {
        Value a = kb.round(sums[0], act), b = kb.round(sums[1], act);
        kb.storeF32(kb.glu(experts.getActivation(), experts.getSituBeta(),
                           experts.getSituLinearBeta(), a, b),
                    hid, {t, slot, i});
      },
      mxOf(experts.getW1(), experts.getW3()));

  // 3. y[pair, l] = hid[pair] W2[e, l] for the expert's pairs.
  int64_t vwDown = std::min(kb.vecWidth(hid, I), st.mxfp4.count(experts.getW2())
                                                    ? kb.vecWidth(hid, I)
                                                    : kb.vecWidth(st.get(experts.getW2()), I));
  groupedGemm(
      hid, I, L, vwDown, kRowsPerWarp,
      [&](ValueRange ts) { return SmallVector<Value>{ts[0], ts[1]}; },
      [&](Value e, ArrayRef<Value> rows, int64_t r, Value k, int64_t width) {
        return weights(experts.getW2(), e, rows[r], k, width);
      },
      [&](ArrayRef<Value> sums, int64_t, int64_t, Value t, Value slot, Value l) {
        kb.storeF32(sums[0], y, {t, slot, l});
      },
      mxOf(experts.getW2(), Value()));
}

/// The router on the GPU, two launches. The logits x W_rᵀ into the fp32
/// scores through the GEMM layer (lowerLinear: the GEMV at one token, FMA
/// or tensor-core tiles above, as every linear): a block per token reading
/// all of W_r kept it on one SM (0.27 ms a decode step for 256 experts on
/// the H200). Then a warp per token: lane l holds experts l + 32 i in
/// registers, softmax by warp reductions (or the sigmoid), and k rounds of a
/// warp argmax of score + bias, ties to the lower expert as the serial form
/// (a block's thread 0 scanning all experts k times) had them.
static void lowerRouterGpu(MoeRouterOp router, KernelBuilder &kb, Value x, Value w, Value idx,
                           Value wts, Value bias, Value scores) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const int64_t E = cast<MemRefType>(w.getType()).getDimSize(0), K = router.getTopK();
  const bool sigmoid = router.getScore() == RouterScore::sigmoid;
  lowerLinear(kb, x, w, scores);
  const int64_t per = (E + 31) / 32, warps = kRouterThreads / 32;
  Value T = kb.dim(x, 0);
  Type i32 = b.getI32Type();
  Type it = cast<MemRefType>(idx.getType()).getElementType();
  kb.blocks({kb.ceilDiv(T, warps)}, kRouterThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value t = kb.add(kb.mul(bid[0], warps), tb.warp);
    // Every lane of a warp past T runs the shuffles on the last token and
    // stores nothing.
    Value tc = kb.minu(t, kb.sub(T, kb.idx(1)));
    auto shfl = [&](Value v, int64_t off) {
      return kb.shuffle(v, kb.idx(off), gpu::ShuffleMode::XOR);
    };
    Value negInf = kb.f32(-INFINITY), nan = kb.f32(NAN);
    // Lane l's experts l + 32 i (ec: clamped to E - 1 for the loads).
    SmallVector<Value> e(per), ec(per), ok(per), v(per), cand(per);
    for (int64_t i = 0; i < per; ++i) {
      Value ei = kb.add(tb.lane, kb.idx(32 * i));
      e[i] = arith::IndexCastOp::create(b, loc, i32, ei);
      ec[i] = kb.minu(ei, kb.idx(E - 1));
      ok[i] = kb.ult(ei, kb.idx(E));
      Value l = kb.load(scores, {tc, ec[i]});
      v[i] = sigmoid ? kb.sigmoid(l) : l;
    }
    if (!sigmoid) { // softmax over the experts
      Value mx = negInf;
      for (int64_t i = 0; i < per; ++i)
        mx = kb.fmax(mx, kb.select(ok[i], v[i], negInf));
      mx = kb.warpMax(tb, mx);
      Value z = kb.f32(0.0);
      for (int64_t i = 0; i < per; ++i) {
        v[i] = kb.exp(kb.fsub(v[i], mx));
        z = kb.fadd(z, kb.select(ok[i], v[i], kb.f32(0.0)));
      }
      z = kb.warpSum(tb, z);
      for (int64_t i = 0; i < per; ++i)
        v[i] = kb.fdiv(v[i], z);
    }
    // Candidates: score (+ bias); experts past E and taken ones are NaN,
    // which no comparison prefers.
    for (int64_t i = 0; i < per; ++i) {
      Value c = v[i];
      if (bias)
        c = kb.fadd(c, kb.loadF32(bias, {ec[i]}));
      cand[i] = kb.select(ok[i], c, nan);
    }
    // A round with no candidate above -inf (NaN or -inf scores) picks
    // expert 0 with its score, as the serial form does: NaN logits give NaN
    // weights, not zeros.
    Value score0 = kb.shuffle(v[0], kb.idx(0), gpu::ShuffleMode::IDX);
    SmallVector<Value> pick(K), picked(K);
    Value total = kb.f32(0.0);
    for (int64_t slot = 0; slot < K; ++slot) {
      Value bv = negInf, bi = kb.i32Const(0), bs = score0;
      for (int64_t i = 0; i < per; ++i) { // ascending experts: the first maximum
        Value better = kb.fgt(cand[i], bv);
        bv = kb.select(better, cand[i], bv);
        bi = kb.select(better, e[i], bi);
        bs = kb.select(better, v[i], bs);
      }
      for (int64_t off = 16; off >= 1; off /= 2) {
        Value ov = shfl(bv, off), oi = shfl(bi, off), os = shfl(bs, off);
        Value lower = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, oi, bi);
        Value take = arith::OrIOp::create(
            b, loc, kb.fgt(ov, bv),
            arith::AndIOp::create(b, loc,
                                  arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, ov, bv),
                                  lower));
        bv = kb.select(take, ov, bv);
        bi = kb.select(take, oi, bi);
        bs = kb.select(take, os, bs);
      }
      for (int64_t i = 0; i < per; ++i)
        cand[i] = kb.select(
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, e[i], bi), nan, cand[i]);
      pick[slot] = bi;
      picked[slot] = bs;
      total = kb.fadd(total, bs);
    }
    Value scaling = kb.f32(router.getRoutedScalingFactor().convertToDouble());
    kb.ifThen(kb.andi(kb.ult(t, T), kb.ieq(tb.lane, kb.idx(0))), [&] {
      for (int64_t slot = 0; slot < K; ++slot) {
        Value s = picked[slot];
        if (router.getRenormalize())
          s = kb.fdiv(s, kb.fadd(total, kb.f32(1e-20)));
        Value id = it == i32 ? pick[slot] : arith::ExtSIOp::create(b, loc, it, pick[slot]).getResult();
        kb.store(id, idx, {t, kb.idx(slot)});
        kb.store(kb.fmul(s, scaling), wts, {t, kb.idx(slot)});
      }
    });
  }, 0, "router_topk");
}

std::optional<LogicalResult> lowerMoeFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  if (auto router = dyn_cast<MoeRouterOp>(op)) {
    Value x = st.get(router.getInput()), w = st.get(router.getWeight()),
          idx = st.get(router.getIndices()), wts = st.get(router.getWeights());
    Value bias = router.getBias() ? st.get(router.getBias()) : Value();
    Value scores = st.scratch[op][0];
    int64_t E = cast<MemRefType>(w.getType()).getDimSize(0);
    int64_t D = cast<MemRefType>(w.getType()).getDimSize(1), K = router.getTopK();
    bool sigmoid = router.getScore() == RouterScore::sigmoid;
    if (kb.gpu() && E <= kRouterWarpTopKMaxExperts) {
      lowerRouterGpu(router, kb, x, w, idx, wts, bias, scores);
      return success();
    }
    // The host (and GPU routers over more experts than a warp's registers
    // hold): a block per token, a warp per expert logit (lanes split D,
    // 16-byte loads), then one thread normalizes and selects the top k.
    int64_t vw = std::min(kb.vecWidth(x, D), kb.vecWidth(w, D));
    kb.blocks({kb.dim(x, 0)}, kRouterThreads, [&](ValueRange bid, ThreadBlock &tb) {
      Value t = bid[0];
      kb.loopStep(tb.warp, kb.idx(E), kb.idx(tb.warps), [&](Value e) {
        Value l = kb.warpDot(
            tb, D, vw, [&](Value d) { return kb.loadVec(x, {t, d}, vw); },
            [&](Value d) { return kb.loadVec(w, {e, d}, vw); });
        kb.ifThen(kb.ieq(tb.lane, kb.idx(0)),
                  [&] { kb.store(sigmoid ? kb.sigmoid(l) : l, scores, {t, e}); });
      });
      kb.barrier(tb);
      kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
      if (!sigmoid) { // softmax over experts
        Value mx = kb.loop(kb.idx(0), kb.idx(E), ValueRange{kb.f32(-INFINITY)},
                           [&](Value e, ValueRange a) {
                             return SmallVector<Value>{kb.fmax(a[0], kb.load(scores, {t, e}))};
                           })[0];
        Value z = kb.sum(kb.idx(0), kb.idx(E), [&](Value e) {
          return kb.exp(kb.fsub(kb.load(scores, {t, e}), mx));
        });
        kb.loop(kb.idx(0), kb.idx(E), [&](Value e) {
          kb.store(kb.fdiv(kb.exp(kb.fsub(kb.load(scores, {t, e}), mx)), z), scores, {t, e});
        });
      }
      Type it = cast<MemRefType>(idx.getType()).getElementType();
      Value total = kb.f32(0.0);
      for (int64_t slot = 0; slot < K; ++slot) {
        auto best = kb.loop(kb.idx(0), kb.idx(E), ValueRange{kb.f32(-INFINITY), kb.idx(0)},
                            [&](Value e, ValueRange a) {
                              Value cand = kb.load(scores, {t, e});
                              if (bias)
                                cand = kb.fadd(cand, kb.loadF32(bias, {e}));
                              Value taken = arith::ConstantIntOp::create(kb.b, kb.loc, kb.b.getI1Type(), 0);
                              for (int64_t p = 0; p < slot; ++p) {
                                Value prev = kb.toIndex(kb.load(idx, {t, kb.idx(p)}));
                                taken = arith::OrIOp::create(kb.b, kb.loc, taken, kb.ieq(prev, e));
                              }
                              Value better = arith::AndIOp::create(
                                  kb.b, kb.loc, kb.fgt(cand, a[0]),
                                  arith::XOrIOp::create(
                                      kb.b, kb.loc, taken,
                                      arith::ConstantIntOp::create(kb.b, kb.loc, kb.b.getI1Type(), 1)));
                              return SmallVector<Value>{kb.select(better, cand, a[0]),
                                                        kb.select(better, e, a[1])};
                            });
        kb.store(arith::IndexCastOp::create(kb.b, kb.loc, it, best[1]), idx, {t, kb.idx(slot)});
        Value s = kb.load(scores, {t, best[1]});
        kb.store(s, wts, {t, kb.idx(slot)});
        total = kb.fadd(total, s);
      }
      Value scaling = kb.f32(router.getRoutedScalingFactor().convertToDouble());
      for (int64_t slot = 0; slot < K; ++slot) {
        Value s = kb.load(wts, {t, kb.idx(slot)});
        if (router.getRenormalize())
          s = kb.fdiv(s, kb.fadd(total, kb.f32(1e-20)));
        kb.store(kb.fmul(s, scaling), wts, {t, kb.idx(slot)});
      }
      });
    });
    return success();
  }
  if (auto experts = dyn_cast<ExpertMlpOp>(op)) {
    lowerGroupedExperts(experts, kb, st);
    return success();
  }
  if (auto combine = dyn_cast<MoeCombineOp>(op)) {
    Value x = st.get(combine.getInput()), w = st.get(combine.getWeights()),
          y = st.get(combine.getResult());
    int64_t K = cast<MemRefType>(x.getType()).getDimSize(1);
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value acc = kb.sum(kb.idx(0), kb.idx(K), [&](Value k) {
        return kb.fmul(kb.loadF32(x, {iv[0], k, iv[1]}), kb.load(w, {iv[0], k}));
      });
      kb.storeF32(acc, y, iv);
    });
    return success();
  }
  return std::nullopt;
}

} // namespace k3c::lowering
