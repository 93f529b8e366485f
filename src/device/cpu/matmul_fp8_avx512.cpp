// AVX-512 product of FP8 e4m3 weights with F32 128x128 block scales (DeepSeek-V3's released
// format) and fp32 activations, for AVX-512 CPUs without VBMI (Skylake-X, Cascade Lake; the others
// take matmul_fp8_vbmi.cpp's table decode). Decoding is exact arithmetic on the byte: sign-extended
// to 16 bits, shifted left by 7 and masked, the byte's sign lands in bit 15 and its 4 exponent and 3
// mantissa bits in bits 10..13 and 7..9: an fp16 of the e4m3 value times 2^-8, which vcvtph2ps
// widens exactly to a normal fp32 (fp16 subnormals, from e4m3 subnormal codes, included). No FMA
// operand is an fp32 subnormal (Intel cores take a microcode assist per such operand; the earlier
// decode into fp32 fields made every subnormal code one), and no MXCSR mode is relied on. The 2^8
// is carried by the activations (scaled once per call, exact). NaN codes (0x7f, 0xff) never occur
// in valid checkpoints; a block row that holds one is decoded by the scalar rule instead, so the
// result is NaN as the scalar kernel's. The scan that finds them is skipped for weights marked
// fp8_finite (the loaders check resident weights once).
// Per (row, vector) the 16-lane partial sums of each 128-column block are multiplied by the block's
// scale and accumulated, then reduced by a fixed tree: the same sequence of operations whatever
// tile the output falls in (batch invariance, device/weight.h); the scalar kernel is the oracle.
#include "device/cpu/simd_avx512.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

// A one-vector tile prefetches the next tile's rows with the hint fp8_next_tile_hint() chose for
// this CPU (non-temporally on AMD, into L2 on Intel: dispatch.cpp says why).
// Prefetching the same rows further along measured slower with either hint on Zen 4 (the hardware
// prefetcher already follows them). Tiles of several vectors read their rows once per pair of
// vectors and keep T1.
// Tiles: 8 rows for one vector (decode: 8 independent streams), 4 rows x 2 vectors otherwise (each
// decoded weight used twice). Per (row, vector) a block's partial sum and the running total live in
// registers; the operations for one output are the same in either tile.
constexpr int kRowTile = 8;
constexpr int kRowTile2 = 4;

// 16 e4m3 bytes -> their values times 2^-8 (the activations carry the 2^8).
inline __m512 decode16(__m128i raw) {
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7), _mm256_set1_epi16(int16_t(0xbf80)));
  return _mm512_cvtph_ps(h);
}

// The values times 2^-8 of 16 bytes at p (count < 16: the rest read as 0), by the scalar rule when
// one is a NaN code.
inline __m512 load16(const uint8_t* p, int count, bool has_nan) {
  if (has_nan) {
    alignas(64) float v[16] = {};
    for (int i = 0; i < count; ++i) v[i] = fp8_value_scaled(p[i]);
    return _mm512_load_ps(v);
  }
  const __m128i raw = count == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
                                  : _mm_maskz_loadu_epi8(__mmask16((1u << count) - 1u), p);
  return decode16(raw);
}

// Whether the `count` bytes at p hold a NaN code (0x7f or 0xff).
inline bool any_nan(const uint8_t* p, int64_t count) {
  const __m512i low7 = _mm512_set1_epi8(0x7f);
  int64_t i = 0;
  for (; i + 64 <= count; i += 64)
    if (_mm512_cmpeq_epi8_mask(_mm512_and_si512(_mm512_loadu_si512(p + i), low7), low7)) return true;
  if (i < count) {
    const __mmask64 m = (__mmask64(1) << (count - i)) - 1;
    if (_mm512_mask_cmpeq_epi8_mask(m, _mm512_and_si512(_mm512_maskz_loadu_epi8(m, p + i), low7), low7)) return true;
  }
  return false;
}

