//===- MXFP4.h - OCP MX v1.0 MXFP4 quantization and K3 packing ---*- C++ -*-===//
//
// E2M1 element codes (bit 3 = sign), E8M0 block scales (bias 127, 0xFF =
// NaN), 32 elements per block along the reduction axis. K3's checkpoint
// layout (spec §4.9): `weight_packed` U8 [N, K/2] with the even column in the
// low nibble, `weight_scale` U8 [N, K/32].
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_MXFP4_H
#define K3C_MODELS_MXFP4_H

#include <cstdint>
#include <vector>

namespace k3c::mxfp4 {

constexpr int64_t kBlock = 32;

/// Value of a 4-bit E2M1 code.
float decodeE2M1(uint8_t code);
/// 2^(byte - 127); NaN for 0xFF.
float decodeE8M0(uint8_t byte);
/// Nearest E2M1 code to `v` (round to nearest, ties to even code), saturating
/// at +-6. NaN maps to +0 (the block scale carries NaN, see quantizeBlock).
uint8_t encodeE2M1(float v);

/// Quantizes one block of 32 values: scale = 2^(floor(log2(amax)) - 2), the
/// OCP MX rule for E2M1 (emax = 2), clamped to the E8M0 range; codes are the
/// values divided by the scale, rounded to nearest even and saturated. An
/// all-zero block gets scale byte 0x00; a block holding NaN gets 0xFF.
void quantizeBlock(const float *in, uint8_t *codes, uint8_t &scale);

/// Quantizes a row-major [rows, cols] matrix (cols % 32 == 0) into K3's
/// checkpoint layout.
void quantize(const float *w, int64_t rows, int64_t cols, std::vector<uint8_t> &packed,
              std::vector<uint8_t> &scales);

/// Dequantizes K3's checkpoint layout into a row-major fp32 [rows, cols].
void dequantize(const uint8_t *packed, const uint8_t *scales, int64_t rows, int64_t cols,
                float *out);

/// Unpacks/packs nibbles: codes[r*cols + c] <-> packed[r*cols/2 + c/2].
void unpackCodes(const uint8_t *packed, int64_t rows, int64_t cols, uint8_t *codes);
void packCodes(const uint8_t *codes, int64_t rows, int64_t cols, uint8_t *packed);

} // namespace k3c::mxfp4

#endif // K3C_MODELS_MXFP4_H
