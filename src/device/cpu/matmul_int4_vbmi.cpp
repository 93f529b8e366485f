// AVX-512 VBMI product of INT4_G32 weights (compressed-tensors pack-quantized int4, BF16 scale per
// 32 columns; device/weight.h) with fp32 activations: the same values, lanes and operation order
// as matmul_int4_avx512.cpp (so the same bits), with a cheaper decode.
//
// A group's 16 values bf16(q·s) come from one row of a table indexed by the scale's mantissa
// (decode_tables.h: bf16(q·(128 + m)) for each code) times the scale's power of two, exact while
// the scale's exponent field is in [8, 250] (a row tile with any other scale goes to
// matmul_int4_avx512, whose arithmetic this is):
// one multiply instead of building and rounding the products. Each half-group's 16 codes go one per
// lane with one vpmultishiftqb (lane j's low byte is the 8 bits at 4j of the eight code bytes,
// broadcast to every 64-bit lane), and vpermps looks them up by their low 4 bits. Per (row, vector)
// the columns are summed in the order matmul_int4_avx512 sums them, then reduced by the fixed tree.
#include <algorithm>
#include <cstring>

#include "device/cpu/decode_tables.h"
#include "device/cpu/kernels.h"
#include "device/cpu/simd_avx512.h"

namespace sluice::device {
namespace {

constexpr int kRowTile = 4;
constexpr int kVecTile = 4;

// Whether every BF16 scale of `count` groups has its exponent field in the range the mantissa table
// covers (a scale outside it sends its row tile to matmul_int4_avx512, which gives the same bits:
// keeping that rare path out of the loop keeps the accumulators in registers, which a call on the
// loop's slow path did not).
inline bool scales_in_table_range(const unsigned char* scales, int64_t count) {
  const __m512i lo = _mm512_set1_epi16(int16_t(kInt4FastExponentMin)), span =
      _mm512_set1_epi16(int16_t(kInt4FastExponentMax - kInt4FastExponentMin));
  const __m512i field = _mm512_set1_epi16(0xff);
  for (int64_t g = 0; g < count; g += 32) {
    const __mmask32 m = count - g >= 32 ? ~__mmask32(0) : (__mmask32(1) << (count - g)) - 1;
    const __m512i s = _mm512_maskz_loadu_epi16(m, scales + 2 * g);
    const __m512i e = _mm512_sub_epi16(_mm512_and_si512(_mm512_srli_epi16(s, 7), field), lo);
    if (_mm512_mask_cmpgt_epu16_mask(m, e, span)) return false;
  }
  return true;
}

// For 16 groups' BF16 scales (count < 16: the rest unused), what each group's values need: the
// power of two ±2^(e-134) (the scale's sign and exponent less the 7 mantissa bits the table takes)
// and the byte offset of its mantissa's table row. Done 16 at a time and kept on the stack, so the
// loop over groups spends no scalar work on scales.
struct ScaleParts {
  alignas(64) float power[16];
  alignas(64) int32_t row[16];
};

inline void split_scales(const unsigned char* scales, int64_t count, ScaleParts& out) {
  const __m512i s = _mm512_cvtepu16_epi32(
      _mm256_maskz_loadu_epi16(count >= 16 ? __mmask16(0xffff) : avx512::tail_mask(count), scales));
  const __m512i e = _mm512_and_si512(_mm512_srli_epi32(s, 7), _mm512_set1_epi32(0xff));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(s, _mm512_set1_epi32(0x8000)), 16);
  const __m512i power = _mm512_or_si512(sign, _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(7)), 23));
  _mm512_store_si512(out.power, power);
  _mm512_store_si512(out.row, _mm512_slli_epi32(_mm512_and_si512(s, _mm512_set1_epi32(0x7f)), 6));
}

// The group's 16 values by code: bf16((code - 8)·s) as fp32, for a scale in the table's range.
inline __m512 group_values(const ScaleParts& parts, int k, const float* mantissa_rows) {
  const float* row = reinterpret_cast<const float*>(reinterpret_cast<const char*>(mantissa_rows) + parts.row[k]);
  return _mm512_mul_ps(_mm512_load_ps(row), _mm512_set1_ps(parts.power[k]));
}

struct GroupWeights {
  __m512 lo, hi;  // columns 0..15 and 16..31 of the group
};

