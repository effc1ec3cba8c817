//===- Families.h - per-family lowering of core ops to loops ---*- C++ -*-===//

#ifndef K3C_LOWERING_FAMILIES_H
#define K3C_LOWERING_FAMILIES_H

#include "lowering/KernelBuilder.h"
#include "lowering/tile/Gemm.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace k3c::lowering {

/// Buffers of the values of one kernel body while it is lowered.
struct LowerState {
  llvm::DenseMap<mlir::Value, mlir::Value> buffer;    ///< tensor value -> memref
  llvm::DenseMap<mlir::Value, MXFP4Buffers> mxfp4;    ///< MXFP4 value -> bytes
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Value>> scratch; ///< op-internal
  /// Linear -> the residual arith.addf fused into its store (fuseResidualAdds).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> residualAdd;
  /// Gated activation -> its (gate, up) projections, lowered as one GEMM.
  llvm::DenseMap<mlir::Operation *, std::pair<mlir::Operation *, mlir::Operation *>> gluPair;
  /// GPU: first linear -> every projection of the same x lowered with it
  /// (one gemvMulti launch at one token; gemvGroups).
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *>> gemvGroup;
  /// GPU: linear -> the KDA gate done in its tensor-core store
  /// (fuseGateLinears, Kda.cpp).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> linearGate;
  /// Ops another op's lowering does (fused adds, paired projections, the
  /// later members of a projection group).
  llvm::DenseSet<mlir::Operation *> fusedAway;
  /// GPU: a linear input -> the row ops (AttnRes, RMSNorm, gated RMSNorm)
  /// that compute it, done by the GEMV's prologue at one token
  /// (oneTokenChains); oneTokenOps holds them (their own launches are for
  /// T != 1 only).
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Operation *>> oneTokenChain;
  llvm::DenseSet<mlir::Operation *> oneTokenOps;
  mlir::Value get(mlir::Value v) const { return buffer.lookup(v); }
};

/// Extra buffers an op needs inside its kernel (shape dim 0 = operand 0's).
struct ScratchNeed {
  llvm::SmallVector<int64_t> shape; ///< dim 0 dynamic (-1) = tokens
  mlir::Type elementType;
  bool deviceOnly = false; ///< only GPU kernels touch it (the host gets a stub)
};
llvm::SmallVector<ScratchNeed> scratchNeeds(mlir::Operation *op);
/// A plain bf16 linear's split-K workspace (Dense.cpp): [splitKWays() *
/// kSplitRows, O] f32, device-only, for linears lowered on their own (not a
/// GLU's or a projection set's) with K >= 4096 and O <= 16384, whose
/// batched-decode column tiles may leave SMs idle. Decided from shapes
/// alone, so host and GPU kernels keep one calling convention.
llvm::SmallVector<ScratchNeed> linearSplitNeed(mlir::Operation *op);
/// The KDA delta rule's chunk scratch (Kda.cpp).
llvm::SmallVector<ScratchNeed> kdaScratchNeeds(mlir::Operation *op);
/// Whether `op` is an L2 norm its delta rule applies as it loads the norm's
/// input (k3-fuse-kernels' kda-norm-in-chunk): no launch, no result buffer.
bool kdaNormedOnLoad(mlir::Operation *op);
/// Whether `op` is a KDA gate its delta rule forms as it loads the gate's
/// logits (k3-fuse-kernels' kda-gate-in-chunk): no launch, no result buffer.
bool kdaGatedOnLoad(mlir::Operation *op);
/// Whether `op` is a gated output norm its delta rule lowers (k3-fuse-kernels'
/// kda-out-norm-in-chunk): its scratch is a per-(sequence, head) counter of
/// the token recurrence's finished blocks, [T, heads] i32, zero between
/// launches (the last block resets it).
bool kdaOutNormFused(mlir::Operation *op);
/// The MLA kernel's GPU scratch (Mla.cpp): the flash prefill's
/// up-projection and the split decode's partials, device-only.
llvm::SmallVector<ScratchNeed> mlaScratchNeeds(mlir::Operation *op);

