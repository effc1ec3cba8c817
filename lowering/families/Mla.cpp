//===- Mla.cpp - gated MLA attention core over the latent cache -----------===//
//
// Kernel contract: docs/kernels.md. Phase 1 appends the new tokens' latent
// (RMSNorm'd c, raw k_pe) to each sequence's cache. Phase 2 is attention in
// one of two forms:
//
//  * absorbed (decode, continued prefill, every host and f32 build): causal
//    softmax attention of each new token over its sequence's cache in the
//    latent space (kv_b absorbed into the query and the output: k_nope and v
//    are never materialized) with an online softmax. The reference rounds
//    k_nope and v to the activation type; this form does not (exact in f32
//    builds, within bf16 tolerance in bf16 builds).
//  * up-projected flash prefill (bf16 builds on tensor-core targets, launches
//    of at least kFlashFrom tokens, sequences with no cached context): the
//    new tokens' c_n is up-projected once, k_nope | v = c_n W_kvb^T, by the
//    GEMM layer, then a flash kernel runs per (query tile, head): on sm_90a
//    with warpgroup MMA (flashPrefillWgmma: Q and a cp.async K / V ring in
//    swizzled shared memory, S = Q K^T from shared-memory descriptors, P in
//    registers for O += P V, the next tile's S and this tile's P V in flight
//    while the softmax runs), elsewhere FlashAttention-2 style (Q tile in
//    registers, K / V double-buffered by cp.async, S = Q K^T and O += P V as
//    mma.sync m16n8k16, P reused from the S accumulators as bf16 A
//    fragments); online softmax in registers with ex2, causal tiles only up
//    to the diagonal, heaviest tiles first. Attention at head dims 192 / 128
//    costs 3.4x fewer FLOPs than at 576 / 512 (absorbed), and k_nope and v
//    round to bf16 as in the reference.
//
// The rule (compile time: the target and dtypes; run time: the launch's
// token count and each sequence's cached length) is documented in
// docs/kernels.md.
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <array>
#include <cmath>

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

static int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

namespace {
/// The latent cache as the kernels address it (k3.mla_attention's `cache`
/// and optional `block_table`): contiguous `[N, S_max, cd]`, where position
/// `pos` of sequence `n` is row (n, pos); or paged, a pool `[pages, P, cd]`
/// where it is row pos % P of page table[n][pos / P]. Every read and append
/// goes through row(), so the two layouts share each kernel; a tile of
/// positions may straddle pages (the copies map each row on its own).
struct CacheRef {
  Value mem, table;
  int64_t page = 0;
  /// The two leading indices of (n, pos) in `mem`.
  SmallVector<Value> row(KernelBuilder &kb, Value n, Value pos) const {
    if (!table)
      return {n, pos};
    Value pg = kb.toIndex(kb.load(table, {n, kb.div(pos, page)}));
    return {pg, kb.rem(pos, page)};
  }
  /// The indices of column `c` of (n, pos).
  SmallVector<Value> at(KernelBuilder &kb, Value n, Value pos, Value c) const {
    SmallVector<Value> i = row(kb, n, pos);
    i.push_back(c);
    return i;
  }
  int64_t width() const { return cast<MemRefType>(mem.getType()).getDimSize(2); }
};
} // namespace

namespace {
/// The flash prefill's shape: a block of `warps` warps takes bm = 16 * warps
/// query rows of one head; key / value tiles of bn positions. Head dims are
/// padded to the mma k (16) with zero columns in shared memory.
struct FlashPlan {
  bool on = false;
  int64_t warps = 8, bm = 128, bn = 64, from = 64;
  bool decodeToo = false; ///< decode launches (one token a sequence) take the branch too
  int64_t H = 0, nope = 0, rope = 0, dv = 0, R = 0, qk = 0, qkPad = 0, dvPad = 0;
  /// Warpgroup MMA (sm_90a): warpgroups of 64 query rows (bm / 64 a
  /// block), head dims padded to 64-column blocks of 128-byte swizzled rows,
  /// a `stages`-deep K / V ring (flashPrefillWgmma).
  bool wg = false;
  int64_t stages = 4;
  int64_t qBlocks() const { return roundUp(qk, 64) / 64; }
  int64_t vBlocks() const { return roundUp(dv, 64) / 64; }
  int64_t qPitch() const { return qkPad + 8; } // +16 bytes: conflict-free ldmatrix rows
  int64_t vPitch() const { return dvPad + 8; }
  int64_t qBytes() const { return wg ? qBlocks() * bm * 128 : bm * qPitch() * 2; }
  int64_t kStage() const { return qBlocks() * bn * 128; }
  int64_t vStage() const { return vBlocks() * bn * 128; }
  int64_t kBytes() const { return wg ? stages * kStage() : 2 * bn * qPitch() * 2; }
  int64_t vBytes() const { return wg ? stages * vStage() : 2 * bn * vPitch() * 2; }
  /// wgmma: plus 1 KB to align the tiles to the 1024-byte swizzle atom.
  int64_t sharedBytes() const { return qBytes() + kBytes() + vBytes() + (wg ? 1024 : 0); }
  std::string name() const {
    return std::string(wg ? "flash_wg_" : "flash_") + std::to_string(bm) + "x" +
           std::to_string(bn) + (wg && stages != 4 ? "_s" + std::to_string(stages) : "") + "_d" +
           std::to_string(qk) + "_" + std::to_string(dv);
  }
};
} // namespace

/// Whether (and how) `attn` runs the up-projected flash prefill on `target`:
/// a tensor-core GPU, bf16 q / kv / kv_b, head parts in whole 16-byte chunks.
/// K3C_MLA_FLASH=0 turns it off (the absorbed form everywhere);
/// K3C_MLA_FLASH_WARPS sets the warps (query rows / 16) a block,
/// K3C_MLA_FLASH_FROM the launch size in tokens from which it runs;
/// K3C_MLA_FLASH_DECODE=1 sends decode launches through the prefill branch
/// too (a test of its cached-sequence path: k3-run prefills fresh prompts).
static FlashPlan flashPlan(MlaAttentionOp attn, Target target) {
  FlashPlan p;
  const TargetInfo &info = TargetInfo::get(target);
  auto elt = [](Value v) { return cast<ShapedType>(v.getType()).getElementType(); };
  if (!info.mmaSync || !elt(attn.getQ()).isBF16() || !elt(attn.getKv()).isBF16() ||
      !elt(attn.getKvBProj()).isBF16() || !intFromEnv("K3C_MLA_FLASH", 1))
    return p;
  p.H = attn.getNumHeads();
  p.nope = attn.getQkNopeHeadDim();
  p.dv = attn.getVHeadDim();
  p.R = cast<ShapedType>(attn.getKvBProj().getType()).getDimSize(1);
  p.rope = cast<ShapedType>(attn.getKv().getType()).getDimSize(1) - p.R;
  if (p.nope % 8 || p.rope % 8 || p.dv % 8 || p.R % 8 || p.rope <= 0)
    return p;
  p.qk = p.nope + p.rope;
  p.qkPad = roundUp(p.qk, 16);
  p.dvPad = roundUp(p.dv, 16);
  p.warps = intFromEnv("K3C_MLA_FLASH_WARPS", 8);
  p.bm = 16 * p.warps;
  p.from = std::max<int64_t>(2, intFromEnv("K3C_MLA_FLASH_FROM", 64));
  p.decodeToo = intFromEnv("K3C_MLA_FLASH_DECODE", 0) != 0;
  // Warpgroup MMA where the target has it and the tiles fit in shared memory
  // (K3C_MLA_FLASH_WGMMA=0: the mma.sync kernel). K3C_MLA_FLASH_WG_BM: 128
  // query rows a block (two warpgroups) or 64; K3C_MLA_FLASH_STAGES: the
  // K / V ring's depth, 4 or 3 (the pipelined loop reads tile j's V while
  // tile j + 1 is consumed and j + 2 lands). Key tiles are 64 positions:
  // 128 would not fit a 3-deep ring at K3's head dims.
  if (info.wgmma && intFromEnv("K3C_MLA_FLASH_WGMMA", 1)) {
    FlashPlan w = p;
    w.wg = true;
    w.bm = intFromEnv("K3C_MLA_FLASH_WG_BM", 128);
    w.stages = intFromEnv("K3C_MLA_FLASH_STAGES", 4);
    if (w.bm != 64 && w.bm != 128)
      llvm::report_fatal_error("k3c: K3C_MLA_FLASH_WG_BM must be 64 or 128, got " +
                                   llvm::Twine(w.bm),
                               /*gen_crash_diag=*/false);
    if (w.stages != 3 && w.stages != 4)
      llvm::report_fatal_error("k3c: K3C_MLA_FLASH_STAGES must be 3 or 4, got " +
                                   llvm::Twine(w.stages),
                               /*gen_crash_diag=*/false);
    w.warps = w.bm / 16;
    w.bn = 64;
    if (w.sharedBytes() <= info.maxSharedPerBlock) {
      w.on = true;
      return w;
    }
  }
  // Registers a thread: Q fragments, S and O accumulators.
  int64_t regs = p.qkPad / 16 * 4 + p.bn / 8 * 4 + p.dvPad / 8 * 4;
  if (p.warps < 1 || p.warps > 16 || regs > 200 || p.sharedBytes() > info.maxSharedPerBlock)
    return p;
  p.on = true;
  return p;
}

static bool groupedFits(MlaAttentionOp attn);
static SmallVector<ScratchNeed> splitScratch(MlaAttentionOp attn);

namespace {
/// The tensor-core core of the split decode (bf16 builds on mma.sync
/// targets): a block takes 16 * ht heads of one token (the M dimension of
/// the MMAs: the heads share every cache tile the block reads) over one
/// split of the token's cached positions, in tiles of bn positions streamed
/// by cp.async through a double-buffered ring. The nw warps of a head tile
/// each compute S = q_abs K^T for a 1/nw share of a tile's positions,
/// exchange row maxima through shared memory and write P (bf16) there;
/// then each accumulates O = P V for a 1/nw share of the latent columns
/// (V = the first R columns of the same cache rows). nw = 4 keeps O at 64
/// registers a thread (nw = 2: 128, which spills next to the pipeline's
/// fragments).
struct DecodeMma {
  bool on = false;
  int64_t ht = 3, nw = 4, bn = 64, blocks = 132, H = 0, R = 0, cd = 0, cdPad = 0;
  int64_t chains = 1; ///< independent S accumulator sets (K3C_MLA_DECODE_S_CHAINS)
  int64_t unroll = 2; ///< S's k steps an iteration (K3C_MLA_DECODE_S_UNROLL)
  /// The next grid (the row-sliced combine) may start as this one's blocks
  /// have (KernelBuilder::earlyDependents): its W_UV loads run beside them.
  bool earlyNext = false;
  /// (K3C_MLA_DECODE_EARLY_TILES, on by default since session 52, with grid
  /// dependency control, as the transposed core's) the block's first cache tile goes out before
  /// its grid wait where it holds only positions cached before the round.
  bool earlyTiles = false;
  int64_t heads() const { return 16 * ht; }
  int64_t warps() const { return nw * ht; }
  int64_t groups() const { return (H + heads() - 1) / heads(); }
  int64_t pitch() const { return cdPad + 8; } // +16 bytes: conflict-free ldmatrix rows
  int64_t qBytes() const { return heads() * pitch() * 2; }
  int64_t kBytes() const { return 2 * bn * pitch() * 2; }
  int64_t pBytes() const { return ht * 16 * (bn + 8) * 2; }
  int64_t xBytes() const { return ht * nw * 16 * 4; }
  int64_t sharedBytes() const { return qBytes() + kBytes() + pBytes() + xBytes(); }
};
} // namespace

/// Whether the split decode runs its core on tensor cores on `target`: a
/// tensor-core GPU, a bf16 cache, cache rows of whole 16-byte chunks, R a
/// multiple of 32. K3C_MLA_DECODE_MMA=0 keeps the FMA core;
/// K3C_MLA_DECODE_HEAD_TILES (16-head tiles a block, default 3;
/// K3C_MLA_DECODE_HEAD_TILES_SMALL, default 1, for rounds too small to fill
/// the SMs with the larger blocks: more blocks, the cache tiles shared by
/// fewer heads),
/// K3C_MLA_DECODE_WARPS (warps a head tile: 2 or 4, default 4),
/// K3C_MLA_DECODE_BN (positions a tile, a multiple of 16 nw) and
/// K3C_MLA_DECODE_BLOCKS (blocks a round aims for) tune it.
static DecodeMma decodeMmaPlan(MlaAttentionOp attn, Target target, bool small = false) {
  DecodeMma d;
  const TargetInfo &info = TargetInfo::get(target);
  auto kvType = cast<ShapedType>(attn.getKv().getType());
  if (!info.mmaSync || !kvType.getElementType().isBF16() || !groupedFits(attn) ||
      !intFromEnv("K3C_MLA_DECODE_MMA", 1))
    return d;
  d.H = attn.getNumHeads();
  d.R = cast<ShapedType>(attn.getKvBProj().getType()).getDimSize(1);
  d.cd = kvType.getDimSize(1);
  if (d.cd % 8 || d.R % 32)
    return d;
  d.cdPad = roundUp(d.cd, 16);
  d.ht = std::min(small ? intFromEnv("K3C_MLA_DECODE_HEAD_TILES_SMALL", 1)
                         : intFromEnv("K3C_MLA_DECODE_HEAD_TILES", 3),
                   (d.H + 15) / 16);
  d.bn = intFromEnv("K3C_MLA_DECODE_BN", 64);
  // The small tiles (one-token rounds at batch 1: one 16-head block an SM)
  // may take 8 warps a head tile (K3C_MLA_DECODE_WARPS_SMALL=8, opt-in): 4
  // warps ran one warp a scheduler, issue 9.5 % busy, no eligible warp 89 %
  // of cycles (H200, context 8192, docs/perf.md, session 20); each warp then
  // scores 8 positions a tile. Measured in session 21: 23.7 us for the core
  // as with 4 warps (12 % achieved occupancy, 85 % no eligible warp), so it
  // stays opt-in.
  d.nw = small ? intFromEnv("K3C_MLA_DECODE_WARPS_SMALL", 4) : intFromEnv("K3C_MLA_DECODE_WARPS", 4);
  // S in two accumulator sets (two mma.sync chains of half the length) for
  // the small blocks: mla_attn 39.6 -> 37.2 us at batch 1, context 8192 on
  // the H200 (docs/perf.md, session 33; 4 sets of 9 k steps: 37.6); the
  // 48-head blocks of larger rounds lost with it in session 14.
  d.chains = intFromEnv("K3C_MLA_DECODE_S_CHAINS", small ? 2 : 1);
  if (d.chains != 1 && d.chains != 2 && d.chains != 4)
    llvm::report_fatal_error("k3c: K3C_MLA_DECODE_S_CHAINS must be 1, 2 or 4, got " +
                                 llvm::Twine(d.chains),
                             /*gen_crash_diag=*/false);
  d.unroll = intFromEnv("K3C_MLA_DECODE_S_UNROLL", 2);
  if (d.unroll != 2 && d.unroll != 4)
    llvm::report_fatal_error("k3c: K3C_MLA_DECODE_S_UNROLL must be 2 or 4, got " +
                                 llvm::Twine(d.unroll),
                             /*gen_crash_diag=*/false);
  while (d.nw > 2 && (d.R % (16 * d.nw) || d.bn % (8 * d.nw))) // small latents (k3-tiny)
    d.nw /= 2;
  d.blocks = intFromEnv("K3C_MLA_DECODE_BLOCKS", info.smCount);
  // Registers a thread: O (16 x R/2 a warp) and S (16 x bn/2) accumulators.
  if (d.nw != 2 && d.nw != 4 && d.nw != 8)
    return d;
  // A warp scores bn / nw positions a tile: a multiple of 16 (ldmatrix.x4 of
  // two n8 tiles), or 8 with an even number of k steps (one ldmatrix.x4 gives
  // two k steps' B fragments).
  const int64_t span = d.bn / d.nw;
  const bool spanOk = span % 16 == 0 || (span == 8 && (roundUp(d.cd, 16) / 16) % 2 == 0);
  int64_t regs = d.R / d.nw / 2 + d.bn / d.nw / 2;
  if (d.ht < 1 || d.warps() > 16 || d.bn % d.nw || !spanOk || d.R % (16 * d.nw) || d.blocks < 1 ||
      regs > 192 ||
      d.sharedBytes() > info.maxSharedPerBlock)
    return d;
  d.on = true;
  d.earlyTiles =
      KernelBuilder::switchFromEnv("K3C_MLA_DECODE_EARLY_TILES", true) && info.gridDependencyControl();
  return d;
}

SmallVector<ScratchNeed> mlaScratchNeeds(Operation *op) {
  auto attn = dyn_cast<MlaAttentionOp>(op);
  if (!attn)
    return {};
  // Host and GPU kernels share one calling convention (the manifest's), so
  // the buffers follow the op, not the target (device-only: the host's are
  // stubs without storage): the
  // flash prefill's c_n [T, R] and k_nope | v [T, H (nope + v)] when a
  // tensor-core target would run it, then the split decode's q_abs and
  // partials (fixed sizes) when the grouped kernels fit.
  SmallVector<ScratchNeed> needs;
  FlashPlan p = flashPlan(attn, Target::Gpu);
  if (p.on) {
    Type act = cast<ShapedType>(attn.getKv().getType()).getElementType();
    needs.push_back(ScratchNeed{{-1, p.R}, act});
    needs.push_back(ScratchNeed{{-1, p.H * (p.nope + p.dv)}, act});
  }
  if (groupedFits(attn))
    needs.append(splitScratch(attn));
  // The host's kernel never touches them: a CPU run allocates no storage.
  for (ScratchNeed &n : needs)
    n.deviceOnly = true;
  return needs;
}

/// The two m16n8k16 MMAs of A fragments `a` against the two n8 halves of one
/// ldmatrix.x4 result `v` (B fragments), into accumulator tiles t, t + 1.
static void mmaX4(KernelBuilder &kb, ArrayRef<Value> a, Value v, MutableArrayRef<Value> acc,
                  int64_t t) {
  mmaBf16(kb, a, fragmentWords(kb, v, 0, 2), acc.slice(t * 4, 4));
  mmaBf16(kb, a, fragmentWords(kb, v, 2, 2), acc.slice((t + 1) * 4, 4));
}

/// The attention output as the reference stores it: with a gate, v rounded
/// to the output type times sigmoid(gate[row, col]) rounded likewise.
static Value gatedOutput(KernelBuilder &kb, Value v, Value gate, Value row, Value col,
                         Type outType) {
  if (!gate)
    return v;
  return kb.fmul(kb.round(v, outType),
                 kb.round(kb.sigmoid(kb.loadF32(gate, {row, col})), outType));
}

/// A flash block's query tile: a block per (query tile slot, head) over the
/// sequences with no cached context, the sequence's last (heaviest) tiles
/// first. Rows [t0, t0 + rows) of the sequence (its row0.. in the launch),
/// keys [0, kvEnd) visible in nKv tiles of bn.
struct FlashTile {
  ChunkSlot cs;
  Value h, t0, rows, row0, kvEnd, nKv;
};
static void flashBlocks(KernelBuilder &kb, const FlashPlan &p, Value q, Value lens,
                        Value cacheLens,
                        const std::function<void(ThreadBlock &, const FlashTile &)> &body) {
  const int64_t bm = p.bm;
  Value slots = kb.add(kb.ceilDiv(kb.dim(q, 0), bm), kb.dim(lens, 0));
  kb.blocks({slots, kb.idx(p.H)}, 32 * p.warps, [&](ValueRange bid, ThreadBlock &tb) {
    FlashTile ft;
    ft.h = bid[1];
    ft.cs = findChunk(kb, tb, lens, bid[0], bm);
    const ChunkSlot &cs = ft.cs;
    kb.ifThen(cs.valid, [&] {
      Value past = kb.toIndex(kb.load(cacheLens, {cs.n}));
      kb.ifThen(kb.ieq(past, kb.idx(0)), [&] {
        Value tiles = kb.ceilDiv(cs.len, bm);
        ft.t0 = kb.mul(kb.sub(kb.sub(tiles, kb.idx(1)), kb.div(cs.t0, bm)), bm);
        ft.rows = kb.minu(kb.idx(bm), kb.sub(cs.len, ft.t0));
        ft.row0 = kb.add(cs.start, ft.t0);
        ft.kvEnd = kb.add(ft.t0, ft.rows);
        ft.nKv = kb.ceilDiv(ft.kvEnd, p.bn);
        body(tb, ft);
      });
    });
  }, p.sharedBytes(), "mla_" + p.name());
}

/// cp.async of a flash tile's `nRows` rows x `chunks` 16-byte chunks: row r
/// is src row srcRow0 + r (zero-filled from `valid` rows on), columns
/// srcCol0 + 8c, stored at dst[dstAt(r, dstCol0 + 8c)]; returns the copies'
/// tokens.
static SmallVector<Value> flashCopy(KernelBuilder &kb, ThreadBlock &tb, Value src, Value srcRow0,
                                    Value srcCol0, Value valid, int64_t nRows, int64_t chunks,
                                    Value dst, int64_t dstCol0,
                                    const std::function<SmallVector<Value>(Value, Value)> &dstAt) {
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(kb.b.getContext());
  SmallVector<Value> toks;
  int64_t total = nRows * chunks;
  for (int64_t i = 0; i * tb.threads < total; ++i) {
    Value lin = kb.add(tb.tid, kb.idx(i * tb.threads));
    if (total % tb.threads) // duplicates copy the same chunk again
      lin = kb.minu(lin, kb.idx(total - 1));
    Value r = kb.div(lin, chunks), c8 = kb.mul(kb.rem(lin, chunks), 8);
    Value ok = kb.ult(r, valid);
    Value srcRow = kb.select(ok, kb.add(srcRow0, r), kb.idx(0));
    Value n = kb.select(ok, kb.idx(8), kb.idx(0));
    toks.push_back(nvgpu::DeviceAsyncCopyOp::create(
        kb.b, kb.loc, tokenType, dst, dstAt(r, kb.add(c8, kb.idx(dstCol0))), src,
        ValueRange{srcRow, kb.add(srcCol0, c8)}, kb.b.getIndexAttr(8), n, kb.b.getUnitAttr()));
  }
  return toks;
}

/// Zeroes columns [from, to) (multiples of 8) of a flash tile's `nRows`
/// rows once: no copy writes them, and zeros keep them out of the products.
/// The tile's element (r, col) is buf[dstAt(r, col)], as for flashCopy.
static void flashZeroPad(KernelBuilder &kb, ThreadBlock &tb, Value buf, int64_t nRows,
                         int64_t from, int64_t to,
                         const std::function<SmallVector<Value>(Value, Value)> &dstAt) {
  int64_t chunks = (to - from) / 8;
  if (!chunks)
    return;
  kb.strided(tb, kb.idx(0), kb.idx(nRows * chunks), [&](Value lin) {
    Value r = kb.div(lin, chunks), c = kb.add(kb.mul(kb.rem(lin, chunks), 8), from);
    kb.zeroVec(buf, dstAt(r, c), 8);
  });
}

/// A flash block's online softmax over one key tile's S (the m16n8
/// accumulator layout: element t * 4 + 2 hf + e is row g (+ 8 for hf = 1),
/// key pBase + 8 t + e): with `mask` the keys after the row's query qi[hf]
/// are masked; in log2 units with the scale folded into the exponent. S
/// becomes P in place; m[2] and l[2] (state[0..3]) are updated and alpha[2]
/// rescales O. `fast`: max.f32 (a NaN score leaves the maximum alone and
/// still turns its row's P, sum and output NaN) and one FMA an exponent;
/// else the NaN-propagating maximum and a multiply and a subtract.
static void flashSoftmax(KernelBuilder &kb, MutableArrayRef<Value> sv, Value pBase,
                         ArrayRef<Value> qi, bool mask, float scaleLog2,
                         MutableArrayRef<Value> state, Value alpha[2], bool fast) {
  OpBuilder &b = kb.b;
  Value negInf = kb.f32(-INFINITY), cLog2 = kb.f32(scaleLog2);
  auto max = [&](Value x, Value y) {
    return fast ? LLVM::MaxNumOp::create(b, kb.loc, x, y).getResult() : kb.fmax(x, y);
  };
  const int64_t tiles = static_cast<int64_t>(sv.size()) / 4;
  for (int64_t hf = 0; hf < 2; ++hf) {
    Value mx = negInf;
    for (int64_t t = 0; t < tiles; ++t)
      for (int64_t e = 0; e < 2; ++e) {
        Value &v = sv[t * 4 + 2 * hf + e];
        if (mask)
          v = kb.select(kb.ule(kb.add(pBase, kb.idx(t * 8 + e)), qi[hf]), v, negInf);
        mx = max(mx, v);
      }
    for (int64_t off : {1, 2}) // the row's 4 lanes
      mx = max(mx, kb.shuffle(mx, kb.idx(off), gpu::ShuffleMode::XOR));
    Value mOld = state[hf], mNew = max(mOld, kb.fmul(mx, cLog2));
    alpha[hf] = kb.exp2(kb.fsub(mOld, mNew));
    Value negM = fast ? kb.fneg(mNew) : Value(), rowSum = kb.f32(0.0);
    for (int64_t t = 0; t < tiles; ++t)
      for (int64_t e = 0; e < 2; ++e) {
        Value &v = sv[t * 4 + 2 * hf + e];
        v = kb.exp2(fast ? LLVM::FMAOp::create(b, kb.loc, v, cLog2, negM).getResult()
                         : kb.fsub(kb.fmul(v, cLog2), mNew));
        rowSum = kb.fadd(rowSum, v);
      }
    state[hf] = mNew;
    state[2 + hf] = kb.fadd(kb.fmul(state[2 + hf], alpha[hf]), rowSum);
  }
}

/// A flash block's epilogue: rows wRow + g (+ 8) of the tile, O / l (l
/// summed over the row's 4 lanes), the gate, stored; `oAt(i)` is the O
/// accumulator i (m16n8 layout: tile i / 4, rows g / g + 8 for i % 4 < 2 /
/// >= 2, columns 2 (lane % 4) + i % 2).
static void flashEpilogue(KernelBuilder &kb, const FlashPlan &p, const FlashTile &ft,
                          ArrayRef<Value> l2, const std::function<Value(int64_t)> &oAt, Value wRow,
                          Value g, Value c2, Value gate, Value out) {
  Type outType = cast<MemRefType>(out.getType()).getElementType();
  Value limit = kb.add(ft.row0, ft.rows);
  for (int64_t hf = 0; hf < 2; ++hf) {
    Value l = l2[hf];
    for (int64_t off : {1, 2})
      l = kb.fadd(l, kb.shuffle(l, kb.idx(off), gpu::ShuffleMode::XOR));
    Value inv = kb.fdiv(kb.f32(1.0), l);
    Value row = kb.add(ft.row0, kb.add(kb.add(wRow, g), kb.idx(8 * hf)));
    kb.ifThen(kb.ult(row, limit), [&] {
      for (int64_t t = 0; t < p.dv / 8; ++t) {
        Value col = kb.add(kb.mul(ft.h, p.dv), kb.add(c2, kb.idx(t * 8)));
        Value v[2];
        for (int64_t e = 0; e < 2; ++e)
          v[e] = gatedOutput(kb, kb.fmul(oAt(t * 4 + 2 * hf + e), inv), gate, row,
                             kb.add(col, kb.idx(e)), outType);
        storeAccPair(kb, out, row, col, v[0], v[1], limit, p.H * p.dv);
      }
    });
  }
}

/// The flash prefill (see the file comment): a block per (query tile slot,
/// head) over the sequences with no cached context; kvup holds k_nope | v of
/// the launch's tokens, kv their raw k_pe.
static void flashPrefill(KernelBuilder &kb, const FlashPlan &p, Value q, Value kv, Value kvup,
                         Value lens, Value cacheLens, Value gate, Value out, double scale) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type bf16 = b.getBF16Type();
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  const int64_t bm = p.bm, bn = p.bn, qP = p.qPitch(), vP = p.vPitch();
  const int64_t sTiles = bn / 8, oTiles = p.dvPad / 8, qSteps = p.qkPad / 16;
  const int64_t headRow = p.nope + p.dv; // kvup columns a head
  const float scaleLog2 = static_cast<float>(scale * 1.4426950408889634);

  flashBlocks(kb, p, q, lens, cacheLens, [&](ThreadBlock &tb, const FlashTile &ft) {
        const ChunkSlot &cs = ft.cs;
        Value h = ft.h, t0 = ft.t0, rows = ft.rows, row0 = ft.row0, kvEnd = ft.kvEnd,
              nKv = ft.nKv;
        Value qs = kb.dynamicShared(tb, 0, {bm, qP}, bf16);
        Value ks = kb.dynamicShared(tb, p.qBytes(), {2, bn, qP}, bf16);
        Value vs = kb.dynamicShared(tb, p.qBytes() + p.kBytes(), {2, bn, vP}, bf16);

        // Tile element (r, col) of ring slot `slot` (none: Q): [slot,] r, col
        // (rows padded by 16 bytes).
        auto indexAt = [&](Value slot) {
          return [slot](Value r, Value col) {
            SmallVector<Value> di;
            if (slot)
              di.push_back(slot);
            di.append({r, col});
            return di;
          };
        };
        flashZeroPad(kb, tb, qs, bm, p.qk, p.qkPad, indexAt(Value()));
        for (int64_t sl = 0; sl < 2; ++sl) {
          flashZeroPad(kb, tb, ks, bn, p.qk, p.qkPad, indexAt(kb.idx(sl)));
          flashZeroPad(kb, tb, vs, bn, p.dv, p.dvPad, indexAt(kb.idx(sl)));
        }
        auto copy = [&](SmallVector<Value> &toks, Value src, Value srcRow0, Value srcCol0,
                        Value valid, int64_t nRows, int64_t chunks, Value dst, Value slot,
                        int64_t dstCol0) {
          toks.append(flashCopy(kb, tb, src, srcRow0, srcCol0, valid, nRows, chunks, dst, dstCol0,
                                indexAt(slot)));
        };
        Value headCol = kb.mul(h, headRow);
        auto issueKv = [&](SmallVector<Value> &toks, Value j) {
          Value p0 = kb.mul(j, bn), slot = kb.rem(j, 2), at = kb.add(cs.start, p0);
          Value valid = kb.sub(kvEnd, p0);
          copy(toks, kvup, at, headCol, valid, bn, p.nope / 8, ks, slot, 0);
          copy(toks, kv, at, kb.idx(p.R), valid, bn, p.rope / 8, ks, slot, p.nope);
          copy(toks, kvup, at, kb.add(headCol, kb.idx(p.nope)), valid, bn, p.dv / 8, vs, slot, 0);
        };
        {
          SmallVector<Value> toks;
          copy(toks, q, row0, kb.mul(h, p.qk), rows, bm, p.qk / 8, qs, Value(), 0);
          issueKv(toks, kb.idx(0));
          nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, toks);
        }
        NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
        kb.barrier(tb);

        Value lane = tb.lane, wRow = kb.mul(tb.warp, 16);
        // Q fragments (A, row-major): rows lane % 16, column 8 (lane / 16).
        SmallVector<SmallVector<Value>> qf;
        for (int64_t k = 0; k < qSteps; ++k)
          qf.push_back(fragmentWords(
              kb,
              ldmatrixX4(kb, qs,
                         {kb.add(wRow, kb.rem(lane, 16)),
                          kb.add(kb.mul(kb.div(lane, 16), 8), kb.idx(k * 16))},
                         false),
              0, 4));
        Value g = kb.div(lane, 4), c2 = kb.mul(kb.rem(lane, 4), 2);
        // This thread's query positions (rows g and g + 8 of the warp's 16).
        Value qi[2] = {kb.add(kb.add(t0, wRow), g), kb.add(kb.add(t0, wRow), kb.add(g, 8))};
        Value bRowOff = kb.add(kb.rem(lane, 8), kb.mul(kb.div(lane, 16), 8));
        Value bColOff = kb.mul(kb.rem(kb.div(lane, 8), 2), 8);
        Value vRowOff = kb.add(kb.rem(lane, 8), kb.mul(kb.rem(kb.div(lane, 8), 2), 8));
        Value vColOff = kb.mul(kb.div(lane, 16), 8);
        Value negInf = kb.f32(-INFINITY), zero = kb.f32(0.0);

        // Carried: O accumulators, then m[2], l[2].
        SmallVector<Value> init(oTiles * 4, zero);
        init.append({negInf, negInf, zero, zero});
        // One key / value tile; `mask` for the tiles that reach the block's
        // first query (the diagonal), the tiles before it need none.
        auto tile = [&](Value j, ValueRange in, bool mask) {
          Value next = kb.add(j, kb.idx(1));
          kb.ifThen(kb.ult(next, nKv), [&] {
            SmallVector<Value> toks;
            issueKv(toks, next);
            nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, toks);
          });
          Value slot = kb.rem(j, 2), p0 = kb.mul(j, bn);
          // S = Q K^T (B fragments: K rows are columns of K^T).
          SmallVector<Value> sAcc(sTiles * 4, zero);
          for (int64_t k = 0; k < qSteps; ++k)
            for (int64_t jj = 0; jj < sTiles / 2; ++jj) {
              Value v = ldmatrixX4(kb, ks,
                                   {slot, kb.add(bRowOff, kb.idx(jj * 16)),
                                    kb.add(bColOff, kb.idx(k * 16))},
                                   false);
              mmaX4(kb, qf[k], v, sAcc, 2 * jj);
            }
          // Mask the future, online softmax per row (flashSoftmax).
          SmallVector<Value> out(in.begin(), in.end());
          Value alpha[2];
          MutableArrayRef<Value> state = MutableArrayRef<Value>(out).slice(oTiles * 4, 4);
          flashSoftmax(kb, sAcc, kb.add(p0, c2), qi, mask, scaleLog2, state, alpha, false);
          for (int64_t t = 0; t < oTiles; ++t)
            for (int64_t e = 0; e < 4; ++e)
              out[t * 4 + e] = kb.fmul(out[t * 4 + e], alpha[e / 2]);
          // O += P V: P's A fragments are the S accumulators of two n8
          // tiles; V (rows = positions) read transposed by ldmatrix.trans.
          for (int64_t kk = 0; kk < bn / 16; ++kk) {
            const Value *s0 = &sAcc[2 * kk * 4], *s1 = &sAcc[(2 * kk + 1) * 4];
            SmallVector<Value> a{packBf16(kb, s0[0], s0[1]), packBf16(kb, s0[2], s0[3]),
                                 packBf16(kb, s1[0], s1[1]), packBf16(kb, s1[2], s1[3])};
            for (int64_t dd = 0; dd < oTiles / 2; ++dd) {
              Value v = ldmatrixX4(kb, vs,
                                   {slot, kb.add(vRowOff, kb.idx(kk * 16)),
                                    kb.add(vColOff, kb.idx(dd * 16))},
                                   true);
              mmaX4(kb, a, v, out, 2 * dd);
            }
          }
          // Tile j + 1 has landed and every warp is done with slot j % 2.
          NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
          kb.barrier(tb);
          return out;
        };
        Value diag = kb.minu(kb.div(t0, bn), nKv);
        SmallVector<Value> mid = kb.loop(kb.idx(0), diag, init, [&](Value j, ValueRange in) {
          return tile(j, in, false);
        });
        SmallVector<Value> fin = kb.loop(diag, nKv, mid, [&](Value j, ValueRange in) {
          return tile(j, in, true);
        });

        flashEpilogue(kb, p, ft, {fin[oTiles * 4 + 2], fin[oTiles * 4 + 3]},
                      [&](int64_t i) { return fin[i]; }, wRow, g, c2, gate, out);
  });
}

/// Element (r, col) (col a multiple of 8) of a tile of 64-column blocks in
/// 128-byte-swizzled shared memory, in ring slot `slot` (none: a tile without
/// a ring): [slot,] block col / 64, row r, element column 8 ((col % 64 / 8) ^
/// (r % 8)).
static std::function<SmallVector<Value>(Value, Value)> swizzledAt(KernelBuilder &kb,
                                                                   Value slot) {
  return [&kb, slot](Value r, Value col) {
    Value chunk = kb.div(kb.rem(col, 64), 8);
    Value phys = arith::XOrIOp::create(kb.b, kb.loc, chunk, kb.rem(r, 8)).getResult();
    Value blk = kb.div(col, 64), c = kb.mul(phys, 8);
    SmallVector<Value> di;
    if (slot)
      di.push_back(slot);
    di.append({blk, r, c});
    return di;
  };
}

