//===- Families.h - per-family lowering of core ops to loops ---*- C++ -*-===//

#ifndef K3C_LOWERING_FAMILIES_H
#define K3C_LOWERING_FAMILIES_H

#include "lowering/KernelBuilder.h"

#include "llvm/ADT/DenseMap.h"

namespace k3c::lowering {

/// Buffers of the values of one kernel body while it is lowered.
struct LowerState {
  llvm::DenseMap<mlir::Value, mlir::Value> buffer;    ///< tensor value -> memref
  llvm::DenseMap<mlir::Value, MXFP4Buffers> mxfp4;    ///< MXFP4 value -> bytes
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Value>> scratch; ///< op-internal
  mlir::Value get(mlir::Value v) const { return buffer.lookup(v); }
};

/// Extra buffers an op needs inside its kernel (shape dim 0 = operand 0's).
struct ScratchNeed {
  llvm::SmallVector<int64_t> shape; ///< dim 0 dynamic (-1) = tokens
  mlir::Type elementType;
};
llvm::SmallVector<ScratchNeed> scratchNeeds(mlir::Operation *op);

// Tile sizes of the block programs (GPU; the host runs one thread a block).
constexpr int64_t kRowThreads = 256;    ///< row reductions: threads per row
constexpr int64_t kLinearThreads = 256; ///< linear: 8 warps a block
constexpr int64_t kTokTile = 8;         ///< linear: tokens a block
constexpr int64_t kRowsPerWarp = 4;     ///< linear: weight rows a warp
constexpr int64_t kChunkBytes = 32768;  ///< linear: staged x bytes a K chunk
constexpr int64_t kChunkBytesOneToken = 8192; ///< linear, one-token tile
constexpr int64_t kMlaThreads = 256;    ///< MLA: a block per (token, head)
constexpr int64_t kGroupThreads = 256;  ///< MoE: the grouping block
constexpr int64_t kExpertThreads = 256; ///< MoE: grouped expert GEMM blocks
constexpr int64_t kRouterThreads = 256; ///< MoE router: a block per token
constexpr int64_t kKdaThreads = 256;    ///< KDA: a block per (sequence, head)
constexpr int64_t kSharedBudget = 48 * 1024; ///< static shared memory a block

/// 1 / sqrt(mean(x[row, :d]^2) + eps) by a block-wide reduction (`red`:
/// shared f32 [warps]).
mlir::Value rowInvRms(KernelBuilder &kb, ThreadBlock &tb, mlir::Value x, mlir::Value row,
                      int64_t d, mlir::Value eps, mlir::Value red);
/// An activation row of a GEMM tile: whether it exists, and the indices of
/// its first element without the last (column) index.
struct ActRow {
  mlir::Value valid;
  llvm::SmallVector<mlir::Value> prefix;
};
/// One block's share of a row GEMM (Dense.cpp): for `tokTile` activation rows
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
/// The tiled y = x W^T block program (Dense.cpp).
void lowerLinear(KernelBuilder &kb, mlir::Value x, mlir::Value w, mlir::Value y);

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
