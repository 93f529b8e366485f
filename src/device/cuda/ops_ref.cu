// The CUDA reference kernels: every op of the device interface in the scalar CPU op's order. Work
// is spread only over outputs that the scalar code computes independently (rows, heads, columns of
// a recurrent matrix, cache positions); every reduction runs in one thread in the scalar order.
// This file is compiled with -fmad=false, so no product and sum are fused, and the transcendentals
// are mathf.h's: the results are bit-identical to cpu:scalar.
#include <algorithm>
#include <cstdint>

#include "device/cuda/act.cuh"
#include "device/cuda/softmax.cuh"
#include "device/cuda/cuda_ops.h"
#include "device/mathf.h"

namespace sluice::device::cuda {
namespace {

namespace mf = sluice::mathf;

__constant__ float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

__device__ __forceinline__ float bf16f(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
__device__ __forceinline__ float e8m0f(uint8_t b) { return __uint_as_float(uint32_t(b) << 23); }
__device__ __forceinline__ float e4m3f(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return __uint_as_float(0x7fc00000u);
  // man·2^-9 or (8 + man)·2^(e-10): small integers times powers of two, exact.
  const float mag = e == 0 ? float(m) * mf::pow2(-9) : float(8 + m) * mf::pow2(e - 10);
  return (b & 0x80) ? -mag : mag;
}
// bf16(v) widened back to fp32: round to nearest even, as f32_to_bf16 does for finite values
// (INT4_G32 scales are checked finite at load, so q·s is never NaN).
__device__ __forceinline__ float bf16_round(float v) {
  const uint32_t b = __float_as_uint(v);
  return __uint_as_float((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
}
__device__ __forceinline__ float bias_at(const Weight& w, int64_t r) {
  return w.bias_type == DType::BF16 ? bf16f(static_cast<const uint16_t*>(w.bias)[r]) : static_cast<const float*>(w.bias)[r];
}

__device__ float rowdot(const Weight& w, int64_t r, const float* x) {
  float acc = 0.0f;
  switch (w.type) {
    case WeightType::F32: {
      const float* row = static_cast<const float*>(w.data) + r * w.cols;
      for (int64_t c = 0; c < w.cols; ++c) acc += row[c] * x[c];
      break;
    }
    case WeightType::BF16: {
      const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * w.cols;
      for (int64_t c = 0; c < w.cols; ++c) acc += bf16f(row[c]) * x[c];
      break;
    }
    case WeightType::MXFP4: {
      const int64_t blocks = w.cols / 32;
      const uint8_t* prow = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2);
      const uint8_t* srow = static_cast<const uint8_t*>(w.scales) + r * blocks;
      for (int64_t b = 0; b < blocks; ++b) {
        float part = 0.0f;
        for (int64_t j = 0; j < 16; ++j) {
          const uint8_t byte = prow[b * 16 + j];
          part += kE2M1[byte & 15] * x[b * 32 + 2 * j];
          part += kE2M1[byte >> 4] * x[b * 32 + 2 * j + 1];
        }
        acc += part * e8m0f(srow[b]);
      }
      break;
    }
    case WeightType::FP8_E4M3: {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.cols;
      const int64_t cb = (w.cols + kFp8Block - 1) / kFp8Block;
      const float* srow = static_cast<const float*>(w.scales) + (r / kFp8Block) * cb;
      for (int64_t b = 0; b < cb; ++b) {
        const int64_t c1 = w.cols < (b + 1) * kFp8Block ? w.cols : (b + 1) * kFp8Block;
        float part = 0.0f;
        for (int64_t c = b * kFp8Block; c < c1; ++c) part += e4m3f(row[c]) * x[c];
        acc += part * srow[b];
      }
      break;
    }
    case WeightType::INT4_G32: {
      const int64_t groups = w.cols / kInt4Group;
      const uint32_t* prow = static_cast<const uint32_t*>(w.data) + r * (w.cols / 8);
      const uint16_t* srow = static_cast<const uint16_t*>(w.scales) + r * groups;
      for (int64_t g = 0; g < groups; ++g) {
        const float s = bf16f(srow[g]);
        float part = 0.0f;
        for (int64_t k = 0; k < 4; ++k) {
          const uint32_t word = prow[4 * g + k];
          for (int64_t j = 0; j < 8; ++j) {
            const int q = int((word >> (4 * j)) & 15) - 8;
            part += bf16_round(float(q) * s) * x[g * kInt4Group + 8 * k + j];
          }
        }
        acc += part;
      }
      break;
    }
  }
  return acc;
}

__global__ void linear_kernel(Weight w, Mat x, Mat y) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, i = blockIdx.y;
  if (r >= w.rows) return;
  float v = rowdot(w, r, x.p + i * x.ld);
  if (w.bias) v += bias_at(w, r);  // added after the product, as the CPU does
  y.p[i * y.ld + r] = v;
}

__global__ void fill_kernel(Mat y, float v) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c < y.cols) y.p[r * y.ld + c] = v;
}

__global__ void embed_kernel(Weight t, const int32_t* ids, Mat out) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (d >= t.cols) return;
  const int64_t id = ids[r];
  out.p[r * out.ld + d] = t.type == WeightType::BF16 ? bf16f(static_cast<const uint16_t*>(t.data)[id * t.cols + d])
                                                       : static_cast<const float*>(t.data)[id * t.cols + d];
}

