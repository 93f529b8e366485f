// The DSpark drafter: its tensor roster, loading checked against the target, the compact context
// cache (one latent + rotated k_pe per committed position per layer) and block proposals.
#include "model/dspark.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/absorbed_attention.h"
#include "model/weight_load.h"
#include "model/weight_rows.h"

namespace sluice::model {
namespace {

std::string layer_name(int64_t i, const char* rest) { return cat("layers.", i, ".", rest); }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += cat(i ? ", " : "", s[i]);
  return out + "]";
}

// Lowest index of the largest value (torch.argmax's rule for ties).
int32_t first_argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

void widen_row(const Weight& w, int64_t r, float* out) {
  std::fill(out, out + w.cols, 0.0f);
  weight_axpy_row(1.0f, w, r, out);
}

}  // namespace

std::vector<TensorSpec> dspark_roster(const format::DSparkConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t H = c.hidden_size, V = c.vocab_size, r = c.markov_rank, nh = c.num_heads;
  auto add = [&](std::string name, std::vector<int64_t> shape, Init init) {
    out.push_back(TensorSpec{std::move(name), DType::BF16, std::move(shape), init});
  };
  add("context_proj.weight", {H, c.context_width()}, Init::Normal);
  add("context_norm.weight", {H}, Init::NormWeight);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    add(layer_name(i, "input_layernorm.weight"), {H}, Init::NormWeight);
    add(layer_name(i, "post_attention_layernorm.weight"), {H}, Init::NormWeight);
    add(layer_name(i, "self_attn.q_a_proj.weight"), {c.q_lora_rank, H}, Init::Normal);
    add(layer_name(i, "self_attn.q_a_layernorm.weight"), {c.q_lora_rank}, Init::NormWeight);
    add(layer_name(i, "self_attn.q_b_proj.weight"), {nh * c.qk_head_dim(), c.q_lora_rank}, Init::Normal);
    add(layer_name(i, "self_attn.kv_a_proj_with_mqa.weight"), {c.kv_lora_rank + c.qk_rope_head_dim, H}, Init::Normal);
    add(layer_name(i, "self_attn.kv_a_layernorm.weight"), {c.kv_lora_rank}, Init::NormWeight);
    add(layer_name(i, "self_attn.kv_b_proj.weight"), {nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank},
        Init::Normal);
    add(layer_name(i, "self_attn.o_proj.weight"), {H, nh * c.v_head_dim}, Init::Normal);
    add(layer_name(i, "mlp.gate_proj.weight"), {c.intermediate_size, H}, Init::Normal);
    add(layer_name(i, "mlp.up_proj.weight"), {c.intermediate_size, H}, Init::Normal);
    add(layer_name(i, "mlp.down_proj.weight"), {H, c.intermediate_size}, Init::Normal);
  }
  add("final_norm.weight", {H}, Init::NormWeight);
  add("markov_head.markov_w1.weight", {V, r}, Init::Normal);
  add("markov_head.markov_w2.weight", {V, r}, Init::Normal);
  add("confidence_head.proj.weight", {1, H + r}, Init::Normal);
  add("confidence_head.proj.bias", {1}, Init::Normal);
  add("embed_tokens.weight", {V, H}, Init::Normal);  // redundant: the target's embedding is used
  return out;
}

