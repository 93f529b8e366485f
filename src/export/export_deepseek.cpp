// DeepSeek-V3 and Kimi-K2 -> llama.cpp's deepseek2, as its converter writes them
// (conversion/deepseek.py's DeepseekV2Model) and its loader and graph read them
// (src/models/deepseek2.cpp): MLA as MQA over the latent (head_count_kv 1, key_length kv_lora +
// rope, kv_b split into k_b and v_b), leading dense layers, the sigmoid router with its correction
// bias (exp_probs_b), grouped top-k, renormalisation and routed scaling, shared experts, and YaRN
// through rope.scaling.* and yarn_log_multiplier (its attention scale). BF16 stays BF16; FP8 and
// INT4 weights only with --f32.
#include <algorithm>
#include <memory>

#include "core/error.h"
#include "export/export_arch.h"
#include "export/export_common.h"
#include "export/gguf_tensors.h"
#include "model/arch/deepseek_config.h"
#include "format/json_util.h"
#include "model/arch/deepseek.h"

namespace sluice::gguf {
namespace {

using model::DeepSeekConfig;
using format::WeightQuant;

void check_expressible(const DeepSeekConfig& c, const std::string& arch, const ExportOptions& opt) {
  if (c.quant == WeightQuant::Fp8Block && !opt.widen_to_f32)
    fail("cannot export to GGUF as it is: FP8 e4m3 weights (128x128 block scales) have no GGUF type in llama.cpp's ",
         arch, "; export with --f32 (each value x its block scale, in fp32)");
  if (c.quant == WeightQuant::Int4Group32 && !opt.widen_to_f32)
    fail("cannot export to GGUF as it is: INT4 routed experts (compressed-tensors pack-quantized, group 32) have no GGUF "
         "type in llama.cpp's ", arch, "; export with --f32 (bf16(q·s) widened)");
  if (!c.rope_interleave)
    refuse(arch, "rope_interleave false (its graph always rotates interleaved pairs)");
  if (c.num_experts > 1024) refuse(arch, cat(c.num_experts, " experts per layer (at most 1024)"));
  if (c.num_layers > 512) refuse(arch, cat(c.num_layers, " layers (at most 512)"));
  if (c.num_experts > 0 && c.num_shared_experts == 0)
    refuse(arch, "a MoE without shared experts (its graph always adds ffn_*_shexp)");
  if (c.num_experts > 0 && c.first_k_dense_replace >= c.num_layers)
    refuse(arch, "routed experts on no layer (first_k_dense_replace covers every layer)");
}

}  // namespace

ExportSummary export_deepseek2(const std::string& model_dir, const std::string& out, const ExportOptions& opt) {
  const std::string arch = "deepseek2", a = arch + ".";
  const DeepSeekConfig c = model::load_deepseek_config(model_dir);
  check_expressible(c, arch, opt);
  const nlohmann::json root = format::read_json_file(model_dir + "/config.json");

  const format::TensorSet ts = format::TensorSet::open_dir(model_dir);
  auto weights = std::make_unique<model::DeepSeekWeights>();
  model::deepseek_tensors(c, weights.get()).bind(ts);
  const model::DeepSeekWeights& W = *weights;
  const store::ExpertBank bank = model::deepseek_expert_bank(c);

  // transformers' q_a_layernorm and kv_a_layernorm use eps 1e-6 whatever rms_norm_eps says;
  // llama.cpp uses rms_norm_eps for them (as its converter leaves it).
  if (c.rms_norm_eps != 1e-6f && opt.note)
    opt.note(cat("note: deepseek2: transformers' q_a/kv_a layernorm eps is 1e-06, llama.cpp uses rms_norm_eps (",
                 c.rms_norm_eps, ") for them"));

  Writer w;
  general_keys(w, arch, model_dir,
               opt.widen_to_f32 || W.embed.type != device::WeightType::BF16 ? kFileAllF32 : kFileMostlyBF16);
  // TextModel.set_gguf_parameters, with num_key_value_heads set to 1 (MLA as MQA).
  const bool moe = c.num_experts > 0;
  w.add_u32(a + "block_count", uint32_t(c.num_layers));
  w.add_u32(a + "context_length", uint32_t(format::get_int_or(root, "max_position_embeddings", 4096, "config.json")));
  w.add_u32(a + "embedding_length", uint32_t(c.hidden_size));
  w.add_u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
  w.add_u32(a + "attention.head_count", uint32_t(c.num_heads));
  w.add_u32(a + "attention.head_count_kv", 1);
  rope_keys(w, arch, c.rope, YarnScale::DeepSeek2, opt);
  w.add_f32(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  if (moe) {
    w.add_u32(a + "expert_count", uint32_t(c.num_experts));
    w.add_u32(a + "expert_used_count", uint32_t(c.experts_per_token));
    // Keeping every group (topk_group == n_group) is no grouping; llama.cpp asserts fewer groups used.
    const bool grouped = c.n_group > 1 && c.topk_group < c.n_group;
    w.add_u32(a + "expert_group_count", uint32_t(grouped ? c.n_group : 1));
    w.add_u32(a + "expert_group_used_count", uint32_t(grouped ? c.topk_group : 1));
    w.add_u32(a + "expert_gating_func", kGatingSigmoid);
  }
  // DeepseekV2Model.set_gguf_parameters.
  w.add_u32(a + "leading_dense_block_count", uint32_t(moe ? c.first_k_dense_replace : c.num_layers));
  w.add_u32(a + "vocab_size", uint32_t(c.vocab_size));
  // The converter writes q_lora_rank only when set; this llama.cpp requires the key for all but
  // its 26/27-layer lite models, and reads 0 as "plain q_proj" (attn_q).
  w.add_u32(a + "attention.q_lora_rank", uint32_t(c.q_lora_rank));
  w.add_u32(a + "attention.kv_lora_rank", uint32_t(c.kv_lora_rank));
  w.add_u32(a + "attention.key_length", uint32_t(c.kv_lora_rank + c.qk_rope_head_dim));
  w.add_u32(a + "attention.value_length", uint32_t(c.kv_lora_rank));
  w.add_u32(a + "attention.key_length_mla", uint32_t(c.qk_head_dim()));
  w.add_u32(a + "attention.value_length_mla", uint32_t(c.v_head_dim));
  w.add_u32(a + "expert_feed_forward_length", uint32_t(moe ? c.moe_intermediate_size : c.intermediate_size));
  w.add_u32(a + "expert_shared_count", uint32_t(c.num_shared_experts));
  if (moe) {
    w.add_f32(a + "expert_weights_scale", float(c.routed_scaling_factor));
    if (c.norm_topk_prob) w.add_bool(a + "expert_weights_norm", true);
  }
  w.add_u32(a + "rope.dimension_count", uint32_t(c.qk_rope_head_dim));

  tokenizer_keys_from_config(w, arch, model_dir, c.vocab_size, c.bos_token_id, c.eos_token_ids);

  TensorEmitter x(w, arch, opt.widen_to_f32);
  const int64_t H = c.hidden_size;
  x.matrix("token_embd.weight", W.embed);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const model::DeepSeekLayerWeights& lw = W.layers[size_t(l)];
    const model::MlaWeights& m = lw.attn;
    const std::string b = cat("blk.", l, ".");
    x.f32(b + "attn_norm.weight", {H}, lw.input_norm.host);
    x.mla_projections(b, m, c.q_lora_rank, c.kv_lora_rank, c.num_heads, c.qk_nope_head_dim, c.v_head_dim);
    x.matrix(b + "attn_output.weight", m.o);
    x.f32(b + "ffn_norm.weight", {H}, lw.post_norm.host);
    if (!c.is_moe(l)) {
      x.swiglu(b, lw.dense);
      continue;
    }
    const model::MoeWeights& e = lw.moe;
    x.matrix_f32(b + "ffn_gate_inp.weight", e.router);
    x.f32(b + "exp_probs_b.bias", {c.num_experts}, e.correction_bias.host);
    const std::vector<device::ExpertView> views = layer_experts(bank, ts, int(l));
    x.experts(b + "ffn_gate_exps.weight", views, store::ExpertSlot::Gate);
    x.experts(b + "ffn_up_exps.weight", views, store::ExpertSlot::Up);
    x.experts(b + "ffn_down_exps.weight", views, store::ExpertSlot::Down);
    x.swiglu(b, e.shared, "_shexp");
  }
  x.f32("output_norm.weight", {H}, W.final_norm.host);
  if (!c.tie_word_embeddings) x.matrix("output.weight", W.lm_head);  // tied: llama.cpp uses token_embd
  return write_file(w, arch, out, opt);
}

}  // namespace sluice::gguf