// One thread per (row, group): the sum in order, then the scaled elements.
__device__ void rmsnorm_row(const float* x, const float* w, int64_t n, float eps, float* out) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = mf::div(1.0f, mf::sqrt(ss / float(n) + eps));
  if (w) {
    for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  }
}

// RMSNorm, one block per (row, group): the block stages the values in shared memory (parallel,
// coalesced loads; a group too wide for it is read from global memory), one thread sums the
// squares in the scalar order, and the block writes the outputs, each an independent product. The
// scalar bits, without one thread's serial loads from global memory. In place (y == x) is safe:
// each output is written by the thread that last reads its input.
constexpr int64_t kStagedMax = 10240;  // floats: 40 KiB of shared memory
__global__ void rmsnorm_kernel(Mat x, const float* w, float eps, Mat y, int64_t group, int64_t groups) {
  extern __shared__ float sx[];
  __shared__ float inv_s;
  const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups;
  const float* xr = x.p + r * x.ld + g * group;
  const bool staged = group <= kStagedMax;
  if (staged)
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) sx[i] = xr[i];
  __syncthreads();
  const float* v = staged ? sx : xr;
  if (threadIdx.x == 0) {
    float ss = 0.0f;
    for (int64_t i = 0; i < group; ++i) ss += v[i] * v[i];
    inv_s = mf::div(1.0f, mf::sqrt(ss / float(group) + eps));
  }
  __syncthreads();
  const float inv = inv_s;
  float* yr = y.p + r * y.ld + g * group;
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) yr[i] = w ? w[i] * (v[i] * inv) : v[i] * inv;
}

__global__ void add_kernel(Mat y, Mat x) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c < y.cols) y.p[r * y.ld + c] += x.p[r * x.ld + c];
}
__global__ void sum_kernel(Mat o, Mat a, Mat b) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c < o.cols) o.p[r * o.ld + c] = a.p[r * a.ld + c] + b.p[r * b.ld + c];
}
__global__ void mul_sigmoid_kernel(Mat y, Mat g) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c < y.cols) y.p[r * y.ld + c] *= mf::sigmoid(g.p[r * g.ld + c]);
}
__global__ void gated_act_kernel(Activation a, Mat g, Mat u) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c >= g.cols) return;
  float& gv = g.p[r * g.ld + c];
  gv = gated_value(a, gv, u.p[r * u.ld + c]);
}
__global__ void gated_act_pairs_kernel(Activation a, Mat gu, Mat out) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c >= out.cols) return;
  out.p[r * out.ld + c] = gated_value(a, gu.p[r * gu.ld + 2 * c], gu.p[r * gu.ld + 2 * c + 1]);
}
__global__ void row_dot_kernel(Mat x, const float* w, Mat out) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= x.rows) return;
  float acc = 0.0f;
  for (int64_t i = 0; i < x.cols; ++i) acc += x.p[r * x.ld + i] * w[i];
  out.p[r * out.ld] = acc;
}


// AttnRes, the source weights with one block per row: the block stages a chunk of every source row
// (and of norm·proj) in shared memory, thread i runs source i's two sums (squares; norm·proj·v)
// over it in the scalar order, and thread 0 takes the softmax. Then one thread per element sums
// the sources in order (axpy from zero, as the CPU). At most kThreads sources.
__global__ void attn_res_weights(const Mat* src, int n, const float* norm, const float* proj, float eps, int64_t H,
                                 int64_t chunk, float* p) {
  extern __shared__ float sh[];  // [n + 1][chunk]: the sources, then norm·proj
  const int64_t t = blockIdx.x;
  float* np = sh + int64_t(n) * chunk;
  float ss = 0.0f, acc = 0.0f;
  for (int64_t c0 = 0; c0 < H; c0 += chunk) {
    const int64_t len = H - c0 < chunk ? H - c0 : chunk;
    for (int64_t j = threadIdx.x; j < int64_t(n) * len; j += blockDim.x) {
      const int64_t i = j / len, d = j % len;
      sh[i * chunk + d] = src[i].p[t * src[i].ld + c0 + d];
    }
    for (int64_t d = threadIdx.x; d < len; d += blockDim.x) np[d] = norm[c0 + d] * proj[c0 + d];
    __syncthreads();
    if (int(threadIdx.x) < n) {
      const float* v = sh + int64_t(threadIdx.x) * chunk;
      for (int64_t d = 0; d < len; ++d) {
        ss += v[d] * v[d];
        acc += np[d] * v[d];
      }
    }
    __syncthreads();
  }
  float* pt = p + t * n;
  if (int(threadIdx.x) < n) pt[threadIdx.x] = mf::div(acc, mf::sqrt(ss / float(H) + eps));
  __syncthreads();
  if (threadIdx.x == 0) softmax_seq(pt, n);
}
__global__ void attn_res_mix(const Mat* src, int n, const float* p, Mat out) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (d >= out.cols) return;
  float o = 0.0f;
  for (int i = 0; i < n; ++i) o += p[t * n + i] * src[i].p[t * src[i].ld + d];
  out.p[t * out.ld + d] = o;
}

