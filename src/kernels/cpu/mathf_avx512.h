// mathf.h's portable transcendentals on 16 lanes: each lane goes through exactly the IEEE
// operations of the scalar function, in its order (every branch computed and the lane's own taken
// by a mask), so every lane's result has the scalar result's bits. Include only from *_avx512.cpp
// files, which are compiled for AVX-512 with no contraction of products and sums (CMakeLists.txt).
#pragma once
#include "kernels/cpu/simd_avx512.h"

namespace sluice::kernels::avx512 {

inline __m512 set1(float f) { return _mm512_set1_ps(f); }
inline __m512 neg(__m512 x) { return _mm512_xor_ps(x, set1(-0.0f)); }  // the scalar -x: the sign flipped
inline __mmask16 lt(__m512 a, __m512 b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
inline __mmask16 gt(__m512 a, __m512 b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
inline __mmask16 is_nan(__m512 x) { return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); }
// 2^k of each lane's k in [-126, 127], exactly (mathf::pow2).
inline __m512 pow2(__m512i k) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23));
}

// mathf::exp.
inline __m512 exp(__m512 x) {
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, set1(1.44269502f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(k, set1(0.693145752f))),
                                 _mm512_mul_ps(k, set1(1.42860677e-06f)));
  __m512 p = set1(2.48015873e-05f);
  p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(1.98412698e-04f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(1.38888889e-03f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(8.33333333e-03f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(4.16666667e-02f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(1.66666667e-01f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(0.5f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(1.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(1.0f));
  // k is an integer in [-150, 128] on every lane that keeps this result (others are replaced below).
  const __m512i ki = _mm512_cvtps_epi32(k);
  const __mmask16 high = _mm512_cmpgt_epi32_mask(ki, _mm512_set1_epi32(127));
  const __mmask16 low = _mm512_cmplt_epi32_mask(ki, _mm512_set1_epi32(-126));
  __m512i k1 = _mm512_mask_mov_epi32(ki, high, _mm512_set1_epi32(127));
  k1 = _mm512_mask_add_epi32(k1, low, ki, _mm512_set1_epi32(100));
  __m512i k2 = _mm512_set1_epi32(0);
  k2 = _mm512_mask_sub_epi32(k2, high, ki, _mm512_set1_epi32(127));
  k2 = _mm512_mask_mov_epi32(k2, low, _mm512_set1_epi32(-100));
  __m512 y = _mm512_mul_ps(p, pow2(k1));                        // in range: p·2^k, one rounding
  y = _mm512_mask_mul_ps(y, high | low, y, pow2(k2));           // beyond: the second exact scaling
  y = _mm512_mask_mov_ps(y, lt(x, set1(-103.972084f)), _mm512_setzero_ps());
  y = _mm512_mask_mov_ps(y, gt(x, set1(88.7228394f)), set1(__builtin_inff()));
  return _mm512_mask_mov_ps(y, is_nan(x), x);
}

// mathf::tanh.
inline __m512 tanh(__m512 x) {
  const __mmask16 negative = lt(x, _mm512_setzero_ps());
  const __m512 ax = _mm512_mask_mov_ps(x, negative, neg(x));
  const __m512 x2 = _mm512_mul_ps(ax, ax);
  __m512 p = set1(0.0218694885f);
  p = _mm512_add_ps(_mm512_mul_ps(p, x2), set1(-0.0539682540f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x2), set1(0.133333333f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x2), set1(-0.333333333f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x2), set1(1.0f));
  const __m512 series = _mm512_mul_ps(ax, p);
  const __m512 e = exp(_mm512_mul_ps(set1(2.0f), ax));
  __m512 t = _mm512_sub_ps(set1(1.0f), _mm512_div_ps(set1(2.0f), _mm512_add_ps(e, set1(1.0f))));
  t = _mm512_mask_mov_ps(t, gt(ax, set1(9.0f)), set1(1.0f));
  t = _mm512_mask_mov_ps(t, lt(ax, set1(0.25f)), series);
  t = _mm512_mask_mov_ps(t, negative, neg(t));
  return _mm512_mask_mov_ps(t, is_nan(x), x);
}

// mathf::sigmoid, silu, situ.
inline __m512 sigmoid(__m512 x) { return _mm512_div_ps(set1(1.0f), _mm512_add_ps(set1(1.0f), exp(neg(x)))); }
inline __m512 silu(__m512 x) { return _mm512_mul_ps(x, sigmoid(x)); }
inline __m512 situ(__m512 g, __m512 u, __m512 beta_g, __m512 beta_u) {
  const __m512 tg = _mm512_mul_ps(beta_g, tanh(_mm512_div_ps(g, beta_g)));
  const __m512 tu = _mm512_mul_ps(beta_u, tanh(_mm512_div_ps(u, beta_u)));
  return _mm512_mul_ps(_mm512_mul_ps(tg, sigmoid(g)), tu);
}

}  // namespace sluice::kernels::avx512