std::unique_ptr<DSparkModel> DSparkModel::load(const std::string& dir, const KimiModel& target) {
  std::unique_ptr<DSparkModel> m(new DSparkModel());
  m->config_ = format::load_dspark_config(dir);
  const format::DSparkConfig& c = m->config_;
  const format::KimiConfig& t = target.config();
  const std::string where = dir + "/config.json";
  if (c.hidden_size != t.hidden_size)
    fail(where, ": hidden_size ", c.hidden_size, " differs from the target's ", t.hidden_size,
         "; the drafter runs on the target's embeddings and lm_head");
  if (c.vocab_size != t.vocab_size)
    fail(where, ": vocab_size ", c.vocab_size, " differs from the target's ", t.vocab_size);
  if (c.target_layer_ids.back() >= t.num_layers)
    fail(where, ": target_layer_ids names layer ", c.target_layer_ids.back(), " but the target has layers 0..",
         t.num_layers - 1);

  m->tensors_ = format::TensorSet::open_dir(dir);
  const format::TensorSet& ts = m->tensors_;
  std::set<std::string> names;
  for (const TensorSpec& s : dspark_roster(c)) {
    names.insert(s.name);
    const format::TensorInfo& ti = ts.get(s.name);
    if (ti.shape != s.shape)
      fail(dir, ": tensor ", s.name, " has shape ", shape_text(ti.shape), ", config implies ", shape_text(s.shape));
    if (ti.dtype != DType::BF16 && ti.dtype != DType::F32)
      fail(dir, ": tensor ", s.name, " has dtype ", dtype_name(ti.dtype), ", expected BF16 or F32");
  }
  // A tensor outside the roster is a variant this drafter does not compute (a gated markov head,
  // a confidence head without the markov input...): refuse rather than silently ignore it.
  for (const auto& [name, info] : ts.all())
    if (!names.count(name))
      fail(dir, ": tensor ", name, " is not part of the K3 DSpark roster; this checkpoint is a variant the drafter "
                "does not implement");

  const int64_t H = c.hidden_size, V = c.vocab_size, r = c.markov_rank, nh = c.num_heads;
  DSparkWeights& w = m->weights_;
  w.context_proj = weight_matrix(ts, "context_proj.weight", H, c.context_width());
  w.context_norm = float_vector(ts, "context_norm.weight", H);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    DSparkLayerWeights lw;
    lw.input_norm = float_vector(ts, layer_name(i, "input_layernorm.weight"), H);
    lw.post_norm = float_vector(ts, layer_name(i, "post_attention_layernorm.weight"), H);
    lw.q_a = weight_matrix(ts, layer_name(i, "self_attn.q_a_proj.weight"), c.q_lora_rank, H);
    lw.q_a_norm = float_vector(ts, layer_name(i, "self_attn.q_a_layernorm.weight"), c.q_lora_rank);
    lw.q_b = weight_matrix(ts, layer_name(i, "self_attn.q_b_proj.weight"), nh * c.qk_head_dim(), c.q_lora_rank);
    lw.kv_a = weight_matrix(ts, layer_name(i, "self_attn.kv_a_proj_with_mqa.weight"),
                            c.kv_lora_rank + c.qk_rope_head_dim, H);
    lw.kv_a_norm = float_vector(ts, layer_name(i, "self_attn.kv_a_layernorm.weight"), c.kv_lora_rank);
    lw.kv_b = weight_matrix(ts, layer_name(i, "self_attn.kv_b_proj.weight"), nh * (c.qk_nope_head_dim + c.v_head_dim),
                            c.kv_lora_rank);
    lw.o = weight_matrix(ts, layer_name(i, "self_attn.o_proj.weight"), H, nh * c.v_head_dim);
    lw.mlp.gate = weight_matrix(ts, layer_name(i, "mlp.gate_proj.weight"), c.intermediate_size, H);
    lw.mlp.up = weight_matrix(ts, layer_name(i, "mlp.up_proj.weight"), c.intermediate_size, H);
    lw.mlp.down = weight_matrix(ts, layer_name(i, "mlp.down_proj.weight"), H, c.intermediate_size);
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = float_vector(ts, "final_norm.weight", H);
  w.markov_w1 = weight_matrix(ts, "markov_head.markov_w1.weight", V, r);
  w.markov_w2 = weight_matrix(ts, "markov_head.markov_w2.weight", V, r);
  w.confidence_w = float_vector(ts, "confidence_head.proj.weight", H + r);
  w.confidence_b = float_vector(ts, "confidence_head.proj.bias", 1)[0];

  m->target_ = &target;
  m->inv_freq_ = format::dspark_inv_freq(c);
  m->rope_magnitude_ = float(format::dspark_rope_magnitude(c));
  m->softmax_scale_ = float(format::dspark_softmax_scale(c));
  m->caches_.resize(size_t(c.num_layers));
  m->reserve(64);
  return m;
}

