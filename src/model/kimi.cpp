// The Kimi-family forward pass: embedding, per layer (Block AttnRes or plain residual) attention
// (KDA or MLA) and MLP (dense or MoE), final norm and lm_head; plus commit_prefix for verify.
#include "model/kimi.h"

#include <algorithm>

#include "core/error.h"
#include "model/weight_load.h"

namespace sluice::model {

using format::AttnKind;
using format::MlpKind;

std::unique_ptr<KimiModel> KimiModel::load(const std::string& dir, bool resident_experts) {
  std::unique_ptr<KimiModel> m(new KimiModel());
  m->config_ = format::load_kimi_config(dir);
  m->tensors_ = format::TensorSet::open_dir(dir);
  m->weights_ = load_kimi_weights(m->config_, m->tensors_);
  if (resident_experts) {
    m->resident_ = std::make_unique<store::ResidentExperts>(m->config_, m->tensors_);
    m->experts_ = m->resident_.get();
  }
  return m;
}

void KimiModel::forward(SequenceState& st, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) {
  const KimiConfig& c = config_;
  const int64_t T = int64_t(tokens.size()), H = c.hidden_size;
  if (T == 0) fail("forward pass with no tokens");
  if (!experts_ && c.num_experts > 0) fail("no expert source: load with resident experts or set a provider");
  const int64_t captured = opt.capture ? int64_t(opt.capture->layers.size()) : 0;
  if (opt.capture) {
    capture_slot_.assign(size_t(c.num_layers), -1);
    for (int64_t i = 0; i < captured; ++i) {
      const int64_t l = opt.capture->layers[size_t(i)];
      if (l < 0 || l >= c.num_layers)
        fail("hidden-row capture names layer ", l, ", outside the target's layers 0..", c.num_layers - 1);
      capture_slot_[size_t(l)] = int(i);
    }
  }
  const int64_t base = st.length_;
  st.reserve(base + T);
  if (opt.record) {
    st.record.before = st.snapshot();
    st.record.rows = T;
    st.record.kda.resize(st.kda.size());
  }
  st.record.valid = false;

  float* h = h_.resize(size_t(T * H));
  embed_tokens(weights_.embed, tokens, h);
  float* normed = normed_.resize(size_t(T * H));
  float* attn_out = attn_out_.resize(size_t(T * H));
  float* mlp_out = mlp_out_.resize(size_t(T * H));
  const int64_t B = c.attn_res_block_size;
  std::vector<const float*> sources;
  int64_t anchors = 0;
  if (B > 0 && anchors_.size() < size_t(c.num_layers / B + 2)) anchors_.resize(size_t(c.num_layers / B + 2));
  float* prefix = prefix_.resize(size_t(T * H));
  float* mix = attn_in_.resize(size_t(T * H));

  int64_t kda_i = 0, mla_i = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = weights_.layers[size_t(l)];
    // Attention input (AttnRes over the finished blocks and the running block sum).
    const float* a_in = h;
    if (B > 0) {
      if (anchors > 0) {
        sources.clear();
        for (int64_t i = 0; i < anchors; ++i) sources.push_back(anchors_[size_t(i)].data());
        sources.push_back(h);
        attn_res_mix(sources, lw.attn_res_norm, lw.attn_res_proj, T, H, c.rms_norm_eps, mix);
        a_in = mix;
      }
      if (l % B == 0) {
        float* a = anchors_[size_t(anchors)].resize(size_t(T * H));
        std::copy(h, h + T * H, a);
        ++anchors;
        std::fill(prefix, prefix + T * H, 0.0f);
      } else {
        std::copy(h, h + T * H, prefix);
      }
    }
    for (int64_t t = 0; t < T; ++t) kernels::rmsnorm(a_in + t * H, lw.input_norm.data(), H, c.rms_norm_eps, normed + t * H);
    if (lw.attn_kind == AttnKind::KDA) {
      KdaRowRecord* rec = opt.record ? &st.record.kda[size_t(kda_i)] : nullptr;
      kda_forward(c, lw.kda, st.kda[size_t(kda_i)], normed, T, rec, kda_scratch_, attn_out);
      ++kda_i;
    } else {
      mla_forward(c, lw.mla, st.mla[size_t(mla_i)], base, normed, T, mla_scratch_, attn_out);
      ++mla_i;
    }
    // MLP input.
    const float* m_in;
    if (B > 0) {
      for (int64_t i = 0; i < T * H; ++i) prefix[i] += attn_out[i];
      sources.clear();
      for (int64_t i = 0; i < anchors; ++i) sources.push_back(anchors_[size_t(i)].data());
      sources.push_back(prefix);
      attn_res_mix(sources, lw.mlp_res_norm, lw.mlp_res_proj, T, H, c.rms_norm_eps, mix);
      m_in = mix;
    } else {
      for (int64_t i = 0; i < T * H; ++i) h[i] += attn_out[i];
      m_in = h;
    }
    for (int64_t t = 0; t < T; ++t) kernels::rmsnorm(m_in + t * H, lw.post_norm.data(), H, c.rms_norm_eps, normed + t * H);
    if (experts_ && experts_->wants_prefetch() && l + 1 < c.num_layers && c.mlp[size_t(l + 1)] == MlpKind::MoE)
      predict_next_layer(int(l + 1), m_in, T);
    if (lw.mlp_kind == MlpKind::Dense) {
      mlp_forward(c, lw.dense, normed, T, mlp_scratch_, mlp_out);
    } else {
      moe_forward(c, lw.moe, *experts_, int(l), normed, T, moe_scratch_, mlp_out, &counters_.moe);
    }
    if (B > 0) {
      for (int64_t i = 0; i < T * H; ++i) h[i] = prefix[i] + mlp_out[i];
    } else {
      for (int64_t i = 0; i < T * H; ++i) h[i] += mlp_out[i];
    }
    if (captured > 0 && capture_slot_[size_t(l)] >= 0) {
      float* dst = opt.capture->rows + capture_slot_[size_t(l)] * H;
      for (int64_t t = 0; t < T; ++t) std::copy(h + t * H, h + (t + 1) * H, dst + t * captured * H);
    }
  }

