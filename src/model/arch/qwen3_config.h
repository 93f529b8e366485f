// The Qwen3 family's configuration, parsed from config.json and validated: Qwen3 dense
// (model_type "qwen3", transformers' Qwen3ForCausalLM) and Qwen3-MoE ("qwen3_moe",
// Qwen3MoeForCausalLM: softmax router, norm_topk_prob, decoder_sparse_step and mlp_only_layers).
// Features sluice does not implement (attention biases, RoPE scalings other than YaRN, sliding
// windows, activations other than SiLU) are refused by name rather than silently ignored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/quantization.h"
#include "format/rope_params.h"

namespace sluice::model {

struct Qwen3Config {
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float rms_norm_eps = 1e-6f;
  format::RopeParams rope;
  bool tie_word_embeddings = false;
  // FP8 releases (Qwen3-*-FP8): every attention and MLP/expert projection is e4m3 with 128x128
  // block scales; embeddings, lm_head, the router and norms stay BF16.
  format::WeightQuant quant = format::WeightQuant::None;
  // Qwen3-MoE; num_experts 0 for dense Qwen3. sparse[l]: layer l's MLP is the routed experts.
  bool moe = false;
  int64_t num_experts = 0, experts_per_token = 0, moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  std::vector<bool> sparse;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;  // config.json may give one id or a list

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  bool is_eos(int32_t id) const;
};

// Parses an already-read config.json text; `where` names its source in errors. Throws
// sluice::Error naming the field for a model_type other than qwen3 or qwen3_moe, a missing, mistyped or
// non-positive size, inconsistent head counts, or an unsupported feature.
Qwen3Config parse_qwen3_config(const std::string& json_text, const std::string& where);

// Reads `dir`/config.json.
Qwen3Config load_qwen3_config(const std::string& dir);


}  // namespace sluice::model
