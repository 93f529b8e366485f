// The fast CUDA products (the `cuda` ISA). A warp takes kRowsPerWarp weight rows and up to VT input
// rows at once: each lane walks its own columns of those weight rows in a fixed order (16-byte
// loads), loads each chunk of an input row once for all of its weight rows, keeps one fp32
// accumulator per (weight row, input row), and the warp sums the 32 lane partials with one fixed
// xor tree. The order depends only on the weight's shape and format, never on how many input rows
// there are, how many weight rows a warp takes or which block took a row: batch-invariant bit for
// bit, and within the sum-order bound of the scalar oracle. No atomics, no split-K.
//
// The routed experts of a layer run as one grouped launch per step (gate and up with the gated
// activation fused, then down with the scatter fused) over a device-side table of the experts'
// weights and member rows, instead of a handful of launches per expert.
//
// This file is compiled with -fmad=false like ops_ref.cu: the explicit fmaf calls are the products,
// and the fused activation (act.cuh) gives the reference kernel's bits.
#include <cstdint>
#include <type_traits>

#include "device/cuda/act.cuh"
#include "device/cuda/cuda_ops.h"
#include "device/cuda/products.cuh"

namespace sluice::device::cuda {
namespace {

constexpr int kWarps = 4;                               // warps per block
constexpr int kRowsPerWarp = 4;                         // weight rows per warp
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kMaxVecTile = 8;                          // input rows per pass over a weight row

__device__ __forceinline__ float bf16lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Decode tables, one per block in shared memory. MXFP4: the 16 E2M1 values once per lane, entry j
// of lane l at fp4[j][l], so the 32 lanes of a warp always read 32 different banks (a table shared
// by all lanes and indexed by random code bytes serialises on bank conflicts). FP8 e4m3: byte →
// value.
struct Luts {
  float fp4[16][32];
  float fp8[256];
};

template <WeightType T>
__device__ void fill_luts(Luts& l) {
  if constexpr (T == WeightType::MXFP4) {
    for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x) {
      // E2M1: sign, two exponent bits, one mantissa bit; 0.5·m for exponent 0, else 2^(e-1)·(1 + m/2).
      const int code = i / 32, e = (code >> 1) & 3, m = code & 1;
      const float mag = e == 0 ? 0.5f * float(m) : ldexpf(1.0f + 0.5f * float(m), e - 1);
      l.fp4[code][i % 32] = (code & 8) ? -mag : mag;
    }
  } else if constexpr (T == WeightType::FP8_E4M3) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
      const int e = (b >> 3) & 15, m = b & 7;
      const float mag = e == 0 ? ldexpf(float(m), -9) : ldexpf(float(8 + m), e - 10);
      l.fp8[b] = (e == 15 && m == 7) ? __uint_as_float(0x7fc00000u) : ((b & 0x80) ? -mag : mag);
    }
  }
  __syncthreads();
}

// acc[i][v] += W_i[c..c+7]·x_v[c..c+7] for every weight row i and the nv input rows, each chunk of
// x_v loaded once for all weight rows; the eight products of one accumulator in column order.
template <int VT>
__device__ __forceinline__ void eight(const float (&wv)[kRowsPerWarp][8], const float* x, int64_t ldx, int64_t c,
                                      int nv, float (&acc)[kRowsPerWarp][VT]) {
#pragma unroll
  for (int v = 0; v < VT; ++v) {
    if (v >= nv) break;
    const float4 a = *reinterpret_cast<const float4*>(x + v * ldx + c);
    const float4 b = *reinterpret_cast<const float4*>(x + v * ldx + c + 4);
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      float s = acc[i][v];
      s = fmaf(wv[i][0], a.x, s);
      s = fmaf(wv[i][1], a.y, s);
      s = fmaf(wv[i][2], a.z, s);
      s = fmaf(wv[i][3], a.w, s);
      s = fmaf(wv[i][4], b.x, s);
      s = fmaf(wv[i][5], b.y, s);
      s = fmaf(wv[i][6], b.z, s);
      s = fmaf(wv[i][7], b.w, s);
      acc[i][v] = s;
    }
  }
}

// The 8 weights of one INT4_G32 code word with the group's scale in both halves of s2: bf16(q·s)
// widened, as the oracle (int4_pair: codes j and j + 4 in one BF16 pair).
__device__ __forceinline__ void int4_word(uint32_t word, uint32_t s2, float (&wv)[8]) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const uint32_t v = int4_pair(word, m, s2);
    wv[m] = __uint_as_float(v << 16);
    wv[m + 4] = __uint_as_float(v & 0xffff0000u);
  }
}

