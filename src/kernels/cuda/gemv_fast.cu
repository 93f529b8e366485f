// The fast CUDA products (the `cuda` ISA): one warp per output row and up to eight input rows at
// once. Each lane walks its own columns in a fixed order (16-byte loads), keeps one fp32
// accumulator per input row, and the warp sums the 32 lane partials with one fixed xor tree. The
// order depends only on the weight's shape and format, never on how many input rows there are or
// which block took the row: batch-invariant bit for bit, and within the sum-order bound of the
// scalar oracle. No atomics, no split-K.
#include <cstdint>

#include "kernels/cuda/cuda_ops.h"

namespace sluice::kernels::cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // warps per block, one row each
constexpr int kVecTile = 8;       // input rows per pass over a weight row

__device__ __forceinline__ float bf16lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float load_bias(const Weight& w, int64_t r) {
  return w.bias_type == DType::BF16 ? __uint_as_float(uint32_t(static_cast<const uint16_t*>(w.bias)[r]) << 16)
                                    : static_cast<const float*>(w.bias)[r];
}

// Accumulates acc[v] += W[r, c..c+7]·x_v[c..c+7] for the nv input rows.
__device__ __forceinline__ void eight(const float (&wv)[8], const float* x, int64_t ldx, int64_t c, int nv,
                                      float (&acc)[kVecTile]) {
#pragma unroll
  for (int v = 0; v < kVecTile; ++v) {
    if (v >= nv) break;
    const float4 a = *reinterpret_cast<const float4*>(x + v * ldx + c);
    const float4 b = *reinterpret_cast<const float4*>(x + v * ldx + c + 4);
    float s = acc[v];
    s = fmaf(wv[0], a.x, s);
    s = fmaf(wv[1], a.y, s);
    s = fmaf(wv[2], a.z, s);
    s = fmaf(wv[3], a.w, s);
    s = fmaf(wv[4], b.x, s);
    s = fmaf(wv[5], b.y, s);
    s = fmaf(wv[6], b.z, s);
    s = fmaf(wv[7], b.w, s);
    acc[v] = s;
  }
}

__global__ void gemv_bf16(Weight w, Mat x, Mat y) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int64_t v0 = int64_t(blockIdx.y) * kVecTile;
  if (r >= w.rows) return;
  const int nv = int(x.rows - v0 < kVecTile ? x.rows - v0 : kVecTile);
  const float* xv = x.p + v0 * x.ld;
  const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * w.cols;
  float acc[kVecTile] = {};
  // 8 columns (16 bytes) per lane per step; the row's last partial chunk column by column.
  const int64_t full = w.cols / 256 * 256;
#pragma unroll 2
  for (int64_t c = lane * 8; c < full; c += 256) {
    const uint4 q = *reinterpret_cast<const uint4*>(row + c);
    const float wv[8] = {bf16lo(q.x), bf16hi(q.x), bf16lo(q.y), bf16hi(q.y),
                         bf16lo(q.z), bf16hi(q.z), bf16lo(q.w), bf16hi(q.w)};
    eight(wv, xv, x.ld, c, nv, acc);
  }
  for (int64_t c = full + lane; c < w.cols; c += 32) {
    const float wc = __uint_as_float(uint32_t(row[c]) << 16);
    for (int v = 0; v < nv; ++v) acc[v] = fmaf(wc, xv[v * x.ld + c], acc[v]);
  }
  for (int v = 0; v < kVecTile; ++v) {
    if (v >= nv) break;
    float s = warp_sum(acc[v]);
    if (lane == 0) {
      if (w.bias) s += load_bias(w, r);
      y.p[(v0 + v) * y.ld + r] = s;
    }
  }
}

__global__ void gemv_f32(Weight w, Mat x, Mat y) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int64_t v0 = int64_t(blockIdx.y) * kVecTile;
  if (r >= w.rows) return;
  const int nv = int(x.rows - v0 < kVecTile ? x.rows - v0 : kVecTile);
  const float* xv = x.p + v0 * x.ld;
  const float* row = static_cast<const float*>(w.data) + r * w.cols;
  float acc[kVecTile] = {};
  const int64_t full = w.cols / 256 * 256;
  for (int64_t c = lane * 8; c < full; c += 256) {
    const float4 a = *reinterpret_cast<const float4*>(row + c), b = *reinterpret_cast<const float4*>(row + c + 4);
    const float wv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    eight(wv, xv, x.ld, c, nv, acc);
  }
  for (int64_t c = full + lane; c < w.cols; c += 32)
    for (int v = 0; v < nv; ++v) acc[v] = fmaf(row[c], xv[v * x.ld + c], acc[v]);
  for (int v = 0; v < kVecTile; ++v) {
    if (v >= nv) break;
    float s = warp_sum(acc[v]);
    if (lane == 0) {
      if (w.bias) s += load_bias(w, r);
      y.p[(v0 + v) * y.ld + r] = s;
    }
  }
}

