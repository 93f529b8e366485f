// What the AVX2 files share: the lane traits of simd_math.h for 8 lanes. Include only from
// *_avx2.cpp files, which are compiled for AVX2.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace sluice::device::avx2 {
namespace {

// Masks are vectors of all-ones or all-zeros lanes, as AVX2's compares give them (internal
// linkage: see simd_math.h).
struct Avx2Lanes {
  using V = __m256;
  using I = __m256i;
  using M = __m256;
  static constexpr int64_t kLanes = 8;
  static V set1(float f) { return _mm256_set1_ps(f); }
  static I iset1(int32_t k) { return _mm256_set1_epi32(k); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  // The first n (< kLanes) lanes only: the others load as 0 and are not stored.
  static __m256i first(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load_n(const float* p, int64_t n) { return _mm256_maskload_ps(p, first(n)); }
  static void store_n(float* p, V v, int64_t n) { _mm256_maskstore_ps(p, first(n), v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static I to_int(V x) { return _mm256_cvtps_epi32(x); }
  static I iadd(I a, I b) { return _mm256_add_epi32(a, b); }
  static I isub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static M lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static M is_nan(V x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }
  static M igt(I a, I b) { return _mm256_castsi256_ps(_mm256_cmpgt_epi32(a, b)); }
  static M mor(M a, M b) { return _mm256_or_ps(a, b); }
  static bool none(M m) { return _mm256_testz_ps(m, m) != 0; }
  static V select(V a, M m, V b) { return _mm256_blendv_ps(a, b, m); }
  static I iselect(I a, M m, I b) {
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), m));
  }
  static V neg(V x) { return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f)); }
  static V pow2(I k) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23)); }
};

}  // namespace
}  // namespace sluice::device::avx2