// ---- KDA ----

// Short causal conv + SiLU of one channel over the pass's rows (state: the last K-1 raw inputs).
__global__ void kda_conv(const float* x, const float* w, float* state, int64_t T, int64_t C, int64_t K, float* out,
                         const float* state_from) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t S = K - 1;
  float* st = state + c * S;
  if (state_from)
    for (int64_t j = 0; j < S; ++j) st[j] = state_from[c * S + j];
  const float* wc = w + c * K;
  for (int64_t t = 0; t < T; ++t) {
    const float xt = x[t * C + c];
    float acc = 0.0f;
    for (int64_t j = 0; j < S; ++j) acc += wc[j] * st[j];
    acc += wc[S] * xt;
    out[t * C + c] = mf::silu(acc);
    for (int64_t j = 0; j + 1 < S; ++j) st[j] = st[j + 1];
    if (S > 0) st[S - 1] = xt;
  }
}
__global__ void kda_window_push(float* state, const float* x, int64_t ldx, int64_t T, int64_t C, int64_t K) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t S = K - 1;
  if (c >= C || S <= 0) return;
  float* st = state + c * S;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j + 1 < S; ++j) st[j] = st[j + 1];
    st[S - 1] = x[t * ldx + c];
  }
}
// Per (row, head): l2norm of q (then ×1/sqrt(dk)) and of k.
__global__ void kda_l2norm(float* qc, float* kc, int64_t T, int64_t heads, int64_t dk, float q_scale) {
  const int64_t id = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= T * heads) return;
  const int64_t off = (id / heads) * heads * dk + (id % heads) * dk;
  for (int which = 0; which < 2; ++which) {
    float* v = (which == 0 ? qc : kc) + off;
    float ss = 0.0f;
    for (int64_t i = 0; i < dk; ++i) ss += v[i] * v[i];
    const float inv = mf::div(1.0f, mf::sqrt(ss + 1e-6f));
    for (int64_t i = 0; i < dk; ++i) v[i] = v[i] * inv;
    if (which == 0)
      for (int64_t i = 0; i < dk; ++i) v[i] *= q_scale;
  }
}
__global__ void kda_gates(KdaOp op, const float* f, const float* beta_raw, int64_t T, float* g, float* beta) {
  const int64_t P = op.heads * op.head_dim;
  const int64_t id = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id < T * P) {
    const int64_t ch = id % P;
    const float r = f[id] + op.dt_bias.p[ch];
    const float a = mf::exp(op.a_log.p[ch / op.head_dim]);
    g[id] = op.lower_bound_gate ? op.lower_bound * mf::sigmoid(a * r) : -a * mf::softplus(r);
  }
  if (id < T * op.heads) beta[id] = mf::sigmoid(beta_raw[id]);
}

