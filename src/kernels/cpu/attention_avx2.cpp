// The absorbed attention's tile scores and context sums on 8 lanes for AVX2 (attention_avx512.cpp
// has them on 16): every lane is one row's (or column's) sum over its index in order with each
// product rounded before its add (no contraction in this file), so the bits are the 4-lane
// versions' and the scalar loops'.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/kernels.h"

namespace sluice::kernels {
namespace {

// C positions' scores at once, the tile's 16 rows as two vectors.
template <int C>
void tile_dots_c(const float* qT, const float* x, int64_t ldx, int64_t n, float* out) {
  __m256 lo[C], hi[C];
  for (int k = 0; k < C; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    const __m256 q0 = _mm256_loadu_ps(qT + i * kAttnTile), q1 = _mm256_loadu_ps(qT + i * kAttnTile + 8);
    for (int k = 0; k < C; ++k) {
      const __m256 xi = _mm256_set1_ps(x[k * ldx + i]);
      lo[k] = _mm256_add_ps(lo[k], _mm256_mul_ps(q0, xi));
      hi[k] = _mm256_add_ps(hi[k], _mm256_mul_ps(q1, xi));
    }
  }
  for (int k = 0; k < C; ++k) {
    _mm256_storeu_ps(out + k * kAttnTile, lo[k]);
    _mm256_storeu_ps(out + k * kAttnTile + 8, hi[k]);
  }
}

}  // namespace

void tile_dots_avx2(const float* qT, const float* x, int64_t ldx, int64_t count, int64_t n, float* out) {
  static_assert(kAttnTile == 16 && kTileDotsMax == 8);
  for (int64_t k = 0; k < count; k += 4) {
    switch (std::min<int64_t>(4, count - k)) {
      case 1: tile_dots_c<1>(qT, x + k * ldx, ldx, n, out + k * kAttnTile); break;
      case 2: tile_dots_c<2>(qT, x + k * ldx, ldx, n, out + k * kAttnTile); break;
      case 3: tile_dots_c<3>(qT, x + k * ldx, ldx, n, out + k * kAttnTile); break;
      default: tile_dots_c<4>(qT, x + k * ldx, ldx, n, out + k * kAttnTile); break;
    }
  }
}

void context_rows_avx2(float* ctx, const float* s, int64_t stride, const float* lat, int64_t kvr, int64_t p0,
                       int64_t p1) {
  int64_t j = 0;
  for (; j + 32 <= kvr; j += 32) {
    __m256 c[4];
    for (int k = 0; k < 4; ++k) c[k] = _mm256_loadu_ps(ctx + j + 8 * k);
    for (int64_t p = p0; p < p1; ++p) {
      const __m256 w = _mm256_set1_ps(s[p * stride]);
      const float* l = lat + p * kvr + j;
      for (int k = 0; k < 4; ++k) c[k] = _mm256_add_ps(c[k], _mm256_mul_ps(w, _mm256_loadu_ps(l + 8 * k)));
    }
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(ctx + j + 8 * k, c[k]);
  }
  for (; j + 8 <= kvr; j += 8) {
    __m256 c = _mm256_loadu_ps(ctx + j);
    for (int64_t p = p0; p < p1; ++p)
      c = _mm256_add_ps(c, _mm256_mul_ps(_mm256_set1_ps(s[p * stride]), _mm256_loadu_ps(lat + p * kvr + j)));
    _mm256_storeu_ps(ctx + j, c);
  }
  for (; j < kvr; ++j) {
    float c = ctx[j];
    for (int64_t p = p0; p < p1; ++p) c += s[p * stride] * lat[p * kvr + j];
    ctx[j] = c;
  }
}

}  // namespace sluice::kernels
