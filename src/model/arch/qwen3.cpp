// The Qwen3 dense target: tensor list, KV-cache state on the device, the forward pass and
// commit-prefix (a length cut: rows past the length are never read before being overwritten).
#include "model/arch/qwen3.h"
#include "model/device_plan.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sluice::model {

using kernels::Buf;
using kernels::BufType;
using kernels::DeviceBuffer;

class Qwen3State final : public State {
 public:
  Qwen3State(const format::Qwen3Config& c, kernels::Device& d) : kv_dim_(c.kv_dim()), dev_(d) {
    k.resize(size_t(c.num_layers));
    v.resize(size_t(c.num_layers));
    reserve(256);
  }
  int64_t length() const override { return length_; }
  void reset() override {
    length_ = 0;
    record_valid = false;
  }
  void reserve(int64_t positions) {
    if (positions <= capacity_) return;
    const int64_t cap = std::max<int64_t>(positions, capacity_ * 2);
    for (size_t l = 0; l < k.size(); ++l) {
      DeviceBuffer nk(dev_, BufType::F32, cap, kv_dim_), nv(dev_, BufType::F32, cap, kv_dim_);
      if (length_ > 0) {
        dev_.copy(nk.buf().rows_view(0, length_), k[l].buf().rows_view(0, length_));
        dev_.copy(nv.buf().rows_view(0, length_), v[l].buf().rows_view(0, length_));
      }
      k[l] = std::move(nk);
      v[l] = std::move(nv);
    }
    capacity_ = cap;
  }

  int64_t kv_dim_;
  kernels::Device& dev_;
  std::vector<DeviceBuffer> k, v;  // per layer [capacity, kv_dim]: keys after k_norm and RoPE, values
  int64_t length_ = 0, capacity_ = 0;
  bool record_valid = false;
  int64_t record_rows = 0, record_before = 0;
};

class Qwen3Snapshot final : public Snapshot {
 public:
  int64_t length() const override { return length_; }
  int64_t length_ = 0;
};

namespace {

Qwen3State& qwen3_state(State& s) {
  auto* q = dynamic_cast<Qwen3State*>(&s);
  SLUICE_CHECK(q, "a state of another architecture was passed to a Qwen3 model");
  return *q;
}

}  // namespace

TensorList qwen3_tensors(const format::Qwen3Config& c, Qwen3Weights* w) {
  Qwen3Weights scratch;
  Qwen3Weights& W = w ? *w : scratch;
  W.layers.resize(size_t(c.num_layers));
  auto bind = [&](auto* dst) { return w ? dst : nullptr; };
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  TensorList t;
  t.matrix("model.embed_tokens.weight", c.vocab_size, H, bind(&W.embed));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    Qwen3LayerWeights& lw = W.layers[size_t(l)];
    const std::string L = cat("model.layers.", l, ".");
    t.param(L + "input_layernorm.weight", {H}, bind(&lw.input_norm), Init::NormWeight);
    t.matrix(L + "self_attn.q_proj.weight", c.q_dim(), H, bind(&lw.attn.q));
    t.matrix(L + "self_attn.k_proj.weight", c.kv_dim(), H, bind(&lw.attn.k));
    t.matrix(L + "self_attn.v_proj.weight", c.kv_dim(), H, bind(&lw.attn.v));
    t.matrix(L + "self_attn.o_proj.weight", H, c.q_dim(), bind(&lw.attn.o));
    t.param(L + "self_attn.q_norm.weight", {D}, bind(&lw.attn.q_norm), Init::NormWeight);
    t.param(L + "self_attn.k_norm.weight", {D}, bind(&lw.attn.k_norm), Init::NormWeight);
    t.param(L + "post_attention_layernorm.weight", {H}, bind(&lw.post_norm), Init::NormWeight);
    t.matrix(L + "mlp.gate_proj.weight", I, H, bind(&lw.mlp.gate));
    t.matrix(L + "mlp.up_proj.weight", I, H, bind(&lw.mlp.up));
    t.matrix(L + "mlp.down_proj.weight", H, I, bind(&lw.mlp.down));
  }
  t.param("model.norm.weight", {H}, bind(&W.final_norm), Init::NormWeight);
  // Tied checkpoints saved by transformers leave lm_head out; transformers uses the embedding then
  // even if a copy is present, and so do we.
  if (!c.tie_word_embeddings) t.matrix("lm_head.weight", c.vocab_size, H, bind(&W.lm_head));
  return t;
}