// One warp's tile: out[i][v] = W[r0 + i, :]·x_v for the nv input rows at x (row stride ldx). Rows
// past the weight's end repeat its last row (the caller does not write them), so every lane runs
// the same code. Each lane's columns and their order, per format:
//  F32 / BF16: 8 columns per step at lane·8 + 256·k, then the row's partial last chunk column by
//              column at lane + 32·k;
//  MXFP4:      the 32-column blocks lane + 32·k, each block's partial sum scaled by its 2^e (exact);
//  FP8 e4m3:   16 columns per step at lane·16 + 512·k (inside one 128-column scale block), the
//              step's partial sum scaled by that block's scale;
//  INT4_G32:   the 32-column groups lane + 32·k, each weight bf16(q·s) decoded and summed in.
// Every lane returns every sum.
template <WeightType T, int VT>
__device__ void tile(const Weight& w, int64_t r0, const float* x, int64_t ldx, int nv, const Luts& lut,
                     float (&out)[kRowsPerWarp][VT]) {
  const int lane = threadIdx.x & 31;
  int64_t rr[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) rr[i] = r0 + i < w.rows ? r0 + i : w.rows - 1;
  float acc[kRowsPerWarp][VT] = {};
  if constexpr (T == WeightType::BF16 || T == WeightType::F32) {
    using E = std::conditional_t<T == WeightType::BF16, uint16_t, float>;
    const E* row[kRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) row[i] = static_cast<const E*>(w.data) + rr[i] * w.cols;
    const int64_t full = w.cols / 256 * 256;
    for (int64_t c = lane * 8; c < full; c += 256) {
      float wv[kRowsPerWarp][8];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        if constexpr (T == WeightType::BF16) {
          const uint4 q = *reinterpret_cast<const uint4*>(row[i] + c);
          wv[i][0] = bf16lo(q.x), wv[i][1] = bf16hi(q.x), wv[i][2] = bf16lo(q.y), wv[i][3] = bf16hi(q.y);
          wv[i][4] = bf16lo(q.z), wv[i][5] = bf16hi(q.z), wv[i][6] = bf16lo(q.w), wv[i][7] = bf16hi(q.w);
        } else {
          const float4 a = *reinterpret_cast<const float4*>(row[i] + c);
          const float4 b = *reinterpret_cast<const float4*>(row[i] + c + 4);
          wv[i][0] = a.x, wv[i][1] = a.y, wv[i][2] = a.z, wv[i][3] = a.w;
          wv[i][4] = b.x, wv[i][5] = b.y, wv[i][6] = b.z, wv[i][7] = b.w;
        }
      }
      eight<VT>(wv, x, ldx, c, nv, acc);
    }
    for (int64_t c = full + lane; c < w.cols; c += 32) {
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        float wc;
        if constexpr (T == WeightType::BF16) wc = __uint_as_float(uint32_t(row[i][c]) << 16);
        else wc = row[i][c];
#pragma unroll
        for (int v = 0; v < VT; ++v) {
          if (v >= nv) break;
          acc[i][v] = fmaf(wc, x[v * ldx + c], acc[i][v]);
        }
      }
    }
  } else if constexpr (T == WeightType::MXFP4) {
    const int64_t blocks = w.cols / 32;
    const float* e2m1 = &lut.fp4[0][lane];  // e2m1[32 * code]: this lane's copy
    for (int64_t b = lane; b < blocks; b += 32) {
      uint4 q[kRowsPerWarp];
      float scale[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        q[i] = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + rr[i] * (w.cols / 2) + b * 16);
        scale[i] = __uint_as_float(uint32_t(static_cast<const uint8_t*>(w.scales)[rr[i] * blocks + b]) << 23);
      }
      float part[kRowsPerWarp][VT] = {};
#pragma unroll
      for (int wd = 0; wd < 4; ++wd) {
        float wv[kRowsPerWarp][8];
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
          const uint32_t word = word_of(q[i], wd);
#pragma unroll
          for (int k = 0; k < 8; ++k) wv[i][k] = e2m1[32 * ((word >> (4 * k)) & 15)];
        }
        eight<VT>(wv, x, ldx, b * 32 + wd * 8, nv, part);
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
        for (int v = 0; v < VT; ++v) {
          if (v >= nv) break;
          acc[i][v] = fmaf(part[i][v], scale[i], acc[i][v]);
        }
    }
  } else if constexpr (T == WeightType::INT4_G32) {
    const int64_t groups = w.cols / kInt4Group;
    for (int64_t g = lane; g < groups; g += 32) {
      uint4 q[kRowsPerWarp];
      uint32_t s2[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        q[i] = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + rr[i] * (w.cols / 2) + g * 16);
        const uint32_t s = static_cast<const uint16_t*>(w.scales)[rr[i] * groups + g];
        s2[i] = s | (s << 16);
      }
#pragma unroll
      for (int wd = 0; wd < 4; ++wd) {
        float wv[kRowsPerWarp][8];
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) int4_word(word_of(q[i], wd), s2[i], wv[i]);
        eight<VT>(wv, x, ldx, g * kInt4Group + wd * 8, nv, acc);
      }
    }
  } else {  // FP8_E4M3
    const int64_t cb = (w.cols + kFp8Block - 1) / kFp8Block;
    for (int64_t c = int64_t(lane) * 16; c < w.cols; c += 512) {
      uint4 q[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i)
        q[i] = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + rr[i] * w.cols + c);
      float part[kRowsPerWarp][VT] = {};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float wv[kRowsPerWarp][8];
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
          for (int k = 0; k < 8; ++k) wv[i][k] = lut.fp8[(word_of(q[i], half * 2 + k / 4) >> (8 * (k % 4))) & 0xff];
        eight<VT>(wv, x, ldx, c + half * 8, nv, part);
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float scale = static_cast<const float*>(w.scales)[(rr[i] / kFp8Block) * cb + c / kFp8Block];
#pragma unroll
        for (int v = 0; v < VT; ++v) {
          if (v >= nv) break;
          acc[i][v] = fmaf(part[i][v], scale, acc[i][v]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
    for (int v = 0; v < VT; ++v) out[i][v] = warp_sum(acc[i][v]);
}

// y[v0 + v, r] = W[r, :]·x[v0 + v, :] (+ bias[r]).
template <WeightType T, int VT>
__global__ void __launch_bounds__(kWarps * 32) gemv(Weight w, Mat x, Mat y) {
  __shared__ Luts lut;
  fill_luts<T>(lut);
  const int64_t r0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  const int64_t v0 = int64_t(blockIdx.y) * VT;
  if (r0 >= w.rows) return;
  const int nv = int(x.rows - v0 < VT ? x.rows - v0 : VT);
  float out[kRowsPerWarp][VT];
  tile<T, VT>(w, r0, x.p + v0 * x.ld, x.ld, nv, lut, out);
  if ((threadIdx.x & 31) != 0) return;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    if (r0 + i >= w.rows) break;
#pragma unroll
    for (int v = 0; v < VT; ++v) {
      if (v >= nv) break;
      float s = out[i][v];
      if (w.bias) s += load_bias(w, r0 + i);
      y.p[(v0 + v) * y.ld + r0 + i] = s;
    }
  }
}

// Grouped experts, step 1: h[m, r] = act(gate[r, :]·g[m, :] + bg[r], up[r, :]·g[m, :] + bu[r]) for
// the member rows m of expert blockIdx.y (g holds the members' input rows, gathered).
template <WeightType T, int VT>
__global__ void __launch_bounds__(kWarps * 32) experts_gate_up(const ExpertGroupEntry* table, Activation act,
                                                                const float* g, int64_t R, float* h, int64_t I) {
  __shared__ Luts lut;
  fill_luts<T>(lut);
  const ExpertGroupEntry& e = table[blockIdx.y];
  const int64_t r0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  const int64_t v0 = int64_t(blockIdx.z) * VT;
  if (r0 >= I || v0 >= e.n) return;
  const int nv = int(e.n - v0 < VT ? e.n - v0 : VT);
  const float* x = g + (e.off + v0) * R;
  float og[kRowsPerWarp][VT], ou[kRowsPerWarp][VT];
  tile<T, VT>(e.gate, r0, x, R, nv, lut, og);
  tile<T, VT>(e.up, r0, x, R, nv, lut, ou);
  if ((threadIdx.x & 31) != 0) return;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    if (r0 + i >= I) break;
#pragma unroll
    for (int v = 0; v < VT; ++v) {
      if (v >= nv) break;
      float gv = og[i][v], uv = ou[i][v];
      if (e.gate.bias) gv += load_bias(e.gate, r0 + i);
      if (e.up.bias) uv += load_bias(e.up, r0 + i);
      h[(e.off + v0 + v) * I + r0 + i] = gated_value(act, gv, uv);
    }
  }
}

