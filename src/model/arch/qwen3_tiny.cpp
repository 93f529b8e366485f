// make-tiny's hook for the Qwen3 family: Qwen3-MoE (qwen3_moe, BF16 per-expert tensors) and dense
// Qwen3 (qwen3), configs as transformers saves them.
#include <nlohmann/json.hpp>

#include "model/arch/qwen3.h"
#include "model/tiny_checkpoint.h"

namespace sluice::model {

using nlohmann::json;

std::string tiny_qwen3_config_json(const TinyQwen3Spec& s) {
  json j = {{"model_type", "qwen3"},
            {"architectures", json::array({"Qwen3ForCausalLM"})},
            {"dtype", "bfloat16"},
            {"vocab_size", s.vocab},
            {"hidden_size", s.hidden},
            {"intermediate_size", s.intermediate},
            {"num_hidden_layers", s.layers},
            {"num_attention_heads", s.heads},
            {"num_key_value_heads", s.kv_heads},
            {"head_dim", s.head_dim},
            {"hidden_act", "silu"},
            {"max_position_embeddings", 4096},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", s.rope_theta},
            {"rope_scaling", nullptr},
            {"attention_bias", false},
            {"use_sliding_window", false},
            {"tie_word_embeddings", s.tied},
            {"bos_token_id", s.bos >= 0 ? s.bos : s.vocab - 2},
            {"eos_token_id", s.eos >= 0 ? s.eos : s.vocab - 1}};
  return j.dump(2) + "\n";
}

TinyConfig qwen3_tiny(const TinyMoeSpec& s) {
  refuse_quantized_forms(s);
  if (s.arch == "qwen3") {
    const TinyQwen3Spec d{.seed = s.seed, .vocab = s.vocab, .hidden = s.hidden, .intermediate = s.dense_inter,
                          .layers = s.layers, .heads = s.heads, .kv_heads = s.kv_heads, .head_dim = s.head_dim,
                          .rope_theta = s.rope_theta};
    return {tiny_qwen3_config_json(d), d.vocab - 2, d.vocab - 1};
  }
  std::vector<int64_t> dense_only;
  for (int64_t l = 0; l < s.dense_layers; ++l) dense_only.push_back(l);
  json j = {{"model_type", "qwen3_moe"},
       {"architectures", json::array({"Qwen3MoeForCausalLM"})},
       {"vocab_size", s.vocab},
       {"hidden_size", s.hidden},
       {"intermediate_size", s.dense_inter},
       {"moe_intermediate_size", s.moe_inter},
       {"num_hidden_layers", s.layers},
       {"num_attention_heads", s.heads},
       {"num_key_value_heads", s.kv_heads},
       {"head_dim", s.head_dim},
       {"num_experts", s.experts},
       {"num_experts_per_tok", s.top_k},
       {"norm_topk_prob", s.norm_topk},
       {"decoder_sparse_step", s.sparse_step},
       {"mlp_only_layers", dense_only},
       {"rope_theta", s.rope_theta},
       {"max_position_embeddings", 4096}};
  return finish_tiny_config(j, s);
}

}  // namespace sluice::model
