// AVX-512 (F/BW/VL/DQ) products of f32, bf16 and MXFP4 weights with fp32 activations. Each
// (row, vector) output is computed by one fixed sequence of vector operations whatever the tile it
// falls in, so results are batch-invariant (kernels.h); the scalar kernels are the oracle.

#include "device/cpu/simd_avx512.h"

#include <cpuid.h>

#include <algorithm>
#include <cstring>

#include "core/arena.h"
#include "core/dtype.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

// Rows and vectors handled together: each weight vector loaded is used for up to kVecTile inputs
// and kRowTile independent accumulation chains hide the FMA latency when n = 1.
constexpr int kRowTile = 4;
constexpr int kVecTile = 4;

using avx512::reduce16;
using avx512::tail_mask;

// The weights stream from DRAM once per call: each tile prefetches the same columns of the next
// row tile (a few KiB ahead), which the hardware prefetchers alone do not keep up with while the
// loop is busy decoding. Prefetches past the matrix are harmless (they never fault).
template <typename T>
inline void prefetch_ahead(const T* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
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
// 16-lane reduction tree.
template <typename T, int R, int N>
void dense_tile(const T* w, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy) {
  __m512 acc[R][N];
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      wv[r] = load16(w + r * cols + c);
      prefetch_ahead(w + (R + r) * cols + c);
    }
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
  avx512::store_sums<R, N>(acc, y, ldy);
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
// Work goes in chunks of 4 blocks (128 columns, 64 bytes of codes per row). Read as 32 words,
// nibble s of word j is column 4j+s; after a right shift by 4s it sits in the word's low bits,
// and one vpermw looks all 32 up in a table of the E2M1 values as bf16 (exact; the table is the
// 16 values twice because vpermw reads 5 index bits). Each dword then holds two bf16 weights,
// widened exactly by a 16-bit shift (low word: column 8d+s) and a mask (high word: column
// 8d+4+s). The activations are permuted once per call to match, so per chunk and vector the
// work is 8 FMAs into two partial sums, their sum, and one FMA that applies the four block
// scales (lanes 4b..4b+3 belong to block b): Σ(w·x)·2^(e-127) per block, like the scalar kernel,
// so no scale byte can overflow where scalar would not. On Zen 4 shuffles and shifts share pipes
// with the FMAs; of the decodes we measured (vpermps per 16 weights with the table pre-scaled,
// vpermps per 16 on 64-byte loads, vpermw per 32) this one costs least, about 4 cycles per
// block and row at n = 1 against about 2.5 for the FMAs alone, so n = 1 is bound by the core,
// not by memory. One vector (decode) goes nibble position by nibble position across four rows,
// so each activation vector is loaded once per chunk for the four (faster, same bits). A Zen 4
// core retires one 512-bit FMA per cycle, so a chunk's 9 FMAs alone take about as long as reading
// its 64 bytes at the one-core read floor (9 cycles); the decode's 4 vpermw, 7 shifts, 5 ands and
// the scales' rotate add about 7-8 cycles more (each instruction's cost next to a stream of FMAs:
// bench/issue_bench): 16-17 cycles per chunk and row, which is what kernels_bench measures at
// n = 1. With n > 1 the 10 FMA-pipe operations per chunk and vector bound the tile, whatever the
// decode costs (8 x 9 FMA cycles is already 4.5x a one-vector chunk). Figures in
// docs/BENCHMARKS.md, "Design measurements behind code comments".
constexpr int64_t kChunkCols = 128;
constexpr int64_t kChunkBlocks = kChunkCols / 32;

// bf16 bit patterns of the 16 E2M1 values (low nibble = code), duplicated for the 5-bit index.
alignas(64) constexpr uint16_t kE2M1Bf16x2[32] = {
    0x0000, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0,
    0x8000, 0xbf00, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0xc080, 0xc0c0,
    0x0000, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0,
    0x8000, 0xbf00, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0xc080, 0xc0c0};

inline int64_t padded_cols(int64_t cols) { return (cols + kChunkCols - 1) / kChunkCols * kChunkCols; }

// x -> per chunk 8 vectors of 16: vector 2s+h, lane d = x[8d + 4h + s]; zero past cols.
void permute_activations(const float* x, int64_t cols, float* out) {
  alignas(64) static const int32_t index[8][16] = {
      {0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120},
      {4, 12, 20, 28, 36, 44, 52, 60, 68, 76, 84, 92, 100, 108, 116, 124},
      {1, 9, 17, 25, 33, 41, 49, 57, 65, 73, 81, 89, 97, 105, 113, 121},
      {5, 13, 21, 29, 37, 45, 53, 61, 69, 77, 85, 93, 101, 109, 117, 125},
      {2, 10, 18, 26, 34, 42, 50, 58, 66, 74, 82, 90, 98, 106, 114, 122},
      {6, 14, 22, 30, 38, 46, 54, 62, 70, 78, 86, 94, 102, 110, 118, 126},
      {3, 11, 19, 27, 35, 43, 51, 59, 67, 75, 83, 91, 99, 107, 115, 123},
      {7, 15, 23, 31, 39, 47, 55, 63, 71, 79, 87, 95, 103, 111, 119, 127}};
  for (int64_t c = 0; c < cols; c += kChunkCols) {
    const int64_t valid = std::min<int64_t>(kChunkCols, cols - c);
    for (int v = 0; v < 8; ++v) {
      __m512i idx = _mm512_load_si512(index[v]);
      __mmask16 in = _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32(int32_t(valid)));
      _mm512_store_ps(out + c + v * 16, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, idx, x + c, 4));
    }
  }
}