/// The block's cp.async groups but the newest `pending` have landed, made
/// visible to the async proxy (wgmma) and to every warp.
static void asyncLanded(KernelBuilder &kb, ThreadBlock &tb, int64_t pending) {
  NVVM::CpAsyncWaitGroupOp::create(kb.b, kb.loc, kb.b.getI32IntegerAttr(pending));
  NVVM::FenceProxyOp::create(
      kb.b, kb.loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(kb.b.getContext(), NVVM::SharedSpace::shared_cta));
  kb.barrier(tb);
}

/// P (fp32, the m64 accumulator layout) as the register-A operand of P V:
/// four b32 registers a k16 step, step kk the n8 tiles 2kk and 2kk + 1, one
/// cvt.rn.bf16x2.f32 a pair (the low half the lower column).
/// Two f32 as one b32 of bf16s (cvt.rn.bf16x2.f32): `lo` in the low half.
static Value packBf16x2(KernelBuilder &kb, Value lo, Value hi) {
  OpBuilder &b = kb.b;
  Value v = NVVM::ConvertF32x2ToBF16x2Op::create(
      b, kb.loc, VectorType::get({2}, b.getBF16Type()), hi, lo, Value(), NVVM::FPRoundingMode::RN,
      NVVM::SaturationMode::NONE, false);
  return LLVM::BitcastOp::create(b, kb.loc, b.getI32Type(), v).getResult();
}

static SmallVector<Value> packRegA(KernelBuilder &kb, ArrayRef<Value> sv) {
  auto pack = [&](Value lo, Value hi) { return packBf16x2(kb, lo, hi); };
  SmallVector<Value> pa;
  for (size_t kk = 0; kk < sv.size() / 8; ++kk) {
    const Value *s0 = &sv[2 * kk * 4], *s1 = &sv[(2 * kk + 1) * 4];
    pa.append({pack(s0[0], s0[1]), pack(s0[2], s0[3]), pack(s1[0], s1[1]), pack(s1[2], s1[3])});
  }
  return pa;
}

/// acc += P V by the register-A wgmma from packRegA's registers.
static Value pvRegA(KernelBuilder &kb, Type accType, Value acc, ArrayRef<Value> pa,
                    const WgmmaOperand &v, int64_t n) {
  SmallVector<std::array<Value, 4>> steps;
  for (size_t i = 0; i < pa.size(); i += 4)
    steps.push_back({pa[i], pa[i + 1], pa[i + 2], pa[i + 3]});
  return wgmmaChainRegA(kb, accType, acc, steps, v, n);
}

/// The `count` accumulators of `o` (the m16n8 layout: rows g, g + 8 at
/// i % 4 < 2, >= 2) times their row's alpha.
static Value scaleAcc(KernelBuilder &kb, Value o, int64_t count, const Value alpha[2]) {
  for (int64_t i = 0; i < count; ++i)
    o = LLVM::InsertValueOp::create(
        kb.b, kb.loc, o,
        kb.fmul(LLVM::ExtractValueOp::create(kb.b, kb.loc, o, ArrayRef<int64_t>{i}),
                alpha[(i % 4) / 2]),
        ArrayRef<int64_t>{i});
  return o;
}

/// The flash prefill on warpgroup MMA (sm_90a; see the file comment for the
/// blocks and tiles): a block of bm / 64 warpgroups takes bm query rows of
/// one head, each warpgroup 64. Q, K and V sit in 128-byte-swizzled shared
/// memory (64-column blocks; K / V through a `stages`-deep cp.async ring).
/// Per key tile of bn positions a warpgroup computes S = Q K^T with
/// wgmma.m64n{bn}k16 (both operands K-major from shared memory), the online
/// softmax on its S accumulators (the m64 accumulator layout is mma.sync's
/// m16n8 per warp: rows 16 (warp % 4) + lane / 4 (+ 8), columns
/// 8 j + 2 (lane % 4) + e), and O += P V with P (bf16) kept in registers as
/// the A operand of the register-A wgmma (the same layout, two n8 tiles a
/// k16 step) and V read as an MN-major (transposed) B: the value rows stay
/// as they are in memory.
static void flashPrefillWgmma(KernelBuilder &kb, const FlashPlan &p, Value q, Value kv,
                              Value kvup, Value lens, Value cacheLens, Value gate, Value out,
                              double scale) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  MLIRContext *ctx = b.getContext();
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type(), i64 = b.getI64Type();
  const int64_t bm = p.bm, bn = p.bn, S = p.stages, QB = p.qBlocks(), VB = p.vBlocks();
  const int64_t dvW = 64 * VB;
  const int64_t headRow = p.nope + p.dv; // kvup columns a head
  const float scaleLog2 = static_cast<float>(scale * 1.4426950408889634);
  auto sAccType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(bn / 2, f32));
  auto oAccType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(dvW / 2, f32));

  flashBlocks(kb, p, q, lens, cacheLens, [&](ThreadBlock &tb, const FlashTile &ft) {
        const ChunkSlot &cs = ft.cs;
        Value h = ft.h, t0 = ft.t0, rows = ft.rows, row0 = ft.row0, kvEnd = ft.kvEnd,
              nKv = ft.nKv;
        // Tiles from the first 1024-byte boundary of dynamic shared memory.
        AlignedShared sm = alignedDynamicShared(kb);
        auto view = [&](int64_t offset, ArrayRef<int64_t> shape) {
          return sm.view(kb, kb.idx(offset), shape, bf16);
        };
        const int64_t kOff = p.qBytes(), vOff = kOff + p.kBytes();
        Value qs = view(0, {QB, bm, 64}), ks = view(kOff, {S, QB, bn, 64}),
              vs = view(vOff, {S, VB, bn, 64});
        auto toI64 = [&](Value v) { return arith::IndexCastUIOp::create(b, loc, i64, v).getResult(); };
        Value aligned = sm.address(kb, kb.idx(0));

        auto indexAt = [&](Value slot) { return swizzledAt(kb, slot); };
        flashZeroPad(kb, tb, qs, bm, p.qk, 64 * QB, indexAt(Value()));
        for (int64_t sl = 0; sl < S; ++sl) {
          flashZeroPad(kb, tb, ks, bn, p.qk, 64 * QB, indexAt(kb.idx(sl)));
          flashZeroPad(kb, tb, vs, bn, p.dv, dvW, indexAt(kb.idx(sl)));
        }
        auto copy = [&](Value src, Value srcRow0, Value srcCol0, Value valid, int64_t nRows,
                        int64_t chunks, Value dst, Value slot, int64_t dstCol0) {
          flashCopy(kb, tb, src, srcRow0, srcCol0, valid, nRows, chunks, dst, dstCol0,
                    indexAt(slot));
        };
        Value headCol = kb.mul(h, headRow);
        // Key / value tile j into ring slot j % S (tiles past the last read
        // nothing: the group stays, so the wait counts hold).
        auto issueKv = [&](Value j) {
          Value p0 = kb.mul(j, bn), slot = kb.rem(j, S), at = kb.add(cs.start, p0);
          Value valid = kb.select(kb.ult(j, nKv), kb.sub(kvEnd, p0), kb.idx(0));
          copy(kvup, at, headCol, valid, bn, p.nope / 8, ks, slot, 0);
          copy(kv, at, kb.idx(p.R), valid, bn, p.rope / 8, ks, slot, p.nope);
          copy(kvup, at, kb.add(headCol, kb.idx(p.nope)), valid, bn, p.dv / 8, vs, slot, 0);
          NVVM::CpAsyncCommitGroupOp::create(b, loc);
        };
        copy(q, row0, kb.mul(h, p.qk), rows, bm, p.qk / 8, qs, Value(), 0);
        for (int64_t s = 0; s + 1 < S; ++s)
          issueKv(kb.idx(s));

        Value lane = tb.lane, wg = kb.div(tb.tid, 128);
        Value wRow = kb.add(kb.mul(wg, 64), kb.mul(kb.rem(tb.warp, 4), 16));
        Value g = kb.div(lane, 4), c2 = kb.mul(kb.rem(lane, 4), 2);
        // This thread's query positions (rows g and g + 8 of its warp's 16).
        Value qi[2] = {kb.add(kb.add(t0, wRow), g), kb.add(kb.add(t0, wRow), kb.add(g, 8))};
        Value negInf = kb.f32(-INFINITY), zero = kb.f32(0.0);
        Value qAddr = toI64(kb.add(aligned, kb.mul(wg, 64 * 128)));
        auto at = [&](Value acc, int64_t i) {
          return LLVM::ExtractValueOp::create(b, loc, acc, ArrayRef<int64_t>{i}).getResult();
        };

        auto kAddrOf = [&](Value j) {
          return toI64(kb.add(aligned, kb.add(kb.idx(kOff), kb.mul(kb.rem(j, S), p.kStage()))));
        };
        auto vAddrOf = [&](Value j) {
          return toI64(kb.add(aligned, kb.add(kb.idx(vOff), kb.mul(kb.rem(j, S), p.vStage()))));
        };
        // Tile j of every thread landed and made visible to the async proxy
        // and to every warpgroup.
        auto landed = [&](int64_t pending) { asyncLanded(kb, tb, pending); };
        auto sProduct = [&](Value j) {
          return wgmmaChain(kb, sAccType, Value(), {qAddr, bm * 128, false},
                            {kAddrOf(j), bn * 128, false}, bn, 4 * QB);
        };
        // The online softmax of key tile j's S (in log2 units; `mask`: the
        // future masked): returns P (fp32, the accumulator layout) and
        // updates m[2], l[2] (state[0..3]); alpha[2] rescales O.
        auto softmax = [&](Value sAcc, Value j, bool mask, MutableArrayRef<Value> state,
                           Value alpha[2]) {
          SmallVector<Value> sv;
          for (int64_t i = 0; i < bn / 2; ++i)
            sv.push_back(at(sAcc, i));
          flashSoftmax(kb, sv, kb.add(kb.mul(j, bn), c2), qi, mask, scaleLog2, state, alpha, true);
          return sv;
        };
        // P (bf16) as P V's register-A slices (packRegA), packed only after
        // the previous P V has retired: registers a wgmma in flight reads
        // must not be written (ptxas would serialize the wgmma pipeline).
        auto packP = [&](ArrayRef<Value> sv) { return packRegA(kb, sv); };
        auto pvProduct = [&](Value o, ArrayRef<Value> pa, Value j) {
          return pvRegA(kb, oAccType, o, pa, {vAddrOf(j), bn * 128, true}, dvW);
        };
        auto scaleO = [&](Value o, Value alpha[2]) { return scaleAcc(kb, o, dvW / 2, alpha); };

        // Tile 0: S, its softmax (masked: it may hold the diagonal).
        landed(S - 2);
        Value s0 = sProduct(kb.idx(0));
        NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
        SmallVector<Value> st{negInf, negInf, zero, zero};
        Value alpha0[2];
        SmallVector<Value> p0 = packP(softmax(s0, kb.idx(0), true, st, alpha0));
        // Carried: O, m[2], l[2], P of tile j.
        SmallVector<Value> init{LLVM::ZeroOp::create(b, loc, oAccType).getResult()};
        init.append(st.begin(), st.end());
        init.append(p0.begin(), p0.end());
        // Step j (j + 1 < nKv): tile j + 1 landed (issued two steps ago),
        // every warpgroup done with tile j - 1, whose slot takes tile
        // j + S - 1; S of tile j + 1 and O += P V of tile j go to the tensor
        // cores as two groups; the softmax of tile j + 1 runs while P V of
        // tile j does; then O is rescaled for it.
        auto step = [&](Value j, ValueRange in, bool mask) {
          landed(S - 3);
          issueKv(kb.add(j, kb.idx(S - 1)));
          Value next = kb.add(j, kb.idx(1));
          Value sAcc = sProduct(next);
          SmallVector<Value> pPrev(in.begin() + 5, in.end());
          Value o = pvProduct(in[0], pPrev, j);
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(1));
          SmallVector<Value> state(in.begin() + 1, in.begin() + 5);
          Value alpha[2];
          SmallVector<Value> sv = softmax(sAcc, next, mask, state, alpha);
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
          SmallVector<Value> pa = packP(sv);
          SmallVector<Value> out{scaleO(o, alpha)};
          out.append(state.begin(), state.end());
          out.append(pa.begin(), pa.end());
          return out;
        };
        // Tiles before the block's first query need no mask: steps
        // [0, lo) softmax tiles 1 .. lo < diag.
        Value diag = kb.minu(kb.div(t0, bn), nKv);
        Value lo = kb.select(kb.ieq(diag, kb.idx(0)), kb.idx(0), kb.sub(diag, kb.idx(1)));
        Value last = kb.sub(nKv, kb.idx(1));
        SmallVector<Value> mid = kb.loop(kb.idx(0), lo, init, [&](Value j, ValueRange in) {
          return step(j, in, false);
        });
        SmallVector<Value> fin = kb.loop(lo, last, mid, [&](Value j, ValueRange in) {
          return step(j, in, true);
        });
        // The last tile's P V.
        fin[0] = pvProduct(fin[0], ArrayRef<Value>(fin).drop_front(5), last);
        NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
        NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
        flashEpilogue(kb, p, ft, {fin[3], fin[4]}, [&](int64_t i) { return at(fin[0], i); }, wRow,
                      g, c2, gate, out);
  });
}

/// The absorbed form, a block per (tokens, head): each block takes `tpb`
/// consecutive tokens; with `skipFresh` it leaves tokens of sequences
/// without cached context to the flash prefill.
static void absorbedAttention(KernelBuilder &kb, MlaAttentionOp attn, Value q,
                              const CacheRef &cache,
                              Value cacheLens, Value lens, Value kvb, Value gate, Value out,
                              int64_t tpb, bool skipFresh) {
  Type outType = cast<MemRefType>(out.getType()).getElementType();
  int64_t H = attn.getNumHeads(), nope = attn.getQkNopeHeadDim(), dv = attn.getVHeadDim();
  int64_t R = cast<MemRefType>(kvb.getType()).getDimSize(1);
  int64_t cd = cache.width(), rope = cd - R, qk = nope + rope;
  Value scale = kb.f32(attn.getSoftmaxScale().convertToDouble());
  int64_t vwCache = kb.vecWidth(cache.mem, cd), vwKvb = kb.vecWidth(kvb, R);
  if (R % vwCache)
    vwCache = 1;
  Value T = kb.dim(q, 0);

  //   q_abs = q_nope . W_k (R), scores = [q_abs, q_pe] . cache[s] * scale,
  //   o_lat = softmax-weighted sum of cache[s][:R] (online softmax: each warp
  //   streams its share of the cached positions keeping a running max, sum and
  //   o_lat, then the warps merge), out = W_v . o_lat, times the gate.
  int64_t cw = cd; // q_abs (R) then q_pe (rope)
  std::string name = tpb > 1 ? "absorbed_cached" : "absorbed";
  kb.blocks({kb.ceilDiv(T, tpb), kb.idx(H)}, kMlaThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value h = bid[1];
    Value qa = kb.shared(tb, {cw}, kb.b.getF32Type());
    Value acc = kb.shared(tb, {tb.warps, R}, kb.b.getF32Type());
    Value ml = kb.shared(tb, {2 * tb.warps}, kb.b.getF32Type());
    Value olat = kb.shared(tb, {R}, kb.b.getF32Type());
    Value N = kb.dim(lens, 0);
    kb.loop(kb.mul(bid[0], tpb), kb.minu(kb.mul(kb.add(bid[0], kb.idx(1)), tpb), T),
            [&](Value row) {
    // The row's sequence n and its first row.
    auto found = kb.loop(kb.idx(0), N, ValueRange{kb.idx(0), kb.idx(0), kb.idx(0)},
                         [&](Value i, ValueRange a) {
                           Value end = kb.add(a[0], kb.seqLen(lens, i));
                           Value in = kb.andi(kb.ule(a[0], row), kb.ult(row, end));
                           return SmallVector<Value>{end, kb.select(in, i, a[1]),
                                                     kb.select(in, a[0], a[2])};
                         });
    Value n = found[1], start = found[2];
    Value past = kb.toIndex(kb.load(cacheLens, {n}));
    auto body = [&] {
    Value visible = kb.add(kb.add(past, kb.sub(row, start)), kb.idx(1));
    Value qBase = kb.mul(h, qk), kRow0 = kb.mul(h, nope + dv), vRow0 = kb.add(kRow0, nope);

    // q_abs[r] = sum_i q_nope[i] W_kv_b[kRow0 + i, r]; q_pe copied.
    kb.strided(tb, kb.idx(0), kb.idx(R), [&](Value r) {
      Value a = kb.sum(kb.idx(0), kb.idx(nope), [&](Value i) {
        return kb.fmul(kb.loadF32(q, {row, kb.add(qBase, i)}),
                       kb.loadF32(kvb, {kb.add(kRow0, i), r}));
      });
      kb.store(a, qa, {r});
    });
    kb.strided(tb, kb.idx(0), kb.idx(rope), [&](Value c) {
      kb.store(kb.loadF32(q, {row, kb.add(kb.add(qBase, nope), c)}), qa, {kb.add(kb.idx(R), c)});
    });
    // Each warp clears its o_lat accumulator row.
    kb.loopStep(tb.lane, kb.idx(R), kb.idx(tb.lanes),
                [&](Value r) { kb.store(kb.f32(0.0), acc, {tb.warp, r}); });
    kb.barrier(tb);

    // Online softmax: warp w takes positions w, w + warps, ...
    auto mlState = kb.loopStep(
        tb.warp, visible, kb.idx(tb.warps), ValueRange{kb.f32(-INFINITY), kb.f32(0.0)},
        [&](Value s, ValueRange a) {
          SmallVector<Value> rs = cache.row(kb, n, s);
          Value score = kb.fmul(
              kb.warpDot(
                  tb, cd, vwCache,
                  [&](Value c) { return kb.loadVec(cache.mem, {rs[0], rs[1], c}, vwCache); },
                  [&](Value c) { return kb.loadVec(qa, {c}, vwCache); }),
              scale);
          Value m = kb.fmax(a[0], score);
          Value alpha = kb.exp(kb.fsub(a[0], m)), p = kb.exp(kb.fsub(score, m));
          kb.loopStep(kb.mul(tb.lane, vwCache), kb.idx(R), kb.idx(tb.lanes * vwCache),
                      [&](Value r) {
                        SmallVector<Value> cv = kb.loadVec(cache.mem, {rs[0], rs[1], r}, vwCache);
                        for (int64_t j = 0; j < vwCache; ++j) {
                          Value rj = j ? kb.add(r, j) : r;
                          Value o = kb.load(acc, {tb.warp, rj});
                          kb.store(kb.fadd(kb.fmul(o, alpha), kb.fmul(p, cv[j])), acc,
                                   {tb.warp, rj});
                        }
                      });
          return SmallVector<Value>{m, kb.fadd(kb.fmul(a[1], alpha), p)};
        });
    kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
      kb.store(mlState[0], ml, {tb.warp});
      kb.store(mlState[1], ml, {kb.add(tb.warp, tb.warps)});
    });
    kb.barrier(tb);
    // Merge the warps.
    Value M = kb.f32(-INFINITY);
    for (int64_t w = 0; w < tb.warps; ++w)
      M = kb.fmax(M, kb.load(ml, {kb.idx(w)}));
    SmallVector<Value> wScale;
    Value L = kb.f32(0.0);
    for (int64_t w = 0; w < tb.warps; ++w) {
      wScale.push_back(kb.exp(kb.fsub(kb.load(ml, {kb.idx(w)}), M)));
      L = kb.fadd(L, kb.fmul(kb.load(ml, {kb.idx(tb.warps + w)}), wScale.back()));
    }
    kb.strided(tb, kb.idx(0), kb.idx(R), [&](Value r) {
      Value o = kb.f32(0.0);
      for (int64_t w = 0; w < tb.warps; ++w)
        o = kb.fadd(o, kb.fmul(kb.load(acc, {kb.idx(w), r}), wScale[w]));
      kb.store(kb.fdiv(o, L), olat, {r});
    });
    kb.barrier(tb);
    // out[row, h, j] = W_kv_b[vRow0 + j, :] . o_lat, a warp per j.
    kb.loopStep(tb.warp, kb.idx(dv), kb.idx(tb.warps), [&](Value j) {
      Value o = kb.warpDot(
          tb, R, vwKvb, [&](Value r) { return kb.loadVec(kvb, {kb.add(vRow0, j), r}, vwKvb); },
          [&](Value r) { return kb.loadVec(olat, {r}, vwKvb); });
      Value col = kb.add(kb.mul(h, dv), j);
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
        kb.storeF32(gatedOutput(kb, o, gate, row, col, outType), out, {row, col});
      });
    });
    };
    if (skipFresh)
      kb.ifThen(kb.ult(kb.idx(0), past), body);
    else
      body();
    });
  }, 0, name);
}

/// Whether the head-grouped absorbed kernel fits the op (GPU: R a multiple
/// of 32 lanes).
static bool groupedFits(MlaAttentionOp attn) {
  int64_t R = cast<ShapedType>(attn.getKvBProj().getType()).getDimSize(1);
  return R % 32 == 0 && intFromEnv("K3C_MLA_GROUPED", 1);
}

/// The absorbed form on the GPU with heads sharing the cache: G heads a
/// block. Pieces (each a part of a block program):
///  * q_abs of the group (scale folded in), W_UK read 16 bytes at a time;
///  * `stream`: each warp takes 32 cached positions at a time: (a) lanes over
///    positions, each lane scores its position for all G heads (the cache row
///    read once, 16 bytes at a time, against q_abs broadcast from shared
///    memory), warp max / online softmax per head; (b) lanes over latent
///    columns, o_lat[h] += p_h c for the 32 positions (p_h broadcast by
///    shuffles): the cache is read twice per group, not twice per head;
///  * `merge`: the warps' (m, l, o_lat) through shared memory;
///  * `project`: out = W_UV o_lat, a warp per 4 output columns, times the gate.
struct Grouped {
  KernelBuilder &kb;
  MlaAttentionOp attn;
  Value q;
  CacheRef cache;
  Value kvb, gate, out;
  int64_t G, H, nope, dv, R, cd, rope, qk, nr, vwC, vwR, vwKvb, vwQ, vwK, uq, ua, uo;
  Type outType, f32;
  Value scale, negInf, zero;

  Grouped(KernelBuilder &kb, MlaAttentionOp attn, Value q, const CacheRef &cache, Value kvb,
          Value gate,
          Value out, int64_t G)
      : kb(kb), attn(attn), q(q), cache(cache), kvb(kvb), gate(gate), out(out), G(G) {
    H = attn.getNumHeads();
    nope = attn.getQkNopeHeadDim();
    dv = attn.getVHeadDim();
    R = cast<MemRefType>(kvb.getType()).getDimSize(1);
    cd = cache.width();
    rope = cd - R;
    qk = nope + rope;
    nr = R / 32; // latent columns a lane owns in (b)
    vwC = kb.vecWidth(cache.mem, cd);
    vwR = std::min(vwC, nr);
    vwKvb = kb.vecWidth(kvb, R);
    while (nr % vwR)
      vwR /= 2;
    vwQ = std::min<int64_t>(vwC, cd % 4 ? 1 : 4);
    while (vwC % vwQ)
      vwQ /= 2;
    // Unrolling (loads issued together): q_abs rows, score chunks, output rows.
    vwK = vwKvb;
    uq = nope % 8 ? 1 : 8;
    ua = 4;
    uo = (G * dv) % 4 ? 1 : 4;
    while ((cd / vwC) % ua)
      ua /= 2;
    outType = cast<MemRefType>(out.getType()).getElementType();
    f32 = kb.b.getF32Type();
    scale = kb.f32(attn.getSoftmaxScale().convertToDouble());
    negInf = kb.f32(-INFINITY);
    zero = kb.f32(0.0);
  }

  /// q_abs (times the softmax scale) of `tokens` consecutive rows from `row`
  /// (rows from rowLimit on repeat the last), heads g*G.., W_UK read once for
  /// them: store(tt, h, column, value). A thread per (head, vwK columns).
  void qabs(ThreadBlock &tb, Value row, Value g, int64_t tokens, Value rowLimit,
            const std::function<void(int64_t, Value, Value, Value)> &store) {
    qabsSplit(tb, row, g, tokens, rowLimit, store, 1, Value());
  }
  /// The same with the nope sum split over `parts` thread groups (a thread
  /// per (part, head, vwK columns): tb.threads = parts G R / vwK), the
  /// groups' partial sums added in order through `red` (shared f32
  /// [tokens, G R]): `parts` times more loads in flight.
  void qabsSplit(ThreadBlock &tb, Value row, Value g, int64_t tokens, Value rowLimit,
                 const std::function<void(int64_t, Value, Value, Value)> &store, int64_t parts,
                 Value red) {
    SmallVector<Value> rows;
    for (int64_t tt = 0; tt < tokens; ++tt)
      rows.push_back(kb.minu(kb.add(row, kb.idx(tt)), kb.sub(rowLimit, kb.idx(1))));
    const int64_t items = G * R / vwK, span = nope / parts;
    auto partial = [&](Value i, Value j0, Value j1) {
      Value h = kb.div(i, R / vwK), r = kb.mul(kb.rem(i, R / vwK), vwK);
      Value head = kb.add(kb.mul(g, G), h);
      Value qBase = kb.mul(head, qk), kRow0 = kb.mul(head, nope + dv);
      return kb.loopStep(
          j0, j1, kb.idx(uq), SmallVector<Value>(vwK * tokens, zero),
          [&](Value jb, ValueRange in) {
            SmallVector<Value> qs, ws;
            for (int64_t u = 0; u < uq; ++u) {
              Value j = kb.add(jb, kb.idx(u));
              for (int64_t tt = 0; tt < tokens; ++tt)
                qs.push_back(kb.loadF32(q, {rows[tt], kb.add(qBase, j)}));
              SmallVector<Value> w = kb.loadVec(kvb, {kb.add(kRow0, j), r}, vwK);
              ws.append(w.begin(), w.end());
            }
            SmallVector<Value> o(in);
            for (int64_t u = 0; u < uq; ++u)
              for (int64_t tt = 0; tt < tokens; ++tt)
                for (int64_t e = 0; e < vwK; ++e)
                  o[tt * vwK + e] =
                      kb.fadd(o[tt * vwK + e], kb.fmul(qs[u * tokens + tt], ws[u * vwK + e]));
            return o;
          });
    };
    auto finish = [&](Value i, ArrayRef<Value> a) {
      Value h = kb.div(i, R / vwK), r = kb.mul(kb.rem(i, R / vwK), vwK);
      for (int64_t tt = 0; tt < tokens; ++tt)
        for (int64_t e = 0; e < vwK; ++e)
          store(tt, h, kb.add(r, kb.idx(e)), kb.fmul(a[tt * vwK + e], scale));
    };
    if (parts == 1) {
      kb.strided(tb, kb.idx(0), kb.idx(items),
                 [&](Value i) { finish(i, partial(i, kb.idx(0), kb.idx(nope))); });
    } else {
      assert(tb.threads == parts * items && span % uq == 0 && "qabsSplit's thread grid");
      Value i = kb.rem(tb.tid, items), part = kb.div(tb.tid, items);
      Value j0 = kb.mul(part, span);
      SmallVector<Value> a = partial(i, j0, kb.add(j0, kb.idx(span)));
      Value col0 = kb.mul(i, vwK); // h R + r
      for (int64_t p = 0; p < parts; ++p) {
        kb.ifThen(kb.ieq(part, kb.idx(p)), [&] {
          SmallVector<Value> sum(a);
          for (int64_t tt = 0; tt < tokens; ++tt)
            for (int64_t e = 0; e < vwK; ++e) {
              Value at = kb.add(col0, kb.idx(e));
              if (p)
                sum[tt * vwK + e] = kb.fadd(kb.load(red, {kb.idx(tt), at}), sum[tt * vwK + e]);
              if (p + 1 < parts)
                kb.store(sum[tt * vwK + e], red, {kb.idx(tt), at});
            }
          if (p + 1 == parts)
            finish(i, sum);
        });
        if (p + 1 < parts)
          kb.barrier(tb);
      }
    }
    kb.strided(tb, kb.idx(0), kb.idx(G * rope), [&](Value i) {
      Value h = kb.div(i, rope), c = kb.rem(i, rope), head = kb.add(kb.mul(g, G), h);
      for (int64_t tt = 0; tt < tokens; ++tt) {
        Value v = kb.loadF32(q, {rows[tt], kb.add(kb.add(kb.mul(head, qk), kb.idx(nope)), c)});
        store(tt, h, kb.add(kb.idx(R), c), kb.fmul(v, scale));
      }
    });
  }

  /// Per warp over positions [lo, hi) of sequence n against q_abs in `qa`
  /// (shared [G, cd]): m[G], l[G] (lane partial sums), acc[G][nr].
  SmallVector<Value> stream(ThreadBlock &tb, Value qa, Value n, Value lo, Value hi) {
    const int64_t W = tb.warps;
    SmallVector<Value> init(2 * G + G * nr, zero);
    for (int64_t h = 0; h < G; ++h)
      init[h] = negInf;
    return kb.loopStep(
        kb.add(lo, kb.mul(tb.warp, 32)), hi, kb.idx(W * 32), init, [&](Value p0, ValueRange in) {
              Value pos = kb.add(p0, tb.lane), valid = kb.ult(pos, hi);
              Value posC = kb.minu(pos, kb.sub(hi, kb.idx(1)));
              SmallVector<Value> rowC = cache.row(kb, n, posC);
              // (a) This lane's position, all heads.
              SmallVector<Value> sc = kb.loopStep(
                  kb.idx(0), kb.idx(cd), kb.idx(vwC * ua), SmallVector<Value>(G, zero),
                  [&](Value c0, ValueRange a) {
                    SmallVector<SmallVector<Value>> cv;
                    for (int64_t u = 0; u < ua; ++u) // the row's loads first
                      cv.push_back(kb.loadVec(
                          cache.mem, {rowC[0], rowC[1], kb.add(c0, kb.idx(u * vwC))}, vwC));
                    SmallVector<Value> o(a);
                    for (int64_t u = 0; u < ua; ++u)
                      for (int64_t h = 0; h < G; ++h)
                        for (int64_t e = 0; e < vwC; e += vwQ) {
                          SmallVector<Value> qv = kb.loadVec(
                              qa, {kb.idx(h), kb.add(c0, kb.idx(u * vwC + e))}, vwQ);
                          for (int64_t f = 0; f < vwQ; ++f)
                            o[h] = kb.fadd(o[h], kb.fmul(qv[f], cv[u][e + f]));
                        }
                    return o;
                  });
              SmallVector<Value> next(in);
              SmallVector<Value> pr(G), alpha(G);
              for (int64_t h = 0; h < G; ++h) {
                Value sv = kb.select(valid, sc[h], negInf);
                Value mNew = kb.fmax(in[h], kb.warpMax(tb, sv));
                alpha[h] = kb.exp(kb.fsub(in[h], mNew));
                pr[h] = kb.exp(kb.fsub(sv, mNew));
                next[h] = mNew;
                next[G + h] = kb.fadd(kb.fmul(in[G + h], alpha[h]), pr[h]);
                for (int64_t k = 0; k < nr; ++k)
                  next[2 * G + h * nr + k] = kb.fmul(in[2 * G + h * nr + k], alpha[h]);
              }
              // (b) Lanes over latent columns: o_lat += p c for the 32
              // positions (fewer at the end).
              Value cnt = kb.minu(kb.idx(32), kb.sub(hi, p0));
              SmallVector<Value> accIn(next.begin() + 2 * G, next.end());
              // Two positions a step (loads issued together); past the end
              // the second is the first again with weight 0 (p of a lane
              // past hi is 0).
              SmallVector<Value> acc = kb.loopStep(
                  kb.idx(0), cnt, kb.idx(2), accIn, [&](Value j, ValueRange a) {
                    Value j1 = kb.add(j, kb.idx(1));
                    Value pj[2] = {kb.add(p0, j),
                                   kb.add(p0, kb.select(kb.ult(j1, cnt), j1, j))};
                    SmallVector<SmallVector<Value>> ph(2, SmallVector<Value>(G));
                    for (int64_t k = 0; k < 2; ++k)
                      for (int64_t h = 0; h < G; ++h)
                        ph[k][h] = kb.shuffle(pr[h], k ? j1 : j, gpu::ShuffleMode::IDX);
                    SmallVector<SmallVector<Value>> cv;
                    for (int64_t k = 0; k < 2; ++k) {
                      SmallVector<Value> rk = cache.row(kb, n, pj[k]);
                      for (int64_t i = 0; i < nr / vwR; ++i)
                        cv.push_back(kb.loadVec(
                            cache.mem,
                            {rk[0], rk[1], kb.mul(kb.add(kb.idx(i * 32), tb.lane), vwR)}, vwR));
                    }
                    SmallVector<Value> o(a);
                    for (int64_t k = 0; k < 2; ++k)
                      for (int64_t i = 0; i < nr / vwR; ++i)
                        for (int64_t h = 0; h < G; ++h)
                          for (int64_t e = 0; e < vwR; ++e) {
                            Value &o1 = o[h * nr + i * vwR + e];
                            o1 = kb.fadd(o1, kb.fmul(ph[k][h], cv[k * (nr / vwR) + i][e]));
                          }
                    return o;
                  });
              std::copy(acc.begin(), acc.end(), next.begin() + 2 * G);
              return next;
        });
  }

