// The absorbed attention's inner loops on 16 lanes (cpu_attention.cpp's 4-lane versions, widened):
// the tile scores and context sums of simd_kernels.h, and the tile softmax. A tile's 16 query rows
// are one vector, so every lane is still one row's sum over its index in order with each product
// rounded before its add (no contraction in this file), and the bits are the 4-lane versions' and
// the scalar loops'.
#include <algorithm>

#include "device/cpu/kernels.h"
#include "device/cpu/simd_avx512.h"
#include "device/cpu/simd_kernels.h"

namespace sluice::device {

void tile_scores_avx512(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope, int64_t count,
                        float scale, float* out) {
  simd::tile_scores<avx512::Avx512Lanes>(qT, lat, kvr, kpe, rope, count, scale, out);
}

// Softmax of each row over its n[r] positions: the max (a NaN never replaces it, as in the scalar
// x > m ? x : m), e^{x - max} and their sum in position order, then each times 1/sum; the positions
// every row sees as vectors, each row's own last ones alone.
void tile_softmax_avx512(float* sT, const int64_t* n) {
  constexpr int64_t T = kAttnTile;
  const int64_t lo = n[0];
  __m512 m = _mm512_loadu_ps(sT);
  for (int64_t p = 1; p < lo; ++p) {
    const __m512 x = _mm512_loadu_ps(sT + p * T);
    m = _mm512_mask_mov_ps(m, avx512::Avx512Lanes::gt(x, m), x);
  }
  alignas(64) float mr[T], sr[T];
  _mm512_store_ps(mr, m);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t p = std::max<int64_t>(lo, 1); p < n[r]; ++p) {
      const float x = sT[p * T + r];
      mr[r] = x > mr[r] ? x : mr[r];
    }
  m = _mm512_load_ps(mr);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t p = 0; p < lo; ++p) {
    const __m512 e = simd::exp<avx512::Avx512Lanes>(_mm512_sub_ps(_mm512_loadu_ps(sT + p * T), m));
    _mm512_storeu_ps(sT + p * T, e);
    sum = _mm512_add_ps(sum, e);
  }
  _mm512_store_ps(sr, sum);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t p = lo; p < n[r]; ++p) {
      float& x = sT[p * T + r];
      // mathf::exp's bits through the vector form: an inline function of a shared header compiled
      // here for AVX-512 could be the copy the linker keeps for every caller.
      x = _mm512_cvtss_f32(simd::exp<avx512::Avx512Lanes>(_mm512_set1_ps(x - mr[r])));
      sr[r] += x;
    }
  const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_load_ps(sr));
  alignas(64) float invr[T];
  _mm512_store_ps(invr, inv);
  for (int64_t p = 0; p < lo; ++p) _mm512_storeu_ps(sT + p * T, _mm512_mul_ps(_mm512_loadu_ps(sT + p * T), inv));
  for (int64_t r = 0; r < T; ++r)
    for (int64_t p = lo; p < n[r]; ++p) sT[p * T + r] *= invr[r];
}

void context_rows_avx512(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat, int64_t kvr,
                         int64_t p0, int64_t p1, int64_t rows) {
  simd::context_rows<avx512::Avx512Lanes>(ctx, ldc, s, stride, lat, kvr, p0, p1, rows);
}

}  // namespace sluice::device
