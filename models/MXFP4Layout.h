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
//     its E2M1 code bits at fragment::codeBit(p, i, elem) (format version
//     5). The four pairs' bits tile the word so that a register takes one
//     mask and at most one shift or rotation, pair 3 two shifts and two
//     masks: 9 operations a word (fragment::codeBits);
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
/// other bits set). Format version 5: code bit i (0 m, 1 e0, 2 e1, 3 s) of
/// the pair's low element sits at word bit (kTarget[i] + kRot[p][i]) % 32,
/// the high element's 16 bits further (mod 32), where kTarget is the bit it
/// takes in the decoded bf16 pair (magnitude e1 e0 m at bits 8..6, sign at
/// 15; 24..22 and 31 for the high half). Decoding rotates the word right by
/// each of the pair's rotations (one piece a rotation) and masks each piece
/// to its target bits: (rotr(w, r) & pieceMask(p, r)) | ...; the result is
/// the E2M1 value times 2^-126 (code 1 a bf16 subnormal). Pair 0 needs only
/// its mask, pair 1 a rotation (funnel shift) and a mask, pair 2 a left shift
/// by 6 and a mask, pair 3 a left shift by 2 (m, e0, s) and a right shift by
/// 6 (e1), two masks merged: 9 operations a word, 7 on the integer ALU pipe
/// (the two left shifts can go to the FMA pipe as IMAD), where format 4 took
/// 11 (8 on the ALU pipe), format 3 16. The exact path multiplies by kTwo126
/// and by the scale pair (s << 7 in both halves, 0x00 -> kScaleZero =
/// 2^-127, 0xFF -> kScaleNaN); the folded path, for s < 0x80, by one pair
/// s * kScaleMul + kFoldAdd = 2^(s - 1). Every product is representable in
/// bf16.
namespace fragment {
constexpr uint32_t kSignMask = 0x80008000, kCodeMask = 0x01C001C0;
constexpr uint32_t kTwo126 = 0x7E807E80;
constexpr uint32_t kScaleMul = 0x00800080, kScaleZero = 0x00400040, kScaleNaN = 0x7FC07FC0;
constexpr uint32_t kFoldAdd = 0x3F003F00;
/// The decoded bf16 bit of code bit i (m, e0, e1, s) of a pair's low element.
constexpr int kTarget[4] = {6, 7, 8, 15};
/// Right rotation taking pair p's code bit i from the word to kTarget[i].
constexpr int kRot[4][4] = {{0, 0, 0, 0}, {4, 4, 4, 4}, {26, 26, 26, 26}, {30, 30, 6, 30}};
/// Word bit of code bit i of element `elem` of pair p.
constexpr int codeBit(int p, int i, int elem) { return (kTarget[i] + 16 * elem + kRot[p][i]) % 32; }
/// The word bits pair p's two elements occupy.
constexpr uint32_t pairMask(int p) {
  uint32_t m = 0;
  for (int i = 0; i < 4; ++i)
    m |= (1u << codeBit(p, i, 0)) | (1u << codeBit(p, i, 1));
  return m;
}
static_assert((pairMask(0) | pairMask(1) | pairMask(2) | pairMask(3)) == 0xFFFFFFFFu &&
                  (pairMask(0) ^ pairMask(1) ^ pairMask(2) ^ pairMask(3)) == 0xFFFFFFFFu,
              "the four pairs must tile the run word");
/// The decoded bits (both halves) pair p's rotation r serves; 0 if none.
constexpr uint32_t pieceMask(int p, int r) {
  uint32_t m = 0;
  for (int i = 0; i < 4; ++i)
    if (kRot[p][i] == r)
      m |= (1u << kTarget[i]) | (1u << (kTarget[i] + 16));
  return m;
}
/// How a right rotation by r of the word reaches piece `mask`'s bits with one
/// instruction: none, a left shift by 32 - r (every target bit >= 32 - r), a
/// right shift by r (every target bit + r <= 31) or a rotation.
enum class Move { None, Shl, Shr, Rot };
constexpr Move moveOf(uint32_t mask, int r) {
  if (r == 0)
    return Move::None;
  bool shl = true, shr = true;
  for (int b = 0; b < 32; ++b)
    if (mask >> b & 1u) {
      shl = shl && b >= 32 - r;
      shr = shr && b + r <= 31;
    }
  return shl ? Move::Shl : shr ? Move::Shr : Move::Rot;
}
/// Whether code bit i of pair p is the first with its rotation.
constexpr bool firstOfRot(int p, int i) {
  for (int j = 0; j < i; ++j)
    if (kRot[p][j] == kRot[p][i])
      return false;
  return true;
}
/// The distinct rotations of pair p (in code-bit order; at most two).
constexpr int rotCount(int p) {
  int n = 0;
  for (int i = 0; i < 4; ++i)
    n += firstOfRot(p, i);
  return n;
}
constexpr int rotAt(int p, int which) {
  for (int i = 0, n = 0; i < 4; ++i)
    if (firstOfRot(p, i) && n++ == which)
      return kRot[p][i];
  return -1;
}
static_assert(rotCount(0) + rotCount(1) + rotCount(2) + rotCount(3) == 5 &&
                  (pieceMask(3, 30) | pieceMask(3, 6)) == (kSignMask | kCodeMask),
              "format 5: one piece a pair but pair 3's two");
/// Code (s e1 e0 m) `code` as element `elem` of pair p: its word bits.
constexpr uint32_t placeCode(uint32_t code, int p, int elem) {
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i)
    w |= ((code >> i) & 1u) << codeBit(p, i, elem);
  return w;
}
/// The code of element `elem` of pair p of `word`.
constexpr uint32_t codeAt(uint32_t word, int p, int elem) {
  uint32_t c = 0;
  for (int i = 0; i < 4; ++i)
    c |= ((word >> codeBit(p, i, elem)) & 1u) << i;
  return c;
}
inline uint32_t rotr(uint32_t w, int r) { return r ? (w >> r) | (w << (32 - r)) : w; }
/// What the emitted steps compute: each piece moved by its one instruction
/// (Move) and masked, the pieces merged.
inline uint32_t codeBits(uint32_t word, int p) {
  uint32_t out = 0;
  for (int k = 0; k < rotCount(p); ++k) {
    int r = rotAt(p, k);
    uint32_t mask = pieceMask(p, r), moved = word;
    switch (moveOf(mask, r)) {
    case Move::None: break;
    case Move::Shl: moved = word << (32 - r); break;
    case Move::Shr: moved = word >> r; break;
    case Move::Rot: moved = rotr(word, r); break;
    }
    out |= moved & mask;
  }
  return out;
}
inline uint32_t scalePair(uint32_t s) {
  return s == 0 ? kScaleZero : s == 255 ? kScaleNaN : s * kScaleMul;
}
inline uint32_t scalePairFolded(uint32_t s) { return s * kScaleMul + kFoldAdd; }
} // namespace fragment

} // namespace k3c::mxfp4

#endif // K3C_MODELS_MXFP4LAYOUT_H