std::unique_ptr<Qwen3Model> Qwen3Model::load(const std::string& dir) { return load(LoadOptions{.dir = dir}); }

std::unique_ptr<Qwen3Model> Qwen3Model::load(const LoadOptions& opt) {
  std::unique_ptr<Qwen3Model> m(new Qwen3Model());
  m->dev_ = opt.device ? opt.device : &kernels::cpu_device();
  m->config_ = format::load_qwen3_config(opt.dir);
  const format::Qwen3Config& c = m->config_;
  m->tensors_ = format::TensorSet::open_dir(opt.dir);
  TensorList list = qwen3_tensors(c, &m->weights_);
  list.bind(m->tensors_);
  check_device_plan(*m->dev_, opt.dir, {.spine_bytes = list.bytes()});
  list.keep(*m->dev_);
  if (c.tie_word_embeddings) m->weights_.lm_head = m->weights_.embed;
  m->gqa_ = GqaSpec{.heads = c.num_heads, .kv_heads = c.num_kv_heads, .head_dim = c.head_dim,
                    .norm_eps = c.rms_norm_eps, .pairs = kernels::RopePairs::Half};
  // transformers computes the frequencies in fp32: 1 / theta^(2i / head_dim).
  for (int64_t i = 0; i < c.head_dim / 2; ++i)
    m->rope_.inv_freq.push_back(double(1.0f / std::pow(float(c.rope_theta), float(2 * i) / float(c.head_dim))));
  m->rope_.f64_angles = false;
  m->info_ = TargetInfo{.model_type = "qwen3", .family = "qwen3", .vocab_size = c.vocab_size,
                        .hidden_size = c.hidden_size, .num_layers = c.num_layers, .bos_token_id = c.bos_token_id,
                        .eos_token_ids = c.eos_token_ids};
  m->capture_slot_.reserve(size_t(c.num_layers));
  return m;
}

std::unique_ptr<State> Qwen3Model::new_state() const { return std::make_unique<Qwen3State>(config_, *dev_); }

void Qwen3Model::forward(State& state, std::span<const int32_t> tokens, const PassOptions& opt, float* logits) {
  Qwen3State& st = qwen3_state(state);
  const format::Qwen3Config& c = config_;
  kernels::Device& d = *dev_;
  const int64_t T = static_cast<int64_t>(tokens.size()), H = c.hidden_size;
  if (T == 0) fail("forward pass with no tokens");
  check_token_ids(tokens, c.vocab_size);
  const int64_t captured = capture_slots(opt.capture, c.num_layers, capture_slot_);
  const int64_t base = st.length_;
  st.reserve(base + T);
  st.record_valid = false;

  kernels::ScratchScope pass(d);
  // RoPE angles of this pass's positions (fp32 product as transformers computes it).
  Buf table = d.scratch(BufType::F32, T, c.head_dim);
  d.rope_table(rope_, base, table);
  Buf h = d.scratch(BufType::F32, T, H);
  d.embed(weights_.embed, tokens, h);
  Buf normed = d.scratch(BufType::F32, T, H);
  Buf out = d.scratch(BufType::F32, T, H);
  Buf cap = captured > 0 ? d.scratch(BufType::F32, T, captured * H) : Buf{};
  const kernels::Activation silu{.kind = kernels::ActKind::SiLU};
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    if (cancel_requested(opt)) throw Cancelled();
    const Qwen3LayerWeights& w = weights_.layers[l];
    d.rmsnorm(h, w.input_norm.v, c.rms_norm_eps, normed);
    gqa_forward(d, gqa_, w.attn, table, st.k[l].buf(), st.v[l].buf(), base, normed, out, opt.cancel);
    d.add(h, out);
    d.rmsnorm(h, w.post_norm.v, c.rms_norm_eps, normed);
    mlp_forward(d, w.mlp, silu, normed, out);
    d.add(h, out);
    if (captured > 0 && capture_slot_[l] >= 0) d.copy(cap.cols_view(capture_slot_[l] * H, H), h);
  }
  const int64_t rows = opt.all_logits ? T : 1;
  const int64_t first = T - rows;
  Buf fn = d.scratch(BufType::F32, rows, H);
  d.rmsnorm(h.rows_view(first, rows), weights_.final_norm.v, c.rms_norm_eps, fn);
  Buf lg = d.scratch(BufType::F32, rows, c.vocab_size);
  const kernels::LinearOut head[] = {{&weights_.lm_head, lg}};
  d.linear(fn, head);
  d.download(lg, logits);
  if (captured > 0) d.download(cap, opt.capture->rows);
  st.length_ = base + T;
  if (opt.record) {
    st.record_valid = true;
    st.record_rows = T;
    st.record_before = base;
  }
  counters_.passes += 1;
  counters_.rows += T;
}

