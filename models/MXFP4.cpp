//===- MXFP4.cpp - OCP MX v1.0 MXFP4 quantization and K3 packing ----------===//

#include "models/MXFP4.h"
#include "support/Common.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace k3c::mxfp4 {

namespace {
constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
} // namespace

float decodeE2M1(uint8_t code) {
  float v = kE2M1[code & 7];
  return (code & 8) ? -v : v;
}

float decodeE8M0(uint8_t byte) {
  if (byte == 0xFF)
    return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(byte) - 127);
}

uint8_t encodeE2M1(float v) {
  if (std::isnan(v))
    return 0;
  uint8_t sign = std::signbit(v) ? 8 : 0;
  float a = std::fabs(v);
  if (a >= 6.0f)
    return sign | 7;
  // Find the grid interval [kE2M1[i], kE2M1[i+1]] holding a.
  uint8_t i = 0;
  while (i < 7 && kE2M1[i + 1] <= a)
    ++i;
  if (kE2M1[i] == a)
    return sign | i;
  float lo = kE2M1[i], hi = kE2M1[i + 1];
  float dlo = a - lo, dhi = hi - a;
  uint8_t code;
  if (dlo < dhi)
    code = i;
  else if (dhi < dlo)
    code = i + 1;
  else
    code = (i % 2 == 0) ? i : i + 1; // tie: even code (even mantissa)
  return sign | code;
}

void quantizeBlock(const float *in, uint8_t *codes, uint8_t &scale) {
  float amax = 0.0f;
  bool nan = false;
  for (int64_t i = 0; i < kBlock; ++i) {
    if (std::isnan(in[i]))
      nan = true;
    else
      amax = std::fmax(amax, std::fabs(in[i]));
  }
  if (nan) {
    scale = 0xFF;
    for (int64_t i = 0; i < kBlock; ++i)
      codes[i] = 0;
    return;
  }
  if (amax == 0.0f) {
    scale = 0x00;
    for (int64_t i = 0; i < kBlock; ++i)
      codes[i] = 0;
    return;
  }
  int e = std::isinf(amax) ? 127 + 2 : std::ilogb(amax); // floor(log2(amax))
  int se = e - 2;                                        // E2M1 emax = 2
  if (se < -127)
    se = -127;
  if (se > 127)
    se = 127;
  scale = static_cast<uint8_t>(se + 127);
  float s = std::ldexp(1.0f, se);
  for (int64_t i = 0; i < kBlock; ++i)
    codes[i] = encodeE2M1(static_cast<float>(static_cast<double>(in[i]) / s));
}

void packCodes(const uint8_t *codes, int64_t rows, int64_t cols, uint8_t *packed) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 2)
      packed[r * (cols / 2) + c / 2] = static_cast<uint8_t>(
          (codes[r * cols + c] & 0xF) | ((codes[r * cols + c + 1] & 0xF) << 4));
}

void unpackCodes(const uint8_t *packed, int64_t rows, int64_t cols, uint8_t *codes) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      uint8_t b = packed[r * (cols / 2) + c / 2];
      codes[r * cols + c] = (c % 2 == 0) ? (b & 0xF) : (b >> 4);
    }
}

void quantize(const float *w, int64_t rows, int64_t cols, std::vector<uint8_t> &packed,
              std::vector<uint8_t> &scales) {
  std::vector<uint8_t> codes(rows * cols);
  scales.assign(rows * (cols / kBlock), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / kBlock; ++b)
      quantizeBlock(w + r * cols + b * kBlock, codes.data() + r * cols + b * kBlock,
                    scales[r * (cols / kBlock) + b]);
  packed.assign(rows * cols / 2, 0);
  packCodes(codes.data(), rows, cols, packed.data());
}

void dequantize(const uint8_t *packed, const uint8_t *scales, int64_t rows, int64_t cols,
                float *out) {
  // Rows in blocks over the cores (an expert stack is GBs in f32).
  const int64_t perBlock = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(cols, 1));
  parallelFor(static_cast<size_t>((rows + perBlock - 1) / perBlock), [&](size_t blk) {
    const int64_t r0 = static_cast<int64_t>(blk) * perBlock, r1 = std::min(rows, r0 + perBlock);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        uint8_t b = packed[r * (cols / 2) + c / 2];
        uint8_t code = (c % 2 == 0) ? (b & 0xF) : (b >> 4);
        out[r * cols + c] =
            decodeE2M1(code) * decodeE8M0(scales[r * (cols / kBlock) + c / kBlock]);
      }
  });
}

} // namespace k3c::mxfp4
