// The fast ISA's row ops: RMSNorm and AttnRes's source weights with block-wide reductions. The
// reference kernels (ops_ref.cu) sum each row in one thread in the scalar order, which left most of
// the GPU idle: on a K3-width model these two ops were a third of a decode step's GPU time. Here
// every thread of a block sums a fixed stride of the row in order and the block combines the
// partial sums by a fixed butterfly (warp shuffles, then the warps' sums the same way), so a row's
// result depends only on the row and the block size, which depends only on the row's width: batch
// invariant, the same bits for a row alone or in a batch, but not the scalar order (the sums differ
// from cpu:scalar within the sum-order bound; cuda-ref keeps the scalar kernels). Compiled with
// -fmad=false: every fused multiply-add is an explicit fmaf, and the transcendentals are mathf.h's.
#include <algorithm>
#include <cstdint>

#include "device/cuda/cuda_ops.h"
#include "device/cuda/softmax.cuh"
#include "device/mathf.h"

namespace sluice::device::cuda {
namespace {

namespace mf = sluice::mathf;

constexpr unsigned kFull = 0xffffffffu;

// The sum over a warp by a fixed butterfly: every lane ends with the same value.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// The sum over the block (blockDim.x a multiple of 32, at most 1024): each warp's butterfly, then
// the warps' sums by the same butterfly in warp 0 (absent warps add +0). Every thread gets it.
__device__ float block_sum(float v, float* warp_sums) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? warp_sums[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) warp_sums[32] = s;
  }
  __syncthreads();
  return warp_sums[32];
}

// RMSNorm, one block per (row, group): thread t sums the squares of elements t, t + B, ... in order,
// the block sums the partial sums, and each thread scales the elements it summed (in place is safe:
// a thread writes only elements it alone read, after the block sum's barrier).
__global__ void rmsnorm_fast_kernel(Mat x, const float* w, float eps, Mat y, int64_t group, int64_t groups) {
  __shared__ float warp_sums[33];
  const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups;
  const float* xr = x.p + r * x.ld + g * group;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
  const float inv = mf::div(1.0f, mf::sqrt(block_sum(ss, warp_sums) / float(group) + eps));
  float* yr = y.p + r * y.ld + g * group;
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) yr[i] = w ? w[i] * (xr[i] * inv) : xr[i] * inv;
}

// AttnRes's source weights, one block per row: warp j takes sources j, j + warps, ...; its lanes sum
// a fixed stride of the row (squares; norm·proj·v) and the warp's butterfly combines them. Then
// thread 0 takes the softmax over the sources in order, as the reference does.
__global__ void attn_res_weights_fast(const Mat* src, int n, const float* norm, const float* proj, float eps,
                                      int64_t H, float* p) {
  const int64_t t = blockIdx.x;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  float* pt = p + t * n;
  for (int i = warp; i < n; i += warps) {
    const float* v = src[i].p + t * src[i].ld;
    float ss = 0.0f, acc = 0.0f;
    for (int64_t d = lane; d < H; d += 32) {
      const float vd = v[d];
      ss = fmaf(vd, vd, ss);
      acc = fmaf(norm[d] * proj[d], vd, acc);
    }
    ss = warp_sum(ss);
    acc = warp_sum(acc);
    if (lane == 0) pt[i] = mf::div(acc, mf::sqrt(ss / float(H) + eps));
  }
  __syncthreads();
  if (threadIdx.x == 0) softmax_seq(pt, n);
}

// out = Σ_i p_i · source_i, one thread per element, the sources in order.
__global__ void attn_res_mix_fast(const Mat* src, int n, const float* p, Mat out) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (d >= out.cols) return;
  float o = 0.0f;
  for (int i = 0; i < n; ++i) o = fmaf(p[t * n + i], src[i].p[t * src[i].ld + d], o);
  out.p[t * out.ld + d] = o;
}

}  // namespace

void rmsnorm_fast(cudaStream_t s, Mat x, const float* w, float eps, Mat y, int64_t group) {
  const int64_t groups = x.cols / group;
  if (x.rows * groups == 0) return;
  // The block size depends only on the group's width (batch invariance).
  const unsigned threads = unsigned(std::min<int64_t>(256, (group + 31) / 32 * 32));
  rmsnorm_fast_kernel<<<unsigned(x.rows * groups), threads, 0, s>>>(x, w, eps, y, group, groups);
  check_launch("rmsnorm (fast)");
}

void attn_res_fast(cudaStream_t s, const Mat* sources, int n, const float* norm, const float* proj, float eps, Mat out,
                   float* p) {
  if (out.rows == 0) return;
  attn_res_weights_fast<<<unsigned(out.rows), 256, 0, s>>>(sources, n, norm, proj, eps, out.cols, p);
  check_launch("attn_res weights (fast)");
  constexpr unsigned kMixThreads = 128;
  const dim3 grid(unsigned((out.cols + kMixThreads - 1) / kMixThreads), unsigned(out.rows));
  attn_res_mix_fast<<<grid, kMixThreads, 0, s>>>(sources, n, p, out);
  check_launch("attn_res mix (fast)");
}

}  // namespace sluice::device::cuda
