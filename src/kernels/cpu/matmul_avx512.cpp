// AVX-512 (F/BW/VL/DQ) products of f32, bf16 and MXFP4 weights with fp32 activations. Each
// (row, vector) output is computed by one fixed sequence of vector operations whatever the tile it
// falls in, so results are batch-invariant (kernels.h); the scalar kernels are the oracle.
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
#include <cpuid.h>

#include <algorithm>

#include "core/arena.h"
#include "core/dtype.h"
#include "kernels/cpu/kernels.h"

namespace sluice::kernels {
namespace {

// Rows and vectors handled together: each weight vector loaded is used for up to kVecTile inputs
// and kRowTile independent accumulation chains hide the FMA latency when n = 1.
constexpr int kRowTile = 4;
constexpr int kVecTile = 4;

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

// 16 consecutive weights as fp32 (bf16 widened exactly by a 16-bit shift); masked lanes read as 0.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const uint16_t* p, __mmask16 m) {
  __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

// One accumulator per (row, vector) over 16-column steps, the tail step masked, then the fixed
// 16-lane reduction tree of _mm512_reduce_add_ps.
template <typename T, int R, int N>
void dense_tile(const T* w, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy) {
  __m512 acc[R][N];
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = load16(w + r * cols + c);
#pragma GCC unroll 4
    for (int i = 0; i < N; ++i) {
      __m512 xv = _mm512_loadu_ps(x + i * ldx + c);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_fmadd_ps(wv[r], xv, acc[r][i]);
    }
  }
  if (c < cols) {
    __mmask16 m = tail_mask(cols - c);
    __m512 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = load16(w + r * cols + c, m);
#pragma GCC unroll 4
    for (int i = 0; i < N; ++i) {
      __m512 xv = _mm512_maskz_loadu_ps(m, x + i * ldx + c);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_fmadd_ps(wv[r], xv, acc[r][i]);
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) y[(k % N) * ldy + k / N] = reduce16(acc[k / N][k % N]);
}

template <typename T, int R>
void dense_rows(const T* w, int64_t cols, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + kVecTile <= n; i += kVecTile) dense_tile<T, R, kVecTile>(w, cols, x + i * ldx, ldx, y + i * ldy, ldy);
  switch (n - i) {
    case 3: dense_tile<T, R, 3>(w, cols, x + i * ldx, ldx, y + i * ldy, ldy); break;
    case 2: dense_tile<T, R, 2>(w, cols, x + i * ldx, ldx, y + i * ldy, ldy); break;
    case 1: dense_tile<T, R, 1>(w, cols, x + i * ldx, ldx, y + i * ldy, ldy); break;
    default: break;
  }
}

template <typename T>
void matmul_dense(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                  int64_t r1) {
  const T* W = static_cast<const T*>(w.data);
  int64_t r = r0;
  for (; r + kRowTile <= r1; r += kRowTile) dense_rows<T, kRowTile>(W + r * w.cols, w.cols, x, ldx, n, y + r, ldy);
  for (; r < r1; ++r) dense_rows<T, 1>(W + r * w.cols, w.cols, x, ldx, n, y + r, ldy);
}

void matmul_f32_avx512(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                       int64_t r1) {
  matmul_dense<float>(w, x, ldx, n, y, ldy, r0, r1);
}

void matmul_bf16_avx512(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                        int64_t r1) {
  matmul_dense<uint16_t>(w, x, ldx, n, y, ldy, r0, r1);
}

// ---- MXFP4 ----
// A 32-column block is 16 bytes; zero-extending them to 16 dword lanes puts byte j (columns 2j and
// 2j+1) in lane j, and vpermps reads only the low 4 bits of each lane, so the low nibbles index
// the E2M1 table directly and the high nibbles after one shift. The activations are therefore
// de-interleaved once per call into [even 16 | odd 16] per block.
//
// The block's scale is applied to the 16-entry table (E2M1 value x 2^(e-127) is exact for every
// e in 1..252), so each vector costs two FMAs per block. For e >= 253 that product can overflow
// where the scalar's Σ(w·x)·2^(e-127) would not, so a row holding such a scale takes the
// scale-after-sum path instead; the choice depends only on the row, keeping batch invariance.
constexpr uint8_t kPrescaleMaxScale = 252;

void deinterleave_blocks(const float* x, int64_t cols, float* out) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int64_t c = 0; c < cols; c += 32) {
    __m512 a = _mm512_loadu_ps(x + c), b = _mm512_loadu_ps(x + c + 16);
    _mm512_store_ps(out + c, _mm512_permutex2var_ps(a, even, b));
    _mm512_store_ps(out + c + 16, _mm512_permutex2var_ps(a, odd, b));
  }
}