struct ChunkWeights {
  __m512 w[8];  // w[2s+h] matches activation vector 2s+h
};

inline ChunkWeights decode_chunk(__m512i raw, __m512i table) {
  const __m512i high_word = _mm512_set1_epi32(int32_t(0xffff0000u));
  ChunkWeights cw;
#pragma GCC unroll 4
  for (int s = 0; s < 4; ++s) {
    __m512i idx = s == 0 ? raw : _mm512_srli_epi16(raw, unsigned(4 * s));
    __m512i pairs = _mm512_permutexvar_epi16(idx, table);
    cw.w[2 * s] = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
    cw.w[2 * s + 1] = _mm512_castsi512_ps(_mm512_and_si512(pairs, high_word));
  }
  return cw;
}

// The chunk's 4 scale bytes -> 2^(e-127) in lanes 4b..4b+3 (an E8M0 byte is a float's exponent
// field): broadcast the 4 bytes as one dword, rotate byte b into bits 30..23, mask. Blocks past
// the end of the row read as scale 0 (their weights and activations are 0 too).
inline __m512 chunk_scales(const uint8_t* s, int64_t valid_blocks) {
  const __m512i rotate = _mm512_setr_epi32(23, 23, 23, 23, 15, 15, 15, 15, 7, 7, 7, 7, 31, 31, 31, 31);
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  __m512i four;
  if (valid_blocks >= kChunkBlocks) {
    uint32_t bytes;
    std::memcpy(&bytes, s, 4);
    four = _mm512_set1_epi32(int32_t(bytes));
  } else {
    four = _mm512_broadcastd_epi32(_mm_maskz_loadu_epi8(tail_mask(valid_blocks), s));
  }
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_rolv_epi32(four, rotate), exponent));
}

