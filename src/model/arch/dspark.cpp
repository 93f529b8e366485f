// The DSpark drafter: its tensor list, loading checked against the target, the compact context
// cache on the target's device (one latent + rotated k_pe per committed position per layer) and
// block proposals.
#include "model/arch/dspark.h"
#include "model/device_plan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "device/mathf.h"

namespace sluice::model {
namespace {

std::string layer_name(int64_t i, const char* rest) { return cat("layers.", i, ".", rest); }

// Lowest index of the largest value (torch.argmax's rule for ties).
int32_t first_argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

}  // namespace

using device::Buf;
using device::BufType;
using device::LinearOut;

TensorList dspark_tensors(const DSparkConfig& c, DSparkWeights* w) {
  DSparkWeights scratch;
  DSparkWeights& W = w ? *w : scratch;
  W.layers.resize(size_t(c.num_layers));
  auto bind = [&](auto* dst) { return w ? dst : nullptr; };
  const int64_t H = c.hidden_size, V = c.vocab_size, r = c.markov_rank, nh = c.num_heads;
  TensorList t;
  t.matrix("context_proj.weight", H, c.context_width(), bind(&W.context_proj));
  t.param("context_norm.weight", {H}, bind(&W.context_norm), Init::NormWeight);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    DSparkLayerWeights& lw = W.layers[size_t(i)];
    t.param(layer_name(i, "input_layernorm.weight"), {H}, bind(&lw.input_norm), Init::NormWeight);
    t.param(layer_name(i, "post_attention_layernorm.weight"), {H}, bind(&lw.post_norm), Init::NormWeight);
    t.matrix(layer_name(i, "self_attn.q_a_proj.weight"), c.q_lora_rank, H, bind(&lw.q_a));
    t.param(layer_name(i, "self_attn.q_a_layernorm.weight"), {c.q_lora_rank}, bind(&lw.q_a_norm), Init::NormWeight);
    t.matrix(layer_name(i, "self_attn.q_b_proj.weight"), nh * c.qk_head_dim(), c.q_lora_rank, bind(&lw.q_b));
    t.matrix(layer_name(i, "self_attn.kv_a_proj_with_mqa.weight"), c.kv_lora_rank + c.qk_rope_head_dim, H,
             bind(&lw.kv_a));
    t.param(layer_name(i, "self_attn.kv_a_layernorm.weight"), {c.kv_lora_rank}, bind(&lw.kv_a_norm), Init::NormWeight);
    t.matrix(layer_name(i, "self_attn.kv_b_proj.weight"), nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank,
             bind(&lw.kv_b));
    t.matrix(layer_name(i, "self_attn.o_proj.weight"), H, nh * c.v_head_dim, bind(&lw.o));
    t.matrix(layer_name(i, "mlp.gate_proj.weight"), c.intermediate_size, H, bind(&lw.mlp.gate));
    t.matrix(layer_name(i, "mlp.up_proj.weight"), c.intermediate_size, H, bind(&lw.mlp.up));
    t.matrix(layer_name(i, "mlp.down_proj.weight"), H, c.intermediate_size, bind(&lw.mlp.down));
  }
  t.param("final_norm.weight", {H}, bind(&W.final_norm), Init::NormWeight);
  t.matrix("markov_head.markov_w1.weight", V, r, bind(&W.markov_w1));
  t.matrix("markov_head.markov_w2.weight", V, r, bind(&W.markov_w2));
  t.param("confidence_head.proj.weight", {1, H + r}, bind(&W.confidence_w), Init::Normal);
  t.param("confidence_head.proj.bias", {1}, bind(&W.confidence_b), Init::Normal);
  t.matrix("embed_tokens.weight", V, H, nullptr);  // redundant: the target's embedding is used
  return t;
}

