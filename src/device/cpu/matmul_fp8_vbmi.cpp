// AVX-512 VBMI product of FP8 e4m3 weights with F32 128x128 block scales (DeepSeek-V3's released
// format) and fp32 activations, and the widening of an FP8 row to fp32 (the MLA attention's kv_b).
//
// Decoding never makes a subnormal: 64 codes at a time are looked up by their low 7 bits in two
// 128-entry byte tables (vpermi2b) holding the low and high bytes of each e4m3 magnitude as bf16
// (exact: every e4m3 value, subnormal codes included, is a normal bf16), the code's sign is ORed
// into the high byte, and two rounds of unpacking against zero turn the byte pairs into fp32s. So
// no operand of an FMA is an fp32 subnormal (Intel cores take a microcode assist per such operand,
// and one code in 16 of random weights is subnormal: docs/BENCHMARKS.md, "Design measurements
// behind code comments"), no MXCSR mode is relied on, and the NaN codes decode to NaN by the table
// (no scan). Nine shuffles per 64 weights.
//
// The unpacks leave 128-bit lane L of decoded vector k holding columns 16L + 4k .. 16L + 4k + 3 of
// the 64-column chunk; the activations are permuted once per call to match (permute_chunks). Per
// (row, vector) each 128-column block's 16-lane partial sums are multiplied by the block's scale and
// accumulated, then reduced by avx512::store_sums's fixed tree: the same operations for an output
// whatever tile it falls in (batch invariance, device/weight.h); the scalar kernel is the oracle.
#include "device/cpu/simd_avx512.h"

#include <algorithm>

#include "device/cpu/decode_tables.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

constexpr int64_t kChunk = 64;
// Tiles: 8 rows for one vector (decode: 8 independent streams), 4 rows x 2 vectors otherwise.
constexpr int kRowTile = 8;
constexpr int kRowTile2 = 4;

struct Tables {
  __m512i lo0, lo1, hi0, hi1;
};

inline Tables load_tables() {
  const E4m3Bf16Bytes& t = e4m3_bf16_bytes();
  return {_mm512_load_si512(t.lo), _mm512_load_si512(t.lo + 64), _mm512_load_si512(t.hi),
          _mm512_load_si512(t.hi + 64)};
}

// 64 codes -> 4 vectors of their exact values; w[k] lane 4L+i is the code at byte 16L + 4k + i.
inline void decode64(__m512i raw, const Tables& t, __m512 (&w)[4]) {
  __m512i hi = _mm512_permutex2var_epi8(t.hi0, raw, t.hi1);
  hi = _mm512_ternarylogic_epi32(hi, raw, _mm512_set1_epi8(char(0x80)), 0xF8);  // hi | (raw & 0x80)
  const __m512i lo = _mm512_permutex2var_epi8(t.lo0, raw, t.lo1);
  const __m512i w01 = _mm512_unpacklo_epi8(lo, hi), w23 = _mm512_unpackhi_epi8(lo, hi);  // bf16 words
  const __m512i z = _mm512_setzero_si512();
  w[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, w01));
  w[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, w01));
  w[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, w23));
  w[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, w23));
}

// The 4x4 transpose of 128-bit blocks (its own inverse): out[k] block L = in[L] block k.
inline void transpose_blocks(const __m512 (&in)[4], __m512 (&out)[4]) {
  const __m512 t0 = _mm512_shuffle_f32x4(in[0], in[1], 0x44), t1 = _mm512_shuffle_f32x4(in[0], in[1], 0xEE);
  const __m512 t2 = _mm512_shuffle_f32x4(in[2], in[3], 0x44), t3 = _mm512_shuffle_f32x4(in[2], in[3], 0xEE);
  out[0] = _mm512_shuffle_f32x4(t0, t2, 0x88);
  out[1] = _mm512_shuffle_f32x4(t0, t2, 0xDD);
  out[2] = _mm512_shuffle_f32x4(t1, t3, 0x88);
  out[3] = _mm512_shuffle_f32x4(t1, t3, 0xDD);
}

inline __mmask16 lanes_mask(int64_t count) { return count >= 16 ? __mmask16(0xffff) : avx512::tail_mask(count); }

inline __mmask64 byte_mask(int64_t count) { return count >= 64 ? ~__mmask64(0) : (__mmask64(1) << count) - 1; }

inline __m512i load_codes(const uint8_t* p, int64_t count) {
  return count >= kChunk ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(byte_mask(count), p);
}

// n rows of x ([cols] floats, stride ldx) in decode64's order, 64 columns at a time, zero past cols:
// out[i*ld + 64j + 16k + 4L + e] = x[i*ldx + 64j + 16L + 4k + e]. Returns ld.
int64_t permute_chunks(const float* x, int64_t ldx, int64_t n, int64_t cols, float* out) {
  const int64_t ld = (cols + kChunk - 1) / kChunk * kChunk;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; c += kChunk) {
      __m512 in[4], p[4];
#pragma GCC unroll 4
      for (int L = 0; L < 4; ++L) {
        const int64_t left = std::clamp<int64_t>(cols - c - 16 * L, 0, 16);
        in[L] = _mm512_maskz_loadu_ps(lanes_mask(left), x + i * ldx + c + 16 * L);
      }
      transpose_blocks(in, p);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) _mm512_storeu_ps(out + i * ld + c + 16 * k, p[k]);
    }
  return ld;
}

