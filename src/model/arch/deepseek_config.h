// DeepSeek-V3's configuration (model_type "deepseek_v3", transformers' DeepseekV3ForCausalLM) and
// Kimi-K2's ("kimi_k2": the same architecture with Moonshot's sizes and tokenizer), parsed from
// config.json and validated: MLA with RoPE on the rope part (interleaved pairs unless
// rope_interleave is false), YaRN with its softmax mscale, q_lora_rank present or absent, dense
// first layers, shared experts, the sigmoid router with correction bias and grouped top-k, and FP8
// block-quantized or BF16 weights, or Kimi-K2-Thinking's compressed-tensors INT4 routed experts (the
// rest BF16). What sluice does not implement is refused by name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/quantization.h"
#include "format/rope_params.h"

namespace sluice::model {

struct DeepSeekConfig {
  std::string model_type;  // "deepseek_v3" or "kimi_k2"
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t num_heads = 0, q_lora_rank = 0, kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int64_t first_k_dense_replace = 0;
  int64_t num_experts = 0, experts_per_token = 0, moe_intermediate_size = 0, num_shared_experts = 0;
  int64_t n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  float rms_norm_eps = 1e-6f;
  format::RopeParams rope;
  bool rope_interleave = true;
  bool tie_word_embeddings = false;
  format::WeightQuant quant = format::WeightQuant::None;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe(int64_t layer) const { return num_experts > 0 && layer >= first_k_dense_replace; }
  // The attention's softmax scale: qk_head_dim^-0.5, times yarn_get_mscale(factor, mscale_all_dim)²
  // under YaRN with mscale_all_dim (transformers' DeepseekV3Attention).
  double softmax_scale() const;
};

// Throws sluice::Error naming the field for a model_type other than deepseek_v3/kimi_k2, a missing,
// mistyped or non-positive size, inconsistent expert groups, or an unsupported feature.
DeepSeekConfig parse_deepseek_config(const std::string& json_text, const std::string& where);
DeepSeekConfig load_deepseek_config(const std::string& dir);

}  // namespace sluice::model
