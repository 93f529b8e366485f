// AVX2 + FMA + F16C product of FP8 e4m3 weights with F32 128x128 block scales and fp32
// activations: the fallback for CPUs without AVX-512, decoding as matmul_fp8_avx512.cpp does (a
// sign-extended byte shifted into an fp16's sign, exponent and mantissa fields, the value times
// 2^-8, widened exactly to a normal fp32 by vcvtph2ps; the 2^8 carried by the activations; NaN
// codes by the scalar rule, found by a per-block scan unless the weight is marked fp8_finite),
// 8 lanes per step, per (row, vector) a fixed sequence of operations.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

constexpr int kRowTile = 4;  // one vector at a time: 4 partial sums and 4 totals in ymm registers

inline float reduce8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The values times 2^-8 of 8 bytes at p (count < 8: the rest read as 0), by the scalar rule when
// one is a NaN code.
inline __m256 load8(const uint8_t* p, int count, bool has_nan) {
  if (has_nan || count < 8) {
    alignas(32) float v[8] = {};
    for (int i = 0; i < count; ++i) v[i] = fp8_value_scaled(p[i]);
    return _mm256_load_ps(v);
  }
  int64_t raw;
  std::memcpy(&raw, p, 8);
  const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(raw)), 7),
                                  _mm_set1_epi16(int16_t(0xbf80)));
  return _mm256_cvtph_ps(h);
}

inline bool any_nan(const uint8_t* p, int64_t count) {
  const __m256i low7 = _mm256_set1_epi8(0x7f);
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m256i v = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), low7);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, low7))) return true;
  }
  for (; i < count; ++i)
    if ((p[i] & 0x7f) == 0x7f) return true;
  return false;
}

template <int R>
void fp8_rows(const uint8_t* w, bool finite, const float* const* srow, int64_t cols, const float* x, float* y) {
  __m256 total[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) total[r] = _mm256_setzero_ps();
  const int64_t col_blocks = (cols + kFp8Block - 1) / kFp8Block;
  for (int64_t b = 0; b < col_blocks; ++b) {
    const int64_t c0 = b * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
    bool nan[R];
    __m256 part[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      nan[r] = !finite && any_nan(w + r * cols + c0, c1 - c0);
      part[r] = _mm256_setzero_ps();
      _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * cols + c0), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * cols + c0 + 64), _MM_HINT_T1);
    }
    for (int64_t c = c0; c < c1; c += 8) {
      const int count = int(std::min<int64_t>(8, c1 - c));
      __m256 xv;
      if (count == 8) {
        xv = _mm256_loadu_ps(x + c);
      } else {
        alignas(32) float t[8] = {};
        std::memcpy(t, x + c, size_t(count) * 4);
        xv = _mm256_load_ps(t);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) part[r] = _mm256_fmadd_ps(load8(w + r * cols + c, count, nan[r]), xv, part[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) total[r] = _mm256_fmadd_ps(part[r], _mm256_set1_ps(srow[r][b]), total[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r] = reduce8(total[r]);
}

}  // namespace

void matmul_fp8_avx2(const Weight& w, const float* x_in, int64_t ldx_in, int64_t n, float* y, int64_t ldy, int64_t r0,
                     int64_t r1) {
  const int64_t ldx = w.cols;
  const float* x = fp8_scaled_activations(x_in, ldx_in, n, w.cols);
  const uint8_t* W = static_cast<const uint8_t*>(w.data);
  const float* S = static_cast<const float*>(w.scales);
  const int64_t col_blocks = (w.cols + kFp8Block - 1) / kFp8Block;
  auto scale_row = [&](int64_t r) { return S + (r / kFp8Block) * col_blocks; };
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = r0;
    for (; r + kRowTile <= r1; r += kRowTile) {
      const float* srow[kRowTile] = {scale_row(r), scale_row(r + 1), scale_row(r + 2), scale_row(r + 3)};
      fp8_rows<kRowTile>(W + r * w.cols, w.fp8_finite, srow, w.cols, x + i * ldx, y + i * ldy + r);
    }
    for (; r < r1; ++r) {
      const float* srow[1] = {scale_row(r)};
      fp8_rows<1>(W + r * w.cols, w.fp8_finite, srow, w.cols, x + i * ldx, y + i * ldy + r);
    }
  }
}

}  // namespace sluice::device