// Tile sizes of the block programs (GPU; the host runs one thread a block).
constexpr int64_t kRowThreads = 256;    ///< row reductions: threads per row
constexpr int64_t kMlaThreads = 256;    ///< MLA: a block per (token, head)
constexpr int64_t kGroupThreads = 1024; ///< MoE: the grouping block
constexpr int64_t kExpertThreads = 256; ///< MoE: grouped expert GEMM blocks
constexpr int64_t kRouterThreads = 256; ///< MoE router: a block per token
/// The GPU router's top-k keeps a token's scores in one warp's registers
/// (E / 32 a lane) up to this many experts.
constexpr int64_t kRouterWarpTopKMaxExperts = 2048;
constexpr int64_t kKdaThreads = 256;    ///< KDA: recurrence / token blocks
constexpr int64_t kKdaPrepThreads = 128; ///< KDA: a prep block per (chunk, head)
/// KDA token recurrence (decode): the state staged through shared memory
/// (cp.async) from this many sequences a launch (K3C_KDA_STAGED_FROM; 0
/// never), kKdaStagedRows rows a warp (a whole 128 x 128 head a block of 8
/// warps, 64 KB: 68 registers, 3 blocks an SM, 192 KB in flight; measured
/// against 8 and 4 rows in docs/perf.md), at least kKdaStagedMinBlocks
/// blocks an SM (0: no bound; 6 caps ptxas at 40 registers and spills).
constexpr int64_t kKdaStagedFrom = 16;
constexpr int64_t kKdaStagedRows = 16;
constexpr int64_t kKdaStagedMinBlocks = 0;
/// KDA tensor-core recurrence: state products in 3xTF32 (bits: X, O, update).
/// With plain tf32 everywhere k3-tiny bf16 (MXFP4) failed its model check on
/// the H200 (8.1e-2 > 5e-2), before M U moved to 3xTF32. X and the update
/// stay 3xTF32 (X and the state carry the chain from chunk to chunk); O =
/// Qd S^T, off the chain, in plain tf32: 10 % off the delta rule at 8192
/// tokens, o against fp64 1.66e-3 -> 1.73e-3, the state unchanged, every
/// k3-tiny bf16 model check passing (docs/perf.md, session 16).
constexpr int64_t kKda3xTf32 = 5;
/// KDA scratch rows in fp16 (bits as above: 1 W^, 2 Qd, 4 Kr; bf16 build,
/// q and k from L2 norms): none by default. 7 took the delta rule 2.96 ->
/// 2.55 ms at 8192 tokens (the lo terms of W^ and Kr's products dropped)
/// but raised the state's error vs fp64 1.4e-6 -> 1.9e-4 and failed the
/// k3-tiny softplus check on the H200 (1.01 of its bound); 2 (Qd, which
/// feeds only O, a plain tf32 product) keeps every error but gained
/// nothing: 2.85 -> 2.90 ms, the recurrence is issue-bound, not
/// memory-bound (docs/perf.md, session 17).
constexpr int64_t kKdaHalfScratch = 0;
/// KDA prep phase B (Kd Ke^T, Qd Ke^T) on tf32 MMAs in 3xTF32 (factorized
/// path): 2.96 -> 2.85 ms at 8192 tokens, the same errors vs fp64, every
/// k3-tiny bf16 check passing (docs/perf.md, session 17).
constexpr int64_t kKdaPrepMma = 1;
/// The pairwise path's phase B (Kimi Linear's gate) on tf32 MMAs in 3xTF32
/// for the pairs across 4-row blocks, exact FMA inside them (kdaPairsMma),
/// rows padded by 4: the Kimi Linear slice's prep 0.488 / 0.487 -> 0.442 /
/// 0.438 ms at 8192 tokens on an H100 (two rounds), every check passing,
/// the softplus k3-tiny batch the loop failed at 1.25 of its bound passing
/// at 0.65 (session 49; with rows padded by one, bank conflicts: 0.570).
constexpr int64_t kKdaPairMma = 1;
/// Its prep launch (with kKdaPrepMma) held at >= 5 blocks an SM: ptxas
/// fits it in 96 registers (was 128; a few bytes of spill), 20 warps an SM
/// instead of 16 for a memory-bound kernel (~3 GB at 8192 tokens on the
/// slice). The delta rule 2.90 -> 2.79 ms in one call, within the 2.74-2.88
/// spread a later call showed for unchanged code: kept (same instructions,
/// same values) pending the prep's own duration under Nsight Compute
/// (docs/perf.md, session 17). The pairwise path's prep (152 registers) is
/// not bounded.
constexpr int64_t kKdaPrepMinBlocks = 5;
constexpr int64_t kConvThreads = 256;   ///< short conv: channels a block
constexpr int64_t kConvTokens = 32;     ///< short conv: tokens a block slides over
constexpr int64_t kConvUnroll = 4;      ///< short conv: tokens whose loads go together
constexpr int64_t kConvChannels = 4;    ///< short conv: channels a thread (at most)
constexpr int64_t kSharedBudget = 48 * 1024; ///< static shared memory a block
constexpr int64_t kMaxSharedBytes = 227 * 1024; ///< with the dynamic opt-in (sm_90)