// y[i*ldy + r] for R rows and N vectors; xp holds the permuted activations, stride pcols.
// chunk(r, b, scale) gives row r's weights of the chunk starting at block b, and its scales.
template <int R, int N, class Chunk>
void mxfp4_tile_of(Chunk&& chunk, int64_t blocks, const float* xp, int64_t pcols, float* y, int64_t ldy) {
  __m512 acc[R][N];
#pragma GCC unroll 16
  for (int k = 0; k < R * N; ++k) acc[k / N][k % N] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; b += kChunkBlocks) {
    const float* xq = xp + b * 32;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      __m512 scale;
      const ChunkWeights cw = chunk(r, b, scale);
#pragma GCC unroll 4
      for (int i = 0; i < N; ++i) {
        const float* xv = xq + i * pcols;
        __m512 even = _mm512_mul_ps(cw.w[0], _mm512_load_ps(xv));
        __m512 odd = _mm512_mul_ps(cw.w[1], _mm512_load_ps(xv + 16));
#pragma GCC unroll 3
        for (int s = 1; s < 4; ++s) {
          even = _mm512_fmadd_ps(cw.w[2 * s], _mm512_load_ps(xv + 32 * s), even);
          odd = _mm512_fmadd_ps(cw.w[2 * s + 1], _mm512_load_ps(xv + 32 * s + 16), odd);
        }
        acc[r][i] = _mm512_fmadd_ps(_mm512_add_ps(even, odd), scale, acc[r][i]);
      }
    }
  }
  avx512::store_sums<R, N>(acc, y, ldy);
}

// Row r's chunk at block b, decoded from the packed codes and scale bytes.
inline ChunkWeights read_chunk(const uint8_t* packed, const uint8_t* scales, int64_t blocks, int64_t row_bytes,
                               int R, int r, int64_t b, __m512i table, __m512& scale) {
  const int64_t valid_blocks = std::min<int64_t>(kChunkBlocks, blocks - b);
  const uint8_t* src = packed + r * row_bytes + b * 16;
  prefetch_ahead(src + R * row_bytes);
  if (b % 64 == 0) prefetch_ahead(scales + (R + r) * blocks + b);
  // A full chunk is 64 bytes: shifting a 64-bit mask by 64 is undefined (UBSan), so it is all ones.
  const __mmask64 valid_bytes =
      valid_blocks == kChunkBlocks ? ~__mmask64(0) : (__mmask64(1) << (valid_blocks * 16)) - 1;
  __m512i raw = valid_blocks == kChunkBlocks ? _mm512_loadu_si512(src) : _mm512_maskz_loadu_epi8(valid_bytes, src);
  scale = chunk_scales(scales + r * blocks + b, valid_blocks);
  return decode_chunk(raw, table);
}

template <int R, int N>
void mxfp4_tile(const uint8_t* packed, const uint8_t* scales, int64_t cols, const float* xp, int64_t pcols, float* y,
                int64_t ldy) {
  const int64_t blocks = cols / 32, row_bytes = cols / 2;
  const __m512i table = _mm512_load_si512(kE2M1Bf16x2);
  mxfp4_tile_of<R, N>(
      [&](int r, int64_t b, __m512& scale) { return read_chunk(packed, scales, blocks, row_bytes, R, r, b, table, scale); },
      blocks, xp, pcols, y, ldy);
}

// A tile's R rows decoded once for the many vectors of a long pass: per row and chunk, the 8
// weight vectors read_chunk gives, then its scale vector (9 x 16 floats). Decoding was about a
// third of a 4-row, 4-vector tile's operations; mxfp4_tile_of then reads them back unchanged, so
// the products are the same bits.
constexpr int64_t kDecodedChunk = 9 * 16;
template <int R>
void decode_rows(const uint8_t* packed, const uint8_t* scales, int64_t cols, float* dec) {
  const int64_t blocks = cols / 32, row_bytes = cols / 2, chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  const __m512i table = _mm512_load_si512(kE2M1Bf16x2);
  for (int r = 0; r < R; ++r)
    for (int64_t c = 0; c < chunks; ++c) {
      __m512 scale;
      const ChunkWeights cw = read_chunk(packed, scales, blocks, row_bytes, R, r, c * kChunkBlocks, table, scale);
      float* d = dec + (r * chunks + c) * kDecodedChunk;
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) _mm512_store_ps(d + 16 * k, cw.w[k]);
      _mm512_store_ps(d + 128, scale);
    }
}

