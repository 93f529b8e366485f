// The gated activations on 16 lanes (simd_math.h): each element gets the bits of the scalar loop
// (gated_act_scalar in ops.cpp), so the ISA choice and the split over threads change nothing.
// SiTU is three exps and five divisions per element: one lane at a time it was a sixth of a long
// prefill of the default model.
#include "device/cpu/kernels.h"
#include "device/cpu/simd_avx512.h"
#include "device/cpu/simd_math.h"

namespace sluice::device {

void gated_act_avx512(const Activation& a, float* g, const float* u, int64_t n) {
  simd::gated_act<avx512::Avx512Lanes>(a, g, u, n);
}

void unary_avx512(Unary f, const float* x, float* y, int64_t n) { simd::unary<avx512::Avx512Lanes>(f, x, y, n); }

}  // namespace sluice::device