  // Output: AttnRes over the anchors and the last block, final norm, lm_head.
  const int64_t rows = opt.all_logits ? T : 1;
  const int64_t first = T - rows;
  const float* fin = h;
  if (B > 0) {
    sources.clear();
    for (int64_t i = 0; i < anchors; ++i) sources.push_back(anchors_[size_t(i)].data() + first * H);
    sources.push_back(h + first * H);
    attn_res_mix(sources, weights_.out_res_norm, weights_.out_res_proj, rows, H, c.rms_norm_eps, mix);
    fin = mix;
  } else {
    fin = h + first * H;
  }
  float* fn = final_.resize(size_t(rows * H));
  for (int64_t t = 0; t < rows; ++t) kernels::rmsnorm(fin + t * H, weights_.final_norm.data(), H, c.rms_norm_eps, fn + t * H);
  kernels::linear(weights_.lm_head, fn, rows, logits);

  st.length_ = base + T;
  st.record.valid = opt.record;
  counters_.passes += 1;
  counters_.rows += T;
}

void KimiModel::predict_next_layer(int next, const float* m_in, int64_t T) {
  // Layer next's own norm and router applied to this layer's MLP input: a guess at its routes,
  // used only to start reads early; the real router decides at layer next.
  const KimiConfig& c = config_;
  const int64_t H = c.hidden_size, k = c.experts_per_token;
  const LayerWeights& nw = weights_.layers[size_t(next)];
  float* pn = predict_in_.resize(size_t(T * H));
  for (int64_t t = 0; t < T; ++t) kernels::rmsnorm(m_in + t * H, nw.post_norm.data(), H, c.rms_norm_eps, pn + t * H);
  moe_route(c, nw.moe, pn, T, predict_scratch_);
  // Experts chosen by the most rows first, capped at what the provider can hold at once.
  std::vector<int32_t> votes(size_t(c.num_experts), 0);
  for (int64_t i = 0; i < T * k; ++i) votes[size_t(predict_scratch_.route[size_t(i)])] += 1;
  std::vector<int32_t> chosen;
  for (int32_t e = 0; e < int32_t(c.num_experts); ++e)
    if (votes[size_t(e)]) chosen.push_back(e);
  size_t cap = experts_->max_batch();
  if (chosen.size() > cap) {
    std::stable_sort(chosen.begin(), chosen.end(), [&](int32_t a, int32_t b) { return votes[size_t(a)] > votes[size_t(b)]; });
    chosen.resize(cap);
    std::sort(chosen.begin(), chosen.end());
  }
  experts_->prefetch(next, chosen);
}

int64_t KimiModel::pass_bytes_per_row(bool record) const {
  const KimiConfig& c = config_;
  const int64_t H = c.hidden_size, P = c.kda_dim(), k = c.experts_per_token, R = c.expert_input_size();
  const int64_t anchors = c.attn_res_block_size > 0 ? c.num_layers / c.attn_res_block_size + 2 : 0;
  int64_t floats = 8 * H + anchors * H;                                   // h, prefix, mix, normed, outputs
  floats += 12 * P + 2 * c.kda_heads;                                     // KDA projections, conv, gates
  floats += c.num_heads * (c.qk_head_dim() + 2 * c.v_head_dim) + c.kv_lora_rank + c.qk_rope_head_dim;  // MLA
  floats += c.num_experts + R + k * R + 3 * R + 2 * c.moe_intermediate_size * std::max<int64_t>(1, k);  // MoE
  floats += 2 * std::max(c.intermediate_size, c.num_shared_experts * c.moe_intermediate_size);         // MLPs
  if (record) floats += c.count_layers(format::AttnKind::KDA) * (6 * P + c.kda_heads);
  return floats * int64_t(sizeof(float)) + 16 * k;
}

void KimiModel::commit_prefix(SequenceState& st, int64_t n) const {
  if (!st.record.valid) fail("commit_prefix without a recorded pass");
  if (n < 0 || n > st.record.rows) fail("commit_prefix(", n, ") outside 0..", st.record.rows);
  if (n == st.record.rows) {
    st.record.valid = false;
    return;
  }
  SequenceState::PassRecord rec = std::move(st.record);
  st.restore(rec.before);
  for (size_t i = 0; i < st.kda.size(); ++i) kda_replay(config_, st.kda[i], rec.kda[i], n);
  st.length_ = rec.before.length + n;
}

}  // namespace sluice::model
