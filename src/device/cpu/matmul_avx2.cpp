// AVX2 + FMA products of f32, bf16 and MXFP4 weights with fp32 activations: the fallback for CPUs
// without AVX-512. Each (row, vector) output is computed by one fixed sequence of operations
// whatever the tile it falls in, so results are batch-invariant (kernels.h).
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/arena.h"
#include "core/dtype.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

constexpr int kRowTile = 4;
constexpr int kVecTile = 2;  // 4x2 accumulators + operands fit the 16 ymm registers

// The weights stream from DRAM once per call: each tile prefetches the same columns of the next
// row tile into L2, which the hardware prefetchers alone do not keep up with while the loop is
// busy. Prefetches past the matrix are harmless (they never fault).
template <typename T>
inline void prefetch_ahead(const T* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
}

// Fixed reduction tree of 8 lanes: halves, then pairs, then the last two.
inline float reduce8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// The last (cols % 8) columns, copied into a zero-padded block of 8 so the tail step is an
// ordinary full step (0·0 adds nothing).
template <typename T>
inline __m256 load_tail(const T* p, int64_t count) {
  alignas(32) T tmp[8] = {};
  std::memcpy(tmp, p, size_t(count) * sizeof(T));
  return load8(tmp);
}

template <typename T, int R, int N>
void dense_tile(const T* w, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy) {
  __m256 acc[R][N];
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      wv[r] = load8(w + r * cols + c);
      if (c % 32 == 0) prefetch_ahead(w + (R + r) * cols + c);
    }
#pragma GCC unroll 4
    for (int i = 0; i < N; ++i) {
      __m256 xv = _mm256_loadu_ps(x + i * ldx + c);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][i] = _mm256_fmadd_ps(wv[r], xv, acc[r][i]);
    }
  }
  if (c < cols) {
    const int64_t count = cols - c;
    __m256 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = load_tail(w + r * cols + c, count);
#pragma GCC unroll 4
    for (int i = 0; i < N; ++i) {
      __m256 xv = load_tail(x + i * ldx + c, count);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][i] = _mm256_fmadd_ps(wv[r], xv, acc[r][i]);
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) y[(k % N) * ldy + k / N] = reduce8(acc[k / N][k % N]);
}

template <typename T, int R>
void dense_rows(const T* w, int64_t cols, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + kVecTile <= n; i += kVecTile) dense_tile<T, R, kVecTile>(w, cols, x + i * ldx, ldx, y + i * ldy, ldy);
  if (i < n) dense_tile<T, R, 1>(w, cols, x + i * ldx, ldx, y + i * ldy, ldy);
}

template <typename T>
void matmul_dense(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                  int64_t r1) {
  const T* W = static_cast<const T*>(w.data);
  int64_t r = r0;
  for (; r + kRowTile <= r1; r += kRowTile) dense_rows<T, kRowTile>(W + r * w.cols, w.cols, x, ldx, n, y + r, ldy);
  for (; r < r1; ++r) dense_rows<T, 1>(W + r * w.cols, w.cols, x, ldx, n, y + r, ldy);
}

void matmul_f32_avx2(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                     int64_t r1) {
  matmul_dense<float>(w, x, ldx, n, y, ldy, r0, r1);
}

void matmul_bf16_avx2(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                      int64_t r1) {
  matmul_dense<uint16_t>(w, x, ldx, n, y, ldy, r0, r1);
}

// ---- MXFP4 ----
// Work goes in pairs of blocks (64 columns, 32 bytes of codes per row), one block per 128-bit
// lane. Two vpshufb per nibble half look up the high and low bytes of the E2M1 value as bf16
// (exact), unpacking them interleaves the bytes into bf16 words, and each dword of words is
// widened exactly by a 16-bit shift (low word) and a mask (high word): eight vectors of 8
// weights. The activations are permuted once per call to the same order. Per pair and vector the
// eight products go into two partial sums, and their sum is scaled by [2^(e0-127) x4, 2^(e1-127)
// x4]: Σ(w·x)·2^(e-127) per block, as the scalar kernel does.
constexpr int64_t kPairCols = 64;