// y[i*ldy + r] for R rows (row stride `cols` bytes, scale rows `srow[r]`) and N vectors.
template <int R, int N, int Hint = kFp8PrefetchT1>
void fp8_tile(const uint8_t* w, bool finite, const float* const* srow, int64_t cols, const float* x, int64_t ldx,
              float* y, int64_t ldy) {
  __m512 total[R][N];
#pragma GCC unroll 8
  for (int k = 0; k < R * N; ++k) total[k / N][k % N] = _mm512_setzero_ps();
  const int64_t col_blocks = (cols + kFp8Block - 1) / kFp8Block;
  for (int64_t b = 0; b < col_blocks; ++b) {
    const int64_t c0 = b * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
    bool nan[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      nan[r] = !finite && any_nan(w + r * cols + c0, c1 - c0);
      avx512::prefetch_next<Hint>(w + (R + r) * cols + c0);
      avx512::prefetch_next<Hint>(w + (R + r) * cols + c0 + 64);
    }
    __m512 part[R][N];
#pragma GCC unroll 8
    for (int k = 0; k < R * N; ++k) part[k / N][k % N] = _mm512_setzero_ps();
    bool any = false;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) any = any || nan[r];
    if (c1 - c0 == kFp8Block && !any) {
      // A whole block of valid codes: 8 unmasked steps.
#pragma GCC unroll 8
      for (int64_t c = c0; c < c1; c += 16) {
        __m512 wv[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          wv[r] = decode16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + r * cols + c)));
#pragma GCC unroll 2
        for (int i = 0; i < N; ++i) {
          const __m512 xv = _mm512_loadu_ps(x + i * ldx + c);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) part[r][i] = _mm512_fmadd_ps(wv[r], xv, part[r][i]);
        }
      }
    } else {
      for (int64_t c = c0; c < c1; c += 16) {
        const int count = int(std::min<int64_t>(16, c1 - c));
        const __mmask16 m = __mmask16((1u << count) - 1u);
        __m512 wv[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) wv[r] = load16(w + r * cols + c, count, nan[r]);
#pragma GCC unroll 2
        for (int i = 0; i < N; ++i) {
          const __m512 xv = _mm512_maskz_loadu_ps(m, x + i * ldx + c);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) part[r][i] = _mm512_fmadd_ps(wv[r], xv, part[r][i]);
        }
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
void fp8_rows(const uint8_t* w, bool finite, const float* const* srow, int64_t cols, const float* x, int64_t ldx, int64_t n,
              float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + N <= n; i += N) fp8_tile<R, N>(w, finite, srow, cols, x + i * ldx, ldx, y + i * ldy, ldy);
  if (i < n) fp8_tile<R, 1>(w, finite, srow, cols, x + i * ldx, ldx, y + i * ldy, ldy);
}

}  // namespace

void matmul_fp8_avx512(const Weight& w, const float* x_in, int64_t ldx_in, int64_t n, float* y, int64_t ldy,
                       int64_t r0, int64_t r1) {
  const int64_t ldx = w.cols;
  const float* x = fp8_scaled_activations(x_in, ldx_in, n, w.cols);
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
        fp8_tile<kRowTile, 1, decltype(hint)::value>(W + r * w.cols, w.fp8_finite, srow, w.cols, x, ldx, y + r, ldy);
      }
    });
  } else {
    for (; r + kRowTile2 <= r1; r += kRowTile2) {
      for (int k = 0; k < kRowTile2; ++k) srow[k] = scale_row(r + k);
      fp8_rows<kRowTile2, 2>(W + r * w.cols, w.fp8_finite, srow, w.cols, x, ldx, n, y + r, ldy);
    }
  }
  for (; r < r1; ++r) {
    srow[0] = scale_row(r);
    fp8_rows<1, 2>(W + r * w.cols, w.fp8_finite, srow, w.cols, x, ldx, n, y + r, ldy);
  }
}

}  // namespace sluice::device
