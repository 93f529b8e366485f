// Single-row access to a BF16, F32 or FP8 weight matrix, widened exactly: what absorbed MLA needs to
// apply kv_b per head (y += a·W[r,:] folds the key part into the query; W[r,:]·x expands the
// value part) without materialising per-head matrices. An FP8 element's value is its e4m3 value
// times its 128x128 block's scale, one fp32 product (DeepSeek's dequantization): the F32 matrix a
// loader would widen it to, element for element, without holding 4x the bytes.
#pragma once
#include <array>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/weight.h"

namespace sluice::kernels {

// The 256 e4m3 values (exact; NaN for 0x7f and 0xff).
inline const float* e4m3_table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[size_t(b)] = e4m3_to_f32(uint8_t(b));
    return t;
  }();
  return table.data();
}

// out[i] = W[r, i] widened, for an FP8 weight. A weight checked free of NaN codes (fp8_finite)
// decodes by integer arithmetic, which vectorises: the sign-extended byte shifted left by 20 and
// masked is an fp32 of value e4m3 × 2^-120 (exact, subnormal codes included), and × (scale × 2^120)
// rounds the same exact product e4m3 × scale once, as lut × scale does (the 2^120 moves no value
// out of range while scale × 2^120 is finite; otherwise the table is used).
inline void fp8_widen_row(const Weight& w, int64_t r, float* out) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.cols;
  const float* s = static_cast<const float*>(w.scales) + (r / kFp8Block) * ((w.cols + kFp8Block - 1) / kFp8Block);
  for (int64_t c0 = 0; c0 < w.cols; c0 += kFp8Block) {
    const float scale = s[c0 / kFp8Block], lifted = scale * 0x1p120f;
    const int64_t c1 = c0 + kFp8Block < w.cols ? c0 + kFp8Block : w.cols;
    if (w.fp8_finite && __builtin_isfinite(lifted)) {
      for (int64_t i = c0; i < c1; ++i) {
        const uint32_t bits = (uint32_t(int32_t(int8_t(row[i]))) << 20) & 0x87f00000u;
        float raw;
        __builtin_memcpy(&raw, &bits, 4);
        out[i] = raw * lifted;
      }
    } else {
      const float* lut = e4m3_table();
      for (int64_t i = c0; i < c1; ++i) out[i] = lut[row[i]] * scale;
    }
  }
}

// y += a · W[r, :] (BF16 or F32)
inline void weight_axpy_row(float a, const Weight& w, int64_t r, float* y) {
  if (w.type == WeightType::BF16) {
    const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * w.cols;
    for (int64_t i = 0; i < w.cols; ++i) y[i] += a * bf16_to_f32(row[i]);
  } else {
    const float* row = static_cast<const float*>(w.data) + r * w.cols;
    for (int64_t i = 0; i < w.cols; ++i) y[i] += a * row[i];
  }
}

// W[r, :] · x, accumulated left to right (BF16 or F32).
inline float weight_dot_row(const Weight& w, int64_t r, const float* x) {
  float acc = 0.0f;
  if (w.type == WeightType::BF16) {
    const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * w.cols;
    for (int64_t i = 0; i < w.cols; ++i) acc += bf16_to_f32(row[i]) * x[i];
  } else {
    const float* row = static_cast<const float*>(w.data) + r * w.cols;
    for (int64_t i = 0; i < w.cols; ++i) acc += row[i] * x[i];
  }
  return acc;
}

}  // namespace sluice::kernels
