// device::softmax's order on the device (one thread: max, exp and sum in order, one reciprocal),
// shared by the reference kernels (ops_ref.cu) and the fast row ops (rows_fast.cu). mathf.h's exp
// and division, so both give cpu:scalar's bits for the same inputs.
#pragma once
#include <cstdint>

#include "device/mathf.h"

namespace sluice::device::cuda {

__device__ __forceinline__ void softmax_seq(float* x, int64_t n) {
  namespace mf = sluice::mathf;
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = mf::exp(x[i] - m);
    s += x[i];
  }
  const float inv = mf::div(1.0f, s);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace sluice::device::cuda