inline int64_t padded_cols(int64_t cols) { return (cols + kPairCols - 1) / kPairCols * kPairCols; }

// Column offset within the block for vector m, dword d (see decode_pair).
constexpr int kPairOffset[8][4] = {{0, 4, 8, 12},  {2, 6, 10, 14},  {16, 20, 24, 28}, {18, 22, 26, 30},
                                   {1, 5, 9, 13},  {3, 7, 11, 15},  {17, 21, 25, 29}, {19, 23, 27, 31}};

// x -> per pair 8 vectors of 8: vector m, element 4k+d = x[pair + 32k + kPairOffset[m][d]]; zero
// past cols.
void permute_activations(const float* x, int64_t cols, float* out) {
  for (int64_t c = 0; c < cols; c += kPairCols) {
    for (int m = 0; m < 8; ++m) {
      for (int k = 0; k < 2; ++k) {
        for (int d = 0; d < 4; ++d) {
          const int64_t col = c + 32 * k + kPairOffset[m][d];
          out[c + m * 8 + 4 * k + d] = col < cols ? x[col] : 0.0f;
        }
      }
    }
  }
}

struct PairWeights {
  __m256 w[8];  // w[m] matches activation vector m
};

inline PairWeights decode_pair(__m256i bytes) {
  // bf16 of E2M1 code c: high byte and low byte, repeated for both lanes.
  const __m256i high_bytes = _mm256_setr_epi8(
      0x00, 0x3f, 0x3f, 0x3f, 0x40, 0x40, 0x40, 0x40, char(0x80), char(0xbf), char(0xbf), char(0xbf), char(0xc0),
      char(0xc0), char(0xc0), char(0xc0), 0x00, 0x3f, 0x3f, 0x3f, 0x40, 0x40, 0x40, 0x40, char(0x80), char(0xbf),
      char(0xbf), char(0xbf), char(0xc0), char(0xc0), char(0xc0), char(0xc0));
  const __m256i low_bytes = _mm256_setr_epi8(0x00, 0x00, char(0x80), char(0xc0), 0x00, 0x40, char(0x80), char(0xc0),
                                             0x00, 0x00, char(0x80), char(0xc0), 0x00, 0x40, char(0x80), char(0xc0),
                                             0x00, 0x00, char(0x80), char(0xc0), 0x00, 0x40, char(0x80), char(0xc0),
                                             0x00, 0x00, char(0x80), char(0xc0), 0x00, 0x40, char(0x80), char(0xc0));
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i high_word = _mm256_set1_epi32(int32_t(0xffff0000u));
  const __m256i even = _mm256_and_si256(bytes, nibble);                         // columns 2j
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);  // columns 2j+1
  const __m256i even_hi = _mm256_shuffle_epi8(high_bytes, even), even_lo = _mm256_shuffle_epi8(low_bytes, even);
  const __m256i odd_hi = _mm256_shuffle_epi8(high_bytes, odd), odd_lo = _mm256_shuffle_epi8(low_bytes, odd);
  // bf16 words of columns 2j (j < 8 | j >= 8) and 2j+1 (likewise), per lane.
  const __m256i even_lo_words = _mm256_unpacklo_epi8(even_lo, even_hi);
  const __m256i even_hi_words = _mm256_unpackhi_epi8(even_lo, even_hi);
  const __m256i odd_lo_words = _mm256_unpacklo_epi8(odd_lo, odd_hi);
  const __m256i odd_hi_words = _mm256_unpackhi_epi8(odd_lo, odd_hi);
  PairWeights pw;
  pw.w[0] = _mm256_castsi256_ps(_mm256_slli_epi32(even_lo_words, 16));
  pw.w[1] = _mm256_castsi256_ps(_mm256_and_si256(even_lo_words, high_word));
  pw.w[2] = _mm256_castsi256_ps(_mm256_slli_epi32(even_hi_words, 16));
  pw.w[3] = _mm256_castsi256_ps(_mm256_and_si256(even_hi_words, high_word));
  pw.w[4] = _mm256_castsi256_ps(_mm256_slli_epi32(odd_lo_words, 16));
  pw.w[5] = _mm256_castsi256_ps(_mm256_and_si256(odd_lo_words, high_word));
  pw.w[6] = _mm256_castsi256_ps(_mm256_slli_epi32(odd_hi_words, 16));
  pw.w[7] = _mm256_castsi256_ps(_mm256_and_si256(odd_hi_words, high_word));
  return pw;
}