void DSparkModel::reserve(int64_t positions) {
  // Room for the positions plus one block of query rows, which are written past the committed
  // length for the duration of a proposal.
  const int64_t need = positions + config_.num_draft_tokens;
  if (need <= capacity_) return;
  const int64_t cap = std::max(need, capacity_ * 2);
  for (LayerCache& lc : caches_) {
    lc.latent.resize(static_cast<size_t>(cap * config_.kv_lora_rank));
    lc.k_pe.resize(static_cast<size_t>(cap * config_.qk_rope_head_dim));
  }
  capacity_ = cap;
}

void DSparkModel::truncate(int64_t n) {
  if (n < 0 || n > length_) fail("DSpark truncate(", n, ") outside 0..", length_);
  length_ = n;
}

void DSparkModel::rotate(float* x, int64_t position) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double angle = double(position) * inv_freq_[i];
    const float cs = float(std::cos(angle)) * rope_magnitude_, sn = float(std::sin(angle)) * rope_magnitude_;
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * cs - x1 * sn;
    x[2 * i + 1] = x1 * cs + x0 * sn;
  }
}

void DSparkModel::store_kv(int64_t i, const float* kv, int64_t first, int64_t n) {
  const int64_t kvr = config_.kv_lora_rank, rope = config_.qk_rope_head_dim;
  LayerCache& lc = caches_[size_t(i)];
  const DSparkLayerWeights& w = weights_.layers[size_t(i)];
  for (int64_t t = 0; t < n; ++t) {
    const float* row = kv + t * (kvr + rope);
    kernels::rmsnorm(row, w.kv_a_norm.data(), kvr, config_.rms_norm_eps, lc.latent.data() + (first + t) * kvr);
    float* pe = lc.k_pe.data() + (first + t) * rope;
    std::copy(row + kvr, row + kvr + rope, pe);
    rotate(pe, first + t);
  }
}

void DSparkModel::append_context(const float* rows, int64_t n) {
  if (n < 0) fail("DSpark append_context with ", n, " rows");
  if (n == 0) return;
  const format::DSparkConfig& c = config_;
  const int64_t H = c.hidden_size;
  reserve(length_ + n);
  // Target context enters only as KV entries: one normalised projection of the concatenated
  // target rows, shared by every layer's kv_a (no per-layer input norm on the context path).
  float* ctx = ctx_.resize(static_cast<size_t>(n * H));
  kernels::linear(weights_.context_proj, rows, n, ctx);
  for (int64_t t = 0; t < n; ++t)
    kernels::rmsnorm(ctx + t * H, weights_.context_norm.data(), H, c.rms_norm_eps, ctx + t * H);
  float* kv = kv_.resize(static_cast<size_t>(n * (c.kv_lora_rank + c.qk_rope_head_dim)));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    kernels::linear(weights_.layers[size_t(i)].kv_a, ctx, n, kv);
    store_kv(i, kv, length_, n);
  }
  length_ += n;
}

void DSparkModel::attention(const DSparkLayerWeights& w, int64_t layer, const float* x, int64_t D, float* out) {
  const format::DSparkConfig& c = config_;
  const int64_t nh = c.num_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim, vd = c.v_head_dim;
  const int64_t qk = nope + rope, kvr = c.kv_lora_rank, L = length_;
  float* qa = q_a_.resize(static_cast<size_t>(D * c.q_lora_rank));
  kernels::linear(w.q_a, x, D, qa);
  for (int64_t t = 0; t < D; ++t)
    kernels::rmsnorm(qa + t * c.q_lora_rank, w.q_a_norm.data(), c.q_lora_rank, c.rms_norm_eps, qa + t * c.q_lora_rank);
  float* q = q_.resize(static_cast<size_t>(D * nh * qk));
  kernels::linear(w.q_b, qa, D, q);
  for (int64_t t = 0; t < D; ++t)
    for (int64_t h = 0; h < nh; ++h) rotate(q + (t * nh + h) * qk + nope, L + t);
  // The query rows' own keys go to positions L..L+D-1 past the committed length: visible to this
  // proposal, overwritten by the next context rows.
  float* kv = kv_.resize(static_cast<size_t>(D * (kvr + rope)));
  kernels::linear(w.kv_a, x, D, kv);
  store_kv(layer, kv, L, D);

  // Every query row sees every cached row and every query row (no mask inside the block).
  float* heads = heads_.resize(static_cast<size_t>(D * nh * vd));
  absorbed_attention(w.kv_b, {.heads = nh, .nope = nope, .rope = rope, .v_dim = vd, .kv_rank = kvr}, q, D,
                     caches_[size_t(layer)].latent.data(), caches_[size_t(layer)].k_pe.data(), L + D,
                     /*causal=*/false, softmax_scale_, per_head_, heads);
  kernels::linear(w.o, heads, D, out);
}