  /// Merges the warps' states: o_lat[h] (shared [G, R]) = sum over warps of
  /// acc e^(m_w - M), divided by L when `normalize`; returns M[h], L[h]
  /// (every thread). `ml`: shared [2, warps, G]. Warps that saw no
  /// positions (m = -inf, l = 0) weigh exactly 0.
  std::pair<SmallVector<Value>, SmallVector<Value>>
  merge(ThreadBlock &tb, ArrayRef<Value> st, Value ml, Value olat, bool normalize) {
    const int64_t W = tb.warps;
    SmallVector<Value> lsum(G);
    for (int64_t h = 0; h < G; ++h) {
      lsum[h] = kb.warpSum(tb, st[G + h]);
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
        kb.store(st[h], ml, {kb.idx(0), tb.warp, kb.idx(h)});
        kb.store(lsum[h], ml, {kb.idx(1), tb.warp, kb.idx(h)});
      });
    }
    kb.strided(tb, kb.idx(0), kb.idx(G * R),
               [&](Value i) { kb.store(zero, olat, {kb.div(i, R), kb.rem(i, R)}); });
    kb.barrier(tb);
    SmallVector<Value> Ms(G), Ls(G), own(G);
    for (int64_t h = 0; h < G; ++h) {
      Value M = negInf;
      for (int64_t w = 0; w < W; ++w)
        M = kb.fmax(M, kb.load(ml, {kb.idx(0), kb.idx(w), kb.idx(h)}));
      Value L = zero;
      for (int64_t w = 0; w < W; ++w) {
        Value mw = kb.load(ml, {kb.idx(0), kb.idx(w), kb.idx(h)});
        Value lw = kb.load(ml, {kb.idx(1), kb.idx(w), kb.idx(h)});
        L = kb.fadd(L, kb.select(kb.fgt(lw, zero), kb.fmul(lw, kb.exp(kb.fsub(mw, M))), zero));
      }
      Ms[h] = M;
      Ls[h] = L;
      Value f = kb.select(kb.fgt(lsum[h], zero), kb.exp(kb.fsub(st[h], M)), zero);
      own[h] = normalize ? kb.fdiv(f, L) : f;
    }
    for (int64_t w = 0; w < W; ++w) {
      kb.ifThen(kb.ieq(tb.warp, kb.idx(w)), [&] {
        kb.ifThen(kb.fgt(lsum[0], zero), [&] {
          for (int64_t h = 0; h < G; ++h)
            for (int64_t i = 0; i < nr / vwR; ++i)
              for (int64_t e = 0; e < vwR; ++e) {
                Value r = kb.add(kb.mul(kb.add(kb.idx(i * 32), tb.lane), vwR), kb.idx(e));
                Value o = kb.load(olat, {kb.idx(h), r});
                kb.store(kb.fadd(o, kb.fmul(st[2 * G + h * nr + i * vwR + e], own[h])), olat,
                         {kb.idx(h), r});
              }
        });
      });
      kb.barrier(tb);
    }
    return {Ms, Ls};
  }

  /// out[row, head, j] = W_kv_b[v row j of head] . o_lat[h] (shared [G, R],
  /// normalized) times the gate: a warp per uo (h, j) rows at a time, lanes
  /// over the latent, 16-byte loads.
  void project(ThreadBlock &tb, Value olat, Value row, Value g) {
    const int64_t W = tb.warps;
        kb.loopStep(kb.mul(tb.warp, uo), kb.idx(G * dv), kb.idx(W * uo), [&](Value i0) {
          SmallVector<Value> part = kb.loopStep(
              kb.mul(tb.lane, vwKvb), kb.idx(R), kb.idx(tb.lanes * vwKvb),
              SmallVector<Value>(uo, zero), [&](Value r, ValueRange a) {
                SmallVector<SmallVector<Value>> w;
                for (int64_t u = 0; u < uo; ++u) {
                  Value i = kb.add(i0, kb.idx(u));
                  Value head = kb.add(kb.mul(g, G), kb.div(i, dv));
                  w.push_back(kb.loadVec(
                      kvb, {kb.add(kb.add(kb.mul(head, nope + dv), kb.idx(nope)), kb.rem(i, dv)), r},
                      vwKvb));
                }
                SmallVector<Value> o(a);
                for (int64_t u = 0; u < uo; ++u) {
                  SmallVector<Value> ov =
                      kb.loadVec(olat, {kb.div(kb.add(i0, kb.idx(u)), dv), r}, vwKvb);
                  for (int64_t e = 0; e < vwKvb; ++e)
                    o[u] = kb.fadd(o[u], kb.fmul(w[u][e], ov[e]));
                }
                return o;
              });
          for (int64_t u = 0; u < uo; ++u) {
            Value o = kb.warpSum(tb, part[u]);
            Value i = kb.add(i0, kb.idx(u));
            Value col = kb.add(kb.mul(kb.add(kb.mul(g, G), kb.div(i, dv)), dv), kb.rem(i, dv));
            kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
              kb.storeF32(gatedOutput(kb, o, gate, row, col, outType), out, {row, col});
            });
          }
        });
  }
};

/// project() for one head (G = 1), output rows [j0, j0 + nRows) of it: the
/// lanes' loop over the latent unrolled so that a warp's loads are all in
/// flight at once; the same sums in the same order as project().
static void projectRows(Grouped &gr, ThreadBlock &tb, Value olat, Value row, Value head,
                        Value j0, int64_t nRows) {
  KernelBuilder &kb = gr.kb;
  const int64_t W = tb.warps, uo = gr.uo, vw = gr.vwKvb;
  const int64_t steps = (gr.R + 32 * vw - 1) / (32 * vw);
  kb.loopStep(kb.mul(tb.warp, uo), kb.idx(nRows), kb.idx(W * uo), [&](Value i0) {
    SmallVector<SmallVector<Value>> w, ov;
    SmallVector<Value> ok;
    for (int64_t s = 0; s < steps; ++s) {
      Value r = kb.add(kb.mul(tb.lane, vw), kb.idx(s * 32 * vw));
      bool full = (s + 1) * 32 * vw <= gr.R;
      ok.push_back(full ? Value() : kb.ult(r, kb.idx(gr.R)));
      Value rc = full ? r : kb.minu(r, kb.idx(gr.R - vw));
      for (int64_t u = 0; u < uo; ++u)
        w.push_back(kb.loadVec(
            gr.kvb,
            {kb.add(kb.add(kb.mul(head, gr.nope + gr.dv), kb.idx(gr.nope)),
                    kb.add(j0, kb.add(i0, kb.idx(u)))),
             rc},
            vw));
      ov.push_back(kb.loadVec(olat, {kb.idx(0), rc}, vw));
    }
    for (int64_t u = 0; u < uo; ++u) {
      Value o = gr.zero;
      for (int64_t s = 0; s < steps; ++s) {
        Value acc = o;
        for (int64_t e = 0; e < vw; ++e)
          acc = kb.fadd(acc, kb.fmul(w[s * uo + u][e], ov[s][e]));
        o = ok[s] ? kb.select(ok[s], acc, o) : acc;
      }
      o = kb.warpSum(tb, o);
      Value col = kb.add(kb.mul(head, gr.dv), kb.add(j0, kb.add(i0, kb.idx(u))));
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
        kb.storeF32(gatedOutput(kb, o, gr.gate, row, col, gr.outType), gr.out, {row, col});
      });
    }
  });
}

/// project() for one head (G = 1) and `tokens` rows at once (olat: shared
/// [tokens, R], normalized; rows row0 + tt for tt < valid are stored): each
/// W_UV row is loaded once for all of them. Per token the same sums in the
/// same order as project().
static void projectTokens(Grouped &gr, ThreadBlock &tb, Value olat, Value row0, Value valid,
                          Value head, int64_t tokens) {
  KernelBuilder &kb = gr.kb;
  const int64_t W = tb.warps, uo = gr.uo, vw = gr.vwKvb;
  kb.loopStep(kb.mul(tb.warp, uo), kb.idx(gr.dv), kb.idx(W * uo), [&](Value i0) {
    SmallVector<Value> part = kb.loopStep(
        kb.mul(tb.lane, vw), kb.idx(gr.R), kb.idx(tb.lanes * vw),
        SmallVector<Value>(uo * tokens, gr.zero), [&](Value r, ValueRange a) {
          SmallVector<SmallVector<Value>> w;
          for (int64_t u = 0; u < uo; ++u)
            w.push_back(kb.loadVec(gr.kvb,
                                   {kb.add(kb.add(kb.mul(head, gr.nope + gr.dv), kb.idx(gr.nope)),
                                           kb.add(i0, kb.idx(u))),
                                    r},
                                   vw));
          SmallVector<Value> o(a);
          for (int64_t tt = 0; tt < tokens; ++tt) {
            SmallVector<Value> ov = kb.loadVec(olat, {kb.idx(tt), r}, vw);
            for (int64_t u = 0; u < uo; ++u)
              for (int64_t e = 0; e < vw; ++e)
                o[u * tokens + tt] = kb.fadd(o[u * tokens + tt], kb.fmul(w[u][e], ov[e]));
          }
          return o;
        });
    for (int64_t u = 0; u < uo; ++u)
      for (int64_t tt = 0; tt < tokens; ++tt) {
        Value o = kb.warpSum(tb, part[u * tokens + tt]);
        Value row = kb.add(row0, kb.idx(tt));
        Value col = kb.add(kb.mul(head, gr.dv), kb.add(i0, kb.idx(u)));
        kb.ifThen(kb.andi(kb.ieq(tb.lane, kb.idx(0)), kb.ult(kb.idx(tt), valid)), [&] {
          kb.storeF32(gatedOutput(kb, o, gr.gate, row, col, gr.outType), gr.out, {row, col});
        });
      }
  });
}

/// projectTokens on tensor cores (GPU, bf16 W_UV): out[row0 + m, head, j] =
/// W_UV[head] o_lat[m] for the block's 16 tokens as one 16 x dv x R product,
/// o_lat given as hi + lo bf16 parts (olHi, olLo: shared [16, pitch], rows
/// past `valid` zero) so that the product keeps fp32-level inputs (two
/// m16n8k16 MMAs a k step; the W_UV bf16 values are exact). A warp per dv /
/// warps columns; W_UV's B fragments straight from global memory (each
/// 32-byte sector of a row read by one warp), 4 k steps of loads in flight.
/// K3C_MLA_COMBINE_WIDE_W (default 1; 0: the pair loads): W_UV's B words come
/// from one 16-byte load a row and 32 k columns (thread quad q takes columns
/// 8q .. 8q + 7 of the chunk: words 2s, 2s + 1 are its b0, b1 of the chunk's
/// k step s), so the reduction runs over a permutation of each 32-column
/// chunk: the merge stores o_lat's column r at combinePermutedCol(r), where
/// ldmatrix reads the A fragment of that logical k. A quarter of the load
/// instructions and whole 32-byte sectors (the pair loads use half of each);
/// the sums are the same products in another order (not bit-identical).
/// H200, slice, context 64 (docs/perf.md, session 35): mla_attn 146.8 ->
/// 127.3 us at 128 sequences, 72.0 -> 62.4 at 64, 59.2 -> 54.2 at 32; the
/// k3-tiny dv64 checks at 100 and 12 sequences at the same fraction of
/// their bound (0.82, 0.64).
static bool combineWideW(int64_t R) {
  return R % 32 == 0 && intFromEnv("K3C_MLA_COMBINE_WIDE_W", 1) != 0;
}
/// Where physical latent column r sits in the permuted o_lat tile: in its
/// 32-column chunk, c = 8q + 4s + 2h + e -> 16s + 8h + 2q + e.
static Value combinePermutedCol(KernelBuilder &kb, Value r) {
  Value base = kb.mul(kb.div(r, kb.idx(32)), kb.idx(32)), c = kb.rem(r, kb.idx(32));
  Value q = kb.div(c, kb.idx(8)), s = kb.rem(kb.div(c, kb.idx(4)), kb.idx(2));
  Value h = kb.rem(kb.div(c, kb.idx(2)), kb.idx(2)), e = kb.rem(c, kb.idx(2));
  return kb.add(base, kb.add(kb.add(kb.mul(s, kb.idx(16)), kb.mul(h, kb.idx(8))),
                             kb.add(kb.mul(q, kb.idx(2)), e)));
}

/// `nRows` rows of `chunks` 16-byte chunks (8 bf16) into shared `dst` [row,
/// 8 chunk] by cp.async, the block's threads striding over the chunks;
/// srcAt(row, column) is the source index. With `rows`, rows from there on
/// are zero-filled (their source clamped to row 0). The chunks must make
/// whole rounds of the block's threads. The copies' tokens are appended to
/// `toks` (the caller commits the group).
static void copyRowsAsync(KernelBuilder &kb, ThreadBlock &tb, Value dst, Value src,
                          int64_t nRows, int64_t chunks, Value rows,
                          const std::function<SmallVector<Value>(Value, Value)> &srcAt,
                          SmallVector<Value> &toks) {
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(kb.b.getContext());
  const int64_t total = nRows * chunks;
  // (whole rounds: a guarded copy's token would not dominate the group)
  if (total % tb.threads)
    llvm::report_fatal_error("k3c: copyRowsAsync: " + llvm::Twine(total) +
                                 " chunks are not whole rounds of " + llvm::Twine(tb.threads) +
                                 " threads",
                             /*gen_crash_diag=*/false);
  for (int64_t i = 0; i * tb.threads < total; ++i) {
    Value lin = kb.add(tb.tid, kb.idx(i * tb.threads));
    Value r = kb.div(lin, kb.idx(chunks)), c8 = kb.mul(kb.rem(lin, kb.idx(chunks)), 8);
    Value ok = rows ? kb.ult(r, rows) : Value();
    Value sr = ok ? kb.select(ok, r, kb.idx(0)) : r;
    Value n = ok ? kb.select(ok, kb.idx(8), kb.idx(0)) : Value();
    toks.push_back(nvgpu::DeviceAsyncCopyOp::create(kb.b, kb.loc, tokenType, dst,
                                                    ValueRange{r, c8}, src, srcAt(sr, c8),
                                                    kb.b.getIndexAttr(8), n, kb.b.getUnitAttr()));
  }
}

/// The head's W_UV rows [dv, R] (kvb's rows head (nope + dv) + nope ...)
/// into shared memory `wS` [dv, pitch] by 16-byte cp.async copies, one
/// committed group (its wait: the caller's, before the projection).
static void stageCombineW(Grouped &gr, ThreadBlock &tb, Value head, Value wS) {
  KernelBuilder &kb = gr.kb;
  Value base = kb.add(kb.mul(head, gr.nope + gr.dv), kb.idx(gr.nope));
  SmallVector<Value> toks;
  copyRowsAsync(kb, tb, wS, gr.kvb, gr.dv, gr.R / 8, Value(), [&](Value r, Value c8) {
    return SmallVector<Value>{kb.add(base, r), c8};
  }, toks);
  nvgpu::DeviceAsyncCreateGroupOp::create(
      kb.b, kb.loc, nvgpu::DeviceAsyncTokenType::get(kb.b.getContext()), toks);
}

/// `kBegin`, `kLen` (multiples of 64; none: all R): the latent columns
/// summed; `sink`, where given, takes each accumulator (token m < 16, the
/// head's output column n < dv, the fp32 sum) instead of the gated store.
/// `wS`, where given (with combineWideW): the head's W_UV rows staged in
/// shared memory [dv, pitch] (stageCombineW), read there by the same
/// 16-byte vectors the global form loads (the same words: the same sums).
static void projectTokensMma(Grouped &gr, ThreadBlock &tb, Value olHi, Value olLo, Value row0,
                             Value valid, Value head, Value kBegin = {}, int64_t kLen = -1,
                             const std::function<void(Value, Value, Value)> *sink = nullptr,
                             Value wS = {}) {
  KernelBuilder &kb = gr.kb;
  const int64_t W = tb.warps, cols = gr.dv / W, tiles = cols / 8;
  Value lane = tb.lane, quad = kb.rem(lane, 4), grp = kb.div(lane, 4);
  Value aRow = kb.rem(lane, 16), aCol = kb.mul(kb.div(lane, 16), 8);
  Value n0 = kb.mul(tb.warp, cols);
  Value wRow0 = kb.add(kb.add(kb.mul(head, gr.nope + gr.dv), kb.idx(gr.nope)), kb.add(n0, grp));
  constexpr int64_t U = 4; // k steps a loop iteration
  const bool wide = combineWideW(gr.R);
  assert((!wS || wide) && "staged W_UV is read in the wide form");
  SmallVector<Value> acc = kb.loopStep(
      kBegin ? kBegin : kb.idx(0),
      kBegin ? kb.add(kBegin, kb.idx(kLen)) : kb.idx(gr.R), kb.idx(16 * U),
      SmallVector<Value>(tiles * 4, gr.zero),
      [&](Value k0, ValueRange in) {
        SmallVector<Value> bw(2 * U * tiles); // [u][t][2]
        if (wide) {
          Type i32 = kb.b.getI32Type();
          for (int64_t ch = 0; ch < U / 2; ++ch) // 32-column chunks: k steps 2 ch, 2 ch + 1
            for (int64_t t = 0; t < tiles; ++t) {
              Value wr = wS ? kb.add(kb.add(n0, grp), kb.idx(8 * t)) : kb.add(wRow0, kb.idx(8 * t));
              Value kc = kb.add(k0, kb.add(kb.idx(32 * ch), kb.mul(quad, 8)));
              Value v = vector::LoadOp::create(kb.b, kb.loc,
                                               VectorType::get({8}, kb.b.getBF16Type()),
                                               wS ? wS : gr.kvb, ValueRange{wr, kc}, false,
                                               llvm::MaybeAlign(16));
              Value w = vector::BitCastOp::create(kb.b, kb.loc, VectorType::get({4}, i32), v);
              for (int64_t s2 = 0; s2 < 2; ++s2)
                for (int64_t j = 0; j < 2; ++j)
                  bw[((2 * ch + s2) * tiles + t) * 2 + j] =
                      vector::ExtractOp::create(kb.b, kb.loc, w, ArrayRef<int64_t>{2 * s2 + j});
            }
        } else {
          for (int64_t u = 0; u < U; ++u)
            for (int64_t t = 0; t < tiles; ++t) {
              Value wr = kb.add(wRow0, kb.idx(8 * t));
              Value kc = kb.add(k0, kb.add(kb.idx(16 * u), kb.mul(quad, 2)));
              bw[(u * tiles + t) * 2] = loadPairWord(kb, gr.kvb, {wr, kc});
              bw[(u * tiles + t) * 2 + 1] = loadPairWord(kb, gr.kvb, {wr, kb.add(kc, kb.idx(8))});
            }
        }
        SmallVector<Value> c(in.begin(), in.end());
        for (int64_t u = 0; u < U; ++u) {
          Value kc = kb.add(k0, kb.add(kb.idx(16 * u), aCol));
          SmallVector<Value> aHi = fragmentWords(kb, ldmatrixX4(kb, olHi, {aRow, kc}, false), 0, 4);
          SmallVector<Value> aLo = fragmentWords(kb, ldmatrixX4(kb, olLo, {aRow, kc}, false), 0, 4);
          for (int64_t t = 0; t < tiles; ++t) {
            SmallVector<Value> bf{bw[(u * tiles + t) * 2], bw[(u * tiles + t) * 2 + 1]};
            MutableArrayRef<Value> ct = MutableArrayRef<Value>(c).slice(4 * t, 4);
            mmaBf16(kb, aHi, bf, ct);
            mmaBf16(kb, aLo, bf, ct);
          }
        }
        return c;
      });
  // C fragment: c0, c1 at row grp, columns 2 quad + {0, 1}; c2, c3 at row grp + 8.
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t e = 0; e < 4; ++e) {
      Value m = kb.add(grp, kb.idx(e < 2 ? 0 : 8));
      Value n = kb.add(n0, kb.add(kb.idx(8 * t + e % 2), kb.mul(quad, 2)));
      if (sink) {
        (*sink)(m, n, acc[4 * t + e]);
        continue;
      }
      Value col = kb.add(kb.mul(head, gr.dv), n);
      kb.ifThen(kb.ult(m, valid), [&] {
        Value row = kb.add(row0, m);
        kb.storeF32(gatedOutput(kb, acc[4 * t + e], gr.gate, row, col, gr.outType), gr.out,
                    {row, col});
      });
    }
}

/// q_abs of 16 tokens (rows row0 + m, m < valid; rows past repeat the last)
/// for one head on tensor cores (GPU; bf16 q and W_UK, both exact in the
/// MMA's bf16 inputs): q_nope [16, nope] W_UK[head] [nope, R] as m16n8k16
/// MMAs, a warp per R / warps columns, A fragments (pairs of adjacent q
/// columns) and B fragments (pairs of adjacent W_UK rows) straight from
/// global memory. store(m, column, value) gets scale q_abs; the rope columns
/// (scale q_pe) follow, a thread per (token, column).
static void qabsMma(Grouped &gr, ThreadBlock &tb, Value row0, Value valid, Value head,
                    const std::function<void(Value, Value, Value)> &store) {
  KernelBuilder &kb = gr.kb;
  const int64_t W = tb.warps, cols = gr.R / W, tiles = cols / 8;
  Value lane = tb.lane, quad = kb.rem(lane, 4), grp = kb.div(lane, 4);
  Value last = kb.sub(valid, kb.idx(1));
  Value rA = kb.add(row0, kb.minu(grp, last));
  Value rB = kb.add(row0, kb.minu(kb.add(grp, kb.idx(8)), last));
  Value qBase = kb.mul(head, gr.qk), kBase = kb.mul(head, gr.nope + gr.dv);
  Value n0 = kb.mul(tb.warp, cols);
  SmallVector<Value> acc = kb.loopStep(
      kb.idx(0), kb.idx(gr.nope), kb.idx(16), SmallVector<Value>(tiles * 4, gr.zero),
      [&](Value k0, ValueRange in) {
        Value ka = kb.add(qBase, kb.add(k0, kb.mul(quad, 2)));
        SmallVector<Value> a{loadPairWord(kb, gr.q, {rA, ka}), loadPairWord(kb, gr.q, {rB, ka}),
                             loadPairWord(kb, gr.q, {rA, kb.add(ka, kb.idx(8))}),
                             loadPairWord(kb, gr.q, {rB, kb.add(ka, kb.idx(8))})};
        Value kr = kb.add(kBase, kb.add(k0, kb.mul(quad, 2)));
        SmallVector<Value> bw;
        for (int64_t t = 0; t < tiles; ++t) {
          Value n = kb.add(n0, kb.add(kb.idx(8 * t), grp));
          bw.push_back(loadColumnPairWord(kb, gr.kvb, kr, n));
          bw.push_back(loadColumnPairWord(kb, gr.kvb, kb.add(kr, kb.idx(8)), n));
        }
        SmallVector<Value> c(in.begin(), in.end());
        for (int64_t t = 0; t < tiles; ++t)
          mmaBf16(kb, a, {bw[2 * t], bw[2 * t + 1]}, MutableArrayRef<Value>(c).slice(4 * t, 4));
        return c;
      });
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t e = 0; e < 4; ++e) {
      Value m = kb.add(grp, kb.idx(e < 2 ? 0 : 8));
      Value col = kb.add(n0, kb.add(kb.idx(8 * t + e % 2), kb.mul(quad, 2)));
      kb.ifThen(kb.ult(m, valid), [&] { store(m, col, kb.fmul(acc[4 * t + e], gr.scale)); });
    }
  kb.strided(tb, kb.idx(0), kb.mul(valid, kb.idx(gr.rope)), [&](Value i) {
    Value m = kb.div(i, gr.rope), c = kb.rem(i, gr.rope);
    Value v = kb.loadF32(gr.q, {kb.add(row0, m), kb.add(kb.add(qBase, kb.idx(gr.nope)), c)});
    store(m, kb.add(kb.idx(gr.R), c), kb.fmul(v, gr.scale));
  });
}

/// q_abs of up to kQabsTileTokens tokens (rows row0 + m, m < valid) and
/// kQabsTileCols latent columns [c0, c0 + kQabsTileCols) of one head on
/// tensor cores, its operands staged in shared memory (GPU; bf16 q and
/// W_UK): the tokens' q_nope rows [tokens, nope] and W_UK[head]'s column
/// slice [nope, cols] by cp.async (rows past `valid` zero-filled), then a
/// warp per 16 tokens: A fragments by ldmatrix, B fragments by
/// ldmatrix.trans (W_UK's rows are the k dimension), m16n8k16 MMAs over
/// nope. Each W_UK byte is read once per tile of tokens (qabsMma's blocks of
/// 16 tokens read the head's whole W_UK each, with 2-byte loads in eight
/// dependent rounds). store(m, column, value) gets scale q_abs for two
/// adjacent columns at once (value pairs); the rope columns (scale q_pe)
/// follow in the blocks of the first column slice, a thread per (token,
/// column), or with K3C_MLA_QABS_ROPE_SPREAD=1 in 8-column chunks over
/// every column slice's blocks (below).
constexpr int64_t kQabsTileTokens = 64, kQabsTileCols = 64;
static void qabsMmaStaged(Grouped &gr, ThreadBlock &tb, Value row0, Value valid, Value head,
                          Value c0, Value qs, Value ws,
                          const std::function<void(Value, Value, ArrayRef<Value>)> &store,
                          const std::function<void()> &afterW = {}) {
  KernelBuilder &kb = gr.kb;
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(kb.b.getContext());
  const int64_t TT = kQabsTileTokens, NC = kQabsTileCols, K = gr.nope;
  SmallVector<Value> toks;
  auto copies = [&](Value dst, Value src, int64_t nRows, int64_t chunks, Value rows,
                    const std::function<SmallVector<Value>(Value, Value)> &srcAt) {
    copyRowsAsync(kb, tb, dst, src, nRows, chunks, rows, srcAt, toks);
  };
  Value qBase = kb.mul(head, gr.qk), wBase = kb.mul(head, gr.nope + gr.dv);
  auto qCopies = [&] {
    copies(qs, gr.q, TT, K / 8, valid, [&](Value r, Value c8) {
      return SmallVector<Value>{kb.add(row0, r), kb.add(qBase, c8)};
    });
  };
  auto wCopies = [&] {
    copies(ws, gr.kvb, K, NC / 8, Value(),
           [&](Value r, Value c8) { return SmallVector<Value>{kb.add(wBase, r), kb.add(c0, c8)}; });
  };
  // afterW (the kernel's own grid wait): W_UK's slice is copied first, the
  // rows of q (written by the kernel ahead) after it.
  if (afterW) {
    wCopies();
    afterW();
    qCopies();
  } else {
    qCopies();
    wCopies();
  }
  nvgpu::DeviceAsyncCreateGroupOp::create(kb.b, kb.loc, tokenType, toks);
  NVVM::CpAsyncWaitGroupOp::create(kb.b, kb.loc, kb.b.getI32IntegerAttr(0));
  kb.barrier(tb);
  Value lane = tb.lane, wRow = kb.mul(tb.warp, 16);
  Value aRow = kb.add(wRow, kb.rem(lane, 16)), aCol = kb.mul(kb.div(lane, 16), 8);
  Value bRow = kb.add(kb.rem(lane, 8), kb.mul(kb.rem(kb.div(lane, 8), 2), 8));
  Value bCol = kb.mul(kb.div(lane, 16), 8);
  SmallVector<Value> acc(NC / 8 * 4, gr.zero);
  for (int64_t k = 0; k < K / 16; ++k) {
    SmallVector<Value> a =
        fragmentWords(kb, ldmatrixX4(kb, qs, {aRow, kb.add(aCol, kb.idx(k * 16))}, false), 0, 4);
    for (int64_t d = 0; d < NC / 16; ++d)
      mmaX4(kb, a, ldmatrixX4(kb, ws, {kb.add(bRow, kb.idx(k * 16)), kb.add(bCol, kb.idx(d * 16))},
                              true),
            acc, 2 * d);
  }
  // C fragment: c0, c1 at row g, columns 2q, 2q + 1; c2, c3 at row g + 8.
  Value g = kb.div(lane, 4), q2 = kb.mul(kb.rem(lane, 4), 2);
  for (int64_t t = 0; t < NC / 8; ++t)
    for (int64_t h = 0; h < 2; ++h) {
      Value m = kb.add(wRow, kb.add(g, kb.idx(8 * h)));
      Value col = kb.add(c0, kb.add(kb.idx(8 * t), q2));
      kb.ifThen(kb.ult(m, valid), [&] {
        store(m, col, {kb.fmul(acc[4 * t + 2 * h], gr.scale), kb.fmul(acc[4 * t + 2 * h + 1], gr.scale)});
      });
    }
  // K3C_MLA_QABS_ROPE_SPREAD=1 (opt-in until measured; session 62): the
  // rope columns in 8-column chunks spread over the head's R / NC column
  // blocks (block b the chunks b, b + R / NC, ...), a thread per (token,
  // chunk), one 16-byte load and store each. Otherwise the first column
  // block alone takes every (token, rope column) a thread each: at 64
  // tokens 32 load-then-store rounds a thread in a loop, each waiting on
  // its load, while the other blocks are done (the staged q_abs took 27 us
  // a 64-token round on an H100, session 57, against 10.6 at 8 tokens).
  // The same loads, products and roundings: the same values.
  const int64_t nb = gr.R / NC, chunks = gr.rope / 8;
  const bool spread = intFromEnv("K3C_MLA_QABS_ROPE_SPREAD", 0) && gr.rope % 8 == 0 &&
                      gr.nope % 8 == 0 && gr.qk % 8 == 0 && gr.R % NC == 0 &&
                      kb.vecWidth(gr.q, gr.qk) >= 8;
  if (spread) {
    Value b = kb.div(c0, kb.idx(NC));
    for (int64_t j = 0; j * nb < chunks; ++j) {
      Value ch = kb.add(b, kb.idx(j * nb));
      kb.ifThen(kb.ult(ch, kb.idx(chunks)), [&] {
        Value c = kb.mul(ch, kb.idx(8));
        kb.strided(tb, kb.idx(0), valid, [&](Value m) {
          SmallVector<Value> v =
              kb.loadVec(gr.q, {kb.add(row0, m), kb.add(kb.add(qBase, kb.idx(gr.nope)), c)}, 8);
          for (Value &e : v)
            e = kb.fmul(e, gr.scale);
          store(m, kb.add(kb.idx(gr.R), c), v);
        });
      });
    }
    return;
  }
  kb.ifThen(kb.ieq(c0, kb.idx(0)), [&] {
    kb.strided(tb, kb.idx(0), kb.mul(valid, kb.idx(gr.rope)), [&](Value i) {
      Value m = kb.div(i, gr.rope), c = kb.rem(i, gr.rope);
      Value v = kb.loadF32(gr.q, {kb.add(row0, m), kb.add(kb.add(qBase, kb.idx(gr.nope)), c)});
      store(m, kb.add(kb.idx(gr.R), c), {kb.fmul(v, gr.scale)});
    });
  });
}

/// The grouped absorbed kernel for the cached sequences of a prefill launch:
/// a block per (tpb tokens, group of G heads), tokens of sequences without
/// cached context (the flash prefill's) skipped.
static void absorbedGrouped(KernelBuilder &kb, MlaAttentionOp attn, Value q, const CacheRef &cache,
                            Value cacheLens, Value lens, Value kvb, Value gate, Value out,
                            int64_t G, int64_t tpb) {
  Grouped gr(kb, attn, q, cache, kvb, gate, out, G);
  Value T = kb.dim(q, 0);
  std::string name = "absorbed_g" + std::to_string(G) + "_cached";
  kb.blocks({kb.ceilDiv(T, tpb), kb.idx(gr.H / G)}, kMlaThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value g = bid[1];
    Value qa = kb.shared(tb, {G, gr.cd}, gr.f32);
    Value ml = kb.shared(tb, {2, tb.warps, G}, gr.f32);
    Value olat = kb.shared(tb, {G, gr.R}, gr.f32);
    // A block whose rows all belong to one fresh sequence (the common case
    // of a prefill launch) returns at once: one scan of seq_lens instead of
    // one a row (6144 blocks at 8192 tokens and 96 heads took 0.35 ms).
    Value first = kb.mul(bid[0], tpb), end = kb.minu(kb.add(first, kb.idx(tpb)), T);
    ChunkSlot head = findChunk(kb, tb, lens, first, 1);
    Value fresh = kb.andi(
        kb.ieq(kb.toIndex(kb.load(cacheLens, {kb.select(head.valid, head.n, kb.idx(0))})),
               kb.idx(0)),
        kb.ule(end, kb.add(head.start, head.len)));
    Value skip = kb.andi(head.valid, fresh);
    Value run = arith::XOrIOp::create(kb.b, kb.loc, skip,
                                      arith::ConstantIntOp::create(kb.b, kb.loc, 1, 1));
    kb.ifThen(run, [&] {
    kb.loop(first, end, [&](Value row) {
      ChunkSlot cs = findChunk(kb, tb, lens, row, 1);
      Value past = kb.toIndex(kb.load(cacheLens, {cs.n}));
      kb.ifThen(kb.ult(kb.idx(0), past), [&] {
        Value S = kb.add(kb.add(past, cs.t0), kb.idx(1));
        gr.qabs(tb, row, g, 1, T, [&](int64_t, Value h, Value c, Value v) {
          kb.store(v, qa, {h, c});
        });
        kb.barrier(tb);
        SmallVector<Value> st = gr.stream(tb, qa, cs.n, kb.idx(0), S);
        gr.merge(tb, st, ml, olat, /*normalize=*/true);
        gr.project(tb, olat, row, g);
        kb.barrier(tb);
      });
    });
    });
  }, 0, name);
}

/// Split decode: tokens a round of launches (q_abs, core, combine), 128 by
/// default since session 60 (64 before; H100, the slice at 128 sequences:
/// mla_attn 124 -> 107 us, the step within noise, tokens unchanged): batched
/// decode of up to 128 sequences in one round (one q_abs, core and combine
/// launch instead of two, W_UK and W_UV read once, the append in the staged
/// q_abs launch), with the round's q_abs scratch that much larger;
/// K3C_MLA_ROUND_TOKENS=64 or 256 the other sizes.
static int64_t splitChunkTokens() {
  const int64_t n = intFromEnv("K3C_MLA_ROUND_TOKENS", 128);
  if (n != 64 && n != 128 && n != 256)
    llvm::report_fatal_error("k3c: K3C_MLA_ROUND_TOKENS must be 64, 128 or 256, got " +
                                 llvm::Twine(n),
                             /*gen_crash_diag=*/false);
  return n;
}
/// K3C_MLA_COMBINE_STAGE_W's default: rounds of 8..16 tokens take the
/// combine that stages W_UV before its grid wait (session 52, H100: with the
/// early tiles and the early W_UK q_abs, mla_attn at 8 sequences, context
/// 8192, 65.0 / 66.6 / 64.8 us against 71.1 / 71.9 / 71.3).
constexpr int64_t kCombineStageW = 16;
constexpr int64_t kSplitSlots = 256;  ///< split decode: (token, split) partials at most
constexpr int64_t kSplitMax = 32;     ///< split decode: splits of a token's positions
constexpr int64_t kSplitMaxFma = 16;  ///< the same, FMA core
constexpr int64_t kSplitMaxAny = 128; ///< the most K3C_MLA_DECODE_SPLITS allows
/// split decode: tokens a combine block projects from rounds of that many
/// tokens on (K3C_MLA_COMBINE_TOKENS; above a round's tokens: never).
constexpr int64_t kCombineTokens = 8;
constexpr int64_t kSplitBlocks = 264; ///< split decode: blocks aimed for (2 an SM)
constexpr int64_t kSplitMin = 32;     ///< split decode: positions a split at least (a warp tile)

/// Scratch of the split decode: q_abs of a round's tokens [round, H cd]
/// and the (token, split) partials [kSplitSlots, H (R + 2)] (o_lat, M, L);
/// with the tensor-core core, q_abs in bf16 [round H, cd] too (round:
/// splitChunkTokens()).
static SmallVector<ScratchNeed> splitScratch(MlaAttentionOp attn) {
  int64_t H = attn.getNumHeads(), R = cast<ShapedType>(attn.getKvBProj().getType()).getDimSize(1);
  auto kvType = cast<ShapedType>(attn.getKv().getType());
  int64_t cd = kvType.getDimSize(1);
  Type f32 = Float32Type::get(attn.getContext());
  SmallVector<ScratchNeed> needs{ScratchNeed{{splitChunkTokens(), H * cd}, f32},
                                 ScratchNeed{{kSplitSlots, H * (R + 2)}, f32}};
  if (decodeMmaPlan(attn, Target::Gpu).on)
    needs.push_back(ScratchNeed{{splitChunkTokens() * H, cd}, kvType.getElementType()});
  return needs;
}

/// A split decode block's positions: split `split` of P over the token's
/// visible positions (its sequence's cached ones and its own), in whole
/// tiles of bn: [lo, hi), nT tiles.
struct SplitRange {
  ChunkSlot cs;
  Value lo, hi, nT;
  Value past; ///< the sequence's positions cached before this round
};
/// A split's positions: ceil(S / P) rounded up to whole tiles of bn (every
/// split but the last holds this many; splits from ceil(S / per) on none).
/// splitRange's and the one-token combine's trim (K3C_MLA_COMBINE_TRIM).
static Value splitSpan(KernelBuilder &kb, Value S, Value P, Value bn) {
  Value q = kb.div(kb.add(S, kb.sub(P, kb.idx(1))), P);
  return kb.mul(kb.div(kb.add(q, kb.sub(bn, kb.idx(1))), bn), bn);
}
static SplitRange splitRange(KernelBuilder &kb, ThreadBlock &tb, Value lens, Value cacheLens,
                             Value row, Value split, Value P, int64_t bn) {
  SplitRange r;
  r.cs = findChunk(kb, tb, lens, row, 1);
  Value past = kb.toIndex(kb.load(cacheLens, {r.cs.n}));
  r.past = past;
  Value S = kb.add(kb.add(past, r.cs.t0), kb.idx(1)); // visible positions
  Value per = splitSpan(kb, S, P, kb.idx(bn));
  r.lo = kb.minu(kb.mul(split, per), S);
  r.hi = kb.minu(kb.add(r.lo, per), S);
  r.nT = kb.ceilDiv(kb.sub(r.hi, r.lo), bn);
  return r;
}

