// The gated activations on 16 lanes (mathf_avx512.h): each element gets the bits of the scalar
// loop (gated_act_scalar in ops.cpp), so the ISA choice and the split over threads change nothing.
// SiTU is three exps and five divisions per element: one lane at a time it was a sixth of a long
// prefill of the default model.
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/mathf_avx512.h"
#include "kernels/device.h"

namespace sluice::kernels {

namespace {

template <class F>
void each16(float* g, const float* u, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(g + i, f(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i)));
  if (i < n) {
    const __mmask16 m = avx512::tail_mask(n - i);
    _mm512_mask_storeu_ps(g + i, m, f(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, u + i)));
  }
}

}  // namespace

void gated_act_avx512(const Activation& a, float* g, const float* u, int64_t n) {
  using namespace avx512;
  switch (a.kind) {
    case ActKind::SiTU: {
      const __m512 bg = set1(a.beta_gate), bu = set1(a.beta_up);
      each16(g, u, n, [&](__m512 gv, __m512 uv) { return situ(gv, uv, bg, bu); });
      break;
    }
    case ActKind::SiLU:
      each16(g, u, n, [](__m512 gv, __m512 uv) { return _mm512_mul_ps(silu(gv), uv); });
      break;
    case ActKind::ClampedSwiGLU: {
      // std::min(g, limit) and std::clamp(u, -limit, limit) as the scalar loop has them (a NaN g
      // stays NaN, a NaN u stays NaN), then (uc + 1)·(gc·σ(gc·α)).
      const __m512 hi = set1(a.limit), lo = set1(-a.limit), alpha = set1(a.alpha);
      each16(g, u, n, [&](__m512 gv, __m512 uv) {
        const __m512 gc = _mm512_mask_mov_ps(gv, lt(hi, gv), hi);
        __m512 uc = _mm512_mask_mov_ps(uv, lt(hi, uv), hi);
        uc = _mm512_mask_mov_ps(uc, lt(uv, lo), lo);
        return _mm512_mul_ps(_mm512_add_ps(uc, set1(1.0f)), _mm512_mul_ps(gc, sigmoid(_mm512_mul_ps(gc, alpha))));
      });
      break;
    }
  }
}

}  // namespace sluice::kernels
