//===- MXFP4Layout.h - the MXFP4 kernel layout, defined once ----*- C++ -*-===//
//
// The byte permutation behind #k3.mxfp4_layout<n_tile = 8, k_tile = KT>. The
// compiler (the attribute, the expert kernels) and the runtime's weight
// repacker both call these functions; nothing else encodes the layout.
//
// One matrix W [N, K] in the checkpoint layout (payload [N, K/2], low nibble
// = even column; scales [N, K/32]) becomes:
//   * tiles of 8 rows x KT columns, ordered (row tile, k tile), k fastest;
//   * inside a tile, thread t = 4r + c owns KT/4 consecutive nibbles (KT/8
//     bytes; 16 bytes for KT = 128): for each 16-column step s, the columns
//     16s + 2c + {0, 1, 8, 9} of row r, which are exactly the elements of
//     its mma.m16n8k16 B fragment (row.col);
//   * nibble j of a thread's run is the low nibble of byte j/2 when j is even;
//   * scales: per tile, [row r][block b] with KT/32 blocks per row.
// Stacked matrices ([E, N, K]) are laid out one after another.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_MXFP4LAYOUT_H
#define K3C_MODELS_MXFP4LAYOUT_H

#include <cstdint>
#include <vector>

namespace k3c::mxfp4 {

struct KernelLayout {
  int64_t nTile = 8;
  int64_t kTile = 128;
};

/// The k_tile the layout pass picks for a reduction dim K: the largest of
/// 128, 64, 32 dividing K (K is always a multiple of 32).
int64_t chooseKTile(int64_t k);

/// Position of logical element (n, k) of one [N, K] matrix in the kernel
/// layout: byte offset and whether it is the high nibble.
void kernelPayloadPosition(const KernelLayout &l, int64_t N, int64_t K, int64_t n, int64_t k,
                           int64_t &byte, bool &high);
/// Byte offset of the scale of block (n, k / 32) in the kernel layout.
int64_t kernelScaleOffset(const KernelLayout &l, int64_t N, int64_t K, int64_t n, int64_t block);

/// Checkpoint layout -> kernel layout for `count` stacked [N, K] matrices.
void repackToKernel(const KernelLayout &l, int64_t count, int64_t N, int64_t K,
                    const uint8_t *packed, const uint8_t *scales, uint8_t *outPacked,
                    uint8_t *outScales);
/// Kernel layout -> checkpoint layout (the inverse).
void repackToCheckpoint(const KernelLayout &l, int64_t count, int64_t N, int64_t K,
                        const uint8_t *packed, const uint8_t *scales, uint8_t *outPacked,
                        uint8_t *outScales);
/// Dequantizes one [N, K] matrix straight from the kernel layout.
void dequantizeKernel(const KernelLayout &l, int64_t N, int64_t K, const uint8_t *packed,
                      const uint8_t *scales, float *out);

} // namespace k3c::mxfp4

#endif // K3C_MODELS_MXFP4LAYOUT_H
