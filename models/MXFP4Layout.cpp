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

void kernelPayloadPosition(const KernelLayout &l, int64_t N, int64_t K, int64_t n, int64_t k,
                           int64_t &byte, bool &high) {
  (void)N;
  int64_t tilesK = K / l.kTile;
  int64_t tile = (n / l.nTile) * tilesK + k / l.kTile;
  int64_t r = n % l.nTile, kk = k % l.kTile;
  int64_t s = kk / 16, within = kk % 16;
  int64_t c = (within % 8) / 2;          // which thread column
  int64_t e = (within % 2) + 2 * (within / 8); // index into kFragCol
  int64_t t = 4 * r + c;
  int64_t j = 4 * s + e;                  // nibble index in the thread's run
  // Fragment register P = j / 2 (element j % 2 of it) is pair p = P % 4 of
  // the run's 32-bit word P / 4: its low element at nibble p, its high
  // element at nibble p + 4 (bits 4p and 16 + 4p of the little-endian word).
  int64_t word = j / 8, p = (j / 2) % 4, nib = p + 4 * (j % 2);
  int64_t bytesPerThread = l.kTile / 8;
  byte = tile * (l.nTile * l.kTile / 2) + t * bytesPerThread + 4 * word + nib / 2;
  high = (nib % 2) != 0;
}

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
          int64_t byte;
          bool high;
          kernelPayloadPosition(l, N, K, n, k, byte, high);
          op[byte] |= high ? static_cast<uint8_t>(code << 4) : code;
        }
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = 0; b < K / kBlock; ++b)
          os[kernelScaleOffset(l, N, K, n, b)] = sc[n * (K / kBlock) + b];
    }
    return;
  }
  // Whole tiles: the permutation inside a tile is the same for every tile,
  // so it is tabulated once (nibble index 2 * byte + high), and row tiles of
  // all matrices are repacked in parallel (they write disjoint bytes).
  const int64_t tileBytes = l.nTile * l.kTile / 2, tilesK = K / l.kTile;
  std::vector<int32_t> nib(l.nTile * l.kTile);
  for (int64_t r = 0; r < l.nTile; ++r)
    for (int64_t kk = 0; kk < l.kTile; ++kk) {
      int64_t byte;
      bool high;
      kernelPayloadPosition(l, l.nTile, l.kTile, r, kk, byte, high);
      nib[r * l.kTile + kk] = static_cast<int32_t>(2 * byte + (high ? 1 : 0));
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
        for (int64_t kt = 0; kt < tilesK; ++kt) {
          uint8_t *tile = op + (nt * tilesK + kt) * tileBytes;
          std::fill(tile, tile + tileBytes, 0);
          for (int64_t r = 0; r < l.nTile; ++r) {
            const uint8_t *src = p + (nt * l.nTile + r) * (K / 2) + kt * l.kTile / 2;
            const int32_t *pos = nib.data() + r * l.kTile;
            for (int64_t kk = 0; kk < l.kTile; kk += 2) {
              uint8_t b = src[kk / 2];
              int32_t lo = pos[kk], hi = pos[kk + 1];
              tile[lo >> 1] |= (lo & 1) ? static_cast<uint8_t>((b & 0xF) << 4) : (b & 0xF);
              tile[hi >> 1] |= (hi & 1) ? static_cast<uint8_t>(b & 0xF0) : (b >> 4);
            }
            for (int64_t kb = 0; kb < bpt; ++kb)
              os[(nt * tilesK + kt) * l.nTile * bpt + r * bpt + kb] =
                  sc[(nt * l.nTile + r) * (K / kBlock) + kt * bpt + kb];
          }
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
        for (int64_t d = 0; d < 2; ++d) {
          int64_t byte;
          bool high;
          kernelPayloadPosition(l, N, K, n, k + d, byte, high);
          codes[d] = high ? (p[byte] >> 4) : (p[byte] & 0xF);
        }
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
      int64_t byte;
      bool high;
      kernelPayloadPosition(l, N, K, n, k, byte, high);
      uint8_t code = high ? (packed[byte] >> 4) : (packed[byte] & 0xF);
      out[n * K + k] =
          decodeE2M1(code) * decodeE8M0(scales[kernelScaleOffset(l, N, K, n, k / kBlock)]);
    }
}

} // namespace k3c::mxfp4