void Qwen3Model::commit_prefix(State& state, int64_t n) {
  Qwen3State& st = qwen3_state(state);
  if (!st.record_valid) fail("commit_prefix without a recorded pass");
  if (n < 0 || n > st.record_rows) fail("commit_prefix(", n, ") outside 0..", st.record_rows);
  st.record_valid = false;
  st.length_ = st.record_before + n;
}

bool Qwen3Model::truncate(State& state, int64_t n) const {
  Qwen3State& st = qwen3_state(state);
  if (n < 0 || n > st.length_) fail("Qwen3 truncate(", n, ") outside 0..", st.length_);
  // Rows past n are never read again before being overwritten: attention only looks at 0..length.
  st.length_ = n;
  st.record_valid = false;
  return true;
}

std::unique_ptr<Snapshot> Qwen3Model::new_snapshot() const { return std::make_unique<Qwen3Snapshot>(); }

void Qwen3Model::save(const State& st, Snapshot& snap) const {
  dynamic_cast<Qwen3Snapshot&>(snap).length_ = st.length();
}

void Qwen3Model::restore(State& st, const Snapshot& snap) const { truncate(st, snap.length()); }

std::vector<float> Qwen3Model::state_values(const State& state) const {
  const Qwen3State& st = qwen3_state(const_cast<State&>(state));
  std::vector<float> out{float(st.length_)};
  for (size_t l = 0; l < st.k.size(); ++l)
    for (const DeviceBuffer* b : {&st.k[l], &st.v[l]}) {
      const size_t at = out.size();
      out.resize(at + size_t(st.length_ * st.kv_dim_));
      if (st.length_ > 0) dev_->download(b->buf().rows_view(0, st.length_), out.data() + at);
    }
  return out;
}

int64_t Qwen3Model::pass_bytes_per_row(bool) const {
  const format::Qwen3Config& c = config_;
  // h, normed, out, the RoPE row, q/k/v/attention and the MLP's two intermediates.
  return int64_t(sizeof(float)) * (3 * c.hidden_size + c.head_dim + 2 * c.q_dim() + 2 * c.kv_dim() +
                                   2 * c.intermediate_size);
}

namespace {

std::unique_ptr<Target> load_qwen3(const LoadOptions& opt) { return Qwen3Model::load(opt); }

store::ExpertBank qwen3_bank(const std::string& config_text, const std::string& where) {
  const format::Qwen3Config c = format::parse_qwen3_config(config_text, where);
  store::ExpertBank b;
  b.num_layers = c.num_layers;
  return b;
}

}  // namespace

const Architecture kQwen3Architecture{"qwen3", {"qwen3"}, load_qwen3, qwen3_bank};

}  // namespace sluice::model
