// make-tiny's hook for the Kimi family: Kimi K3 (the root + text_config form, MXFP4 routed experts
// in compressed-tensors) and Kimi Linear (transformers' kimi_linear form).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/arch/kimi.h"
#include "model/tiny_checkpoint.h"

namespace sluice::model {

using nlohmann::json;

std::string tiny_config_json(const TinySpec& s) {
  std::vector<int64_t> kda_layers;
  for (int64_t l = 1; l <= s.layers; ++l)
    if (std::find(s.mla_layers.begin(), s.mla_layers.end(), l) == s.mla_layers.end()) kda_layers.push_back(l);
  const int64_t bos = s.vocab - 4, eos = s.vocab - 3, pad = s.vocab - 1;
  json j;
  if (s.arch == KimiArch::KimiK3) {
    json tc = {
        {"model_type", "kimi_linear"},
        {"dtype", "bfloat16"},
        {"vocab_size", s.vocab},
        {"hidden_size", s.hidden},
        {"num_hidden_layers", s.layers},
        {"max_position_embeddings", 1048576},
        {"rms_norm_eps", 1e-5},
        {"hidden_act", "situ"},
        {"activation_situ_beta", 4.0},
        {"activation_situ_linear_beta", 25.0},
        {"intermediate_size", s.dense_inter},
        {"first_k_dense_replace", s.dense_layers},
        {"moe_layer_freq", 1},
        {"num_experts", s.experts},
        {"num_experts_per_token", s.top_k},
        {"num_shared_experts", s.shared},
        {"moe_intermediate_size", s.moe_inter},
        {"routed_expert_hidden_size", s.latent},
        {"latent_moe_use_norm", true},
        {"moe_router_activation_func", "sigmoid"},
        {"topk_method", "noaux_tc"},
        {"moe_renormalize", true},
        {"routed_scaling_factor", s.routed_scaling},
        {"use_grouped_topk", true},
        {"num_expert_group", s.expert_groups},
        {"topk_group", s.topk_groups},
        {"num_attention_heads", s.heads},
        {"num_key_value_heads", s.heads},
        {"q_lora_rank", s.q_lora},
        {"kv_lora_rank", s.kv_lora},
        {"qk_nope_head_dim", s.nope},
        {"qk_rope_head_dim", s.rope},
        {"v_head_dim", s.v_dim},
        {"mla_use_nope", true},
        {"mla_use_output_gate", true},
        {"attn_res_block_size", s.block},
        {"num_nextn_predict_layers", 0},
        {"use_cache", true},
        {"tie_word_embeddings", false},
        {"bos_token_id", bos},
        {"eos_token_id", eos},
        {"pad_token_id", pad},
        {"linear_attn_config",
         {{"num_heads", s.kda_heads},
          {"head_dim", s.kda_head_dim},
          {"short_conv_kernel_size", s.conv_kernel},
          {"use_full_rank_gate", true},
          {"gate_lower_bound", -5.0},
          {"kda_layers", json(kda_layers)},
          {"full_attn_layers", json(s.mla_layers)}}},
        {"quantization_config",
         {{"format", "mxfp4-pack-quantized"},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"},
          {"config_groups",
           {{"group_0",
             {{"format", "mxfp4-pack-quantized"},
              {"targets", json::array({"Linear"})},
              {"weights",
               {{"group_size", 32},
                {"num_bits", 4},
                {"dynamic", false},
                {"symmetric", true},
                {"observer", "minmax"},
                {"scale_dtype", "torch.uint8"},
                {"strategy", "group"},
                {"type", "float"}}}}}}}}}};
    j = {{"model_type", "kimi_k3"},   {"architectures", json::array({"KimiK3ForConditionalGeneration"})},
         {"dtype", "bfloat16"},       {"tie_word_embeddings", false},
         {"bos_token_id", bos},       {"eos_token_id", eos},
         {"pad_token_id", pad},       {"text_config", tc}};
  } else {
    std::vector<std::string> layer_types, mlp_types;
    for (int64_t l = 1; l <= s.layers; ++l) {
      bool mla = std::find(s.mla_layers.begin(), s.mla_layers.end(), l) != s.mla_layers.end();
      layer_types.push_back(mla ? "full_attention" : "linear_attention");
      mlp_types.push_back(l <= s.dense_layers ? "dense" : "sparse");
    }
    j = {{"model_type", "kimi_linear"},
         {"architectures", json::array({"KimiLinearForCausalLM"})},
         {"dtype", "bfloat16"},
         {"vocab_size", s.vocab},
         {"hidden_size", s.hidden},
         {"num_hidden_layers", s.layers},
         {"rms_norm_eps", 1e-5},
         {"hidden_act", "silu"},
         {"intermediate_size", s.dense_inter},
         {"moe_intermediate_size", s.moe_inter},
         {"num_experts", s.experts},
         {"num_experts_per_token", s.top_k},
         {"num_shared_experts", s.shared},
         {"moe_renormalize", true},
         {"routed_scaling_factor", s.routed_scaling},
         {"num_expert_group", s.expert_groups},
         {"topk_group", s.topk_groups},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.heads},
         {"q_lora_rank", s.q_lora > 0 ? json(s.q_lora) : json(nullptr)},
         {"kv_lora_rank", s.kv_lora},
         {"qk_nope_head_dim", s.nope},
         {"qk_rope_head_dim", s.rope},
         {"v_head_dim", s.v_dim},
         {"linear_num_heads", s.kda_heads},
         {"linear_head_dim", s.kda_head_dim},
         {"linear_conv_kernel_dim", s.conv_kernel},
         {"layer_types", layer_types},
         {"mlp_layer_types", mlp_types},
         {"tie_word_embeddings", false},
         {"bos_token_id", bos},
         {"eos_token_id", eos},
         {"pad_token_id", pad}};
  }
  return j.dump(2) + "\n";
}

TinyConfig kimi_tiny(const TinyMoeSpec& m) {
  refuse_quantized_forms(m);
  const TinySpec s{.arch = m.arch == "kimi_k3" ? KimiArch::KimiK3 : KimiArch::KimiLinear,
                   .seed = m.seed, .vocab = m.vocab, .hidden = m.hidden, .layers = m.layers,
                   .mla_layers = m.mla_layers, .dense_layers = m.dense_layers, .kda_heads = m.kda_heads,
                   .kda_head_dim = m.kda_head_dim, .conv_kernel = m.conv_kernel, .heads = m.heads,
                   .q_lora = m.q_lora, .kv_lora = m.kv_lora, .nope = m.nope, .rope = m.rope, .v_dim = m.v_dim,
                   .dense_inter = m.dense_inter, .experts = m.experts, .top_k = m.top_k, .shared = m.shared,
                   .moe_inter = m.moe_inter, .latent = m.latent, .expert_groups = m.expert_groups,
                   .topk_groups = m.topk_groups, .block = m.block, .routed_scaling = m.routed_scaling,
                   .shards = m.shards};
  const std::string text = tiny_config_json(s);
  const KimiConfig c = parse_kimi_config(text, "make-tiny " + m.arch + " config");
  return {text, c.bos_token_id, c.eos_token_id};
}

}  // namespace sluice::model