std::unique_ptr<DSparkModel> DSparkModel::load(const std::string& dir, const Target& target) {
  std::unique_ptr<DSparkModel> m(new DSparkModel());
  m->config_ = load_dspark_config(dir);
  const DSparkConfig& c = m->config_;
  const TargetInfo& t = target.info();
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
  TensorList list = dspark_tensors(c, &m->weights_);
  std::set<std::string> names;
  for (const TensorSpec& s : list.specs()) {
    names.insert(s.name);
    const format::TensorInfo& ti = ts.get(s.name);
    if (ti.shape != s.shape)
      fail(dir, ": tensor ", s.name, " has shape ", shape_str(ti.shape), ", config implies ", shape_str(s.shape));
    if (ti.dtype != DType::BF16 && ti.dtype != DType::F32)
      fail(dir, ": tensor ", s.name, " has dtype ", dtype_name(ti.dtype), ", expected BF16 or F32");
  }
  // A tensor outside the list is a variant this drafter does not compute (a gated markov head,
  // a confidence head without the markov input...): refuse rather than silently ignore it.
  for (const auto& [name, info] : ts.all())
    if (!names.count(name))
      fail(dir, ": tensor ", name, " is not part of the K3 DSpark roster; this checkpoint is a variant the drafter "
                "does not implement");
  list.bind(ts);
  DSparkWeights& w = m->weights_;
  const int64_t H = c.hidden_size;
  w.confidence_w_row.host.assign(w.confidence_w.host.begin(), w.confidence_w.host.begin() + H);
  w.confidence_w_markov.host.assign(w.confidence_w.host.begin() + H, w.confidence_w.host.end());
  m->target_ = &target;
  m->dev_ = &target.device();
  check_device_plan(*m->dev_, dir, {.spine_bytes = list.bytes()});
  list.keep(*m->dev_);
  w.confidence_w_row.v = m->dev_->keep(std::span<const float>(w.confidence_w_row.host));
  w.confidence_w_markov.v = m->dev_->keep(std::span<const float>(w.confidence_w_markov.host));

  m->rope_.inv_freq = dspark_inv_freq(c);
  m->rope_.f64_angles = true;
  m->rope_.magnitude = float(dspark_rope_magnitude(c));
  m->softmax_scale_ = float(dspark_softmax_scale(c));
  m->caches_.resize(size_t(c.num_layers));
  m->bias_host_.resize(size_t(c.vocab_size));
  m->block_.reserve(size_t(c.num_draft_tokens));
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
    device::DeviceBuffer latent(*dev_, BufType::F32, cap, config_.kv_lora_rank);
    device::DeviceBuffer k_pe(*dev_, BufType::F32, cap, config_.qk_rope_head_dim);
    if (length_ > 0) {
      dev_->copy(latent.buf().rows_view(0, length_), lc.latent.buf().rows_view(0, length_));
      dev_->copy(k_pe.buf().rows_view(0, length_), lc.k_pe.buf().rows_view(0, length_));
    }
    lc.latent = std::move(latent);
    lc.k_pe = std::move(k_pe);
  }
  capacity_ = cap;
}

void DSparkModel::truncate(int64_t n) {
  if (n < 0 || n > length_) fail("DSpark truncate(", n, ") outside 0..", length_);
  length_ = n;
}

void DSparkModel::store_kv(int64_t i, const Buf& kv, int64_t first) {
  device::Device& d = *dev_;
  device::ScratchScope scope(d);
  const int64_t n = kv.rows, rope = config_.qk_rope_head_dim;
  const LayerCache& lc = caches_[size_t(i)];
  d.mla_cache_write(kv, weights_.layers[size_t(i)].kv_a_norm.v, config_.rms_norm_eps, lc.latent.buf(), lc.k_pe.buf(),
                    first);
  Buf table = d.scratch(BufType::F32, n, rope);
  d.rope_table(rope_, first, table);
  d.rope(table, device::RopePairs::Interleaved, lc.k_pe.buf().rows_view(first, n), 1, rope, 0, rope);
}

void DSparkModel::append_context(const float* rows, int64_t n) {
  if (n < 0) fail("DSpark append_context with ", n, " rows");
  if (n == 0) return;
  const DSparkConfig& c = config_;
  device::Device& d = *dev_;
  const int64_t H = c.hidden_size;
  reserve(length_ + n);
  device::ScratchScope scope(d);
  Buf in = d.scratch(BufType::F32, n, c.context_width());
  d.upload(in, rows);
  // Target context enters only as KV entries: one normalised projection of the concatenated
  // target rows, shared by every layer's kv_a (no per-layer input norm on the context path).
  Buf ctx = d.scratch(BufType::F32, n, H);
  const LinearOut proj[] = {{&weights_.context_proj, ctx}};
  d.linear(in, proj);
  d.rmsnorm(ctx, weights_.context_norm.v, c.rms_norm_eps, ctx);
  Buf kv = d.scratch(BufType::F32, n, c.kv_lora_rank + c.qk_rope_head_dim);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LinearOut kva[] = {{&weights_.layers[size_t(i)].kv_a, kv}};
    d.linear(ctx, kva);
    store_kv(i, kv, length_);
  }
  length_ += n;
}

void DSparkModel::attention(const DSparkLayerWeights& w, int64_t layer, const Buf& x, Buf out) {
  const DSparkConfig& c = config_;
  device::Device& d = *dev_;
  device::ScratchScope scope(d);
  const int64_t nh = c.num_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim, vd = c.v_head_dim;
  const int64_t qk = nope + rope, kvr = c.kv_lora_rank, L = length_, D = x.rows;
  Buf qa = d.scratch(BufType::F32, D, c.q_lora_rank);
  Buf kv = d.scratch(BufType::F32, D, kvr + rope);
  const LinearOut a[] = {{&w.q_a, qa}, {&w.kv_a, kv}};
  d.linear(x, a);
  d.rmsnorm(qa, w.q_a_norm.v, c.rms_norm_eps, qa);
  Buf q = d.scratch(BufType::F32, D, nh * qk);
  const LinearOut b[] = {{&w.q_b, q}};
  d.linear(qa, b);
  Buf table = d.scratch(BufType::F32, D, rope);
  d.rope_table(rope_, L, table);
  d.rope(table, device::RopePairs::Interleaved, q, nh, qk, nope, rope);
  // The query rows' own keys go to positions L..L+D-1 past the committed length: visible to this
  // proposal, overwritten by the next context rows.
  store_kv(layer, kv, L);

  // Every query row sees every cached row and every query row (no mask inside the block).
  Buf heads = d.scratch(BufType::F32, D, nh * vd);
  const LayerCache& lc = caches_[size_t(layer)];
  const device::MlaOp op{.heads = nh, .nope = nope, .rope = rope, .v_dim = vd, .kv_rank = kvr,
                          .scale = softmax_scale_, .causal = false, .kv_b = &w.kv_b};
  d.mla_attention(op, q, lc.latent.buf(), lc.k_pe.buf(), L + D, heads);
  const LinearOut o[] = {{&w.o, out}};
  d.linear(heads, o);
}