bool row_prescalable(const uint8_t* scales, int64_t blocks) {
  const __m512i limit = _mm512_set1_epi8(char(kPrescaleMaxScale));
  for (int64_t b = 0; b < blocks; b += 64) {
    __mmask64 m = blocks - b >= 64 ? ~__mmask64(0) : (__mmask64(1) << (blocks - b)) - 1;
    __m512i s = _mm512_maskz_loadu_epi8(m, scales + b);
    if (_mm512_mask_cmpgt_epu8_mask(m, s, limit)) return false;
  }
  return true;
}

// Up to 16 scale bytes -> 2^(e-127) as floats (the E8M0 byte is the float's exponent field).
inline void scales_to_f32(const uint8_t* s, int64_t count, float* out) {
  __m128i bytes = _mm_maskz_loadu_epi8(tail_mask(count), s);
  _mm512_store_ps(out, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu8_epi32(bytes), 23)));
}

inline __m512i block_codes(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Prescaled path: table·2^(e-127), then acc += w_even·x_even; acc += w_odd·x_odd per block.
template <int R, int N>
void mxfp4_tile_prescaled(const uint8_t* packed, const uint8_t* scales, int64_t blocks, const float* xd,
                          int64_t cols, float* y, int64_t ldy) {
  const __m512 table = _mm512_loadu_ps(kE2M1Values);
  __m512 acc[R][N];
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm512_setzero_ps();
  alignas(64) float sc[R][16];
  for (int64_t g = 0; g < blocks; g += 16) {
    const int64_t count = std::min<int64_t>(16, blocks - g);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) scales_to_f32(scales + r * blocks + g, count, sc[r]);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t b = g + j;
      __m512 lo[R], hi[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m512 t = _mm512_mul_ps(table, _mm512_set1_ps(sc[r][j]));
        __m512i codes = block_codes(packed + r * (cols / 2) + b * 16);
        lo[r] = _mm512_permutexvar_ps(codes, t);
        hi[r] = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), t);
      }
#pragma GCC unroll 4
      for (int i = 0; i < N; ++i) {
        __m512 xe = _mm512_load_ps(xd + i * cols + b * 32);
        __m512 xo = _mm512_load_ps(xd + i * cols + b * 32 + 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          acc[r][i] = _mm512_fmadd_ps(lo[r], xe, acc[r][i]);
          acc[r][i] = _mm512_fmadd_ps(hi[r], xo, acc[r][i]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) y[(k % N) * ldy + k / N] = reduce16(acc[k / N][k % N]);
}

// Scale-after-sum path for one row (rows with extreme scales; never on the hot path).
template <int N>
void mxfp4_row_postscaled(const uint8_t* packed, const uint8_t* scales, int64_t blocks, const float* xd, int64_t cols,
                          float* y, int64_t ldy) {
  const __m512 table = _mm512_loadu_ps(kE2M1Values);
  __m512 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512 s = _mm512_set1_ps(e8m0_to_f32(scales[b]));
    __m512i codes = block_codes(packed + b * 16);
    __m512 lo = _mm512_permutexvar_ps(codes, table);
    __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), table);
    for (int i = 0; i < N; ++i) {
      __m512 part = _mm512_mul_ps(lo, _mm512_load_ps(xd + i * cols + b * 32));
      part = _mm512_fmadd_ps(hi, _mm512_load_ps(xd + i * cols + b * 32 + 16), part);
      acc[i] = _mm512_fmadd_ps(part, s, acc[i]);
    }
  }
  for (int i = 0; i < N; ++i) y[i * ldy] = reduce16(acc[i]);
}

