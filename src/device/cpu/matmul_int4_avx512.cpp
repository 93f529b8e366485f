// AVX-512 product of INT4_G32 weights (compressed-tensors pack-quantized int4, BF16 scale per 32
// columns; device/weight.h) with fp32 activations. Per row and 32-column group the 16 values
// bf16(q·s) are made in one vector (the codes' q times s, exact in fp32, rounded to BF16 to nearest
// even by integer arithmetic, as f32_to_bf16 does for finite values); the group's four code words
// are spread one per 8 lanes, shifted so that lane j holds code j of its word in its low 4 bits, and
// vpermps looks the values up (it reads only those bits). So the weights come out in column order
// and the activations are used as they are. Each (row, vector) output is one fixed sequence of
// operations whatever the tile it falls in (batch invariance, kernels.h); the scalar kernel is the
// oracle, within the sum-order bound.
#include <cstring>

#include "device/cpu/kernels.h"
#include "device/cpu/simd_avx512.h"

namespace sluice::device {
namespace {

constexpr int kRowTile = 4;
constexpr int kVecTile = 4;

// The group's 16 values by code: bf16((code - 8)·s) as fp32.
inline __m512 group_values(uint16_t scale_bits) {
  const __m512 q = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  uint32_t s32 = uint32_t(scale_bits) << 16;
  float s;
  std::memcpy(&s, &s32, 4);
  const __m512i bits = _mm512_castps_si512(_mm512_mul_ps(q, _mm512_set1_ps(s)));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  return _mm512_castsi512_ps(_mm512_and_si512(rounded, _mm512_set1_epi32(int32_t(0xffff0000u))));
}

struct GroupWeights {
  __m512 lo, hi;  // columns 0..15 and 16..31 of the group
};

inline GroupWeights decode_group(const unsigned char* words, __m512 values) {
  const __m512i four = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words)));
  const __m512i shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i first = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i second = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m512i codes_lo = _mm512_srlv_epi32(_mm512_permutexvar_epi32(first, four), shifts);
  const __m512i codes_hi = _mm512_srlv_epi32(_mm512_permutexvar_epi32(second, four), shifts);
  return {_mm512_permutexvar_ps(codes_lo, values), _mm512_permutexvar_ps(codes_hi, values)};
}

template <typename T>
inline void prefetch_ahead(const T* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
}

// y[i*ldy + r] for R rows and N vectors: per lane, the column sum over the row in group order,
// then the fixed reduction tree.
template <int R, int N>
void int4_tile(const unsigned char* packed, const unsigned char* scales, int64_t cols, const float* x, int64_t ldx,
               float* y, int64_t ldy) {
  const int64_t groups = cols / kInt4Group, row_bytes = cols / 2, scale_row_bytes = groups * 2;
  __m512 acc[R][N];
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const unsigned char* words = packed + r * row_bytes + g * 16;
      if (g % 4 == 0) prefetch_ahead(words + R * row_bytes);
      if (g % 32 == 0) prefetch_ahead(scales + (R + r) * scale_row_bytes + g * 2);
      uint16_t scale;
      std::memcpy(&scale, scales + r * scale_row_bytes + g * 2, 2);
      const GroupWeights gw = decode_group(words, group_values(scale));
#pragma GCC unroll 4
      for (int i = 0; i < N; ++i) {
        const float* xv = x + i * ldx + g * kInt4Group;
        acc[r][i] = _mm512_fmadd_ps(gw.lo, _mm512_loadu_ps(xv), acc[r][i]);
        acc[r][i] = _mm512_fmadd_ps(gw.hi, _mm512_loadu_ps(xv + 16), acc[r][i]);
      }
    }
  }
  avx512::store_sums<R, N>(acc, y, ldy);
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

void matmul_int4_avx512(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
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
