// Attention on the CPU: the MLA cache write and absorbed MLA over the compact cache (the target's
// MLA layers and the DSpark drafter), grouped-query attention over a KV cache (causal, optional
// sliding window and learned sinks), and rotary embeddings from a per-pass cos/sin table.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/mathf.h"
#include "kernels/cpu/weight_rows.h"

namespace sluice::kernels {
namespace {

// softmax over n scores plus one extra logit (a learned sink) whose probability is dropped.
void softmax_with_sink(float* x, int64_t n, float sink) {
  float m = sink;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  float s = mathf::exp(sink - m);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = mathf::exp(x[i] - m);
    s += x[i];
  }
  float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

void CpuDevice::mla_cache_write(const Buf& kv, const Vec& norm, float eps, Buf latent, Buf k_pe, int64_t first) {
  const int64_t kvr = latent.cols, rope = k_pe.cols, T = kv.rows;
  SLUICE_CHECK(kv.cols == kvr + rope && norm.n == kvr && first >= 0 && first + T <= latent.rows &&
                   first + T <= k_pe.rows,
               "mla_cache_write: shapes");
  for (int64_t t = 0; t < T; ++t) {
    const float* row = row_ptr(kv, t);
    kernels::rmsnorm(row, norm.p, kvr, eps, row_ptr(latent, first + t));
    std::copy(row + kvr, row + kvr + rope, row_ptr(k_pe, first + t));
  }
}

void CpuDevice::mla_attention(const MlaOp& s, const Buf& qb, const Buf& latent, const Buf& k_pe, int64_t visible0,
                              Buf outb) {
  const int64_t nh = s.heads, nope = s.nope, rope = s.rope, vd = s.v_dim, kvr = s.kv_rank, qk = nope + rope;
  const int64_t T = qb.rows;
  const Weight& kv_b = *s.kv_b;
  SLUICE_CHECK(qb.cols == nh * qk && qb.contiguous() && outb.rows == T && outb.cols == nh * vd && outb.contiguous() &&
                   latent.cols == kvr && latent.contiguous() && k_pe.cols == rope && k_pe.contiguous(),
               "mla_attention: shapes");
  SLUICE_CHECK(kv_b.type == WeightType::BF16 || kv_b.type == WeightType::F32, "mla_attention: kv_b must be BF16 or F32");
  const int64_t n_max = visible0 + (s.causal ? T - 1 : 0);
  SLUICE_CHECK(n_max <= latent.rows && n_max <= k_pe.rows, "mla_attention: ", n_max, " positions past the cache");
  const float* q = row_ptr(qb, 0);
  const float* lat = row_ptr(latent, 0);
  const float* kpe = row_ptr(k_pe, 0);
  float* out = row_ptr(outb, 0);
  ScratchScope scope(*this);
  // Per head: absorbed query [kvr], context latent [kvr], scores [n_max].
  const int64_t per = 2 * kvr + n_max;
  float* scratch = temp<float>(nh * per);
  const float scale = s.scale;
  const bool causal = s.causal;
  ThreadPool::global().parallel_for(nh, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      float* qabs = scratch + h * per;
      float* ctx = qabs + kvr;
      float* sc = ctx + kvr;
      const int64_t k_row0 = h * (nope + vd), v_row0 = k_row0 + nope;
      for (int64_t t = 0; t < T; ++t) {
        const float* qh = q + (t * nh + h) * qk;
        std::fill(qabs, qabs + kvr, 0.0f);
        for (int64_t i = 0; i < nope; ++i) weight_axpy_row(qh[i], kv_b, k_row0 + i, qabs);
        const int64_t n = visible0 + (causal ? t : 0);
        for (int64_t p = 0; p < n; ++p) {
          float a = dot(qabs, lat + p * kvr, kvr);
          float b = rope ? dot(qh + nope, kpe + p * rope, rope) : 0.0f;
          sc[p] = (a + b) * scale;
        }
        softmax(sc, n);
        std::fill(ctx, ctx + kvr, 0.0f);
        for (int64_t p = 0; p < n; ++p) axpy(sc[p], lat + p * kvr, ctx, kvr);
        float* ah = out + (t * nh + h) * vd;
        for (int64_t j = 0; j < vd; ++j) ah[j] = weight_dot_row(kv_b, v_row0 + j, ctx);
      }
    }
  });
}

