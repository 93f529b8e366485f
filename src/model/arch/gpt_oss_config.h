// gpt-oss's configuration (model_type "gpt_oss", transformers' GptOssForCausalLM), parsed from
// config.json and validated: GQA with learned sinks and q/k/v/o biases, sliding-window and full
// layers (layer_types), YaRN RoPE, a top-k-then-softmax router with a bias, and MXFP4 experts as
// released (quantization_config.quant_method "mxfp4") with interleaved gate/up and the clamped
// SwiGLU. What sluice does not implement is refused by name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/rope_params.h"

namespace sluice::model {

struct GptOssConfig {
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t num_experts = 0, experts_per_token = 0, intermediate_size = 0;
  int64_t sliding_window = 0;
  std::vector<bool> sliding;  // per layer: a sliding-window layer (else full attention)
  bool attention_bias = true;
  float rms_norm_eps = 1e-5f;
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;
  format::RopeParams rope;
  bool tie_word_embeddings = false;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// Throws sluice::Error naming the field for a model_type other than gpt_oss, a missing, mistyped
// or non-positive size, inconsistent head counts, experts that are not MXFP4, or an unsupported
// feature.
GptOssConfig parse_gpt_oss_config(const std::string& json_text, const std::string& where);
GptOssConfig load_gpt_oss_config(const std::string& dir);

}  // namespace sluice::model
