// AVX2 + FMA products of f32, bf16 and MXFP4 weights with fp32 activations: the fallback for CPUs
// without AVX-512. Each (row, vector) output is computed by one fixed sequence of operations
// whatever the tile it falls in, so results are batch-invariant (kernels.h).
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/arena.h"
#include "core/dtype.h"
#include "kernels/cpu/kernels.h"

namespace sluice::kernels {
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
// vpshufb looks the 16 codes up in a table of 2·E2M1 (the small integers 0,1,2,3,4,6,8,12 with
// sign), which widen exactly to fp32; the factor 2 is folded into the block scale (2^(e-128) is
// still an exact float for e >= 1). Per block the products are summed into one partial and the
// partial is scaled, as the scalar kernel does. Activations are de-interleaved once per call into
// [even 16 | odd 16] per block, matching the nibble order.
void deinterleave_blocks(const float* x, int64_t cols, float* out) {
  for (int64_t c = 0; c < cols; c += 32) {
    for (int j = 0; j < 16; ++j) {
      out[c + j] = x[c + 2 * j];
      out[c + 16 + j] = x[c + 2 * j + 1];
    }
  }
}

struct BlockWeights {
  __m256 even0, even1, odd0, odd1;  // columns 0,2..14 | 16..30 | 1,3..15 | 17..31 (times 2)
};

inline BlockWeights decode_block(const uint8_t* p) {
  const __m128i table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(bytes, nibble));
  __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble));
  BlockWeights b;
  b.even0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
  b.even1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(lo, lo)));
  b.odd0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
  b.odd1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(hi, hi)));
  return b;
}

// 2^(e-127) / 2: the E8M0 byte minus one as a float exponent, or the subnormal 2^-127 for e = 1.
inline float half_scale(uint8_t e) { return e8m0_to_f32(e) * 0.5f; }

template <int R, int N>
void mxfp4_tile(const uint8_t* packed, const uint8_t* scales, int64_t blocks, const float* xd, int64_t cols, float* y,
                int64_t ldy) {
  __m256 acc[R][N];
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    // Row by row so only one decoded block is live (AVX2 has 16 registers); x comes from L1.
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      if (b % 4 == 0) {
        prefetch_ahead(packed + (R + r) * (cols / 2) + b * 16);
        if (b % 64 == 0) prefetch_ahead(scales + (R + r) * blocks + b);
      }
      const BlockWeights wb = decode_block(packed + r * (cols / 2) + b * 16);
      const __m256 s = _mm256_set1_ps(half_scale(scales[r * blocks + b]));
#pragma GCC unroll 4
      for (int i = 0; i < N; ++i) {
        const float* xb = xd + i * cols + b * 32;
        __m256 part = _mm256_mul_ps(wb.even0, _mm256_loadu_ps(xb));
        part = _mm256_fmadd_ps(wb.even1, _mm256_loadu_ps(xb + 8), part);
        part = _mm256_fmadd_ps(wb.odd0, _mm256_loadu_ps(xb + 16), part);
        part = _mm256_fmadd_ps(wb.odd1, _mm256_loadu_ps(xb + 24), part);
        acc[r][i] = _mm256_fmadd_ps(part, s, acc[r][i]);
      }
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) y[(k % N) * ldy + k / N] = reduce8(acc[k / N][k % N]);
}

template <int R>
void mxfp4_rows(const uint8_t* packed, const uint8_t* scales, int64_t blocks, const float* xd, int64_t cols, int64_t n,
                float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + kVecTile <= n; i += kVecTile)
    mxfp4_tile<R, kVecTile>(packed, scales, blocks, xd + i * cols, cols, y + i * ldy, ldy);
  if (i < n) mxfp4_tile<R, 1>(packed, scales, blocks, xd + i * cols, cols, y + i * ldy, ldy);
}

void matmul_mxfp4_avx2(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                       int64_t r1) {
  const int64_t cols = w.cols, blocks = cols / 32;
  thread_local FloatBuffer scratch;
  float* xd = scratch.resize(size_t(n * cols));
  for (int64_t i = 0; i < n; ++i) deinterleave_blocks(x + i * ldx, cols, xd + i * cols);

  const uint8_t* P = static_cast<const uint8_t*>(w.data);
  int64_t r = r0;
  for (; r + kRowTile <= r1; r += kRowTile)
    mxfp4_rows<kRowTile>(P + r * (cols / 2), w.scales + r * blocks, blocks, xd, cols, n, y + r, ldy);
  for (; r < r1; ++r) mxfp4_rows<1>(P + r * (cols / 2), w.scales + r * blocks, blocks, xd, cols, n, y + r, ldy);
}

// The files are compiled with -mf16c; clang 14's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

}  // namespace

namespace detail {
const char kAvx2KernelsLinked = 1;  // referenced from kernels.h so this object is always linked
}  // namespace detail

// Strong definition over dispatch.cpp's weak default; nullptr where the CPU lacks the features.
const Isa* avx2_isa() {
  static const Isa isa{"avx2", matmul_f32_avx2, matmul_bf16_avx2, matmul_mxfp4_avx2};
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  }();
  return supported ? &isa : nullptr;
}

}  // namespace sluice::kernels
