//===- Gemm.h - the GEMM tile layer every kernel family calls ---*- C++ -*-===//
//
// Matrix products of the kernel families go through this layer, which picks
// a strategy per target, dtype and shape:
//
//  * FMA (`gemmTile`): CUDA-core fused multiply-adds in fp32, the host
//    target's loops and the exact f32 build; also the GEMV-like decode tile
//    (few tokens, weights streamed once with 16-byte loads) and the MXFP4
//    fragment path of the expert GEMM.
//  * mma.sync (`mmaLinear`): tensor cores on sm_80+ (bf16 x bf16 -> f32,
//    m16n8k16) for bf16 operands: tiles of A and B staged global -> shared by
//    cp.async (nvgpu.device_async_copy, zero-filled past the edges) in a
//    multi-stage ring, read into fragments by ldmatrix (nvgpu.ldmatrix) and
//    multiplied by nvgpu.mma.sync; NVPTX emits the instructions.
//
// `linearPlan` says which strategy and tile serve a y = x W^T for a token
// count class; docs/kernels.md has the tile tables.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_LOWERING_TILE_GEMM_H
#define K3C_LOWERING_TILE_GEMM_H

#include "lowering/KernelBuilder.h"

#include <array>

namespace k3c::lowering {

// FMA tile sizes (GPU; the host runs one thread a block).
constexpr int64_t kLinearThreads = 256; ///< linear: 8 warps a block
constexpr int64_t kTokTile = 8;         ///< linear: tokens a block
constexpr int64_t kRowsPerWarp = 4;     ///< linear: weight rows a warp
constexpr int64_t kChunkBytes = 32768;  ///< linear: staged x bytes a K chunk

/// An activation row of a GEMM tile: whether it exists, and the indices of
/// its first element without the last (column) index.
struct ActRow {
  mlir::Value valid;
  llvm::SmallVector<mlir::Value> prefix;
};
/// The FMA strategy: one block's share of a row GEMM: for `tokTile` activation rows
/// of `a` (rowOf(tt)) and `nRows` weight rows per warp (wLoad(r, k, width):
/// `width` fp32 weights of the warp's r-th row from column k), returns each
/// lane's partial sums acc[r * tokTile + tt] over K (finish with warpSum).
/// The rows are staged through shared memory in chunks; `vw` is the vector
/// width of the loads (K a multiple of it). With `mxRow` (MXFP4 weights in
/// the #k3.mxfp4_layout kernel layout, every row of one k_tile), lanes
/// instead take (k tile, thread column c) items: one 16-byte load (k_tile
/// 128) is the 32 nibbles of the row's mma fragment run, decoded by bit
/// operations and scaled per 32-column block, against the matching columns
/// 16s + 2c + {0, 1, 8, 9} of the staged activations (wLoad is unused).
/// Row r of a GEMM tile's weights as one matrix of an MXFP4 stacked weight:
/// the buffers, the matrix (expert) and the row.
struct MxRow {
  const MXFP4Buffers *w = nullptr;
  mlir::Value matrix, row;
};
llvm::SmallVector<mlir::Value>
gemmTile(KernelBuilder &kb, ThreadBlock &tb, mlir::Value a, int64_t K, int64_t vw, int64_t nRows,
         const std::function<ActRow(mlir::Value)> &rowOf,
         const std::function<llvm::SmallVector<mlir::Value>(int64_t, mlir::Value, int64_t)> &wLoad,
         int64_t tokTile = kTokTile, const std::function<MxRow(int64_t)> &mxRow = {});

/// Decode GEMV (T <= tok tokens; k3c uses tok = 1): a block of kGemvThreads threads
/// owns kGemvRows weight rows and splits K over all its threads, 16 bytes of
/// each row a thread an iteration (x read alongside from L1/L2, no staging),
/// then reduces across warps through shared memory. Small-O projections get
/// O / kGemvRows blocks with every thread streaming, instead of O / 32
/// blocks of 4-row warps.
constexpr int64_t kGemvThreads = 256;
constexpr int64_t kGemvRows = 4;
/// A gate/up pair computed by one linear tile instead of y = x W^T: W is the
/// gate weight, `up` a second weight of its shape [O, K]. The tile's B rows
/// alternate 8 gate rows and 8 up rows (tile column 16p + i, i < 8: gate row
/// 8p + i; 16p + 8 + i: up row 8p + i), so every thread holds gate and up of
/// the same hidden columns, and the store writes
/// y[t, h] = act(round(g), round(u)) with g, u rounded to `roundTo` (the
/// unfused projections' type: bit-identical to the separate kernels).
struct GluPair {
  mlir::Value up;
  mlir::Type roundTo;
  std::function<mlir::Value(mlir::Value gate, mlir::Value up)> act;
  explicit operator bool() const { return static_cast<bool>(up); }
};

/// Every linear strategy takes an optional `residual` [T, O] (a fused
/// residual add): y = round(round(x W^T) + residual), the unfused kernels'
/// two rounding points kept, so the fusion changes no bit of y. The GEMV and
/// the tensor-core tiles also take a GluPair (y is then [T, O] of the
/// activation; no residual with it).
/// One token's activation row built inside every GEMV block (a fused norm
/// prologue at decode batch 1, K3C_GEMV_PROLOGUE=1; off by default: measured
/// slower than the norm's own launch in the decode graph): returns a
/// workgroup memref [1, K] holding the row the GEMV multiplies instead of x. The GEMV then runs persistent
/// blocks (SMs x K3C_GEMV_PROLOGUE_BLOCKS, default 4) that ask the L2 for
/// their first rows' weights (sm_90), build the row once and stride over
/// the row groups (kernel name suffix `_normed`).
using XPrologue = std::function<mlir::Value(ThreadBlock &)>;
/// K3C_GEMV_PROLOGUE: 0 (the default) keeps a one-token norm in its own
/// launch; 1 computes it in persistent GEMV blocks (above); 2 in every GEMV
/// block (a block per row group, as without a prologue: no persistence, no
/// L2 prefetch), for chains whose input rows are at most
/// K3C_GEMV_PROLOGUE_BYTES (4096 by default: mla_q_up's q_a norm, 3 KB) —
/// on a GPU with grid dependency control the block's first weights are
/// loaded before its grid wait, so they stream while the norm is built
/// (kernel name suffix `_normedb`). Other values are a fatal error naming it.
int64_t gemvPrologueMode();
/// With `map` (no residual, no GluPair) each output is rounded to
/// map->roundTo and stored as map->map(value, column, map->colLoad(column))
/// into y (f32): an elementwise op of the linear's result done in the
/// GEMV's store, as the tensor-core tiles' StoreEpilogue does.
struct StoreEpilogue;
void gemvLinear(KernelBuilder &kb, mlir::Value x, mlir::Value w, mlir::Value y, mlir::Value T,
                int64_t tok, mlir::Value residual = {}, const GluPair &glu = {},
                const XPrologue &prologue = {}, const StoreEpilogue *map = nullptr);

/// A tensor-core CTA tile: bm x bn outputs a block, bk columns of K a
/// pipeline stage, warpsM x warpsN warps (each a (bm/warpsM) x (bn/warpsN)
/// warp tile of m16n8 accumulators), `stages` shared-memory stages.
struct MmaTile {
  int64_t bm = 128, bn = 128, bk = 32, warpsM = 2, warpsN = 4, stages = 4;
  int64_t threads() const { return 32 * warpsM * warpsN; }
  /// Shared-memory row pitch in elements: bk plus 16 bytes, so the 8 rows
  /// an ldmatrix phase reads fall in distinct banks.
  int64_t pitch() const { return bk + 8; }
  int64_t sharedBytes(int64_t eltBytes) const { return stages * (bm + bn) * pitch() * eltBytes; }
  std::string name() const;
  /// Empty when the tile is well formed for `info`, else why not.
  std::string check(const TargetInfo &info) const;
};

/// A warpgroup-MMA CTA tile (sm_90a): bm/64 consumer warpgroups, each
/// issuing wgmma.m64n{bn}k16 over its 64 rows; stages of 64 K columns (one
/// 128-byte swizzled row per tile row) filled by cp.async. `inflight` wgmma
/// groups (0 or 1) stay in flight while the next stage is waited for and
/// refilled, so the tensor cores run across the block barrier; the ring then
/// prefetches stages - 1 - inflight stages ahead.
struct WgmmaTile {
  int64_t bm = 128, bn = 256, stages = 4, inflight = 1;
  /// Blocks a thread block cluster sharing the x tile by TMA multicast (1,
  /// 2 or 4; wgmmaLinear applies it where the launch's column tiles allow).
  int64_t cluster = 1;
  static constexpr int64_t bk = 64;
  int64_t threads() const { return 128 * (bm / 64); }
  /// Stage bytes plus 1 KB to align the ring to the 1024-byte swizzle atom.
  int64_t sharedBytes() const { return stages * (bm + bn) * bk * 2 + 1024; }
  std::string name() const;
  std::string check(const TargetInfo &info) const;
};

/// How the warpgroup tiles (wgmmaLinear) fill their shared-memory ring
/// (K3C_WGMMA_TMA): 0 (the default) cp.async, every thread 16 bytes a copy;
/// 1 the TMA unit: one thread a stage issues a 2-D tensor copy of the x tile
/// and of the W tile (a GluPair's gate and up halves: two), 128-byte
/// swizzled by the copy itself, zero-filled past the operands' edges, which
/// completes on the slot's mbarrier (arrive.expect_tx of the stage's bytes;
/// the warpgroups wait on its phase parity). The tensor maps are made by the
/// host side of the launch (nvgpu.tma.create.descriptor; the runtime's
/// mgpuTensorMapEncodeTiledMemref encodes and caches them in device memory).
/// Operands without an identity layout keep cp.async. Any other value is a
/// fatal error naming it.
int64_t wgmmaTmaMode();
/// WgmmaTile::cluster from environment variable `var` (K3C_WGMMA_CLUSTER:
/// the batched-decode tiles, up to 256 tokens; K3C_WGMMA_CLUSTER_PREFILL:
/// the prefill tile): 1 (the default) one block a tile; 2 or 4: the TMA
/// warpgroup tiles (K3C_WGMMA_TMA=1) of a launch whose column tiles it
/// divides run as thread block clusters of that many adjacent column tiles
/// sharing the x tile by TMA multicast (kernel name suffix `_c2`, `_c4`).
/// Other values are a fatal error naming the variable.
int64_t wgmmaClusterSize(const char *var);

/// Host side of a launch: the TMA tensor map of bf16 memref `m` (identity
/// layout, rank <= 5, rows 16-byte multiples) for boxes of `box` elements
/// (outermost dimension first; the innermost WgmmaTile::bk = 64 elements:
/// one 128-byte swizzled shared-memory row a box row), zero-filled past m's
/// edges, as the generic pointer a kernel takes (nvgpu.tma.create.descriptor;
/// the runtime's mgpuTensorMapEncodeTiledMemref encodes it). `tmaOperand`
/// says whether `m` qualifies.
bool tmaOperand(mlir::Value m);
mlir::Value tmaTensorMap(KernelBuilder &kb, mlir::Value m, llvm::ArrayRef<int64_t> box);
/// One TMA tensor copy: the box of `map` at element coordinates `coords`
/// (innermost first) into shared address `dst` (1024-byte aligned for the
/// swizzle), completing on mbarrier `bar` (which must expect its bytes).
/// With `multicast` (an i16 mask of the cluster's blocks) the box lands at
/// `dst` in each of those blocks and completes on the mbarrier at `bar`'s
/// offset in each.
void tmaCopyTile(KernelBuilder &kb, mlir::Value dst, mlir::Value map,
                 llvm::ArrayRef<mlir::Value> coords, mlir::Value bar,
                 mlir::Value multicast = {});
/// A barrier of every thread of the block's cluster (barrier.cluster.arrive
/// with release, wait with acquire: shared-memory writes before it are seen
/// by the cluster's blocks after it).
void clusterSync(KernelBuilder &kb);

/// `dflt` with the fields of environment variable `var` when set
/// ("bm,bn,stages[,inflight]"; a malformed value is refused by name).
WgmmaTile wgmmaTileFromEnv(const char *var, WgmmaTile dflt);
/// The batched-decode split-K launches' tile (LinearPlan::wgmmaSplit):
/// K3C_SPLITK_TILE, default 128 x 256 with no wgmma group in flight.
WgmmaTile splitKTile();
/// The split tile of a split-K launch with O outputs: splitKTile(), or
/// where K3C_SPLITK_FILL=1 (and K3C_SPLITK_TILE unset) its width narrowed
/// to the multiple of 32 in 128..256 dividing O whose column tiles, times
/// splitKWays(), fill the most SMs in one wave.
WgmmaTile splitKTile(const TargetInfo &info, int64_t O);

/// How y[T, O] = x[T, K] W[O, K]^T runs: the FMA tile below `mmaFrom`
/// tokens, tensor-core tiles from there (`small` up to `smallUpTo` tokens and
/// `medium` up to `mediumUpTo`, where few row tiles must still fill the SMs;
/// `large` or the wgmma tile above). No tensor
/// cores (mmaFrom = 0) on the host, for non-bf16 operands (the exact f32
/// build) or shapes the tiles do not cover (K % 8, O % 2).
struct LinearPlan {
  int64_t mmaFrom = 0, smallUpTo = 0, mediumUpTo = 0;
  MmaTile small, medium, large;
  /// sm_90a: warpgroup MMA replaces `medium` (wgmmaMedium) and `large`
  /// (wgmma) above smallUpTo tokens.
  bool useWgmma = false;
  WgmmaTile wgmmaMedium, wgmma;
  /// The batched-decode split-K launches' wide tile (wgmmaLinear's splitWs;
  /// splitKTile(): K3C_SPLITK_TILE, default 128 x 256, no group in flight), split
  /// splitKWays() ways where that gives at least 3/4 of the SMs a block;
  /// else wgmmaMedium split kSplitNarrowWays ways.
  WgmmaTile wgmmaSplit;
};
/// `outputsGcd`: the gcd of the output widths sharing the plan (one launch
/// for several projections), O where 0.
LinearPlan linearPlan(const TargetInfo &info, mlir::Type xElt, mlir::Type wElt, int64_t K,
                      int64_t O, int64_t outputsGcd = 0);

/// y = x W^T over `T` rows of x (T >= 1) with tensor-core tile `tile`:
/// one launch, grid of row tiles x column tiles in groups of 8 row tiles (the
/// W tiles a wave reads stay in L2). x, W bf16; y any float type (rounded
/// once from the fp32 accumulators).
/// One decode GEMV launch (one token: T = 1) for several projections of the
/// same x: ys[i] = x ws[i]^T. Blocks take kGemvRows rows of the projections'
/// concatenated outputs (block b: the projection whose block range holds b),
/// so a kernel's q/k/v/gate/... projections stream as one grid, with no
/// launch gaps and no small-grid tails. ws share K and element type; ys
/// their element type.
/// K3C_GEMV_EARLY=1 (0, the default: off; other values are a fatal error
/// naming it), on a GPU with grid dependency control: the decode GEMVs
/// (gemvLinear, gemvMulti; not with a prologue) load their first K step's
/// weights before their own grid wait, and the norms feeding them let them
/// start early at one token (earlyForGemv, Families.h). Same sums.
bool gemvEarly(KernelBuilder &kb);
/// K3C_MLA_QABS_EARLY=1 (0, the default: off; other values are a fatal
/// error naming it), on a GPU with grid dependency control: MLA's
/// one-token decode q_abs (Mla.cpp, the wide form) loads its W_UK slice
/// before its own grid wait, and the one-token GEMV of the mla_q_up kernel
/// ahead of it triggers its dependents at its start, so q_abs's blocks are
/// placed as the GEMV's last wave runs. Same sums.
bool mlaQabsEarly(KernelBuilder &kb);
void gemvMulti(KernelBuilder &kb, mlir::Value x, llvm::ArrayRef<mlir::Value> ws,
               llvm::ArrayRef<mlir::Value> ys, const XPrologue &prologue = {});
/// What a tensor-core linear's store does besides rounding to y's type:
/// add a residual (y = round(round(acc) + residual), the unfused kernels'
/// two rounding points), or apply an elementwise map that consumed the
/// linear's result (y = map(round(acc, roundTo), col): the unfused linear's
/// rounding kept, so the fusion changes no bit; y is then the map's result,
/// f32 stored as 8-byte pairs). Converts from a residual Value.
/// A map may read per-column values (a bias, a per-head constant):
/// `colLoad(col)` returns `colValues` f32 values of column col and the map
/// gets them as `pre`. The warpgroup tiles with TMA load them once a block
/// into a shared-memory table before the MMAs (their latency hidden behind
/// the tile's copies) and read the table in the store; elsewhere the store
/// calls colLoad itself. Same values either way.
struct StoreEpilogue {
  mlir::Value residual;
  mlir::Type roundTo;
  std::function<mlir::Value(mlir::Value v, mlir::Value col, llvm::ArrayRef<mlir::Value> pre)> map;
  std::function<llvm::SmallVector<mlir::Value>(mlir::Value col)> colLoad;
  int64_t colValues = 0;
  std::string name; ///< the map's part of the kernel name (linear_NAME_...)
  StoreEpilogue() = default;
  StoreEpilogue(mlir::Value residual) : residual(residual) {}
};

/// More projections of the same x for one tile launch (mmaLinear,
/// wgmmaLinear): the column tiles of w and of every ws[i] form one grid, a
/// block's tile picks its projection's weight, output and width (small
/// projections ride with large ones instead of leaving SMs idle; one
/// launch). Not with a residual or a GluPair.
struct MoreProjections {
  llvm::SmallVector<mlir::Value> ws, ys;
};
void mmaLinear(KernelBuilder &kb, mlir::Value x, mlir::Value w, mlir::Value y, mlir::Value T,
               const MmaTile &tile, const StoreEpilogue &ep = {}, const GluPair &glu = {},
               const MoreProjections &more = {});

/// y = x W^T over `T` rows with warpgroup MMA (sm_90a): x and W tiles in
/// 128-byte-swizzled shared memory (cp.async, zero-filled edges, a
/// `stages`-deep ring), shared-memory matrix descriptors, wgmma.mma_async
/// m64n{bn}k16 bf16 -> f32 accumulating in registers.
/// With `splitWs` ([>= splitWays * kSplitRows, O] f32, T <= kSplitRows, no
/// GluPair or more projections) the K tiles split `splitWays` ways over as
/// many blocks: each writes its fp32 partial tile to its slice of splitWs,
/// and a second launch sums the slices in order and stores y (with the
/// residual): for outputs whose column tiles alone leave SMs idle.
void wgmmaLinear(KernelBuilder &kb, mlir::Value x, mlir::Value w, mlir::Value y, mlir::Value T,
                 const WgmmaTile &tile, const StoreEpilogue &ep = {}, const GluPair &glu = {},
                 const MoreProjections &more = {}, mlir::Value splitWs = {},
                 int64_t splitWays = 0);
/// A block's dynamic shared memory from its first 1024-byte boundary (the
/// 128-byte swizzle's pattern is anchored to 1024-byte atoms; allocate 1 KB
/// more than the tiles need): `view` of the bytes from `offset` past the
/// boundary, `address` their shared-space address (index).
struct AlignedShared {
  mlir::Value raw, pad, base;
  mlir::Value view(KernelBuilder &kb, mlir::Value offset, llvm::ArrayRef<int64_t> shape,
                   mlir::Type elementType) const;
  mlir::Value address(KernelBuilder &kb, mlir::Value offset) const;
};
AlignedShared alignedDynamicShared(KernelBuilder &kb);

/// A wgmma operand tile in 128-byte-swizzled shared memory (rows of 64
/// bf16, 16-byte chunk c of row r at chunk c ^ (r % 8), 8-row atoms 1024
/// bytes apart, the tile starting on a 1024-byte boundary) at shared address
/// `addr` (i64). K-major (rows are M or N, K along the row): a K beyond 64
/// continues in the next 64-column block, `blockBytes` further. MN-major (B
/// only: rows are K, N along the row, wgmma's transposed B): N beyond 64
/// continues `blockBytes` further.
struct WgmmaOperand {
  mlir::Value addr;
  int64_t blockBytes = 0;
  bool mnMajor = false;
};
/// acc += A B over `ksteps` k16 steps of wgmma.m64n{n}k16 (bf16 -> f32),
/// fenced and committed as one group (wait with wgmma.wait_group); a null
/// `acc` starts from zero (scale-d 0 on the first step). Either operand may
/// be MN-major (transposed; a 16-row k step of 128-byte rows, `blockBytes`
/// between 64-element MN blocks), as wgmma allows for bf16.
mlir::Value wgmmaChain(KernelBuilder &kb, mlir::Type accType, mlir::Value acc,
                       const WgmmaOperand &a, const WgmmaOperand &b, int64_t n, int64_t ksteps);
/// acc += A B with A in registers (wgmma.mma_async's register-A form, one
/// k16 step per entry of `aRegs`: the four b32 registers of the warpgroup's
/// m64 x k16 A slice in the m64 accumulator layout, i.e. mma.sync's m16n8k16
/// A fragment per warp), B from shared memory; fenced and committed as one
/// group.
mlir::Value wgmmaChainRegA(KernelBuilder &kb, mlir::Type accType, mlir::Value acc,
                           llvm::ArrayRef<std::array<mlir::Value, 4>> aRegs,
                           const WgmmaOperand &b, int64_t n);
/// Split-K of the batched-decode wgmma tiles (wgmmaLinear's splitWs): the
/// most rows it serves, and the ways of the narrow (wgmmaMedium) tile.
constexpr int64_t kSplitRows = 128, kSplitNarrowWays = 2;
/// The ways of the wide split tile (LinearPlan::wgmmaSplit):
/// K3C_SPLITK_WAYS, 2..8, default 4; any other value is a fatal error naming it.
int64_t splitKWays();

// Fragment-level helpers of the mma.sync strategy for families that chain
// small products in registers (the KDA chunk recurrence).

/// c += a b for one m16n8k8 tf32 tile (4 A words, 2 B words: fp32 values
/// rounded to tf32, e.g. by nvvm.convert.float.to.tf32; 4 fp32 accumulators
/// rows g, g, g + 8, g + 8 and columns 2q, 2q + 1, g = lane / 4, q = lane % 4).
void mmaTf32(KernelBuilder &kb, mlir::ValueRange a, mlir::ValueRange b,
             llvm::MutableArrayRef<mlir::Value> c);
/// c += a b for one m16n8k16 bf16 tile: `a` 4 and `b` 2 i32 words of packed
/// bf16 pairs (low half the lower k), `c` 4 fp32 accumulators (layout as
/// mmaTf32's).
void mmaBf16(KernelBuilder &kb, mlir::ValueRange a, mlir::ValueRange b,
             llvm::MutableArrayRef<mlir::Value> c);
/// fp32 lo, hi rounded to bf16 and packed into one i32 word (lo in the low
/// half): an A or B register of mmaBf16.
mlir::Value packBf16(KernelBuilder &kb, mlir::Value lo, mlir::Value hi);
/// ldmatrix.x4 (optionally .trans) of four 8 x 8 bf16 matrices from
/// workgroup memory at `indices` (each lane names one row): vector<4x2xbf16>.
mlir::Value ldmatrixX4(KernelBuilder &kb, mlir::Value smem, mlir::ValueRange indices,
                       bool transpose);
/// Rows [first, first + count) of an ldmatrix result as mma i32 words.
llvm::SmallVector<mlir::Value> fragmentWords(KernelBuilder &kb, mlir::Value frag, int64_t first,
                                             int64_t count);
/// Two adjacent bf16 of a row (memref[indices], the next column) as one
/// packed i32 word, loaded straight from memory: an A register of mmaBf16
/// (row-major A) or a B register of a column-major B.
mlir::Value loadPairWord(KernelBuilder &kb, mlir::Value memref, mlir::ValueRange indices);
/// memref[row, col] and memref[row + 1, col] (bf16) as one packed i32 word:
/// a B register of mmaBf16 for a row-major (k-major) B.
mlir::Value loadColumnPairWord(KernelBuilder &kb, mlir::Value memref, mlir::Value row,
                               mlir::Value col);

/// Grouped MXFP4 GEMM on tensor cores (the routed experts, bf16 activations):
/// work items are (token tile of `bm` rows of one group, column tile): rows
/// [m0, end) of group e come from `aRow`, the CTA's 16 weight tiles of 8
/// rows from `wTile` (column warp wn of 4 owns tiles 4 wn .. 4 wn + 3);
/// every K chunk of the layout's k_tile columns is staged by cp.async in a
/// `stages`-deep ring (the gathered A rows padded for ldmatrix, the tiles'
/// fragment runs and scales as laid out); each lane's run is decoded into
/// the bf16 B fragments of mma.sync m16n8k16 (E2M1 bits, products with the
/// E8M0 scale exact in bf16x2), fp32 accumulation. `warpsM` row warps share
/// the column warp's tiles: with 2, each decodes half of them into shared
/// memory (fragment order, one 16-byte read a lane per two k steps) for both,
/// halving the decode work per MMA. Scales below 2^1 (every byte < 0x80)
/// fold the decode's 2^126 into one multiply; a warp whose chunk holds a
/// larger scale or NaN takes the exact two-multiply path. Persistent: `grid`
/// blocks stride over the items; group tiles come from `tileStarts` ([E + 1]
/// prefix of ceil(rows / bm), i32) and group rows from `groupStarts`.
struct MxfpGroupedMma {
  int64_t bm = 64, warpsM = 1, stages = 4;
  int64_t K = 0, kTile = 128; ///< reduction length (a multiple of kTile)
  int64_t experts = 0;        ///< groups E
  int64_t nTiles = 0;         ///< column tiles a group tile is split into
  /// i32 [E + 1] group row offsets and tile offsets (index row `which`).
  mlir::Value groupStarts, tileStarts;
  llvm::SmallVector<mlir::Value> startsIndex, tilesIndex; ///< leading indices
  /// When set: group e's rows end at groupStarts[endsIndex, e + endsNext]
  /// instead of at groupStarts[startsIndex, e + 1] (a split group's head
  /// ends where its tail starts; the tail starts elsewhere than row 0).
  llvm::SmallVector<mlir::Value> endsIndex;
  int64_t endsNext = 0;
  /// A row at group position `pos` (valid: pos < end): the source memref and
  /// the indices of its first element without the column.
  mlir::Value a;
  std::function<llvm::SmallVector<mlir::Value>(mlir::Value pos)> aRow;
  /// Weight tile q (0 .. 3) of column warp `wn` in column tile j, group e:
  /// its buffers, matrix, first row (a multiple of 8) and whether it exists.
  struct WTile {
    const MXFP4Buffers *w;
    mlir::Value matrix, row0, valid;
  };
  std::function<WTile(int64_t q, mlir::Value wn, mlir::Value j, mlir::Value e)> wTile;
  /// A warp's accumulators: acc[((i * 4 + q) * 4) + r] for m16 tile i, its
  /// tile q (0..3) and mma register r (rows g, g, g + 8, g + 8; columns 2c,
  /// 2c + 1; g = lane / 4, c = lane % 4), for rows from `row0` (valid below
  /// end), column warp wn of column tile j, group e.
  std::function<void(llvm::ArrayRef<mlir::Value> acc, mlir::Value row0, mlir::Value end,
                     mlir::Value wn, mlir::Value j, mlir::Value e, ThreadBlock &tb)>
      epilogue;
  std::string name;
  /// Lean copies (one row warp, k_tile >= 64; else ignored): a missing
  /// weight tile's runs zero-filled by the copy's source size instead of a
  /// branch around each copy (sources clamped into the matrix), and the
  /// warp's four scale blocks by one 16-byte copy a lane (raw pointers: the
  /// tiles may lie in different matrices) instead of one copy a tile.
  bool lean = false;
  /// Two k chunks a barrier (where the chunk count is even and stages >= 4;
  /// else one): one wait and one barrier a step, the ring refilled two slots
  /// at a time, S - 2 chunks ahead instead of S - 1.
  bool pair = false;
  int64_t warps() const { return 4 * warpsM; }
  /// Empty when the configuration is well formed for `info`, else why not.
  std::string check(const TargetInfo &info) const;
  int64_t sharedBytes() const {
    int64_t ring = stages * (bm * (kTile + 8) * 2 + 16 * (4 * kTile + kTile / 4));
    return ring + (warpsM > 1 ? 16 * (kTile / 16) * 32 * 8 : 0);
  }
};
void mxfpGroupedMma(KernelBuilder &kb, const MxfpGroupedMma &g, int64_t grid);
/// Two grouped MXFP4 GEMMs chained in one persistent launch (the routed
/// experts' up and down projections at decode): `second` reads what `first`
/// writes for the same group, so a group's second-GEMM items start once its
/// first-GEMM items are done, counted in `sync` (i32, [.., experts + 1] at
/// the leading indices `syncIndex`: a count per group, then the work queue;
/// all zero at launch). Blocks claim items from the queue in order, first
/// GEMM first: the tail of the first GEMM is filled by the second's items of
/// groups already done, and one launch is saved. Both GEMMs' blocks have the
/// same warps; their rings alias one shared-memory allocation (the larger).
///
/// Split-K (decode, where an expert has one or a few tokens and the items
/// are too few to keep every block busy to the end): when the launch has at
/// most `splitBelow` x grid base items (and at most C, the partials' first
/// dimension), each item runs as two halves of its k chunks on two blocks;
/// each half stores its fp32 accumulators' valid rows to `partials` (f32
/// [C, 2, kSplitAccs, kSplitThreads]) and counts itself in `counts` (i32
/// [C], zero at launch and left zero); the half that finishes second adds
/// the other's and runs the epilogue. Only where both GEMMs' blocks are
/// 16-row, 4-warp tiles whose chunk counts halve into whole steps; else, and
/// with splitBelow 0, items are not split (splits()).
struct MxfpGroupedChain {
  MxfpGroupedMma first, second;
  mlir::Value sync;
  llvm::SmallVector<mlir::Value> syncIndex;
  std::string name;
  int64_t splitBelow = 0;
  mlir::Value partials, counts;
  /// The split-K partials' layout: a thread's accumulators of a 16-row tile
  /// of 4 warps.
  static constexpr int64_t kSplitThreads = 128, kSplitAccs = 16;
  /// Empty when the two GEMMs can share one launch, else why not.
  std::string check() const;
  /// Whether the launch splits items where they are few (see above).
  bool splits() const;
};
void mxfpGroupedMmaChain(KernelBuilder &kb, const MxfpGroupedChain &c, int64_t grid);
/// Grouped MXFP4 GEMM on warpgroup MMA (sm_90a; the routed experts at
/// prefill): work items are (token tile of `bm` = 128 rows of one group,
/// column tile of `bn` weight rows). Per stage of 64 K columns, cp.async
/// brings the gathered A rows into 128-byte-swizzled shared memory and each
/// 8-row weight tile's half fragment runs (8 bytes a run: four k steps) and
/// scales into a ring; the block's 256 threads decode the runs once (E2M1 x
/// E8M0 exactly into bf16, mxfpFragment) into a double-buffered swizzled B
/// tile, while the previous stage's wgmma group runs; two warpgroups then
/// issue wgmma.m64n{bn}k16 from the shared-memory descriptors (A rows 64 wg
/// .., B the decoded tile); bm = 64 gives one warpgroup. Taller token tiles
/// over narrower weight tiles (192 x 96, 256 x 128) measured slower on the
/// H200 and were removed (docs/perf.md, session 24). K a multiple of 64, the
/// layout's k_tile 64 or 128. Persistent: `grid` blocks stride over the
/// items; group tiles from `tileStarts` (prefix of ceil(rows / bm)), group rows from `groupStarts`.
struct MxfpGroupedWgmma {
  int64_t bm = 128, bn = 256, stages = 4;
  static constexpr int64_t bk = 64;
  int64_t K = 0, kTile = 128; ///< reduction length, layout k_tile
  int64_t experts = 0, nTiles = 0;
  mlir::Value groupStarts, tileStarts;
  llvm::SmallVector<mlir::Value> startsIndex, tilesIndex, endsIndex; ///< as MxfpGroupedMma
  int64_t endsNext = 0;
  /// A row at group position `pos` (valid: pos < end): indices of its
  /// first element in `a` without the column.
  mlir::Value a;
  std::function<llvm::SmallVector<mlir::Value>(mlir::Value pos)> aRow;
  /// Weight tile `q` (rows 8q .. 8q + 7 of the B tile; q's parity is
  /// `parity`, a compile-time fact the caller may use to pick a buffer) of
  /// column tile j, group e.
  std::function<MxfpGroupedMma::WTile(int64_t parity, mlir::Value q, mlir::Value j, mlir::Value e)>
      wTile;
  /// The accumulators: accAt(4 n + r) holds B tile column 8 n + 2 (lane % 4)
  /// + r % 2 of group position rowBase + 8 (r / 2) (valid below end).
  std::function<void(const std::function<mlir::Value(int64_t)> &accAt, mlir::Value rowBase,
                     mlir::Value end, mlir::Value j, mlir::Value e, ThreadBlock &tb)>
      epilogue;
  std::string name;
  int64_t threads() const { return 128 * (bm / 64); }
  static constexpr int64_t decodedTiles() { return 2; }
  /// A ring, packed ring (bn x 32 payload bytes and bn / 8 x 32 scale bytes
  /// a stage), the decoded B tiles, 1 KB to align to the swizzle atom.
  int64_t sharedBytes() const {
    return stages * (bm * bk * 2 + bn * 32 + bn / 8 * 32) + decodedTiles() * bn * bk * 2 + 1024;
  }
  std::string check(const TargetInfo &info) const;
};
void mxfpGroupedWgmma(KernelBuilder &kb, const MxfpGroupedWgmma &g, int64_t grid);
/// The bf16x2 B-fragment register of MXFP4 pair `pair` (0..3) of run word
/// `word` (nibbles pair and pair + 4: the lower and the higher k, see
/// models/MXFP4Layout.h) times `scalePair` (the block's E8M0 scale as
/// bf16x2, mxScalePair): exact for every code and scale (products are
/// representable in bf16 down to 2^-133). With `folded`, scalePair is
/// mxScalePairFolded's (2^126 already in it: one multiply).
mlir::Value mxfpFragment(KernelBuilder &kb, mlir::Value word, int64_t pair,
                         mlir::Value scalePair, bool folded = false);
/// E8M0 byte `byteIdx` of `word` as a bf16x2 pair: 2^(s - 127) (0x00: 2^-127,
/// a bf16 subnormal; 0xFF: NaN).
mlir::Value mxScalePair(KernelBuilder &kb, mlir::Value word, int64_t byteIdx);
/// 2^(s - 1) = 2^126 * 2^(s - 127) as bf16x2, for scale bytes s < 0x80.
mlir::Value mxScalePairFolded(KernelBuilder &kb, mlir::Value word, int64_t byteIdx);

/// Stores fp32 v0, v1 rounded to mem's element type at `indices` and the next
/// element of the innermost dim: one 4-byte store for 16-bit types (the
/// innermost index even); for 32-bit types two stores, or one 8-byte store
/// where the caller guarantees the pair 8-byte aligned (`aligned8`).
void storePair(KernelBuilder &kb, mlir::Value mem, mlir::ValueRange indices, mlir::Value v0,
               mlir::Value v1, bool aligned8 = false);
/// Stores accumulators v0, v1 at y[row, col], y[row, col + 1] when row < T
/// and col < O (O even): one 4-byte store of the rounded pair for 16-bit y.
/// With a residual, the pair is rounded to y's type, residual[row, col..]
/// added in fp32, and the sum stored (rounded again); with a map, the pair
/// rounded to ep.roundTo, mapped and stored (StoreEpilogue).
/// pre0 / pre1: the map's column values of col and col + 1 when the caller
/// has them (StoreEpilogue::colLoad), else loaded here.
void storeAccPair(KernelBuilder &kb, mlir::Value y, mlir::Value row, mlir::Value col,
                  mlir::Value v0, mlir::Value v1, mlir::Value T, mlir::Value O,
                  const StoreEpilogue &ep = {}, llvm::ArrayRef<mlir::Value> pre0 = {},
                  llvm::ArrayRef<mlir::Value> pre1 = {});
inline void storeAccPair(KernelBuilder &kb, mlir::Value y, mlir::Value row, mlir::Value col,
                         mlir::Value v0, mlir::Value v1, mlir::Value T, int64_t O,
                         const StoreEpilogue &ep = {}) {
  storeAccPair(kb, y, row, col, v0, v1, T, kb.idx(O), ep);
}
/// Stores act(round(g0), round(u0)), act(round(g1), round(u1)) at y[row, col],
/// y[row, col + 1] when row < T and col < O (the GluPair's store).
void storeGluPair(KernelBuilder &kb, mlir::Value y, mlir::Value row, mlir::Value col,
                  mlir::Value g0, mlir::Value g1, mlir::Value u0, mlir::Value u1, mlir::Value T,
                  int64_t O, const GluPair &glu);
/// v rounded to y's element type plus residual[indices] (fp32), when
/// `residual` is set; else v.
mlir::Value addResidual(KernelBuilder &kb, mlir::Value y, mlir::Value residual,
                        mlir::ValueRange indices, mlir::Value v);

} // namespace k3c::lowering

#endif // K3C_LOWERING_TILE_GEMM_H