DSparkProposal DSparkModel::propose(int32_t pending, int max_tokens, double min_confidence,
                                    std::vector<float>* base_logits) {
  const format::DSparkConfig& c = config_;
  const int64_t D = c.num_draft_tokens, H = c.hidden_size, V = c.vocab_size;
  const int64_t r = c.markov_rank;
  DSparkProposal out;
  const int64_t want = std::min<int64_t>(std::max(max_tokens, 0), D);
  if (want == 0 && !base_logits) return out;
  reserve(length_);

  block_.assign(static_cast<size_t>(D), c.mask_token_id);
  block_[0] = pending;
  float* x = x_.resize(static_cast<size_t>(D * H));
  target_->embed(block_, x);
  float* normed = normed_.resize(static_cast<size_t>(D * H));
  float* delta = attn_.resize(static_cast<size_t>(D * H));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const DSparkLayerWeights& w = weights_.layers[size_t(i)];
    for (int64_t t = 0; t < D; ++t) kernels::rmsnorm(x + t * H, w.input_norm.data(), H, c.rms_norm_eps, normed + t * H);
    attention(w, i, normed, D, delta);
    for (int64_t k = 0; k < D * H; ++k) x[k] += delta[k];
    for (int64_t t = 0; t < D; ++t) kernels::rmsnorm(x + t * H, w.post_norm.data(), H, c.rms_norm_eps, normed + t * H);
    swiglu_forward(w.mlp, normed, D, mlp_scratch_, delta);
    for (int64_t k = 0; k < D * H; ++k) x[k] += delta[k];
  }

  // Only the rows that can become drafts need the lm_head, unless the caller wants all logits.
  const int64_t rows = base_logits ? D : want;
  float* fin = final_.resize(static_cast<size_t>(rows * H));
  for (int64_t t = 0; t < rows; ++t) kernels::rmsnorm(x + t * H, weights_.final_norm.data(), H, c.rms_norm_eps, fin + t * H);
  float* logits = logits_.resize(static_cast<size_t>(rows * V));
  kernels::linear(target_->lm_head(), fin, rows, logits);
  if (base_logits) base_logits->assign(logits, logits + rows * V);

  // Markov head: row j's logits get markov_w2 · markov_w1[prev], prev being the token before
  // draft j (pending, then each draft in turn), so the rows are decided one after another. The
  // confidence head reads [row ; markov_w1[prev]]. Spec §5.2 says only "hidden_j"; we take the
  // final-normed row (the one the lm_head reads) because DeepSpec's DSpark training code feeds the
  // same normed backbone output to the logits and to the confidence head.
  float* prev_vec = u_.resize(static_cast<size_t>(r));
  float* bias = bias_.resize(static_cast<size_t>(V));
  const float* cw = weights_.confidence_w.data();
  int32_t prev = pending;
  for (int64_t j = 0; j < want; ++j) {
    widen_row(weights_.markov_w1, prev, prev_vec);
    kernels::linear(weights_.markov_w2, prev_vec, 1, bias);
    const float* lj = logits + j * V;
    for (int64_t v = 0; v < V; ++v) bias[v] = lj[v] + bias[v];
    const int32_t token = first_argmax(bias, V);
    const float conf = kernels::dot(cw, fin + j * H, H) + kernels::dot(cw + H, prev_vec, r) + weights_.confidence_b;
    if (min_confidence > 0 && kernels::sigmoid(conf) < min_confidence) break;
    out.tokens.push_back(token);
    out.confidence.push_back(conf);
    prev = token;
  }
  return out;
}

}  // namespace sluice::model