/// The split cores' cache-tile copies at constant per-thread offsets (where
/// tileCopiesFit: cd a multiple of 64, the block's threads of 8): thread t
/// takes rows t / 8 + (threads / 8) n of the bn-row tile and 16-byte chunks
/// t % 8 + 8 m of every 64-column block m, so that every offset past its
/// first copy is a constant and a warp copies four whole 128-byte row
/// segments a copy (a div/rem per copy took ~15-30 instructions: half of the
/// warpgroup core's tile loop). Row r reads position srcRow0 + r, zero-filled
/// from `valid` rows on; rows past bn in a last partial pass copy nothing.
/// Positions are sequence `seq`'s in `cache`, each row's mapped once (a page
/// lookup when paged). `copy(r, m, src, bytes)` (src: the row's leading
/// cache indices) issues one 16-byte copy of block m and returns
/// its token, collected into `toks` (when given) except under the last
/// pass's condition (those join the thread's group without their tokens: a
/// commit takes every earlier copy of the thread).
static bool tileCopiesFit(int64_t cd, int64_t threads) { return cd % 64 == 0 && threads % 8 == 0; }
static void copyTileRows(KernelBuilder &kb, ThreadBlock &tb, int64_t bn, int64_t cd,
                         Value srcRow0, Value valid, const CacheRef &cache, Value seq,
                         const std::function<Value(Value, int64_t, ArrayRef<Value>, Value)> &copy,
                         SmallVector<Value> *toks = nullptr) {
  const int64_t rp = tb.threads / 8;
  Value rt = kb.div(tb.tid, 8);
  for (int64_t n = 0; n * rp < bn; ++n) {
    Value r = kb.add(rt, kb.idx(rp * n));
    auto body = [&](bool keep) {
      Value ok = kb.ult(r, valid);
      Value srcPos = kb.select(ok, kb.add(srcRow0, r), kb.idx(0));
      Value bytes = kb.select(ok, kb.idx(8), kb.idx(0));
      SmallVector<Value> src = cache.row(kb, seq, srcPos);
      for (int64_t m = 0; m < cd / 64; ++m) {
        Value t = copy(r, m, src, bytes);
        if (keep && toks)
          toks->push_back(t);
      }
    };
    if ((n + 1) * rp <= bn)
      body(true);
    else
      kb.ifThen(kb.ult(r, kb.idx(bn)), [&] { body(false); });
  }
}

/// One row's split partials from a tensor-core core's m16n8 accumulators
/// (`oAt(i)`: accumulator i, tile i / 4, the row's pair at i % 4 = 2 hf,
/// 2 hf + 1): O columns col0 + 8 t + c2 (+ 1) for t < tiles at [slot, head
/// (R + 2) + col], and, where `writesML()` holds, M (log2 units, stored in
/// natural-log units as the FMA core's) and L; heads past H store nothing.
static void storeSplitRow(KernelBuilder &kb, Value part, Value slot, Value head, int64_t H,
                          int64_t R, Value col0, int64_t tiles, Value c2, int64_t hf,
                          const std::function<Value(int64_t)> &oAt, Value m, Value l,
                          const std::function<Value()> &writesML) {
  const float ln2 = 0.6931471805599453f;
  // Each pair as one 8-byte store where every pair starts on an even
  // element (R a multiple of 16: the rows' H (R + 2) and head (R + 2) even,
  // col0 a multiple of R / 4 and c2 even; the scratch buffer 256-byte
  // aligned): half the store instructions of the epilogue, whose scalar
  // stores took 17.6 % of the warpgroup core's stall samples at batch 8
  // (H200, docs/perf.md, session 19).
  // (K3C_MLA_PARTIAL_VEC=0: the scalar stores, for A/Bs.)
  const bool vec = intFromEnv("K3C_MLA_PARTIAL_VEC", 1) != 0 && R % 16 == 0;
  auto pair = [&](Value at, Value v0, Value v1) { storePair(kb, part, {slot, at}, v0, v1, vec); };
  kb.ifThen(kb.ult(head, kb.idx(H)), [&] {
    Value base = kb.mul(head, R + 2);
    for (int64_t t = 0; t < tiles; ++t) {
      Value col = kb.add(kb.add(col0, kb.idx(t * 8)), c2);
      pair(kb.add(base, col), oAt(t * 4 + 2 * hf), oAt(t * 4 + 2 * hf + 1));
    }
    kb.ifThen(writesML(), [&] { pair(kb.add(base, kb.idx(R)), kb.fmul(m, kb.f32(ln2)), l); });
  });
}

/// The split decode's core on tensor cores (DecodeMma): a block per (token
/// `local` of the round from t0, head group, split of P), writing the
/// partials (o_lat unnormalized, M, L) as the FMA core does. q_abs (softmax
/// scale folded in) comes from qaBf [round H, cd] in bf16.
static void decodeMmaCore(KernelBuilder &kb, const DecodeMma &d, Value qaBf, const CacheRef &cache,
                          Value cacheLens, Value lens, Value part, Value t0, Value Tc, Value P) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type();
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  const int64_t bn = d.bn, nw = d.nw, span = bn / nw, qP = d.pitch(), Gm = d.heads(), R = d.R;
  const int64_t sTiles = span / 8, oTiles = R / nw / 8, kSteps = d.cdPad / 16;
  // S's k steps an iteration of its loop: d.unroll (2, or 4 where it
  // divides them; 8-position warp spans 2), 1 for an odd count.
  const int64_t kUnroll =
      sTiles != 1 && kSteps % d.unroll == 0 ? d.unroll : kSteps % 2 == 0 ? 2 : 1;
  // A warp scoring 8 positions (sTiles 1: 8 warps a head tile) loads both
  // unrolled k steps' B fragments with one ldmatrix.x4 (rows: its 8
  // positions; matrices: k 0-7, 8-15, 16-23, 24-31) and keeps the two steps'
  // products in two accumulator sets (two independent mma.sync chains).
  const bool narrow = sTiles == 1;
  if (narrow && kUnroll != 2)
    llvm::report_fatal_error("k3c: MLA decode core: 8-position warp spans need an even number "
                             "of k steps", /*gen_crash_diag=*/false);
  // With two chains the unrolled k steps alternate between two accumulator
  // sets, added after the loop: half the dependent mma.sync chain of S.
  const int64_t chains = narrow ? 2 : kUnroll % d.chains == 0 ? d.chains : 1;
  const float log2e = 1.4426950408889634f;
  std::string name = "absorbed_split_mma_h" + std::to_string(Gm) + "_n" + std::to_string(bn);
  kb.blocks({Tc, kb.idx(d.groups()), P}, 32 * d.warps(), [&](ValueRange bid, ThreadBlock &tb) {
    if (d.earlyNext)
      kb.earlyDependents(tb);
    Value local = bid[0], g = bid[1], split = bid[2], row = kb.add(t0, local);
    SplitRange sr = splitRange(kb, tb, lens, cacheLens, row, split, P, bn);
    const ChunkSlot &cs = sr.cs;
    Value lo = sr.lo, hi = sr.hi, nT = sr.nT;
    Value h0 = kb.mul(g, Gm);
    Value slotOut = kb.add(kb.mul(local, P), split);
    Value wHt = kb.div(tb.warp, nw), wPart = kb.rem(tb.warp, nw), lane = tb.lane;
    Value gr = kb.div(lane, 4), c2 = kb.mul(kb.rem(lane, 4), 2);
    Value negInf = kb.f32(-INFINITY), zero = kb.f32(0.0);
    Value qs = kb.dynamicShared(tb, 0, {Gm, qP}, bf16);
    Value ks = kb.dynamicShared(tb, d.qBytes(), {2, bn, qP}, bf16);
    Value ps = kb.dynamicShared(tb, d.qBytes() + d.kBytes(), {d.ht, 16, bn + 8}, bf16);
    Value xs = kb.dynamicShared(tb, d.qBytes() + d.kBytes() + d.pBytes(), {d.ht, nw, 16}, f32);
    // A head tile's rows g, g + 8 across its nw warps: each warp's value
    // (reduced over the row's 4 lanes by max or sum) through `xs`, then
    // combined in warp order from `init`; every lane gets both rows' results.
    // Contains a barrier.
    auto acrossWarps = [&](std::array<Value, 2> v, Value init, bool max) {
      auto op = [&](Value a, Value b) { return max ? kb.fmax(a, b) : kb.fadd(a, b); };
      for (int64_t hf = 0; hf < 2; ++hf)
        for (int64_t off : {1, 2})
          v[hf] = op(v[hf], kb.shuffle(v[hf], kb.idx(off), gpu::ShuffleMode::XOR));
      kb.ifThen(kb.ieq(kb.rem(tb.lane, 4), kb.idx(0)), [&] {
        kb.store(v[0], xs, {wHt, wPart, gr});
        kb.store(v[1], xs, {wHt, wPart, kb.add(gr, kb.idx(8))});
      });
      kb.barrier(tb);
      std::array<Value, 2> res;
      for (int64_t hf = 0; hf < 2; ++hf) {
        res[hf] = init;
        for (int64_t w = 0; w < nw; ++w)
          res[hf] = op(res[hf], kb.load(xs, {wHt, kb.idx(w), kb.add(gr, kb.idx(8 * hf))}));
      }
      return res;
    };
    // Stores this warp's rows' partials: O (unnormalized), M (natural-log
    // units, as the FMA core's), L.
    auto storePartials = [&](ArrayRef<Value> o, Value m0, Value m1, Value l0, Value l1) {
      Value mRow[2] = {m0, m1}, lRow[2] = {l0, l1};
      for (int64_t hf = 0; hf < 2; ++hf) {
        Value hl = kb.add(kb.mul(wHt, 16), kb.add(gr, kb.idx(8 * hf)));
        storeSplitRow(kb, part, slotOut, kb.add(h0, hl), d.H, R, kb.mul(wPart, R / nw), oTiles,
                      c2, hf, [&](int64_t i) { return o[i]; }, mRow[hf], lRow[hf], [&] {
                        return kb.andi(kb.ieq(kb.rem(lane, 4), kb.idx(0)),
                                       kb.ieq(wPart, kb.idx(0)));
                      });
      }
    };
    // cp.async of nRows rows x cd/8 16-byte chunks: tile row r is
    // src[prefix..., row0 + r, :] (zero-filled from `valid` rows on),
    // or with `cref` (src the cache, prefix its sequence) the cache's
    // row of position row0 + r.
    const int64_t chunks = d.cd / 8;
    auto copy = [&](SmallVector<Value> &toks, Value src, ArrayRef<Value> prefix, Value row0,
                    Value valid, int64_t nRows, Value dst, Value slot,
                    const CacheRef *cref = nullptr) {
      int64_t total = nRows * chunks;
      for (int64_t i = 0; i * tb.threads < total; ++i) {
        Value lin = kb.add(tb.tid, kb.idx(i * tb.threads));
        if (total % tb.threads)
          lin = kb.minu(lin, kb.idx(total - 1));
        Value r = kb.div(lin, chunks), c8 = kb.mul(kb.rem(lin, chunks), 8);
        Value ok = kb.ult(r, valid);
        Value pos = kb.select(ok, kb.add(row0, r), kb.idx(0));
        SmallVector<Value> si;
        if (cref) {
          si = cref->at(kb, prefix[0], pos, c8);
        } else {
          si.assign(prefix.begin(), prefix.end());
          si.append({pos, c8});
        }
        SmallVector<Value> di;
        if (slot)
          di.push_back(slot);
        di.append({r, c8});
        toks.push_back(nvgpu::DeviceAsyncCopyOp::create(
            b, loc, tokenType, dst, di, src, si, b.getIndexAttr(8),
            kb.select(ok, kb.idx(8), kb.idx(0)), b.getUnitAttr()));
      }
    };
    auto issueTile = [&](SmallVector<Value> &toks, Value j) {
      Value p0 = kb.add(lo, kb.mul(j, bn));
      if (!tileCopiesFit(d.cd, tb.threads)) {
        copy(toks, cache.mem, {cs.n}, p0, kb.sub(hi, p0), bn, ks, kb.rem(j, 2), &cache);
        return;
      }
      Value c0 = kb.mul(kb.rem(tb.tid, 8), 8), slot = kb.rem(j, 2);
      copyTileRows(
          kb, tb, bn, d.cd, p0, kb.sub(hi, p0), cache, cs.n,
          [&](Value r, int64_t m, ArrayRef<Value> src, Value bytes) -> Value {
            Value c8 = kb.add(c0, kb.idx(64 * m));
            return nvgpu::DeviceAsyncCopyOp::create(
                b, loc, tokenType, ks, ValueRange{slot, r, c8}, cache.mem,
                ValueRange{src[0], src[1], c8}, b.getIndexAttr(8), bytes, b.getUnitAttr());
          },
          &toks);
    };
    // d.earlyTiles: tile 0 before the grid wait where every position it
    // holds was cached before this round (the kernels ahead write only the
    // round's rows, from `past` on), its own cp.async group; the block's own
    // wait, in both branches' place.
    Value fresh0;
    if (d.earlyTiles) {
      Value has = kb.ult(kb.idx(0), nT), end0 = kb.minu(kb.add(lo, kb.idx(bn)), hi);
      fresh0 = kb.andi(has, kb.ult(sr.past, end0));
      kb.ifThen(kb.andi(has, kb.ule(end0, sr.past)), [&] {
        SmallVector<Value> toks;
        issueTile(toks, kb.idx(0));
        nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, toks);
      });
      kb.gridWait(tb);
    }
    kb.ifThenElse(
        kb.ult(kb.idx(0), nT),
        [&] {
          // Zero the padding columns once (no copy writes them).
          if (d.cdPad > d.cd) {
            int64_t chunks = (d.cdPad - d.cd) / 8;
            kb.strided(tb, kb.idx(0), kb.idx(Gm * chunks), [&](Value lin) {
              kb.zeroVec(qs, {kb.div(lin, chunks), kb.add(kb.mul(kb.rem(lin, chunks), 8),
                                                          kb.idx(d.cd))}, 8);
            });
            kb.strided(tb, kb.idx(0), kb.idx(2 * bn * chunks), [&](Value lin) {
              Value r = kb.div(lin, chunks);
              kb.zeroVec(ks, {kb.div(r, bn), kb.rem(r, bn),
                              kb.add(kb.mul(kb.rem(lin, chunks), 8), kb.idx(d.cd))}, 8);
            });
          }
          {
            SmallVector<Value> toks;
            copy(toks, qaBf, {}, kb.add(kb.mul(local, d.H), h0), kb.sub(kb.idx(d.H), h0), Gm, qs,
                 Value());
            if (!d.earlyTiles)
              issueTile(toks, kb.idx(0));
            nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, toks);
          }
          if (d.earlyTiles)
            kb.ifThen(fresh0, [&] {
              SmallVector<Value> toks;
              issueTile(toks, kb.idx(0));
              nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, toks);
            });
          NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
          kb.barrier(tb);

          Value qRow = kb.add(kb.mul(wHt, 16), kb.rem(lane, 16));
          Value qCol = kb.mul(kb.div(lane, 16), 8);
          Value bRowOff = narrow ? kb.add(kb.rem(lane, 8), kb.mul(wPart, span))
                                 : kb.add(kb.add(kb.rem(lane, 8), kb.mul(kb.div(lane, 16), 8)),
                                          kb.mul(wPart, span));
          Value bColOff = narrow ? kb.mul(kb.div(lane, 8), 8)
                                 : kb.mul(kb.rem(kb.div(lane, 8), 2), 8);
          Value vRowOff = kb.add(kb.rem(lane, 8), kb.mul(kb.rem(kb.div(lane, 8), 2), 8));
          Value vColOff = kb.add(kb.mul(kb.div(lane, 16), 8), kb.mul(wPart, R / nw));
          Value cLog2 = kb.f32(log2e);
          // Carried: O accumulators, m[2] (log2 units), l[2] (this warp's
          // share of the positions; the shares are summed at the end).
          SmallVector<Value> init(oTiles * 4, zero);
          init.append({negInf, negInf, zero, zero});
          SmallVector<Value> fin = kb.loop(kb.idx(0), nT, init, [&](Value j, ValueRange in) {
            Value next = kb.add(j, kb.idx(1));
            kb.ifThen(kb.ult(next, nT), [&] {
              SmallVector<Value> toks;
              issueTile(toks, next);
              nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, toks);
            });
            Value slot = kb.rem(j, 2);
            // S = q_abs K^T over this warp's share of the tile.
            // A loop over the k steps (kUnroll at a time), not unrolled:
            // the O accumulators keep the registers.
            SmallVector<Value> sChains = kb.loopStep(
                kb.idx(0), kb.idx(kSteps * 16), kb.idx(kUnroll * 16),
                SmallVector<Value>(chains * sTiles * 4, zero), [&](Value k0, ValueRange acc) {
                  SmallVector<Value> sa(acc.begin(), acc.end());
                  if (narrow) {
                    Value v = ldmatrixX4(kb, ks, {slot, bRowOff, kb.add(bColOff, k0)}, false);
                    for (int64_t u = 0; u < 2; ++u) {
                      SmallVector<Value> a = fragmentWords(
                          kb, ldmatrixX4(kb, qs, {qRow, kb.add(qCol, kb.add(k0, kb.idx(u * 16)))},
                                         false),
                          0, 4);
                      mmaBf16(kb, a, fragmentWords(kb, v, 2 * u, 2),
                              MutableArrayRef<Value>(sa).slice(u * 4, 4));
                    }
                    return sa;
                  }
                  for (int64_t u = 0; u < kUnroll; ++u) {
                    Value kc = kb.add(k0, kb.idx(u * 16));
                    SmallVector<Value> a = fragmentWords(
                        kb, ldmatrixX4(kb, qs, {qRow, kb.add(qCol, kc)}, false), 0, 4);
                    MutableArrayRef<Value> set =
                        MutableArrayRef<Value>(sa).slice((u % chains) * sTiles * 4, sTiles * 4);
                    for (int64_t jj = 0; jj < sTiles / 2; ++jj) {
                      Value v = ldmatrixX4(
                          kb, ks, {slot, kb.add(bRowOff, kb.idx(jj * 16)), kb.add(bColOff, kc)},
                          false);
                      mmaX4(kb, a, v, set, 2 * jj);
                    }
                  }
                  return sa;
                });
            SmallVector<Value> sAcc(sChains.begin(), sChains.begin() + sTiles * 4);
            for (int64_t c = 1; c < chains; ++c)
              for (int64_t i = 0; i < sTiles * 4; ++i)
                sAcc[i] = kb.fadd(sAcc[i], sChains[c * sTiles * 4 + i]);
            // Positions past hi (the split's last tile) score -inf; the row
            // maxima across the head tile's warps.
            Value pBase = kb.add(kb.add(kb.add(lo, kb.mul(j, bn)), kb.mul(wPart, span)), c2);
            std::array<Value, 2> mx;
            for (int64_t hf = 0; hf < 2; ++hf) {
              mx[hf] = negInf;
              for (int64_t t = 0; t < sTiles; ++t)
                for (int64_t e = 0; e < 2; ++e) {
                  Value &sv = sAcc[t * 4 + 2 * hf + e];
                  sv = kb.select(kb.ult(kb.add(pBase, kb.idx(t * 8 + e)), hi), sv, negInf);
                  mx[hf] = kb.fmax(mx[hf], sv);
                }
            }
            std::array<Value, 2> tileMaxes = acrossWarps(mx, negInf, /*max=*/true);
            SmallVector<Value> out(in.begin(), in.end());
            Value alpha[2];
            for (int64_t hf = 0; hf < 2; ++hf) {
              Value r = kb.add(gr, kb.idx(8 * hf));
              Value tileMax = tileMaxes[hf];
              Value mOld = in[oTiles * 4 + hf], mNew = kb.fmax(mOld, kb.fmul(tileMax, cLog2));
              alpha[hf] = kb.exp2(kb.fsub(mOld, mNew));
              Value rowSum = zero;
              for (int64_t t = 0; t < sTiles; ++t) {
                Value pv[2];
                for (int64_t e = 0; e < 2; ++e) {
                  pv[e] = kb.exp2(kb.fsub(kb.fmul(sAcc[t * 4 + 2 * hf + e], cLog2), mNew));
                  rowSum = kb.fadd(rowSum, pv[e]);
                }
                storePair(kb, ps, {wHt, r, kb.add(kb.add(kb.mul(wPart, span), kb.idx(t * 8)), c2)},
                          pv[0], pv[1]);
              }
              out[oTiles * 4 + hf] = mNew;
              out[oTiles * 4 + 2 + hf] = kb.fadd(kb.fmul(in[oTiles * 4 + 2 + hf], alpha[hf]), rowSum);
            }
            for (int64_t t = 0; t < oTiles; ++t)
              for (int64_t e = 0; e < 4; ++e)
                out[t * 4 + e] = kb.fmul(out[t * 4 + e], alpha[e / 2]);
            kb.barrier(tb);
            // O += P V over the whole tile, this warp's share of the columns.
            // (a loop over the 16-position steps, not unrolled)
            SmallVector<Value> oIn(out.begin(), out.begin() + oTiles * 4);
            SmallVector<Value> o = kb.loopStep(
                kb.idx(0), kb.idx(bn), kb.idx(16), oIn, [&](Value kc, ValueRange acc) {
                  SmallVector<Value> oa(acc.begin(), acc.end());
                  SmallVector<Value> a = fragmentWords(
                      kb, ldmatrixX4(kb, ps, {wHt, kb.rem(lane, 16), kb.add(qCol, kc)}, false), 0,
                      4);
                  for (int64_t dd = 0; dd < oTiles / 2; ++dd) {
                    Value v = ldmatrixX4(
                        kb, ks, {slot, kb.add(vRowOff, kc), kb.add(vColOff, kb.idx(dd * 16))},
                        true);
                    mmaX4(kb, a, v, oa, 2 * dd);
                  }
                  return oa;
                });
            std::copy(o.begin(), o.end(), out.begin());
            // Tile j + 1 has landed; every warp is done with slot j % 2, P
            // and the maxima.
            NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
            kb.barrier(tb);
            return out;
          });
          // L = the sum of the nw warps' sums (each over its share of the
          // positions).
          std::array<Value, 2> L =
              acrossWarps({fin[oTiles * 4 + 2], fin[oTiles * 4 + 3]}, zero, /*max=*/false);
          storePartials(ArrayRef<Value>(fin).take_front(oTiles * 4), fin[oTiles * 4],
                        fin[oTiles * 4 + 1], L[0], L[1]);
        },
        [&] {
          // An empty split: weight 0 in the merge.
          SmallVector<Value> o(oTiles * 4, zero);
          storePartials(o, negInf, negInf, zero, zero);
        });
  }, d.sharedBytes(), name);
}

/// The split decode's core on warpgroup MMA (sm_90a, bf16; rounds of at
/// least K3C_MLA_DECODE_WG_FROM tokens, FlashMLA's form): a block per
/// (token, group of 64 heads, split) with two warpgroups. q_abs of the 64
/// heads (the M dimension) and 64-position cache tiles sit in
/// 128-byte-swizzled shared memory (a double-buffered cp.async ring); with
/// K3C_MLA_DECODE_WGMMA=1 both warpgroups compute S = q_abs K^T
/// (wgmma.m64n64k16, 4 cd/64 k steps) and the online softmax, and each
/// accumulates O += P V for its half of the R latent columns with P in
/// registers (the register-A wgmma) and V the tile's first R columns read
/// as an MN-major B: the cache tile is read once for 64 heads. Writes the
/// partials as decodeMmaCore does.
///
/// The seesaw form (K3C_MLA_DECODE_WGMMA=2; FlashMLA's split of the
/// scores): each warpgroup computes S for half of a tile's positions
/// (wgmma.m64n32k16), the two exchange their row maxima through shared
/// memory and agree on one running maximum, each writes its half of P
/// (bf16) to a shared tile, and each accumulates O for its latent half
/// from its own P (register A) and the other's (shared-memory A): S is
/// computed once per tile instead of once a warpgroup.
struct DecodeWg {
  bool on = false, seesaw = false;
  /// (K3C_MLA_DECODE_WGMMA=3, opt-in) the seesaw with S of the next tile
  /// issued before this tile's P V is waited on: S of tile j + 1 runs on
  /// the tensor cores during the wait, the barrier and the next copies.
  bool prefetchS = false;
  /// (K3C_MLA_DECODE_TMA=1, opt-in; the seesaw without prefetchS) the
  /// cache tiles filled by the TMA unit: one thread a tile issues QB tensor
  /// copies of 64 positions x 64 columns (128-byte swizzled by the copy)
  /// that complete on the ring slot's mbarrier, instead of every thread's
  /// 16-byte cp.async copies; rows past the split's end are zeroed in
  /// shared memory after the copy lands, as cp.async zero-fills them (the
  /// same sums). Cache layouts TMA cannot box (a non-identity memref, pages
  /// not a multiple of 64 positions) keep cp.async.
  bool tma = false;
  /// (K3C_MLA_DECODE_WGMMA=4, the default since session 46: 78 against the
  /// seesaw's 94 us at batch 8, context 8192 on an H100; caches TMA can box,
  /// else the seesaw) the transposed core (decodeWgmmaCoreT): blocks of HG
  /// heads (96: two of 48, no padded rows), S^T = K q_abs^T and O^T = V^T
  /// P^T with the heads as the wgmma N dimension.
  bool transposed = false;
  /// The transposed core's blocks of one (token, split) as a thread block
  /// cluster (K3C_MLA_DECODE_CLUSTER=1, opt-in: where the heads make 2..8
  /// groups): each block issues its share of a tile's 64-column boxes with
  /// TMA multicast to all of them, so a tile leaves L2 once for every head
  /// (measured slower: 98 us against 78 without, the case above).
  int64_t cluster = 1;
  /// The transposed core's latent tiles (64 rows) of warpgroup 0, which also
  /// scores and forms P (K3C_MLA_DECODE_WG0_TILES, 1 .. R / 64 - 1; 0: half,
  /// R / 128). Fewer move O^T's rescale and P V issue to warpgroup 1, which
  /// otherwise waits for P (Nsight Compute, session 49: warpgroup 0
  /// issue-bound, warpgroup 1 at the P barrier for 71 % of its samples);
  /// warpgroup 1 then holds (R / 64 - that) x HG / 2 accumulators.
  int64_t wg0Tiles = 0;
  /// The transposed core's P^T tile written by stmatrix (transposed 8x8
  /// matrices; the default since session 50, K3C_MLA_DECODE_STMATRIX=0 the
  /// element stores) instead of one 2-byte store an element: 3 stmatrix.x4
  /// a warp for 48 heads where the element stores took 24 stores and their
  /// address arithmetic on the scoring warpgroup's path (same values; on an
  /// H100 mla_attn at 64 sequences, context 8192, 307 / 306 us against 318 /
  /// 321, docs/perf.md "Session 50").
  bool stmatrixP = true;
  /// (K3C_MLA_DECODE_SPLIT_S=1, opt-in; unclustered, HG a multiple of 16,
  /// the default latent halves) both warpgroups score: warpgroup w computes
  /// S^T for the group's heads [w HG / 2, (w + 1) HG / 2) (wgmma.m64n{HG/2}),
  /// their column maxima (a named barrier of its own 128 threads), softmax,
  /// P^T rows and rescale factors, then both take every head's factors at
  /// the P^T barrier and accumulate their latent half. Warpgroup 0 alone
  /// scored every head before (the tile's chain: S, the maxima, the
  /// softmax, P^T, then P V), warpgroup 1 waiting for P (Nsight Compute,
  /// session 53: the tensor pipe 32 % active at 8 sequences, context 8192).
  /// Each P^T buffer is rewritten once both warpgroups' products of two
  /// tiles before are done (a named barrier each way). The same products
  /// and sums in the same order: the same values. Measured slower at 8-64
  /// sequences (H100, session 54: 73.7 against 65.1 us at 8, context 8192).
  /// K3C_MLA_DECODE_SPLIT_S=2 (the default since session 56): one-token
  /// rounds only (where the core takes them, K3C_MLA_DECODE_WG_FROM=1; its
  /// own kernel, the others unsplit), where the core is latency-bound on a
  /// few tiles a block; =0 none.
  bool splitS = false;
  /// K3C_MLA_DECODE_SPLIT_S=2 (splitS then off): one-token rounds take the
  /// split-scoring kernel.
  bool splitSOne = false;
  /// The transposed core's partials staged in shared memory (the ring,
  /// free after the last tile: the block's heads x (R + 2) fp32, one
  /// contiguous range of the partials' row) and written by one bulk copy
  /// (cp.async.bulk shared -> global) instead of 4-byte stores
  /// (K3C_MLA_PARTIAL_BULK, the default since session 51, =0 the 4-byte
  /// stores; unclustered, an even head count and R): Nsight Compute put
  /// those stores at ~8 % of the core's samples at batch 8 (LSU throttle;
  /// 96 a thread). The same values; on an H100 mla_attn at 8 sequences,
  /// context 8192, 70.5 / 70.9 us against 73.1 / 71.9 (docs/perf.md,
  /// "Session 51").
  bool bulkPartials = true;
  /// (K3C_MLA_DECODE_EARLY_TILES, on by default since session 52: on an
  /// H100 mla_attn at context 8192 39.1-39.5 against 42.6-43.0 us at one
  /// sequence, 64.8-66.6 against 71.1-71.9 at 8 with the staged W_UV combine
  /// and the early W_UK q_abs; =0 off; the transposed core, unclustered,
  /// with grid dependency control) the core issues its first
  /// two tiles before its grid wait where they hold only positions cached
  /// before the round (no kernel of the step writes them: the round's
  /// appends come after), and the q_abs launch ahead triggers it early, so
  /// the tiles' latency runs beside q_abs's last blocks; the same values.
  bool earlyTiles = false;
  /// The transposed core triggers the combine right after its grid wait
  /// (KernelBuilder::earlyDependents) in launches of earlyNextMin..
  /// earlyNextMax tokens: by default the rounds whose combine stages W_UV
  /// before its own wait (absorbedSplit sets the range from the combine's
  /// plan), whose copies then run beside the core's blocks.
  /// K3C_MLA_DECODE_EARLY_NEXT=0 turns it off; =1 where no combine stages
  /// W_UV triggers it in every round (earlyNextForced).
  bool earlyNext = false, earlyNextForced = false;
  int64_t earlyNextMin = 1, earlyNextMax = 0; ///< the launches (tokens) that trigger it
  /// One-token launches trigger the combine early too: where this core
  /// takes them (K3C_MLA_DECODE_WG_FROM=1) and their combine is the
  /// row-sliced one, whose W_UV loads go out before its wait (as the
  /// mma.sync core triggers it).
  bool earlyNextOne = false;
  /// K3C_MLA_PREFETCH_WUV (opt-in, session 61, not yet timed): the blocks of
  /// a launch's first token ask the L2 for W_UV (the combine's weights, 12.6
  /// MB on the slice), a share of the heads each (cp.async.bulk.prefetch, 16
  /// KB a thread's request): 1 at the block's start (beside q_abs), 2 after
  /// its grid wait. Why: the one-token combine loads its W_UV rows before
  /// its own wait, but only its blocks that fit beside the core's (the free
  /// SMs' registers: about half of its 384 blocks on 132 SMs) do that while
  /// the core runs; the others start as core blocks exit and read W_UV from
  /// DRAM then. The same values (a hint, nothing is read into registers).
  int64_t prefetchWuv = 0;
  int64_t H = 0, R = 0, cd = 0, QB = 0, bn = 64, HG = 64;
  int64_t groups() const {
    const int64_t g = transposed ? HG : 64;
    return (H + g - 1) / g;
  }
  /// The transposed core's shared memory from the 1024-aligned base: q_abs^T
  /// (QB blocks of HG rows x 64 columns), the two-slot ring of bn-position
  /// tiles, two P^T buffers (HG rows x bn positions, bf16), two alpha rows
  /// (HG f32), the column maxima of the 4 warps (4 x HG f32), the full and
  /// empty mbarriers of the two slots.
  int64_t tSlotBytes() const { return QB * bn * 128; }
  int64_t tRingOff() const { return QB * HG * 128; }
  int64_t tPOff() const { return tRingOff() + 2 * tSlotBytes(); }
  int64_t tAlphaOff() const { return tPOff() + 2 * HG * 128; }
  int64_t tXOff() const { return tAlphaOff() + 2 * HG * 4; }
  int64_t tBarOff() const { return tXOff() + 4 * HG * 4; }
  int64_t tSharedBytes() const { return tBarOff() + 32 + 1024; }
  int64_t tileBytes() const { return QB * 64 * 128; } // Q or one ring slot
  /// Q, two ring slots, the alignment slack; seesaw: the P tile (64 x 64
  /// bf16) and the row-maximum exchange (2 x 64 f32).
  /// TMA: the two ring slots' mbarriers after them.
  int64_t sharedBytes() const {
    return 3 * tileBytes() + 1024 + (seesaw ? 64 * 128 + 512 : 0) + (tma ? 16 : 0);
  }
};

static DecodeWg decodeWgPlan(MlaAttentionOp attn, Target target) {
  DecodeWg d;
  const TargetInfo &info = TargetInfo::get(target);
  auto kvType = cast<ShapedType>(attn.getKv().getType());
  const int64_t mode = intFromEnv("K3C_MLA_DECODE_WGMMA", 4);
  if (mode < 0 || mode > 4)
    llvm::report_fatal_error("k3c: K3C_MLA_DECODE_WGMMA must be 0, 1, 2, 3 or 4, got " +
                                 llvm::Twine(mode),
                             /*gen_crash_diag=*/false);
  if (!info.wgmma || !kvType.getElementType().isBF16() || !groupedFits(attn) || !mode ||
      !intFromEnv("K3C_MLA_DECODE_MMA", 1))
    return d;
  d.H = attn.getNumHeads();
  d.R = cast<ShapedType>(attn.getKvBProj().getType()).getDimSize(1);
  d.cd = kvType.getDimSize(1);
  d.QB = (d.cd + 63) / 64;
  d.seesaw = mode >= 2;
  d.prefetchS = mode == 3;
  d.tma = KernelBuilder::switchFromEnv("K3C_MLA_DECODE_TMA") && mode == 2;
  // Each warpgroup's half of the latent columns: whole 64-column blocks, at
  // most 256 (one wgmma.m64n256).
  if (d.cd % 8 || d.R % 128 || d.R / 2 > 256 || d.sharedBytes() > info.maxSharedPerBlock)
    return d;
  d.on = true;
  // The transposed core: groups of at most 48 heads (a warpgroup's O^T is
  // R / 128 tiles of HG / 2 accumulators: 96 registers at 48), a multiple
  // of 8 (the wgmma N step); more groups while shared memory does not fit.
  if (mode == 4 && d.cd % 64 == 0) {
    for (int64_t g = (d.H + 47) / 48; g <= (d.H + 7) / 8 && !d.transposed; ++g) {
      d.HG = roundUp((d.H + g - 1) / g, 8);
      d.transposed = d.tSharedBytes() <= info.maxSharedPerBlock;
    }
    d.seesaw = true; // where the cache cannot be boxed (absorbedSplit)
    const bool cl = KernelBuilder::switchFromEnv("K3C_MLA_DECODE_CLUSTER");
    if (d.transposed && cl && d.groups() >= 2 && d.groups() <= 8)
      d.cluster = d.groups();
    const int64_t t0 = intFromEnv("K3C_MLA_DECODE_WG0_TILES", 0);
    if (t0 < 0 || t0 >= d.R / 64)
      llvm::report_fatal_error("k3c: K3C_MLA_DECODE_WG0_TILES must be 0 (half) or 1.." +
                                   llvm::Twine(d.R / 64 - 1) + " (of the " +
                                   llvm::Twine(d.R / 64) + " latent tiles), got " +
                                   llvm::Twine(t0),
                               /*gen_crash_diag=*/false);
    d.wg0Tiles = t0;
    d.stmatrixP = KernelBuilder::switchFromEnv("K3C_MLA_DECODE_STMATRIX", true);
    const int64_t ss = intFromEnv("K3C_MLA_DECODE_SPLIT_S", 2);
    if (ss < 0 || ss > 2)
      llvm::report_fatal_error("k3c: K3C_MLA_DECODE_SPLIT_S must be 0, 1 or 2 (one-token rounds "
                               "only), got " + llvm::Twine(ss),
                               /*gen_crash_diag=*/false);
    const bool splittable = d.transposed && d.cluster == 1 && d.HG % 16 == 0 && d.wg0Tiles == 0;
    d.splitS = ss == 1 && splittable;
    d.splitSOne = ss == 2 && splittable;
    // (16-byte multiples: a block's heads x (R + 2) fp32, every head offset
    // h0 (R + 2) and every (token, split) row H (R + 2))
    d.bulkPartials = KernelBuilder::switchFromEnv("K3C_MLA_PARTIAL_BULK", true) && d.transposed && d.cluster == 1 && d.H % 2 == 0 &&
                     d.R % 2 == 0 && d.HG * (d.R + 2) * 4 <= 2 * d.tSlotBytes();
    d.earlyTiles = KernelBuilder::switchFromEnv("K3C_MLA_DECODE_EARLY_TILES", true) && d.transposed &&
                   d.cluster == 1 && info.gridDependencyControl();
    d.earlyNext = KernelBuilder::switchFromEnv("K3C_MLA_DECODE_EARLY_NEXT", true);
    d.earlyNextForced = d.earlyNext && std::getenv("K3C_MLA_DECODE_EARLY_NEXT");
    d.earlyNext = d.earlyNext && d.transposed && info.gridDependencyControl();
    d.earlyNextMax = splitChunkTokens(); // (absorbedSplit narrows it to the staged rounds)
    d.prefetchWuv = intFromEnv("K3C_MLA_PREFETCH_WUV", 0);
    if (d.prefetchWuv < 0 || d.prefetchWuv > 2)
      llvm::report_fatal_error("k3c: K3C_MLA_PREFETCH_WUV must be 0 (off), 1 (at the core block's "
                               "start) or 2 (after its grid wait), got " +
                                   llvm::Twine(d.prefetchWuv),
                               /*gen_crash_diag=*/false);
    if (d.cluster > 1)
      d.prefetchWuv = 0;
  }
  return d;
}

