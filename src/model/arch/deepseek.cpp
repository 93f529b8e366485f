// The DeepSeek-V3 / Kimi-K2 target: tensor list, expert bank, loading (FP8 kv_b widened), and its
// MLA and MLP/MoE blocks inside the shared pre-norm decoder pass (model/cache_model.h).
#include "model/arch/deepseek.h"

#include <algorithm>

#include "core/error.h"
#include "model/blocks/expert_layouts.h"
#include "model/device_plan.h"

namespace sluice::model {

using device::Buf;

namespace {

DType linear_dtype(const DeepSeekConfig& c) {
  return c.quant == format::WeightQuant::Fp8Block ? DType::F8_E4M3 : DType::BF16;
}

// An FP8 weight as F32 values: each e4m3 value times its block's scale in fp32, the product
// DeepSeek's weight_dequant and transformers' FP8 dequantization compute.
std::vector<float> widen_fp8(const device::Weight& w) {
  std::vector<float> out(size_t(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) device::fp8_widen_row(w, r, out.data() + r * w.cols);
  return out;
}

}  // namespace

TensorList deepseek_tensors(const DeepSeekConfig& c, DeepSeekWeights* w) {
  DeepSeekWeights scratch;
  DeepSeekWeights& W = w ? *w : scratch;
  W.layers.resize(size_t(c.num_layers));
  auto bind = [&](auto* dst) { return w ? dst : nullptr; };
  const int64_t H = c.hidden_size, nh = c.num_heads;
  const DType lin = linear_dtype(c);
  TensorList t;
  t.matrix("model.embed_tokens.weight", c.vocab_size, H, bind(&W.embed));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    DeepSeekLayerWeights& lw = W.layers[size_t(l)];
    const std::string L = cat("model.layers.", l, "."), A = L + "self_attn.";
    t.param(L + "input_layernorm.weight", {H}, bind(&lw.input_norm), Init::NormWeight);
    MlaWeights& m = lw.attn;
    if (c.q_lora_rank > 0) {
      t.matrix(A + "q_a_proj.weight", c.q_lora_rank, H, bind(&m.q_a), lin);
      t.param(A + "q_a_layernorm.weight", {c.q_lora_rank}, bind(&m.q_a_norm), Init::NormWeight);
      t.matrix(A + "q_b_proj.weight", nh * c.qk_head_dim(), c.q_lora_rank, bind(&m.q_b), lin);
    } else {
      t.matrix(A + "q_proj.weight", nh * c.qk_head_dim(), H, bind(&m.q), lin);
    }
    t.matrix(A + "kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, H, bind(&m.kv_a), lin);
    t.param(A + "kv_a_layernorm.weight", {c.kv_lora_rank}, bind(&m.kv_a_norm), Init::NormWeight);
    t.matrix(A + "kv_b_proj.weight", nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, bind(&m.kv_b), lin);
    t.matrix(A + "o_proj.weight", H, nh * c.v_head_dim, bind(&m.o), lin);
    t.param(L + "post_attention_layernorm.weight", {H}, bind(&lw.post_norm), Init::NormWeight);
    const std::string M = L + "mlp.";
    if (!c.is_moe(l)) {
      t.matrix(M + "gate_proj.weight", c.intermediate_size, H, bind(&lw.dense.gate), lin);
      t.matrix(M + "up_proj.weight", c.intermediate_size, H, bind(&lw.dense.up), lin);
      t.matrix(M + "down_proj.weight", H, c.intermediate_size, bind(&lw.dense.down), lin);
      continue;
    }
    MoeWeights& e = lw.moe;
    // The router stays BF16 in FP8 releases; its correction bias is F32.
    t.matrix(M + "gate.weight", c.num_experts, H, bind(&e.router));
    t.param(M + "gate.e_score_correction_bias", {c.num_experts}, bind(&e.correction_bias), Init::CorrectionBias,
            DType::F32);
    if (c.num_shared_experts > 0) {
      const int64_t S = c.num_shared_experts * c.moe_intermediate_size;
      e.has_shared = true;
      t.matrix(M + "shared_experts.gate_proj.weight", S, H, bind(&e.shared.gate), lin);
      t.matrix(M + "shared_experts.up_proj.weight", S, H, bind(&e.shared.up), lin);
      t.matrix(M + "shared_experts.down_proj.weight", H, S, bind(&e.shared.down), lin);
    }
    t.experts(int(l));
  }
  t.param("model.norm.weight", {H}, bind(&W.final_norm), Init::NormWeight);
  if (!c.tie_word_embeddings) t.matrix("lm_head.weight", c.vocab_size, H, bind(&W.lm_head));
  return t;
}

store::ExpertBank deepseek_expert_bank(const DeepSeekConfig& c) {
  return per_expert_swiglu_bank(c.num_layers, c.num_experts, [&c](int l) { return c.is_moe(l); }, c.hidden_size,
                                c.moe_intermediate_size, c.quant);
}

std::unique_ptr<DeepSeekModel> DeepSeekModel::load(const LoadOptions& opt) {
  std::unique_ptr<DeepSeekModel> m(new DeepSeekModel());
  m->dev_ = opt.device ? opt.device : &device::cpu_device();
  m->config_ = load_deepseek_config(opt.dir);
  const DeepSeekConfig& c = m->config_;
  m->tensors_ = format::TensorSet::open_dir(opt.dir);
  TensorList list = deepseek_tensors(c, &m->weights_);
  list.bind(m->tensors_);
  // The absorbed attention reads kv_b row by row: a device whose attention does not widen FP8
  // itself gets it widened here (value × block scale in fp32, the same values; 4x the bytes).
  m->kv_b_f32_.resize(size_t(c.num_layers));
  for (size_t l = 0; l < m->weights_.layers.size(); ++l) {
    device::Weight& kv_b = m->weights_.layers[l].attn.kv_b;
    if (kv_b.type != device::WeightType::FP8_E4M3 || m->dev_->mla_reads_fp8()) continue;
    m->kv_b_f32_[l] = widen_fp8(kv_b);
    kv_b = device::Weight{.type = device::WeightType::F32, .rows = kv_b.rows, .cols = kv_b.cols,
                           .data = m->kv_b_f32_[l].data()};
  }
  m->bank_ = deepseek_expert_bank(c);
  const bool resident = opt.resident_experts && !m->bank_.empty();
  check_device_plan(*m->dev_, opt.dir,
                    {.spine_bytes = list.bytes(), .expert_bytes = resident ? m->bank_.total_record_bytes() : 0});
  list.keep(*m->dev_);
  if (c.tie_word_embeddings) m->weights_.lm_head = m->weights_.embed;
  m->open_experts(m->tensors_, opt.resident_experts);
  // transformers' q_a_layernorm and kv_a_layernorm use eps 1e-6 whatever rms_norm_eps says.
  m->mla_spec_ = MlaSpec{.heads = c.num_heads, .q_lora_rank = c.q_lora_rank, .kv_rank = c.kv_lora_rank,
                         .nope = c.qk_nope_head_dim, .rope = c.qk_rope_head_dim, .v_dim = c.v_head_dim,
                         .norm_eps = 1e-6f, .output_gate = false, .rotate = true,
                         .pairs = c.rope_interleave ? device::RopePairs::Interleaved : device::RopePairs::Half,
                         .scale = float(c.softmax_scale())};
  m->set_mlps(m->weights_.layers, [&c](size_t l) { return c.is_moe(int64_t(l)); }, &DeepSeekLayerWeights::dense,
              MoeSpec{.router = {.score = device::RouterScore::Sigmoid, .experts = c.num_experts,
                                 .top_k = c.experts_per_token, .groups = c.n_group, .topk_groups = c.topk_group,
                                 .renormalize = c.norm_topk_prob, .renorm_eps = 1e-20f,
                                 .scaling = float(c.routed_scaling_factor)},
                      .act = {.kind = device::ActKind::SiLU}, .expert_input = c.hidden_size},
              c.rms_norm_eps);

  m->set_decoder(m->weights_.embed, m->weights_.lm_head, m->weights_.final_norm, m->weights_.layers, c.rms_norm_eps,
                 c.vocab_size, c.hidden_size, c.rope, c.qk_rope_head_dim);
  m->cache_widths_.assign(size_t(c.num_layers), CacheWidths{c.kv_lora_rank, c.qk_rope_head_dim});
  m->info_ = TargetInfo{.model_type = c.model_type, .family = "deepseek", .vocab_size = c.vocab_size,
                        .hidden_size = c.hidden_size, .num_layers = c.num_layers, .bos_token_id = c.bos_token_id,
                        .eos_token_ids = c.eos_token_ids};
  m->capture_slot_.reserve(size_t(c.num_layers));
  return m;
}

void DeepSeekModel::attention(CacheState& st, size_t l, int64_t base, const Buf& rope, const PassOptions& opt,
                              const Buf& x, Buf out) {
  mla_forward(*dev_, mla_spec_, weights_.layers[l].attn, st.first(l), st.second(l), base, x, out, opt.cancel, rope);
}

int64_t DeepSeekModel::pass_bytes_per_row(bool) const {
  const DeepSeekConfig& c = config_;
  const int64_t nh = c.num_heads;
  // h, normed, out, the RoPE row; q_a, q, kv, the attention's output; then the larger of the dense
  // MLP's intermediates and the MoE's (router logits, k expert outputs, an expert's and the shared
  // experts' intermediates).
  const int64_t attn = c.q_lora_rank + nh * c.qk_head_dim() + c.kv_lora_rank + c.qk_rope_head_dim + nh * c.v_head_dim;
  const int64_t moe = c.num_experts + (c.experts_per_token + 2) * c.hidden_size +
                      2 * (1 + c.num_shared_experts) * c.moe_intermediate_size;
  return int64_t(sizeof(float)) * (3 * c.hidden_size + c.qk_rope_head_dim + attn + std::max(2 * c.intermediate_size, moe));
}

namespace {

std::unique_ptr<Target> load_deepseek(const LoadOptions& opt) { return DeepSeekModel::load(opt); }

}  // namespace

const Architecture kDeepSeekArchitecture{"deepseek", {"deepseek_v3", "kimi_k2"}, load_deepseek,
                                    bank_from_text<parse_deepseek_config, deepseek_expert_bank>,
                                    roster_from_text<parse_deepseek_config, deepseek_tensors, deepseek_expert_bank>,
                                    deepseek_tiny};

}  // namespace sluice::model
