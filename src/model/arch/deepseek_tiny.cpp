// make-tiny's hook for DeepSeek-V3 and Kimi-K2: BF16, FP8 e4m3 with 128x128 block scales (--fp8,
// as released), or routed experts in compressed-tensors pack-quantized INT4 (--int4, as
// Kimi-K2-Thinking is released).
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch/deepseek.h"
#include "model/tiny_checkpoint.h"

namespace sluice::model {

using nlohmann::json;

TinyConfig deepseek_tiny(const TinyMoeSpec& s) {
  if (s.fp8 && s.int4) fail("make-tiny: --fp8 and --int4 exclude each other");
  json j = {{"model_type", s.arch},
       {"architectures", json::array({"DeepseekV3ForCausalLM"})},
       {"vocab_size", s.vocab},
       {"hidden_size", s.hidden},
       {"intermediate_size", s.dense_inter},
       {"moe_intermediate_size", s.moe_inter},
       {"num_hidden_layers", s.layers},
       {"num_attention_heads", s.heads},
       {"num_key_value_heads", s.heads},
       {"q_lora_rank", s.q_lora > 0 ? json(s.q_lora) : json(nullptr)},
       {"kv_lora_rank", s.kv_lora},
       {"qk_nope_head_dim", s.nope},
       {"qk_rope_head_dim", s.rope},
       {"v_head_dim", s.v_dim},
       {"first_k_dense_replace", s.dense_layers},
       {"moe_layer_freq", 1},
       {"n_routed_experts", s.experts},
       {"num_experts_per_tok", s.top_k},
       {"n_shared_experts", s.shared},
       {"n_group", s.expert_groups},
       {"topk_group", s.topk_groups},
       {"norm_topk_prob", s.norm_topk},
       {"routed_scaling_factor", s.routed_scaling},
       {"topk_method", "noaux_tc"},
       {"scoring_func", "sigmoid"},
       {"rms_norm_eps", 1e-6},
       {"rope_theta", s.rope_theta},
       {"rope_scaling",
        {{"type", "yarn"}, {"factor", 40.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"mscale", 1.0},
         {"mscale_all_dim", 1.0}, {"original_max_position_embeddings", 4096}}},
       {"max_position_embeddings", 163840},
       {"num_nextn_predict_layers", 0}};
  if (s.fp8)
    j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                {"weight_block_size", json::array({128, 128})}};
  if (s.int4)  // Kimi-K2-Thinking's quantization_config
    j["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "pack-quantized"},
        {"quantization_status", "compressed"},
        {"config_groups",
         {{"group_0",
           {{"targets", json::array({"Linear"})},
            {"input_activations", nullptr},
            {"output_activations", nullptr},
            {"weights",
             {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"}, {"group_size", 32},
              {"dynamic", false}, {"actorder", nullptr}, {"block_structure", nullptr}, {"observer", "minmax"},
              {"observer_kwargs", json::object()}}}}}}},
        {"ignore", json::array({"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                                "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"})},
        {"kv_cache_scheme", nullptr}};
  return finish_tiny_config(j, s);
}

}  // namespace sluice::model
