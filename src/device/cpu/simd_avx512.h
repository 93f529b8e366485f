// What the AVX-512 product files share: the intrinsics header (with g++ 12's spurious warnings
// silenced), the fixed 16-lane reduction tree and the tail mask. Include only from *_avx512.cpp
// files, which are compiled for AVX-512.
#pragma once

// g++ 12's AVX-512 headers self-initialise their "undefined" vectors (`__m512 __Y = __Y;`), which
// -Wuninitialized reports wherever such an intrinsic is inlined (GCC PR 105593); the warning
// location is the header, so silencing it around the include is enough.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#include <cstdint>
#include <type_traits>

#include "device/cpu/kernels.h"

namespace sluice::device::avx512 {

// The FP8 products' prefetch of the next tile's rows, with a hint of kernels.h's Fp8Prefetch
// (one-vector tiles use fp8_next_tile_hint(), others T1).
template <int Hint>
inline void prefetch_next(const uint8_t* p) {
  if constexpr (Hint == kFp8PrefetchNta) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_NTA);
  else if constexpr (Hint == kFp8PrefetchT1) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
}

// Calls f(std::integral_constant<int, H>) with H the Fp8Prefetch value of `hint`, so that the
// code inside is compiled once per hint and chooses none at run time.
template <class F>
inline void with_prefetch_hint(int hint, F&& f) {
  switch (hint) {
    case kFp8PrefetchNta: return f(std::integral_constant<int, kFp8PrefetchNta>{});
    case kFp8PrefetchT1: return f(std::integral_constant<int, kFp8PrefetchT1>{});
    default: return f(std::integral_constant<int, kFp8PrefetchNone>{});
  }
}

inline __mmask16 tail_mask(int64_t count) { return __mmask16((1u << count) - 1u); }

// Fixed 16-lane reduction tree: 256-bit halves, 128-bit quarters, pairs, the last two.
inline float reduce16(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128 s = _mm512_castps512_ps128(v);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The sixteen sums of a tile of 4 rows by 4 vectors, y[i*ldy + r] = reduce16(acc[r][i]), with
// reduce16's adds of the same lanes (so the same bits) done for several accumulators per
// instruction: 30 shuffles and 15 adds where sixteen reduce16 take 64 and 64. Each level pairs
// two registers' halves of the level before (256-bit halves, then 128-bit quarters of what is
// left, then lanes two apart, then adjacent lanes); 128-bit block i of the last is vector i's 4
// rows. At 256 columns (a prefill through the default model's projections) the reductions were
// about a third of a 4x4 tile's time.
inline void reduce16_4x4(const __m512 (&acc)[4][4], float* y, int64_t ldy) {
  // Levels 1 and 2 combine 128-bit blocks (shuffle_f32x4), levels 3 and 4 lanes within each
  // block (shuffle_ps): selector 0x44 takes [p0 p1 q0 q1], 0xEE [p2 p3 q2 q3], 0x88 [p0 p2 q0 q2],
  // 0xDD [p1 p3 q1 q3] (blocks or lanes).
  auto halves = [](__m512 p, __m512 q) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(p, q, 0x44), _mm512_shuffle_f32x4(p, q, 0xEE));
  };
  auto quarters = [](__m512 p, __m512 q) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(p, q, 0x88), _mm512_shuffle_f32x4(p, q, 0xDD));
  };
  auto pairs = [](__m512 p, __m512 q) { return _mm512_add_ps(_mm512_shuffle_ps(p, q, 0x44), _mm512_shuffle_ps(p, q, 0xEE)); };
  auto last = [](__m512 p, __m512 q) { return _mm512_add_ps(_mm512_shuffle_ps(p, q, 0x88), _mm512_shuffle_ps(p, q, 0xDD)); };
  // Row r's level-2 register holds [w(r,0) w(r,1) w(r,2) w(r,3)], w = each vector's 4 partial sums.
  __m512 w[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) w[r] = quarters(halves(acc[r][0], acc[r][1]), halves(acc[r][2], acc[r][3]));
  // Block i of the last level: [rows 0..3 of vector i].
  const __m512 sums = last(pairs(w[0], w[1]), pairs(w[2], w[3]));
  _mm_storeu_ps(y, _mm512_castps512_ps128(sums));
  _mm_storeu_ps(y + ldy, _mm512_extractf32x4_ps(sums, 1));
  _mm_storeu_ps(y + 2 * ldy, _mm512_extractf32x4_ps(sums, 2));
  _mm_storeu_ps(y + 3 * ldy, _mm512_extractf32x4_ps(sums, 3));
}

// A tile's R x N sums, y[i*ldy + r] = reduce16(acc[r][i]): 4x4 tiles through reduce16_4x4.
template <int R, int N>
inline void store_sums(const __m512 (&acc)[R][N], float* y, int64_t ldy) {
  if constexpr (R == 4 && N == 4) {
    reduce16_4x4(acc, y, ldy);
  } else {
#pragma GCC unroll 16
    for (int k = 0; k < R * N; ++k) y[(k % N) * ldy + k / N] = reduce16(acc[k / N][k % N]);
  }
}

namespace {

// The lane traits of simd_math.h for 16 lanes (internal linkage: see there).
struct Avx512Lanes {
  using V = __m512;
  using I = __m512i;
  using M = __mmask16;
  static constexpr int64_t kLanes = 16;
  static V set1(float f) { return _mm512_set1_ps(f); }
  static I iset1(int32_t k) { return _mm512_set1_epi32(k); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  // The first n (< kLanes) lanes only: the others load as 0 and are not stored.
  static V load_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
  static void store_n(float* p, V v, int64_t n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V round(V x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static I to_int(V x) { return _mm512_cvtps_epi32(x); }
  static I iadd(I a, I b) { return _mm512_add_epi32(a, b); }
  static I isub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static M is_nan(V x) { return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); }
  static M igt(I a, I b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static M mor(M a, M b) { return M(a | b); }
  static bool none(M m) { return m == 0; }
  static V select(V a, M m, V b) { return _mm512_mask_mov_ps(a, m, b); }
  static I iselect(I a, M m, I b) { return _mm512_mask_mov_epi32(a, m, b); }
  static V neg(V x) { return _mm512_xor_ps(x, _mm512_set1_ps(-0.0f)); }
  static V pow2(I k) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23)); }
};

}  // namespace

}  // namespace sluice::device::avx512
