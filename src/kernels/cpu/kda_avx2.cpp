// KDA's delta step eight value columns at a time for AVX2 (kda_avx512.cpp has sixteen): each
// column's arithmetic is the generic loop's in its order (see there), each product rounded before
// its add (no contraction in this file). The decays e^{g_i} are mathf::exp's, eight at a time.
#include <algorithm>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_math.h"

namespace sluice::kernels {

void delta_step_avx2(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k,
                     const float* v, const float* g, float beta, float* kv_mem, float* o) {
  constexpr int64_t kMaxKeys = 512;
  if (dk > kMaxKeys || dv % 8 != 0) return delta_step_generic(S_in, S, dk, dv, q, k, v, g, beta, kv_mem, o);
  alignas(32) float a[kMaxKeys + 8];
  for (int64_t i = 0; i < dk; i += 8) {
    alignas(32) float gi[8] = {};
    std::copy(g + i, g + std::min(dk, i + 8), gi);
    _mm256_store_ps(a + i, simd::exp<avx2::Avx2Lanes>(_mm256_load_ps(gi)));
  }
  const __m256 b = _mm256_set1_ps(beta);
  for (int64_t j = 0; j < dv; j += 8) {
    __m256 kv = _mm256_setzero_ps();
    for (int64_t i = 0; i < dk; ++i) {
      const __m256 row = _mm256_mul_ps(_mm256_loadu_ps(S_in + i * dv + j), _mm256_set1_ps(a[i]));
      _mm256_storeu_ps(S + i * dv + j, row);
      kv = _mm256_add_ps(kv, _mm256_mul_ps(row, _mm256_set1_ps(k[i])));
    }
    kv = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + j), kv), b);
    _mm256_storeu_ps(kv_mem + j, kv);
    __m256 out = _mm256_setzero_ps();
    for (int64_t i = 0; i < dk; ++i) {
      float* row = S + i * dv + j;
      const __m256 updated = _mm256_add_ps(_mm256_loadu_ps(row), _mm256_mul_ps(_mm256_set1_ps(k[i]), kv));
      _mm256_storeu_ps(row, updated);
      if (q) out = _mm256_add_ps(out, _mm256_mul_ps(updated, _mm256_set1_ps(q[i])));
    }
    if (q) _mm256_storeu_ps(o + j, out);
  }
}

}  // namespace sluice::kernels
