// Multi-head latent attention without rotation (K3 and transformers' kimi_linear are NoPE) over
// the compact cache: each position stores its normalised latent and its shared k_pe; kv_b is
// absorbed into the query (q_nope·W_k) and the output (W_v·Σp·latent), so the cache stays
// kv_lora_rank + rope floats per position per layer. K3's gate σ(g_proj x) scales the heads.
#include <cmath>

#include "core/thread_pool.h"
#include "model/absorbed_attention.h"
#include "model/layers.h"
#include "model/weight_rows.h"

namespace sluice::model {

void mla_forward(const KimiConfig& c, const MlaWeights& w, MlaLayerState& st, int64_t base, const float* x, int64_t T,
                 MlaScratch& s, float* out) {
  const int64_t nh = c.num_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim, vd = c.v_head_dim;
  const int64_t qk = nope + rope, kvr = c.kv_lora_rank;
  float* q = s.q.resize(size_t(T * nh * qk));
  if (c.q_lora_rank > 0) {
    float* qa = s.qa.resize(size_t(T * c.q_lora_rank));
    kernels::linear(w.q_a, x, T, qa);
    for (int64_t t = 0; t < T; ++t)
      kernels::rmsnorm(qa + t * c.q_lora_rank, w.q_a_norm.data(), c.q_lora_rank, c.mla_norm_eps, qa + t * c.q_lora_rank);
    kernels::linear(w.q_b, qa, T, q);
  } else {
    kernels::linear(w.q, x, T, q);
  }
  float* kv = s.kv.resize(size_t(T * (kvr + rope)));
  kernels::linear(w.kv_a, x, T, kv);
  for (int64_t t = 0; t < T; ++t) {
    const float* row = kv + t * (kvr + rope);
    kernels::rmsnorm(row, w.kv_a_norm.data(), kvr, c.mla_norm_eps, st.latent.data() + (base + t) * kvr);
    std::copy(row + kvr, row + kvr + rope, st.k_pe.data() + (base + t) * rope);
  }

  float* attn = s.attn.resize(size_t(T * nh * vd));
  absorbed_attention(w.kv_b, {.heads = nh, .nope = nope, .rope = rope, .v_dim = vd, .kv_rank = kvr}, q, T,
                     st.latent.data(), st.k_pe.data(), base + 1, /*causal=*/true, 1.0f / std::sqrt(float(qk)),
                     s.per_head, attn);
  if (c.mla_output_gate) {
    float* gate = s.gate.resize(size_t(T * nh * vd));
    kernels::linear(w.g, x, T, gate);
    for (int64_t i = 0; i < T * nh * vd; ++i) attn[i] *= kernels::sigmoid(gate[i]);
  }
  kernels::linear(w.o, attn, T, out);
}

void absorbed_attention(const kernels::Weight& kv_b, const AbsorbedAttentionShape& s, const float* q, int64_t T,
                        const float* lat, const float* kpe, int64_t visible0, bool causal, float scale,
                        FloatBuffer& scratch_buf, float* out) {
  const int64_t nh = s.heads, nope = s.nope, rope = s.rope, vd = s.v_dim, kvr = s.kv_rank, qk = nope + rope;
  const int64_t n_max = visible0 + (causal ? T - 1 : 0);
  // Per head: absorbed query [kvr], context latent [kvr], scores [n_max].
  const int64_t per = 2 * kvr + n_max;
  float* scratch = scratch_buf.resize(size_t(nh * per));
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
          float a = kernels::dot(qabs, lat + p * kvr, kvr);
          float b = rope ? kernels::dot(qh + nope, kpe + p * rope, rope) : 0.0f;
          sc[p] = (a + b) * scale;
        }
        kernels::softmax(sc, n);
        std::fill(ctx, ctx + kvr, 0.0f);
        for (int64_t p = 0; p < n; ++p) kernels::axpy(sc[p], lat + p * kvr, ctx, kvr);
        float* ah = out + (t * nh + h) * vd;
        for (int64_t j = 0; j < vd; ++j) ah[j] = weight_dot_row(kv_b, v_row0 + j, ctx);
      }
    }
  });
}

}  // namespace sluice::model