// The delta rule of one head over the pass's rows: thread j owns column j of the head's [dk, dv]
// state (every sum below runs over i in order in one thread, as the CPU's). With q null it only
// advances the state (replay).
__global__ void kda_delta(int64_t T, int64_t P, int64_t heads, int64_t dk, const float* S_from, float* S_all,
                          const float* qc, const float* kc, const float* vc, const float* g, const float* beta,
                          int64_t ld, int64_t ld_beta, const float* o_norm, float eps, const float* gate, float* out) {
  extern __shared__ float sh[];  // a[dk] | o[dk] | inv
  float* a = sh;
  float* o = sh + dk;
  const int64_t h = blockIdx.x, j = threadIdx.x;
  float* S = S_all + h * dk * dk;
  const float* S_in0 = S_from + h * dk * dk;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t off = t * ld + h * dk;
    if (j < dk) a[j] = mf::exp(g[off + j]);
    __syncthreads();
    if (j < dk) {
      const float* S_in = t == 0 ? S_in0 : S;
      for (int64_t i = 0; i < dk; ++i) S[i * dk + j] = S_in[i * dk + j] * a[i];
      float kv = 0.0f;
      for (int64_t i = 0; i < dk; ++i) kv += S[i * dk + j] * kc[off + i];
      kv = (vc[off + j] - kv) * beta[t * ld_beta + h];
      for (int64_t i = 0; i < dk; ++i) S[i * dk + j] += kc[off + i] * kv;
      if (qc) {
        float acc = 0.0f;
        for (int64_t i = 0; i < dk; ++i) acc += S[i * dk + j] * qc[off + i];
        o[j] = acc;
      }
    }
    __syncthreads();
    if (qc) {
      if (j == 0) {
        float ss = 0.0f;
        for (int64_t i = 0; i < dk; ++i) ss += o[i] * o[i];
        sh[2 * dk] = mf::div(1.0f, mf::sqrt(ss / float(dk) + eps));
      }
      __syncthreads();
      if (j < dk) {
        const float v = o_norm[j] * (o[j] * sh[2 * dk]);
        out[off + j] = v * mf::sigmoid(gate[off + j]);
      }
      __syncthreads();
    }
  }
}

__global__ void copy_rows(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows, int64_t cols) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c < cols && r < rows) dst[r * ldd + c] = src[r * lds + c];
}

// ---- attention ----

__global__ void mla_write_kernel(Mat kv, const float* norm, float eps, Mat latent, Mat k_pe, int64_t first) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= kv.rows) return;
  const float* row = kv.p + t * kv.ld;
  rmsnorm_row(row, norm, latent.cols, eps, latent.p + (first + t) * latent.ld);
  for (int64_t i = 0; i < k_pe.cols; ++i) k_pe.p[(first + t) * k_pe.ld + i] = row[latent.cols + i];
}

__device__ float kvb_at(const Weight& w, int64_t r, int64_t c) {
  return w.type == WeightType::BF16 ? bf16f(static_cast<const uint16_t*>(w.data)[r * w.cols + c])
                                    : static_cast<const float*>(w.data)[r * w.cols + c];
}

// One block per (row, head). Each step spreads over independent outputs only: the absorbed query
// over its kv_rank entries (a sum over the nope rows in order), the scores over positions, the
// softmax in one thread, the context over kv_rank entries (a sum over positions in order), the
// head's values over v_dim.
__global__ void mla_kernel(MlaOp op, Weight kv_b, Mat q, Mat latent, Mat k_pe, int64_t visible0, Mat out,
                           float* scratch, int64_t per) {
  const int64_t t = blockIdx.x / op.heads, h = blockIdx.x % op.heads, nthr = blockDim.x, tid = threadIdx.x;
  const int64_t nope = op.nope, rope = op.rope, vd = op.v_dim, kvr = op.kv_rank, qk = nope + rope;
  float* qabs = scratch + blockIdx.x * per;
  float* ctx = qabs + kvr;
  float* sc = ctx + kvr;
  const float* qh = q.p + t * q.ld + h * qk;
  const int64_t k_row0 = h * (nope + vd), v_row0 = k_row0 + nope;
  for (int64_t c = tid; c < kvr; c += nthr) {
    float acc = 0.0f;
    for (int64_t i = 0; i < nope; ++i) acc += qh[i] * kvb_at(kv_b, k_row0 + i, c);
    qabs[c] = acc;
  }
  __syncthreads();
  const int64_t n = visible0 + (op.causal ? t : 0);
  for (int64_t p = tid; p < n; p += nthr) {
    float a = 0.0f;
    for (int64_t c = 0; c < kvr; ++c) a += qabs[c] * latent.p[p * latent.ld + c];
    float b = 0.0f;
    for (int64_t c = 0; c < rope; ++c) b += qh[nope + c] * k_pe.p[p * k_pe.ld + c];
    sc[p] = (a + (rope ? b : 0.0f)) * op.scale;
  }
  __syncthreads();
  if (tid == 0) softmax_seq(sc, n);
  __syncthreads();
  for (int64_t c = tid; c < kvr; c += nthr) {
    float acc = 0.0f;
    for (int64_t p = 0; p < n; ++p) acc += sc[p] * latent.p[p * latent.ld + c];
    ctx[c] = acc;
  }
  __syncthreads();
  for (int64_t j = tid; j < vd; j += nthr) {
    float acc = 0.0f;
    for (int64_t c = 0; c < kvr; ++c) acc += kvb_at(kv_b, v_row0 + j, c) * ctx[c];
    out.p[t * out.ld + h * vd + j] = acc;
  }
}