/// 1 / sqrt(mean(x[row, :d]^2) + eps) by a block-wide reduction (`red`:
/// shared f32 [warps]).
mlir::Value rowInvRms(KernelBuilder &kb, ThreadBlock &tb, mlir::Value x, mlir::Value row,
                      int64_t d, mlir::Value eps, mlir::Value red);
/// Chunk `slot` of a varlen batch cut into C-token chunks sequence by
/// sequence: whether it exists, its sequence, the sequence's first row and
/// length, and the chunk's first token in the sequence. A scan over
/// seq_lens: on the GPU each warp takes 32 sequences a step (prefix sums by
/// shuffles), on the host one at a time (Kda.cpp). A grid of
/// ceil(T / C) + N slots covers every chunk of N sequences of T tokens.
struct ChunkSlot {
  mlir::Value valid, n, start, len, t0;
};
ChunkSlot findChunk(KernelBuilder &kb, ThreadBlock &tb, mlir::Value lens, mlir::Value slot,
                    int64_t C);

/// The tiled y = x W^T block program (Dense.cpp); with `residual`
/// ([T, O]), y = round(round(x W^T) + residual) in the same store.
/// With `oneTokenElsewhere` (GPU) the launches for T = 1 are left out: the
/// caller branches to gemvMulti for one token.
/// `prologue`: x at one token is built by the GEMV blocks (a fused norm).
/// `splitWs`: the linear's split-K workspace (linearSplitNeed), if it has one.
/// `map`: an elementwise op that consumed the linear's result, done in the
/// tensor-core tiles' store (map->ep, into map->y); the other paths store y
/// and then run map->unfused (the op's own launch) in the same branch.
struct LinearMap {
  StoreEpilogue ep;
  mlir::Value y;
  std::function<void()> unfused;
};
void lowerLinear(KernelBuilder &kb, mlir::Value x, mlir::Value w, mlir::Value y,
                 mlir::Value residual = {}, bool oneTokenElsewhere = false,
                 const XPrologue &prologue = {}, mlir::Value splitWs = {},
                 const LinearMap *map = nullptr);
