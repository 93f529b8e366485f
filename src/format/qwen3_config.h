// The Qwen3 dense architecture's configuration (model_type "qwen3", transformers'
// Qwen3ForCausalLM), parsed from config.json and validated. Features sluice does not implement
// (attention biases, RoPE scaling, sliding windows, activations other than SiLU) are refused by
// name rather than silently ignored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::format {

struct Qwen3Config {
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;  // config.json may give one id or a list

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  bool is_eos(int32_t id) const;
};

// Parses an already-read config.json text; `where` names its source in errors. Throws
// sluice::Error naming the field for a model_type other than qwen3, a missing, mistyped or
// non-positive size, inconsistent head counts, or an unsupported feature.
Qwen3Config parse_qwen3_config(const std::string& json_text, const std::string& where);

// Reads `dir`/config.json.
Qwen3Config load_qwen3_config(const std::string& dir);


}  // namespace sluice::format