__global__ void gqa_kernel(GqaOp op, Mat q, Mat k, Mat v, int64_t visible0, Mat out, float* scratch, int64_t per) {
  const int64_t t = blockIdx.x / op.heads, h = blockIdx.x % op.heads, nthr = blockDim.x, tid = threadIdx.x;
  const int64_t D = op.head_dim, kvh = h / (op.heads / op.kv_heads);
  float* sc = scratch + blockIdx.x * per;
  const float* qh = q.p + t * q.ld + h * D;
  const int64_t n = visible0 + t;
  const int64_t p0 = op.window > 0 ? (n - op.window > 0 ? n - op.window : 0) : 0;
  for (int64_t p = p0 + tid; p < n; p += nthr) {
    float a = 0.0f;
    for (int64_t i = 0; i < D; ++i) a += qh[i] * k.p[p * k.ld + kvh * D + i];
    sc[p - p0] = a * op.scale;
  }
  __syncthreads();
  if (tid == 0) {
    const int64_t m = n - p0;
    if (!op.sinks.p) {
      softmax_seq(sc, m);
    } else {
      // The CPU's softmax with one extra sink logit whose share is dropped.
      const float sink = op.sinks.p[h];
      float mx = sink;
      for (int64_t i = 0; i < m; ++i) mx = sc[i] > mx ? sc[i] : mx;
      float s = mf::exp(sink - mx);
      for (int64_t i = 0; i < m; ++i) {
        sc[i] = mf::exp(sc[i] - mx);
        s += sc[i];
      }
      const float inv = mf::div(1.0f, s);
      for (int64_t i = 0; i < m; ++i) sc[i] *= inv;
    }
  }
  __syncthreads();
  for (int64_t d = tid; d < D; d += nthr) {
    float acc = 0.0f;
    for (int64_t p = p0; p < n; ++p) acc += sc[p - p0] * v.p[p * v.ld + kvh * D + d];
    out.p[t * out.ld + h * D + d] = acc;
  }
}

__global__ void rope_kernel(Mat table, RopePairs pairs, Mat x, int64_t heads, int64_t stride, int64_t offset,
                            int64_t dim) {
  const int64_t half = dim / 2;
  const int64_t id = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (id >= heads * half) return;
  const int64_t h = id / half, i = id % half;
  const float c = table.p[t * table.ld + i], s = table.p[t * table.ld + half + i];
  float* p = x.p + t * x.ld + h * stride + offset;
  if (pairs == RopePairs::Half) {
    const float a = p[i], b = p[i + half];
    p[i] = a * c - b * s;
    p[i + half] = b * c + a * s;
  } else {
    const float x0 = p[2 * i], x1 = p[2 * i + 1];
    p[2 * i] = x0 * c - x1 * s;
    p[2 * i + 1] = x1 * c + x0 * s;
  }
}

// ---- MoE ----

// The CPU's router, step for step (stable group order, top-k by (choice desc, id asc), renorm),
// one block per row with the row's arrays in shared memory (in global scratch when E > kRouteStaged):
// the per-expert scores, choices and group scores are computed by the block in parallel (each an
// independent value); the selections run in one thread in the scalar order, with a taken flag per
// expert.
constexpr int64_t kRouteStaged = 4096;
__device__ __host__ inline int64_t route_row_bytes(int64_t E, int64_t groups) { return (2 * E + groups) * 4 + E; }
__global__ void route_kernel(RouterOp op, Mat logits, Mat ids_b, Mat w_b, char* scratch) {
  extern __shared__ float sh[];  // scores[E], choice[E], group_score[groups], taken[E] (bytes)
  const int64_t t = blockIdx.x;
  const int64_t E = op.experts, k = op.top_k, groups = op.groups, per_group = E / groups;
  const int64_t row_bytes = (route_row_bytes(E, groups) + 15) / 16 * 16;
  float* scores = E <= kRouteStaged ? sh : reinterpret_cast<float*>(scratch + t * row_bytes);
  float* choice = scores + E;
  float* group_score = choice + E;
  unsigned char* taken = reinterpret_cast<unsigned char*>(group_score + groups);
  const float* lg = logits.p + t * logits.ld;
  const float neg_inf = __uint_as_float(0xff800000u);
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    scores[e] = op.score == RouterScore::Sigmoid ? mf::sigmoid(lg[e]) : lg[e];
    taken[e] = 0;
  }
  __syncthreads();
  if (op.score == RouterScore::Softmax) {
    if (threadIdx.x == 0) softmax_seq(scores, E);
    __syncthreads();
  }
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    choice[e] = op.correction_bias.p ? scores[e] + op.correction_bias.p[e] : scores[e];
  __syncthreads();
  if (groups > 1) {
    for (int64_t gi = threadIdx.x; gi < groups; gi += blockDim.x) {
      float b1 = neg_inf, b2 = neg_inf;
      for (int64_t e = gi * per_group; e < (gi + 1) * per_group; ++e) {
        const float v = choice[e];
        if (v > b1) {
          b2 = b1;
          b1 = v;
        } else if (v > b2) {
          b2 = v;
        }
      }
      group_score[gi] = b1 + b2;
    }
    __syncthreads();
    if (threadIdx.x == 0)
      for (int64_t i = 0; i < op.topk_groups; ++i) {
        int64_t best = -1;
        for (int64_t gi = 0; gi < groups; ++gi) {
          if (group_score[gi] != group_score[gi]) continue;  // picked (marked NaN below)
          if (best < 0 || group_score[gi] > group_score[best]) best = gi;
        }
        group_score[best] = __uint_as_float(0x7fc00000u);
      }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
      if (group_score[e / per_group] == group_score[e / per_group]) choice[e] = neg_inf;
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  int32_t* ids = reinterpret_cast<int32_t*>(ids_b.p) + t * ids_b.ld;
  float* w = w_b.p + t * w_b.ld;
  for (int64_t i = 0; i < k; ++i) {
    int64_t best = -1;
    float bv = 0.0f;
    for (int64_t e = 0; e < E; ++e) {
      if (taken[e]) continue;
      const float v = choice[e];
      if (best < 0 || v > bv) {  // ties keep the lower id
        best = e;
        bv = v;
      }
    }
    taken[best] = 1;
    ids[i] = int32_t(best);
    w[i] = scores[best];
  }
  if (op.score == RouterScore::TopkSoftmax) softmax_seq(w, k);
  float s = 0.0f;
  for (int64_t i = 0; i < k; ++i) s += w[i];
  for (int64_t i = 0; i < k; ++i) {
    float wgt = w[i];
    if (op.renormalize) wgt = mf::div(wgt, s + op.renorm_eps);
    w[i] = wgt * op.scaling;
  }
}