/// Whether the TMA unit can copy a split core's bn-position cache tiles: a
/// rank-3 cache TMA can map (contiguous [N, context, width] or a page pool)
/// whose pages hold whole tiles.
static bool cacheBoxes(const CacheRef &cache, int64_t bn) {
  return tmaOperand(cache.mem) && cast<MemRefType>(cache.mem.getType()).getRank() == 3 &&
         (!cache.table || cache.page % bn == 0);
}

/// `barrier.sync id, threads` (or `barrier.arrive`): a named barrier of
/// `threads` threads (a multiple of 32) for warps of different roles, not
/// aligned (each role reaches it at its own instruction). Also a compiler
/// memory barrier.
static void namedBarrier(KernelBuilder &kb, int64_t id, int64_t threads, bool arrive = false) {
  std::string text = std::string(arrive ? "barrier.arrive " : "barrier.sync ") +
                     std::to_string(id) + ", " + std::to_string(threads) + ";";
  LLVM::InlineAsmOp::create(kb.b, kb.loc, TypeRange{}, ValueRange{}, text, "~{memory}",
                            /*has_side_effects=*/true, /*is_align_stack=*/false,
                            LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                            ArrayAttr());
}

/// The `count` accumulators of an m64nN tile times their column's factor:
/// accumulator i holds column 8 (i / 4) + 2 (lane % 4) + i % 2, the
/// thread's column 2 (i / 4) + i % 2 of `alpha`.
static Value scaleAccCols(KernelBuilder &kb, Value o, int64_t count, ArrayRef<Value> alpha) {
  for (int64_t i = 0; i < count; ++i)
    o = LLVM::InsertValueOp::create(
        kb.b, kb.loc, o,
        kb.fmul(LLVM::ExtractValueOp::create(kb.b, kb.loc, o, ArrayRef<int64_t>{i}),
                alpha[2 * (i / 4) + i % 2]),
        ArrayRef<int64_t>{i});
  return o;
}

/// The transposed core's loop state, [O^T accumulators (nO) | m (nCols) |
/// l (nCols)], split into its three parts.
static void splitOML(ValueRange v, int64_t nO, int64_t nCols, SmallVector<Value> &o,
                     SmallVector<Value> &m, SmallVector<Value> &l) {
  o.assign(v.begin(), v.begin() + nO);
  m.assign(v.begin() + nO, v.begin() + nO + nCols);
  l.assign(v.begin() + nO + nCols, v.end());
}

/// The split decode's transposed core on warpgroup MMA (DecodeWg::transposed,
/// sm_90a, bf16, caches TMA can box): a block per (token, group of HG
/// heads, split) of two warpgroups. The heads are the N dimension of every
/// product, so a group of 48 heads computes 48 rows, not 64 (96 heads: two
/// groups, none padded; the 64-head blocks computed 128 rows for 96):
///   S^T [bn positions x HG] = K q_abs^T   (A: the cache tile, K-major;
///                                          B: q_abs^T, K-major)
///   O^T [R x HG] += V^T P^T               (A: the tile's first R columns
///                                          read MN-major, i.e. transposed;
///                                          B: P^T in shared memory)
/// Warpgroup 0 scores: S^T (wgmma.m64n{HG}k16 over cd / 16 k steps), the
/// online softmax down each head's column (maxima across the four warps
/// through shared memory and a named barrier of its 128 threads), P^T
/// (bf16) and the heads' rescale factors into shared memory, then O^T for
/// the first R / 2 latent rows. Warpgroup 1 takes P^T and the factors at a
/// named barrier of both and accumulates the other R / 2 rows. Tiles come
/// by TMA into a two-slot ring: a slot's full mbarrier completes on its
/// bytes, its empty mbarrier on the 8 warps' releases (each after its
/// wgmma group that read the slot); the first warp of warpgroup 1 waits
/// for the release and issues tile j + 2. Two P^T buffers (the P^T of tile
/// j + 2 is written once warpgroup 1's products of tile j are done: named
/// barrier 2 + j % 2). Writes the partials (o_lat unnormalized, M, L) as
/// the other cores do.
/// Block `id` of `n` asks the L2 for W_UV of heads id, id + n, ... (each
/// head's dv rows of kvb after its nope rows, in requests of up to 16 KB, a
/// thread each): DecodeWg::prefetchWuv. Nothing where a row is not a
/// multiple of 16 bytes or a head takes more requests than the block has
/// threads.
static void prefetchWuvShare(KernelBuilder &kb, ThreadBlock &tb, Value kvb, int64_t H,
                             int64_t nope, int64_t dv, Value id, Value n) {
  auto ty = cast<MemRefType>(kvb.getType());
  const int64_t rowBytes = ty.getDimSize(1) * ty.getElementTypeBitWidth() / 8;
  if (rowBytes % 16 || rowBytes > 16384)
    return;
  int64_t rows = 16384 / rowBytes;
  while (dv % rows)
    --rows;
  const int64_t requests = dv / rows;
  if (requests > tb.threads)
    return;
  kb.ifThen(kb.ult(tb.tid, kb.idx(requests)), [&] {
    kb.loopStep(id, kb.idx(H), n, [&](Value h) {
      Value row = kb.add(kb.add(kb.mul(h, kb.idx(nope + dv)), kb.idx(nope)),
                         kb.mul(tb.tid, kb.idx(rows)));
      kb.prefetchL2(kvb, {row, kb.idx(0)}, rows * rowBytes);
    });
  });
}

static void decodeWgmmaCoreT(KernelBuilder &kb, const DecodeWg &d, Value qaBf,
                             const CacheRef &cache, Value cacheLens, Value lens, Value part,
                             Value t0, Value Tc, Value P, Value kvb, int64_t nope, int64_t dv) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  MLIRContext *ctx = b.getContext();
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type(), i64 = b.getI64Type();
  const int64_t bn = d.bn, QB = d.QB, R = d.R, H = d.H, HG = d.HG;
  // The warpgroups' 64-row latent tiles: warpgroup 0 (which also scores)
  // [0, mT0), warpgroup 1 [mT0, R / 64) (d.wg0Tiles; half each by default).
  const int64_t mT0 = d.wg0Tiles ? d.wg0Tiles : R / 128, mT1 = R / 64 - mT0;
  const int64_t cols = HG / 4; // a thread's head columns (2 of each n8 tile)
  const float log2e = 1.4426950408889634f, ln2 = 0.6931471805599453f;
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(HG / 2, f32));
  Value cacheMap = tmaTensorMap(kb, cache.mem, {1, bn, WgmmaTile::bk});
  const int64_t nc = d.cluster; // blocks a cluster: the head groups of one (token, split)
  const std::string name = "absorbed_split_wgt_h" + std::to_string(HG) + "_n" +
                           std::to_string(bn) + (nc > 1 ? "_c" + std::to_string(nc) : "") +
                           (d.splitS ? "_ss" : "");
  // (clustered: the groups vary fastest, so a cluster's blocks share one
  // token and split)
  SmallVector<Value> grid = nc > 1 ? SmallVector<Value>{Tc, P, kb.idx(d.groups())}
                                   : SmallVector<Value>{Tc, kb.idx(d.groups()), P};
  kb.blocks(grid, 256, [&](ValueRange bid, ThreadBlock &tb) {
    // d.earlyNext: the combine triggered right after the wait, in launches of
    // earlyNextMin..earlyNextMax tokens (the rounds whose combine stages W_UV).
    auto triggerNext = [&] {
      if (!d.earlyNext)
        return;
      Value in = kb.ule(Tc, kb.idx(d.earlyNextMax));
      if (d.earlyNextMin > 1)
        in = kb.andi(kb.ule(kb.idx(d.earlyNextMin), Tc), in);
      if (d.earlyNextOne && d.earlyNextMin > 1)
        in = arith::OrIOp::create(kb.b, kb.loc, kb.ieq(Tc, kb.idx(1)), in).getResult();
      kb.launchDependentsIf(tb, in);
    };
    const bool early = d.earlyTiles && nc == 1;
    // d.prefetchWuv: the first token's blocks (g, split) ask the L2 for
    // their share of W_UV, 1 here (before any wait), 2 after the wait.
    auto prefetchWuv = [&](int64_t when) {
      if (d.prefetchWuv != when || !kvb)
        return;
      kb.ifThen(kb.ieq(bid[0], kb.idx(0)), [&] {
        prefetchWuvShare(kb, tb, kvb, H, nope, dv, kb.add(kb.mul(bid[1], P), bid[2]),
                         kb.mul(kb.idx(d.groups()), P));
      });
    };
    prefetchWuv(1);
    if (!early && d.earlyNext) {
      kb.gridWait(tb); // (the one every kernel gets at its start, placed here)
      triggerNext();
    }
    if (!early)
      prefetchWuv(2);
    Value local = bid[0], g = nc > 1 ? bid[2] : bid[1], split = nc > 1 ? bid[1] : bid[2];
    Value row = kb.add(t0, local);
    SplitRange sr = splitRange(kb, tb, lens, cacheLens, row, split, P, bn);
    const ChunkSlot &cs = sr.cs;
    Value lo = sr.lo, hi = sr.hi, nT = sr.nT;
    Value h0 = kb.mul(g, HG);
    Value slotOut = kb.add(kb.mul(local, P), split);
    Value lane = tb.lane, wg = kb.div(tb.tid, 128), w = kb.rem(tb.warp, 4);
    Value gq = kb.div(lane, 4), c2 = kb.mul(kb.rem(lane, 4), 2);
    Value negInf = kb.f32(-INFINITY), zero = kb.f32(0.0);
    Value lane0 = kb.ieq(lane, kb.idx(0)), quad0 = kb.ult(lane, kb.idx(4));
    AlignedShared sm = alignedDynamicShared(kb);
    Value qs = sm.view(kb, kb.idx(0), {QB, HG, 64}, bf16);
    Value ks = sm.view(kb, kb.idx(d.tRingOff()), {2, QB, bn, 64}, bf16);
    Value pt = sm.view(kb, kb.idx(d.tPOff()), {2, HG, 64}, bf16);
    Value al = sm.view(kb, kb.idx(d.tAlphaOff()), {2, HG}, f32);
    Value xs = sm.view(kb, kb.idx(d.tXOff()), {4, HG}, f32);
    Value aligned = sm.address(kb, kb.idx(0));
    auto toI64 = [&](Value v) { return arith::IndexCastUIOp::create(b, loc, i64, v).getResult(); };
    auto slotAddr = [&](Value slot) {
      return kb.add(aligned, kb.add(kb.idx(d.tRingOff()), kb.mul(slot, d.tSlotBytes())));
    };
    auto barAt = [&](int64_t kind, Value slot) { // kind 0: full, 1: empty
      return kb.pointerAt(
          sm.address(kb, kb.add(kb.idx(d.tBarOff() + 16 * kind), kb.mul(slot, 8))), 3);
    };
    auto waitParity = [&](Value bar, Value phase) {
      NVVM::MBarrierTryWaitParityOp::create(
          b, loc, bar, arith::IndexCastOp::create(b, loc, b.getI32Type(), kb.rem(phase, 2)),
          kb.i32Const(10000000));
    };
    auto fenceAsync = [&] {
      NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_shared,
                                 NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    };
    // Column c of the thread (c < cols): head 8 (c / 2) + c2 + c % 2 of the group.
    auto colOf = [&](int64_t c) { return kb.add(c2, kb.idx(8 * (c / 2) + c % 2)); };

    // The partials of this thread's accumulators (O^T: its warpgroup's
    // `count` latent tiles, rows 16 w + gq (+ 8), head
    // columns; zeros where `o` is empty) and, from warpgroup 0's first warp,
    // M (natural-log units) and L per head, handed to `put` (group-local
    // head hl, head h0 + hl, latent row, value) and `putML` (hl, head, M, L);
    // heads past H skipped.
    // (Warpgroup 1's first tile is mT0: its rows start at wg * 64 mT0.)
    // (d.splitS: each warpgroup's first warp for its heads, mHeads0 on:
    // m and l hold its HG / 8 columns.)
    using PutFn = function_ref<void(Value, Value, Value, Value)>;
    auto eachPartial = [&](ArrayRef<Value> o, ArrayRef<Value> m, ArrayRef<Value> l,
                           int64_t count, PutFn put, PutFn putML, Value mHeads0 = Value()) {
      for (int64_t mi = 0; mi < count; ++mi)
        for (int64_t i = 0; i < HG / 2; ++i) {
          Value hl = colOf(2 * (i / 4) + i % 2), head = kb.add(h0, hl);
          Value lat = kb.add(kb.add(kb.mul(wg, 64 * mT0), kb.idx(64 * mi + 8 * ((i % 4) / 2))),
                             kb.add(kb.mul(w, 16), gq));
          kb.ifThen(kb.ult(head, kb.idx(H)), [&] {
            Value v = o.empty() ? zero
                                : LLVM::ExtractValueOp::create(b, loc, o[mi], ArrayRef<int64_t>{i})
                                      .getResult();
            put(hl, head, lat, v);
          });
        }
      if (m.empty())
        return;
      Value first = mHeads0 ? kb.ieq(w, kb.idx(0)) : kb.ieq(tb.warp, kb.idx(0));
      kb.ifThen(kb.andi(first, quad0), [&] {
        for (int64_t c = 0; c < static_cast<int64_t>(m.size()); ++c) {
          Value hl = mHeads0 ? kb.add(mHeads0, colOf(c)) : colOf(c), head = kb.add(h0, hl);
          kb.ifThen(kb.ult(head, kb.idx(H)),
                    [&] { putML(hl, head, kb.fmul(m[c], kb.f32(ln2)), l[c]); });
        }
      });
    };
    // Into the partials' (token, split) row.
    auto storePartials = [&](ArrayRef<Value> o, ArrayRef<Value> m, ArrayRef<Value> l,
                             int64_t count, Value mHeads0 = Value()) {
      eachPartial(
          o, m, l, count,
          [&](Value, Value head, Value lat, Value v) {
            kb.store(v, part, {slotOut, kb.add(kb.mul(head, R + 2), lat)});
          },
          [&](Value, Value head, Value mv, Value lv) {
            storePair(kb, part, {slotOut, kb.add(kb.mul(head, R + 2), kb.idx(R))}, mv, lv,
                      R % 2 == 0);
          },
          mHeads0);
    };
    // d.bulkPartials: the same values into the ring's first bytes as [HG, R +
    // 2] fp32 (heads past H left out), once both warpgroups are past their
    // last tile (named barrier 5); the block then writes them by one bulk
    // copy (after the branches below).
    auto stagePartials = [&](ArrayRef<Value> o, ArrayRef<Value> m, ArrayRef<Value> l,
                             int64_t count, Value mHeads0 = Value()) {
      namedBarrier(kb, 5, 256);
      Value stage = sm.view(kb, kb.idx(d.tRingOff()), {HG, R + 2}, f32);
      eachPartial(
          o, m, l, count, [&](Value hl, Value, Value lat, Value v) { kb.store(v, stage, {hl, lat}); },
          [&](Value hl, Value, Value mv, Value lv) {
            kb.store(mv, stage, {hl, kb.idx(R)});
            kb.store(lv, stage, {hl, kb.idx(R + 1)});
          },
          mHeads0);
    };

    auto initBarriers = [&] {
      kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
        for (int64_t k = 0; k < 2; ++k)
          for (int64_t sl = 0; sl < 2; ++sl)
            NVVM::MBarrierInitOp::create(b, loc, barAt(k, kb.idx(sl)), kb.i32Const(k ? 8 * nc : 1),
                                         Value());
        NVVM::FenceMbarrierInitOp::create(b, loc);
      });
    };
    Value mask = nc > 1 ? arith::ConstantOp::create(
                              b, loc, b.getIntegerAttr(b.getI16Type(), (1 << nc) - 1))
                              .getResult()
                        : Value();
    // Tile j into slot j % 2 by one thread: arm the full barrier with its
    // bytes (a box past the cache's end counts too, as zeros), QB tensor
    // copies of 64 positions x 64 columns (clustered: this block's boxes m
    // = rank mod nc, multicast to the cluster; the others' land here and
    // complete on this barrier too).
    auto issue = [&](Value j) {
      Value bar = barAt(0, kb.rem(j, 2));
      NVVM::MBarrierArriveExpectTxOp::create(b, loc, Type(), bar, kb.i32Const(QB * bn * 128),
                                             NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
      SmallVector<Value> at = cache.row(kb, cs.n, kb.add(lo, kb.mul(j, bn)));
      Value dst = slotAddr(kb.rem(j, 2));
      for (int64_t m = 0; m < QB; ++m) {
        auto copy = [&] {
          tmaCopyTile(kb, kb.add(dst, kb.idx(m * bn * 128)), cacheMap,
                      {kb.idx(WgmmaTile::bk * m), at[1], at[0]}, bar, mask);
        };
        if (nc > 1)
          kb.ifThen(kb.ieq(g, kb.idx(m % nc)), copy);
        else
          copy();
      }
    };
    // d.earlyTiles: tiles 0 and 1 (where the split has them) go out before
    // the grid wait when every position they hold was cached before this
    // round (`old`: the kernels ahead write only the round's rows, at
    // `past` on); the others after it. The block's own wait, in both
    // branches' place.
    Value old[2], fresh[2];
    if (early) {
      kb.ifThen(kb.ult(kb.idx(0), nT), initBarriers);
      kb.barrier(tb); // the mbarriers initialized
      for (int64_t j = 0; j < 2; ++j) {
        Value end = kb.minu(kb.add(lo, kb.idx((j + 1) * bn)), hi), has = kb.ult(kb.idx(j), nT);
        old[j] = kb.andi(has, kb.ule(end, sr.past));
        fresh[j] = kb.andi(has, kb.ult(sr.past, end));
      }
      kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
        for (int64_t j = 0; j < 2; ++j)
          kb.ifThen(old[j], [&] { issue(kb.idx(j)); });
      });
      kb.gridWait(tb);
      triggerNext();
      prefetchWuv(2);
    }
    kb.ifThenElse(
        kb.ult(kb.idx(0), nT),
        [&] {
          if (!early)
            initBarriers();
          // q_abs^T: the group's HG rows (heads past H zero-filled).
          flashCopy(kb, tb, qaBf, kb.add(kb.mul(local, H), h0), kb.idx(0),
                    kb.minu(kb.idx(HG), kb.sub(kb.idx(H), h0)), HG, d.cd / 8, qs, 0,
                    swizzledAt(kb, Value()));
          NVVM::CpAsyncCommitGroupOp::create(b, loc);
          if (!early)
            kb.barrier(tb); // the mbarriers initialized
          if (nc > 1)
            clusterSync(kb); // every block's mbarriers, before any multicast reaches them
          // Warp-level release of tile j's slot (lane 0, after the warp's
          // wgmma group that read it): every block of the cluster waits
          // for it before its copies overwrite the slot here. Only where a
          // tile j + 2 follows (none waits otherwise; a clustered release
          // must not reach a block that may have exited).
          auto release = [&](Value j) {
            Value slot = kb.rem(j, 2);
            kb.ifThen(kb.andi(lane0, kb.ult(kb.add(j, kb.idx(2)), nT)), [&] {
              if (nc == 1) {
                NVVM::MBarrierArriveOp::create(b, loc, Type(), barAt(1, slot), Value());
                return;
              }
              for (int64_t r = 0; r < nc; ++r) {
                Value remote = NVVM::MapaOp::create(b, loc, LLVM::LLVMPointerType::get(ctx, 7),
                                                    barAt(1, slot), kb.i32Const(r));
                NVVM::MBarrierArriveOp::create(b, loc, Type(), remote, Value(),
                                               NVVM::MemScopeKind::CLUSTER);
              }
            });
          };
          kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
            if (early) {
              for (int64_t j = 0; j < 2; ++j)
                kb.ifThen(fresh[j], [&] { issue(kb.idx(j)); });
              return;
            }
            issue(kb.idx(0));
            kb.ifThen(kb.ult(kb.idx(1), nT), [&] { issue(kb.idx(1)); });
          });
          NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
          fenceAsync();
          kb.barrier(tb); // q_abs^T landed, visible to every warp and the async proxy
          Value qAddr = toI64(aligned);
          auto pAddr = [&](Value pb) {
            return toI64(kb.add(aligned, kb.add(kb.idx(d.tPOff()), kb.mul(pb, HG * 128))));
          };
          // O^T += V^T P^T for latent tiles [mt0, mt0 + o.size()) of the tile
          // in `slot` (A: 64 latent columns of the tile's rows, MN-major), one
          // group a tile.
          auto pv = [&](SmallVector<Value> &o, Value slot, Value pb, int64_t mt0) {
            for (int64_t mi = 0; mi < static_cast<int64_t>(o.size()); ++mi)
              o[mi] = wgmmaChain(
                  kb, accType, o[mi],
                  {toI64(kb.add(slotAddr(slot), kb.idx((mt0 + mi) * bn * 128))), bn * 128, true},
                  {pAddr(pb), HG * 128, false}, HG, bn / 16);
          };
          // Tile j's valid rows (positions before the split's end); a
          // partial tile's other rows zeroed (they hold later positions or
          // other data; a non-finite value times P = 0 would be NaN), as
          // cp.async zero-fills, by `threads` threads, fenced for the async
          // proxy, then `bar`.
          auto validRows = [&](Value j, Value slot, int64_t threads, function_ref<void()> bar) {
            Value p0 = kb.add(lo, kb.mul(j, bn));
            Value valid = kb.sub(hi, kb.minu(p0, hi));
            kb.ifThen(kb.ult(valid, kb.idx(bn)), [&] {
              const int64_t perRow = QB * 8;
              Value rows = kb.sub(kb.idx(bn), valid);
              kb.loopStep(tb.tid, kb.mul(rows, kb.idx(perRow)), kb.idx(threads), [&](Value lin) {
                Value r = kb.add(valid, kb.div(lin, perRow)), q = kb.rem(lin, perRow);
                kb.storeVec(SmallVector<Value>(8, zero), ks,
                            {slot, kb.div(q, 8), r, kb.mul(kb.rem(q, 8), 8)});
              });
              fenceAsync();
              bar();
            });
            return valid;
          };
          // One tile's scoring for the group's heads [h, h + ns) (h = hOff,
          // 0 where null) from their S^T accumulator sAcc (m64n{ns}): rows
          // (positions) past `valid` masked; each head's column maximum over
          // the tile (the thread's two rows, the warp's 8 row groups, lanes 4
          // apart, then the warpgroup's 4 warps through xs after
          // `maxBarrier`); the online softmax in log2 units (m, l: the
          // thread's ns / 4 columns; their factors returned); once `freeP`
          // returns, the heads' rows of P^T buffer pb and their factors.
          auto scoreTile = [&](Value sAcc, int64_t ns, Value hOff, Value valid, Value pb,
                               SmallVector<Value> &m, SmallVector<Value> &l,
                               function_ref<void()> maxBarrier, function_ref<void()> freeP) {
            const int64_t ncols = ns / 4;
            auto col = [&](int64_t c) { return hOff ? kb.add(hOff, colOf(c)) : colOf(c); };
            Value rOk[2];
            for (int64_t hf = 0; hf < 2; ++hf)
              rOk[hf] = kb.ult(kb.add(kb.mul(w, 16), kb.add(gq, kb.idx(8 * hf))), valid);
            SmallVector<Value> sv(ns / 2);
            for (int64_t i = 0; i < ns / 2; ++i) {
              Value sc = LLVM::ExtractValueOp::create(b, loc, sAcc, ArrayRef<int64_t>{i});
              sv[i] = kb.select(rOk[(i % 4) / 2], sc, negInf);
            }
            auto vAt = [&](int64_t c, int64_t hf) -> Value & {
              return sv[4 * (c / 2) + 2 * hf + c % 2];
            };
            for (int64_t c = 0; c < ncols; ++c) {
              Value mx = LLVM::MaxNumOp::create(b, loc, vAt(c, 0), vAt(c, 1));
              for (int64_t off : {4, 8, 16})
                mx = LLVM::MaxNumOp::create(b, loc, mx,
                                            kb.shuffle(mx, kb.idx(off), gpu::ShuffleMode::XOR));
              kb.ifThen(quad0, [&] { kb.store(mx, xs, {w, col(c)}); });
            }
            maxBarrier();
            Value cLog2 = kb.f32(log2e);
            SmallVector<Value> alpha(ncols);
            for (int64_t c = 0; c < ncols; ++c) {
              Value mt = kb.load(xs, {kb.idx(0), col(c)});
              for (int64_t ww = 1; ww < 4; ++ww)
                mt = LLVM::MaxNumOp::create(b, loc, mt, kb.load(xs, {kb.idx(ww), col(c)}));
              Value mNew = LLVM::MaxNumOp::create(b, loc, m[c], kb.fmul(mt, cLog2));
              alpha[c] = kb.exp2(kb.fsub(m[c], mNew));
              Value negM = kb.fneg(mNew), sum = zero;
              for (int64_t hf = 0; hf < 2; ++hf) {
                Value &v = vAt(c, hf);
                v = kb.exp2(LLVM::FMAOp::create(b, loc, v, cLog2, negM).getResult());
                sum = kb.fadd(sum, v);
              }
              m[c] = mNew;
              l[c] = kb.fadd(kb.fmul(l[c], alpha[c]), sum);
            }
            freeP();
            if (d.stmatrixP) {
              // The warp's 16 positions x ns heads as ns / 4 8x8 matrices
              // mm = 2 t + hf (positions 8 hf + gq, heads h + 8 t + 2 q +
              // {0, 1}: the accumulator layout), stored transposed by
              // stmatrix: lane 8 mm' + r gives row r of its group's mm',
              // head h + 8 t + r, whose 8 positions are one 16-byte chunk
              // (2 w + hf) ^ r (h a multiple of 8). The same bf16 roundings
              // (cvt.rn) as the element stores below.
              const int64_t nm = ns / 4;
              SmallVector<Value> regs;
              for (int64_t mm = 0; mm < nm; ++mm)
                regs.push_back(packBf16x2(kb, vAt(2 * (mm / 2), mm % 2),
                                          vAt(2 * (mm / 2) + 1, mm % 2)));
              Value r = kb.rem(lane, 8), mq = kb.div(lane, 8);
              Value pBase = kb.add(aligned, kb.add(kb.idx(d.tPOff()), kb.mul(pb, HG * 128)));
              for (int64_t m0 = 0; m0 < nm;) {
                const int64_t cnt = nm - m0 >= 4 ? 4 : nm - m0 >= 2 ? 2 : 1;
                Value mm = kb.add(kb.idx(m0), kb.rem(mq, kb.idx(cnt)));
                Value head = kb.add(kb.mul(kb.div(mm, 2), 8), r);
                if (hOff)
                  head = kb.add(hOff, head);
                Value chunk =
                    arith::XOrIOp::create(b, loc, kb.add(kb.mul(w, 2), kb.rem(mm, 2)), r)
                        .getResult();
                Value at = kb.add(pBase, kb.add(kb.mul(head, 128), kb.mul(chunk, 16)));
                NVVM::StMatrixOp::create(b, loc, kb.pointerAt(at, 3),
                                         ArrayRef<Value>(regs).slice(m0, cnt),
                                         NVVM::MMALayout::col,
                                         NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
                                         NVVM::LdStMatrixEltType::B16);
                m0 += cnt;
              }
            } else {
              for (int64_t c = 0; c < ncols; ++c)
                for (int64_t hf = 0; hf < 2; ++hf) {
                  Value h = col(c);
                  Value chunk = arith::XOrIOp::create(b, loc, kb.add(kb.mul(w, 2), kb.idx(hf)),
                                                      kb.rem(h, 8))
                                    .getResult();
                  Value v = arith::TruncFOp::create(b, loc, bf16, vAt(c, hf));
                  kb.store(v, pt, {pb, h, kb.add(kb.mul(chunk, 8), gq)});
                }
            }
            kb.ifThen(kb.andi(kb.ieq(w, kb.idx(0)), quad0), [&] {
              for (int64_t c = 0; c < ncols; ++c)
                kb.store(alpha[c], al, {pb, col(c)});
            });
            return alpha;
          };
          // L of the heads [h, h + 4 l.size()): the thread's partial sums
          // over the warp's row groups (lanes 4 apart), then the
          // warpgroup's 4 warps through xs after `bar` (every warp read the
          // maxima before the last tile's barrier 4: the buffer is free).
          auto sumL = [&](SmallVector<Value> &l, Value hOff, function_ref<void()> bar) {
            auto col = [&](int64_t c) { return hOff ? kb.add(hOff, colOf(c)) : colOf(c); };
            for (int64_t c = 0; c < static_cast<int64_t>(l.size()); ++c) {
              for (int64_t off : {4, 8, 16})
                l[c] = kb.fadd(l[c], kb.shuffle(l[c], kb.idx(off), gpu::ShuffleMode::XOR));
              kb.ifThen(quad0, [&] { kb.store(l[c], xs, {w, col(c)}); });
            }
            bar();
            for (int64_t c = 0; c < static_cast<int64_t>(l.size()); ++c) {
              Value sum = kb.load(xs, {kb.idx(0), col(c)});
              for (int64_t ww = 1; ww < 4; ++ww)
                sum = kb.fadd(sum, kb.load(xs, {kb.idx(ww), col(c)}));
              l[c] = sum;
            }
          };
          Value zeroAcc = LLVM::ZeroOp::create(b, loc, accType).getResult();
          if (d.splitS) {
            // Both warpgroups score (DecodeWg::splitS): warpgroup wg the
            // group's heads [hS, hS + Ns) (S^T, the column maxima through
            // xs and its own named barrier 1 / 6, the softmax, P^T rows,
            // the factors), then every head's factors at barrier 4 and O^T
            // for its latent half. Every warp releases tile j - 1's slot
            // once its products of it are done; warp 4 then refills the
            // slot with tile j + 1. P^T buffer pb is rewritten (tile j + 2)
            // once the other warpgroup's products of tile j are done: it
            // arrives on barrier 7 + pb (warpgroup 0) or 2 + pb (warpgroup
            // 1), the writer syncs there.
            const int64_t Ns = HG / 2, colsS = Ns / 4;
            auto accS = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(Ns / 2, f32));
            Value isWg0 = kb.ieq(wg, kb.idx(0));
            Value hS = kb.mul(wg, kb.idx(Ns)), mt0 = kb.mul(wg, kb.idx(mT0));
            auto barWg = [&](int64_t id0, int64_t id1, int64_t threads, bool arrive) {
              kb.ifThenElse(
                  isWg0, [&] { namedBarrier(kb, id0, threads, arrive); },
                  [&] { namedBarrier(kb, id1, threads, arrive); });
            };
            auto bufDone = [&](Value buf) {
              kb.ifThenElse(
                  kb.ieq(buf, kb.idx(0)), [&] { barWg(7, 2, 256, true); },
                  [&] { barWg(8, 3, 256, true); });
            };
            auto bufFree = [&](Value buf) {
              kb.ifThenElse(
                  kb.ieq(buf, kb.idx(0)), [&] { barWg(2, 7, 256, false); },
                  [&] { barWg(3, 8, 256, false); });
            };
            SmallVector<Value> init(mT0, zeroAcc);
            init.append(colsS, negInf);
            init.append(colsS, zero);
            SmallVector<Value> fin = kb.loop(kb.idx(0), nT, init, [&](Value j, ValueRange in) {
              Value slot = kb.rem(j, 2), pb = slot;
              SmallVector<Value> o, m, l;
              splitOML(in, mT0, colsS, o, m, l);
              NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
              kb.ifThen(kb.ult(kb.idx(0), j), [&] {
                Value jp = kb.sub(j, kb.idx(1)), next = kb.add(j, kb.idx(1));
                release(jp);
                kb.ifThen(kb.ult(next, nT), [&] {
                  bufDone(kb.rem(jp, 2));
                  kb.ifThen(kb.ieq(tb.warp, kb.idx(4)), [&] {
                    waitParity(barAt(1, kb.rem(jp, 2)), kb.div(jp, 2));
                    kb.ifThen(lane0, [&] { issue(next); });
                  });
                });
              });
              waitParity(barAt(0, slot), kb.div(j, 2));
              // (a partial tile zeroed by both warpgroups before either reads it)
              Value valid = validRows(j, slot, 256, [&] { namedBarrier(kb, 9, 256); });
              Value sAcc = wgmmaChain(kb, accS, Value(), {toI64(slotAddr(slot)), bn * 128, false},
                                      {toI64(kb.add(aligned, kb.mul(hS, kb.idx(128)))), HG * 128,
                                       false},
                                      Ns, 4 * QB);
              NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
              scoreTile(sAcc, Ns, hS, valid, pb, m, l, [&] { barWg(1, 6, 128, false); },
                        [&] { kb.ifThen(kb.ule(kb.idx(2), j), [&] { bufFree(pb); }); });
              fenceAsync();
              namedBarrier(kb, 4, 256); // both halves of P^T and the factors
              SmallVector<Value> alphaAll(cols);
              for (int64_t c = 0; c < cols; ++c)
                alphaAll[c] = kb.load(al, {pb, colOf(c)});
              // (every accumulator rescaled before the products are issued, as
              // the other form does: no register of a chain in flight is written)
              for (int64_t mi = 0; mi < mT0; ++mi)
                o[mi] = scaleAccCols(kb, o[mi], HG / 2, alphaAll);
              for (int64_t mi = 0; mi < mT0; ++mi) {
                Value aAt = kb.add(slotAddr(slot), kb.mul(kb.add(mt0, kb.idx(mi)), kb.idx(bn * 128)));
                o[mi] = wgmmaChain(kb, accType, o[mi], {toI64(aAt), bn * 128, true},
                                   {pAddr(pb), HG * 128, false}, HG, bn / 16);
              }
              SmallVector<Value> out(o);
              out.append(m);
              out.append(l);
              return out;
            });
            NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
            SmallVector<Value> o, m, l;
            splitOML(fin, mT0, colsS, o, m, l);
            sumL(l, hS, [&] { barWg(1, 6, 128, false); });
            if (d.bulkPartials)
              stagePartials(o, m, l, mT0, hS);
            else
              storePartials(o, m, l, mT0, hS);
          } else
          kb.ifThenElse(
              kb.ieq(wg, kb.idx(0)),
              [&] {
                // Warpgroup 0: carried O^T (mT0), m (cols, log2 units), l (cols,
                // this thread's rows' partial sums).
                SmallVector<Value> init(mT0, zeroAcc);
                init.append(cols, negInf);
                init.append(cols, zero);
                SmallVector<Value> fin = kb.loop(kb.idx(0), nT, init, [&](Value j, ValueRange in) {
                  Value slot = kb.rem(j, 2), pb = slot;
                  SmallVector<Value> o, m, l;
                  splitOML(in, mT0, cols, o, m, l);
                  // Tile j - 1's products done: release its slot (a warp each).
                  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
                  kb.ifThen(kb.ult(kb.idx(0), j), [&] { release(kb.sub(j, kb.idx(1))); });
                  waitParity(barAt(0, slot), kb.div(j, 2));
                  Value valid = validRows(j, slot, 128, [&] { namedBarrier(kb, 1, 128); });
                  Value sAcc = wgmmaChain(kb, accType, Value(),
                                          {toI64(slotAddr(slot)), bn * 128, false},
                                          {qAddr, HG * 128, false}, HG, 4 * QB);
                  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
                  // P^T into buffer j % 2 once warpgroup 1's products of tile
                  // j - 2 read it.
                  SmallVector<Value> alpha = scoreTile(
                      sAcc, HG, Value(), valid, pb, m, l, [&] { namedBarrier(kb, 1, 128); },
                      [&] {
                        kb.ifThen(kb.ule(kb.idx(2), j), [&] {
                          kb.ifThenElse(
                              kb.ieq(pb, kb.idx(0)), [&] { namedBarrier(kb, 2, 256); },
                              [&] { namedBarrier(kb, 3, 256); });
                        });
                      });
                  fenceAsync();
                  namedBarrier(kb, 4, 256); // P^T and alpha to warpgroup 1
                  for (int64_t mi = 0; mi < mT0; ++mi)
                    o[mi] = scaleAccCols(kb, o[mi], HG / 2, alpha);
                  pv(o, slot, pb, 0);
                  SmallVector<Value> out(o);
                  out.append(m);
                  out.append(l);
                  return out;
                });
                NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
                SmallVector<Value> o, m, l;
                splitOML(fin, mT0, cols, o, m, l);
                sumL(l, Value(), [&] { namedBarrier(kb, 1, 128); });
                if (d.bulkPartials)
                  stagePartials(o, m, l, mT0);
                else
                  storePartials(o, m, l, mT0);
              },
              [&] {
                // Warpgroup 1: latent tiles [mT0, R / 64); its first warp refills.
                SmallVector<Value> oInit1(mT1, zeroAcc);
                SmallVector<Value> fin = kb.loop(kb.idx(0), nT, oInit1, [&](Value j, ValueRange in) {
                  Value slot = kb.rem(j, 2), pb = slot;
                  SmallVector<Value> o(in.begin(), in.end());
                  namedBarrier(kb, 4, 256);
                  // (the slot's bytes: its phase completed before warpgroup 0
                  // scored it, and the next can only follow this warpgroup's
                  // release; the wait makes the TMA's writes visible here too)
                  waitParity(barAt(0, slot), kb.div(j, 2));
                  SmallVector<Value> alpha(cols);
                  for (int64_t c = 0; c < cols; ++c)
                    alpha[c] = kb.load(al, {pb, colOf(c)});
                  for (int64_t mi = 0; mi < mT1; ++mi)
                    o[mi] = scaleAccCols(kb, o[mi], HG / 2, alpha);
                  pv(o, slot, pb, mT0);
                  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
                  release(j);
                  Value next = kb.add(j, kb.idx(2));
                  kb.ifThen(kb.ult(next, nT), [&] {
                    // P^T buffer j % 2 is free for tile j + 2.
                    kb.ifThenElse(
                        kb.ieq(pb, kb.idx(0)), [&] { namedBarrier(kb, 2, 256, true); },
                        [&] { namedBarrier(kb, 3, 256, true); });
                    kb.ifThen(kb.ieq(tb.warp, kb.idx(4)), [&] {
                      waitParity(barAt(1, slot), kb.div(j, 2));
                      kb.ifThen(lane0, [&] { issue(next); });
                    });
                  });
                  return o;
                });
                if (d.bulkPartials)
                  stagePartials(fin, {}, {}, mT1);
                else
                  storePartials(fin, {}, {}, mT1);
              });
          if (d.bulkPartials) {
            // The staged rows to the async proxy, then one thread copies the
            // block's min(HG, H - h0) heads x (R + 2) fp32 (contiguous in
            // the (token, split) row) and waits until the copy has read them
            // (the block's shared memory must outlive the read).
            fenceAsync();
            kb.barrier(tb);
            kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
              Value count = kb.minu(kb.idx(HG), kb.sub(kb.idx(H), h0));
              Value dst = kb.pointerAt(kb.byteAddress(part, {slotOut, kb.mul(h0, kb.idx(R + 2))}), 1);
              Value src = kb.pointerAt(sm.address(kb, kb.idx(d.tRingOff())), 3);
              Value bytes = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                                       kb.mul(count, kb.idx((R + 2) * 4)));
              NVVM::CpAsyncBulkSharedCTAToGlobalOp::create(b, loc, dst, src, bytes, Value(),
                                                          Value());
              NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
              NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                                   b.getUnitAttr());
            });
          }
          if (nc > 1)
            clusterSync(kb); // no block exits while the cluster's copies may reach it
        },
        [&] {
          // An empty split: weight 0 in the merge.
          SmallVector<Value> m(cols, negInf), l(cols, zero);
          if (mT0 == mT1)
            storePartials({}, m, l, mT0);
          else
            kb.ifThenElse(
                kb.ieq(wg, kb.idx(0)), [&] { storePartials({}, m, l, mT0); },
                [&] { storePartials({}, {}, {}, mT1); });
        });
  }, d.tSharedBytes(), name, nc);
}