inline GroupWeights decode_group(const unsigned char* words, __m512 values) {
  // Lane j's low byte: bits 4j.. of the 8 bytes (column j of the half-group); 64-bit lane q holds
  // lanes 2q (byte 0: offset 8q) and 2q+1 (byte 4: offset 8q + 4).
  const __m512i shifts = _mm512_set_epi64(0x3c00000038ll, 0x3400000030ll, 0x2c00000028ll, 0x2400000020ll,
                                          0x1c00000018ll, 0x1400000010ll, 0x0c00000008ll, 0x0400000000ll);
  int64_t lo8, hi8;
  std::memcpy(&lo8, words, 8);
  std::memcpy(&hi8, words + 8, 8);
  const __m512i codes_lo = _mm512_multishift_epi64_epi8(shifts, _mm512_set1_epi64(lo8));
  const __m512i codes_hi = _mm512_multishift_epi64_epi8(shifts, _mm512_set1_epi64(hi8));
  return {_mm512_permutexvar_ps(codes_lo, values), _mm512_permutexvar_ps(codes_hi, values)};
}

template <typename T>
inline void prefetch_ahead(const T* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
}

template <int R, int N>
void int4_tile(const unsigned char* packed, const unsigned char* scales, int64_t cols, const float* x, int64_t ldx,
               float* y, int64_t ldy, const float* mantissa_rows) {
  const int64_t groups = cols / kInt4Group, row_bytes = cols / 2, scale_row_bytes = groups * 2;
  __m512 acc[R][N];
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm512_setzero_ps();
  ScaleParts parts[R];
  for (int64_t g0 = 0; g0 < groups; g0 += 16) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      split_scales(scales + r * scale_row_bytes + g0 * 2, groups - g0, parts[r]);
      prefetch_ahead(scales + (R + r) * scale_row_bytes + g0 * 2);
    }
    const int64_t g1 = std::min(groups, g0 + 16);
    for (int64_t g = g0; g < g1; ++g) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const unsigned char* words = packed + r * row_bytes + g * 16;
        if (g % 4 == 0) prefetch_ahead(words + R * row_bytes);
        const GroupWeights gw = decode_group(words, group_values(parts[r], int(g - g0), mantissa_rows));
#pragma GCC unroll 4
        for (int i = 0; i < N; ++i) {
          const float* xv = x + i * ldx + g * kInt4Group;
          acc[r][i] = _mm512_fmadd_ps(gw.lo, _mm512_loadu_ps(xv), acc[r][i]);
          acc[r][i] = _mm512_fmadd_ps(gw.hi, _mm512_loadu_ps(xv + 16), acc[r][i]);
        }
      }
    }
  }
  avx512::store_sums<R, N>(acc, y, ldy);
}

template <int R>
void int4_rows(const unsigned char* packed, const unsigned char* scales, int64_t cols, const float* x, int64_t ldx,
               int64_t n, float* y, int64_t ldy, const float* mantissa_rows) {
  int64_t i = 0;
  for (; i + kVecTile <= n; i += kVecTile)
    int4_tile<R, kVecTile>(packed, scales, cols, x + i * ldx, ldx, y + i * ldy, ldy, mantissa_rows);
  switch (n - i) {
    case 3: int4_tile<R, 3>(packed, scales, cols, x + i * ldx, ldx, y + i * ldy, ldy, mantissa_rows); break;
    case 2: int4_tile<R, 2>(packed, scales, cols, x + i * ldx, ldx, y + i * ldy, ldy, mantissa_rows); break;
    case 1: int4_tile<R, 1>(packed, scales, cols, x + i * ldx, ldx, y + i * ldy, ldy, mantissa_rows); break;
    default: break;
  }
}

}  // namespace

void matmul_int4_vbmi(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                      int64_t r1) {
  const auto* P = static_cast<const unsigned char*>(w.data);
  const auto* S = static_cast<const unsigned char*>(w.scales);
  const float* mantissa_rows = int4_mantissa_values();
  const int64_t groups = w.cols / kInt4Group, row_bytes = w.cols / 2, scale_row_bytes = groups * 2;
  int64_t r = r0;
  for (; r + kRowTile <= r1; r += kRowTile) {
    if (scales_in_table_range(S + r * scale_row_bytes, kRowTile * groups))
      int4_rows<kRowTile>(P + r * row_bytes, S + r * scale_row_bytes, w.cols, x, ldx, n, y + r, ldy, mantissa_rows);
    else
      matmul_int4_avx512(w, x, ldx, n, y, ldy, r, r + kRowTile);
  }
  for (; r < r1; ++r) {
    if (scales_in_table_range(S + r * scale_row_bytes, groups))
      int4_rows<1>(P + r * row_bytes, S + r * scale_row_bytes, w.cols, x, ldx, n, y + r, ldy, mantissa_rows);
    else
      matmul_int4_avx512(w, x, ldx, n, y, ldy, r, r + 1);
  }
}

}  // namespace sluice::device
