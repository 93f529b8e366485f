// Single-row access to a BF16 or F32 weight matrix, widened exactly: what absorbed MLA needs to
// apply kv_b per head (y += a·W[r,:] folds the key part into the query; W[r,:]·x expands the
// value part) without materialising per-head matrices. FP8 rows are widened by fp8_widen_row
// (device/weight.h) into a buffer first.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "device/weight.h"

namespace sluice::device {

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

}  // namespace sluice::device