__global__ void gather_kernel(Mat z, const int64_t* members, int64_t n, int64_t k, float* g) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, i = blockIdx.y;
  if (c < z.cols && i < n) g[i * z.cols + c] = z.p[(members[i] / k) * z.ld + c];
}
__global__ void scatter_kernel(const float* y, int64_t n, const int64_t* members, Mat yexp) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, i = blockIdx.y;
  if (c < yexp.cols && i < n) yexp.p[members[i] * yexp.ld + c] = y[i * yexp.cols + c];
}
__global__ void combine_kernel(Mat yexp, Mat weights, Mat out) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (c >= out.cols) return;
  const int64_t k = weights.cols;
  float o = 0.0f;
  for (int64_t i = 0; i < k; ++i) o += weights.p[t * weights.ld + i] * yexp.p[(t * k + i) * yexp.ld + c];
  out.p[t * out.ld + c] = o;
}

constexpr int kThreads = 128;
unsigned blocks(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }
dim3 grid2(int64_t cols, int64_t rows) { return dim3(blocks(cols), unsigned(rows)); }

}  // namespace

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) fail("cuda: ", what, " launch failed: ", cudaGetErrorString(err));
}

void linear_ref(cudaStream_t s, const Weight& w, Mat x, Mat y) {
  if (x.rows == 0 || w.rows == 0) return;
  linear_kernel<<<dim3(blocks(w.rows), unsigned(x.rows)), kThreads, 0, s>>>(w, x, y);
  check_launch("linear_ref");
}
void fill(cudaStream_t s, Mat y, float v) {
  if (y.rows == 0 || y.cols == 0) return;
  fill_kernel<<<grid2(y.cols, y.rows), kThreads, 0, s>>>(y, v);
  check_launch("fill");
}
void embed(cudaStream_t s, const Weight& table, const int32_t* ids, Mat out) {
  if (out.rows == 0) return;
  embed_kernel<<<grid2(table.cols, out.rows), kThreads, 0, s>>>(table, ids, out);
  check_launch("embed");
}
void rmsnorm(cudaStream_t s, Mat x, const float* w, float eps, Mat y, int64_t group) {
  const int64_t groups = x.cols / group;
  if (x.rows * groups == 0) return;
  const unsigned threads = unsigned(std::min<int64_t>(256, (group + 31) / 32 * 32));
  const size_t shared = group <= kStagedMax ? size_t(group) * 4 : 0;
  rmsnorm_kernel<<<unsigned(x.rows * groups), threads, shared, s>>>(x, w, eps, y, group, groups);
  check_launch("rmsnorm");
}
void add(cudaStream_t s, Mat y, Mat x) {
  if (y.rows == 0 || y.cols == 0) return;
  add_kernel<<<grid2(y.cols, y.rows), kThreads, 0, s>>>(y, x);
  check_launch("add");
}
void sum(cudaStream_t s, Mat out, Mat a, Mat b) {
  if (out.rows == 0 || out.cols == 0) return;
  sum_kernel<<<grid2(out.cols, out.rows), kThreads, 0, s>>>(out, a, b);
  check_launch("sum");
}
void mul_sigmoid(cudaStream_t s, Mat y, Mat g) {
  if (y.rows == 0 || y.cols == 0) return;
  mul_sigmoid_kernel<<<grid2(y.cols, y.rows), kThreads, 0, s>>>(y, g);
  check_launch("mul_sigmoid");
}
void gated_act(cudaStream_t s, const Activation& a, Mat g, Mat u) {
  if (g.rows == 0 || g.cols == 0) return;
  gated_act_kernel<<<grid2(g.cols, g.rows), kThreads, 0, s>>>(a, g, u);
  check_launch("gated_act");
}
void gated_act_pairs(cudaStream_t s, const Activation& a, Mat gu, Mat out) {
  if (out.rows == 0 || out.cols == 0) return;
  gated_act_pairs_kernel<<<grid2(out.cols, out.rows), kThreads, 0, s>>>(a, gu, out);
  check_launch("gated_act_pairs");
}
void row_dot(cudaStream_t s, Mat x, const float* w, Mat out) {
  if (x.rows == 0) return;
  row_dot_kernel<<<blocks(x.rows), kThreads, 0, s>>>(x, w, out);
  check_launch("row_dot");
}
void attn_res(cudaStream_t s, const Mat* sources, int n, const float* norm, const float* proj, float eps, Mat out,
              float* p) {
  if (out.rows == 0) return;
  // Chunks of up to 1024 columns within 40 KiB of shared memory.
  const int64_t chunk = std::min<int64_t>(1024, std::max<int64_t>(32, 10240 / (n + 1) / 32 * 32));
  attn_res_weights<<<unsigned(out.rows), kThreads, size_t(n + 1) * chunk * 4, s>>>(sources, n, norm, proj, eps,
                                                                                  out.cols, chunk, p);
  check_launch("attn_res weights");
  attn_res_mix<<<grid2(out.cols, out.rows), kThreads, 0, s>>>(sources, n, p, out);
  check_launch("attn_res mix");
}

