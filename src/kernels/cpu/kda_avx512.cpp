// KDA's delta step sixteen value columns at a time. Each column's arithmetic is the generic loop's
// (cpu_kda.cpp: delta_step_generic) in its order: the decayed S[i][j] = S_in[i][j]·e^{g_i}, then
// Σ_i S[i][j]·k_i from 0 in order of i, δ_j = (v_j − that)·β, S[i][j] += k_i·δ_j, and o_j = Σ_i
// S[i][j]·q_i from 0; the phases of one column are fused (a column never reads another), each
// product is rounded before its add (no contraction in this file). The decays e^{g_i} are
// mathf::exp's, sixteen at a time.
#include <algorithm>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_math.h"

namespace sluice::kernels {

void delta_step_avx512(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k,
                       const float* v, const float* g, float beta, float* kv_mem, float* o) {
  constexpr int64_t kMaxKeys = 512;
  if (dk > kMaxKeys) return delta_step_generic(S_in, S, dk, dv, q, k, v, g, beta, kv_mem, o);
  alignas(64) float a[kMaxKeys];
  for (int64_t i = 0; i < dk; i += 16) {
    const __mmask16 m = avx512::tail_mask(std::min<int64_t>(16, dk - i));
    _mm512_mask_storeu_ps(a + i, m, simd::exp<avx512::Avx512Lanes>(_mm512_maskz_loadu_ps(m, g + i)));
  }
  const __m512 b = _mm512_set1_ps(beta);
  for (int64_t j = 0; j < dv; j += 16) {
    const __mmask16 m = avx512::tail_mask(std::min<int64_t>(16, dv - j));
    __m512 kv = _mm512_setzero_ps();
    for (int64_t i = 0; i < dk; ++i) {
      const __m512 row = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, S_in + i * dv + j), _mm512_set1_ps(a[i]));
      _mm512_mask_storeu_ps(S + i * dv + j, m, row);
      kv = _mm512_add_ps(kv, _mm512_mul_ps(row, _mm512_set1_ps(k[i])));
    }
    kv = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + j), kv), b);
    _mm512_mask_storeu_ps(kv_mem + j, m, kv);
    __m512 out = _mm512_setzero_ps();
    for (int64_t i = 0; i < dk; ++i) {
      float* row = S + i * dv + j;
      const __m512 updated = _mm512_add_ps(_mm512_maskz_loadu_ps(m, row), _mm512_mul_ps(_mm512_set1_ps(k[i]), kv));
      _mm512_mask_storeu_ps(row, m, updated);
      if (q) out = _mm512_add_ps(out, _mm512_mul_ps(updated, _mm512_set1_ps(q[i])));
    }
    if (q) _mm512_mask_storeu_ps(o + j, m, out);
  }
}

}  // namespace sluice::kernels