/// The row-op chains a decode GEMV computes in its prologue (GPU): for each
/// RMSNorm or gated RMSNorm whose result only linears of the body read, the
/// norm and, when only the norm reads it, the AttnRes before it (their rows
/// at most 32 KB of shared memory). Norm result -> chain in program order.
/// Off by default (K3C_GEMV_PROLOGUE=1: on): measured on the H200 in the
/// decode graph, the separate norm launches and the plain GEMV were faster
/// (batch 1: kda_out 51 vs 59 us, lm_head 528 vs 533-562 us, step 1.63 vs
/// 1.65-1.68 ms); docs/perf.md.
llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Operation *>>
oneTokenChains(mlir::Block &body);
/// K3C_GEMV_EARLY=1 (Gemm.h's gemvEarly): a row op (norm) whose result the
/// next op of its body, a linear, reads as its input (and only linears
/// read) executes griddepcontrol.launch_dependents in every block when it
/// has one row (`rowsOf`'s dim 0), so the one-token GEMV after it is placed
/// at once and loads its first weights while the norm runs. Nothing
/// otherwise.
void earlyForGemv(KernelBuilder &kb, ThreadBlock &tb, mlir::Operation *op, mlir::Value rowsOf);
/// Emits `emit` (op's row launch over `rows` rows) unless `op` is in a
/// one-token chain, then only for rows != 1.
void unlessOneTokenPrologue(KernelBuilder &kb, const LowerState &st, mlir::Operation *op,
                            mlir::Value rows, const std::function<void()> &emit);
/// The gated RMSNorm (per head of w's length d: x * rsqrt(mean x^2 + eps) *
/// w * sigmoid(gate)) of x[xRow], gate[xRow] into y[yRow] by one block, a
/// warp a head (Kda.cpp; the per-head launch runs the same warp code).
void gatedNormRow(KernelBuilder &kb, ThreadBlock &tb, mlir::Value x, mlir::Value gate,
                  mlir::Value w, mlir::Value y, mlir::Value xRow, mlir::Value yRow, double eps);
/// The linears of a kernel body that read the same x (same K and element
/// types; not fused with an add or an activation), two or more: first ->
/// all, in program order. K3C_GEMV_MULTI=0: none.
struct LowerState;
llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *>>
gemvGroups(mlir::Block &body, const LowerState &st);
/// The residual adds of a kernel body that its linears can do in their
/// store: arith.addf(linear(x, W), r) where the linear's result has no other
/// use and r is defined before the linear (a kernel input or an earlier
/// op's result). Linear -> add.
llvm::DenseMap<mlir::Operation *, mlir::Operation *> fuseResidualAdds(mlir::Block &body);
/// The gated activations of a kernel body computed with their projections:
/// glu(linear(x, Wg), linear(x, Wu)), same x and weight shapes, the
/// projections used by nothing else. Glu -> (gate, up). (The projections'
/// buffers remain for the paths that run them separately.)
llvm::DenseMap<mlir::Operation *, std::pair<mlir::Operation *, mlir::Operation *>>
fuseGluPairs(mlir::Block &body);

/// The KDA gates of a kernel body its linear can compute in its store (GPU,
/// on by default since session 42, K3C_FUSE_GATE=0: not; docs/perf.md):
/// kda_gate(linear(x, W)) with the linear's result used by nothing else.
/// Linear -> gate.
llvm::DenseMap<mlir::Operation *, mlir::Operation *> fuseGateLinears(mlir::Block &body);
/// The KDA gate as its linear's store map (Kda.cpp): on the tensor cores
/// the linear stores the gate's result, elsewhere the gate's own launch
/// follows the linear.
LinearMap kdaGateLinearMap(KernelBuilder &kb, mlir::Operation *gate, LowerState &st);

/// Each returns success() when it lowered `op`, failure() on error, and
/// std::nullopt when `op` is not of its family.
std::optional<mlir::LogicalResult> lowerDenseFamily(mlir::Operation *op, KernelBuilder &kb,
                                                    LowerState &st);
std::optional<mlir::LogicalResult> lowerKdaFamily(mlir::Operation *op, KernelBuilder &kb,
                                                  LowerState &st);
std::optional<mlir::LogicalResult> lowerMlaFamily(mlir::Operation *op, KernelBuilder &kb,
                                                  LowerState &st);
std::optional<mlir::LogicalResult> lowerMoeFamily(mlir::Operation *op, KernelBuilder &kb,
                                                  LowerState &st);

/// The operand a state result updates in place (KDA state, conv window, MLA
/// cache), or null.
mlir::Value tiedOperand(mlir::Value result);

} // namespace k3c::lowering

#endif // K3C_LOWERING_FAMILIES_H