void kda(cudaStream_t s, const KdaOp& op, int64_t T, const KdaBufs& b) {
  const int64_t P = op.dim(), dk = op.head_dim, K = op.conv_kernel, win = P * (K - 1);
  if (b.rec_raw && T > 0)
    for (int part = 0; part < 3; ++part) {
      const float* src = part == 0 ? b.q : part == 1 ? b.k : b.v;
      copy_rows<<<grid2(P, T), kThreads, 0, s>>>(src, P, b.rec_raw + part * P, b.rec_ld_raw, T, P);
    }
  const float* in[3] = {b.q, b.k, b.v};
  float* out[3] = {b.qc, b.kc, b.vc};
  const float* w[3] = {op.q_conv.p, op.k_conv.p, op.v_conv.p};
  for (int part = 0; part < 3; ++part)
    kda_conv<<<blocks(P), kThreads, 0, s>>>(in[part], w[part], b.conv_to + part * win, T, P, K, out[part],
                                           b.conv_from != b.conv_to ? b.conv_from + part * win : nullptr);
  check_launch("kda conv");
  if (T == 0) {
    if (b.S_from != b.S_to)
      SLUICE_CUDA_CHECK(cudaMemcpyAsync(b.S_to, b.S_from, size_t(op.heads * dk * dk) * 4, cudaMemcpyDeviceToDevice, s));
    return;
  }
  kda_l2norm<<<blocks(T * op.heads), kThreads, 0, s>>>(b.qc, b.kc, T, op.heads, dk, mf::div(1.0f, mf::sqrt(float(dk))));
  kda_gates<<<blocks(T * P), kThreads, 0, s>>>(op, b.f, b.beta, T, b.g, b.beta_s);
  check_launch("kda norms and gates");
  const unsigned threads = unsigned((dk + 31) / 32 * 32);
  kda_delta<<<unsigned(op.heads), threads, size_t(2 * dk + 1) * 4, s>>>(T, P, op.heads, dk, b.S_from, b.S_to, b.qc, b.kc,
                                                                         b.vc, b.g, b.beta_s, P, op.heads, op.o_norm.p,
                                                                         op.norm_eps, b.gate, b.out);
  check_launch("kda delta rule");
  if (b.rec_raw) {
    copy_rows<<<grid2(P, T), kThreads, 0, s>>>(b.kc, P, b.rec_k, b.rec_ld, T, P);
    copy_rows<<<grid2(P, T), kThreads, 0, s>>>(b.vc, P, b.rec_v, b.rec_ld, T, P);
    copy_rows<<<grid2(P, T), kThreads, 0, s>>>(b.g, P, b.rec_g, b.rec_ld, T, P);
    copy_rows<<<grid2(op.heads, T), kThreads, 0, s>>>(b.beta_s, op.heads, b.rec_beta, op.heads, T, op.heads);
    check_launch("kda record");
  }
}

