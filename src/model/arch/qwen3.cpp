// The Qwen3 family's target: tensor list and expert bank, loading, and its attention and MLP
// blocks inside the shared pre-norm decoder pass (model/cache_model.h).
#include "model/arch/qwen3.h"
#include "model/device_plan.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/blocks/expert_layouts.h"

namespace sluice::model {

using device::Buf;
using device::BufType;

TensorList qwen3_tensors(const Qwen3Config& c, Qwen3Weights* w) {
  Qwen3Weights scratch;
  Qwen3Weights& W = w ? *w : scratch;
  W.layers.resize(size_t(c.num_layers));
  auto bind = [&](auto* dst) { return w ? dst : nullptr; };
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const DType lin = c.quant == format::WeightQuant::Fp8Block ? DType::F8_E4M3 : DType::BF16;
  TensorList t;
  t.matrix("model.embed_tokens.weight", c.vocab_size, H, bind(&W.embed));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    Qwen3LayerWeights& lw = W.layers[size_t(l)];
    const std::string L = cat("model.layers.", l, ".");
    t.param(L + "input_layernorm.weight", {H}, bind(&lw.input_norm), Init::NormWeight);
    t.matrix(L + "self_attn.q_proj.weight", c.q_dim(), H, bind(&lw.attn.q), lin);
    t.matrix(L + "self_attn.k_proj.weight", c.kv_dim(), H, bind(&lw.attn.k), lin);
    t.matrix(L + "self_attn.v_proj.weight", c.kv_dim(), H, bind(&lw.attn.v), lin);
    t.matrix(L + "self_attn.o_proj.weight", H, c.q_dim(), bind(&lw.attn.o), lin);
    t.param(L + "self_attn.q_norm.weight", {D}, bind(&lw.attn.q_norm), Init::NormWeight);
    t.param(L + "self_attn.k_norm.weight", {D}, bind(&lw.attn.k_norm), Init::NormWeight);
    t.param(L + "post_attention_layernorm.weight", {H}, bind(&lw.post_norm), Init::NormWeight);
    if (c.sparse[size_t(l)]) {
      t.matrix(L + "mlp.gate.weight", c.num_experts, H, bind(&lw.moe.router));
      t.experts(int(l));
    } else {
      t.matrix(L + "mlp.gate_proj.weight", I, H, bind(&lw.mlp.gate), lin);
      t.matrix(L + "mlp.up_proj.weight", I, H, bind(&lw.mlp.up), lin);
      t.matrix(L + "mlp.down_proj.weight", H, I, bind(&lw.mlp.down), lin);
    }
  }
  t.param("model.norm.weight", {H}, bind(&W.final_norm), Init::NormWeight);
  // Tied checkpoints saved by transformers leave lm_head out; transformers uses the embedding then
  // even if a copy is present, and so do we.
  if (!c.tie_word_embeddings) t.matrix("lm_head.weight", c.vocab_size, H, bind(&W.lm_head));
  return t;
}

store::ExpertBank qwen3_expert_bank(const Qwen3Config& c) {
  return per_expert_swiglu_bank(c.num_layers, c.num_experts, [&c](int l) { return bool(c.sparse[size_t(l)]); },
                                c.hidden_size, c.moe_intermediate_size, c.quant);
}

std::unique_ptr<Qwen3Model> Qwen3Model::load(const std::string& dir) { return load(LoadOptions{.dir = dir}); }

std::unique_ptr<Qwen3Model> Qwen3Model::load(const LoadOptions& opt) {
  std::unique_ptr<Qwen3Model> m(new Qwen3Model());
  m->dev_ = opt.device ? opt.device : &device::cpu_device();
  m->config_ = load_qwen3_config(opt.dir);
  const Qwen3Config& c = m->config_;
  m->tensors_ = format::TensorSet::open_dir(opt.dir);
  TensorList list = qwen3_tensors(c, &m->weights_);
  list.bind(m->tensors_);
  m->bank_ = qwen3_expert_bank(c);
  const bool resident = opt.resident_experts && !m->bank_.empty();
  check_device_plan(*m->dev_, opt.dir,
                    {.spine_bytes = list.bytes(), .expert_bytes = resident ? m->bank_.total_record_bytes() : 0});
  list.keep(*m->dev_);
  if (c.tie_word_embeddings) m->weights_.lm_head = m->weights_.embed;
  m->open_experts(m->tensors_, opt.resident_experts);
  m->gqa_ = GqaSpec{.heads = c.num_heads, .kv_heads = c.num_kv_heads, .head_dim = c.head_dim,
                    .norm_eps = c.rms_norm_eps, .pairs = device::RopePairs::Half};
  m->set_mlps(m->weights_.layers, [&c](size_t l) { return bool(c.sparse[l]); }, &Qwen3LayerWeights::mlp,
              MoeSpec{.router = {.score = device::RouterScore::Softmax, .experts = c.num_experts,
                                 .top_k = c.experts_per_token, .renormalize = c.norm_topk_prob, .renorm_eps = 0.0f},
                      .act = {.kind = device::ActKind::SiLU}, .expert_input = c.hidden_size},
              c.rms_norm_eps);

  // transformers' fp32 frequencies (plain or YaRN) and cos/sin magnitude.
  m->set_decoder(m->weights_.embed, m->weights_.lm_head, m->weights_.final_norm, m->weights_.layers, c.rms_norm_eps,
                 c.vocab_size, c.hidden_size, c.rope, c.head_dim);
  m->cache_widths_.assign(size_t(c.num_layers), CacheWidths{c.kv_dim(), c.kv_dim()});
  m->info_ = TargetInfo{.model_type = c.moe ? "qwen3_moe" : "qwen3", .family = "qwen3", .vocab_size = c.vocab_size,
                        .hidden_size = c.hidden_size, .num_layers = c.num_layers, .bos_token_id = c.bos_token_id,
                        .eos_token_ids = c.eos_token_ids};
  m->capture_slot_.reserve(size_t(c.num_layers));
  return m;
}

void Qwen3Model::attention(CacheState& st, size_t l, int64_t base, const Buf& rope, const PassOptions& opt, const Buf& x,
                           Buf out) {
  gqa_forward(*dev_, gqa_, weights_.layers[l].attn, rope, st.first(l), st.second(l), base, x, out, opt.cancel);
}

int64_t Qwen3Model::pass_bytes_per_row(bool) const {
  const Qwen3Config& c = config_;
  // h, normed, out, the RoPE row, q/k/v/attention and the MLP's two intermediates.
  // h, normed, out, the RoPE row, q/k/v/attention and the MLP's two intermediates (or the MoE's
  // router logits, k expert outputs and the widest expert's intermediates).
  const int64_t moe = c.num_experts + (c.experts_per_token + 1) * c.hidden_size + 2 * c.moe_intermediate_size;
  return int64_t(sizeof(float)) * (3 * c.hidden_size + c.head_dim + 2 * c.q_dim() + 2 * c.kv_dim() +
                                   std::max(2 * c.intermediate_size, moe));
}

namespace {

std::unique_ptr<Target> load_qwen3(const LoadOptions& opt) { return Qwen3Model::load(opt); }

}  // namespace

const Architecture kQwen3Architecture{"qwen3", {"qwen3", "qwen3_moe"}, load_qwen3,
                                    bank_from_text<parse_qwen3_config, qwen3_expert_bank>,
                                    roster_from_text<parse_qwen3_config, qwen3_tensors, qwen3_expert_bank>,
                                    qwen3_tiny};

}  // namespace sluice::model
