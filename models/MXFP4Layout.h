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
//   * nibble j of a thread's run (element j % 2 of fragment register P =
//     j / 2) sits in the run's 32-bit little-endian word P / 4, at nibble
//     P % 4 for the low element and P % 4 + 4 for the high one: a register's
//     two elements are 16 bits apart, so one shift lines both up with their
//     bf16 halves (fragment::codeBits);
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

/// How the tensor-core expert kernel turns pair p (0..3) of a run word into
/// a bf16x2 B register (lowering/tile/Gemm.cpp emits exactly these steps; the
/// unit tests run them here over every nibble pair and scale, with the
/// word's other nibbles set): the pair's nibbles sit at bits 4p and 16 + 4p,
/// so w << (12 - 4p) puts both signs at bits 15 and 31, and w shifted by 6 -
/// 4p (left for p < 2, right after) puts both codes e1 e0 m at the bf16 bits
/// 8..6 of their halves; (a & kSignMask) | (b & kCodeMask) is the E2M1 value
/// times 2^-126 (code 1 a bf16 subnormal): two masks and at most two shifts a
/// register. The exact path multiplies by kTwo126 and by the scale pair (s <<
/// 7 in both halves, 0x00 -> kScaleZero = 2^-127, 0xFF -> kScaleNaN); the
/// folded path, for s < 0x80, by one pair s * kScaleMul + kFoldAdd = 2^(s -
/// 1). Every product is representable in bf16.
namespace fragment {
constexpr uint32_t kSignMask = 0x80008000, kCodeMask = 0x01C001C0;
constexpr uint32_t kTwo126 = 0x7E807E80;
constexpr uint32_t kScaleMul = 0x00800080, kScaleZero = 0x00400040, kScaleNaN = 0x7FC07FC0;
constexpr uint32_t kFoldAdd = 0x3F003F00;
/// Left shift that puts pair p's signs at bits 15 and 31.
constexpr int signShift(int p) { return 12 - 4 * p; }
/// Shift that puts pair p's code bits at 6..8 and 22..24: left when >= 0.
constexpr int codeShift(int p) { return 6 - 4 * p; }
inline uint32_t codeBits(uint32_t word, int p) {
  uint32_t a = word << signShift(p);
  uint32_t b = codeShift(p) >= 0 ? word << codeShift(p) : word >> -codeShift(p);
  return (a & kSignMask) | (b & kCodeMask);
}
inline uint32_t scalePair(uint32_t s) {
  return s == 0 ? kScaleZero : s == 255 ? kScaleNaN : s * kScaleMul;
}
inline uint32_t scalePairFolded(uint32_t s) { return s * kScaleMul + kFoldAdd; }
} // namespace fragment

} // namespace k3c::mxfp4

#endif // K3C_MODELS_MXFP4LAYOUT_H
