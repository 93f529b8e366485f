// make-tiny's hook for gpt-oss: MXFP4 experts fused per layer, as released.
#include <nlohmann/json.hpp>

#include "model/arch/gpt_oss.h"
#include "model/tiny_checkpoint.h"

namespace sluice::model {

using nlohmann::json;

TinyConfig gpt_oss_tiny(const TinyMoeSpec& s) {
  refuse_quantized_forms(s);
  std::vector<std::string> types;
  for (int64_t l = 0; l < s.layers; ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  json j = {{"model_type", "gpt_oss"},
       {"architectures", json::array({"GptOssForCausalLM"})},
       {"vocab_size", s.vocab},
       {"hidden_size", s.hidden},
       {"intermediate_size", s.moe_inter},
       {"num_hidden_layers", s.layers},
       {"num_attention_heads", s.heads},
       {"num_key_value_heads", s.kv_heads},
       {"head_dim", s.head_dim},
       {"num_local_experts", s.experts},
       {"num_experts_per_tok", s.top_k},
       {"experts_per_token", s.top_k},
       {"sliding_window", s.window},
       {"layer_types", types},
       {"attention_bias", true},
       {"swiglu_limit", 7.0},
       {"rms_norm_eps", 1e-5},
       {"rope_theta", s.rope_theta},
       {"rope_scaling",
        {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"truncate", false},
         {"original_max_position_embeddings", 4096}}},
       {"max_position_embeddings", 131072},
       {"quantization_config",
        {{"modules_to_not_convert",
          json::array({"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"})},
         {"quant_method", "mxfp4"}}}};
  return finish_tiny_config(j, s);
}

}  // namespace sluice::model
