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
//   * element j of a thread's run (element j % 2 of fragment register P =
//     j / 2) is pair P % 4 of the run's 32-bit little-endian word P / 4:
//     its E2M1 magnitude bits (e1 e0 m, m lowest) at fragment::kMagBit[p]
//     and its sign at fragment::kSignBit[p] for the low element, 16 bits
//     higher for the high one (format version 4). The four pairs' bits tile
//     the word so that a register takes at most two shifts and two masks,
//     two of the four one mask and at most one shift (fragment::codeBits);
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

/// Where logical element (n, k) of one [N, K] matrix sits in the kernel
/// layout: the byte offset of its 32-bit little-endian run word, its pair
/// (0..3) in that word and which element of the pair (0 low, 1 high).
struct PayloadSlot {
  int64_t wordByte = 0;
  int pair = 0, elem = 0;
};
PayloadSlot kernelPayloadSlot(const KernelLayout &l, int64_t N, int64_t K, int64_t n, int64_t k);
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
/// unit tests run them here over every code pair and scale, with the word's
/// other bits set). The pair's low element has its magnitude bits e1 e0 m at
/// kMagBit[p]..kMagBit[p] + 2 and its sign at kSignBit[p]; the high element
/// the same 16 bits up. Shifting the word by signShift(p) puts both signs at
/// bits 15 and 31 and by magShift(p) (left when >= 0) both magnitudes at the
/// bf16 bits 8..6 of their halves; (a & kSignMask) | (b & kCodeMask) is the
/// E2M1 value times 2^-126 (code 1 a bf16 subnormal). Pairs 0 and 2 need one
/// shift (pair 2 none) and one mask, pairs 1 and 3 two shifts and two masks:
/// 11 operations a word, where nibble-aligned codes (format 3) took 16. The
/// exact path multiplies by kTwo126 and by the scale pair (s << 7 in both
/// halves, 0x00 -> kScaleZero = 2^-127, 0xFF -> kScaleNaN); the folded path,
/// for s < 0x80, by one pair s * kScaleMul + kFoldAdd = 2^(s - 1). Every
/// product is representable in bf16.
namespace fragment {
constexpr uint32_t kSignMask = 0x80008000, kCodeMask = 0x01C001C0;
constexpr uint32_t kTwo126 = 0x7E807E80;
constexpr uint32_t kScaleMul = 0x00800080, kScaleZero = 0x00400040, kScaleNaN = 0x7FC07FC0;
constexpr uint32_t kFoldAdd = 0x3F003F00;
/// Bit of pair p's low-element magnitude (m; e0, e1 above it) and sign.
constexpr int kMagBit[4] = {0, 3, 6, 11};
constexpr int kSignBit[4] = {9, 10, 15, 14};
/// Shift that puts pair p's signs at bits 15 and 31: left (never negative).
constexpr int signShift(int p) { return 15 - kSignBit[p]; }
/// Shift that puts pair p's magnitudes at bits 6..8 and 22..24: left when
/// >= 0, right otherwise.
constexpr int magShift(int p) { return 6 - kMagBit[p]; }
/// The word bits pair p's two elements occupy.
constexpr uint32_t pairMask(int p) {
  return (0x7u << kMagBit[p]) | (0x7u << (kMagBit[p] + 16)) | (1u << kSignBit[p]) |
         (1u << (kSignBit[p] + 16));
}
static_assert((pairMask(0) | pairMask(1) | pairMask(2) | pairMask(3)) == 0xFFFFFFFFu &&
                  (pairMask(0) ^ pairMask(1) ^ pairMask(2) ^ pairMask(3)) == 0xFFFFFFFFu,
              "the four pairs must tile the run word");
/// Code (s e1 e0 m) `code` as element `elem` of pair p: its word bits.
constexpr uint32_t placeCode(uint32_t code, int p, int elem) {
  return ((code & 7u) << (kMagBit[p] + 16 * elem)) | (((code >> 3) & 1u) << (kSignBit[p] + 16 * elem));
}
/// The code of element `elem` of pair p of `word`.
constexpr uint32_t codeAt(uint32_t word, int p, int elem) {
  return ((word >> (kMagBit[p] + 16 * elem)) & 7u) |
         (((word >> (kSignBit[p] + 16 * elem)) & 1u) << 3);
}
inline uint32_t shiftBy(uint32_t w, int s) { return s >= 0 ? w << s : w >> -s; }
inline uint32_t codeBits(uint32_t word, int p) {
  if (signShift(p) == magShift(p))
    return shiftBy(word, magShift(p)) & (kSignMask | kCodeMask);
  return (shiftBy(word, signShift(p)) & kSignMask) | (shiftBy(word, magShift(p)) & kCodeMask);
}
inline uint32_t scalePair(uint32_t s) {
  return s == 0 ? kScaleZero : s == 255 ? kScaleNaN : s * kScaleMul;
}
inline uint32_t scalePairFolded(uint32_t s) { return s * kScaleMul + kFoldAdd; }
} // namespace fragment

} // namespace k3c::mxfp4

#endif // K3C_MODELS_MXFP4LAYOUT_H