static void decodeWgmmaCore(KernelBuilder &kb, const DecodeWg &d, Value qaBf, const CacheRef &cache,
                            Value cacheLens, Value lens, Value part, Value t0, Value Tc, Value P,
                            Value kvb = Value(), int64_t nope = 0, int64_t dv = 0) {
  if (d.transposed) {
    decodeWgmmaCoreT(kb, d, qaBf, cache, cacheLens, lens, part, t0, Tc, P, kvb, nope, dv);
    return;
  }
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  MLIRContext *ctx = b.getContext();
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type(), i64 = b.getI64Type();
  const int64_t bn = d.bn, QB = d.QB, R = d.R, half = R / 2, H = d.H;
  const float log2e = 1.4426950408889634f;
  auto sAccType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(bn / 2, f32));
  auto oAccType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(half / 2, f32));
  // TMA (DecodeWg::tma): the cache's tensor map, made on the host before the
  // launch; a box is one sequence's (one page's) 64 positions x 64 columns.
  const bool tma = d.tma && d.seesaw && !d.prefetchS && cacheBoxes(cache, bn);
  Value cacheMap = tma ? tmaTensorMap(kb, cache.mem, {1, bn, WgmmaTile::bk}) : Value();
  kb.blocks({Tc, kb.idx(d.groups()), P}, 256, [&](ValueRange bid, ThreadBlock &tb) {
    Value local = bid[0], g = bid[1], split = bid[2], row = kb.add(t0, local);
    SplitRange sr = splitRange(kb, tb, lens, cacheLens, row, split, P, bn);
    const ChunkSlot &cs = sr.cs;
    Value lo = sr.lo, hi = sr.hi, nT = sr.nT;
    Value h0 = kb.mul(g, 64);
    Value slotOut = kb.add(kb.mul(local, P), split);
    Value lane = tb.lane, wg = kb.div(tb.tid, 128);
    Value gq = kb.div(lane, 4), c2 = kb.mul(kb.rem(lane, 4), 2);
    Value wRow = kb.mul(kb.rem(tb.warp, 4), 16);
    Value negInf = kb.f32(-INFINITY), zero = kb.f32(0.0);
    AlignedShared sm = alignedDynamicShared(kb);
    Value qs = sm.view(kb, kb.idx(0), {QB, 64, 64}, bf16);
    Value ks = sm.view(kb, kb.idx(d.tileBytes()), {2, QB, bn, 64}, bf16);
    Value aligned = sm.address(kb, kb.idx(0));
    auto toI64 = [&](Value v) { return arith::IndexCastUIOp::create(b, loc, i64, v).getResult(); };
    auto swzAt = [&](Value slot) { return swizzledAt(kb, slot); };
    // TMA: ring slot s's mbarrier, after the P tile and the maxima.
    const int64_t barOff = 3 * d.tileBytes() + 64 * 128 + 512;
    auto barAt = [&](Value slot) {
      return kb.pointerAt(sm.address(kb, kb.add(kb.idx(barOff), kb.mul(slot, 8))), 3);
    };
    // Stores this thread's rows' partials (O of its warpgroup's columns; M
    // in natural-log units and L by warpgroup 0).
    auto storePartials = [&](Value o, Value m2[2], Value l2[2]) {
      auto oAt = [&](int64_t i) {
        return o ? LLVM::ExtractValueOp::create(b, loc, o, ArrayRef<int64_t>{i}).getResult()
                 : zero;
      };
      for (int64_t hf = 0; hf < 2; ++hf)
        storeSplitRow(kb, part, slotOut, kb.add(h0, kb.add(kb.add(wRow, gq), kb.idx(8 * hf))), H,
                      R, kb.mul(wg, half), half / 8, c2, hf, oAt, m2[hf], l2[hf], [&] {
                        return kb.andi(kb.ieq(kb.rem(lane, 4), kb.idx(0)), kb.ieq(wg, kb.idx(0)));
                      });
    };
    // The seesaw form's tile loop (DecodeWg): warpgroup wg takes positions
    // [32 wg, 32 wg + 32) of each tile for S; the shared P tile (rows heads,
    // 64 position columns, swizzled as Q) holds both halves of P.
    const int64_t pOff = 3 * d.tileBytes(), xOff = pOff + 64 * 128;
    auto seesawLoop = [&](ArrayRef<Value> init, Value qAddr,
                          const std::function<Value(Value)> &kAddr, Value *qi,
                          const std::function<void(Value)> &issue,
                          const std::function<void(Value)> &landed) {
      const int64_t hn = bn / 2; // a warpgroup's positions a tile
      auto sHalfType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(hn / 2, f32));
      Value ps = sm.view(kb, kb.idx(pOff), {1, 64, 64}, bf16);
      Value xs = sm.view(kb, kb.idx(xOff), {2, 64}, f32);
      Value pAddr = toI64(kb.add(aligned, kb.idx(pOff)));
      Value other = kb.sub(kb.idx(1), wg);
      Value cLog2 = kb.f32(log2e), quad0 = kb.ieq(kb.rem(lane, 4), kb.idx(0));
      Value rows[2] = {kb.add(wRow, gq), kb.add(kb.add(wRow, gq), kb.idx(8))};
      auto addI64 = [&](Value a, Value off) {
        return arith::AddIOp::create(b, loc, a, off).getResult();
      };
      // This warpgroup's rows of a tile: 32 wg positions further.
      Value halfOff = toI64(kb.mul(wg, kb.idx(hn * 128)));
      Value otherOff = toI64(kb.mul(other, kb.idx(hn * 128)));
      // S of tile j (this warpgroup's positions), committed as one group.
      auto sChain = [&](Value j) {
        return wgmmaChain(kb, sHalfType, Value(), {qAddr, 64 * 128, false},
                          {addI64(toI64(kAddr(j)), halfOff), bn * 128, false}, hn, 4 * QB);
      };
      const bool pre = d.prefetchS;
      SmallVector<Value> loopInit(init.begin(), init.end());
      if (pre) {
        // Tile 0's S before the loop (tile 1's copies may still be in flight).
        asyncLanded(kb, tb, 1);
        Value s0 = sChain(kb.idx(0));
        NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
        loopInit.push_back(s0);
      }
      SmallVector<Value> fin = kb.loop(kb.idx(0), nT, loopInit, [&](Value j, ValueRange in) {
        Value sAcc;
        if (pre) {
          sAcc = in[5];
        } else {
          landed(j);
          sAcc = sChain(j);
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
        }
        Value kA = kAddr(j);
        SmallVector<Value> sv;
        for (int64_t i = 0; i < hn / 2; ++i)
          sv.push_back(LLVM::ExtractValueOp::create(b, loc, sAcc, ArrayRef<int64_t>{i}));
        // Row maxima of this half (masked past the split's end), exchanged.
        Value pBase = kb.add(kb.add(kb.add(lo, kb.mul(j, bn)), kb.mul(wg, kb.idx(hn))), c2);
        Value mx[2];
        for (int64_t hf = 0; hf < 2; ++hf) {
          mx[hf] = negInf;
          for (int64_t t = 0; t < hn / 8; ++t)
            for (int64_t e = 0; e < 2; ++e) {
              Value &v = sv[t * 4 + 2 * hf + e];
              v = kb.select(kb.ule(kb.add(pBase, kb.idx(t * 8 + e)), qi[hf]), v, negInf);
              mx[hf] = LLVM::MaxNumOp::create(b, loc, mx[hf], v);
            }
          for (int64_t off : {1, 2})
            mx[hf] = LLVM::MaxNumOp::create(
                b, loc, mx[hf], kb.shuffle(mx[hf], kb.idx(off), gpu::ShuffleMode::XOR));
          kb.ifThen(quad0, [&] { kb.store(mx[hf], xs, {wg, rows[hf]}); });
        }
        kb.barrier(tb);
        SmallVector<Value> state(in.begin() + 1, in.begin() + 5);
        Value alpha[2];
        for (int64_t hf = 0; hf < 2; ++hf) {
          // (max is symmetric: both warpgroups reach the same maximum)
          Value mt = LLVM::MaxNumOp::create(b, loc, mx[hf], kb.load(xs, {other, rows[hf]}));
          Value mOld = state[hf];
          Value mNew = LLVM::MaxNumOp::create(b, loc, mOld, kb.fmul(mt, cLog2));
          alpha[hf] = kb.exp2(kb.fsub(mOld, mNew));
          Value negM = kb.fneg(mNew), rowSum = zero;
          for (int64_t t = 0; t < hn / 8; ++t)
            for (int64_t e = 0; e < 2; ++e) {
              Value &v = sv[t * 4 + 2 * hf + e];
              v = kb.exp2(LLVM::FMAOp::create(b, loc, v, cLog2, negM).getResult());
              rowSum = kb.fadd(rowSum, v);
            }
          state[hf] = mNew;
          state[2 + hf] = kb.fadd(kb.fmul(state[2 + hf], alpha[hf]), rowSum);
        }
        // This half of P into the shared tile (for the other warpgroup).
        for (int64_t t = 0; t < hn / 8; ++t)
          for (int64_t hf = 0; hf < 2; ++hf) {
            SmallVector<Value> at =
                swzAt(Value())(rows[hf], kb.add(kb.mul(wg, kb.idx(hn)), kb.idx(8 * t)));
            at.back() = kb.add(at.back(), c2);
            storePair(kb, ps, at, sv[t * 4 + 2 * hf], sv[t * 4 + 2 * hf + 1]);
          }
        NVVM::FenceProxyOp::create(
            b, loc, NVVM::ProxyKind::async_shared,
            NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
        Value o = scaleAcc(kb, in[0], half / 2, alpha);
        // O (this warpgroup's latent half) += own P V (register A), then,
        // once the other half of P is in shared memory, the other's.
        Value vCols = toI64(kb.add(kA, kb.mul(wg, kb.idx(half / 64 * bn * 128))));
        o = pvRegA(kb, oAccType, o, packRegA(kb, sv), {addI64(vCols, halfOff), bn * 128, true},
                   half);
        if (pre) {
          // Tile j + 1 (the newest group) landed and, after the barrier,
          // visible to every warp and the async proxy.
          NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
          NVVM::FenceProxyOp::create(
              b, loc, NVVM::ProxyKind::async_shared,
              NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
        }
        kb.barrier(tb);
        Value pOther = addI64(pAddr, toI64(kb.mul(other, kb.idx(hn * 2))));
        o = wgmmaChain(kb, oAccType, o, {pOther, 64 * 128, false},
                       {addI64(vCols, otherOff), bn * 128, true}, half, hn / 16);
        SmallVector<Value> out{o};
        out.append(state.begin(), state.end());
        if (!pre) {
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
          kb.barrier(tb);
          issue(kb.add(j, kb.idx(2)));
          return out;
        }
        // S of tile j + 1 behind this tile's P V: wait for P V only (one
        // group left), free the slot, issue tile j + 2, then wait for S.
        Value next = kb.add(j, kb.idx(1));
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{sHalfType}, kb.ult(next, nT), true);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(&ifOp.getThenRegion().front());
          Value sNext = sChain(next);
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(1));
          kb.barrier(tb);
          issue(kb.add(j, kb.idx(2)));
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
          scf::YieldOp::create(b, loc, ValueRange{sNext});
          b.setInsertionPointToStart(&ifOp.getElseRegion().front());
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
          kb.barrier(tb);
          issue(kb.add(j, kb.idx(2)));
          scf::YieldOp::create(b, loc, ValueRange{LLVM::UndefOp::create(b, loc, sHalfType).getResult()});
        }
        out.push_back(ifOp.getResult(0));
        return out;
      });
      NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
      // L: this warpgroup's row sums plus the other's.
      Value m2[2] = {fin[1], fin[2]}, l2[2] = {fin[3], fin[4]};
      for (int64_t hf = 0; hf < 2; ++hf) {
        for (int64_t off : {1, 2})
          l2[hf] = kb.fadd(l2[hf], kb.shuffle(l2[hf], kb.idx(off), gpu::ShuffleMode::XOR));
        kb.ifThen(quad0, [&] { kb.store(l2[hf], xs, {wg, rows[hf]}); });
      }
      kb.barrier(tb);
      for (int64_t hf = 0; hf < 2; ++hf)
        l2[hf] = kb.fadd(kb.load(xs, {kb.idx(0), rows[hf]}), kb.load(xs, {kb.idx(1), rows[hf]}));
      storePartials(fin[0], m2, l2);
    };
    kb.ifThenElse(
        kb.ult(kb.idx(0), nT),
        [&] {
          flashZeroPad(kb, tb, qs, 64, d.cd, 64 * QB, swzAt(Value()));
          if (tma) {
            // (the boxes' columns past the cache's width arrive as zeros)
            kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
              for (int64_t sl = 0; sl < 2; ++sl)
                NVVM::MBarrierInitOp::create(b, loc, barAt(kb.idx(sl)), kb.i32Const(1), Value());
              NVVM::FenceMbarrierInitOp::create(b, loc);
            });
            kb.barrier(tb);
          } else {
            for (int64_t sl = 0; sl < 2; ++sl)
              flashZeroPad(kb, tb, ks, bn, d.cd, 64 * QB, swzAt(kb.idx(sl)));
          }
          auto kAddr = [&](Value j) {
            return kb.add(aligned, kb.add(kb.idx(d.tileBytes()), kb.mul(kb.rem(j, 2), d.tileBytes())));
          };
          // Tile j into ring slot j % 2 (past the last tile: nothing read,
          // the group stays so that the wait counts hold).
          // (A loop over the thread's chunks, not unrolled: unrolled, their
          // loop-invariant addresses stay live across the tile loop and
          // spill next to O's 128 accumulators.)
          auto tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
          auto issue = [&](Value j) {
            if (tma) {
              // Thread 0 arms slot j % 2's mbarrier with the tile's bytes (a box
              // past the cache's end counts too, as zeros) and issues its QB
              // tensor copies; past the last tile nothing.
              kb.ifThen(kb.andi(kb.ieq(tb.tid, kb.idx(0)), kb.ult(j, nT)), [&] {
                Value bar = barAt(kb.rem(j, 2));
                NVVM::MBarrierArriveExpectTxOp::create(b, loc, Type(), bar,
                                                       kb.i32Const(QB * bn * 128),
                                                       NVVM::MemScopeKind::CTA,
                                                       /*relaxed=*/false, Value());
                SmallVector<Value> at = cache.row(kb, cs.n, kb.add(lo, kb.mul(j, bn)));
                Value dst = kAddr(j);
                for (int64_t m = 0; m < QB; ++m)
                  tmaCopyTile(kb, kb.add(dst, kb.idx(m * bn * 128)), cacheMap,
                              {kb.idx(WgmmaTile::bk * m), at[1], at[0]}, bar);
              });
              return;
            }
            Value p0 = kb.add(lo, kb.mul(j, bn));
            Value valid = kb.select(kb.ult(j, nT), kb.sub(hi, kb.minu(p0, hi)), kb.idx(0));
            Value src0 = kb.minu(p0, hi), slot = kb.rem(j, 2);
            const int64_t chunks = d.cd / 8, total = bn * chunks;
            if (tileCopiesFit(d.cd, tb.threads)) {
              // (the swizzled chunk (t % 8) ^ (r % 8): a constant too, the
              // passes' rows 8-aligned apart)
              Value ct = kb.rem(tb.tid, 8);
              copyTileRows(kb, tb, bn, d.cd, src0, valid, cache, cs.n,
                           [&](Value r, int64_t m, ArrayRef<Value> src, Value bytes) -> Value {
                             Value phys8 = kb.mul(
                                 arith::XOrIOp::create(b, loc, ct, kb.rem(r, 8)).getResult(),
                                 kb.idx(8));
                             return nvgpu::DeviceAsyncCopyOp::create(
                                 b, loc, tokenType, ks, ValueRange{slot, kb.idx(m), r, phys8},
                                 cache.mem,
                                 ValueRange{src[0], src[1],
                                            kb.add(kb.mul(ct, kb.idx(8)), kb.idx(64 * m))},
                                 b.getIndexAttr(8), bytes, b.getUnitAttr());
                           });
              NVVM::CpAsyncCommitGroupOp::create(b, loc);
              return;
            }
            kb.loopStep(tb.tid, kb.idx(total), kb.idx(tb.threads), [&](Value lin) {
              Value r = kb.div(lin, chunks), c8 = kb.mul(kb.rem(lin, chunks), 8);
              Value ok = kb.ult(r, valid);
              Value srcPos = kb.select(ok, kb.add(src0, r), kb.idx(0));
              nvgpu::DeviceAsyncCopyOp::create(
                  b, loc, tokenType, ks, swzAt(slot)(r, c8), cache.mem,
                  cache.at(kb, cs.n, srcPos, c8),
                  b.getIndexAttr(8), kb.select(ok, kb.idx(8), kb.idx(0)), b.getUnitAttr());
            });
            NVVM::CpAsyncCommitGroupOp::create(b, loc);
          };
          flashCopy(kb, tb, qaBf, kb.add(kb.mul(local, H), h0), kb.idx(0),
                    kb.minu(kb.idx(64), kb.sub(kb.idx(H), h0)), 64, d.cd / 8, qs, 0,
                    swzAt(Value()));
          if (tma)
            NVVM::CpAsyncCommitGroupOp::create(b, loc); // q_abs's copies, a group
          issue(kb.idx(0));
          issue(kb.idx(1));
          Value qAddr = toI64(aligned);
          // Tile j landed, visible to every warp and the async proxy. TMA:
          // q_abs's group, then the slot's mbarrier phase (j / 2) % 2; the
          // rows past the split's end (a partial last tile) zeroed, as
          // cp.async's zero fill leaves them (they hold later positions or
          // other data, and a non-finite value times P = 0 would be NaN).
          auto landed = [&](Value j) {
            if (!tma) {
              asyncLanded(kb, tb, 1);
              return;
            }
            NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
            Value slot = kb.rem(j, 2);
            Value parity = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                                      kb.rem(kb.div(j, 2), 2));
            NVVM::MBarrierTryWaitParityOp::create(b, loc, barAt(slot), parity,
                                                  kb.i32Const(10000000));
            Value valid = kb.sub(hi, kb.minu(kb.add(lo, kb.mul(j, bn)), hi));
            kb.ifThen(kb.ult(valid, kb.idx(bn)), [&] {
              const int64_t perRow = QB * 8; // 16-byte chunks a row
              Value rows = kb.sub(kb.idx(bn), valid);
              kb.strided(tb, kb.idx(0), kb.mul(rows, kb.idx(perRow)), [&](Value lin) {
                Value r = kb.add(valid, kb.div(lin, perRow)), q = kb.rem(lin, perRow);
                // (a whole 128-byte row: the swizzle only permutes its chunks)
                kb.storeVec(SmallVector<Value>(8, zero), ks,
                            {slot, kb.div(q, 8), r, kb.mul(kb.rem(q, 8), 8)});
              });
            });
            NVVM::FenceProxyOp::create(
                b, loc, NVVM::ProxyKind::async_shared,
                NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
            kb.barrier(tb);
          };
          Value qi[2] = {kb.sub(hi, kb.idx(1)), kb.sub(hi, kb.idx(1))};
          // Carried: O, m[2], l[2].
          SmallVector<Value> init{LLVM::ZeroOp::create(b, loc, oAccType).getResult(), negInf,
                                  negInf, zero, zero};
          if (d.seesaw) {
            seesawLoop(init, qAddr, kAddr, qi, issue, landed);
            return;
          }
          SmallVector<Value> fin = kb.loop(kb.idx(0), nT, init, [&](Value j, ValueRange in) {
            // Tile j landed (tile j + 1's group may still be in flight) and
            // is visible to the async proxy and every warp.
            asyncLanded(kb, tb, 1);
            Value kA = kAddr(j);
            Value sAcc = wgmmaChain(kb, sAccType, Value(), {qAddr, 64 * 128, false},
                                    {toI64(kA), bn * 128, false}, bn, 4 * QB);
            NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
            SmallVector<Value> sv;
            for (int64_t i = 0; i < bn / 2; ++i)
              sv.push_back(LLVM::ExtractValueOp::create(b, loc, sAcc, ArrayRef<int64_t>{i}));
            SmallVector<Value> state(in.begin() + 1, in.end());
            Value alpha[2];
            flashSoftmax(kb, sv, kb.add(kb.add(lo, kb.mul(j, bn)), c2), qi, /*mask=*/true, log2e,
                         state, alpha, /*fast=*/true);
            Value o = scaleAcc(kb, in[0], half / 2, alpha);
            SmallVector<Value> pa = packRegA(kb, sv);
            Value vA = kb.add(kA, kb.mul(wg, kb.idx(half / 64 * bn * 128)));
            o = pvRegA(kb, oAccType, o, pa, {toI64(vA), bn * 128, true}, half);
            NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
            // Both warpgroups are done with slot j % 2: tile j + 2 into it.
            kb.barrier(tb);
            issue(kb.add(j, kb.idx(2)));
            SmallVector<Value> out{o};
            out.append(state.begin(), state.end());
            return out;
          });
          NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
          Value m2[2] = {fin[1], fin[2]}, l2[2] = {fin[3], fin[4]};
          for (int64_t hf = 0; hf < 2; ++hf)
            for (int64_t off : {1, 2}) // the row's 4 lanes
              l2[hf] = kb.fadd(l2[hf], kb.shuffle(l2[hf], kb.idx(off), gpu::ShuffleMode::XOR));
          storePartials(fin[0], m2, l2);
        },
        [&] {
          // An empty split: weight 0 in the merge.
          Value m2[2] = {negInf, negInf}, l2[2] = {zero, zero};
          storePartials(Value(), m2, l2);
        });
  }, d.sharedBytes(),
                std::string(d.seesaw ? "absorbed_split_wgss" : "absorbed_split_wg") + "_h64_n" +
                    std::to_string(bn) + (tma ? "_tma" : ""));
}

/// The new tokens' cache append (lowerMlaFamily's phase 1) for the absorbed
/// forms: `launch` emits its own launch; `warp` appends token `slot` of the
/// launch with one warp (nothing for slots past the launch's tokens), for a
/// launch that carries it in extra blocks.
struct AppendHook {
  std::function<void()> launch;
  std::function<void(ThreadBlock &, Value)> warp;
};

