// The Qwen3 dense forward pass: embedding; per layer RMSNorm, GQA attention with per-head
// q_norm/k_norm before RoPE (rotate-half pairing: channel i with i + head_dim/2, as transformers'
// rotate_half), SwiGLU MLP, both residual; final norm and lm_head (or the tied embedding).
// Every row's attention is computed by the same code whatever the pass length, so a T-row pass
// equals T one-row passes bit for bit (the kernels are batch-invariant too).
#include "model/qwen3.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/weight_load.h"

namespace sluice::model {

Qwen3State::Qwen3State(const format::Qwen3Config& c)
    : kv_dim_(c.kv_dim()), k_(static_cast<size_t>(c.num_layers)), v_(static_cast<size_t>(c.num_layers)) {
  reserve(256);
}

void Qwen3State::truncate(int64_t n) {
  if (n < 0 || n > length_) fail("Qwen3State::truncate(", n, ") outside 0..", length_);
  // Rows past n are never read again before being overwritten: attention only looks at 0..length.
  length_ = n;
}

void Qwen3State::reserve(int64_t positions) {
  if (positions <= capacity_) return;
  const int64_t cap = std::max<int64_t>(positions, capacity_ * 2);
  for (size_t l = 0; l < k_.size(); ++l) {
    k_[l].resize(static_cast<size_t>(cap * kv_dim_));
    v_[l].resize(static_cast<size_t>(cap * kv_dim_));
  }
  capacity_ = cap;
}

std::unique_ptr<Qwen3Model> Qwen3Model::load(const std::string& dir) {
  std::unique_ptr<Qwen3Model> m(new Qwen3Model());
  m->config_ = format::load_qwen3_config(dir);
  m->tensors_ = format::TensorSet::open_dir(dir);
  const format::Qwen3Config& c = m->config_;
  const format::TensorSet& ts = m->tensors_;
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size, D = c.head_dim;
  m->embed_ = weight_matrix(ts, "model.embed_tokens.weight", V, H);
  // Tied checkpoints saved by transformers leave lm_head out; transformers uses the embedding
  // then even if a copy is present, and so do we.
  m->lm_head_ = c.tie_word_embeddings ? m->embed_ : weight_matrix(ts, "lm_head.weight", V, H);
  m->final_norm_ = float_vector(ts, "model.norm.weight", H);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string L = cat("model.layers.", l, ".");
    Layer w;
    w.input_norm = float_vector(ts, L + "input_layernorm.weight", H);
    w.post_norm = float_vector(ts, L + "post_attention_layernorm.weight", H);
    w.q = weight_matrix(ts, L + "self_attn.q_proj.weight", c.q_dim(), H);
    w.k = weight_matrix(ts, L + "self_attn.k_proj.weight", c.kv_dim(), H);
    w.v = weight_matrix(ts, L + "self_attn.v_proj.weight", c.kv_dim(), H);
    w.o = weight_matrix(ts, L + "self_attn.o_proj.weight", H, c.q_dim());
    w.q_norm = float_vector(ts, L + "self_attn.q_norm.weight", D);
    w.k_norm = float_vector(ts, L + "self_attn.k_norm.weight", D);
    w.mlp.gate = weight_matrix(ts, L + "mlp.gate_proj.weight", I, H);
    w.mlp.up = weight_matrix(ts, L + "mlp.up_proj.weight", I, H);
    w.mlp.down = weight_matrix(ts, L + "mlp.down_proj.weight", H, I);
    m->layers_.push_back(std::move(w));
  }
  // transformers computes the frequencies in fp32: 1 / theta^(2i / head_dim).
  for (int64_t i = 0; i < D / 2; ++i)
    m->inv_freq_.push_back(1.0f / std::pow(float(c.rope_theta), float(2 * i) / float(D)));
  return m;
}