// Grouped experts, step 2: yexp[members[m], r] = down[r, :]·h[m, :] + bd[r].
template <WeightType T, int VT>
__global__ void __launch_bounds__(kWarps * 32) experts_down(const ExpertGroupEntry* table, const float* h, int64_t I,
                                                             const int64_t* members, Mat yexp) {
  __shared__ Luts lut;
  fill_luts<T>(lut);
  const ExpertGroupEntry& e = table[blockIdx.y];
  const int64_t R = yexp.cols;
  const int64_t r0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  const int64_t v0 = int64_t(blockIdx.z) * VT;
  if (r0 >= R || v0 >= e.n) return;
  const int nv = int(e.n - v0 < VT ? e.n - v0 : VT);
  float out[kRowsPerWarp][VT];
  tile<T, VT>(e.down, r0, h + (e.off + v0) * I, I, nv, lut, out);
  if ((threadIdx.x & 31) != 0) return;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    if (r0 + i >= R) break;
#pragma unroll
    for (int v = 0; v < VT; ++v) {
      if (v >= nv) break;
      float s = out[i][v];
      if (e.down.bias) s += load_bias(e.down, r0 + i);
      yexp.p[members[e.off + v0 + v] * yexp.ld + r0 + i] = s;
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Runs `f` with the kernel's template arguments for (type, input rows): one input row takes the
// single-accumulator variant, more take tiles of eight.
template <class F>
void dispatch(WeightType type, int64_t rows, F&& f) {
  const auto go = [&](auto t) {
    if (rows <= 1) f(t, std::integral_constant<int, 1>{});
    else f(t, std::integral_constant<int, kMaxVecTile>{});
  };
  switch (type) {
    case WeightType::F32: go(std::integral_constant<WeightType, WeightType::F32>{}); break;
    case WeightType::BF16: go(std::integral_constant<WeightType, WeightType::BF16>{}); break;
    case WeightType::MXFP4: go(std::integral_constant<WeightType, WeightType::MXFP4>{}); break;
    case WeightType::FP8_E4M3: go(std::integral_constant<WeightType, WeightType::FP8_E4M3>{}); break;
    case WeightType::INT4_G32: go(std::integral_constant<WeightType, WeightType::INT4_G32>{}); break;
  }
}

}  // namespace

bool fast_product_ok(const Weight& w, const void* x, int64_t ldx) {
  // The vector paths read x four floats at a time and the weight 16 bytes at a time: shapes or
  // views that do not allow it take the reference kernel (a property of the shape and the
  // buffers' alignment, the same for every pass of a model).
  if (!aligned16(x) || ldx % 4 != 0 || !aligned16(w.data)) return false;
  switch (w.type) {
    case WeightType::BF16:
    case WeightType::F32: return w.cols % 8 == 0;
    case WeightType::MXFP4: return w.cols % 32 == 0;
    case WeightType::FP8_E4M3: return w.cols % 16 == 0;
    case WeightType::INT4_G32: return w.cols % kInt4Group == 0;
  }
  return false;
}

void linear_fast(cudaStream_t s, const Weight& w, Mat x, Mat y) {
  if (x.rows == 0 || w.rows == 0) return;
  if (!fast_product_ok(w, x.p, x.ld)) {
    linear_ref(s, w, x, y);
    return;
  }
  dispatch(w.type, x.rows, [&](auto t, auto vt) {
    constexpr int VT = decltype(vt)::value;
    const dim3 grid(unsigned((w.rows + kRowsPerBlock - 1) / kRowsPerBlock), unsigned((x.rows + VT - 1) / VT));
    gemv<decltype(t)::value, VT><<<grid, kWarps * 32, 0, s>>>(w, x, y);
  });
  check_launch("linear_fast");
}

void experts_fast(cudaStream_t s, const Activation& act, WeightType type, const ExpertGroupEntry* table, int experts,
                  int64_t max_rows, int64_t I, const float* g, float* h, const int64_t* members, Mat yexp) {
  if (experts == 0 || max_rows == 0) return;
  const int64_t R = yexp.cols;
  dispatch(type, max_rows, [&](auto t, auto vt) {
    constexpr WeightType T = decltype(t)::value;
    constexpr int VT = decltype(vt)::value;
    const unsigned tiles = unsigned((max_rows + VT - 1) / VT);
    experts_gate_up<T, VT><<<dim3(unsigned((I + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(experts), tiles),
                             kWarps * 32, 0, s>>>(table, act, g, R, h, I);
    check_launch("experts_gate_up");
    experts_down<T, VT><<<dim3(unsigned((R + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(experts), tiles),
                          kWarps * 32, 0, s>>>(table, h, I, members, yexp);
  });
  check_launch("experts_down");
}

}  // namespace sluice::device::cuda
