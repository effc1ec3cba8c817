//===- MXFP4Layout.cpp - the MXFP4 kernel layout, defined once -----------===//

#include "models/MXFP4Layout.h"
#include "support/Common.h"
#include "models/MXFP4.h"

#include <algorithm>

namespace k3c::mxfp4 {

namespace {
// Column offsets inside a 16-wide k step of the m16n8k16 B fragment.
constexpr int64_t kFragCol[4] = {0, 1, 8, 9};
} // namespace

int64_t chooseKTile(int64_t k) {
  for (int64_t t : {128, 64, 32})
    if (k % t == 0)
      return t;
  return 32;
}

PayloadSlot kernelPayloadSlot(const KernelLayout &l, int64_t N, int64_t K, int64_t n,
                              int64_t k) {
  (void)N;
  int64_t tilesK = K / l.kTile;
  int64_t tile = (n / l.nTile) * tilesK + k / l.kTile;
  int64_t r = n % l.nTile, kk = k % l.kTile;
  int64_t s = kk / 16, within = kk % 16;
  int64_t c = (within % 8) / 2;                // which thread column
  int64_t e = (within % 2) + 2 * (within / 8); // index into kFragCol
  int64_t t = 4 * r + c;
  int64_t j = 4 * s + e; // element index in the thread's run
  // Fragment register P = j / 2 (element j % 2 of it) is pair P % 4 of the
  // run's 32-bit word P / 4 (its bits: fragment::codeBit).
  int64_t bytesPerThread = l.kTile / 8;
  PayloadSlot slot;
  slot.wordByte = tile * (l.nTile * l.kTile / 2) + t * bytesPerThread + 4 * (j / 8);
  slot.pair = static_cast<int>((j / 2) % 4);
  slot.elem = static_cast<int>(j % 2);
  return slot;
}

namespace {
uint32_t loadWord(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void orWord(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] |= static_cast<uint8_t>(v >> (8 * i));
}
uint8_t codeOf(const uint8_t *packed, const PayloadSlot &s) {
  return static_cast<uint8_t>(fragment::codeAt(loadWord(packed + s.wordByte), s.pair, s.elem));
}
} // namespace

int64_t kernelScaleOffset(const KernelLayout &l, int64_t N, int64_t K, int64_t n,
                          int64_t block) {
  (void)N;
  int64_t tilesK = K / l.kTile, blocksPerTile = l.kTile / kBlock;
  int64_t tile = (n / l.nTile) * tilesK + (block * kBlock) / l.kTile;
  return tile * l.nTile * blocksPerTile + (n % l.nTile) * blocksPerTile + block % blocksPerTile;
}

void repackToKernel(const KernelLayout &l, int64_t count, int64_t N, int64_t K,
                    const uint8_t *packed, const uint8_t *scales, uint8_t *outPacked,
                    uint8_t *outScales) {
  const int64_t pb = N * K / 2, sb = N * K / kBlock;
  if (N % l.nTile || K % l.kTile || l.kTile % kBlock) {
    // Not whole tiles: element by element (kept for completeness; the layout
    // pass only picks tiles that divide the matrix).
    for (int64_t m = 0; m < count; ++m) {
      const uint8_t *p = packed + m * pb, *sc = scales + m * sb;
      uint8_t *op = outPacked + m * pb, *os = outScales + m * sb;
      std::fill(op, op + pb, 0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
          uint8_t b = p[n * (K / 2) + k / 2];
          uint8_t code = (k % 2 == 0) ? (b & 0xF) : (b >> 4);
          PayloadSlot slot = kernelPayloadSlot(l, N, K, n, k);
          orWord(op + slot.wordByte, fragment::placeCode(code, slot.pair, slot.elem));
        }
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = 0; b < K / kBlock; ++b)
          os[kernelScaleOffset(l, N, K, n, b)] = sc[n * (K / kBlock) + b];
    }
    return;
  }
  // Whole tiles: the permutation inside a tile is the same for every tile,
  // so it is tabulated once (the element's run word in the tile and its
  // pair and element), and row tiles of all matrices are repacked in
  // parallel (they write disjoint bytes). A tile's words are assembled in
  // registers and stored little-endian.
  const int64_t tileBytes = l.nTile * l.kTile / 2, tilesK = K / l.kTile;
  const int64_t tileWords = tileBytes / 4;
  std::vector<int32_t> wordOf(l.nTile * l.kTile);
  std::vector<uint8_t> pairOf(l.nTile * l.kTile);
  for (int64_t r = 0; r < l.nTile; ++r)
    for (int64_t kk = 0; kk < l.kTile; ++kk) {
      PayloadSlot slot = kernelPayloadSlot(l, l.nTile, l.kTile, r, kk);
      wordOf[r * l.kTile + kk] = static_cast<int32_t>(slot.wordByte / 4);
      pairOf[r * l.kTile + kk] = static_cast<uint8_t>(2 * slot.pair + slot.elem);
    }
  const int64_t rowTiles = N / l.nTile, items = count * rowTiles;
  const int64_t bpt = l.kTile / kBlock;
  parallelFor(
      static_cast<size_t>(items),
      [&](size_t it) {
        const int64_t m = static_cast<int64_t>(it) / rowTiles,
                      nt = static_cast<int64_t>(it) % rowTiles;
        const uint8_t *p = packed + m * pb, *sc = scales + m * sb;
        uint8_t *op = outPacked + m * pb, *os = outScales + m * sb;
        std::vector<uint32_t> words(tileWords);
        for (int64_t kt = 0; kt < tilesK; ++kt) {
          uint8_t *tile = op + (nt * tilesK + kt) * tileBytes;
          std::fill(words.begin(), words.end(), 0u);
          for (int64_t r = 0; r < l.nTile; ++r) {
            const uint8_t *src = p + (nt * l.nTile + r) * (K / 2) + kt * l.kTile / 2;
            const int32_t *wo = wordOf.data() + r * l.kTile;
            const uint8_t *po = pairOf.data() + r * l.kTile;
            for (int64_t kk = 0; kk < l.kTile; kk += 2) {
              uint8_t b = src[kk / 2];
              words[wo[kk]] |= fragment::placeCode(b & 0xF, po[kk] / 2, po[kk] % 2);
              words[wo[kk + 1]] |= fragment::placeCode(b >> 4, po[kk + 1] / 2, po[kk + 1] % 2);
            }
            for (int64_t kb = 0; kb < bpt; ++kb)
              os[(nt * tilesK + kt) * l.nTile * bpt + r * bpt + kb] =
                  sc[(nt * l.nTile + r) * (K / kBlock) + kt * bpt + kb];
          }
          for (int64_t w = 0; w < tileWords; ++w)
            for (int i = 0; i < 4; ++i)
              tile[4 * w + i] = static_cast<uint8_t>(words[w] >> (8 * i));
        }
      },
      /*minParallel=*/64);
}