// MXFP4: lane l takes the 32-column blocks l, l+32, ...; a block's 16 code bytes are one 16-byte
// load, decoded through a shared table of byte → (even, odd) values; its partial sum is scaled by
// the block's 2^e (exact) and added to the lane's accumulator.
__global__ void gemv_mxfp4(Weight w, Mat x, Mat y) {
  __shared__ float2 lut[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) {
    const float e2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    lut[b] = make_float2(e2m1[b & 15], e2m1[b >> 4]);
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int64_t v0 = int64_t(blockIdx.y) * kVecTile;
  if (r >= w.rows) return;
  const int nv = int(x.rows - v0 < kVecTile ? x.rows - v0 : kVecTile);
  const float* xv = x.p + v0 * x.ld;
  const int64_t blocks = w.cols / 32;
  const uint8_t* prow = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2);
  const uint8_t* srow = static_cast<const uint8_t*>(w.scales) + r * blocks;
  float acc[kVecTile] = {};
  for (int64_t b = lane; b < blocks; b += 32) {
    const uint4 q = *reinterpret_cast<const uint4*>(prow + b * 16);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    const float scale = __uint_as_float(uint32_t(srow[b]) << 23);
    float part[kVecTile] = {};
#pragma unroll
    for (int wd = 0; wd < 4; ++wd) {
      float wv[8];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 p = lut[(words[wd] >> (8 * k)) & 0xff];
        wv[2 * k] = p.x;
        wv[2 * k + 1] = p.y;
      }
      eight(wv, xv, x.ld, b * 32 + wd * 8, nv, part);
    }
    for (int v = 0; v < nv; ++v) acc[v] = fmaf(part[v], scale, acc[v]);
  }
  for (int v = 0; v < kVecTile; ++v) {
    if (v >= nv) break;
    float s = warp_sum(acc[v]);
    if (lane == 0) {
      if (w.bias) s += load_bias(w, r);
      y.p[(v0 + v) * y.ld + r] = s;
    }
  }
}

// FP8 e4m3: 16 bytes (16 columns) per lane per step; every step lies inside one 128-column scale
// block, so its partial sum is scaled by that block's scale and added.
__global__ void gemv_fp8(Weight w, Mat x, Mat y) {
  __shared__ float lut[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) {
    const int e = (b >> 3) & 15, m = b & 7;
    const float mag = e == 0 ? ldexpf(float(m), -9) : ldexpf(float(8 + m), e - 10);
    lut[b] = (e == 15 && m == 7) ? __uint_as_float(0x7fc00000u) : ((b & 0x80) ? -mag : mag);
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int64_t v0 = int64_t(blockIdx.y) * kVecTile;
  if (r >= w.rows) return;
  const int nv = int(x.rows - v0 < kVecTile ? x.rows - v0 : kVecTile);
  const float* xv = x.p + v0 * x.ld;
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.cols;
  const int64_t cb = (w.cols + kFp8Block - 1) / kFp8Block;
  const float* srow = static_cast<const float*>(w.scales) + (r / kFp8Block) * cb;
  float acc[kVecTile] = {};
  for (int64_t c = int64_t(lane) * 16; c < w.cols; c += 512) {
    const uint4 q = *reinterpret_cast<const uint4*>(row + c);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    float part[kVecTile] = {};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float wv[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) wv[k] = lut[(words[half * 2 + k / 4] >> (8 * (k % 4))) & 0xff];
      eight(wv, xv, x.ld, c + half * 8, nv, part);
    }
    const float scale = srow[c / kFp8Block];
    for (int v = 0; v < nv; ++v) acc[v] = fmaf(part[v], scale, acc[v]);
  }
  for (int v = 0; v < kVecTile; ++v) {
    if (v >= nv) break;
    float s = warp_sum(acc[v]);
    if (lane == 0) {
      if (w.bias) s += load_bias(w, r);
      y.p[(v0 + v) * y.ld + r] = s;
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

void linear_fast(cudaStream_t s, const Weight& w, Mat x, Mat y) {
  if (x.rows == 0 || w.rows == 0) return;
  // The vector paths read x four floats at a time and the weight 16 bytes at a time: shapes or
  // views that do not allow it take the reference kernel (a property of the shape and the
  // buffers' alignment, the same for every pass of a model).
  const bool x_ok = aligned16(x.p) && x.ld % 4 == 0;
  bool ok = x_ok && aligned16(w.data);
  switch (w.type) {
    case WeightType::BF16: ok = ok && w.cols % 8 == 0; break;
    case WeightType::F32: ok = ok && w.cols % 8 == 0; break;
    case WeightType::MXFP4: ok = ok && w.cols % 32 == 0; break;
    case WeightType::FP8_E4M3: ok = ok && w.cols % 16 == 0; break;
  }
  if (!ok) {
    linear_ref(s, w, x, y);
    return;
  }
  const dim3 grid(unsigned((w.rows + kRowsPerBlock - 1) / kRowsPerBlock), unsigned((x.rows + kVecTile - 1) / kVecTile));
  const unsigned threads = 32 * kRowsPerBlock;
  switch (w.type) {
    case WeightType::BF16: gemv_bf16<<<grid, threads, 0, s>>>(w, x, y); break;
    case WeightType::F32: gemv_f32<<<grid, threads, 0, s>>>(w, x, y); break;
    case WeightType::MXFP4: gemv_mxfp4<<<grid, threads, 0, s>>>(w, x, y); break;
    case WeightType::FP8_E4M3: gemv_fp8<<<grid, threads, 0, s>>>(w, x, y); break;
  }
  check_launch("linear_fast");
}

}  // namespace sluice::kernels::cuda
