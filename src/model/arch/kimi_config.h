// The Kimi hybrid family's configuration (model_type kimi_k3 with its text_config, and
// kimi_linear as transformers or Moonshot write it), parsed from config.json and validated.
// The model is driven entirely by this: no layer index or size is hard-coded elsewhere.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sluice::model {

enum class KimiArch : uint8_t { KimiK3, KimiLinear };
enum class AttnKind : uint8_t { KDA, MLA };
enum class MlpKind : uint8_t { Dense, MoE };
enum class Activation : uint8_t { SiLU, SiTU };

struct KimiConfig {
  KimiArch arch = KimiArch::KimiLinear;
  std::string tensor_prefix;  // "language_model." for kimi_k3, "" for kimi_linear
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0;
  float rms_norm_eps = 1e-5f;
  Activation activation = Activation::SiLU;
  float situ_beta_gate = 4.0f, situ_beta_up = 25.0f;
  std::vector<AttnKind> attn;  // per layer
  std::vector<MlpKind> mlp;    // per layer
  int64_t intermediate_size = 0;  // dense MLP width

  // MoE
  int64_t num_experts = 0, experts_per_token = 0, num_shared_experts = 0, moe_intermediate_size = 0;
  int64_t routed_expert_hidden_size = 0;  // K3 latent MoE width; 0 = experts work on the full hidden size
  bool latent_moe_norm = false;
  bool renormalize = true;
  float routed_scaling_factor = 1.0f;
  int64_t num_expert_group = 1, topk_group = 1;
  bool experts_mxfp4 = false;

  // MLA
  int64_t num_heads = 0, q_lora_rank = 0 /* 0 = plain q_proj */, kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool mla_output_gate = false;
  float mla_norm_eps = 1e-6f;  // q_a_layernorm / kv_a_layernorm

  // KDA
  int64_t kda_heads = 0, kda_head_dim = 0, conv_kernel = 4;
  bool kda_full_rank_gate = false;        // K3: g_proj [P,H]; kimi_linear: g_a_proj/g_b_proj
  std::optional<float> gate_lower_bound;  // K3: lb·σ(...); none: -exp(A)·softplus(...)

  int64_t attn_res_block_size = 0;  // Block AttnRes block length; 0 = ordinary residuals
  int32_t bos_token_id = -1, eos_token_id = -1, pad_token_id = -1;

  int64_t kda_dim() const { return kda_heads * kda_head_dim; }
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t expert_input_size() const {
    return routed_expert_hidden_size > 0 ? routed_expert_hidden_size : hidden_size;
  }
  int64_t count_layers(AttnKind k) const;
};

// Reads `dir`/config.json. Throws sluice::Error naming the file and the field for an unknown
// model_type, a missing or mistyped field, a non-positive size, or inconsistent values.
KimiConfig load_kimi_config(const std::string& dir);

// Parses an already-read JSON text; `where` names its source in errors.
KimiConfig parse_kimi_config(const std::string& json_text, const std::string& where);

}  // namespace sluice::model
