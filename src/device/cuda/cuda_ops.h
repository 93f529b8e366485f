// Launchers of the CUDA kernels, shared by the device class (cuda_device.cu), the reference
// kernels (ops_ref.cu: the scalar CPU order, compiled without fused multiply-add) and the fast
// products (gemv_fast.cu). Every pointer is device memory; every launch goes on `s`.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "device/device.h"

#define SLUICE_CUDA_CHECK(call)                                                                          \
  do {                                                                                                   \
    const cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) ::sluice::fail("cuda: ", #call, " failed: ", cudaGetErrorString(err_));     \
  } while (0)

namespace sluice::device::cuda {

// A device Buf's element pointer and stride, as kernels take them.
struct Mat {
  float* p;
  int64_t rows, cols, ld;
};
inline Mat mat(const Buf& b) { return {static_cast<float*>(b.p), b.rows, b.cols, b.ld}; }

void check_launch(const char* what);

// Products: y[i, r] = W[r, :]·x[i, :] (+ bias[r]) for i < n.
void linear_ref(cudaStream_t s, const Weight& w, Mat x, Mat y);
void linear_fast(cudaStream_t s, const Weight& w, Mat x, Mat y);
// Whether the fast products take weight w with inputs at x (row stride ldx); otherwise linear_fast
// falls back to the reference kernel.
bool fast_product_ok(const Weight& w, const void* x, int64_t ldx);

// The tensor-core products (mma_fast.cu; the fast ISA for every weight format but F32, whatever
// the number of input rows). The inputs go in split exactly into three bf16 pieces, once per pass:
// pieces holds pieces_bytes(x.rows, x.cols) of device memory. y[i, r] = W[r, :]·x[i, :] (+ bias[r])
// for the n rows of the pieces.
size_t pieces_bytes(int64_t rows, int64_t cols);
void split_pieces(cudaStream_t s, Mat x, void* pieces);
void linear_mma(cudaStream_t s, const Weight& w, const void* pieces, int64_t n, Mat y);

// One routed expert of a grouped launch: its weights (on the device) and its member rows
// [off, off + n) of the gathered input and of the member list.
struct ExpertGroupEntry {
  Weight gate, up, down;
  int64_t off, n;
};
// The grouped expert products (fast ISA): for every expert of `table` (device memory, `experts`
// entries, each with at most max_rows members, all of one weight type and shape [I, R] / [R, I]):
// h = act(gate·g + bg, up·g + bu) over its gathered rows g, then yexp[members[m]] = down·h[m] + bd.
void experts_fast(cudaStream_t s, const Activation& act, WeightType type, const ExpertGroupEntry* table, int experts,
                  int64_t max_rows, int64_t I, const float* g, float* h, const int64_t* members, Mat yexp);

// The same on tensor cores (not F32): g_pieces are the gathered rows' pieces (total_rows of them),
// h_pieces room for h's (pieces_bytes(total_rows, I)).
void experts_mma(cudaStream_t s, const Activation& act, WeightType type, const ExpertGroupEntry* table, int experts,
                 int64_t max_rows, int64_t R, int64_t I, const void* g_pieces, float* h, void* h_pieces,
                 int64_t total_rows, const int64_t* members, Mat yexp);

void fill(cudaStream_t s, Mat y, float v);
void embed(cudaStream_t s, const Weight& table, const int32_t* ids, Mat out);
void rmsnorm(cudaStream_t s, Mat x, const float* w, float eps, Mat y, int64_t group);
// The fast ISA's RMSNorm and AttnRes (rows_fast.cu): block-wide fixed-tree sums, batch invariant,
// within the sum-order bound of the reference (which sums each row in one thread).
void rmsnorm_fast(cudaStream_t s, Mat x, const float* w, float eps, Mat y, int64_t group);
void attn_res_fast(cudaStream_t s, const Mat* sources, int n, const float* norm, const float* proj, float eps, Mat out,
                   float* p);
void add(cudaStream_t s, Mat y, Mat x);
void sum(cudaStream_t s, Mat out, Mat a, Mat b);
void mul_sigmoid(cudaStream_t s, Mat y, Mat g);
void gated_act(cudaStream_t s, const Activation& a, Mat g, Mat u);
// out[r, c] = act(gu[r, 2c], gu[r, 2c + 1]): gate and up interleaved (gpt-oss's experts).
void gated_act_pairs(cudaStream_t s, const Activation& a, Mat gu, Mat out);
void row_dot(cudaStream_t s, Mat x, const float* w, Mat out);
// sources: device array of n Mats.
void attn_res(cudaStream_t s, const Mat* sources, int n, const float* norm, const float* proj, float eps, Mat out,
              float* p_scratch);

struct KdaBufs {
  const float *q, *k, *v, *f, *beta, *gate;  // [T, P] ([T, heads] for beta), contiguous
  const float *conv_from, *S_from;
  float *conv_to, *S_to;
  float *rec_raw, *rec_k, *rec_v, *rec_g, *rec_beta;  // null: no record; raw has row stride 3P
  int64_t rec_ld_raw, rec_ld;
  float* out;  // [T, P]
  float *qc, *kc, *vc, *g, *beta_s;  // scratch [T, P] ×4, [T, heads]
};
void kda(cudaStream_t s, const KdaOp& op, int64_t T, const KdaBufs& b);
struct KdaReplayBufs {
  float *conv, *S;
  const float *raw, *k, *v, *g, *beta;
  int64_t ld_raw, ld, ld_beta;
};
void kda_replay(cudaStream_t s, const KdaOp& op, int64_t n, const KdaReplayBufs& b);

void mla_cache_write(cudaStream_t s, Mat kv, const float* norm, float eps, Mat latent, Mat k_pe, int64_t first);
void mla_attention(cudaStream_t s, const MlaOp& op, Mat q, Mat latent, Mat k_pe, int64_t visible0, Mat out,
                   float* scratch);
void gqa_attention(cudaStream_t s, const GqaOp& op, Mat q, Mat k, Mat v, int64_t visible0, Mat out, float* scratch);
void rope(cudaStream_t s, Mat table, RopePairs pairs, Mat x, int64_t heads, int64_t head_stride, int64_t offset,
          int64_t dim);

// scratch: route_scratch_bytes(op, logits.rows) of device memory.
void route(cudaStream_t s, const RouterOp& op, Mat logits, Mat ids, Mat weights, float* scratch);
size_t route_scratch_bytes(const RouterOp& op, int64_t rows);
// Gathers rows z[members[i] / top_k] into g (contiguous [n, cols]); scatters y rows to yexp[members[i]].
void gather_rows(cudaStream_t s, Mat z, const int64_t* members, int64_t n, int64_t top_k, float* g);
void scatter_rows(cudaStream_t s, const float* y, int64_t n, const int64_t* members, Mat yexp);
void combine(cudaStream_t s, Mat yexp, Mat weights, Mat out);

}  // namespace sluice::device::cuda