template <int R, int N>
void mxfp4_tile_decoded(const float* dec, int64_t blocks, const float* xp, int64_t pcols, float* y, int64_t ldy) {
  const int64_t chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  mxfp4_tile_of<R, N>(
      [&](int r, int64_t b, __m512& scale) {
        const float* d = dec + (r * chunks + b / kChunkBlocks) * kDecodedChunk;
        ChunkWeights cw;
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) cw.w[k] = _mm512_load_ps(d + 16 * k);
        scale = _mm512_load_ps(d + 128);
        return cw;
      },
      blocks, xp, pcols, y, ldy);
}

// Vectors [i, n) of decoded rows in tiles of VT, the last one of n - i < VT.
template <int R, int VT>
void mxfp4_vectors_decoded(const float* dec, int64_t blocks, const float* xp, int64_t pcols, int64_t n, float* y,
                           int64_t ldy) {
  int64_t i = 0;
  for (; i + VT <= n; i += VT) mxfp4_tile_decoded<R, VT>(dec, blocks, xp + i * pcols, pcols, y + i * ldy, ldy);
  if constexpr (VT > 1) {
    if (n - i > 0) mxfp4_vectors_decoded<R, VT - 1>(dec, blocks, xp + i * pcols, pcols, n - i, y + i * ldy, ldy);
  }
}