void Qwen3Model::attention(const Layer& w, Qwen3State& st, size_t layer, int64_t base, int64_t T, const float* x,
                           float* out) {
  const format::Qwen3Config& c = config_;
  const int64_t D = c.head_dim, half = D / 2, nh = c.num_heads, nkv = c.num_kv_heads, group = nh / nkv;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  float* q = q_.resize(static_cast<size_t>(T * qd));
  float* k = k_.resize(static_cast<size_t>(T * kvd));
  float* v = v_.resize(static_cast<size_t>(T * kvd));
  kernels::linear(w.q, x, T, q);
  kernels::linear(w.k, x, T, k);
  kernels::linear(w.v, x, T, v);
  const float* cs = cos_.data();
  const float* sn = sin_.data();
  // Per-head RMSNorm, then RoPE: for i < D/2, (x_i, x_{i+D/2}) rotates by angle pos·inv_freq_i.
  auto norm_rope = [&](float* head, const std::vector<float>& norm, int64_t t) {
    kernels::rmsnorm(head, norm.data(), D, c.rms_norm_eps, head);
    const float* ct = cs + t * half;
    const float* sn_t = sn + t * half;
    for (int64_t i = 0; i < half; ++i) {
      const float a = head[i], b = head[i + half];
      head[i] = a * ct[i] - b * sn_t[i];
      head[i + half] = b * ct[i] + a * sn_t[i];
    }
  };
  float* kc = st.k_[layer].data();
  float* vc = st.v_[layer].data();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < nh; ++h) norm_rope(q + t * qd + h * D, w.q_norm, t);
    for (int64_t h = 0; h < nkv; ++h) norm_rope(k + t * kvd + h * D, w.k_norm, t);
    std::copy(k + t * kvd, k + (t + 1) * kvd, kc + (base + t) * kvd);
    std::copy(v + t * kvd, v + (t + 1) * kvd, vc + (base + t) * kvd);
  }
  const float scale = 1.0f / std::sqrt(float(D));
  const int64_t ctx_max = base + T;
  float* scores = scores_.resize(static_cast<size_t>(nh * ctx_max));
  float* attn = attn_.resize(static_cast<size_t>(T * qd));
  ThreadPool::global().parallel_for(nh, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      float* sc = scores + h * ctx_max;
      const int64_t kvh = h / group;
      for (int64_t t = 0; t < T; ++t) {
        const float* qh = q + t * qd + h * D;
        const int64_t n = base + t + 1;  // causal: row t sees positions 0..base+t
        for (int64_t p = 0; p < n; ++p) sc[p] = kernels::dot(qh, kc + p * kvd + kvh * D, D) * scale;
        kernels::softmax(sc, n);
        float* ah = attn + t * qd + h * D;
        std::fill(ah, ah + D, 0.0f);
        for (int64_t p = 0; p < n; ++p) kernels::axpy(sc[p], vc + p * kvd + kvh * D, ah, D);
      }
    }
  });
  kernels::linear(w.o, attn, T, out);
}

void Qwen3Model::forward(Qwen3State& st, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) {
  const format::Qwen3Config& c = config_;
  const int64_t T = static_cast<int64_t>(tokens.size()), H = c.hidden_size;
  if (T == 0) fail("forward pass with no tokens");
  if (opt.capture) fail("Qwen3 passes do not hand out hidden rows (PassOptions::capture is for Kimi targets)");
  const int64_t base = st.length_;
  st.reserve(base + T);

  // RoPE angles of this pass's positions (fp32 product as transformers computes it).
  const int64_t half = c.head_dim / 2;
  float* cs = cos_.resize(static_cast<size_t>(T * half));
  float* sn = sin_.resize(static_cast<size_t>(T * half));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(base + t) * inv_freq_[static_cast<size_t>(i)];
      cs[t * half + i] = std::cos(angle);
      sn[t * half + i] = std::sin(angle);
    }

  float* h = h_.resize(static_cast<size_t>(T * H));
  embed_tokens(embed_, tokens, h);
  float* normed = normed_.resize(static_cast<size_t>(T * H));
  float* out = out_.resize(static_cast<size_t>(T * H));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& w = layers_[l];
    for (int64_t t = 0; t < T; ++t) kernels::rmsnorm(h + t * H, w.input_norm.data(), H, c.rms_norm_eps, normed + t * H);
    attention(w, st, l, base, T, normed, out);
    for (int64_t i = 0; i < T * H; ++i) h[i] += out[i];
    for (int64_t t = 0; t < T; ++t) kernels::rmsnorm(h + t * H, w.post_norm.data(), H, c.rms_norm_eps, normed + t * H);
    swiglu_forward(w.mlp, normed, T, mlp_scratch_, out);
    for (int64_t i = 0; i < T * H; ++i) h[i] += out[i];
  }
  const int64_t rows = opt.all_logits ? T : 1;
  const int64_t first = T - rows;
  float* fn = final_.resize(static_cast<size_t>(rows * H));
  for (int64_t t = 0; t < rows; ++t)
    kernels::rmsnorm(h + (first + t) * H, final_norm_.data(), H, c.rms_norm_eps, fn + t * H);
  kernels::linear(lm_head_, fn, rows, logits);
  st.length_ = base + T;
}

}  // namespace sluice::model
