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

namespace sluice::kernels::avx512 {

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

}  // namespace sluice::kernels::avx512