// One row against N vectors.
template <int N>
void mxfp4_row(const uint8_t* packed, const uint8_t* scales, int64_t cols, const float* xp, int64_t pcols, float* y,
               int64_t ldy) {
  const int64_t blocks = cols / 32, row_bytes = cols / 2;
  __m256 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; b += 2) {
    const bool both = b + 1 < blocks;
    const uint8_t* src = packed + b * 16;
    prefetch_ahead(src + row_bytes);
    if (b % 64 == 0) prefetch_ahead(scales + blocks + b);
    const __m256i bytes = both ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))
                               : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
    const PairWeights pw = decode_pair(bytes);
    const __m256i e = _mm256_setr_epi32(scales[b], scales[b], scales[b], scales[b], both ? scales[b + 1] : 0,
                                        both ? scales[b + 1] : 0, both ? scales[b + 1] : 0, both ? scales[b + 1] : 0);
    const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
#pragma GCC unroll 2
    for (int i = 0; i < N; ++i) {
      const float* xv = xp + i * pcols + b * 32;
      __m256 p0 = _mm256_mul_ps(pw.w[0], _mm256_load_ps(xv));
      __m256 p1 = _mm256_mul_ps(pw.w[1], _mm256_load_ps(xv + 8));
#pragma GCC unroll 3
      for (int m = 2; m < 8; m += 2) {
        p0 = _mm256_fmadd_ps(pw.w[m], _mm256_load_ps(xv + 8 * m), p0);
        p1 = _mm256_fmadd_ps(pw.w[m + 1], _mm256_load_ps(xv + 8 * m + 8), p1);
      }
      acc[i] = _mm256_fmadd_ps(_mm256_add_ps(p0, p1), scale, acc[i]);
    }
  }
  for (int i = 0; i < N; ++i) y[i * ldy] = reduce8(acc[i]);
}

void matmul_mxfp4_avx2(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                       int64_t r1) {
  const int64_t cols = w.cols, blocks = cols / 32, pcols = padded_cols(cols);
  thread_local FloatBuffer scratch;
  float* xp = scratch.resize(size_t(n * pcols));
  for (int64_t i = 0; i < n; ++i) permute_activations(x + i * ldx, cols, xp + i * pcols);

  const uint8_t* P = static_cast<const uint8_t*>(w.data);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* packed = P + r * (cols / 2);
    const uint8_t* scales = static_cast<const uint8_t*>(w.scales) + r * blocks;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) mxfp4_row<2>(packed, scales, cols, xp + i * pcols, pcols, y + i * ldy + r, ldy);
    if (i < n) mxfp4_row<1>(packed, scales, cols, xp + i * pcols, pcols, y + i * ldy + r, ldy);
  }
}

// The files are compiled with -mf16c; clang 14's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

}  // namespace

namespace detail {
}  // namespace detail

// The ISA table, or nullptr where the CPU lacks the features.
const Isa* avx2_isa() {
  static const Isa isa{"avx2", matmul_f32_avx2, matmul_bf16_avx2, matmul_mxfp4_avx2, matmul_fp8_avx2,
                       matmul_int4_avx2, gated_act_avx2, tile_scores_avx2, tile_softmax_v4, context_rows_avx2, delta_step_avx2, unary_avx2,
                       widen_fp8_scalar};
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  }();
  return supported ? &isa : nullptr;
}

}  // namespace sluice::device
