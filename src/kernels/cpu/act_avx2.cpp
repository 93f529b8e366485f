// The gated activations on 8 lanes for AVX2 (mathf_avx2.h): each element gets the bits of the
// scalar loop (gated_act_scalar in ops.cpp), as the AVX-512 form (act_avx512.cpp) does on 16.
#include <algorithm>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/mathf_avx2.h"
#include "kernels/device.h"

namespace sluice::kernels {

namespace {

template <class F>
void each8(float* g, const float* u, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(g + i, f(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  if (i < n) {
    float gt[8] = {}, ut[8] = {};
    std::copy(g + i, g + n, gt);
    std::copy(u + i, u + n, ut);
    _mm256_storeu_ps(gt, f(_mm256_loadu_ps(gt), _mm256_loadu_ps(ut)));
    std::copy(gt, gt + (n - i), g + i);
  }
}

}  // namespace

void gated_act_avx2(const Activation& a, float* g, const float* u, int64_t n) {
  using namespace avx2;
  switch (a.kind) {
    case ActKind::SiTU: {
      const __m256 bg = set1(a.beta_gate), bu = set1(a.beta_up);
      each8(g, u, n, [&](__m256 gv, __m256 uv) { return situ(gv, uv, bg, bu); });
      break;
    }
    case ActKind::SiLU:
      each8(g, u, n, [](__m256 gv, __m256 uv) { return _mm256_mul_ps(silu(gv), uv); });
      break;
    case ActKind::ClampedSwiGLU: {
      // std::min(g, limit) and std::clamp(u, -limit, limit) as the scalar loop has them.
      const __m256 hi = set1(a.limit), lo = set1(-a.limit), alpha = set1(a.alpha);
      each8(g, u, n, [&](__m256 gv, __m256 uv) {
        const __m256 gc = select(gv, lt(hi, gv), hi);
        __m256 uc = select(uv, lt(hi, uv), hi);
        uc = select(uc, lt(uv, lo), lo);
        return _mm256_mul_ps(_mm256_add_ps(uc, set1(1.0f)), _mm256_mul_ps(gc, sigmoid(_mm256_mul_ps(gc, alpha))));
      });
      break;
    }
  }
}

}  // namespace sluice::kernels