void kda_replay(cudaStream_t s, const KdaOp& op, int64_t n, const KdaReplayBufs& b) {
  const int64_t P = op.dim(), dk = op.head_dim, K = op.conv_kernel, win = P * (K - 1);
  for (int part = 0; part < 3; ++part)
    kda_window_push<<<blocks(P), kThreads, 0, s>>>(b.conv + part * win, b.raw + part * P, b.ld_raw, n, P, K);
  check_launch("kda replay window");
  if (n == 0) return;
  const unsigned threads = unsigned((dk + 31) / 32 * 32);
  kda_delta<<<unsigned(op.heads), threads, size_t(2 * dk + 1) * 4, s>>>(n, P, op.heads, dk, b.S, b.S, nullptr, b.k, b.v,
                                                                         b.g, b.beta, b.ld, b.ld_beta, nullptr, 0.0f,
                                                                         nullptr, nullptr);
  check_launch("kda replay");
}

void mla_cache_write(cudaStream_t s, Mat kv, const float* norm, float eps, Mat latent, Mat k_pe, int64_t first) {
  if (kv.rows == 0) return;
  mla_write_kernel<<<blocks(kv.rows), kThreads, 0, s>>>(kv, norm, eps, latent, k_pe, first);
  check_launch("mla_cache_write");
}
void mla_attention(cudaStream_t s, const MlaOp& op, Mat q, Mat latent, Mat k_pe, int64_t visible0, Mat out,
                   float* scratch) {
  if (q.rows == 0) return;
  const int64_t n_max = visible0 + (op.causal ? q.rows - 1 : 0), per = 2 * op.kv_rank + n_max;
  mla_kernel<<<unsigned(q.rows * op.heads), kThreads, 0, s>>>(op, *op.kv_b, q, latent, k_pe, visible0, out, scratch, per);
  check_launch("mla_attention");
}
void gqa_attention(cudaStream_t s, const GqaOp& op, Mat q, Mat k, Mat v, int64_t visible0, Mat out, float* scratch) {
  if (q.rows == 0) return;
  const int64_t per = visible0 + q.rows - 1;
  gqa_kernel<<<unsigned(q.rows * op.heads), kThreads, 0, s>>>(op, q, k, v, visible0, out, scratch, per);
  check_launch("gqa_attention");
}
void rope(cudaStream_t s, Mat table, RopePairs pairs, Mat x, int64_t heads, int64_t head_stride, int64_t offset,
          int64_t dim) {
  if (x.rows == 0 || dim == 0) return;
  rope_kernel<<<grid2(heads * dim / 2, x.rows), kThreads, 0, s>>>(table, pairs, x, heads, head_stride, offset, dim);
  check_launch("rope");
}
size_t route_scratch_bytes(const RouterOp& op, int64_t rows) {
  return op.experts <= kRouteStaged ? 0 : size_t(rows) * size_t((route_row_bytes(op.experts, op.groups) + 15) / 16 * 16);
}
void route(cudaStream_t s, const RouterOp& op, Mat logits, Mat ids, Mat weights, float* scratch) {
  if (logits.rows == 0) return;
  const size_t shared = op.experts <= kRouteStaged ? size_t(route_row_bytes(op.experts, op.groups)) : 0;
  route_kernel<<<unsigned(logits.rows), kThreads, shared, s>>>(op, logits, ids, weights, reinterpret_cast<char*>(scratch));
  check_launch("route");
}
void gather_rows(cudaStream_t s, Mat z, const int64_t* members, int64_t n, int64_t top_k, float* g) {
  if (n == 0) return;
  gather_kernel<<<grid2(z.cols, n), kThreads, 0, s>>>(z, members, n, top_k, g);
  check_launch("gather_rows");
}
void scatter_rows(cudaStream_t s, const float* y, int64_t n, const int64_t* members, Mat yexp) {
  if (n == 0) return;
  scatter_kernel<<<grid2(yexp.cols, n), kThreads, 0, s>>>(y, n, members, yexp);
  check_launch("scatter_rows");
}
void combine(cudaStream_t s, Mat yexp, Mat weights, Mat out) {
  if (out.rows == 0) return;
  combine_kernel<<<grid2(out.cols, out.rows), kThreads, 0, s>>>(yexp, weights, out);
  check_launch("combine");
}

}  // namespace sluice::device::cuda
