// Scalar reference products: the oracle for the SIMD versions. One fp32 accumulator per output,
// summed in column order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

void matmul_f32_scalar(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                       int64_t r1) {
  const float* W = static_cast<const float*>(w.data);
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = W + r * w.cols;
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * ldx;
      float acc = 0.0f;
      for (int64_t c = 0; c < w.cols; ++c) acc += row[c] * xi[c];
      y[i * ldy + r] = acc;
    }
  }
}

void matmul_bf16_scalar(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                        int64_t r1) {
  const uint16_t* W = static_cast<const uint16_t*>(w.data);
  for (int64_t r = r0; r < r1; ++r) {
    const uint16_t* row = W + r * w.cols;
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * ldx;
      float acc = 0.0f;
      for (int64_t c = 0; c < w.cols; ++c) acc += bf16_to_f32(row[c]) * xi[c];
      y[i * ldy + r] = acc;
    }
  }
}

// Each 32-column block: the E2M1 values are summed against x, then scaled by the block's 2^e.
// Multiplying by a power of two is exact, so this equals Σ W[r,c]·x[c] up to summation order.
void matmul_mxfp4_scalar(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                         int64_t r1) {
  const uint8_t* P = static_cast<const uint8_t*>(w.data);
  const int64_t blocks = w.cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* prow = P + r * (w.cols / 2);
    const uint8_t* srow = static_cast<const uint8_t*>(w.scales) + r * blocks;
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * ldx;
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        float part = 0.0f;
        for (int64_t j = 0; j < 16; ++j) {
          uint8_t byte = prow[b * 16 + j];
          part += kE2M1Values[byte & 15] * xi[b * 32 + 2 * j];
          part += kE2M1Values[byte >> 4] * xi[b * 32 + 2 * j + 1];
        }
        acc += part * e8m0_to_f32(srow[b]);
      }
      y[i * ldy + r] = acc;
    }
  }
}

// FP8 e4m3 with one F32 scale per 128x128 block: each row's 128-column blocks are summed against
// x exactly widened, then scaled by the block's scale (DeepSeek-V3's weight_scale_inv); edge blocks
// are partial. The scale is not a power of two, so this equals Σ (W·s)·x up to rounding order.
void matmul_fp8_scalar(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                       int64_t r1) {
  const uint8_t* W = static_cast<const uint8_t*>(w.data);
  const float* S = static_cast<const float*>(w.scales);
  const float* e4m3 = e4m3_table();
  const int64_t col_blocks = (w.cols + kFp8Block - 1) / kFp8Block;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = W + r * w.cols;
    const float* srow = S + (r / kFp8Block) * col_blocks;
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * ldx;
      float acc = 0.0f;
      for (int64_t b = 0; b < col_blocks; ++b) {
        const int64_t c1 = std::min(w.cols, (b + 1) * kFp8Block);
        float part = 0.0f;
        for (int64_t c = b * kFp8Block; c < c1; ++c) part += e4m3[row[c]] * xi[c];
        acc += part * srow[b];
      }
      y[i * ldy + r] = acc;
    }
  }
}

// INT4_G32 (compressed-tensors pack-quantized, device/weight.h): each 32-column group's 16 values
// bf16(q·s) are made once, each column's value times x is summed in column order within the group,
// and the group's sum is added to the row's: the dequantize-then-multiply product, summed group by
// group. Words and scales are read by copy (a mapped checkpoint promises no alignment).
void matmul_int4_scalar(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                        int64_t r1) {
  const auto* P = static_cast<const unsigned char*>(w.data);
  const auto* S = static_cast<const unsigned char*>(w.scales);
  const int64_t groups = w.cols / kInt4Group, words_per_row = w.cols / 8;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * ldx;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        uint16_t scale;
        std::memcpy(&scale, S + 2 * (r * groups + g), 2);
        float values[16];
        int4_group_values(scale, values);
        float part = 0.0f;
        for (int64_t k = 0; k < 4; ++k) {
          uint32_t word;
          std::memcpy(&word, P + 4 * (r * words_per_row + 4 * g + k), 4);
          for (int64_t j = 0; j < 8; ++j) part += values[(word >> (4 * j)) & 15] * xi[g * kInt4Group + 8 * k + j];
        }
        acc += part;
      }
      y[i * ldy + r] = acc;
    }
  }
}

}  // namespace

// The F16C FP8 products (matmul_fp8_avx2.cpp, matmul_fp8_avx512.cpp) decode weights as fp16s of
// their values times 2^-8 and carry the 2^8 on the activations: x·2^8 is exact unless |x| > 2^119.
const float* fp8_scaled_activations(const float* x, int64_t ldx, int64_t n, int64_t cols) {
  float* xs = product_scratch(size_t(n * cols));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; ++c) xs[i * cols + c] = x[i * ldx + c] * 0x1p8f;
  return xs;
}

float fp8_value_scaled(uint8_t code) { return e4m3_to_f32(code) * 0x1p-8f; }  // exact: ≤ 4 significant bits

void widen_fp8_scalar(const Weight& w, int64_t r, float* out) { fp8_widen_row(w, r, out); }

float* product_scratch(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

const Isa& scalar_isa() {
  static const Isa isa{"scalar", matmul_f32_scalar, matmul_bf16_scalar, matmul_mxfp4_scalar, matmul_fp8_scalar,
                       matmul_int4_scalar, gated_act_scalar, tile_scores_v4, tile_softmax_v4, context_rows_v4, delta_step_generic, unary_scalar,
                       widen_fp8_scalar};
  return isa;
}

}  // namespace sluice::device