// One vector, R rows: the same per-(row, vector) sequence as mxfp4_tile<R, 1> (so the same bits),
// nibble position by nibble position across the rows, so each pair of activation vectors is
// loaded once for all R rows instead of once per row.
template <int R>
void mxfp4_tile_one(const uint8_t* packed, const uint8_t* scales, int64_t cols, const float* xp, float* y) {
  const int64_t blocks = cols / 32, row_bytes = cols / 2;
  const __m512i table = _mm512_load_si512(kE2M1Bf16x2);
  const __m512i high_word = _mm512_set1_epi32(int32_t(0xffff0000u));
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; b += kChunkBlocks) {
    const int64_t valid_blocks = std::min<int64_t>(kChunkBlocks, blocks - b);
    const __mmask64 valid_bytes =
        valid_blocks == kChunkBlocks ? ~__mmask64(0) : (__mmask64(1) << (valid_blocks * 16)) - 1;
    const float* xq = xp + b * 32;
    __m512i raw[R];
    __m512 even[R], odd[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* src = packed + r * row_bytes + b * 16;
      prefetch_ahead(src + R * row_bytes);
      if (b % 64 == 0) prefetch_ahead(scales + (R + r) * blocks + b);
      raw[r] = valid_blocks == kChunkBlocks ? _mm512_loadu_si512(src) : _mm512_maskz_loadu_epi8(valid_bytes, src);
    }
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
      const __m512 x0 = _mm512_load_ps(xq + 32 * s), x1 = _mm512_load_ps(xq + 32 * s + 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i idx = s == 0 ? raw[r] : _mm512_srli_epi16(raw[r], unsigned(4 * s));
        const __m512i pairs = _mm512_permutexvar_epi16(idx, table);
        const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
        const __m512 w1 = _mm512_castsi512_ps(_mm512_and_si512(pairs, high_word));
        if (s == 0) {
          even[r] = _mm512_mul_ps(w0, x0);
          odd[r] = _mm512_mul_ps(w1, x1);
        } else {
          even[r] = _mm512_fmadd_ps(w0, x0, even[r]);
          odd[r] = _mm512_fmadd_ps(w1, x1, odd[r]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_add_ps(even[r], odd[r]), chunk_scales(scales + r * blocks + b, valid_blocks),
                               acc[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r] = reduce16(acc[r]);
}

// Vectors [i, n) in tiles of VT, the last one of n - i < VT.
template <int R, int VT>
void mxfp4_vectors(const uint8_t* packed, const uint8_t* scales, int64_t cols, const float* xp, int64_t pcols,
                   int64_t n, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + VT <= n; i += VT) mxfp4_tile<R, VT>(packed, scales, cols, xp + i * pcols, pcols, y + i * ldy, ldy);
  if constexpr (VT > 1) {
    if (n - i > 0) mxfp4_vectors<R, VT - 1>(packed, scales, cols, xp + i * pcols, pcols, n - i, y + i * ldy, ldy);
  }
}

template <int R>
void mxfp4_rows(const uint8_t* packed, const uint8_t* scales, int64_t cols, const float* xp, int64_t pcols, int64_t n,
                float* y, int64_t ldy) {
  if (n == 1) mxfp4_tile_one<R>(packed, scales, cols, xp, y);
  else mxfp4_vectors<R, kVecTile>(packed, scales, cols, xp, pcols, n, y, ldy);
}

void matmul_mxfp4_avx512(const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0,
                         int64_t r1) {
  const int64_t cols = w.cols, pcols = padded_cols(cols);
  thread_local FloatBuffer scratch;
  float* xp = scratch.resize(size_t(n * pcols));
  for (int64_t i = 0; i < n; ++i) permute_activations(x + i * ldx, cols, xp + i * pcols);
  // Tiles of 4 rows: 4 vectors at a time (fewer rows or more vectors per tile measured slower: the
  // products are bound by the FMA pipes once n > 1), one vector nibble position by nibble position.
  const int64_t blocks = cols / 32;
  const uint8_t* P = static_cast<const uint8_t*>(w.data);
  const uint8_t* S = static_cast<const uint8_t*>(w.scales);
  // Rows serving at least this many vectors are decoded once (decode_rows) rather than per tile.
  constexpr int64_t kDecodeFor = 4 * kVecTile;
  thread_local FloatBuffer decoded;
  float* dec = n >= kDecodeFor ? decoded.resize(size_t(kRowTile * (pcols / kChunkCols) * kDecodedChunk)) : nullptr;
  int64_t r = r0;
  for (; r + kRowTile <= r1; r += kRowTile) {
    if (dec) {
      decode_rows<kRowTile>(P + r * (cols / 2), S + r * blocks, cols, dec);
      mxfp4_vectors_decoded<kRowTile, kVecTile>(dec, blocks, xp, pcols, n, y + r, ldy);
    } else {
      mxfp4_rows<kRowTile>(P + r * (cols / 2), S + r * blocks, cols, xp, pcols, n, y + r, ldy);
    }
  }
  for (; r < r1; ++r) mxfp4_rows<1>(P + r * (cols / 2), S + r * blocks, cols, xp, pcols, n, y + r, ldy);
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
namespace {

bool cpu_has_avx512() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma") && cpu_has_f16c();
  }();
  return supported;
}

bool cpu_has_avx512_vbmi() { return cpu_has_avx512() && __builtin_cpu_supports("avx512vbmi"); }

// The table without VBMI kernels (named apart only where both exist on one CPU).
const Isa& plain_isa() {
  static const Isa isa{cpu_has_avx512_vbmi() ? "avx512-novbmi" : "avx512", matmul_f32_avx512, matmul_bf16_avx512, matmul_mxfp4_avx512, matmul_fp8_avx512,
                       matmul_int4_avx512, gated_act_avx512, tile_scores_avx512, tile_softmax_avx512,
                       context_rows_avx512, delta_step_avx512, unary_avx512, widen_fp8_scalar, "avx512"};
  return isa;
}

}  // namespace

const Isa* avx512_isa() {
  static const Isa vbmi{"avx512", matmul_f32_avx512, matmul_bf16_avx512, matmul_mxfp4_avx512, matmul_fp8_vbmi,
                        matmul_int4_vbmi, gated_act_avx512, tile_scores_avx512, tile_softmax_avx512,
                        context_rows_avx512, delta_step_avx512, unary_avx512, widen_fp8_vbmi, "avx512-vbmi"};
  if (!cpu_has_avx512()) return nullptr;
  return cpu_has_avx512_vbmi() ? &vbmi : &plain_isa();
}

const Isa* avx512_plain_isa() { return cpu_has_avx512_vbmi() ? &plain_isa() : nullptr; }

}  // namespace sluice::device