DSparkProposal DSparkModel::propose(int32_t pending, int max_tokens, double min_confidence,
                                    std::vector<float>* base_logits) {
  const DSparkConfig& c = config_;
  device::Device& d = *dev_;
  const int64_t D = c.num_draft_tokens, H = c.hidden_size, V = c.vocab_size;
  DSparkProposal out;
  const int64_t want = std::min<int64_t>(std::max(max_tokens, 0), D);
  if (want == 0 && !base_logits) return out;
  check_token_ids(std::span<const int32_t>(&pending, 1), V);
  reserve(length_);

  device::ScratchScope scope(d);
  block_.assign(static_cast<size_t>(D), c.mask_token_id);
  block_[0] = pending;
  Buf x = d.scratch(BufType::F32, D, H);
  d.embed(target_->embedding(), block_, x);
  Buf normed = d.scratch(BufType::F32, D, H);
  Buf delta = d.scratch(BufType::F32, D, H);
  const device::Activation silu{.kind = device::ActKind::SiLU};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const DSparkLayerWeights& w = weights_.layers[size_t(i)];
    d.rmsnorm(x, w.input_norm.v, c.rms_norm_eps, normed);
    attention(w, i, normed, delta);
    d.add(x, delta);
    d.rmsnorm(x, w.post_norm.v, c.rms_norm_eps, normed);
    mlp_forward(d, w.mlp, silu, normed, delta);
    d.add(x, delta);
  }

  // Only the rows that can become drafts need the lm_head, unless the caller wants all logits.
  const int64_t rows = base_logits ? D : want;
  Buf fin = d.scratch(BufType::F32, rows, H);
  d.rmsnorm(x.rows_view(0, rows), weights_.final_norm.v, c.rms_norm_eps, fin);
  Buf logits = d.scratch(BufType::F32, rows, V);
  const LinearOut head[] = {{&target_->lm_head(), logits}};
  d.linear(fin, head);
  if (base_logits) {
    base_logits->resize(size_t(rows * V));
    d.download(logits, base_logits->data());
  }

  // Markov head: row j's logits get markov_w2 · markov_w1[prev], prev being the token before
  // draft j (pending, then each draft in turn), so the rows are decided one after another (one
  // download of the biased row per draft: the decision is the host's). The confidence head reads
  // [row ; markov_w1[prev]]. Spec §5.2 says only "hidden_j"; we take the final-normed row (the one
  // the lm_head reads) because DeepSpec's DSpark training code feeds the same normed backbone
  // output to the logits and to the confidence head.
  Buf prev_vec = d.scratch(BufType::F32, 1, c.markov_rank);
  Buf bias = d.scratch(BufType::F32, 1, V);
  Buf conf_parts = d.scratch(BufType::F32, 2, 1);
  int32_t prev = pending;
  for (int64_t j = 0; j < want; ++j) {
    d.embed(weights_.markov_w1, std::span<const int32_t>(&prev, 1), prev_vec);
    const LinearOut mk[] = {{&weights_.markov_w2, bias}};
    d.linear(prev_vec, mk);
    d.add(bias, logits.rows_view(j, 1));
    d.row_dot(fin.rows_view(j, 1), weights_.confidence_w_row.v, conf_parts.rows_view(0, 1));
    d.row_dot(prev_vec, weights_.confidence_w_markov.v, conf_parts.rows_view(1, 1));
    d.download(bias, bias_host_.data());
    float parts[2];
    d.download(conf_parts, parts);
    const int32_t token = first_argmax(bias_host_.data(), V);
    const float conf = parts[0] + parts[1] + weights_.confidence_b.host[0];
    if (min_confidence > 0 && mathf::sigmoid(conf) < min_confidence) break;
    out.tokens.push_back(token);
    out.confidence.push_back(conf);
    prev = token;
  }
  return out;
}

std::vector<float> DSparkModel::cache_latent(int64_t i) const {
  std::vector<float> out(size_t(length_ * config_.kv_lora_rank));
  if (length_ > 0) dev_->download(caches_[size_t(i)].latent.buf().rows_view(0, length_), out.data());
  return out;
}

std::vector<float> DSparkModel::cache_k_pe(int64_t i) const {
  std::vector<float> out(size_t(length_ * config_.qk_rope_head_dim));
  if (length_ > 0) dev_->download(caches_[size_t(i)].k_pe.buf().rows_view(0, length_), out.data());
  return out;
}

}  // namespace sluice::model