void CpuDevice::gqa_attention(const GqaOp& op, const Buf& qb, const Buf& kb, const Buf& vb, int64_t visible0,
                              Buf outb) {
  const int64_t D = op.head_dim, nh = op.heads, nkv = op.kv_heads, T = qb.rows;
  SLUICE_CHECK(nkv > 0 && nh % nkv == 0, "gqa_attention: ", nh, " heads over ", nkv, " kv heads");
  const int64_t group = nh / nkv, qd = nh * D, kvd = nkv * D;
  SLUICE_CHECK(qb.cols == qd && qb.contiguous() && outb.rows == T && outb.cols == qd && outb.contiguous() &&
                   kb.cols == kvd && vb.cols == kvd && kb.contiguous() && vb.contiguous(),
               "gqa_attention: shapes");
  SLUICE_CHECK(op.sinks.empty() || op.sinks.n == nh, "gqa_attention: ", op.sinks.n, " sinks for ", nh, " heads");
  const int64_t ctx_max = visible0 + T - 1;
  SLUICE_CHECK(ctx_max <= kb.rows && ctx_max <= vb.rows, "gqa_attention: ", ctx_max, " positions past the cache");
  const float* q = row_ptr(qb, 0);
  const float* kc = row_ptr(kb, 0);
  const float* vc = row_ptr(vb, 0);
  float* attn = row_ptr(outb, 0);
  ScratchScope scope(*this);
  float* scores = temp<float>(nh * ctx_max);
  ThreadPool::global().parallel_for(nh, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      float* sc = scores + h * ctx_max;
      const int64_t kvh = h / group;
      for (int64_t t = 0; t < T; ++t) {
        const float* qh = q + t * qd + h * D;
        const int64_t n = visible0 + t;  // causal: row t sees positions 0..visible0-1+t
        const int64_t p0 = op.window > 0 ? std::max<int64_t>(0, n - op.window) : 0;
        for (int64_t p = p0; p < n; ++p) sc[p - p0] = dot(qh, kc + p * kvd + kvh * D, D) * op.scale;
        if (op.sinks.empty()) softmax(sc, n - p0);
        else softmax_with_sink(sc, n - p0, op.sinks.p[h]);
        float* ah = attn + t * qd + h * D;
        std::fill(ah, ah + D, 0.0f);
        for (int64_t p = p0; p < n; ++p) axpy(sc[p - p0], vc + p * kvd + kvh * D, ah, D);
      }
    }
  });
}

void CpuDevice::rope_table(const RopeSpec& spec, int64_t first, Buf table) {
  const int64_t half = int64_t(spec.inv_freq.size());
  SLUICE_CHECK(table.cols == 2 * half, "rope_table: ", table.cols, " columns for ", half, " frequencies");
  for (int64_t t = 0; t < table.rows; ++t) rope_table_row(spec, first + t, row_ptr(table, t));
}

void CpuDevice::rope(const Buf& table, RopePairs pairs, Buf x, int64_t heads, int64_t head_stride, int64_t offset,
                     int64_t dim) {
  const int64_t half = dim / 2;
  SLUICE_CHECK(table.rows == x.rows && table.cols == dim && dim % 2 == 0 &&
                   (heads - 1) * head_stride + offset + dim <= x.cols,
               "rope: shapes");
  for (int64_t t = 0; t < x.rows; ++t) {
    const float* ct = row_ptr(table, t);
    const float* st = ct + half;
    for (int64_t h = 0; h < heads; ++h) {
      float* p = row_ptr(x, t) + h * head_stride + offset;
      if (pairs == RopePairs::Half) {
        for (int64_t i = 0; i < half; ++i) {
          const float a = p[i], b = p[i + half];
          p[i] = a * ct[i] - b * st[i];
          p[i + half] = b * ct[i] + a * st[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = p[2 * i], x1 = p[2 * i + 1];
          p[2 * i] = x0 * ct[i] - x1 * st[i];
          p[2 * i + 1] = x1 * ct[i] + x0 * st[i];
        }
      }
    }
  }
}

}  // namespace sluice::kernels