void repackToCheckpoint(const KernelLayout &l, int64_t count, int64_t N, int64_t K,
                        const uint8_t *packed, const uint8_t *scales, uint8_t *outPacked,
                        uint8_t *outScales) {
  const int64_t pb = N * K / 2, sb = N * K / kBlock;
  for (int64_t m = 0; m < count; ++m) {
    const uint8_t *p = packed + m * pb, *sc = scales + m * sb;
    uint8_t *op = outPacked + m * pb, *os = outScales + m * sb;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; k += 2) {
        uint8_t codes[2];
        for (int64_t d = 0; d < 2; ++d)
          codes[d] = codeOf(p, kernelPayloadSlot(l, N, K, n, k + d));
        op[n * (K / 2) + k / 2] = static_cast<uint8_t>(codes[0] | (codes[1] << 4));
      }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < K / kBlock; ++b)
        os[n * (K / kBlock) + b] = sc[kernelScaleOffset(l, N, K, n, b)];
  }
}

void dequantizeKernel(const KernelLayout &l, int64_t N, int64_t K, const uint8_t *packed,
                      const uint8_t *scales, float *out) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      uint8_t code = codeOf(packed, kernelPayloadSlot(l, N, K, n, k));
      out[n * K + k] =
          decodeE2M1(code) * decodeE8M0(scales[kernelScaleOffset(l, N, K, n, k / kBlock)]);
    }
}

} // namespace k3c::mxfp4