/// The absorbed form with split positions (decode and small launches, GPU):
/// rounds of splitChunkTokens() tokens (64 by default), each three
/// launches: q_abs of the round's tokens (a block per (head, 8 tokens):
/// W_UK read once for them); the
/// attention core, a block per (token, group of G heads, split of the
/// token's positions), the number of splits P chosen on the host so that
/// about kSplitBlocks blocks run (a split takes at least kSplitMin
/// positions, so short contexts leave later splits empty), writing partial
/// (o_lat, M, L) per (token, split, head); then a block per (token, group)
/// merges the splits and projects out = W_UV o_lat times the gate.
static void absorbedSplit(KernelBuilder &kb, MlaAttentionOp attn, Value q, const CacheRef &cache,
                          Value cacheLens, Value lens, Value kvb, Value gate, Value out,
                          Value qaBuf, Value part, Value qaBf, int64_t G,
                          const AppendHook *append) {
  Grouped gr(kb, attn, q, cache, kvb, gate, out, G);
  const int64_t cd = gr.cd, R = gr.R;
  DecodeMma dm = decodeMmaPlan(attn, kb.target), dmSmall = decodeMmaPlan(attn, kb.target, true);
  // The row-sliced combine of one-token rounds (oneTokenRows below).
  constexpr int64_t kRowLanes = 8, kRowRounds = 8;
  const int64_t rvw = gr.vwKvb, rowsPerBlock = kMlaThreads / kRowLanes;
  const int64_t rowVecs = R % (kRowLanes * rvw) == 0 ? R / (kRowLanes * rvw) : 0;
  const bool rowsForm = kb.target == Target::Gpu && intFromEnv("K3C_MLA_COMBINE_ROWS", 1) &&
                        rowVecs > 0 && rowVecs * rvw <= 64 && gr.dv % rowsPerBlock == 0 &&
                        R % 4 == 0;
  dm.earlyNext = dmSmall.earlyNext = rowsForm && intFromEnv("K3C_MLA_COMBINE_EARLY", 1);
  // K3C_MLA_COMBINE_ROWS_CLUSTER=1 (opt-in, sm_90a): the dv / rowsPerBlock
  // blocks of a head (4 at dv = 128) form one cluster and merge the splits
  // once: block k merges latent columns [k R / CB, (k + 1) R / CB) with
  // kMlaThreads / (R / 2 CB) lanes a column pair (each a share of the
  // splits, merged by shuffles) into its shared o_lat, then reads the
  // others' slices through distributed shared memory. Without it every
  // block of a head merges all R columns over every split (the partials
  // read CB times from L2, in P / 8 dependent rounds).
  const int64_t CB = gr.dv / rowsPerBlock, clPairs = CB >= 2 ? R / (2 * CB) : 0;
  const int64_t rowsClQ = clPairs > 0 ? kMlaThreads / clPairs : 0;
  const bool rowsCluster = rowsForm && kb.info().wgmma &&
                           intFromEnv("K3C_MLA_COMBINE_ROWS_CLUSTER", 0) && CB >= 2 && CB <= 8 &&
                           R % (2 * CB) == 0 && clPairs > 0 && kMlaThreads % clPairs == 0 &&
                           rowsClQ >= 1 && rowsClQ <= 32 && (rowsClQ & (rowsClQ - 1)) == 0;
  const bool mma = dm.on && qaBf;
  // K3C_MLA_COMBINE_TRIM=1 (opt-in): the one-token combine merges only the
  // splits that hold positions (oneTokenRows).
  const bool trimCombine = KernelBuilder::switchFromEnv("K3C_MLA_COMBINE_TRIM", false);
  // K3C_MLA_COMBINE_WEIGHTS (the default since session 61, =0 the online
  // merge): the one-token combine's split weights formed once a block by
  // warp 0, the partial pairs summed with them in rounds of
  // K3C_MLA_COMBINE_WEIGHTS_ROUNDS (wU) splits (oneTokenRows; unclustered,
  // untrimmed, R / 2 at most a thread each). H100, session 61, mla_attn at
  // one sequence: 34.4 / 35.3 against 37.4 / 36.7 us at context 8192, 26.0
  // against 29.3 at 64 positions, 62.1 against 64.8 at 32768. By default in
  // bf16 builds only (checked on the GPU against fp64 and the reference):
  // f32 builds keep the online merge until their 1e-5 check has run with it
  // (bench/s69-h200.sh); =1 forces it there.
  const bool bf16Out = cast<MemRefType>(out.getType()).getElementType().isBF16();
  const bool weightsForm = KernelBuilder::switchFromEnv("K3C_MLA_COMBINE_WEIGHTS", bf16Out) &&
                           rowsForm && !rowsCluster && !trimCombine && R / 2 <= kMlaThreads;
  const int64_t wU = intFromEnv("K3C_MLA_COMBINE_WEIGHTS_ROUNDS", 12);
  if (wU < 1 || wU > 32)
    llvm::report_fatal_error("k3c: K3C_MLA_COMBINE_WEIGHTS_ROUNDS must be 1..32, got " +
                                 llvm::Twine(wU),
                             /*gen_crash_diag=*/false);
  DecodeWg dw = decodeWgPlan(attn, kb.target);
  if (dw.transposed && !cacheBoxes(cache, dw.bn)) {
    dw.transposed = false; // the seesaw, whose groups no cluster joins
    dw.cluster = 1;
    dw.earlyTiles = false;
    dw.splitS = dw.splitSOne = false;
  }
  // The q_abs launches trigger the core right after their wait where its
  // first tiles go out before its own (K3C_MLA_DECODE_EARLY_TILES).
  const bool earlyCore = (dm.on && dm.earlyTiles) || (dw.transposed && dw.earlyTiles);
  // The warpgroup-MMA core (sm_90a) takes rounds of at least wgFrom tokens
  // (K3C_MLA_DECODE_WG_FROM), the mma.sync core the shorter ones. Default:
  // 1 where the core is the transposed one (every round; since session 56),
  // else 2. The seesaw's 64-head blocks lost at one token (H200, session 19:
  // 66 us against 51 on mma.sync at context 8192; batch 8 110.0 against
  // 153.8); the transposed core with both warpgroups scoring in one-token
  // rounds (splitSOne) and a block per two SMs (the split cap below) wins
  // (H100, session 56, mla_attn in the step graph at one sequence: 36.3 /
  // 36.4 against 39.3 / 39.7 us at context 8192, 64.0 against 84.5 at
  // 32768; batch 8 unchanged).
  const int64_t wgFrom = intFromEnv("K3C_MLA_DECODE_WG_FROM", dw.transposed ? 1 : 2);
  if (wgFrom < 1)
    llvm::report_fatal_error("k3c: K3C_MLA_DECODE_WG_FROM must be >= 1, got " +
                                 llvm::Twine(wgFrom),
                             /*gen_crash_diag=*/false);
  const bool wgCore = mma && dw.on, wgAll = wgCore && wgFrom == 1;
  const bool twoSizes = mma && !wgAll && dmSmall.on && dmSmall.ht < dm.ht;
  const int64_t groups = wgAll ? dw.groups() : mma ? dm.groups() : gr.H / G;
  // K3C_MLA_DECODE_SPLITS: splits of a token's positions at most with the
  // tensor-core cores (1..kSplitMaxAny; default kSplitMax, and where the
  // warpgroup-MMA core takes every round, half the one-wave count of a
  // one-token round: a block per two SMs, 33 splits of two 48-head blocks
  // on 132 SMs. H100, session 54, one sequence at context 8192: 36.6 us at
  // 33 splits against 41.6 at 66, the one-wave count; rounds of 2+ tokens
  // have at most that many anyway).
  const int64_t splitsMma = intFromEnv(
      "K3C_MLA_DECODE_SPLITS",
      wgAll ? std::max<int64_t>(1, std::min<int64_t>(kSplitMaxAny, dm.blocks / (2 * dw.groups())))
            : kSplitMax);
  if (mma && (splitsMma < 1 || splitsMma > kSplitMaxAny))
    llvm::report_fatal_error(llvm::Twine("k3c: K3C_MLA_DECODE_SPLITS must be 1..") +
                                 llvm::Twine(kSplitMaxAny) + ", got " + llvm::Twine(splitsMma),
                             /*gen_crash_diag=*/false);
  const int64_t aim = mma ? dm.blocks : kSplitBlocks, maxSplits = mma ? splitsMma : kSplitMaxFma;
  // The multi-token combine's plan (static: before the rounds, so that the
  // core knows which rounds' combine stages W_UV before its wait).
  // (multiToken's rounds have P <= ceil(aim / from) splits: mtSplits.)
  const int64_t from = std::max<int64_t>(1, intFromEnv("K3C_MLA_COMBINE_TOKENS", kCombineTokens));
  const int64_t mtSplits = std::min(maxSplits, (aim + from - 1) / from);
  // Shared memory of the tensor-core form: o_lat hi and lo (bf16 [16,
  // pitch] each) and the weights fS [16, mtSplits + 1] and liveS [16,
  // mtSplits] (f32), as multiToken allocates them.
  const int64_t pitch = R + 8;
  const int64_t tcShared = 16 * (2 * pitch * 2 + (2 * mtSplits + 1) * 4);
  const bool tc = kb.info().mmaSync && intFromEnv("K3C_MLA_COMBINE_MMA", 1) &&
                  cast<MemRefType>(kvb.getType()).getElementType().isBF16() &&
                  gr.dv % (8 * (kMlaThreads / 32)) == 0 && R % 64 == 0 &&
                  tcShared <= kSharedBudget;
  const int64_t TT = tc ? 16 : from;
  // K3C_MLA_COMBINE_CLUSTER=CL (2 or 4; opt-in, sm_90a, the tensor-core
  // form, R a multiple of 64 CL, dv of 8 CL): CL blocks a (head, 16
  // tokens) as one thread block cluster, block k merging and projecting
  // latent columns [k R / CL, (k + 1) R / CL) (its share of the partials
  // and of W_UV's columns), its fp32 products [16, dv] in its shared
  // memory; after a cluster barrier block k sums the CL products of its
  // dv / CL output columns through distributed shared memory (in block
  // order) and stores them gated. CL times the blocks (96 heads at batch
  // 8: 96 blocks of ~260 KB each before), each reading a CL-th.
  const int64_t clReq = intFromEnv("K3C_MLA_COMBINE_CLUSTER", 0);
  if (clReq != 0 && clReq != 1 && clReq != 2 && clReq != 4)
    llvm::report_fatal_error("k3c: K3C_MLA_COMBINE_CLUSTER must be 0, 1, 2 or 4, got " +
                                 llvm::Twine(clReq),
                             /*gen_crash_diag=*/false);
  const int64_t CL = tc && kb.info().wgmma && clReq > 1 && R % (64 * clReq) == 0 &&
                             gr.dv % (8 * clReq) == 0
                         ? clReq
                         : 1;
  // K3C_MLA_COMBINE_STAGE_W=N (0..64; 16 by default since session 52,
  // kCombineStageW; 0 off): rounds of at
  // most N tokens take a form of the tensor-core combine (unclustered)
  // that copies its head's W_UV rows into shared memory by cp.async
  // before its grid wait (weights: no kernel of the step writes them), so
  // that they stream in beside the kernels ahead and the merge, where the
  // projection's loop otherwise waits on its global loads once per 64
  // latent columns (8 dependent rounds at R = 512; at batch 8 one block a
  // head, 96 blocks: nothing else hides them). The same words in the same
  // MMAs: the same values. Rows R + 32 elements apart: a quarter warp's 8
  // 16-byte reads (two rows of 64 bytes) on distinct banks.
  const int64_t swMax = intFromEnv("K3C_MLA_COMBINE_STAGE_W", kCombineStageW);
  if (swMax < 0 || swMax > splitChunkTokens())
    llvm::report_fatal_error("k3c: K3C_MLA_COMBINE_STAGE_W must be 0.." +
                                 llvm::Twine(splitChunkTokens()) + " (tokens), got " +
                                 llvm::Twine(swMax),
                             /*gen_crash_diag=*/false);
  const int64_t wsPitch = R + 32, wsBytes = gr.dv * wsPitch * 2;
  const bool stageW = swMax > 0 && tc && CL == 1 && combineWideW(R) &&
                      (gr.dv * R / 8) % kMlaThreads == 0 &&
                      wsBytes + tcShared + 64 <= kb.info().maxSharedPerBlock;
  // The transposed core triggers the combine early only in the rounds whose
  // combine stages W_UV before its wait (from..swMax tokens): elsewhere the
  // combine's blocks would only sit in their wait. (Forced on without a
  // staged combine: every round.)
  if (dw.earlyNext) {
    dw.earlyNextOne = wgAll && dm.earlyNext; // (the row-sliced combine of one-token rounds)
    if (stageW && from <= std::min(swMax, splitChunkTokens())) {
      dw.earlyNextMin = from;
      dw.earlyNextMax = swMax;
    } else if (dw.earlyNextOne && !dw.earlyNextForced) {
      dw.earlyNextMax = 1;
    } else if (!dw.earlyNextForced) {
      dw.earlyNext = false;
    }
  }
  Value T = kb.dim(q, 0);
  // Launches of at most wideMax tokens (below: one round, its q_abs in the
  // wide form) append the tokens' latents in extra blocks of the q_abs
  // launch (a warp a token): one launch fewer a decode step (the append's
  // own, 3.6 us at batch 1 on the H200, is four dependent global loads long;
  // mla_attn 48.5 -> 44.6 us at batch 1, context 8192, bit-identical:
  // docs/perf.md, session 21). K3C_MLA_FUSE_APPEND=0 keeps the own launch.
  constexpr int64_t kQabsWideTokens = 8, kRowGroups = 16;
  const int64_t wvw = gr.vwKvb, wCols = std::min<int64_t>(8 * wvw, R), wCT = wCols / wvw;
  const bool wide = intFromEnv("K3C_MLA_QABS_WIDE", 1) && gr.nope % kRowGroups == 0 &&
                    R % wCols == 0 && wCT * kRowGroups >= 32;
  const bool fuseAppend = append && wide && intFromEnv("K3C_MLA_FUSE_APPEND", 1) &&
                          (wCT * kRowGroups) % 32 == 0;
  // Rounds of more than `wideMax` tokens take q_abs on tensor cores where
  // that form exists (qabsTc below), launches of at most wideMax tokens the
  // fused append. K3C_MLA_QABS_WIDE_MAX (1..8, default 7): at 8 tokens the
  // staged tensor-core tiles and the append's own launch took 10.6 + 4.3 us
  // against the wide form's 14.9 (H100, slice, context 8192: mla_attn 77.9
  // against 80.7 us at batch 8); at 2 and 4 tokens the wide form won by
  // 8-9 us (docs/perf.md, session 47).
  const bool qabsTc = mma && intFromEnv("K3C_MLA_QABS_MMA", 1) &&
                      cast<MemRefType>(q.getType()).getElementType().isBF16() &&
                      cast<MemRefType>(kvb.getType()).getElementType().isBF16() &&
                      gr.nope % 16 == 0 && R % (8 * (kMlaThreads / 32)) == 0;
  const int64_t wideMaxEnv = intFromEnv("K3C_MLA_QABS_WIDE_MAX", 7);
  if (wideMaxEnv < 1 || wideMaxEnv > kQabsWideTokens)
    llvm::report_fatal_error("k3c: K3C_MLA_QABS_WIDE_MAX must be 1..8, got " +
                                 llvm::Twine(wideMaxEnv),
                             /*gen_crash_diag=*/false);
  const int64_t wideMax = qabsTc ? wideMaxEnv : kQabsWideTokens;
  const int64_t appendWarps = wCT * kRowGroups / 32;
  const int64_t qPitch = gr.nope + 8, wPitch = kQabsTileCols + 8;
  const bool qabsStaged = qabsTc && intFromEnv("K3C_MLA_QABS_STAGED", 1) &&
                          R % kQabsTileCols == 0 && gr.nope % 16 == 0 && gr.qk % 8 == 0 &&
                          2 * (kQabsTileTokens * qPitch + gr.nope * wPitch) <= kSharedBudget;
  // A launch of one round too long for the wide q_abs (wideMax < T <=
  // the round's tokens: batched decode of 8..64 sequences) appends its tokens in
  // extra blocks of the staged tensor-core q_abs launch, as the wide form
  // does for fewer: one launch fewer a step (the append's own took 4.3 us
  // at batch 8 on an H100, session 47; mla_attn at 8 sequences, context
  // 8192, 73.7 / 75.8 us against 79.4 / 77.4 in session 50, bit-identical).
  // The default since session 50; K3C_MLA_FUSE_APPEND_STAGED=0 keeps the
  // append's own launch there.
  const bool fuseStagedEnv = KernelBuilder::switchFromEnv("K3C_MLA_FUSE_APPEND_STAGED", true);
  const bool fuseStaged = append && fuseStagedEnv && qabsStaged &&
                          intFromEnv("K3C_MLA_FUSE_APPEND", 1);
  constexpr int64_t kStagedWarps = kQabsTileTokens / 16;
  const int64_t stagedFrom = wide ? wideMax + 1 : kCombineTokens;
  // The append's own launch, where no q_abs launch takes it: outside T <=
  // wideMax (fuseAppend) and stagedFrom <= T <= a round (fuseStaged).
  Value appendBlocks, appendBlocksStaged;
  if (append) {
    Value inWide = fuseAppend ? kb.ule(T, kb.idx(wideMax)) : Value();
    Value inStaged =
        fuseStaged ? kb.andi(kb.ule(kb.idx(stagedFrom), T), kb.ule(T, kb.idx(splitChunkTokens())))
                   : Value();
    Value own = inWide ? kb.ult(kb.idx(wideMax), T) : Value();
    if (inStaged) {
      Value notStaged = arith::XOrIOp::create(
          kb.b, kb.loc, inStaged, arith::ConstantOp::create(kb.b, kb.loc, kb.b.getBoolAttr(true)));
      own = own ? kb.andi(own, notStaged) : notStaged;
    }
    if (own)
      kb.ifThen(own, [&] { append->launch(); });
    else
      append->launch();
    if (inWide)
      appendBlocks = kb.select(inWide, kb.ceilDiv(T, appendWarps), kb.idx(0));
    if (inStaged)
      appendBlocksStaged = kb.select(inStaged, kb.ceilDiv(T, kStagedWarps), kb.idx(0));
  }
  kb.loopStep(kb.idx(0), T, kb.idx(splitChunkTokens()), [&](Value t0) {
    Value Tc = kb.minu(kb.idx(splitChunkTokens()), kb.sub(T, t0));
    Value P;
    Value small; // the tensor-core core with dmSmall's blocks (host-side)
    // the warpgroup-MMA core for this round (host-side)
    Value useWg = wgCore && !wgAll ? kb.ule(kb.idx(wgFrom), Tc) : Value();
    if (mma) {
      // Rounds whose blocks cannot fill the SMs even at maxSplits take
      // the small head tiles. P = clamp(floor(aim / (Tc groups)), 1,
      // min(maxSplits, kSplitSlots / Tc)): one wave, no partial second one.
      Value g = kb.idx(groups);
      if (twoSizes) {
        small = kb.ult(kb.mul(Tc, kb.idx(groups * maxSplits)), kb.idx(aim));
        g = kb.select(small, kb.idx(dmSmall.groups()), g);
      }
      if (useWg)
        g = kb.select(useWg, kb.idx(dw.groups()), g);
      P = kb.div(kb.idx(aim), kb.mul(Tc, g));
    } else {
      // P = clamp(ceil(aim / (Tc groups)), 1, min(maxSplits, kSplitSlots / Tc)).
      Value blocksPerSplit = kb.mul(Tc, groups);
      P = kb.div(kb.add(kb.idx(aim), kb.sub(blocksPerSplit, kb.idx(1))), blocksPerSplit);
    }
    P = kb.minu(P, kb.minu(kb.idx(maxSplits), kb.div(kb.idx(kSplitSlots), Tc)));
    P = kb.select(kb.ult(P, kb.idx(1)), kb.idx(1), P);
    // The round's core's tile (positions; host-side), for the one-token
    // combine's trim (K3C_MLA_COMBINE_TRIM): its splits are whole tiles.
    Value coreBn;
    if (mma && trimCombine) {
      coreBn = kb.idx(wgAll ? dw.bn : dm.bn);
      if (!wgAll && twoSizes)
        coreBn = kb.select(small, kb.idx(dmSmall.bn), coreBn);
      if (useWg)
        coreBn = kb.select(useWg, kb.idx(dw.bn), coreBn);
    }

    // q_abs of the round's tokens: a block per (head, 8 tokens), a thread
    // per vwK latent columns.
    Grouped one(kb, attn, q, cache, kvb, gate, out, 1);
    // (with 32-column warps and nope a multiple of 4 uq: the nope sum in
    // four parts, four times the loads in flight)
    int64_t items = R / gr.vwK, parts = 1;
    if (items % 32 == 0 && gr.nope % (4 * gr.uq) == 0 && 4 * items <= 1024)
      parts = 4;
    int64_t qThreads = std::max<int64_t>(32, (parts * items + 31) / 32 * 32);
    auto qabsFma = [&] {
      kb.blocks({kb.idx(gr.H), kb.ceilDiv(Tc, 8)}, qThreads, [&](ValueRange bid, ThreadBlock &tb) {
        Value tt0 = kb.mul(bid[1], 8), head = bid[0];
        Value red = parts > 1 ? kb.shared(tb, {8, R}, gr.f32) : Value();
        one.qabsSplit(tb, kb.add(t0, tt0), head, 8, kb.add(t0, Tc),
                 [&](int64_t tt, Value, Value c, Value v) {
                   Value local = kb.add(tt0, kb.idx(tt));
                   kb.ifThen(kb.ult(local, Tc), [&] {
                     if (mma)
                       kb.storeF32(v, qaBf, {kb.add(kb.mul(local, gr.H), head), c});
                     else
                       kb.store(v, qaBuf, {local, kb.add(kb.mul(head, cd), c)});
                   });
                 }, parts, red);
      }, 0, "absorbed_qabs");
    };
    // Rounds of up to kQabsWideTokens tokens (decode of a few sequences):
    // a block per (head, 8 x 16 bytes of latent columns, 8 tokens), 16 row groups of
    // nope / 16 W_UK rows a thread group, every load of a thread in flight
    // at once, the row groups' sums added in order through shared memory.
    // The forms below read W_UK in four dependent rounds from 96 blocks
    // (17.7 us for one token on the H200, 1.4 TB/s of its 12.6 MB).
    // K3C_MLA_QABS_WIDE=0 keeps them.
    auto qabsWide = [&](int64_t TOK) {
      const int64_t rowsPer = gr.nope / kRowGroups;
      int64_t qvw = std::min(kb.vecWidth(q, gr.H * gr.qk), rowsPer);
      while (rowsPer % qvw || gr.qk % qvw)
        qvw /= 2;
      Value heads = fuseAppend ? kb.add(kb.idx(gr.H), appendBlocks) : kb.idx(gr.H);
      kb.blocks({heads, kb.idx(R / wCols), kb.ceilDiv(Tc, TOK)}, wCT * kRowGroups,
                [&](ValueRange bid, ThreadBlock &tb) {
        if (earlyCore) // (the core's old tiles go out before its wait)
          kb.earlyDependents(tb);
        // K3C_MLA_QABS_EARLY: the thread's W_UK vectors before the grid
        // wait (append blocks load a head's too, unused), the same values.
        const bool early = mlaQabsEarly(kb);
        // The indices of the thread's jj-th W_UK vector of `head`: row group
        // rg's rows, 16 bytes cc of the block's wCols columns.
        auto wukAt = [&](Value head, int64_t jj) -> SmallVector<Value> {
          Value rg = kb.div(tb.tid, kb.idx(wCT)), cc = kb.mul(kb.rem(tb.tid, kb.idx(wCT)), wvw);
          return {kb.add(kb.mul(head, gr.nope + gr.dv),
                         kb.add(kb.mul(rg, kb.idx(rowsPer)), kb.idx(jj))),
                  kb.add(kb.mul(bid[1], kb.idx(wCols)), cc)};
        };
        SmallVector<Value> wEarly;
        if (early) {
          Value headW = kb.minu(bid[0], kb.idx(gr.H - 1));
          for (int64_t jj = 0; jj < rowsPer; ++jj)
            wEarly.push_back(kb.loadVecPinnedRaw(kvb, wukAt(headW, jj), wvw));
          kb.gridWait(tb);
        }
        auto qabs = [&] {
        Value head = bid[0], c0 = kb.mul(bid[1], kb.idx(wCols)), tt0 = kb.mul(bid[2], TOK);
        // The row groups' sums [TOK][16 row groups][S]: column c at c + c / 32,
        // rows S = 2 (mod 32) words apart, so that a warp's 4 row groups x 8
        // 16-byte column chunks store to 32 different banks (the layout [16][TOK]
        // [64] put all four row groups and chunks 32 columns apart on one bank:
        // 8-way conflicts on 64 stores a thread at 8 tokens); the same sums in
        // the same order.
        // (K3C_MLA_QABS_PAD=0: the old layout, for the A/B)
        const bool pad = intFromEnv("K3C_MLA_QABS_PAD", 1) != 0;
        const int64_t S = pad ? roundUp(wCols + wCols / 32 - 2, 32) + 2 : wCols;
        Value red = kb.shared(tb, {TOK * kRowGroups * S}, gr.f32);
        auto redAt = [&](Value g, Value tt, Value c) {
          if (!pad)
            return kb.add(kb.mul(kb.add(kb.mul(g, kb.idx(TOK)), tt), kb.idx(S)), c);
          return kb.add(kb.mul(kb.add(kb.mul(tt, kb.idx(kRowGroups)), g), kb.idx(S)),
                        kb.add(c, kb.div(c, kb.idx(32))));
        };
        Value rg = kb.div(tb.tid, kb.idx(wCT)), cc = kb.mul(kb.rem(tb.tid, kb.idx(wCT)), wvw);
        Value j0 = kb.mul(rg, kb.idx(rowsPer));
        SmallVector<Value> rows;
        for (int64_t tt = 0; tt < TOK; ++tt)
          rows.push_back(kb.add(t0, kb.minu(kb.add(tt0, kb.idx(tt)), kb.sub(Tc, kb.idx(1)))));
        SmallVector<SmallVector<Value>> w, qv(TOK);
        for (int64_t jj = 0; jj < rowsPer; ++jj)
          w.push_back(early ? kb.unpackVec(wEarly[jj]) : kb.loadVec(kvb, wukAt(head, jj), wvw));
        for (int64_t tt = 0; tt < TOK; ++tt)
          for (int64_t jj = 0; jj < rowsPer; jj += qvw) {
            SmallVector<Value> v = kb.loadVec(
                q, {rows[tt], kb.add(kb.mul(head, gr.qk), kb.add(j0, kb.idx(jj)))}, qvw);
            for (Value x : v)
              qv[tt].push_back(kb.toF32(x));
          }
        for (int64_t tt = 0; tt < TOK; ++tt)
          for (int64_t e = 0; e < wvw; ++e) {
            Value acc = gr.zero;
            for (int64_t jj = 0; jj < rowsPer; ++jj)
              acc = kb.fadd(acc, kb.fmul(qv[tt][jj], kb.toF32(w[jj][e])));
            kb.store(acc, red, {redAt(rg, kb.idx(tt), kb.add(cc, kb.idx(e)))});
          }
        kb.barrier(tb);
        auto put = [&](Value local, Value c, Value v) {
          kb.ifThen(kb.ult(local, Tc), [&] {
            if (mma)
              kb.storeF32(v, qaBf, {kb.add(kb.mul(local, gr.H), head), c});
            else
              kb.store(v, qaBuf, {local, kb.add(kb.mul(head, cd), c)});
          });
        };
        kb.strided(tb, kb.idx(0), kb.idx(TOK * wCols), [&](Value i) {
          Value tt = kb.div(i, kb.idx(wCols)), c = kb.rem(i, kb.idx(wCols));
          Value sum = gr.zero;
          for (int64_t g = 0; g < kRowGroups; ++g)
            sum = kb.fadd(sum, kb.load(red, {redAt(kb.idx(g), tt, c)}));
          put(kb.add(tt0, tt), kb.add(c0, c), kb.fmul(sum, gr.scale));
        });
        // The rope part (q_pe times the scale), once a head.
        kb.ifThen(kb.ieq(bid[1], kb.idx(0)), [&] {
          kb.strided(tb, kb.idx(0), kb.idx(TOK * gr.rope), [&](Value i) {
            Value tt = kb.div(i, kb.idx(gr.rope)), c = kb.rem(i, kb.idx(gr.rope));
            Value local = kb.add(tt0, tt);
            Value v = kb.loadF32(
                q, {kb.add(t0, kb.minu(local, kb.sub(Tc, kb.idx(1)))),
                    kb.add(kb.add(kb.mul(head, gr.qk), kb.idx(gr.nope)), c)});
            put(local, kb.add(kb.idx(R), c), kb.fmul(v, gr.scale));
          });
        });
        };
        if (!fuseAppend) {
          qabs();
          return;
        }
        // Blocks past the heads (a launch's only round): the append, a
        // warp a token, from the first column block and token block.
        kb.ifThenElse(kb.ult(bid[0], kb.idx(gr.H)), qabs, [&] {
          kb.ifThen(kb.andi(kb.ieq(bid[1], kb.idx(0)), kb.ieq(bid[2], kb.idx(0))), [&] {
            append->warp(tb, kb.add(kb.mul(kb.sub(bid[0], kb.idx(gr.H)), kb.idx(appendWarps)),
                                    tb.warp));
          });
        });
      }, 0, std::string("absorbed_qabs_wide_t") + std::to_string(TOK) + (fuseAppend ? "_append" : ""));
    };
    // Rounds of at least kCombineTokens tokens with the tensor-core core
    // take q_abs on tensor cores too, 16 tokens a block (qabsMma; bf16 q):
    // on the H200 mla_attn at batch 128 263 us against 312 with the FMA form
    // (which reads W_UK once per 8 tokens on CUDA cores), the slice's bf16
    // check unchanged (docs/perf.md). K3C_MLA_QABS_MMA=0 keeps the FMA form.
    auto qabsSmall = [&] {
      // (one token: its own kernel, an eighth of the registers and FMAs)
      if (wide)
        kb.ifThenElse(
            kb.ieq(Tc, kb.idx(1)), [&] { qabsWide(1); },
            [&] {
              kb.ifThenElse(kb.ule(Tc, kb.idx(kQabsWideTokens)),
                            [&] { qabsWide(kQabsWideTokens); }, qabsFma);
            });
      else
        qabsFma();
    };
    // Rounds of more tokens on tensor cores take staged tiles of 64 tokens
    // x 64 latent columns where the shapes allow (qabsMmaStaged: W_UK read
    // once per 64 tokens, not per 16; K3C_MLA_QABS_STAGED=0 keeps qabsMma);
    // with fuseStaged, a launch's only round appends its tokens in extra
    // blocks past the heads (a warp a token, from the first column and
    // token block).
    // K3C_MLA_QABS_EARLY_W (on by default since session 52, =0 off): the staged tiles copy their W_UK
    // slice before the kernel's grid wait (weights), beside the kernel ahead
    // (mla_q_up's GEMM), and q's rows after it; the same values.
    const bool earlyW = KernelBuilder::switchFromEnv("K3C_MLA_QABS_EARLY_W", true) &&
                        kb.info().gridDependencyControl();
    auto qabsStagedTiles = [&] {
      Value heads = fuseStaged ? kb.add(kb.idx(gr.H), appendBlocksStaged) : kb.idx(gr.H);
      kb.blocks({heads, kb.idx(R / kQabsTileCols), kb.ceilDiv(Tc, kQabsTileTokens)},
                32 * kStagedWarps, [&](ValueRange bid, ThreadBlock &tb) {
                  if (earlyCore) // (the core's old tiles go out before its wait)
                    kb.earlyDependents(tb);
                  Type bf16 = kb.b.getBF16Type();
                  Value qs = kb.shared(tb, {kQabsTileTokens, qPitch}, bf16);
                  Value ws = kb.shared(tb, {gr.nope, wPitch}, bf16);
                  auto tile = [&] {
                    Value head = bid[0], local0 = kb.mul(bid[2], kQabsTileTokens);
                    Value valid = kb.minu(kb.idx(kQabsTileTokens), kb.sub(Tc, local0));
                    std::function<void()> afterW;
                    if (earlyW)
                      afterW = [&] { kb.gridWait(tb); };
                    qabsMmaStaged(one, tb, kb.add(t0, local0), valid, head,
                                  kb.mul(bid[1], kQabsTileCols), qs, ws,
                                  [&](Value m, Value c, ArrayRef<Value> v) {
                                    Value local = kb.add(local0, m);
                                    kb.storeVec(v, qaBf, {kb.add(kb.mul(local, gr.H), head), c});
                                  },
                                  afterW);
                  };
                  if (!fuseStaged) {
                    tile();
                    return;
                  }
                  kb.ifThenElse(kb.ult(bid[0], kb.idx(gr.H)), tile, [&] {
                    if (earlyW) // (the append blocks wait before they touch anything)
                      kb.gridWait(tb);
                    kb.ifThen(kb.andi(kb.ieq(bid[1], kb.idx(0)), kb.ieq(bid[2], kb.idx(0))), [&] {
                      append->warp(tb, kb.add(kb.mul(kb.sub(bid[0], kb.idx(gr.H)),
                                                     kb.idx(kStagedWarps)),
                                              tb.warp));
                    });
                  });
                },
                0, std::string("absorbed_qabs_mma_t64") + (fuseStaged ? "_append" : ""));
    };
    if (qabsTc)
      kb.ifThenElse(kb.ult(Tc, kb.idx(wide ? wideMax + 1 : kCombineTokens)), qabsSmall,
                    [&] {
        if (qabsStaged) {
          qabsStagedTiles();
          return;
        }
        kb.blocks({kb.idx(gr.H), kb.ceilDiv(Tc, 16)}, kMlaThreads,
                  [&](ValueRange bid, ThreadBlock &tb) {
                    Value head = bid[0], local0 = kb.mul(bid[1], 16);
                    Value valid = kb.minu(kb.idx(16), kb.sub(Tc, local0));
                    qabsMma(one, tb, kb.add(t0, local0), valid, head,
                            [&](Value m, Value c, Value v) {
                              Value local = kb.add(local0, m);
                              kb.storeF32(v, qaBf, {kb.add(kb.mul(local, gr.H), head), c});
                            });
                  },
                  0, "absorbed_qabs_mma_t16");
      });
    else
      qabsSmall();

    // The attention core per (token, group, split).
    auto mmaCore = [&] {
      if (twoSizes)
        kb.ifThenElse(
            small,
            [&] { decodeMmaCore(kb, dmSmall, qaBf, cache, cacheLens, lens, part, t0, Tc, P); },
            [&] { decodeMmaCore(kb, dm, qaBf, cache, cacheLens, lens, part, t0, Tc, P); });
      else
        decodeMmaCore(kb, dm, qaBf, cache, cacheLens, lens, part, t0, Tc, P);
    };
    if (wgAll && dw.splitSOne) {
      // (K3C_MLA_DECODE_SPLIT_S=2: the split-scoring kernel for one-token
      // rounds, the default one for the others)
      DecodeWg one = dw;
      one.splitS = true;
      kb.ifThenElse(
          kb.ieq(Tc, kb.idx(1)),
          [&] { decodeWgmmaCore(kb, one, qaBf, cache, cacheLens, lens, part, t0, Tc, P, kvb, gr.nope, gr.dv); },
          [&] { decodeWgmmaCore(kb, dw, qaBf, cache, cacheLens, lens, part, t0, Tc, P, kvb, gr.nope, gr.dv); });
    } else if (wgAll)
      decodeWgmmaCore(kb, dw, qaBf, cache, cacheLens, lens, part, t0, Tc, P, kvb, gr.nope, gr.dv);
    else if (useWg)
      kb.ifThenElse(
          useWg, [&] { decodeWgmmaCore(kb, dw, qaBf, cache, cacheLens, lens, part, t0, Tc, P, kvb, gr.nope, gr.dv); },
          mmaCore);
    else if (mma)
      mmaCore();
    else
    kb.blocks({Tc, kb.idx(groups), P}, kMlaThreads, [&](ValueRange bid, ThreadBlock &tb) {
      Value local = bid[0], g = bid[1], split = bid[2], row = kb.add(t0, local);
      Value qa = kb.shared(tb, {G, cd}, gr.f32);
      Value ml = kb.shared(tb, {2, tb.warps, G}, gr.f32);
      Value olat = kb.shared(tb, {G, R}, gr.f32);
      ChunkSlot cs = findChunk(kb, tb, lens, row, 1);
      Value past = kb.toIndex(kb.load(cacheLens, {cs.n}));
      Value S = kb.add(kb.add(past, cs.t0), kb.idx(1));
      Value per = kb.div(kb.add(S, kb.sub(P, kb.idx(1))), P);
      per = kb.mul(kb.ceilDiv(per, kSplitMin), kSplitMin);
      Value lo = kb.minu(kb.mul(split, per), S), hi = kb.minu(kb.add(lo, per), S);
      int64_t vq = cd % 4 ? 1 : 4;
      kb.strided(tb, kb.idx(0), kb.idx(G * cd / vq), [&](Value i) {
        Value h = kb.div(i, cd / vq), c = kb.mul(kb.rem(i, cd / vq), vq);
        kb.copyVec(qaBuf, {local, kb.add(kb.mul(kb.add(kb.mul(g, G), h), cd), c)}, qa, {h, c},
                   vq);
      });
      kb.barrier(tb);
      SmallVector<Value> st = gr.stream(tb, qa, cs.n, lo, hi);
      auto [Ms, Ls] = gr.merge(tb, st, ml, olat, /*normalize=*/false);
      Value slot = kb.add(kb.mul(local, P), split);
      kb.strided(tb, kb.idx(0), kb.idx(G * R), [&](Value i) {
        Value h = kb.div(i, R), r = kb.rem(i, R);
        Value head = kb.add(kb.mul(g, G), h);
        kb.store(kb.load(olat, {h, r}), part, {slot, kb.add(kb.mul(head, R + 2), r)});
      });
      kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
        for (int64_t h = 0; h < G; ++h) {
          Value col = kb.mul(kb.add(kb.mul(g, G), kb.idx(h)), R + 2);
          kb.store(Ms[h], part, {slot, kb.add(col, kb.idx(R))});
          kb.store(Ls[h], part, {slot, kb.add(col, kb.idx(R + 1))});
        }
      });
    }, 0, "absorbed_split_g" + std::to_string(G));

    // Merge the splits (empty ones, L = 0, weigh 0), project, gate (perToken
    // below: a block per (token, head)). Rounds of at least
    // kCombineTokens tokens take a block per (head, kCombineTokens tokens)
    // instead: W_UV read once for them (a block per token read each head's
    // 128 KB once per token: 1.6 GB of L2 traffic at 128 sequences), the
    // same sums in the same order.
    auto weights = [&](Value slot0, Value base, SmallVector<Value> &f, SmallVector<Value> &live,
                       SmallVector<Value> &spC) {
      const int64_t n = mtSplits;
      SmallVector<Value> m(n), l(n);
      f.assign(n, Value());
      live.assign(n, Value());
      spC.assign(n, Value());
      for (int64_t sp = 0; sp < n; ++sp) {
        Value in = kb.ult(kb.idx(sp), P);
        spC[sp] = kb.select(in, kb.idx(sp), kb.idx(0));
        m[sp] = kb.load(part, {kb.add(slot0, spC[sp]), kb.add(base, kb.idx(R))});
        l[sp] = kb.load(part, {kb.add(slot0, spC[sp]), kb.add(base, kb.idx(R + 1))});
        live[sp] = kb.andi(in, kb.fgt(l[sp], gr.zero));
      }
      Value M = gr.negInf;
      for (int64_t sp = 0; sp < n; ++sp)
        M = kb.select(live[sp], kb.fmax(M, m[sp]), M);
      Value L = gr.zero;
      for (int64_t sp = 0; sp < n; ++sp) {
        f[sp] = kb.select(live[sp], kb.exp(kb.fsub(m[sp], M)), gr.zero);
        L = kb.fadd(L, kb.select(live[sp], kb.fmul(l[sp], f[sp]), gr.zero));
      }
      return L;
    };
    // Sum over the P splits in split order of v_s f_s where split s is live
    // (U loads in flight): `at(s)` gives (v, f, live) of split s < P.
    // `zeroTerms`: non-live splits add 0 (perToken's form) rather than being
    // skipped (multiToken's); the same sums.
    auto sumSplits = [&](int64_t U, bool zeroTerms,
                         const std::function<std::array<Value, 3>(Value)> &at) {
      return kb.loopStep(
          kb.idx(0), P, kb.idx(U), ValueRange{gr.zero}, [&](Value sp0, ValueRange a) {
            SmallVector<std::array<Value, 3>> t;
            for (int64_t u = 0; u < U; ++u) {
              Value sp = kb.add(sp0, kb.idx(u));
              Value in = kb.ult(sp, P);
              std::array<Value, 3> x = at(kb.select(in, sp, kb.idx(0)));
              x[2] = kb.andi(in, x[2]);
              t.push_back(x);
            }
            Value sum = a[0];
            for (int64_t u = 0; u < U; ++u)
              sum = zeroTerms ? kb.fadd(sum, kb.select(t[u][2], kb.fmul(t[u][0], t[u][1]), gr.zero))
                              : kb.select(t[u][2], kb.fadd(sum, kb.fmul(t[u][0], t[u][1])), sum);
            return SmallVector<Value>{sum};
          })[0];
    };
    // A block per (token, head, rowSplit-th of the head's output rows;
    // K3C_MLA_COMBINE_ROW_SPLIT, a divisor of dv / (warps uo), default 1):
    // warp 0 forms the split weights e^(M_s - M) (a lane for splits lane +
    // 32 k) and l_s e^(M_s - M) into shared memory (every thread loaded all
    // maxSplits (M, L) pairs and formed them all before: 21 us for one token
    // at context 8192 on the H200, 37 us with four blocks a head); every
    // thread sums L in split order; a thread per latent column sums the P
    // partials in split order; projectRows projects with all of a warp's
    // W_UV loads in flight. Bit-identical to the unrolled form it replaced.
    const int64_t rowsMax = gr.dv % (kMlaThreads / 32 * gr.uo) == 0
                                ? gr.dv / (kMlaThreads / 32 * gr.uo) : 1;
    const int64_t rowSplit = intFromEnv("K3C_MLA_COMBINE_ROW_SPLIT", 1);
    if (rowSplit < 1 || rowsMax % rowSplit)
      llvm::report_fatal_error(llvm::Twine("k3c: K3C_MLA_COMBINE_ROW_SPLIT must divide ") +
                               llvm::Twine(rowsMax) + ", got " + llvm::Twine(rowSplit),
                               /*gen_crash_diag=*/false);
    auto perToken = [&] {
      kb.blocks({Tc, kb.idx(gr.H), kb.idx(rowSplit)}, kMlaThreads, [&](ValueRange bid,
                                                                        ThreadBlock &tb) {
        Value local = bid[0], head = bid[1], row = kb.add(t0, local);
        Value olat = kb.shared(tb, {1, R}, gr.f32);
        Value fS = kb.shared(tb, {3, maxSplits}, gr.f32); // f, live, l f
        Value slot0 = kb.mul(local, P), base = kb.mul(head, R + 2);
        const int64_t perLane = (maxSplits + 31) / 32;
        kb.ifThen(kb.ieq(tb.warp, kb.idx(0)), [&] {
          SmallVector<Value> sps, ms, ls, lives;
          Value mx = gr.negInf;
          for (int64_t k = 0; k < perLane; ++k) {
            Value sp = kb.add(tb.lane, kb.idx(32 * k));
            Value in = kb.andi(kb.ult(sp, P), kb.ult(sp, kb.idx(maxSplits)));
            Value spc = kb.select(in, sp, kb.idx(0));
            sps.push_back(sp);
            ms.push_back(kb.load(part, {kb.add(slot0, spc), kb.add(base, kb.idx(R))}));
            ls.push_back(kb.load(part, {kb.add(slot0, spc), kb.add(base, kb.idx(R + 1))}));
            lives.push_back(kb.andi(in, kb.fgt(ls.back(), gr.zero)));
            mx = kb.select(lives.back(), kb.fmax(mx, ms.back()), mx);
          }
          Value M = kb.warpMax(tb, mx);
          for (int64_t k = 0; k < perLane; ++k) {
            Value f = kb.select(lives[k], kb.exp(kb.fsub(ms[k], M)), gr.zero);
            kb.ifThen(kb.ult(sps[k], kb.idx(maxSplits)), [&] {
              kb.store(f, fS, {kb.idx(0), sps[k]});
              kb.store(kb.select(lives[k], kb.f32(1.0), gr.zero), fS, {kb.idx(1), sps[k]});
              kb.store(kb.select(lives[k], kb.fmul(ls[k], f), gr.zero), fS, {kb.idx(2), sps[k]});
            });
          }
        });
        kb.barrier(tb);
        // L in split order; then a thread per latent column sums the P
        // partials in split order, up to 32 loads in flight (8 measured
        // slower on the H200: 17.1 against 13.7 us for 22 splits).
        Value L = gr.zero;
        for (int64_t sp = 0; sp < maxSplits; ++sp)
          L = kb.fadd(L, kb.load(fS, {kb.idx(2), kb.idx(sp)}));
        const int64_t U = std::min<int64_t>(maxSplits, 32);
        kb.strided(tb, kb.idx(0), kb.idx(R), [&](Value r) {
          Value col = kb.add(base, r);
          Value acc = sumSplits(U, /*zeroTerms=*/true, [&](Value spc) {
            return std::array<Value, 3>{kb.load(part, {kb.add(slot0, spc), col}),
                                        kb.load(fS, {kb.idx(0), spc}),
                                        kb.fgt(kb.load(fS, {kb.idx(1), spc}), gr.zero)};
          });
          kb.store(kb.fdiv(acc, L), olat, {kb.idx(0), r});
        });
        kb.barrier(tb);
        projectRows(one, tb, olat, row, head, kb.mul(bid[2], kb.idx(gr.dv / rowSplit)),
                    gr.dv / rowSplit);
      }, 0, "absorbed_combine");
    };
    // The row-sliced form of perToken for one-token rounds (GPU;
    // K3C_MLA_COMBINE_ROWS=0 keeps perToken): a block per (head, 32 of its dv
    // output rows), 8 lanes a W_UV row. Each thread loads its row's R / 8
    // latent columns (16-byte vectors, a row's lanes on adjacent ones, kept
    // packed until the products) before it waits for the grids ahead: W_UV
    // is a weight, and the mma.sync core ahead lets this grid's blocks start
    // beside its own (earlyNext), so the W_UV bytes stream while the core
    // runs. After the wait a thread per latent column pair merges the
    // splits, every split's (M, L) and partial pair loaded together in
    // rounds of 8 splits (an online rescale across rounds); o_lat crosses
    // through shared memory once, and the 8 lanes of a row sum their
    // products by shuffles. perToken (a block per head, 96 at one token) had
    // a chain of four rounds of global loads, W_UV's after the merge: 16.2
    // us for 17 MB on the H200 at context 8192 (docs/perf.md, session 33).
    // Rounds of more tokens keep perToken: this form's merge a token at a
    // time per block took 47 us at 4 tokens against perToken's 20.4.
    auto oneTokenRows = [&] {
      kb.blocks({kb.idx(gr.H), kb.idx(gr.dv / rowsPerBlock)}, kMlaThreads,
                [&](ValueRange bid, ThreadBlock &tb) {
        // three blocks an SM (80 registers): 384 blocks in one wave at 96
        // heads (96 registers had two an SM: 19 against 12 us).
        kb.minBlocksPerSm(tb, 3);
        Value head = bid[0], row = t0;
        Value rl = kb.div(tb.tid, kb.idx(kRowLanes)), p = kb.rem(tb.tid, kb.idx(kRowLanes));
        Value j = kb.add(kb.mul(bid[1], kb.idx(rowsPerBlock)), rl);
        Value wRow = kb.add(kb.mul(head, gr.nope + gr.dv), kb.add(kb.idx(gr.nope), j));
        SmallVector<Value> w;
        for (int64_t v = 0; v < rowVecs; ++v)
          w.push_back(kb.loadVecPinnedRaw(
              gr.kvb, {wRow, kb.mul(kb.add(p, kb.idx(kRowLanes * v)), kb.idx(rvw))}, rvw));
        // K3C_MLA_COMBINE_TRIM=1 (opt-in, session 56): merge only the
        // splits that hold positions, ceil(S / per) of the P (S the
        // sequence's visible positions, per its split's whole tiles,
        // splitRange's formula): at short contexts most splits are empty (64
        // positions: 1 of 33), yet their (M, L) rounds were loaded. Dead
        // splits only added zeros: the same values. Counted before the grid
        // wait (the round's lengths and cached lengths are step inputs that
        // no kernel writes, as the core's early tiles read them): after it,
        // the scan and the dependent length load cost 2-3 us at 4k-32k
        // positions on an H100 (session 57).
        Value Pm = P;
        if (coreBn) {
          ChunkSlot cs = findChunk(kb, tb, lens, row, 1);
          Value S = kb.add(kb.add(kb.toIndex(kb.load(cacheLens, {cs.n})), cs.t0), kb.idx(1));
          Value per = splitSpan(kb, S, P, coreBn);
          Value live = kb.div(kb.add(S, kb.sub(per, kb.idx(1))), per);
          Pm = kb.minu(P, kb.select(kb.ult(live, kb.idx(1)), kb.idx(1), live));
        }
        kb.gridWait(tb);
        Value olat = kb.shared(tb, {1, R}, gr.f32);
        Value base = kb.mul(head, R + 2);
        // The online merge of latent column pair `col` over splits first,
        // first + stride, ... (< Pm), `rounds` splits' (M, L) and partial
        // pair loaded together: the carried (M, L, o0, o1).
        // With the trim the loop keeps P as its bound (the default's loop,
        // which LLVM unrolls) and a round past Pm is skipped by a branch: a
        // loop bounded by Pm spilled 32 bytes at 80 registers and cost 1.6-1.9
        // us at 8k-32k on an H100 (session 57).
        auto mergeSplits = [&](Value col, Value first, int64_t stride, int64_t rounds) {
          SmallVector<Value> init{gr.negInf, gr.zero, gr.zero, gr.zero};
          auto round = [&](Value sp0, ValueRange a) {
                SmallVector<SmallVector<Value>> ml, o;
                SmallVector<Value> live;
                for (int64_t u = 0; u < rounds; ++u) {
                  Value sp = kb.add(sp0, kb.idx(u * stride));
                  Value in = kb.ult(sp, Pm);
                  Value at = kb.select(in, sp, kb.idx(0)); // the token's slots 0..P-1
                  ml.push_back(kb.loadVec(part, {at, kb.add(base, kb.idx(R))}, 2));
                  o.push_back(kb.loadVec(part, {at, col}, 2));
                  live.push_back(kb.andi(in, kb.fgt(ml.back()[1], gr.zero)));
                }
                Value M = a[0];
                for (int64_t u = 0; u < rounds; ++u)
                  M = kb.select(live[u], kb.fmax(M, ml[u][0]), M);
                // rescale what earlier rounds summed (nothing yet: 0)
                Value r = kb.select(kb.fgt(a[0], gr.negInf), kb.exp(kb.fsub(a[0], M)), gr.zero);
                Value L = kb.fmul(a[1], r), o0 = kb.fmul(a[2], r), o1 = kb.fmul(a[3], r);
                for (int64_t u = 0; u < rounds; ++u) {
                  Value f = kb.select(live[u], kb.exp(kb.fsub(ml[u][0], M)), gr.zero);
                  L = kb.fadd(L, kb.select(live[u], kb.fmul(ml[u][1], f), gr.zero));
                  o0 = kb.fadd(o0, kb.select(live[u], kb.fmul(o[u][0], f), gr.zero));
                  o1 = kb.fadd(o1, kb.select(live[u], kb.fmul(o[u][1], f), gr.zero));
                }
                return SmallVector<Value>{M, L, o0, o1};
          };
          return kb.loopStep(
              first, P, kb.idx(rounds * stride), init, [&](Value sp0, ValueRange a) {
                if (Pm == P)
                  return round(sp0, a);
                auto ifOp = scf::IfOp::create(kb.b, kb.loc, TypeRange(a), kb.ult(sp0, Pm),
                                              /*withElseRegion=*/true);
                OpBuilder::InsertionGuard g(kb.b);
                kb.b.setInsertionPointToStart(&ifOp.getThenRegion().front());
                scf::YieldOp::create(kb.b, kb.loc, round(sp0, a));
                kb.b.setInsertionPointToStart(&ifOp.getElseRegion().front());
                scf::YieldOp::create(kb.b, kb.loc, a);
                return SmallVector<Value>(ifOp.getResults());
              });
        };
        if (rowsCluster) {
          // Lane q of the Q = rowsClQ lanes of a column pair merges splits
          // q, q + Q, ... in rounds of kRowRounds; the Q lanes (adjacent)
          // then merge their (M, L, o0, o1) by shuffles.
          // (RR: K3C_MLA_COMBINE_ROWS_CLUSTER_ROUNDS splits a lane loads
          // together, 4 by default: 8 spill at 80 registers.)
          const int64_t Q = rowsClQ, slice = R / CB,
                        RR = intFromEnv("K3C_MLA_COMBINE_ROWS_CLUSTER_ROUNDS", 4);
          if (RR < 1 || RR > 8)
            llvm::report_fatal_error("k3c: K3C_MLA_COMBINE_ROWS_CLUSTER_ROUNDS must be 1..8, got " +
                                         llvm::Twine(RR),
                                     /*gen_crash_diag=*/false);
          Value q = kb.rem(tb.tid, kb.idx(Q));
          Value c = kb.add(kb.mul(bid[1], kb.idx(slice)),
                           kb.mul(kb.div(tb.tid, kb.idx(Q)), kb.idx(2)));
          SmallVector<Value> st = mergeSplits(kb.add(base, c), q, Q, RR);
          for (int64_t off = 1; off < Q; off *= 2) {
            SmallVector<Value> ot;
            for (Value v : st)
              ot.push_back(kb.shuffle(v, kb.idx(off), gpu::ShuffleMode::XOR));
            Value M = kb.fmax(st[0], ot[0]);
            Value fa = kb.select(kb.fgt(st[0], gr.negInf), kb.exp(kb.fsub(st[0], M)), gr.zero);
            Value fb = kb.select(kb.fgt(ot[0], gr.negInf), kb.exp(kb.fsub(ot[0], M)), gr.zero);
            for (int64_t k = 1; k < 4; ++k)
              st[k] = kb.fadd(kb.fmul(st[k], fa), kb.fmul(ot[k], fb));
            st[0] = M;
          }
          kb.ifThen(kb.ieq(q, kb.idx(0)), [&] {
            kb.store(kb.fdiv(st[2], st[1]), olat, {kb.idx(0), c});
            kb.store(kb.fdiv(st[3], st[1]), olat, {kb.idx(0), kb.add(c, kb.idx(1))});
          });
          clusterSync(kb); // every block's slice of o_lat in its shared memory
          Value olatAt = memref::ExtractAlignedPointerAsIndexOp::create(kb.b, kb.loc, olat);
          kb.strided(tb, kb.idx(0), kb.idx(R - slice), [&](Value i) {
            // the others' slices: block (k + 1 + i / slice) mod CB's
            Value owner = kb.rem(kb.add(bid[1], kb.add(kb.idx(1), kb.div(i, kb.idx(slice)))),
                                 kb.idx(CB));
            Value r = kb.add(kb.mul(owner, kb.idx(slice)), kb.rem(i, kb.idx(slice)));
            Value at = kb.pointerAt(kb.add(olatAt, kb.mul(r, kb.idx(4))), 3);
            Value remote = NVVM::MapaOp::create(
                kb.b, kb.loc, LLVM::LLVMPointerType::get(kb.b.getContext(), 7), at,
                arith::IndexCastOp::create(kb.b, kb.loc, kb.b.getI32Type(), owner));
            kb.store(LLVM::LoadOp::create(kb.b, kb.loc, gr.f32, remote).getResult(), olat,
                     {kb.idx(0), r});
          });
        } else if (weightsForm) {
          // K3C_MLA_COMBINE_WEIGHTS=1: warp 0 forms the split weights
          // f_s / sum_s L_s f_s (f_s = e^(M_s - M), dead splits 0) into
          // shared memory, all of a lane's (M, L) loads at once, while every
          // thread's first wU partial pairs are already in flight; then each
          // thread sums its pair's partials times the weights, wU splits'
          // loads a round: ceil(P / wU) dependent L2 rounds where the online
          // merge took ceil(P / 8) and its (M, L) loads.
          Value wS = kb.shared(tb, {kSplitMaxAny}, gr.f32);
          Value c = kb.mul(kb.minu(tb.tid, kb.idx(R / 2 - 1)), kb.idx(2));
          auto loadRound = [&](Value sp0) {
            SmallVector<SmallVector<Value>> o;
            for (int64_t u = 0; u < wU; ++u) {
              Value sp = kb.add(sp0, kb.idx(u));
              Value at = kb.select(kb.ult(sp, P), sp, kb.idx(0));
              o.push_back(kb.loadVec(part, {at, kb.add(base, c)}, 2));
            }
            return o;
          };
          auto accRound = [&](Value sp0, ArrayRef<SmallVector<Value>> o, Value a0, Value a1) {
            for (int64_t u = 0; u < wU; ++u) {
              Value sp = kb.add(sp0, kb.idx(u));
              Value in = kb.ult(sp, P);
              Value wv = kb.load(wS, {kb.select(in, sp, kb.idx(0))});
              Value use = kb.andi(in, kb.fgt(wv, gr.zero));
              a0 = kb.fadd(a0, kb.select(use, kb.fmul(o[u][0], wv), gr.zero));
              a1 = kb.fadd(a1, kb.select(use, kb.fmul(o[u][1], wv), gr.zero));
            }
            return SmallVector<Value>{a0, a1};
          };
          SmallVector<SmallVector<Value>> first = loadRound(kb.idx(0));
          kb.ifThen(kb.ult(tb.tid, kb.idx(32)), [&] {
            constexpr int64_t K = kSplitMaxAny / 32;
            SmallVector<Value> sp, in, live;
            SmallVector<SmallVector<Value>> ml;
            for (int64_t k = 0; k < K; ++k) {
              sp.push_back(kb.add(tb.lane, kb.idx(32 * k)));
              in.push_back(kb.ult(sp[k], P));
              ml.push_back(kb.loadVec(
                  part, {kb.select(in[k], sp[k], kb.idx(0)), kb.add(base, kb.idx(R))}, 2));
              live.push_back(kb.andi(in[k], kb.fgt(ml[k][1], gr.zero)));
            }
            Value M = gr.negInf;
            for (int64_t k = 0; k < K; ++k)
              M = kb.select(live[k], kb.fmax(M, ml[k][0]), M);
            M = kb.warpMax(tb, M);
            SmallVector<Value> f;
            Value L = gr.zero;
            for (int64_t k = 0; k < K; ++k) {
              f.push_back(kb.select(live[k], kb.exp(kb.fsub(ml[k][0], M)), gr.zero));
              L = kb.fadd(L, kb.select(live[k], kb.fmul(ml[k][1], f[k]), gr.zero));
            }
            L = kb.warpSum(tb, L);
            for (int64_t k = 0; k < K; ++k)
              kb.ifThen(in[k], [&] { kb.store(kb.fdiv(f[k], L), wS, {sp[k]}); });
          });
          kb.barrier(tb); // the weights
          SmallVector<Value> acc = accRound(kb.idx(0), first, gr.zero, gr.zero);
          acc = kb.loopStep(kb.idx(wU), P, kb.idx(wU), acc, [&](Value sp0, ValueRange a) {
            return accRound(sp0, loadRound(sp0), a[0], a[1]);
          });
          kb.ifThen(kb.ult(tb.tid, kb.idx(R / 2)), [&] {
            kb.store(acc[0], olat, {kb.idx(0), c});
            kb.store(acc[1], olat, {kb.idx(0), kb.add(c, kb.idx(1))});
          });
        } else
        kb.strided(tb, kb.idx(0), kb.idx(R / 2), [&](Value pr) {
          Value c = kb.mul(pr, kb.idx(2));
          SmallVector<Value> st = mergeSplits(kb.add(base, c), kb.idx(0), 1, kRowRounds);
          kb.store(kb.fdiv(st[2], st[1]), olat, {kb.idx(0), c});
          kb.store(kb.fdiv(st[3], st[1]), olat, {kb.idx(0), kb.add(c, kb.idx(1))});
        });
        kb.barrier(tb);
        Value o = gr.zero;
        for (int64_t v = 0; v < rowVecs; ++v) {
          SmallVector<Value> wv = kb.unpackVec(w[v]);
          Value r0 = kb.mul(kb.add(p, kb.idx(kRowLanes * v)), kb.idx(rvw));
          for (int64_t e = 0; e < rvw; e += 4) {
            SmallVector<Value> ov = kb.loadVec(olat, {kb.idx(0), kb.add(r0, kb.idx(e))}, 4);
            for (int64_t k = 0; k < 4; ++k)
              o = kb.fadd(o, kb.fmul(wv[e + k], ov[k]));
          }
        }
        for (int64_t off = kRowLanes / 2; off >= 1; off /= 2)
          o = kb.fadd(o, kb.shuffle(o, kb.idx(off), gpu::ShuffleMode::XOR));
        Value colOut = kb.add(kb.mul(head, gr.dv), j);
        kb.ifThen(kb.ieq(p, kb.idx(0)), [&] {
          kb.storeF32(gatedOutput(kb, o, gr.gate, row, colOut, gr.outType), gr.out,
                      {row, colOut});
        });
        if (rowsCluster)
          clusterSync(kb); // no block exits while the others read its slice
      }, 0, "absorbed_combine_rows" + std::to_string(rowsPerBlock) + (rowsCluster ? "_c" : ""),
                rowsCluster ? CB : 1);
    };
    // The multi-token form: thread tt < TT forms token tt's weights into
    // shared memory; then a thread per (token, latent column) merges; then
    // the projection: on tensor cores (16 tokens a block, projectTokensMma)
    // where the target has mma.sync and W_UV is bf16, else FMA
    // (projectTokens, 8 tokens a block). K3C_MLA_COMBINE_MMA=0: FMA.
    auto multiToken = [&](bool staged) {
      SmallVector<Value> grid{kb.idx(gr.H), kb.ceilDiv(Tc, TT)};
      if (CL > 1)
        grid.push_back(kb.idx(CL)); // (fastest: a cluster's blocks share head and tokens)
      kb.blocks(grid, kMlaThreads, [&](ValueRange bid, ThreadBlock &tb) {
        Value head = bid[0], local0 = kb.mul(bid[1], TT);
        // (staged: every buffer from the dynamic shared memory, W_UV first)
        int64_t dynAt = wsBytes;
        auto buffer = [&](ArrayRef<int64_t> shape, Type elt) {
          if (!staged)
            return kb.shared(tb, shape, elt);
          Value v = kb.dynamicShared(tb, dynAt, shape, elt);
          int64_t bytes = elt.getIntOrFloatBitWidth() / 8;
          for (int64_t d : shape)
            bytes *= d;
          dynAt += roundUp(bytes, 16);
          return v;
        };
        Value wS;
        if (staged) {
          wS = kb.dynamicShared(tb, 0, {gr.dv, wsPitch}, kb.b.getBF16Type());
          stageCombineW(one, tb, head, wS);
          kb.gridWait(tb);
        }
        Value rk = CL > 1 ? bid[2] : kb.idx(0);
        const int64_t RS = R / CL; // the latent columns this block merges and projects
        Value valid = kb.minu(kb.idx(TT), kb.sub(Tc, local0));
        Type bf16 = kb.b.getBF16Type();
        Value olat = tc ? Value() : buffer({TT, R}, gr.f32);
        Value olHi = tc ? buffer({TT, pitch}, bf16) : Value();
        Value olLo = tc ? buffer({TT, pitch}, bf16) : Value();
        Value fS = buffer({TT, mtSplits + 1}, gr.f32);
        Value liveS = buffer({TT, mtSplits}, gr.f32);
        Value base = kb.mul(head, R + 2), one1 = kb.f32(1.0);
        kb.ifThen(kb.ult(tb.tid, valid), [&] {
          Value slot0 = kb.mul(kb.add(local0, tb.tid), P);
          SmallVector<Value> f, live, spC;
          Value L = weights(slot0, base, f, live, spC);
          for (int64_t sp = 0; sp < mtSplits; ++sp) {
            kb.store(f[sp], fS, {tb.tid, kb.idx(sp)});
            kb.store(kb.select(live[sp], one1, gr.zero), liveS, {tb.tid, kb.idx(sp)});
          }
          kb.store(L, fS, {tb.tid, kb.idx(mtSplits)});
        });
        kb.barrier(tb);
        // A thread per (token, latent column): only the round's P splits
        // (4 at a time, loads in flight), in split order as perToken sums
        // them (the splits past P only add zeros there). For the tensor
        // cores o_lat = hi + lo in bf16, rows past `valid` zero.
        if (tc)
          kb.strided(tb, kb.mul(valid, kb.idx(R)), kb.idx(TT * R), [&](Value i) {
            Value tt = kb.div(i, R), r = kb.rem(i, R);
            kb.storeF32(gr.zero, olHi, {tt, r});
            kb.storeF32(gr.zero, olLo, {tt, r});
          });
        // (CW columns an item, up to mtSplits (at most 8) splits' pair
        // loads in flight at once: a thread's items were 16 dependent rounds
        // of four loads at batch 8, 31.5 us on the H200 for 25 MB.)
        const int64_t CW = R % 4 == 0 ? 4 : R % 2 == 0 ? 2 : 1, VW = std::min<int64_t>(CW, 2);
        // (A round of one split a token, the short contexts of large
        // batches, merges with one load set an item instead of U, 7 of them
        // clamped duplicates: the same operations on the live split.)
        const int64_t Umax = std::min<int64_t>(mtSplits, 8);
        auto merge = [&](int64_t U) {
        kb.strided(tb, kb.idx(0), kb.mul(valid, kb.idx(RS / CW)), [&](Value i) {
          Value tt = kb.div(i, RS / CW);
          Value r0 = kb.add(kb.mul(rk, kb.idx(RS)), kb.mul(kb.rem(i, RS / CW), CW));
          Value slot0 = kb.mul(kb.add(local0, tt), P), col0 = kb.add(base, r0);
          SmallVector<Value> init(CW, gr.zero);
          SmallVector<Value> acc = kb.loopStep(
              kb.idx(0), P, kb.idx(U), init, [&](Value sp0, ValueRange a) {
                SmallVector<SmallVector<Value>> v;
                SmallVector<Value> f, live;
                for (int64_t u = 0; u < U; ++u) {
                  Value sp = kb.add(sp0, kb.idx(u));
                  Value in = kb.ult(sp, P);
                  Value spc = kb.select(in, sp, kb.idx(0));
                  SmallVector<Value> x;
                  for (int64_t c = 0; c < CW; c += VW) {
                    SmallVector<Value> y = kb.loadVec(
                        part, {kb.add(slot0, spc), kb.add(col0, kb.idx(c))}, VW);
                    x.append(y.begin(), y.end());
                  }
                  v.push_back(x);
                  f.push_back(kb.load(fS, {tt, spc}));
                  live.push_back(kb.andi(in, kb.fgt(kb.load(liveS, {tt, spc}), gr.zero)));
                }
                SmallVector<Value> sum(a.begin(), a.end());
                for (int64_t u = 0; u < U; ++u)
                  for (int64_t c = 0; c < CW; ++c)
                    sum[c] = kb.select(live[u], kb.fadd(sum[c], kb.fmul(v[u][c], f[u])), sum[c]);
                return sum;
              });
          Value L = kb.load(fS, {tt, kb.idx(mtSplits)});
          for (int64_t c = 0; c < CW; ++c) {
            Value r = kb.add(r0, kb.idx(c));
            Value o = kb.fdiv(acc[c], L);
            if (tc) {
              Value hi = kb.round(o, bf16);
              Value at = combineWideW(R) ? combinePermutedCol(kb, r) : r;
              kb.storeF32(hi, olHi, {tt, at});
              kb.storeF32(kb.fsub(o, hi), olLo, {tt, at});
            } else {
              kb.store(o, olat, {tt, r});
            }
          }
        });
        };
        if (Umax > 1)
          kb.ifThenElse(kb.ieq(P, kb.idx(1)), [&] { merge(1); }, [&] { merge(Umax); });
        else
          merge(1);
        if (staged) // this thread's W_UV copies landed (the barrier: every thread's)
          NVVM::CpAsyncWaitGroupOp::create(kb.b, kb.loc, kb.b.getI32IntegerAttr(0));
        kb.barrier(tb);
        if (CL > 1) {
          // (rows dv + 8 words apart: a warp's 8 fragment rows on 4 bank
          // groups, not one)
          const int64_t pp = gr.dv + 8;
          Value prod = kb.shared(tb, {TT, pp}, gr.f32);
          std::function<void(Value, Value, Value)> sink = [&](Value m, Value n, Value v) {
            kb.store(v, prod, {m, n});
          };
          projectTokensMma(one, tb, olHi, olLo, kb.add(t0, local0), valid, head,
                           kb.mul(rk, kb.idx(RS)), RS, &sink);
          clusterSync(kb); // every block's products in its shared memory
          const int64_t DS = gr.dv / CL;
          Value prodAt = memref::ExtractAlignedPointerAsIndexOp::create(kb.b, kb.loc, prod);
          kb.strided(tb, kb.idx(0), kb.mul(valid, kb.idx(DS)), [&](Value i) {
            Value m = kb.div(i, kb.idx(DS));
            Value n = kb.add(kb.mul(rk, kb.idx(DS)), kb.rem(i, kb.idx(DS)));
            Value at = kb.pointerAt(
                kb.add(prodAt, kb.mul(kb.add(kb.mul(m, kb.idx(pp)), n), kb.idx(4))), 3);
            Value sum = gr.zero;
            for (int64_t q = 0; q < CL; ++q) {
              Value remote = NVVM::MapaOp::create(
                  kb.b, kb.loc, LLVM::LLVMPointerType::get(kb.b.getContext(), 7), at,
                  kb.i32Const(q));
              sum = kb.fadd(sum, LLVM::LoadOp::create(kb.b, kb.loc, gr.f32, remote).getResult());
            }
            Value row = kb.add(kb.add(t0, local0), m), col = kb.add(kb.mul(head, gr.dv), n);
            kb.storeF32(gatedOutput(kb, sum, gr.gate, row, col, gr.outType), gr.out, {row, col});
          });
          clusterSync(kb); // no block exits while the others read its products
        } else if (tc) {
          projectTokensMma(one, tb, olHi, olLo, kb.add(t0, local0), valid, head, {}, -1, nullptr,
                           wS);
        } else {
          projectTokens(one, tb, olat, kb.add(t0, local0), valid, head, TT);
        }
      }, staged ? wsBytes + tcShared + 64 : 0, // (+64: each buffer rounded up to 16 bytes)
                std::string("absorbed_combine_") + (tc ? "mma_t" : "t") + std::to_string(TT) +
                    (CL > 1 ? "_c" + std::to_string(CL) : "") + (staged ? "_sw" : ""),
                CL);
    };
    auto multi = [&] {
      if (stageW)
        kb.ifThenElse(
            kb.ule(Tc, kb.idx(swMax)), [&] { multiToken(true); }, [&] { multiToken(false); });
      else
        multiToken(false);
    };
    auto fewTokens = [&] {
      if (rowsForm)
        kb.ifThenElse(kb.ieq(Tc, kb.idx(1)), oneTokenRows, perToken);
      else
        perToken();
    };
    if (from > splitChunkTokens())
      fewTokens();
    else
      kb.ifThenElse(kb.ult(Tc, kb.idx(from)), fewTokens, multi);

  });
}

