// Kimi Delta Attention over T rows: projections, short causal conv + SiLU, per-head l2norm,
// channel-wise log-decay gate, β, the delta-rule recurrence run row by row (the exact form; a
// chunked form would have to match it), and the per-head RMSNorm with sigmoid output gate.
#include <cmath>

#include "core/thread_pool.h"
#include "model/layers.h"

namespace sluice::model {
namespace {

// One delta-rule step for one head: S ← Diag(α)S; δ = β(v − Sᵀk); S ← S + k δᵀ; o = Sᵀq.
// S is [dk, dv] with rows indexed by key channel; q may be null (replay needs no output).
void delta_step(float* S, int64_t dk, int64_t dv, const float* q, const float* k, const float* v, const float* g,
                float beta, float* kv_mem, float* o) {
  for (int64_t i = 0; i < dk; ++i) {
    float a = std::exp(g[i]);
    float* row = S + i * dv;
    for (int64_t j = 0; j < dv; ++j) row[j] *= a;
  }
  for (int64_t j = 0; j < dv; ++j) kv_mem[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = S + i * dv;
    float ki = k[i];
    for (int64_t j = 0; j < dv; ++j) kv_mem[j] += row[j] * ki;
  }
  for (int64_t j = 0; j < dv; ++j) kv_mem[j] = (v[j] - kv_mem[j]) * beta;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = S + i * dv;
    float ki = k[i];
    for (int64_t j = 0; j < dv; ++j) row[j] += ki * kv_mem[j];
  }
  if (!q) return;
  for (int64_t j = 0; j < dv; ++j) o[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = S + i * dv;
    float qi = q[i];
    for (int64_t j = 0; j < dv; ++j) o[j] += row[j] * qi;
  }
}

// Pushes T raw rows into a [C, K-1] conv window (no outputs).
void conv_window_push(float* state, const float* x, int64_t ldx, int64_t T, int64_t C, int64_t K) {
  const int64_t S = K - 1;
  if (S <= 0) return;
  for (int64_t c = 0; c < C; ++c) {
    float* st = state + c * S;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j + 1 < S; ++j) st[j] = st[j + 1];
      st[S - 1] = x[t * ldx + c];
    }
  }
}

}  // namespace

void kda_forward(const KimiConfig& c, const KdaWeights& w, KdaLayerState& st, const float* x, int64_t T,
                 KdaRowRecord* rec, KdaScratch& s, float* out) {
  const int64_t P = c.kda_dim(), dk = c.kda_head_dim, heads = c.kda_heads, K = c.conv_kernel;
  const int64_t win = P * (K - 1);
  float* qh = s.qh.resize(size_t(T * P));
  float* kh = s.kh.resize(size_t(T * P));
  float* vh = s.vh.resize(size_t(T * P));
  kernels::linear(w.q, x, T, qh);
  kernels::linear(w.k, x, T, kh);
  kernels::linear(w.v, x, T, vh);
  if (rec) {
    rec->raw.resize(size_t(T * 3 * P));
    for (int64_t t = 0; t < T; ++t) {
      std::copy(qh + t * P, qh + (t + 1) * P, rec->raw.begin() + t * 3 * P);
      std::copy(kh + t * P, kh + (t + 1) * P, rec->raw.begin() + t * 3 * P + P);
      std::copy(vh + t * P, vh + (t + 1) * P, rec->raw.begin() + t * 3 * P + 2 * P);
    }
  }
  float* qc = s.qc.resize(size_t(T * P));
  float* kc = s.kc.resize(size_t(T * P));
  float* vc = s.vc.resize(size_t(T * P));
  kernels::causal_conv_silu(st.conv.data(), qh, w.q_conv.data(), T, P, K, qc);
  kernels::causal_conv_silu(st.conv.data() + win, kh, w.k_conv.data(), T, P, K, kc);
  kernels::causal_conv_silu(st.conv.data() + 2 * win, vh, w.v_conv.data(), T, P, K, vc);
  const float q_scale = 1.0f / std::sqrt(float(dk));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      float* q = qc + t * P + h * dk;
      kernels::l2norm(q, dk, 1e-6f, q);
      for (int64_t i = 0; i < dk; ++i) q[i] *= q_scale;
      float* k = kc + t * P + h * dk;
      kernels::l2norm(k, dk, 1e-6f, k);
    }
  }

  // Log-decay per channel: r = f_b(f_a(x)) + dt_bias.
  float* fa = s.fa.resize(size_t(T * dk));
  float* g = s.g.resize(size_t(T * P));
  kernels::linear(w.f_a, x, T, fa);
  kernels::linear(w.f_b, fa, T, g);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t ch = 0; ch < P; ++ch) {
      float r = g[t * P + ch] + w.dt_bias[size_t(ch)];
      float a = std::exp(w.a_log[size_t(ch / dk)]);
      g[t * P + ch] = c.gate_lower_bound ? *c.gate_lower_bound * kernels::sigmoid(a * r) : -a * kernels::softplus(r);
    }
  }
  float* beta = s.beta.resize(size_t(T * heads));
  kernels::linear(w.b, x, T, beta);
  for (int64_t i = 0; i < T * heads; ++i) beta[i] = kernels::sigmoid(beta[i]);

  float* gate = s.gate.resize(size_t(T * P));
  if (c.kda_full_rank_gate) {
    kernels::linear(w.g, x, T, gate);
  } else {
    float* ga = s.ga.resize(size_t(T * dk));
    kernels::linear(w.g_a, x, T, ga);
    kernels::linear(w.g_b, ga, T, gate);
  }

  // The recurrence: heads are independent; rows run in order.
  float* o = s.o.resize(size_t(T * P));
  ThreadPool::global().parallel_for(heads, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> kv_mem(static_cast<size_t>(dk));
    for (int64_t h = h0; h < h1; ++h) {
      float* S = st.S.data() + h * dk * dk;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t off = t * P + h * dk;
        delta_step(S, dk, dk, qc + off, kc + off, vc + off, g + off, beta[t * heads + h], kv_mem.data(), o + off);
        float* oh = o + off;
        kernels::rmsnorm(oh, w.o_norm.data(), dk, c.rms_norm_eps, oh);
        for (int64_t j = 0; j < dk; ++j) oh[j] *= kernels::sigmoid(gate[off + j]);
      }
    }
  });
  if (rec) {
    rec->k.assign(kc, kc + T * P);
    rec->v.assign(vc, vc + T * P);
    rec->g.assign(g, g + T * P);
    rec->beta.assign(beta, beta + T * heads);
  }
  kernels::linear(w.o, o, T, out);
}

void kda_replay(const KimiConfig& c, KdaLayerState& st, const KdaRowRecord& rec, int64_t n) {
  const int64_t P = c.kda_dim(), dk = c.kda_head_dim, heads = c.kda_heads, K = c.conv_kernel;
  const int64_t win = P * (K - 1);
  for (int part = 0; part < 3; ++part)
    conv_window_push(st.conv.data() + part * win, rec.raw.data() + part * P, 3 * P, n, P, K);
  std::vector<float> kv_mem(static_cast<size_t>(dk));
  for (int64_t h = 0; h < heads; ++h) {
    float* S = st.S.data() + h * dk * dk;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t off = t * P + h * dk;
      delta_step(S, dk, dk, nullptr, rec.k.data() + off, rec.v.data() + off, rec.g.data() + off,
                 rec.beta[size_t(t * heads + h)], kv_mem.data(), nullptr);
    }
  }
}

}  // namespace sluice::model