template <int R>
void mxfp4_rows(const uint8_t* packed, const uint8_t* scales, int64_t blocks, const float* xd, int64_t cols, int64_t n,
                float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + kVecTile <= n; i += kVecTile)
    mxfp4_tile_prescaled<R, kVecTile>(packed, scales, blocks, xd + i * cols, cols, y + i * ldy, ldy);
  switch (n - i) {
    case 3: mxfp4_tile_prescaled<R, 3>(packed, scales, blocks, xd + i * cols, cols, y + i * ldy, ldy); break;
    case 2: mxfp4_tile_prescaled<R, 2>(packed, scales, blocks, xd + i * cols, cols, y + i * ldy, ldy); break;
    case 1: mxfp4_tile_prescaled<R, 1>(packed, scales, blocks, xd + i * cols, cols, y + i * ldy, ldy); break;
    default: break;
  }
}

void mxfp4_row_any(const uint8_t* packed, const uint8_t* scales, int64_t blocks, const float* xd, int64_t cols,
                   int64_t n, float* y, int64_t ldy) {
  if (row_prescalable(scales, blocks)) {
    mxfp4_rows<1>(packed, scales, blocks, xd, cols, n, y, ldy);
    return;
  }
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) mxfp4_row_postscaled<2>(packed, scales, blocks, xd + i * cols, cols, y + i * ldy, ldy);
  if (i < n) mxfp4_row_postscaled<1>(packed, scales, blocks, xd + i * cols, cols, y + i * ldy, ldy);
}

void matmul_mxfp4_avx512(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                         int64_t r1) {
  const int64_t cols = w.cols, blocks = cols / 32;
  thread_local FloatBuffer scratch;
  float* xd = scratch.resize(size_t(n * cols));
  for (int64_t i = 0; i < n; ++i) deinterleave_blocks(x + i * ldx, cols, xd + i * cols);

  const uint8_t* P = static_cast<const uint8_t*>(w.data);
  int64_t r = r0;
  for (; r + kRowTile <= r1; r += kRowTile) {
    bool prescalable = true;
    for (int k = 0; k < kRowTile; ++k) prescalable = prescalable && row_prescalable(w.scales + (r + k) * blocks, blocks);
    if (prescalable) {
      mxfp4_rows<kRowTile>(P + r * (cols / 2), w.scales + r * blocks, blocks, xd, cols, n, y + r, ldy);
    } else {
      for (int k = 0; k < kRowTile; ++k)
        mxfp4_row_any(P + (r + k) * (cols / 2), w.scales + (r + k) * blocks, blocks, xd, cols, n, y + r + k, ldy);
    }
  }
  for (; r < r1; ++r) mxfp4_row_any(P + r * (cols / 2), w.scales + r * blocks, blocks, xd, cols, n, y + r, ldy);
}

// The files are compiled with -mf16c; clang 14's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

}  // namespace

namespace detail {
const char kAvx512KernelsLinked = 1;  // referenced from kernels.h so this object is always linked
}  // namespace detail

// Strong definition over dispatch.cpp's weak default; nullptr where the CPU lacks the features.
const Isa* avx512_isa() {
  static const Isa isa{"avx512", matmul_f32_avx512, matmul_bf16_avx512, matmul_mxfp4_avx512};
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma") && cpu_has_f16c();
  }();
  return supported ? &isa : nullptr;
}

}  // namespace sluice::kernels
