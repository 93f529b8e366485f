// mathf.h's exp, tanh and sigmoid on 8 lanes for AVX2, as mathf_avx512.h does on 16: each lane
// goes through exactly the scalar function's IEEE operations in its order (every branch computed,
// each lane's own selected by a blend), so every lane has the scalar result's bits. Include only
// from *_avx2.cpp files, which are compiled for AVX2 with no contraction (CMakeLists.txt).
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace sluice::kernels::avx2 {

inline __m256 set1(float f) { return _mm256_set1_ps(f); }
inline __m256 neg(__m256 x) { return _mm256_xor_ps(x, set1(-0.0f)); }  // the scalar -x
inline __m256 lt(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
inline __m256 gt(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
inline __m256 is_nan(__m256 x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }
// Where m is set, b; elsewhere a.
inline __m256 select(__m256 a, __m256 m, __m256 b) { return _mm256_blendv_ps(a, b, m); }
inline __m256i select(__m256i a, __m256i m, __m256i b) {
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), _mm256_castsi256_ps(m)));
}
// 2^k of each lane's k in [-126, 127], exactly.
inline __m256 pow2(__m256i k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

// mathf::exp.
inline __m256 exp(__m256 x) {
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, set1(1.44269502f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(k, set1(0.693145752f))),
                                 _mm256_mul_ps(k, set1(1.42860677e-06f)));
  __m256 p = set1(2.48015873e-05f);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(1.98412698e-04f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(1.38888889e-03f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(8.33333333e-03f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(4.16666667e-02f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(1.66666667e-01f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(0.5f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(1.0f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(1.0f));
  // k is an integer in [-150, 128] on every lane that keeps this result (others are replaced below).
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i high = _mm256_cmpgt_epi32(ki, _mm256_set1_epi32(127));
  const __m256i low = _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), ki);
  __m256i k1 = select(ki, high, _mm256_set1_epi32(127));
  k1 = select(k1, low, _mm256_add_epi32(ki, _mm256_set1_epi32(100)));
  __m256i k2 = select(_mm256_setzero_si256(), high, _mm256_sub_epi32(ki, _mm256_set1_epi32(127)));
  k2 = select(k2, low, _mm256_set1_epi32(-100));
  __m256 y = _mm256_mul_ps(p, pow2(k1));  // in range: p·2^k, one rounding
  y = select(y, _mm256_castsi256_ps(_mm256_or_si256(high, low)), _mm256_mul_ps(y, pow2(k2)));
  y = select(y, lt(x, set1(-103.972084f)), _mm256_setzero_ps());
  y = select(y, gt(x, set1(88.7228394f)), set1(__builtin_inff()));
  return select(y, is_nan(x), x);
}

// mathf::tanh.
inline __m256 tanh(__m256 x) {
  const __m256 negative = lt(x, _mm256_setzero_ps());
  const __m256 ax = select(x, negative, neg(x));
  const __m256 x2 = _mm256_mul_ps(ax, ax);
  __m256 p = set1(0.0218694885f);
  p = _mm256_add_ps(_mm256_mul_ps(p, x2), set1(-0.0539682540f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x2), set1(0.133333333f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x2), set1(-0.333333333f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x2), set1(1.0f));
  const __m256 series = _mm256_mul_ps(ax, p);
  const __m256 e = exp(_mm256_mul_ps(set1(2.0f), ax));
  __m256 t = _mm256_sub_ps(set1(1.0f), _mm256_div_ps(set1(2.0f), _mm256_add_ps(e, set1(1.0f))));
  t = select(t, gt(ax, set1(9.0f)), set1(1.0f));
  t = select(t, lt(ax, set1(0.25f)), series);
  t = select(t, negative, neg(t));
  return select(t, is_nan(x), x);
}

// mathf::sigmoid, silu, situ.
inline __m256 sigmoid(__m256 x) { return _mm256_div_ps(set1(1.0f), _mm256_add_ps(set1(1.0f), exp(neg(x)))); }
inline __m256 silu(__m256 x) { return _mm256_mul_ps(x, sigmoid(x)); }
inline __m256 situ(__m256 g, __m256 u, __m256 beta_g, __m256 beta_u) {
  const __m256 tg = _mm256_mul_ps(beta_g, tanh(_mm256_div_ps(g, beta_g)));
  const __m256 tu = _mm256_mul_ps(beta_u, tanh(_mm256_div_ps(u, beta_u)));
  return _mm256_mul_ps(_mm256_mul_ps(tg, sigmoid(g)), tu);
}

}  // namespace sluice::kernels::avx2