/// The absorbed form for every token of the launch (or, with skipFresh,
/// the cached sequences' tokens): on the GPU the head-grouped kernels (split
/// positions for whole launches, 16 tokens a block for a prefill's cached
/// sequences); the host's loop nest, a block per (token, head).
static void absorbedAll(KernelBuilder &kb, MlaAttentionOp attn, Value q, const CacheRef &cache,
                        Value cacheLens, Value lens, Value kvb, Value gate, Value out,
                        ArrayRef<Value> split, bool skipFresh, const AppendHook *append) {
  if (append && (!kb.gpu() || split.empty() || skipFresh))
    append->launch();
  if (!kb.gpu() || split.empty()) {
    absorbedAttention(kb, attn, q, cache, cacheLens, lens, kvb, gate, out, skipFresh ? 16 : 1,
                      skipFresh);
    return;
  }
  int64_t H = attn.getNumHeads(), G = std::min<int64_t>(8, H);
  while (H % G)
    --G;
  if (skipFresh)
    absorbedGrouped(kb, attn, q, cache, cacheLens, lens, kvb, gate, out, G, 16);
  else
    absorbedSplit(kb, attn, q, cache, cacheLens, lens, kvb, gate, out, split[0], split[1],
                  split.size() > 2 ? split[2] : Value(), G, append);
}

std::optional<LogicalResult> lowerMlaFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  auto attn = dyn_cast<MlaAttentionOp>(op);
  if (!attn)
    return std::nullopt;
  Value q = st.get(attn.getQ()), kv = st.get(attn.getKv()), kvNorm = st.get(attn.getKvNorm()),
        cacheLens = st.get(attn.getCacheLens()),
        lens = st.get(attn.getSeqLens()), kvb = st.get(attn.getKvBProj()),
        out = st.get(attn.getResult());
  Value gate = attn.getGate() ? st.get(attn.getGate()) : Value();
  CacheRef cache;
  cache.mem = st.get(attn.getCache());
  if (attn.getBlockTable()) {
    cache.table = st.get(attn.getBlockTable());
    cache.page = cast<MemRefType>(cache.mem.getType()).getDimSize(1);
  }
  auto kvType = cast<MemRefType>(kv.getType());
  Type act = kvType.getElementType();
  int64_t R = cast<MemRefType>(kvb.getType()).getDimSize(1);
  int64_t cd = kvType.getDimSize(1);
  Value eps = kb.f32(attn.getNormEps().convertToDouble());
  FlashPlan fp = flashPlan(attn, kb.target);
  // The scratch buffers (mlaScratchNeeds; the host has them too).
  SmallVector<Value> sc = st.scratch.lookup(op), split;
  assert(sc.size() == mlaScratchNeeds(op).size() && "mlaScratchNeeds' buffers");
  Value cn, kvup;
  if (flashPlan(attn, Target::Gpu).on) {
    if (fp.on) {
      cn = sc[0];
      kvup = sc[1];
    }
    sc.erase(sc.begin(), sc.begin() + 2);
  }
  split.assign(sc.begin(), sc.end());

  // Phase 1: a warp per new token (8 a block; the host: a block per token)
  // appends its latent (RMSNorm'd c, rounded like the reference's norm, then
  // raw k_pe) to its sequence's cache (and, for the flash prefill, c_n to
  // its own [T, R] buffer). The token's sequence comes from a warp scan of
  // seq_lens (findChunk with 1-token chunks).
  Value T = kb.dim(q, 0);
  int64_t tokWarps = kb.gpu() ? kMlaThreads / 32 : 1;
  // A warp's token `slot`; `cn` (the flash prefill's c_n) when given.
  auto appendWarp = [&](ThreadBlock &tb, Value slot, Value cn) {
    ChunkSlot cs = findChunk(kb, tb, lens, slot, 1);
    kb.ifThen(cs.valid, [&] {
      Value row = kb.add(cs.start, cs.t0);
      Value pos = kb.add(kb.toIndex(kb.load(cacheLens, {cs.n})), cs.t0);
      SmallVector<Value> crow = cache.row(kb, cs.n, pos);
      if (kb.gpu()) {
        // Every load of the row in flight at once (a lane's columns lane +
        // 32 i, unrolled; the loop form waited for each load in turn: 10 us
        // for a one-token append on the H200), the same sums in the same
        // order as the loop form below.
        const int64_t per = (cd + 31) / 32, perR = (R + 31) / 32;
        SmallVector<Value> cols, vals, nrm;
        for (int64_t i = 0; i < per; ++i) {
          Value c = kb.add(tb.lane, kb.idx(32 * i));
          cols.push_back(c);
          Value cc = (i + 1) * 32 <= cd ? c : kb.minu(c, kb.idx(cd - 1));
          vals.push_back(kb.loadF32(kv, {row, cc}));
          if (i < perR)
            nrm.push_back(kb.loadF32(kvNorm, {kb.minu(c, kb.idx(R - 1))}));
        }
        Value part = kb.f32(0.0);
        for (int64_t i = 0; i < perR; ++i) {
          Value sq = kb.fadd(part, kb.fmul(vals[i], vals[i]));
          part = (i + 1) * 32 <= R ? sq : kb.select(kb.ult(cols[i], kb.idx(R)), sq, part);
        }
        Value ss = kb.warpSum(tb, part);
        Value inv = kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(R))), eps));
        for (int64_t i = 0; i < per; ++i) {
          auto store = [&] {
            Value c = cols[i];
            Value isC = kb.ult(c, kb.idx(R));
            Value v = vals[i];
            if (i < perR) {
              Value cv =
                  kb.fmul(kb.round(kb.fmul(v, inv), act), nrm[std::min(i, perR - 1)]);
              if (cn && (i + 1) * 32 <= R)
                kb.storeF32(cv, cn, {row, c});
              else if (cn)
                kb.ifThen(isC, [&] { kb.storeF32(cv, cn, {row, c}); });
              v = (i + 1) * 32 <= R ? cv : kb.select(isC, cv, v);
            }
            kb.storeF32(v, cache.mem, {crow[0], crow[1], c});
          };
          if ((i + 1) * 32 <= cd)
            store();
          else
            kb.ifThen(kb.ult(cols[i], kb.idx(cd)), store);
        }
        return;
      }
      Value part = kb.loopStep(tb.lane, kb.idx(R), kb.idx(tb.lanes), ValueRange{kb.f32(0.0)},
                               [&](Value c, ValueRange a) {
                                 Value v = kb.loadF32(kv, {row, c});
                                 return SmallVector<Value>{kb.fadd(a[0], kb.fmul(v, v))};
                               })[0];
      Value ss = kb.warpSum(tb, part);
      Value inv = kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(R))), eps));
      kb.loopStep(tb.lane, kb.idx(cd), kb.idx(tb.lanes), [&](Value c) {
        Value v = kb.ifElse(
            kb.ult(c, kb.idx(R)),
            [&] {
              Value xn = kb.round(kb.fmul(kb.loadF32(kv, {row, c}), inv), act);
              Value cv = kb.fmul(xn, kb.loadF32(kvNorm, {c}));
              if (cn)
                kb.storeF32(cv, cn, {row, c});
              return cv;
            },
            [&] { return kb.loadF32(kv, {row, c}); });
        kb.storeF32(v, cache.mem, {crow[0], crow[1], c});
      });
    });
  };
  AppendHook hook;
  hook.launch = [&] {
    kb.blocks({kb.ceilDiv(T, tokWarps)}, kMlaThreads, [&](ValueRange bid, ThreadBlock &tb) {
      appendWarp(tb, kb.add(kb.mul(bid[0], tokWarps), tb.warp), cn);
    }, 0, "append");
  };
  hook.warp = [&](ThreadBlock &tb, Value slot) { appendWarp(tb, slot, Value()); };

  double scale = attn.getSoftmaxScale().convertToDouble();
  auto absorbed = [&](bool skipFresh, const AppendHook *append) {
    absorbedAll(kb, attn, q, cache, cacheLens, lens, kvb, gate, out, split, skipFresh, append);
  };
  if (!fp.on) {
    absorbed(false, &hook);
    return success();
  }
  // Prefill launches (at least fp.from tokens, more tokens than sequences):
  // up-project the new tokens' latent, flash attention for fresh sequences,
  // the absorbed form (16 tokens a block) for sequences that continue
  // cached context. Decode (one token a sequence) and small launches: the
  // absorbed form for all.
  Value prefill = kb.ule(kb.idx(fp.from), T);
  if (!fp.decodeToo)
    prefill = kb.andi(prefill, kb.ult(kb.dim(lens, 0), T));
  kb.ifThenElse(
      prefill,
      [&] {
        hook.launch();
        lowerLinear(kb, cn, kvb, kvup);
        if (fp.wg)
          flashPrefillWgmma(kb, fp, q, kv, kvup, lens, cacheLens, gate, out, scale);
        else
          flashPrefill(kb, fp, q, kv, kvup, lens, cacheLens, gate, out, scale);
        absorbed(true, nullptr);
      },
      [&] { absorbed(false, &hook); });
  return success();
}

} // namespace k3c::lowering