// y[i*ldy + r] for R rows (row stride `cols` bytes, scale rows `srow[r]`) and N vectors of permuted
// activations (stride ldp).
template <int R, int N, int Hint = kFp8PrefetchT1>
void fp8_tile(const uint8_t* w, const float* const* srow, int64_t cols, const float* xp, int64_t ldp, float* y,
              int64_t ldy, const Tables& t) {
  __m512 total[R][N];
#pragma GCC unroll 8
  for (int k = 0; k < R * N; ++k) total[k / N][k % N] = _mm512_setzero_ps();
  const int64_t col_blocks = (cols + kFp8Block - 1) / kFp8Block;
  for (int64_t b = 0; b < col_blocks; ++b) {
    const int64_t c0 = b * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      avx512::prefetch_next<Hint>(w + (R + r) * cols + c0);
      avx512::prefetch_next<Hint>(w + (R + r) * cols + c0 + 64);
    }
    __m512 part[R][N];
#pragma GCC unroll 8
    for (int k = 0; k < R * N; ++k) part[k / N][k % N] = _mm512_setzero_ps();
    for (int64_t c = c0; c < c1; c += kChunk) {
      const int64_t count = c1 - c;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512 wv[4];
        decode64(load_codes(w + r * cols + c, count), t, wv);
#pragma GCC unroll 2
        for (int i = 0; i < N; ++i)
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k)
            part[r][i] = _mm512_fmadd_ps(wv[k], _mm512_loadu_ps(xp + i * ldp + c + 16 * k), part[r][i]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(srow[r][b]);
#pragma GCC unroll 2
      for (int i = 0; i < N; ++i) total[r][i] = _mm512_fmadd_ps(part[r][i], s, total[r][i]);
    }
  }
  avx512::store_sums<R, N>(total, y, ldy);
}

template <int R, int N>
void fp8_rows(const uint8_t* w, const float* const* srow, int64_t cols, const float* xp, int64_t ldp, int64_t n,
              float* y, int64_t ldy, const Tables& t) {
  int64_t i = 0;
  for (; i + N <= n; i += N) fp8_tile<R, N>(w, srow, cols, xp + i * ldp, ldp, y + i * ldy, ldy, t);
  if (i < n) fp8_tile<R, 1>(w, srow, cols, xp + i * ldp, ldp, y + i * ldy, ldy, t);
}

}  // namespace

void matmul_fp8_vbmi(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                     int64_t r1) {
  const int64_t ld = (w.cols + kChunk - 1) / kChunk * kChunk;
  float* xp = product_scratch(size_t(n * ld));
  permute_chunks(x, ldx, n, w.cols, xp);
  const Tables t = load_tables();
  const uint8_t* W = static_cast<const uint8_t*>(w.data);
  const float* S = static_cast<const float*>(w.scales);
  const int64_t col_blocks = (w.cols + kFp8Block - 1) / kFp8Block;
  auto scale_row = [&](int64_t r) { return S + (r / kFp8Block) * col_blocks; };
  const float* srow[kRowTile];
  int64_t r = r0;
  if (n == 1) {
    avx512::with_prefetch_hint(fp8_next_tile_hint(), [&](auto hint) {
      for (; r + kRowTile <= r1; r += kRowTile) {
        for (int k = 0; k < kRowTile; ++k) srow[k] = scale_row(r + k);
        fp8_tile<kRowTile, 1, decltype(hint)::value>(W + r * w.cols, srow, w.cols, xp, ld, y + r, ldy, t);
      }
    });
  } else {
    for (; r + kRowTile2 <= r1; r += kRowTile2) {
      for (int k = 0; k < kRowTile2; ++k) srow[k] = scale_row(r + k);
      fp8_rows<kRowTile2, 2>(W + r * w.cols, srow, w.cols, xp, ld, n, y + r, ldy, t);
    }
  }
  for (; r < r1; ++r) {
    srow[0] = scale_row(r);
    fp8_rows<1, 2>(W + r * w.cols, srow, w.cols, xp, ld, n, y + r, ldy, t);
  }
}

// out[c] = e4m3(W[r, c]) · scale of its block, one rounding per value (as fp8_widen_row's table).
void widen_fp8_vbmi(const Weight& w, int64_t r, float* out) {
  const Tables t = load_tables();
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.cols;
  const float* s = static_cast<const float*>(w.scales) + (r / kFp8Block) * ((w.cols + kFp8Block - 1) / kFp8Block);
  for (int64_t c = 0; c < w.cols; c += kChunk) {
    const int64_t count = w.cols - c;
    const __m512 scale = _mm512_set1_ps(s[c / kFp8Block]);
    __m512 wv[4], cols[4];
    decode64(load_codes(row + c, count), t, wv);
    transpose_blocks(wv, cols);
#pragma GCC unroll 4
    for (int L = 0; L < 4; ++L) {
      const int64_t left = std::clamp<int64_t>(count - 16 * L, 0, 16);
      _mm512_mask_storeu_ps(out + c + 16 * L, lanes_mask(left), _mm512_mul_ps(cols[L], scale));
    }
  }
}

}  // namespace sluice::device
