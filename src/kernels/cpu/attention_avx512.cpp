// The attention's context sums on 16 lanes (cpu_attention.cpp's context_rows, widened): every
// output column j still sums s[p]·lat[p, j] over p in order, each product rounded before its add
// (no contraction in this file), so the bits are the 4-lane version's and the scalar loop's.
#include <algorithm>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/simd_avx512.h"

namespace sluice::kernels {

void context_rows_avx512(float* ctx, const float* s, int64_t stride, const float* lat, int64_t kvr, int64_t p0,
                         int64_t p1) {
  int64_t j = 0;
  for (; j + 64 <= kvr; j += 64) {
    __m512 c[4];
    for (int k = 0; k < 4; ++k) c[k] = _mm512_loadu_ps(ctx + j + 16 * k);
    for (int64_t p = p0; p < p1; ++p) {
      const __m512 w = _mm512_set1_ps(s[p * stride]);
      const float* l = lat + p * kvr + j;
      for (int k = 0; k < 4; ++k) c[k] = _mm512_add_ps(c[k], _mm512_mul_ps(w, _mm512_loadu_ps(l + 16 * k)));
    }
    for (int k = 0; k < 4; ++k) _mm512_storeu_ps(ctx + j + 16 * k, c[k]);
  }
  for (; j < kvr; j += 16) {
    const __mmask16 m = avx512::tail_mask(std::min<int64_t>(16, kvr - j));
    __m512 c = _mm512_maskz_loadu_ps(m, ctx + j);
    for (int64_t p = p0; p < p1; ++p)
      c = _mm512_add_ps(c, _mm512_mul_ps(_mm512_set1_ps(s[p * stride]), _mm512_maskz_loadu_ps(m, lat + p * kvr + j)));
    _mm512_mask_storeu_ps(ctx + j, m, c);
  }
}

}  // namespace sluice::kernels
