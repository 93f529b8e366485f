// AVX2 + FMA product of INT4_G32 weights (compressed-tensors pack-quantized int4, BF16 scale per 32
// columns; device/weight.h) with fp32 activations: the fallback for CPUs without AVX-512. Per row
// and 32-column group the 16 values bf16(q·s) are made in two vectors (codes 0-7 and 8-15; q·s is
// exact in fp32 and rounded to BF16 to nearest even by integer arithmetic, as f32_to_bf16 does for
// finite values). Each code word is broadcast and shifted so that lane j holds code j in its low
// bits: vpermps looks up both halves (it reads only the low 3 bits) and the code's bit 3, shifted
// into the sign, picks one. The weights come out in column order, so the activations are used as
// they are. Each (row, vector) output is one fixed sequence of operations whatever the tile it falls
// in (batch invariance, kernels.h); the scalar kernel is the oracle, within the sum-order bound.
#include <immintrin.h>

#include <cstring>

#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

// The decode (tables and lookups) costs several times the FMAs of one vector, so a tile takes many
// vectors and few rows: 2x4 accumulators, one row's two tables and the operands fit 16 ymm.
constexpr int kRowTile = 2;
constexpr int kVecTile = 4;

inline float reduce8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// bf16(q·s) as fp32 in each lane, for the lane's q.
inline __m256 rounded_products(__m256 q, __m256 s) {
  const __m256i bits = _mm256_castps_si256(_mm256_mul_ps(q, s));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  return _mm256_castsi256_ps(_mm256_and_si256(rounded, _mm256_set1_epi32(int32_t(0xffff0000u))));
}

struct GroupValues {
  __m256 negative, positive;  // codes 0-7 (q = -8..-1) and 8-15 (q = 0..7)
};

inline GroupValues group_values(uint16_t scale_bits) {
  uint32_t s32 = uint32_t(scale_bits) << 16;
  float s;
  std::memcpy(&s, &s32, 4);
  const __m256 sv = _mm256_set1_ps(s);
  return {rounded_products(_mm256_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1), sv),
          rounded_products(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), sv)};
}

// The 8 weights of one code word, in column order.
inline __m256 decode_word(const unsigned char* p, const GroupValues& v) {
  int32_t word;
  std::memcpy(&word, p, 4);
  const __m256i w = _mm256_set1_epi32(word);
  const __m256i codes = _mm256_srlv_epi32(w, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
  const __m256i sign_bit3 = _mm256_sllv_epi32(w, _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0));
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(v.negative, codes), _mm256_permutevar8x32_ps(v.positive, codes),
                          _mm256_castsi256_ps(sign_bit3));
}

template <typename T>
inline void prefetch_ahead(const T* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
}

template <int R, int N>
void int4_tile(const unsigned char* packed, const unsigned char* scales, int64_t cols, const float* x, int64_t ldx,
               float* y, int64_t ldy) {
  const int64_t groups = cols / kInt4Group, row_bytes = cols / 2, scale_row_bytes = groups * 2;
  __m256 acc[R][N];
#pragma GCC unroll 8
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const unsigned char* words = packed + r * row_bytes + g * 16;
      if (g % 4 == 0) prefetch_ahead(words + R * row_bytes);
      if (g % 32 == 0) prefetch_ahead(scales + (R + r) * scale_row_bytes + g * 2);
      uint16_t scale;
      std::memcpy(&scale, scales + r * scale_row_bytes + g * 2, 2);
      const GroupValues values = group_values(scale);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256 wv = decode_word(words + 4 * k, values);
#pragma GCC unroll 4
        for (int i = 0; i < N; ++i)
          acc[r][i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * ldx + g * kInt4Group + 8 * k), acc[r][i]);
      }
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < R * N; ++k) y[(k % N) * ldy + k / N] = reduce8(acc[k / N][k % N]);
}

template <int R>
void int4_rows(const unsigned char* packed, const unsigned char* scales, int64_t cols, const float* x, int64_t ldx,
               int64_t n, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + kVecTile <= n; i += kVecTile) int4_tile<R, kVecTile>(packed, scales, cols, x + i * ldx, ldx, y + i * ldy, ldy);
  switch (n - i) {
    case 3: int4_tile<R, 3>(packed, scales, cols, x + i * ldx, ldx, y + i * ldy, ldy); break;
    case 2: int4_tile<R, 2>(packed, scales, cols, x + i * ldx, ldx, y + i * ldy, ldy); break;
    case 1: int4_tile<R, 1>(packed, scales, cols, x + i * ldx, ldx, y + i * ldy, ldy); break;
    default: break;
  }
}

}  // namespace

void matmul_int4_avx2(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                      int64_t r1) {
  const auto* P = static_cast<const unsigned char*>(w.data);
  const auto* S = static_cast<const unsigned char*>(w.scales);
  const int64_t row_bytes = w.cols / 2, scale_row_bytes = w.cols / kInt4Group * 2;
  int64_t r = r0;
  for (; r + kRowTile <= r1; r += kRowTile)
    int4_rows<kRowTile>(P + r * row_bytes, S + r * scale_row_bytes, w.cols, x, ldx, n, y + r, ldy);
  for (; r < r1; ++r) int4_rows<1>(P + r * row_bytes, S + r * scale_row_bytes, w.cols, x, ldx, n, y + r, ldy);
}

}  // namespace sluice::device
