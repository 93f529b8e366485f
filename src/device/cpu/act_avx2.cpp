// The gated activations on 8 lanes for AVX2 (simd_math.h), as act_avx512.cpp has them on 16: each
// element gets the bits of the scalar loop (gated_act_scalar in ops.cpp).
#include "device/cpu/kernels.h"
#include "device/cpu/simd_avx2.h"
#include "device/cpu/simd_math.h"

namespace sluice::device {

void gated_act_avx2(const Activation& a, float* g, const float* u, int64_t n) {
  simd::gated_act<avx2::Avx2Lanes>(a, g, u, n);
}

void unary_avx2(Unary f, const float* x, float* y, int64_t n) { simd::unary<avx2::Avx2Lanes>(f, x, y, n); }

}  // namespace sluice::device
